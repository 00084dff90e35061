//! `rivus check`: connects to every endpoint of a pipeline file (the checkpoint store too) and
//! reports reachability and authentication, one line each, without writing or reading
//! records. Each section does its own healthcheck; this file only asks them in turn.

use rivus_pipeline_file::Health;

use rivus_sdk::error_policy::ErrorPolicy;

use crate::config::PipelineConfig;

/// One endpoint's result: `rivus check`'s line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reach {
    /// What it is in the file: `source`, `sinks.lake`, `dead letters`, `checkpoint store`.
    pub role: String,
    /// Its `type`.
    pub kind: &'static str,
    /// What was reached (a URL without its password, a broker list).
    pub address: String,
    /// What it said, or why it could not be reached.
    pub outcome: Result<String, String>,
}

impl Reach {
    fn of(role: &str, h: Health) -> Self {
        Reach {
            role: role.to_owned(),
            kind: h.kind,
            address: h.address,
            outcome: h.outcome,
        }
    }
}

/// The checkpoint store: readable, and the newest checkpoint of the job in it.
async fn checkpoint_store(config: &PipelineConfig) -> Option<Health> {
    use rivus_sdk::checkpoint::StateBackend;
    let cp = config.checkpoint.as_ref()?;
    let newest = |r: rivus_sdk::Result<Option<rivus_sdk::checkpoint::CompletedCheckpoint>>| {
        r.map(|c| match c {
            Some(c) => format!("newest checkpoint {}", c.checkpoint_id),
            None => "no checkpoint of this job yet".to_owned(),
        })
        .map_err(|e| e.to_string())
    };
    Some(match (&cp.store, &cp.dir) {
        (Some(url), _) => {
            let backend = crate::store::s3(url, 3, None, cp.on_damaged.into());
            let outcome = match backend {
                Ok(b) => newest(b.latest(&config.name).await),
                Err(e) => Err(e.to_string()),
            };
            Health::new("s3", url.clone(), outcome)
        }
        (None, Some(dir)) => {
            let outcome = if !std::path::Path::new(dir).exists() {
                Ok("not there yet: the first run makes it".to_owned())
            } else {
                match rivus_sdk::checkpoint::FsStateBackend::new(dir, 3)
                    .map(|b| b.on_damaged(cp.on_damaged.into()))
                {
                    Ok(b) => newest(b.latest(&config.name).await),
                    Err(e) => Err(e.to_string()),
                }
            };
            Health::new("directory", dir.clone(), outcome)
        }
        (None, None) => return None,
    })
}

/// Checks every source and sink, the dead-letter destination and the checkpoint store of
/// `config`.
pub(crate) async fn check(config: &PipelineConfig) -> Vec<Reach> {
    let ctx = config.context(ErrorPolicy::Fail, true);
    let mut out = Vec::new();
    for s in &config.graph.sources {
        out.push(Reach::of(
            &s.section.path,
            s.section.options.check(&ctx).await,
        ));
    }
    for s in &config.graph.sinks {
        out.push(Reach::of(
            &s.section.path,
            s.section.options.check(&ctx).await,
        ));
    }
    if let Some(d) = &config.errors.destination {
        out.push(Reach::of("dead letters", d.options.check(&ctx).await));
    }
    if let Some(h) = checkpoint_store(config).await {
        out.push(Reach::of("checkpoints", h));
    }
    out
}
