//! Freezing a service's processes (SIGSTOP) for the stall and freeze benches, thawed again
//! when dropped — also when a case panics.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The server's processes: the pid `dev/services` recorded and all its descendants.
pub(crate) fn server_pids(service: &str) -> Vec<u32> {
    let dir = std::env::var("RIVUS_SERVICES_DIR").map_or_else(
        |_| Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/services"),
        PathBuf::from,
    );
    let file = dir.join(service).join("pid");
    let root: u32 = std::fs::read_to_string(&file)
        .unwrap_or_else(|e| panic!("{}: {e} (dev/services up {service})", file.display()))
        .trim()
        .parse()
        .expect("a pid");
    let mut parents: Vec<(u32, u32)> = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(e.path().join("stat")) else {
            continue;
        };
        // pid (comm) state ppid ...: comm may hold spaces, so split after the last ')'.
        if let Some(ppid) = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(1))
            .and_then(|p| p.parse().ok())
        {
            parents.push((pid, ppid));
        }
    }
    let mut out = vec![root];
    let mut i = 0;
    while i < out.len() {
        let p = out[i];
        out.extend(parents.iter().filter(|(_, pp)| *pp == p).map(|(c, _)| *c));
        i += 1;
    }
    out
}

pub(crate) fn signal(pids: &[u32], sig: &str) {
    let args: Vec<String> = std::iter::once(format!("-{sig}"))
        .chain(pids.iter().map(u32::to_string))
        .collect();
    let _ = Command::new("kill").args(&args).status();
}

/// Frozen processes, thawed when dropped (also when a case panics).
pub(crate) struct Frozen(Vec<u32>);

impl Frozen {
    pub(crate) fn new(pids: Vec<u32>) -> Self {
        signal(&pids, "STOP");
        Frozen(pids)
    }
}

impl Drop for Frozen {
    fn drop(&mut self) {
        signal(&self.0, "CONT");
    }
}
