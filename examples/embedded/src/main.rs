//! A program of your own that runs a pipeline file through the rivus engine — checkpoints,
//! restarts from the newest one, Ctrl-C drains — without the `rivus` command.

use rivus_engine::{Pipeline, Registry};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let file = std::env::args()
        .nth(1)
        .ok_or("usage: embedded-pipeline FILE.toml")?;
    // The sections this build holds (the engine's features), and any of your own:
    // `Registry::builtin().sink::<MySinkSection>()`.
    let registry = Registry::builtin();
    let pipeline = Pipeline::from_file(file.as_ref(), &registry)?;
    let summary = pipeline.run().await?;
    eprintln!(
        "{}: {} records read, {} written, {} checkpoints",
        pipeline.name(),
        summary.records_read,
        summary.records_written,
        summary.checkpoints_completed
    );
    Ok(())
}
