//! Side-by-side benchmarks: the connector and the raw client in the same run, alternating who
//! goes first each round (so neither always meets a warmer or busier server), with the median
//! ratio printed at the end — one figure that survives a noisy two-core machine.

/// Rounds to run: `RIVUS_BENCH_ROUNDS`, default `default`.
pub fn rounds(default: usize) -> usize {
    std::env::var("RIVUS_BENCH_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|n| *n > 0)
        .unwrap_or(default)
}

/// Whether a comparison labelled `label` runs (`RIVUS_BENCH_FILTER` unset or contained in it).
pub fn selected(label: &str) -> bool {
    std::env::var("RIVUS_BENCH_FILTER").map_or(true, |f| label.contains(&f))
}

/// Whether the raw side of a selected comparison runs (not under `RIVUS_BENCH_ONLY=rivus`).
/// A bench whose later comparison reads what an earlier raw side wrote fills it itself when
/// this is false or the earlier comparison is not [`selected`].
pub fn runs_raw() -> bool {
    std::env::var("RIVUS_BENCH_ONLY").map_or(true, |s| s != "rivus")
}

/// Whether the rivus side of a selected comparison runs (not under `RIVUS_BENCH_ONLY=raw`).
pub fn runs_rivus() -> bool {
    std::env::var("RIVUS_BENCH_ONLY").map_or(true, |s| s != "raw")
}

/// The figures of one comparison.
#[derive(Debug, Clone, PartialEq)]
pub struct Comparison {
    /// (raw, rivus) throughput per round.
    pub rounds: Vec<(f64, f64)>,
}

impl Comparison {
    /// rivus / raw per round, sorted.
    pub fn ratios(&self) -> Vec<f64> {
        let mut r: Vec<f64> = self.rounds.iter().map(|(raw, us)| us / raw).collect();
        r.sort_by(f64::total_cmp);
        r
    }

    /// The median ratio.
    pub fn median(&self) -> f64 {
        let r = self.ratios();
        if r.is_empty() {
            return f64::NAN;
        }
        r[r.len() / 2]
    }
}

/// Runs `raw` and `rivus` (each returns its throughput in `unit`) `rounds` times, alternating
/// the order, printing a row per round and then the median ratio under `label`. With
/// `RIVUS_BENCH_FILTER` set, comparisons whose label does not contain it are skipped (no
/// rounds, an empty result). With `RIVUS_BENCH_ONLY=raw` or `rivus` only that side runs (to
/// profile it alone); the ratios are then NaN.
pub fn compare(
    label: &str,
    unit: &str,
    rounds: usize,
    mut raw: impl FnMut(usize) -> f64,
    mut rivus: impl FnMut(usize) -> f64,
) -> Comparison {
    if !selected(label) {
        return Comparison { rounds: Vec::new() };
    }
    println!("{label}");
    println!(
        "{:<6} {:>14} {:>14} {:>7}",
        "round",
        format!("raw {unit}"),
        format!("rivus {unit}"),
        "ratio"
    );
    let mut out = Vec::new();
    let only = std::env::var("RIVUS_BENCH_ONLY").ok();
    for round in 0..rounds {
        // One side alone, for a profiler: the other side's figure is NaN.
        let (r, s) = if let Some(side) = only.as_deref() {
            match side {
                "raw" => (raw(round), f64::NAN),
                "rivus" => (f64::NAN, rivus(round)),
                other => panic!("RIVUS_BENCH_ONLY is `raw` or `rivus`, not `{other}`"),
            }
        } else if round % 2 == 0 {
            let r = raw(round);
            (r, rivus(round))
        } else {
            let s = rivus(round);
            (raw(round), s)
        };
        println!("{:<6} {:>14.0} {:>14.0} {:>7.2}", round, r, s, s / r);
        out.push((r, s));
    }
    let c = Comparison { rounds: out };
    let ratios = c.ratios();
    println!(
        "{label}: median ratio {:.2} (min {:.2}, max {:.2}, {rounds} rounds)",
        c.median(),
        ratios.first().copied().unwrap_or(f64::NAN),
        ratios.last().copied().unwrap_or(f64::NAN)
    );
    c
}

/// The peak resident set of this process so far, in MiB (`VmHWM` of `/proc/self/status`;
/// `None` where there is no such file).
pub fn peak_rss_mib() -> Option<f64> {
    rss_mib("self").map(|(_, peak)| peak)
}

/// The CPU time (user and system) of this process so far, in seconds (`utime` and `stime`
/// of `/proc/self/stat`, in clock ticks of 1/100 s; `None` where there is no such file).
pub fn cpu_seconds() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // pid (comm) state ...: comm may hold spaces; utime and stime are fields 14 and 15.
    let rest = stat.rsplit_once(')')?.1;
    let mut fields = rest.split_whitespace().skip(11);
    let utime: f64 = fields.next()?.parse().ok()?;
    let stime: f64 = fields.next()?.parse().ok()?;
    Some((utime + stime) / 100.0)
}

/// The current and the peak resident set of process `pid` (a number, or `self`), in MiB
/// (`VmRSS` and `VmHWM` of `/proc/<pid>/status`; `None` where there is no such file).
pub fn rss_mib(pid: &str) -> Option<(f64, f64)> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let field = |name: &str| -> Option<f64> {
        let kb: f64 = status
            .lines()
            .find_map(|l| l.strip_prefix(name))?
            .trim()
            .trim_end_matches("kB")
            .trim()
            .parse()
            .ok()?;
        Some(kb / 1024.0)
    };
    Some((field("VmRSS:")?, field("VmHWM:")?))
}

/// The case this process runs when a bench started it with [`run_child`] (`RIVUS_BENCH_CHILD`).
pub fn child_case() -> Option<String> {
    std::env::var("RIVUS_BENCH_CHILD").ok()
}

/// Runs this bench binary again, as a child process running `case` (see [`child_case`]) with
/// `env` added, and returns the last line it printed — for figures that belong to a process,
/// such as the peak RSS of one configuration. Panics with the child's output if it fails.
pub fn run_child(case: &str, env: &[(&str, &str)]) -> String {
    let exe = std::env::current_exe().expect("the bench binary");
    let out = std::process::Command::new(exe)
        .env("RIVUS_BENCH_CHILD", case)
        .envs(env.iter().copied())
        .output()
        .expect("the bench runs itself as a child");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "child `{case}` failed: {stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout.lines().last().unwrap_or_default().to_owned()
}

/// The benchmarks' record: an order of about 100 bytes as JSON — `id` = `n`, `user` (one of
/// 1 000), `amount`, `status` (`new`, `paid`, `shipped`), `ts` (ms) — the same for every
/// benchmark that compares sinks over one record shape.
pub fn order(n: u64) -> serde_json::Value {
    const STATUS: [&str; 3] = ["new", "paid", "shipped"];
    serde_json::json!({
        "id": n,
        "user": format!("user-{}", n % 1000),
        "amount": ((n.wrapping_mul(7919)) % 100_000) as f64 / 100.0,
        "status": STATUS[(n % 3) as usize],
        "ts": 1_700_000_000_000u64 + n,
    })
}

/// The values of the histogram `name` recorded since the last call (a snapshot drains them),
/// times `scale` (`1e3`: seconds as milliseconds), sorted.
pub fn histogram(
    snapshotter: &metrics_util::debugging::Snapshotter,
    name: &str,
    scale: f64,
) -> Vec<f64> {
    use metrics_util::debugging::DebugValue;
    let mut values: Vec<f64> = snapshotter
        .snapshot()
        .into_vec()
        .into_iter()
        .filter(|(key, ..)| key.key().name() == name)
        .flat_map(|(.., v)| match v {
            DebugValue::Histogram(h) => h.into_iter().map(|s| s.into_inner() * scale).collect(),
            _ => Vec::new(),
        })
        .collect();
    values.sort_by(f64::total_cmp);
    values
}

/// `median …, p90 …, max …` of sorted `values`, each followed by `unit`.
pub fn quantiles(values: &[f64], unit: &str) -> String {
    if values.is_empty() {
        return "no values".into();
    }
    let at = |q: f64| values[((values.len() - 1) as f64 * q).round() as usize];
    format!(
        "median {:.1} {unit}, p90 {:.1} {unit}, max {:.1} {unit}",
        at(0.5),
        at(0.9),
        at(1.0)
    )
}

/// The dev S3 store's endpoint for a benchmark (see [`require`](crate::services::require)).
pub fn s3_endpoint() -> String {
    crate::services::require(crate::services::Service::S3)
        .expect("the dev S3 store: `dev/services up s3`")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn alternates_and_takes_the_median() {
        let mut order = Vec::new();
        let order_ref = std::cell::RefCell::new(&mut order);
        let c = compare(
            "t",
            "x/s",
            3,
            |r| {
                order_ref.borrow_mut().push(format!("raw{r}"));
                100.0
            },
            |r| {
                order_ref.borrow_mut().push(format!("us{r}"));
                [90.0, 200.0, 95.0][r]
            },
        );
        assert_eq!(order, ["raw0", "us0", "us1", "raw1", "raw2", "us2"]);
        assert!((c.median() - 0.95).abs() < 1e-9);
    }
}
