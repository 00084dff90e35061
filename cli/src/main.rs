//! `rivus`: runs declarative pipelines between the rivus connectors (see [`rivus_cli`]).

fn main() -> std::process::ExitCode {
    rivus_cli::main_with(rivus_cli::Registry::builtin())
}
