//! The two kinds of task and their loops: a source task (source + chained operators + output)
//! and an exchange task (input gate + chained operators + output). Both open everything before
//! the first record, run, and close everything exactly once — also after an error or
//! cancellation.

use std::sync::Arc;

use futures::future::BoxFuture;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::control::{Command, Mailbox, Report};
use super::counters::Counters;
use super::input_gate::{InputEvent, InputGate};
use super::output::{Notification, Output};
use super::sink_output::restored_states;
use super::source_context::SourceContext;
use crate::checkpoint::CompletedCheckpoint;
use crate::context::RuntimeContext;
use crate::error::{Error, Result};
use crate::function::SourceFunction;

/// What every task gets from the job when it starts.
pub(crate) struct TaskEnv {
    pub task: usize,
    pub mailbox: Mailbox,
    pub reports: mpsc::UnboundedSender<Report>,
    pub restore: Option<Arc<CompletedCheckpoint>>,
    pub cancel: CancellationToken,
    pub checkpointing: bool,
}

/// A task ready to start, created by the pipeline builder.
pub(crate) struct TaskSpec {
    pub name: String,
    pub subtask: usize,
    pub is_source: bool,
    pub start: Box<dyn FnOnce(TaskEnv) -> BoxFuture<'static, Result<()>> + Send>,
}

/// Returns the first error, then logs the rest.
fn first_error(results: impl IntoIterator<Item = Result<()>>, who: &str) -> Result<()> {
    let mut first = Ok(());
    for r in results {
        if let Err(e) = r {
            if first.is_ok() {
                first = Err(e);
            } else {
                tracing::warn!(task = who, error = %e, "further error while closing");
            }
        }
    }
    first
}

pub(crate) async fn run_source<S: SourceFunction>(
    mut source: S,
    out: Box<dyn Output<S::Out>>,
    mut rctx: RuntimeContext,
    env: TaskEnv,
    counters: Arc<Counters>,
) -> Result<()> {
    rctx.set_restored_from(env.restore.as_ref().map(|c| c.checkpoint_id));
    let who = rctx.display_name();
    let restored = restored_states::<S::State>(
        rctx.task_name(),
        rctx.subtask_index(),
        rctx.parallelism(),
        env.restore.as_deref(),
    )?;
    let state = source.restore_state(restored)?;
    let mut ctx = SourceContext::new(
        out,
        state,
        env.mailbox,
        env.reports,
        rctx.task_name().to_owned(),
        env.task,
        rctx.subtask_index(),
    );
    let cancel = env.cancel;
    let restore = env.restore;
    let body = async {
        {
            // The source and its chain open side by side: nothing flows before both are
            // open (the source emits only in `run`), and a connector's open is mostly
            // waiting on a server, so a subtask's start costs the slower of the two.
            let _in = crate::activity::waiting("open");
            tokio::try_join!(ctx.output().open(restore.as_deref()), source.open(&rctx))?;
        }
        source.run(&mut ctx).await?;
        tracing::debug!(task = %who, "source finished");
        if env.checkpointing {
            ctx.serve_until_shutdown().await?;
        }
        source.on_checkpoint_events(ctx.take_events()).await?;
        ctx.output().end_of_input().await
    };
    let result = tokio::select! {
        r = body => r,
        _ = cancel.cancelled() => Err(Error::Cancelled),
    };
    counters
        .read
        .fetch_add(ctx.emitted(), std::sync::atomic::Ordering::Relaxed);
    let closed = {
        let _in = crate::activity::waiting("close");
        [source.close().await, ctx.output().close().await]
    };
    first_error(std::iter::once(result).chain(closed), &who)
}

pub(crate) async fn run_exchange<T: Send + 'static>(
    mut gate: InputGate<T>,
    mut out: Box<dyn Output<T>>,
    mut rctx: RuntimeContext,
    env: TaskEnv,
) -> Result<()> {
    rctx.set_restored_from(env.restore.as_ref().map(|c| c.checkpoint_id));
    let who = rctx.display_name();
    let TaskEnv {
        task,
        mut mailbox,
        reports,
        restore,
        cancel,
        ..
    } = env;
    let subtask = rctx.subtask_index();
    let records_in = rctx.metrics().counter("rivus_records_in_total");
    let body = async {
        out.open(restore.as_deref()).await?;
        loop {
            let ev = match gate.try_next() {
                Some(ev) => ev,
                None => {
                    // Nothing ready: flush before blocking so nothing lingers.
                    out.flush().await?;
                    tokio::select! {
                        ev = gate.next() => ev,
                        cmd = mailbox.recv() => {
                            if let Some(cmd) = cmd {
                                notify(&mut *out, cmd).await?;
                            }
                            continue;
                        }
                    }
                }
            };
            match ev {
                InputEvent::Records(batch) => {
                    records_in.increment(batch.len() as u64);
                    let mut full = false;
                    for (v, ts) in batch.into_iter() {
                        full |= out.push(v, ts);
                    }
                    if full {
                        out.flush().await?;
                    }
                }
                InputEvent::Watermark(wm) => out.watermark(wm).await?,
                InputEvent::Barrier(id) => {
                    // Notifications of earlier checkpoints were sent before this barrier
                    // existed: deliver them first, so a sink always sees complete(N) before
                    // barrier N + 1.
                    while let Some(cmd) = mailbox.try_recv() {
                        notify(&mut *out, cmd).await?;
                    }
                    let mut states = Vec::new();
                    out.barrier(id, &mut states).await?;
                    let _ = reports.send(Report::Ack {
                        id,
                        task,
                        subtask,
                        states,
                    });
                }
                InputEvent::End => break,
                // An upstream subtask failed: the job is being cancelled and reports it.
                // Not the end of the input: no flush, no finish (no commit of a transaction
                // no checkpoint covers).
                InputEvent::Broken => return Err(Error::Cancelled),
            }
            while let Some(cmd) = mailbox.try_recv() {
                notify(&mut *out, cmd).await?;
            }
        }
        // Notifications sent before the upstream closed (the final checkpoint's) still count.
        while let Some(cmd) = mailbox.try_recv() {
            notify(&mut *out, cmd).await?;
        }
        out.end_of_input().await
    };
    let result = tokio::select! {
        r = body => r,
        _ = cancel.cancelled() => Err(Error::Cancelled),
    };
    let closed = out.close().await;
    first_error([result, closed], &who)
}

async fn notify<T: Send + 'static>(out: &mut dyn Output<T>, cmd: Command) -> Result<()> {
    match cmd {
        Command::Complete(id) => out.notify(Notification::Complete(id)).await,
        Command::Abort(id) => out.notify(Notification::Abort(id)).await,
        _ => Ok(()),
    }
}
