//! A `rivus` of one's own: the built-in connectors its `rivus-cli` features pick (here the SQL
//! connector), plus the file connector of `examples/file-connector` (written as a third party
//! would) as `type = "file"`.

use rivus_cli::Registry;
use rivus_example_file_connector::pipeline_file::{FileSinkSection, FileSourceSection};

fn main() -> std::process::ExitCode {
    rivus_cli::main_with(
        Registry::builtin()
            .source::<FileSourceSection>()
            .sink::<FileSinkSection>(),
    )
}
