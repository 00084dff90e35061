//! What a source reads: topics, a topic pattern, or explicit partitions — resolved to the
//! current list of partitions from cluster metadata.

use std::time::Duration;

use rdkafka::consumer::Consumer;

use super::lag::SourceConsumer;
use rdkafka::error::KafkaError;

/// The topics or partitions a [`KafkaSource`](crate::KafkaSource) reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Subscription {
    /// Every partition of these topics.
    Topics(Vec<String>),
    /// Every partition of every topic whose name matches (a regular expression, anchored).
    Pattern(String),
    /// Exactly these partitions.
    Partitions(Vec<(String, i32)>),
}

impl Subscription {
    /// The topics named outright (none for a pattern), each once.
    pub(crate) fn named_topics(&self) -> Vec<String> {
        let mut out: Vec<String> = match self {
            Subscription::Topics(t) => t.clone(),
            Subscription::Partitions(ps) => ps.iter().map(|(t, _)| t.clone()).collect(),
            Subscription::Pattern(_) => Vec::new(),
        };
        out.sort();
        out.dedup();
        out
    }

    /// The partitions this subscription covers now, sorted.
    pub(crate) fn partitions(
        &self,
        consumer: &SourceConsumer,
        timeout: Duration,
    ) -> Result<Vec<(String, i32)>, KafkaError> {
        let mut out = Vec::new();
        match self {
            Subscription::Partitions(ps) => out.extend(ps.iter().cloned()),
            Subscription::Topics(topics) => {
                for t in topics {
                    let md = consumer.fetch_metadata(Some(t), timeout)?;
                    for topic in md.topics() {
                        if let Some(e) = topic.error() {
                            return Err(KafkaError::MetadataFetch(e.into()));
                        }
                        out.extend(
                            topic
                                .partitions()
                                .iter()
                                .map(|p| (topic.name().to_owned(), p.id())),
                        );
                    }
                }
            }
            Subscription::Pattern(pattern) => {
                let md = consumer.fetch_metadata(None, timeout)?;
                let re = regex::Regex::new(&format!("^(?:{pattern})$")).map_err(|_| {
                    KafkaError::MetadataFetch(rdkafka::types::RDKafkaErrorCode::InvalidArgument)
                })?;
                for topic in md.topics() {
                    if re.is_match(topic.name()) && !topic.name().starts_with("__") {
                        out.extend(
                            topic
                                .partitions()
                                .iter()
                                .map(|p| (topic.name().to_owned(), p.id())),
                        );
                    }
                }
            }
        }
        out.sort();
        out.dedup();
        Ok(out)
    }
}
