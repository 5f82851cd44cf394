//! [`Consumer`]: fetches records of assigned partitions. Positions are tracked per partition;
//! one fetch per broker is kept in flight and the next is issued as soon as data is handed
//! out (prefetch), so fetching overlaps the application's work. Batches are CRC-checked,
//! decompressed (all five codecs) and control batches skipped.
//!
//! Group membership (`subscribe`) needs the broker's group coordinator; until then it returns
//! [`Error::Unsupported`] and `assign` is the way in.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::{ApiKey, BrokerId, FetchRequest, FetchResponse, TopicName};
use kafka_protocol::protocol::StrBytes;
use sluice_protocol::batch::{self, BatchIter, RecordLimits};
use sluice_protocol::types::TopicPartition;
use sluice_protocol::ErrorCode;
use tokio::task::JoinSet;

use crate::admin::{list_offsets, OffsetSpec};
use crate::cluster::ClusterCore;
use crate::config::ClientConfig;
use crate::connection::decode_response;
use crate::error::{Error, Result};

/// What to do when a partition has no valid position.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OffsetReset {
    Earliest,
    Latest,
    /// Fail with OFFSET_OUT_OF_RANGE.
    None,
}

/// A consumed record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConsumerRecord {
    pub topic: Arc<str>,
    pub partition: i32,
    pub offset: i64,
    pub timestamp: i64,
    pub key: Option<Bytes>,
    pub value: Option<Bytes>,
    pub headers: Vec<(String, Option<Bytes>)>,
}

#[derive(Debug, Default)]
struct PartitionState {
    /// Offset of the next record `poll` returns; None until reset.
    position: Option<i64>,
    /// Offset the next fetch starts at.
    fetch_position: Option<i64>,
    paused: bool,
    /// Bumped by every seek, so a fetch answer from before it is ignored.
    generation: u64,
    /// Records fetched and not yet returned.
    buffered: VecDeque<ConsumerRecord>,
    high_watermark: i64,
}

type FetchOutcome = (i32, Vec<(TopicPartition, u64, i64)>, Result<FetchResponse>);

pub struct Consumer {
    core: Arc<ClusterCore>,
    config: ClientConfig,
    partitions: BTreeMap<TopicPartition, PartitionState>,
    topic_names: HashMap<String, Arc<str>>,
    in_flight: JoinSet<FetchOutcome>,
    busy_nodes: Vec<i32>,
    /// Round-robin start for fairness across partitions in `poll`.
    next_partition: usize,
}

/// Records buffered per partition before prefetching pauses.
const PREFETCH_RECORDS: usize = 10_000;

impl Consumer {
    pub fn new(config: ClientConfig) -> Result<Consumer> {
        Ok(Consumer {
            core: ClusterCore::new(config.clone())?,
            config,
            partitions: BTreeMap::new(),
            topic_names: HashMap::new(),
            in_flight: JoinSet::new(),
            busy_nodes: Vec::new(),
            next_partition: 0,
        })
    }

    /// Consume exactly these partitions (replacing any previous assignment).
    pub fn assign(&mut self, partitions: &[TopicPartition]) {
        let mut next = BTreeMap::new();
        for tp in partitions {
            let state = self.partitions.remove(tp).unwrap_or_default();
            self.topic_names
                .entry(tp.topic.clone())
                .or_insert_with(|| Arc::from(tp.topic.as_str()));
            next.insert(tp.clone(), state);
        }
        self.partitions = next;
    }

    pub fn assignment(&self) -> Vec<TopicPartition> {
        self.partitions.keys().cloned().collect()
    }

    /// Join the consumer group and consume the topics it assigns.
    pub async fn subscribe(&mut self, _topics: &[&str]) -> Result<()> {
        let group = self.config.group_id.clone().ok_or_else(|| Error::Config {
            key: "group.id".into(),
            message: "subscribe needs a group.id".into(),
        })?;
        let conn = self.core.any_connection().await?;
        let has_groups = conn.broker_versions(ApiKey::JoinGroup).is_some();
        Err(Error::Unsupported(format!(
            "subscribe (group '{group}') is not supported yet: {}; use assign()",
            if has_groups {
                "this client does not implement group membership yet"
            } else {
                "the broker has no group coordinator"
            }
        )))
    }

    /// Start reading `tp` at `offset` (the next record returned has this offset).
    pub fn seek(&mut self, tp: &TopicPartition, offset: i64) -> Result<()> {
        let state = self
            .partitions
            .get_mut(tp)
            .ok_or_else(|| not_assigned(tp))?;
        state.position = Some(offset);
        state.fetch_position = Some(offset);
        state.generation += 1;
        state.buffered.clear();
        Ok(())
    }

    pub async fn seek_to_beginning(&mut self, tps: &[TopicPartition]) -> Result<()> {
        self.seek_to(tps, OffsetSpec::Earliest).await
    }

    pub async fn seek_to_end(&mut self, tps: &[TopicPartition]) -> Result<()> {
        self.seek_to(tps, OffsetSpec::Latest).await
    }

    async fn seek_to(&mut self, tps: &[TopicPartition], spec: OffsetSpec) -> Result<()> {
        let wanted: Vec<(TopicPartition, OffsetSpec)> =
            tps.iter().map(|tp| (tp.clone(), spec)).collect();
        for (tp, r) in list_offsets(&self.core, &wanted, self.config.read_committed).await? {
            self.seek(&tp, r?.offset)?;
        }
        Ok(())
    }

    /// The offset of the next record `poll` will return for `tp` (resolving it with
    /// `auto.offset.reset` if needed).
    pub async fn position(&mut self, tp: &TopicPartition) -> Result<i64> {
        if !self.partitions.contains_key(tp) {
            return Err(not_assigned(tp));
        }
        self.reset_positions().await?;
        self.partitions
            .get(tp)
            .and_then(|s| s.position)
            .ok_or_else(|| Error::Protocol(format!("no position for {tp}")))
    }

    /// For each partition, the first offset whose timestamp is at or after the given one
    /// (None when there is none).
    pub async fn offsets_for_times(
        &self,
        times: &[(TopicPartition, i64)],
    ) -> Result<Vec<(TopicPartition, Option<(i64, i64)>)>> {
        let wanted: Vec<(TopicPartition, OffsetSpec)> = times
            .iter()
            .map(|(tp, t)| (tp.clone(), OffsetSpec::Timestamp(*t)))
            .collect();
        list_offsets(&self.core, &wanted, self.config.read_committed)
            .await?
            .into_iter()
            .map(|(tp, r)| r.map(|o| (tp, (o.offset >= 0).then_some((o.offset, o.timestamp)))))
            .collect()
    }

    /// Stop fetching these partitions until `resume`.
    pub fn pause(&mut self, tps: &[TopicPartition]) {
        for tp in tps {
            if let Some(s) = self.partitions.get_mut(tp) {
                s.paused = true;
            }
        }
    }

    pub fn resume(&mut self, tps: &[TopicPartition]) {
        for tp in tps {
            if let Some(s) = self.partitions.get_mut(tp) {
                s.paused = false;
            }
        }
    }

    /// The high watermark of `tp` seen in the last fetch answer (-1 before one).
    pub fn high_watermark(&self, tp: &TopicPartition) -> Option<i64> {
        self.partitions.get(tp).map(|s| s.high_watermark)
    }

    /// Up to `max.poll.records` records, waiting at most `timeout` for some to arrive.
    pub async fn poll(&mut self, timeout: Duration) -> Result<Vec<ConsumerRecord>> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let out = self.take_buffered();
            if !out.is_empty() {
                self.send_fetches().await?;
                return Ok(out);
            }
            self.reset_positions().await?;
            self.send_fetches().await?;
            if self.in_flight.is_empty() {
                // Nothing to fetch (all paused, or nothing assigned): wait out the timeout.
                tokio::time::sleep_until(deadline).await;
                return Ok(Vec::new());
            }
            match tokio::time::timeout_at(deadline, self.in_flight.join_next()).await {
                Err(_) => return Ok(Vec::new()),
                Ok(None) => {}
                Ok(Some(Ok(outcome))) => self.absorb(outcome)?,
                Ok(Some(Err(e))) => return Err(Error::Protocol(format!("fetch task failed: {e}"))),
            }
        }
    }

    /// The records as an async stream (polling with a one-second timeout under the hood).
    pub fn into_stream(self) -> RecordStream {
        RecordStream {
            state: StreamState::Idle(Box::new(self), VecDeque::new()),
        }
    }

    fn take_buffered(&mut self) -> Vec<ConsumerRecord> {
        let mut out = Vec::new();
        let tps: Vec<TopicPartition> = self.partitions.keys().cloned().collect();
        if tps.is_empty() {
            return out;
        }
        let n = tps.len();
        for i in 0..n {
            let tp = &tps[(self.next_partition + i) % n];
            let Some(state) = self.partitions.get_mut(tp) else {
                continue;
            };
            if state.paused {
                continue;
            }
            while out.len() < self.config.max_poll_records {
                let Some(r) = state.buffered.pop_front() else {
                    break;
                };
                state.position = Some(r.offset + 1);
                out.push(r);
            }
            if out.len() >= self.config.max_poll_records {
                break;
            }
        }
        self.next_partition = (self.next_partition + 1) % n;
        out
    }

    /// Give partitions without a position one, per `auto.offset.reset`.
    async fn reset_positions(&mut self) -> Result<()> {
        let missing: Vec<TopicPartition> = self
            .partitions
            .iter()
            .filter(|(_, s)| s.position.is_none())
            .map(|(tp, _)| tp.clone())
            .collect();
        if missing.is_empty() {
            return Ok(());
        }
        let spec = match self.config.auto_offset_reset {
            OffsetReset::Earliest => OffsetSpec::Earliest,
            OffsetReset::Latest => OffsetSpec::Latest,
            OffsetReset::None => {
                return Err(Error::Kafka {
                    code: ErrorCode::OffsetOutOfRange,
                    message: Some(format!(
                        "no position for {} and auto.offset.reset=none",
                        missing[0]
                    )),
                })
            }
        };
        let wanted: Vec<(TopicPartition, OffsetSpec)> =
            missing.into_iter().map(|tp| (tp, spec)).collect();
        for (tp, r) in list_offsets(&self.core, &wanted, self.config.read_committed).await? {
            let offset = r?.offset;
            if let Some(s) = self.partitions.get_mut(&tp) {
                s.position = Some(offset);
                s.fetch_position = Some(offset);
            }
        }
        Ok(())
    }

    /// One fetch per leader without one in flight, for partitions that want data.
    async fn send_fetches(&mut self) -> Result<()> {
        let mut by_leader: BTreeMap<i32, Vec<(TopicPartition, u64, i64)>> = BTreeMap::new();
        for (tp, s) in &self.partitions {
            let Some(pos) = s.fetch_position else {
                continue;
            };
            if s.paused || s.buffered.len() >= PREFETCH_RECORDS {
                continue;
            }
            let leader = match self.core.leader(tp) {
                Some(l) => l,
                None => {
                    self.core
                        .topic(&tp.topic, false, self.config.request_timeout)
                        .await?;
                    match self.core.leader(tp) {
                        Some(l) => l,
                        None => continue,
                    }
                }
            };
            if self.busy_nodes.contains(&leader) {
                continue;
            }
            by_leader
                .entry(leader)
                .or_default()
                .push((tp.clone(), s.generation, pos));
        }
        for (leader, parts) in by_leader {
            let conn = self.core.connection_to_node(leader).await?;
            let version = conn.version_for(ApiKey::Fetch)?;
            let mut topics: BTreeMap<&str, Vec<FetchPartition>> = BTreeMap::new();
            for (tp, _, pos) in &parts {
                topics.entry(tp.topic.as_str()).or_default().push(
                    FetchPartition::default()
                        .with_partition(tp.partition.0)
                        .with_fetch_offset(*pos)
                        .with_partition_max_bytes(self.config.max_partition_fetch_bytes),
                );
            }
            let req = FetchRequest::default()
                .with_replica_id(BrokerId(-1))
                .with_max_wait_ms(self.config.fetch_max_wait.as_millis() as i32)
                .with_min_bytes(self.config.fetch_min_bytes)
                .with_max_bytes(self.config.fetch_max_bytes)
                .with_isolation_level(i8::from(self.config.read_committed))
                .with_session_epoch(-1)
                .with_topics(
                    topics
                        .into_iter()
                        .map(|(t, p)| {
                            FetchTopic::default()
                                .with_topic(TopicName(StrBytes::from_string(t.to_string())))
                                .with_partitions(p)
                        })
                        .collect(),
                );
            let rx = conn.send_at(&req, version).await?;
            let timeout = self.config.request_timeout + self.config.fetch_max_wait;
            self.busy_nodes.push(leader);
            self.in_flight.spawn(async move {
                let result = async {
                    let body = tokio::time::timeout(timeout, rx)
                        .await
                        .map_err(|_| Error::Timeout(format!("Fetch from broker {leader}")))?
                        .map_err(|_| Error::Connection {
                            addr: format!("broker {leader}"),
                            reason: "connection closed".into(),
                        })??;
                    decode_response::<FetchResponse>(body, version)
                }
                .await;
                (leader, parts, result)
            });
        }
        Ok(())
    }

    /// Take a fetch answer into the partitions' buffers.
    fn absorb(&mut self, (leader, parts, result): FetchOutcome) -> Result<()> {
        self.busy_nodes.retain(|n| *n != leader);
        let resp = match result {
            Ok(r) => r,
            Err(e) if e.is_retriable() => {
                for (tp, _, _) in &parts {
                    self.core.invalidate(&tp.topic);
                }
                return Ok(());
            }
            Err(e) => return Err(e),
        };
        let generations: HashMap<(String, i32), u64> = parts
            .iter()
            .map(|(tp, g, _)| ((tp.topic.clone(), tp.partition.0), *g))
            .collect();
        for t in resp.responses {
            let topic = t.topic.to_string();
            for p in t.partitions {
                let tp = TopicPartition::new(topic.clone(), p.partition_index);
                let sent_generation = generations
                    .get(&(topic.clone(), p.partition_index))
                    .copied();
                let name = self
                    .topic_names
                    .entry(topic.clone())
                    .or_insert_with(|| Arc::from(topic.as_str()))
                    .clone();
                let check_crcs = self.config.check_crcs;
                let reset = self.config.auto_offset_reset;
                let Some(state) = self.partitions.get_mut(&tp) else {
                    continue;
                };
                if Some(state.generation) != sent_generation {
                    continue; // sought since the fetch was sent
                }
                match ErrorCode::try_from_code(p.error_code) {
                    None => {}
                    Some(ErrorCode::OffsetOutOfRange) if reset != OffsetReset::None => {
                        state.position = None;
                        state.fetch_position = None;
                        continue;
                    }
                    Some(code) if code.is_retriable() => {
                        self.core.invalidate(&topic);
                        continue;
                    }
                    Some(code) => {
                        return Err(Error::Kafka {
                            code,
                            message: Some(format!("fetching {tp}")),
                        })
                    }
                }
                state.high_watermark = p.high_watermark;
                if let Some(records) = p.records {
                    let next = decode_into(&name, p.partition_index, &records, state, check_crcs)?;
                    state.fetch_position = Some(next);
                }
            }
        }
        Ok(())
    }
}

/// Decode fetched batches into `state.buffered`; returns the next fetch offset.
fn decode_into(
    topic: &Arc<str>,
    partition: i32,
    records: &[u8],
    state: &mut PartitionState,
    check_crcs: bool,
) -> Result<i64> {
    let mut next = state.fetch_position.unwrap_or(0);
    for item in BatchIter::new(records) {
        // A partial batch at the end of a response is normal: fetch it whole next time.
        let Ok((header, bytes)) = item else { break };
        if header.last_offset() < next {
            continue;
        }
        if check_crcs {
            batch::verify_crc(bytes).map_err(|e| Error::Kafka {
                code: ErrorCode::CorruptMessage,
                message: Some(format!(
                    "{topic}-{partition} at offset {}: {e}",
                    header.base_offset
                )),
            })?;
        }
        if !header.is_control() {
            let decoded = batch::decode_records(bytes, RecordLimits::default()).map_err(|e| {
                Error::Kafka {
                    code: ErrorCode::CorruptMessage,
                    message: Some(format!(
                        "{topic}-{partition} at offset {}: {e}",
                        header.base_offset
                    )),
                }
            })?;
            for r in decoded.into_iter().filter(|r| r.offset >= next) {
                state.buffered.push_back(ConsumerRecord {
                    topic: Arc::clone(topic),
                    partition,
                    offset: r.offset,
                    timestamp: r.timestamp,
                    key: r.key,
                    value: r.value,
                    headers: r.headers,
                });
            }
        }
        next = header.next_offset();
    }
    Ok(next)
}

fn not_assigned(tp: &TopicPartition) -> Error {
    Error::Unsupported(format!("{tp} is not assigned to this consumer"))
}

/// A poll in progress: it owns the consumer and hands it back with the records.
type PollFuture =
    Pin<Box<dyn Future<Output = (Box<Consumer>, Result<Vec<ConsumerRecord>>)> + Send>>;

enum StreamState {
    Idle(Box<Consumer>, VecDeque<ConsumerRecord>),
    Polling(PollFuture),
    Gone,
}

/// [`Consumer::into_stream`]: an endless `Stream` of records (errors are items too).
pub struct RecordStream {
    state: StreamState,
}

impl RecordStream {
    /// The consumer back, once no poll is in progress.
    pub fn into_inner(self) -> Option<Consumer> {
        match self.state {
            StreamState::Idle(c, _) => Some(*c),
            _ => None,
        }
    }
}

impl futures_core::Stream for RecordStream {
    type Item = Result<ConsumerRecord>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        loop {
            match std::mem::replace(&mut self.state, StreamState::Gone) {
                StreamState::Idle(c, mut buf) => {
                    if let Some(r) = buf.pop_front() {
                        self.state = StreamState::Idle(c, buf);
                        return Poll::Ready(Some(Ok(r)));
                    }
                    let mut c = c;
                    self.state = StreamState::Polling(Box::pin(async move {
                        let r = c.poll(Duration::from_secs(1)).await;
                        (c, r)
                    }));
                }
                StreamState::Polling(mut f) => match f.as_mut().poll(cx) {
                    Poll::Pending => {
                        self.state = StreamState::Polling(f);
                        return Poll::Pending;
                    }
                    Poll::Ready((c, Ok(records))) => {
                        self.state = StreamState::Idle(c, records.into())
                    }
                    Poll::Ready((c, Err(e))) => {
                        self.state = StreamState::Idle(c, VecDeque::new());
                        return Poll::Ready(Some(Err(e)));
                    }
                },
                StreamState::Gone => return Poll::Ready(None),
            }
        }
    }
}
