//! `rivus run`: builds the job from the file, runs it under a supervisor (restarts from the
//! newest checkpoint), with the status line, the metrics endpoint and the dashboard, and ends
//! with the summary and the sections' reports.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use metrics_exporter_prometheus::PrometheusHandle;
use rivus_engine::{Counts, Pipeline, Registry};

use crate::console::{load, out};
use crate::{http, status};

/// `rivus run`'s options.
#[derive(clap::Args)]
pub(crate) struct RunOptions {
    /// The pipeline file.
    file: PathBuf,
    /// Serve Prometheus metrics on this address (e.g. 127.0.0.1:9898).
    #[arg(long)]
    metrics_addr: Option<std::net::SocketAddr>,
    /// How often the status is shown: default 500ms on a terminal, 10s in logs.
    #[arg(long, value_parser = parse_interval)]
    status_interval: Option<std::time::Duration>,
    /// Run as worker ID of the job: processes started with the same file and distinct
    /// ids share the work through the brokers' group protocols; each keeps its
    /// checkpoints under `<dir or store>/<ID>`.
    #[arg(long, value_name = "ID")]
    worker: Option<String>,
    /// Serve the dashboard and the status API on this address (e.g. 127.0.0.1:8080);
    /// a non-loopback address needs --http-token.
    #[arg(long, value_name = "ADDR")]
    http: Option<std::net::SocketAddr>,
    /// The token the dashboard and the API ask for (also needed by POST /api/stop).
    #[arg(
        long,
        env = "RIVUS_HTTP_TOKEN",
        hide_env_values = true,
        value_name = "TOKEN"
    )]
    http_token: Option<String>,
}

fn parse_interval(s: &str) -> Result<std::time::Duration, String> {
    rivus_engine::parse_duration(s)
        .ok_or_else(|| format!("`{s}` is not a duration (500ms, 2s, 1m)"))
}

/// Installs the Prometheus recorder when metrics are served (`--metrics-addr`, `--http`);
/// returns what renders them.
fn install_metrics(
    metrics_addr: Option<std::net::SocketAddr>,
    http: bool,
) -> Result<Option<PrometheusHandle>, String> {
    use metrics_exporter_prometheus::PrometheusBuilder;
    let handle = match metrics_addr {
        Some(addr) => {
            let (recorder, exporter) = PrometheusBuilder::new()
                .with_http_listener(addr)
                .build()
                .map_err(|e| format!("--metrics-addr {addr}: {e}"))?;
            let handle = recorder.handle();
            metrics::set_global_recorder(recorder).map_err(|e| format!("metrics: {e}"))?;
            tokio::spawn(exporter);
            handle
        }
        None if http => {
            let recorder = PrometheusBuilder::new().build_recorder();
            let handle = recorder.handle();
            metrics::set_global_recorder(recorder).map_err(|e| format!("metrics: {e}"))?;
            handle
        }
        None => return Ok(None),
    };
    // Summaries age out of the recorder unless it is asked to tidy up now and then.
    let upkeep = handle.clone();
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(std::time::Duration::from_secs(5));
        loop {
            tick.tick().await;
            upkeep.run_upkeep();
        }
    });
    Ok(Some(handle))
}

/// What the dashboard watches of the supervised job.
struct Watched {
    history: Arc<rivus_sdk::CheckpointHistory>,
    restarts: tokio::sync::watch::Receiver<rivus_sdk::RestartStatus>,
    stalls: tokio::sync::watch::Receiver<Option<rivus_sdk::Stall>>,
    handle: rivus_sdk::JobHandle,
}

/// The dashboard while it runs: the snapshot, the server and the sampler.
struct Dashboard {
    snapshot: Arc<http::Snapshot>,
    server: tokio::task::JoinHandle<()>,
    sampler: tokio::task::JoinHandle<()>,
}

impl Dashboard {
    /// Serves the dashboard of `pipeline` on `addr` for `supervisor`'s job.
    async fn start(
        pipeline: &Pipeline,
        (addr, token): (std::net::SocketAddr, Option<http::Token>),
        prometheus: PrometheusHandle,
        guarantee: &str,
        counts: &Arc<Counts>,
        job: Watched,
    ) -> Result<Self, String> {
        let snapshot = Arc::new(
            http::Snapshot::new(
                pipeline.name().to_owned(),
                pipeline.worker().map(str::to_owned),
                guarantee,
                pipeline.graph_json(),
                Arc::clone(counts),
                Box::new(move || prometheus.render()),
                job.history,
                job.restarts,
                job.stalls,
            )
            .with_lag_metrics(pipeline.lag_metrics())
            .with_sinks(pipeline.sink_names(), pipeline.parallelism()),
        );
        let server = http::serve(addr, token, Arc::clone(&snapshot), job.handle).await?;
        let sampler = tokio::spawn(Arc::clone(&snapshot).sample_forever());
        Ok(Dashboard {
            snapshot,
            server,
            sampler,
        })
    }

    /// Takes the last sample and records how the job ended.
    fn end(self, result: &rivus_sdk::Result<rivus_sdk::JobSummary>) {
        self.sampler.abort();
        self.snapshot.sample();
        match result {
            Ok(_) => self.snapshot.ended(http::JobState::Finished, None),
            Err(e) => self
                .snapshot
                .ended(http::JobState::Failed, Some(e.to_string())),
        }
        self.server.abort();
    }
}

/// The end-to-end guarantee as the summary and the dashboard say it; with sinks of different
/// guarantees, each sink's too (`at-least-once (lake exactly-once, search at-least-once)`).
fn guarantee_name(job: &rivus_sdk::Job) -> String {
    let name = |g: rivus_sdk::DeliveryGuarantee| match g {
        rivus_sdk::DeliveryGuarantee::ExactlyOnce => "exactly-once",
        rivus_sdk::DeliveryGuarantee::AtLeastOnce => "at-least-once",
        _ => "at-most-once (no checkpoints)",
    };
    let sinks = job.sink_guarantees();
    let whole = name(job.delivery_guarantee());
    if sinks.iter().all(|(_, g)| *g == job.delivery_guarantee()) {
        return whole.to_owned();
    }
    let each: Vec<String> = sinks
        .iter()
        .map(|(sink, g)| format!("{sink} {}", name(*g)))
        .collect();
    format!("{whole} ({})", each.join(", "))
}

/// What `run` checks before it builds anything.
struct Setup {
    pipeline: Pipeline,
    http: Option<(std::net::SocketAddr, Option<http::Token>)>,
    prometheus: Option<PrometheusHandle>,
}

/// The file read, `--http` and its token checked, the metrics recorder installed; a refusal
/// is said on stderr and ends the run with exit code 2.
fn setup(o: &RunOptions, registry: &Registry) -> Result<Setup, ExitCode> {
    let refuse = |e: String| {
        eprintln!("{e}");
        ExitCode::from(2)
    };
    let pipeline = load(&o.file, registry)?.with_worker(o.worker.clone());
    let http = o
        .http
        .map(|addr| http::check(addr, o.http_token.clone()).map(|t| (addr, t)))
        .transpose()
        .map_err(refuse)?;
    let prometheus = install_metrics(o.metrics_addr, http.is_some()).map_err(refuse)?;
    Ok(Setup {
        pipeline,
        http,
        prometheus,
    })
}

/// The summary and the sections' reports after the job, or why it failed; the exit code.
async fn conclude(
    pipeline: &Pipeline,
    counts: &Arc<Counts>,
    guarantee: &str,
    result: rivus_sdk::Result<rivus_sdk::JobSummary>,
) -> ExitCode {
    match result {
        Ok(summary) => {
            let mut text = status::summary(pipeline.name(), &summary, counts, guarantee);
            text.push_str(&pipeline.reports().await);
            out(&text);
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("{}: the job failed: {e}", pipeline.name());
            // What no restart fixes (configuration, credentials, an owned store): 2.
            ExitCode::from(if e.is_setup() { 2 } else { 1 })
        }
    }
}

/// How long a cancelled job may take to end before the process ends without it.
const HARD_STOP: std::time::Duration = std::time::Duration::from_secs(3);

/// After the second signal: ends the process (code 130) unless the job ended within
/// [`HARD_STOP`], naming the calls that did not return.
fn exit_soon(name: String, activities: Arc<rivus_sdk::activity::Activities>) {
    std::thread::spawn(move || {
        std::thread::sleep(HARD_STOP);
        let waits: Vec<String> = activities.waits().iter().map(ToString::to_string).collect();
        status::clear();
        eprintln!(
            "{name}: stopped at once; {} still waiting{}",
            if waits.is_empty() { "no task" } else { "tasks" },
            if waits.is_empty() {
                String::new()
            } else {
                format!(": {}", waits.join("; "))
            }
        );
        std::process::exit(130);
    });
}

/// `rivus run FILE`.
pub(crate) async fn run(o: RunOptions, registry: &Registry) -> ExitCode {
    let Setup {
        pipeline,
        http,
        prometheus,
    } = match setup(&o, registry) {
        Ok(s) => s,
        Err(code) => return code,
    };
    // The first attempt's job is built here (bad configuration ends the run before it
    // starts); each restart builds the job anew, counting into the same totals.
    let built = match pipeline.build().await {
        Ok(b) => b,
        Err(e) => {
            eprintln!("{}: {e}", o.file.display());
            return ExitCode::from(2);
        }
    };
    let guarantee = guarantee_name(&built.job);
    let (counts, total) = (Arc::clone(&built.counts), built.total);
    let supervisor = pipeline
        .supervise(built)
        .await
        .expect("the first attempt's job is already built");
    {
        // A second signal cancels the job; should a task still wait in a call its client
        // cannot interrupt, the process ends a few seconds later all the same.
        let (name, activities) = (pipeline.name().to_owned(), supervisor.activities());
        supervisor
            .handle()
            .stop_on_signals_then(move || exit_soon(name, activities));
    }
    let dashboard = match (http, prometheus) {
        (Some(h), Some(p)) => {
            let job = Watched {
                history: supervisor.checkpoint_history(),
                restarts: supervisor.restarts(),
                stalls: supervisor.stalls(),
                handle: supervisor.handle(),
            };
            match Dashboard::start(&pipeline, h, p, &guarantee, &counts, job).await {
                Ok(d) => Some(d),
                Err(e) => {
                    eprintln!("{e}");
                    return ExitCode::from(2);
                }
            }
        }
        _ => None,
    };
    let reporter = tokio::spawn(status::report(
        pipeline.name().to_owned(),
        Arc::clone(&counts),
        total,
        supervisor.completed_checkpoints(),
        supervisor.restarts(),
        supervisor.stalls(),
        o.status_interval,
    ));
    let result = supervisor.run().await;
    reporter.abort();
    if let Some(d) = dashboard {
        d.end(&result);
    }
    status::clear();
    conclude(&pipeline, &counts, &guarantee, result).await
}
