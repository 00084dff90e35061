//! The sections behind one type each: a [`SourceSection`], [`SinkSection`] or
//! [`DestinationSection`] of any connector, as the registry parsed it from the file.

use std::sync::Arc;

use async_trait::async_trait;

use rivus_pipeline_file::{
    DestinationSection, Health, SectionContext, SectionMetrics, SinkPlan, SinkSection, SourcePlan,
    SourceSection,
};
use rivus_sdk::error_policy::DeadLetterQueue;
use rivus_sdk::Result;

/// A parsed `[source]` of any type.
#[async_trait]
pub trait AnySource: Send + Sync {
    fn build(&self, ctx: &SectionContext) -> Result<SourcePlan>;
    async fn check(&self, ctx: &SectionContext) -> Health;
    async fn prepare(&self, ctx: &SectionContext) -> Result<()>;
    async fn report(&self, ctx: &SectionContext) -> Option<String>;
    fn metrics(&self) -> SectionMetrics;
}

#[async_trait]
impl<S: SourceSection> AnySource for S {
    fn build(&self, ctx: &SectionContext) -> Result<SourcePlan> {
        SourceSection::build(self, ctx)
    }
    async fn check(&self, ctx: &SectionContext) -> Health {
        SourceSection::check(self, ctx).await
    }
    async fn prepare(&self, ctx: &SectionContext) -> Result<()> {
        SourceSection::prepare(self, ctx).await
    }
    async fn report(&self, ctx: &SectionContext) -> Option<String> {
        SourceSection::report(self, ctx).await
    }
    fn metrics(&self) -> SectionMetrics {
        SourceSection::metrics(self)
    }
}

/// A parsed `[sink]` of any type.
#[async_trait]
pub trait AnySink: Send + Sync {
    fn build(&self, ctx: &SectionContext) -> Result<SinkPlan>;
    async fn check(&self, ctx: &SectionContext) -> Health;
    async fn prepare(&self, ctx: &SectionContext) -> Result<()>;
    async fn report(&self, ctx: &SectionContext) -> Option<String>;
    async fn orphans(&self, ctx: &SectionContext) -> Option<Result<Vec<String>>>;
    fn metrics(&self) -> SectionMetrics;
}

#[async_trait]
impl<S: SinkSection> AnySink for S {
    fn build(&self, ctx: &SectionContext) -> Result<SinkPlan> {
        SinkSection::build(self, ctx)
    }
    async fn check(&self, ctx: &SectionContext) -> Health {
        SinkSection::check(self, ctx).await
    }
    async fn prepare(&self, ctx: &SectionContext) -> Result<()> {
        SinkSection::prepare(self, ctx).await
    }
    async fn report(&self, ctx: &SectionContext) -> Option<String> {
        SinkSection::report(self, ctx).await
    }
    async fn orphans(&self, ctx: &SectionContext) -> Option<Result<Vec<String>>> {
        SinkSection::orphans(self, ctx).await
    }
    fn metrics(&self) -> SectionMetrics {
        SinkSection::metrics(self)
    }
}

/// A parsed `[errors.destination]` of any type.
#[async_trait]
pub trait AnyDestination: Send + Sync {
    fn build(&self, ctx: &SectionContext) -> Result<Arc<dyn DeadLetterQueue>>;
    async fn check(&self, ctx: &SectionContext) -> Health;
}

#[async_trait]
impl<D: DestinationSection> AnyDestination for D {
    fn build(&self, ctx: &SectionContext) -> Result<Arc<dyn DeadLetterQueue>> {
        DestinationSection::build(self, ctx)
    }
    async fn check(&self, ctx: &SectionContext) -> Health {
        DestinationSection::check(self, ctx).await
    }
}

/// One section of the file: its `type`, where it stands, and its parsed options.
pub struct Section<T: ?Sized> {
    /// The `type` in the file.
    pub kind: &'static str,
    /// The field path (`source`, `sink`, `errors.destination`).
    pub path: String,
    /// The options, parsed by the connector's type.
    pub options: Arc<T>,
    /// An option names the record's metadata (`{%kafka.topic}`, `%kafka.key`): the file's
    /// sources carry it.
    pub reads_metadata: bool,
}

impl<T: ?Sized> Clone for Section<T> {
    fn clone(&self) -> Self {
        Section {
            kind: self.kind,
            path: self.path.clone(),
            options: Arc::clone(&self.options),
            reads_metadata: self.reads_metadata,
        }
    }
}

/// A section's path is added here, once: what a connector's section raises names fields
/// relative to itself (`tls.ca_file`), and so do the functions it builds.
impl<T: ?Sized> Section<T> {
    /// `r`, its error placed at this section's path.
    fn place<R>(&self, r: Result<R>) -> Result<R> {
        r.map_err(|e| e.under(&self.path))
    }
}

impl Section<dyn AnySource> {
    /// The source, placed at this section's path (build errors and every error its sources
    /// raise name fields below it).
    pub fn build(&self, ctx: &SectionContext) -> Result<SourcePlan> {
        Ok(self.place(self.options.build(ctx))?.under(&self.path))
    }

    /// The section's `prepare` hook, its errors placed at this section's path.
    pub async fn prepare(&self, ctx: &SectionContext) -> Result<()> {
        self.place(self.options.prepare(ctx).await)
    }
}

impl Section<dyn AnySink> {
    /// The sink, placed at this section's path (build errors and every error its sinks raise
    /// name fields below it).
    pub fn build(&self, ctx: &SectionContext) -> Result<SinkPlan> {
        Ok(self.place(self.options.build(ctx))?.under(&self.path))
    }

    /// The section's `prepare` hook, its errors placed at this section's path.
    pub async fn prepare(&self, ctx: &SectionContext) -> Result<()> {
        self.place(self.options.prepare(ctx).await)
    }

    /// The section's `orphans` listing, its errors placed at this section's path.
    pub async fn orphans(&self, ctx: &SectionContext) -> Option<Result<Vec<String>>> {
        let listed = self.options.orphans(ctx).await?;
        Some(self.place(listed))
    }
}

impl Section<dyn AnyDestination> {
    /// The dead-letter queue, its build errors placed at this section's path.
    pub fn build(&self, ctx: &SectionContext) -> Result<Arc<dyn DeadLetterQueue>> {
        self.place(self.options.build(ctx))
    }
}

/// Only the type and the place: options may hold secrets.
impl<T: ?Sized> std::fmt::Debug for Section<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Section")
            .field("kind", &self.kind)
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}
