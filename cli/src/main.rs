//! `rivus`: runs declarative pipelines between the rivus connectors.
//!
//! ```text
//! rivus run pipeline.toml        run it (Ctrl-C: drain and checkpoint; twice: stop now)
//! rivus validate pipeline.toml   check the file without running it
//! rivus check pipeline.toml      connect to every endpoint
//! rivus connectors               what a file can name
//! ```

mod build;
mod catalog;
mod check;
mod config;
mod counted;
mod generator;
mod http;
mod replay;
mod sinks;
mod sources;
mod status;
mod transform;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};

use config::{PipelineConfig, SinkConfig};

#[derive(Parser)]
#[command(name = "rivus", version, about = "Run declarative stream pipelines")]
struct Cli {
    /// Log format on stderr.
    #[arg(long, value_enum, default_value = "text", global = true)]
    log_format: LogFormat,
    #[command(subcommand)]
    command: Command,
}

#[derive(Clone, Copy, ValueEnum)]
enum LogFormat {
    Text,
    Json,
}

#[derive(Subcommand)]
enum Command {
    /// Run a pipeline file.
    Run(RunOptions),
    /// Check a pipeline file without running it.
    Validate { file: PathBuf },
    /// Connect to every endpoint of a pipeline file.
    Check { file: PathBuf },
    /// List the connectors and transforms a pipeline file can use.
    Connectors,
}

fn init_logs(format: LogFormat) {
    use std::io::IsTerminal;
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn,rivus::status=info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::stderr().is_terminal())
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Text => builder.init(),
        LogFormat::Json => builder.json().init(),
    }
}

fn load(file: &std::path::Path) -> Result<PipelineConfig, ExitCode> {
    config::load(file).map_err(|e| {
        eprintln!("invalid pipeline: {e}");
        ExitCode::from(2)
    })
}

/// `rivus run`'s options.
#[derive(clap::Args)]
struct RunOptions {
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

/// Installs the Prometheus recorder when metrics are served (`--metrics-addr`, `--http`);
/// returns what renders them.
fn install_metrics(
    metrics_addr: Option<std::net::SocketAddr>,
    http: bool,
) -> Result<Option<metrics_exporter_prometheus::PrometheusHandle>, String> {
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

async fn run(o: RunOptions) -> ExitCode {
    let RunOptions {
        file,
        metrics_addr,
        status_interval,
        worker,
        http,
        http_token,
    } = o;
    let mut config = match load(&file) {
        Ok(c) => c,
        Err(code) => return code,
    };
    config.worker = worker;
    let http = match http.map(|addr| http::check(addr, http_token).map(|t| (addr, t))) {
        None => None,
        Some(Ok(h)) => Some(h),
        Some(Err(e)) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    let prometheus = match install_metrics(metrics_addr, http.is_some()) {
        Ok(h) => h,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    let built = match build::build(&config, false).await {
        Ok(b) => b,
        Err(e) => {
            eprintln!("{}: {e}", file.display());
            return ExitCode::from(2);
        }
    };
    let guarantee = match built.job.delivery_guarantee() {
        rivus_core::DeliveryGuarantee::ExactlyOnce => "exactly-once",
        rivus_core::DeliveryGuarantee::AtLeastOnce => "at-least-once",
        _ => "at-most-once (no checkpoints)",
    };
    // The first attempt's job is built above (bad configuration ends the run before it
    // starts); each restart builds the job anew, counting into the same totals.
    let counts = std::sync::Arc::clone(&built.counts);
    let mut first = Some(built.job);
    let supervisor = rivus_core::Supervisor::new(|| {
        let job = first.take();
        let (config, counts) = (&config, std::sync::Arc::clone(&counts));
        async move {
            match job {
                Some(job) => Ok(job),
                None => build::build_counting(config, false, counts)
                    .await
                    .map(|b| b.job),
            }
        }
    })
    .await
    .expect("the first attempt's job is already built");
    supervisor.handle().stop_on_signals();
    let dashboard = match (http, prometheus) {
        (Some((addr, token)), Some(prometheus)) => {
            let snapshot = std::sync::Arc::new(http::Snapshot::new(
                config.name.clone(),
                config.worker.clone(),
                guarantee,
                http::graph(&file, config.parallelism),
                std::sync::Arc::clone(&built.counts),
                Box::new(move || prometheus.render()),
                supervisor.checkpoint_history(),
                supervisor.restarts(),
            ));
            match http::serve(
                addr,
                token,
                std::sync::Arc::clone(&snapshot),
                supervisor.handle(),
            )
            .await
            {
                Ok(server) => {
                    let sampler = tokio::spawn(std::sync::Arc::clone(&snapshot).sample_forever());
                    Some((snapshot, server, sampler))
                }
                Err(e) => {
                    eprintln!("{e}");
                    return ExitCode::from(2);
                }
            }
        }
        _ => None,
    };
    let reporter = tokio::spawn(status::report(
        config.name.clone(),
        std::sync::Arc::clone(&built.counts),
        built.total,
        supervisor.completed_checkpoints(),
        supervisor.restarts(),
        status_interval,
    ));
    let result = supervisor.run().await;
    reporter.abort();
    if let Some((snapshot, server, sampler)) = dashboard {
        sampler.abort();
        snapshot.sample();
        match &result {
            Ok(_) => snapshot.ended(http::JobState::Finished, None),
            Err(e) => snapshot.ended(http::JobState::Failed, Some(e.to_string())),
        }
        server.abort();
    }
    status::clear();
    match result {
        Ok(summary) => {
            let mut text = status::summary(&config.name, &summary, &built.counts, guarantee);
            if let SinkConfig::Jdbc(sink) = &config.sink {
                let table = &sink.table;
                match sink.table_report(3).await {
                    Ok((n, rows)) => {
                        text.push_str(&format!(
                            "  table `{table}` now holds {n} rows; the first:\n"
                        ));
                        for r in rows {
                            text.push_str(&format!("    {r}\n"));
                        }
                    }
                    Err(e) => {
                        text.push_str(&format!("  (could not read table `{table}` back: {e})\n"))
                    }
                }
            }
            out(&text);
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("{}: the job failed: {e}", config.name);
            // What no restart fixes (configuration, credentials, an owned store): 2.
            ExitCode::from(if e.is_setup() { 2 } else { 1 })
        }
    }
}

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    init_logs(cli.log_format);
    match cli.command {
        Command::Run(o) => run(o).await,
        Command::Validate { file } => {
            let config = match load(&file) {
                Ok(c) => c,
                Err(code) => return code,
            };
            match build::build(&config, true).await {
                Ok(_) => {
                    out(&format!(
                        "{}: ok ({} → {} transform(s) → {})\n",
                        file.display(),
                        source_name(&config),
                        config.transforms.len(),
                        sink_name(&config)
                    ));
                    ExitCode::SUCCESS
                }
                Err(e) => {
                    eprintln!("invalid pipeline: {}: {e}", file.display());
                    ExitCode::from(2)
                }
            }
        }
        Command::Check { file } => {
            let config = match load(&file) {
                Ok(c) => c,
                Err(code) => return code,
            };
            let mut ok = true;
            for r in check::check(&config).await {
                match &r.outcome {
                    Ok(what) => out(&format!(
                        "{} {} ({}): ok, {what}\n",
                        r.role, r.kind, r.address
                    )),
                    Err(e) => {
                        ok = false;
                        out(&format!(
                            "{} {} ({}): FAILED: {e}\n",
                            r.role, r.kind, r.address
                        ));
                    }
                }
            }
            if ok {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            }
        }
        Command::Connectors => {
            out(&catalog::render());
            ExitCode::SUCCESS
        }
    }
}

fn parse_interval(s: &str) -> Result<std::time::Duration, String> {
    config::parse_duration(s).ok_or_else(|| format!("`{s}` is not a duration (500ms, 2s, 1m)"))
}

/// Writes to stdout; a closed pipe (`| head`) is not an error.
fn out(text: &str) {
    use std::io::Write;
    let _ = std::io::stdout().lock().write_all(text.as_bytes());
}

fn source_name(c: &PipelineConfig) -> &'static str {
    match c.source {
        config::SourceConfig::DeadLetters(_) => "dead-letters",
        config::SourceConfig::Generator(_) => "generator",
        config::SourceConfig::Jdbc(_) => "jdbc",
        config::SourceConfig::Kafka(_) => "kafka",
        config::SourceConfig::Rabbitmq(_) => "rabbitmq",
        config::SourceConfig::RedisStreams(_) => "redis-streams",
    }
}

fn sink_name(c: &PipelineConfig) -> &'static str {
    match c.sink {
        SinkConfig::Stdout(_) => "stdout",
        SinkConfig::Jdbc(_) => "jdbc",
        SinkConfig::Kafka(_) => "kafka",
        SinkConfig::Elasticsearch(_) => "elasticsearch",
        SinkConfig::Rabbitmq(_) => "rabbitmq",
        SinkConfig::Redis(_) => "redis",
    }
}
