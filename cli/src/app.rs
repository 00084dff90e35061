//! The command line: arguments, logging, and the dispatch of `run`, `validate`, `check` and
//! `connectors` over a [`Registry`].
//!
//! ```text
//! rivus run pipeline.toml        run it (Ctrl-C: drain and checkpoint; twice: stop now)
//! rivus validate pipeline.toml   check the file without running it
//! rivus check pipeline.toml      connect to every endpoint
//! rivus connectors               what a file can name
//! rivus schema                   the JSON Schema of pipeline files (for editors)
//! rivus docs DIR                 the reference pages, one per connector and transform
//! ```

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};

use rivus_engine::{Pipeline, Registry};

use crate::console::{load, out};
use crate::run::RunOptions;

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
    /// List what failures left in a pipeline file's destinations that nothing refers to (a
    /// Delta table's data files its log does not name), one line each; deletes nothing. Run
    /// it while the job is stopped: a running job's files wait for their commit briefly.
    Orphans { file: PathBuf },
    /// Run a pipeline file's `[[tests]]` through its transforms (no source, no sink): exits
    /// non-zero naming each failing test and the field that differs.
    Test { file: PathBuf },
    /// List the connectors and transforms a pipeline file can use.
    Connectors,
    /// Print the JSON Schema of pipeline files (every section this `rivus` knows), for
    /// editors: `rivus schema > rivus.schema.json`, then `#:schema ./rivus.schema.json` at the
    /// top of a pipeline file.
    Schema,
    /// Write the reference pages (one Markdown page per connector and transform, one for the
    /// file's own keys) into DIR, from the same types the file is read with.
    Docs {
        /// Where to write them (`docs/reference` in this repository).
        dir: PathBuf,
    },
    /// Make something new from a template.
    #[command(subcommand)]
    New(New),
}

#[derive(Subcommand)]
enum New {
    /// A connector crate of your own: source, sink, their pipeline-file sections, the
    /// testkit's certification and a `rivus` with the connector built in — it builds and
    /// passes its tests as written (`cargo test`), then you make it yours.
    Connector {
        /// The crate's name (`nats-connector`).
        name: String,
        /// Where to write it (default: a directory named after the crate, here).
        #[arg(long)]
        path: Option<PathBuf>,
        /// Take the rivus crates from this checkout of the rivus repository (its root), not
        /// from the registry.
        #[arg(long, value_name = "DIR", conflicts_with = "rivus_git")]
        rivus_path: Option<PathBuf>,
        /// Take the rivus crates from this git repository, not from the registry.
        #[arg(long, value_name = "URL")]
        rivus_git: Option<String>,
    },
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

/// Runs the `rivus` command — every subcommand, workers, restarts, the dashboard — with the
/// section types of `registry`: `rivus_cli::main_with(Registry::builtin())` is `rivus`
/// itself; add your own connectors' sections to build your own.
pub fn main_with(registry: Registry) -> ExitCode {
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let code = runtime.block_on(dispatch(Cli::parse(), &registry));
    // A client library's blocking call may still wait on a server that stopped answering (a
    // librdkafka commit on a frozen broker) after the job ended or was stopped: it must not
    // keep the process alive. Whatever it waited for is what a restart recovers.
    runtime.shutdown_timeout(std::time::Duration::from_secs(2));
    code
}

/// `rivus test`: a line per test, the differences under a failing one.
fn test_command(file: &std::path::Path, pipeline: &Pipeline) -> ExitCode {
    if !pipeline.has_tests() {
        eprintln!("{}: no [[tests]] to run", file.display());
        return ExitCode::from(2);
    }
    let reports = match pipeline.test() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("invalid pipeline: {}: {e}", file.display());
            return ExitCode::from(2);
        }
    };
    let failed = reports.iter().filter(|r| !r.failures.is_empty()).count();
    for r in &reports {
        if r.failures.is_empty() {
            out(&format!(
                "test {} ... ok
",
                r.name
            ));
        } else {
            out(&format!(
                "test {} ... FAILED
",
                r.name
            ));
            for f in &r.failures {
                out(&format!(
                    "    {f}
"
                ));
            }
        }
    }
    out(&format!(
        "{}: {} passed, {failed} failed
",
        file.display(),
        reports.len() - failed
    ));
    if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

async fn dispatch(cli: Cli, registry: &Registry) -> ExitCode {
    init_logs(cli.log_format);
    match cli.command {
        Command::Run(o) => crate::run::run(o, registry).await,
        Command::Validate { file } => {
            let pipeline = match load(&file, registry) {
                Ok(c) => c,
                Err(code) => return code,
            };
            match pipeline.validate().await {
                Ok(()) => {
                    out(&format!(
                        "{}: ok\n{}\n",
                        file.display(),
                        indent(&pipeline.describe())
                    ));
                    ExitCode::SUCCESS
                }
                Err(e) => {
                    eprintln!("invalid pipeline: {}: {e}", file.display());
                    ExitCode::from(2)
                }
            }
        }
        Command::Test { file } => {
            let pipeline = match load(&file, registry) {
                Ok(c) => c,
                Err(code) => return code,
            };
            test_command(&file, &pipeline)
        }
        Command::Check { file } => {
            let pipeline = match load(&file, registry) {
                Ok(c) => c,
                Err(code) => return code,
            };
            let mut ok = true;
            for r in pipeline.check().await {
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
        Command::Orphans { file } => {
            let pipeline = match load(&file, registry) {
                Ok(c) => c,
                Err(code) => return code,
            };
            let mut ok = true;
            for (path, kind, listed) in pipeline.orphans().await {
                match listed {
                    None => out(&format!("{path} {kind}: leaves no orphans\n")),
                    Some(Ok(lines)) => {
                        out(&format!("{path} {kind}: {} orphaned\n", lines.len()));
                        for l in lines {
                            out(&format!("  {l}\n"));
                        }
                    }
                    Some(Err(e)) => {
                        ok = false;
                        out(&format!("{path} {kind}: FAILED: {e}\n"));
                    }
                }
            }
            if ok {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            }
        }
        Command::Schema => {
            let schema = rivus_engine::schema(registry);
            out(&format!(
                "{}\n",
                serde_json::to_string_pretty(&schema).unwrap_or_default()
            ));
            ExitCode::SUCCESS
        }
        Command::Docs { dir } => match rivus_engine::write_reference(registry, &dir) {
            Ok(n) => {
                out(&format!("{n} pages written to {}\n", dir.display()));
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("cannot write the pages to {}: {e}", dir.display());
                ExitCode::FAILURE
            }
        },
        Command::Connectors => {
            out(&rivus_engine::catalog_text(registry));
            ExitCode::SUCCESS
        }
        Command::New(New::Connector {
            name,
            path,
            rivus_path,
            rivus_git,
        }) => {
            let dir = path.unwrap_or_else(|| PathBuf::from(&name));
            let rivus = match (rivus_path, rivus_git) {
                (Some(p), _) => crate::scaffold::Rivus::Path(p),
                (None, Some(url)) => crate::scaffold::Rivus::Git(url),
                (None, None) => crate::scaffold::Rivus::Registry,
            };
            match crate::scaffold::new_connector(&name, &dir, &rivus) {
                Ok(files) => {
                    for f in files {
                        out(&format!("{}\n", dir.join(f).display()));
                    }
                    out(&format!(
                        "made {name} in {}: `cargo test` certifies it; `cargo run --features rivus --bin rivus -- connectors` lists it\n",
                        dir.display()
                    ));
                    ExitCode::SUCCESS
                }
                Err(e) => {
                    eprintln!("rivus new connector: {e}");
                    ExitCode::from(2)
                }
            }
        }
    }
}

/// Each line of `text` indented by two spaces.
fn indent(text: &str) -> String {
    text.lines()
        .map(|l| format!("  {l}"))
        .collect::<Vec<_>>()
        .join("\n")
}
