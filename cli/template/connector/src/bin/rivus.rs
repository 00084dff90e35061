//! A `rivus` of one's own: the built-in connectors picked by `rivus-cli`'s features (in
//! `Cargo.toml`), plus this crate's source and sink as `type = "file"`.

use rivus_cli::Registry;
use rivus_example_file_connector::pipeline_file::{FileSinkSection, FileSourceSection};

fn main() -> std::process::ExitCode {
    rivus_cli::main_with(
        Registry::builtin()
            .source::<FileSourceSection>()
            .sink::<FileSinkSection>(),
    )
}
