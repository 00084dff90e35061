//! [`RedisStreamsSource`]: Redis Streams through a consumer group, with the last emitted id per
//! stream checkpointed and XACK on checkpoint completion.
//!
//! In worker mode (`rivus run --worker ID`) the consumers of every worker compete for the
//! streams' entries (consumer `<prefix>-<worker>-<subtask>`), and each periodically claims the
//! entries that stayed pending longer than `claim_idle` (XAUTOCLAIM) — those of a worker that
//! died — and processes them: nothing stays pending forever. At-least-once across workers.

use std::collections::BTreeMap;
use std::sync::Arc;

use redis::AsyncCommands;
use rivus_sdk::backoff::{Attempts, BackoffPolicy};
use rivus_sdk::error_policy::{ErrorHandler, ErrorPolicy};
use rivus_sdk::prelude::*;
use rivus_sdk::schema::SchemaError;

use crate::config::RedisConfig;
use crate::connection::RedisConnection;
use crate::redact;

mod group;
mod read_loop;

/// One stream entry, borrowed.
#[derive(Debug, Clone, Copy)]
pub struct StreamEntry<'a> {
    /// The stream's key.
    pub stream: &'a str,
    /// The entry id (`<ms>-<seq>`).
    pub id: &'a str,
    /// The entry's fields.
    pub fields: &'a [(String, Vec<u8>)],
}

/// What a dead letter keeps of an entry that could not be decoded: its position and its
/// content, losslessly — a single field's raw value (the field named in the position), or
/// `field=value` lines of the raw bytes.
fn dead_letter(entry: &StreamEntry<'_>) -> (String, Vec<u8>) {
    let position = format!("{}#{}", entry.stream, entry.id);
    match entry.fields {
        [(name, value)] => (format!("{position} field {name}"), value.clone()),
        fields => {
            let mut out = Vec::new();
            for (name, value) in fields {
                out.extend_from_slice(name.as_bytes());
                out.push(b'=');
                out.extend_from_slice(value);
                out.push(b'\n');
            }
            (position, out)
        }
    }
}

impl StreamEntry<'_> {
    /// The value of field `name`.
    pub fn field(&self, name: &str) -> Option<&[u8]> {
        self.fields
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_slice())
    }
}

type Decoder<T> = dyn Fn(&StreamEntry<'_>) -> Result<T, SchemaError> + Send + Sync;

/// Checkpointed state: the last entry id emitted per stream.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct RedisStreamsState {
    /// Stream key → last emitted entry id.
    pub last: BTreeMap<String, String>,
    /// Entries emitted in this run before the snapshot: how many of the emitted entries a
    /// completed checkpoint covers (acknowledged then). Counted from 0 in each run.
    #[serde(default)]
    pub emitted: u64,
}

fn parse_id(id: &str) -> (u64, u64) {
    let (ms, seq) = id.split_once('-').unwrap_or((id, "0"));
    (ms.parse().unwrap_or(0), seq.parse().unwrap_or(0))
}

/// What a [`RedisStreamsSourceBuilder`] sets, shared by the subtasks of what it builds.
#[derive(Debug)]
struct Settings {
    endpoint: RedisConfig,
    streams: Vec<String>,
    group: String,
    consumer_prefix: String,
    count: usize,
    block_ms: usize,
    policy: ErrorPolicy,
    reconnect: BackoffPolicy,
    claim_idle: std::time::Duration,
}

/// Builds a [`RedisStreamsSource`].
#[derive(Debug)]
pub struct RedisStreamsSourceBuilder {
    s: Settings,
}

impl RedisStreamsSourceBuilder {
    rivus_sdk::setters! {
        /// Reconnecting after a lost connection (default: exponential from 100 ms to 5 s, 60
        /// attempts); then the job fails and recovers from its checkpoint.
        reconnect(b: BackoffPolicy) => s.reconnect;
    }

    /// The streams to read; stream `k` goes to subtask `k % parallelism`.
    pub fn streams<I: IntoIterator<Item = S>, S: Into<String>>(mut self, s: I) -> Self {
        self.s.streams = s.into_iter().map(Into::into).collect();
        self
    }

    rivus_sdk::setters! {
        /// The consumer group (created at the start of each stream if missing).
        group(g: impl Into<String>) => s.group = g.into();

        /// Consumer names are `<prefix>-<subtask>` (default `rivus`): keep it stable across
        /// restarts.
        consumer_prefix(p: impl Into<String>) => s.consumer_prefix = p.into();

        /// Entries per read (default 500).
        count(n: usize) => s.count;

        /// Entries the decoder rejects (acknowledged afterwards): fail (default), skip,
        /// dead-letter.
        error_policy(p: ErrorPolicy) => s.policy;

        /// Worker mode: entries pending (delivered, not acknowledged) longer than this are
        /// claimed from whichever consumer holds them — a worker that died — and processed
        /// (default 60 s). Keep it well above the checkpoint interval: a living worker's entries
        /// wait that long for their acknowledgement, and claiming them delivers them twice.
        claim_idle(d: std::time::Duration) => s.claim_idle;
    }

    /// Checks the settings.
    pub fn build<T: Send + 'static>(
        self,
        decode: impl Fn(&StreamEntry<'_>) -> Result<T, SchemaError> + Send + Sync + 'static,
    ) -> Result<RedisStreamsSource<T>> {
        let s = self.s;
        s.endpoint.validate()?;
        if s.endpoint.response_timeout_value().as_millis() <= s.block_ms as u128 {
            return Err(Error::config(
                "timeout",
                format!(
                    "the response timeout must exceed the read block of {} ms",
                    s.block_ms
                ),
            ));
        }
        if s.streams.is_empty() {
            return Err(Error::config("streams", "at least one stream"));
        }
        if s.group.is_empty() {
            return Err(Error::config("group", "required"));
        }
        if s.count == 0 {
            return Err(Error::config("count", "must be at least 1"));
        }
        if s.claim_idle < std::time::Duration::from_millis(100) {
            return Err(Error::config(
                "claim_idle",
                "at least 100ms (entries younger than that are still being processed)",
            ));
        }
        Ok(RedisStreamsSource {
            settings: Arc::new(s),
            decode: Arc::new(decode),
            con: None,
            restored: BTreeMap::new(),
            share: Share::whole(),
            worker: None,
            emitted: Vec::new(),
            emitted_base: 0,
            unacked: Vec::new(),
            broken: false,
        })
    }
}

/// A Redis Streams source. Clone it into each subtask.
pub struct RedisStreamsSource<T> {
    settings: Arc<Settings>,
    decode: Arc<Decoder<T>>,
    con: Option<RedisConnection>,
    restored: BTreeMap<String, String>,
    share: Share,
    /// Worker mode: this worker's id.
    worker: Option<String>,
    /// Entries emitted and not yet covered by a completed checkpoint, in emission order.
    emitted: Vec<(String, String)>,
    /// How many entries were emitted in this run before `emitted[0]`.
    emitted_base: u64,
    /// Entries whose XACK failed (connection lost): acknowledged again later.
    unacked: Vec<(String, String)>,
    /// The connection was lost: reconnect before reading on.
    broken: bool,
}

impl<T> std::fmt::Debug for RedisStreamsSource<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisStreamsSource")
            .field("endpoint", &self.settings.endpoint)
            .field("streams", &self.settings.streams)
            .field("group", &self.settings.group)
            .finish()
    }
}

impl<T> Clone for RedisStreamsSource<T> {
    fn clone(&self) -> Self {
        RedisStreamsSource {
            settings: Arc::clone(&self.settings),
            decode: Arc::clone(&self.decode),
            con: None,
            restored: BTreeMap::new(),
            share: self.share,
            worker: None,
            emitted: Vec::new(),
            emitted_base: 0,
            unacked: Vec::new(),
            broken: false,
        }
    }
}

impl RedisStreamsSource<()> {
    /// Starts a builder for a source reading from `endpoint`: a URL (`redis://`, `rediss://`)
    /// or an [`RedisConfig`] (a cluster, TLS files, timeouts).
    pub fn builder(config: impl Into<RedisConfig>) -> RedisStreamsSourceBuilder {
        RedisStreamsSourceBuilder {
            s: Settings {
                endpoint: config.into(),
                streams: Vec::new(),
                group: String::new(),
                consumer_prefix: "rivus".into(),
                count: 500,
                block_ms: 100,
                policy: ErrorPolicy::Fail,
                reconnect: BackoffPolicy::reconnect(),
                claim_idle: std::time::Duration::from_secs(60),
            },
        }
    }
}

fn rerr(what: &str, e: redis::RedisError) -> Error {
    crate::redis_error(format!("redis source: {what}"), &e)
}

impl<T: Send + 'static> RedisStreamsSource<T> {
    fn consumer(&self) -> String {
        match &self.worker {
            Some(w) => format!(
                "{}-{w}-{}",
                self.settings.consumer_prefix,
                self.share.subtask()
            ),
            None => format!("{}-{}", self.settings.consumer_prefix, self.share.subtask()),
        }
    }

    fn owned(&self) -> Vec<String> {
        self.share
            .pick(self.settings.streams.iter())
            .cloned()
            .collect()
    }

    /// XACKs `entries` (and any left from a lost connection). On a lost connection they are
    /// kept and acknowledged after the reconnect.
    async fn ack(&mut self, entries: Vec<(String, String)>) -> Result<()> {
        let mut by_stream: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for (s, id) in std::mem::take(&mut self.unacked).into_iter().chain(entries) {
            by_stream.entry(s).or_default().push(id);
        }
        let con = self.con.as_mut().ok_or(Error::Closed("redis source"))?;
        let mut streams = by_stream.into_iter();
        while let Some((s, ids)) = streams.next() {
            let r: redis::RedisResult<i64> = con.xack(&s, &self.settings.group, &ids).await;
            match r {
                Ok(_) => {}
                Err(e) if crate::transient(&e) => {
                    tracing::warn!(error = %redact(&e.to_string()), "redis source: XACK failed");
                    self.broken = true;
                    self.unacked
                        .extend(ids.into_iter().map(|id| (s.clone(), id)));
                    for (s, ids) in streams {
                        self.unacked
                            .extend(ids.into_iter().map(|id| (s.clone(), id)));
                    }
                    return Ok(());
                }
                Err(e) => return Err(rerr("XACK", e)),
            }
        }
        Ok(())
    }

    async fn connect(&self) -> Result<RedisConnection> {
        self.settings.endpoint.connect(false).await
    }

    /// A new connection after a lost one, with backoff; checkpoints are served meanwhile.
    /// `false` when the job stops first.
    async fn reconnect(&mut self, ctx: &mut SourceContext<T, RedisStreamsState>) -> Result<bool> {
        metrics::counter!("rivus_redis_reconnects_total").increment(1);
        let mut attempts = Attempts::new("redis source: reconnect", &self.settings.reconnect);
        loop {
            let err = match self.connect().await {
                Ok(con) => {
                    self.con = Some(con);
                    self.broken = false;
                    return Ok(true);
                }
                Err(e) => e,
            };
            if !ctx.backoff(&mut attempts, err).await? {
                return Ok(false);
            }
            // Acknowledgements wait for the connection (they are kept meanwhile).
            let events = ctx.take_events();
            self.file_events(events);
        }
    }

    /// Files checkpoint events: the emitted entries a completed checkpoint's state covers
    /// (the first `state.emitted` of this run) join `unacked`, acknowledged by the next `ack`.
    ///
    /// The state decides, not the moment the trigger event is seen: a batch of entries is
    /// emitted before the events are looked at again, and a checkpoint taken inside one of
    /// its `collect`s covers only the entries before it. (Filing the whole batch under that
    /// checkpoint acknowledged entries no checkpoint covered: a crash then lost them.) A count,
    /// not the ids: entries claimed from another consumer are older than the ones read.
    fn file_events(&mut self, events: Vec<CheckpointEvent<RedisStreamsState>>) {
        // The newest completed checkpoint covers everything an older one does.
        if let Some((_, state)) = CheckpointEvent::latest_completed(events) {
            let covered = state.emitted.saturating_sub(self.emitted_base) as usize;
            let done: Vec<_> = self
                .emitted
                .drain(..covered.min(self.emitted.len()))
                .collect();
            self.emitted_base += done.len() as u64;
            self.unacked.extend(done);
        }
    }

    /// Files the events, then acknowledges every entry whose checkpoint completed.
    async fn on_events(&mut self, events: Vec<CheckpointEvent<RedisStreamsState>>) -> Result<()> {
        self.file_events(events);
        if !self.unacked.is_empty() {
            self.ack(Vec::new()).await?;
        }
        Ok(())
    }
}

impl<T: Send + 'static> RedisStreamsSource<T> {
    /// Emits one entry (or hands it to the error policy) and keeps it for acknowledgement.
    async fn emit(
        &mut self,
        ctx: &mut SourceContext<T, RedisStreamsState>,
        handler: &ErrorHandler,
        decode: &Decoder<T>,
        entry: StreamEntry<'_>,
    ) -> Result<()> {
        self.emitted
            .push((entry.stream.to_owned(), entry.id.to_owned()));
        ctx.state_mut().emitted += 1;
        match decode(&entry) {
            Ok(v) => ctx.collect(v).await,
            // Not the entry's fault (a schema registry out of reach): the task fails and the
            // entry, not acknowledged, is read again after the restart.
            Err(err) if err.transient => Err(Error::connector(
                format!("redis streams: decoding {}#{}", entry.stream, entry.id),
                err,
            )),
            Err(err) => {
                let (position, payload) = dead_letter(&entry);
                handler
                    .handle_fields(position, &err, &payload, entry.fields.to_vec())
                    .await
            }
        }
    }
}

fn fields_of(map: &std::collections::HashMap<String, redis::Value>) -> Vec<(String, Vec<u8>)> {
    let mut v: Vec<(String, Vec<u8>)> = map
        .iter()
        .map(|(k, val)| {
            (
                k.clone(),
                redis::from_redis_value_ref::<Vec<u8>>(val).unwrap_or_default(),
            )
        })
        .collect();
    v.sort();
    v
}

#[async_trait]
impl<T: Send + 'static> RichFunction for RedisStreamsSource<T> {
    async fn open(&mut self, ctx: &RuntimeContext) -> Result<()> {
        self.worker = ctx.worker().map(str::to_owned);
        if !ctx.is_checkpointing_enabled() {
            // Entries are acknowledged (XACK) only when a checkpoint completes: without
            // checkpoints the group's pending list would grow without end.
            return Err(Error::config(
                "checkpoint",
                "the Redis Streams source acknowledges entries when a checkpoint completes, \
                 and this job takes no checkpoints: enable checkpointing",
            ));
        }
        self.share = ctx.share();
        let mut con = self.connect().await?;
        for s in self.owned() {
            let r: redis::RedisResult<()> = con
                .xgroup_create_mkstream(&s, &self.settings.group, "0")
                .await;
            if let Err(e) = r {
                if e.code() != Some("BUSYGROUP") {
                    return Err(rerr(
                        &format!("creating group {} on {s}", self.settings.group),
                        e,
                    ));
                }
            }
        }
        self.con = Some(con);
        Ok(())
    }
}

#[async_trait]
impl<T: Send + 'static> SourceFunction for RedisStreamsSource<T> {
    type Out = T;
    type State = RedisStreamsState;

    fn delivery_guarantee(&self) -> DeliveryGuarantee {
        DeliveryGuarantee::ExactlyOnce
    }

    fn restore_state(
        &mut self,
        restored: Restored<RedisStreamsState>,
    ) -> Result<RedisStreamsState> {
        let mut last: BTreeMap<String, String> = BTreeMap::new();
        for s in restored.union() {
            for (k, id) in s.last {
                let keep = last.get(&k).is_none_or(|cur| parse_id(&id) > parse_id(cur));
                if keep {
                    last.insert(k, id);
                }
            }
        }
        self.restored = last.clone();
        Ok(RedisStreamsState { last, emitted: 0 })
    }

    async fn on_checkpoint_events(
        &mut self,
        events: Vec<CheckpointEvent<RedisStreamsState>>,
    ) -> Result<()> {
        self.on_events(events).await
    }

    async fn run(&mut self, ctx: &mut SourceContext<T, RedisStreamsState>) -> Result<()> {
        read_loop::run(self, ctx).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(id: &str) -> (String, String) {
        ("s".to_owned(), id.to_owned())
    }

    /// A read batch of five entries; a checkpoint taken after the second one is reported to
    /// the source only after all five were emitted. Its completion acknowledges the first two.
    #[test]
    fn a_dead_letter_keeps_the_entry_content() {
        let one = [("v".to_owned(), vec![0xff, 0xfe])];
        let entry = StreamEntry {
            stream: "s",
            id: "1-0",
            fields: &one,
        };
        assert_eq!(
            dead_letter(&entry),
            ("s#1-0 field v".to_owned(), vec![0xff, 0xfe])
        );
        let two = [
            ("a".to_owned(), b"1".to_vec()),
            ("b".to_owned(), vec![0xff]),
        ];
        let entry = StreamEntry {
            fields: &two,
            ..entry
        };
        assert_eq!(
            dead_letter(&entry),
            ("s#1-0".to_owned(), b"a=1\nb=\xff\n".to_vec())
        );
    }

    #[test]
    fn a_completed_checkpoint_acknowledges_only_what_its_state_covers() {
        let mut source = RedisStreamsSource::builder("redis://127.0.0.1:1/")
            .streams(["s"])
            .group("g")
            .build(|_| Ok(()))
            .unwrap();
        source.emitted = ["1-0", "1-1", "2-0", "10-0", "10-1"]
            .into_iter()
            .map(entry)
            .collect();
        let state = |emitted| RedisStreamsState {
            last: [("s".to_owned(), "1-1".to_owned())].into(),
            emitted,
        };
        source.file_events(vec![
            CheckpointEvent::Triggered(1),
            CheckpointEvent::Completed {
                id: 1,
                state: state(2),
            },
        ]);
        assert_eq!(source.unacked, vec![entry("1-0"), entry("1-1")]);
        assert_eq!(
            source.emitted,
            vec![entry("2-0"), entry("10-0"), entry("10-1")],
            "left for a later checkpoint"
        );
        // An entry claimed from a dead worker is older than what was read, and emitted after
        // the next barrier: the count, not its id, leaves it for the checkpoint after.
        source.emitted.push(entry("0-5"));
        source.unacked.clear();
        source.file_events(vec![CheckpointEvent::Completed {
            id: 2,
            state: state(5),
        }]);
        assert_eq!(
            source.unacked,
            vec![entry("2-0"), entry("10-0"), entry("10-1")]
        );
        assert_eq!(source.emitted, vec![entry("0-5")]);
        assert_eq!(source.emitted_base, 5);
    }
}
