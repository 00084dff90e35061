//! The sections the `rivus` command brings itself, registered like any connector's: the
//! `generator` and `dead-letters` sources and the `stdout` sink.

pub mod generator;
pub mod replay;
pub mod stdout;

pub use generator::GeneratorSection;
pub use replay::DeadLettersSection;
pub use stdout::StdoutSection;
