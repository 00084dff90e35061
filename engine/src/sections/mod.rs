//! The sections the `rivus` command brings itself, registered like any connector's: the
//! `generator` and `dead-letters` sources and the `stdout` sink.

pub(crate) mod generator;
pub(crate) mod replay;
pub(crate) mod stdout;

pub(crate) use generator::GeneratorSection;
pub(crate) use replay::DeadLettersSection;
pub(crate) use stdout::StdoutSection;
