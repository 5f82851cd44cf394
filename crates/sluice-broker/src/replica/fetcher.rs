//! Followers pull from leaders. One fetcher task per leader broker carries every partition
//! this broker follows from it (one fetch session per follower/leader pair). Before fetching
//! from a new leader (a new leader epoch) a partition asks OffsetForLeaderEpoch where its
//! latest epoch ends on the leader and truncates there, not to its high watermark (KIP-101).
//! Fetched batches are appended unchanged; the leader's HW comes back in every response.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic, ForgottenTopic};
use kafka_protocol::messages::offset_for_leader_epoch_request::{
    OffsetForLeaderPartition, OffsetForLeaderTopic,
};
use kafka_protocol::messages::{
    ApiKey, BrokerId, FetchRequest, FetchResponse, OffsetForLeaderEpochRequest,
    OffsetForLeaderEpochResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use sluice_metadata::config::BrokerConfig;
use sluice_protocol::types::TopicPartition;
use sluice_protocol::ErrorCode;
use tokio::sync::watch;
use tracing::{debug, info, warn};

use crate::broker_conn::{broker_address, BrokerConn, InterBroker};
use crate::metadata_cache::MetadataCache;
use crate::replica::manager::ReplicaManager;
use crate::replica::partition::{FetchedFrom, Partition};

const FETCH_VERSION: i16 = 12;
const EPOCH_VERSION: i16 = 4;
/// Retry interval while a leader and this follower disagree on the partition's epoch: the
/// other side's metadata usually catches up within milliseconds.
const LAGGING_METADATA_RETRY: Duration = Duration::from_millis(50);

#[derive(Clone, Copy, Debug)]
pub struct FetcherConfig {
    pub max_bytes_per_partition: i32,
    pub max_bytes: i32,
    pub max_wait_ms: i32,
    pub backoff: Duration,
}

impl FetcherConfig {
    pub fn from_broker(c: &BrokerConfig) -> Self {
        let r = &c.settings().replica;
        Self {
            max_bytes_per_partition: r.fetch_max_bytes,
            max_bytes: r.fetch_response_max_bytes,
            max_wait_ms: r.fetch_wait_max_ms,
            backoff: Duration::from_millis(r.fetch_backoff_ms),
        }
    }
}

/// `fut`, or a TimedOut error after `limit` (a peer that stopped answering).
async fn within<T>(
    limit: Duration,
    fut: impl std::future::Future<Output = std::io::Result<T>>,
) -> std::io::Result<T> {
    tokio::time::timeout(limit, fut).await.map_err(|_| {
        std::io::Error::new(
            std::io::ErrorKind::TimedOut,
            format!("no answer from the leader within {limit:?}"),
        )
    })?
}

/// Where a follower truncates after the leader answered OffsetForLeaderEpoch for its latest
/// epoch, as Kafka's fetcher decides (KIP-101, KIP-279): (offset, whether truncation is
/// complete). `leader` is the leader's (epoch, end offset), None when it knows no such epoch;
/// `own(e)` is this replica's (epoch, end offset) for epoch `e`.
/// - No answer: the high watermark (all that is known to be committed).
/// - This replica has the leader's epoch: the smaller of the two ends of it.
/// - It does not (its largest epoch below is another): the end of that one, and ask again
///   with the now-latest epoch — its records of later epochs are the leader's to decide.
/// - It has no epoch that old: the leader's end.
pub(crate) fn truncation_target(
    leader: Option<(i32, i64)>,
    own: impl Fn(i32) -> Option<(i32, i64)>,
    leo: i64,
    hw: i64,
) -> (i64, bool) {
    let Some((leader_epoch, leader_end)) = leader else {
        return (hw.min(leo), true);
    };
    match own(leader_epoch) {
        Some((e, own_end)) if e == leader_epoch => (own_end.min(leader_end).min(leo), true),
        Some((_, own_end)) => (own_end.min(leo), false),
        None => (leader_end.min(leo), true),
    }
}

/// The follower's side of its fetch session with one leader (KIP-227; Kafka's
/// `FetchSessionHandler`): after a full fetch, only partitions whose fetch parameters changed
/// are sent, and those no longer fetched are forgotten; the leader answers only partitions
/// with something new. Any failure falls back to a full fetch that replaces the session.
#[derive(Default)]
struct SessionClient {
    id: i32,
    /// The epoch of the next request; 0 asks for a full fetch (and a new session).
    epoch: i32,
    /// What the leader's session holds, as last sent.
    sent: HashMap<TopicPartition, FetchPartition>,
    /// The request in flight was a full one.
    full: bool,
}

impl SessionClient {
    /// The request's session fields, the partitions to send and those to forget.
    fn build(
        &mut self,
        wanted: Vec<(TopicPartition, FetchPartition)>,
    ) -> (
        i32,
        i32,
        Vec<(TopicPartition, FetchPartition)>,
        Vec<TopicPartition>,
    ) {
        self.full = self.id == crate::fetch_session::INVALID_SESSION_ID
            || self.epoch == crate::fetch_session::INITIAL_EPOCH;
        if self.full {
            self.sent = wanted.iter().cloned().collect();
            return (
                self.id,
                crate::fetch_session::INITIAL_EPOCH,
                wanted,
                Vec::new(),
            );
        }
        let keep: std::collections::HashSet<&TopicPartition> =
            wanted.iter().map(|(tp, _)| tp).collect();
        let forget: Vec<TopicPartition> = self
            .sent
            .keys()
            .filter(|tp| !keep.contains(tp))
            .cloned()
            .collect();
        for tp in &forget {
            self.sent.remove(tp);
        }
        let changed: Vec<(TopicPartition, FetchPartition)> = wanted
            .into_iter()
            .filter(|(tp, p)| self.sent.get(tp) != Some(p))
            .collect();
        for (tp, p) in &changed {
            self.sent.insert(tp.clone(), p.clone());
        }
        (self.id, self.epoch, changed, forget)
    }

    /// The leader answered with `error_code` at the top level and `session_id`.
    fn answered(&mut self, error_code: i16, session_id: i32) {
        if error_code == ErrorCode::FetchSessionIdNotFound.code() {
            self.id = crate::fetch_session::INVALID_SESSION_ID;
            self.epoch = crate::fetch_session::INITIAL_EPOCH;
        } else if error_code != 0 {
            self.failed();
        } else if self.full {
            self.id = session_id;
            self.epoch = crate::fetch_session::next_epoch(crate::fetch_session::INITIAL_EPOCH);
        } else if session_id == crate::fetch_session::INVALID_SESSION_ID {
            // The leader ended the session.
            self.id = session_id;
            self.epoch = crate::fetch_session::INITIAL_EPOCH;
        } else {
            self.epoch = crate::fetch_session::next_epoch(self.epoch);
        }
    }

    /// No usable answer: the next fetch is a full one, replacing the session.
    fn failed(&mut self) {
        self.epoch = crate::fetch_session::INITIAL_EPOCH;
    }
}

/// Which of `fetchers` fetchers of a leader carries `tp`.
fn fetcher_id(tp: &TopicPartition, fetchers: usize) -> usize {
    use std::hash::{Hash, Hasher};
    let mut h = std::hash::DefaultHasher::new();
    tp.topic.hash(&mut h);
    tp.partition.0.hash(&mut h);
    (h.finish() % fetchers.max(1) as u64) as usize
}

/// Starts and stops the per-leader fetchers as leadership moves.
pub struct ReplicaFetcherManager {
    node_id: i32,
    replicas: Arc<ReplicaManager>,
    metadata: Arc<MetadataCache>,
    inter: InterBroker,
    config: FetcherConfig,
}

impl ReplicaFetcherManager {
    pub fn new(
        node_id: i32,
        replicas: Arc<ReplicaManager>,
        metadata: Arc<MetadataCache>,
        broker_config: &BrokerConfig,
        inter: InterBroker,
    ) -> Arc<Self> {
        Arc::new(Self {
            node_id,
            replicas,
            metadata,
            inter,
            config: FetcherConfig::from_broker(broker_config),
        })
    }

    /// The partitions this broker follows, by (leader, fetcher): `num.replica.fetchers`
    /// fetchers per leader share its partitions by a hash of topic and partition, as in
    /// Kafka. When the count changes, partitions move to their new fetcher, which truncates
    /// them afresh before fetching (an answer the old one still had in flight is dropped as
    /// stale).
    fn followed(&self) -> BTreeMap<(i32, usize), Vec<Arc<Partition>>> {
        let fetchers = self.replicas.replica_fetchers();
        let mut by_fetcher: BTreeMap<(i32, usize), Vec<Arc<Partition>>> = BTreeMap::new();
        for p in self.replicas.all() {
            let leader = p.state().leader_id();
            if leader >= 0 && leader != self.node_id {
                let id = fetcher_id(&p.tp, fetchers);
                by_fetcher.entry((leader, id)).or_default().push(p);
            }
        }
        by_fetcher
    }

    fn address_of(&self, leader: i32) -> Option<String> {
        broker_address(
            &self.metadata.current(),
            leader,
            self.inter.listener.as_deref(),
        )
    }

    /// Keep one fetcher per leader running until shutdown.
    pub async fn run(self: Arc<Self>, mut shutdown: watch::Receiver<bool>) {
        let mut tasks: HashMap<(i32, usize), tokio::task::JoinHandle<()>> = HashMap::new();
        loop {
            // Leadership only moves with metadata; the bound also restarts a fetcher that
            // ended while its leader's partitions were being re-registered.
            tokio::select! {
                _ = shutdown.changed() => break,
                _ = self.metadata.changed(self.config.backoff) => {}
            }
            tasks.retain(|_, t| !t.is_finished());
            for key in self.followed().into_keys() {
                tasks.entry(key).or_insert_with(|| {
                    let me = Arc::clone(&self);
                    let stop = shutdown.clone();
                    tokio::spawn(async move { me.fetch_from(key, stop).await })
                });
            }
        }
        for (_, t) in tasks {
            t.abort();
        }
    }

    async fn fetch_from(&self, key: (i32, usize), shutdown: watch::Receiver<bool>) {
        let leader = key.0;
        info!(leader, fetcher = key.1, "replica fetcher started");
        let mut conn: Option<BrokerConn> = None;
        // Leader epoch each partition was last truncated for.
        let mut synced: HashMap<TopicPartition, i32> = HashMap::new();
        // How far each partition was behind the leader's HW after its last fetch (Kafka's
        // "replica in sync" for follower throttling: caught up to the HW).
        let mut lags: HashMap<TopicPartition, i64> = HashMap::new();
        let mut session = SessionClient::default();
        loop {
            if *shutdown.borrow() {
                return;
            }
            let parts = self.followed().remove(&key).unwrap_or_default();
            if parts.is_empty() {
                return;
            }
            let c = match &mut conn {
                Some(c) => c,
                None => {
                    let connected = match self.address_of(leader) {
                        Some(addr) => {
                            BrokerConn::connect(
                                &addr,
                                &format!("sluice-replica-fetcher-{}", self.node_id),
                                &self.inter,
                            )
                            .await
                        }
                        None => Err(std::io::Error::other("leader has no live endpoint")),
                    };
                    match connected {
                        Ok(c) => conn.insert(c),
                        Err(e) => {
                            if e.kind() == std::io::ErrorKind::PermissionDenied {
                                // Wrong inter-broker credentials: say so, it will not heal.
                                warn!(leader, error = %e, "the leader refused this broker's credentials");
                            } else {
                                debug!(leader, error = %e, "cannot reach leader");
                            }
                            // replica.fetch.backoff.ms, cut short by new metadata.
                            self.metadata.changed(self.config.backoff).await;
                            continue;
                        }
                    }
                }
            };
            let result = async {
                self.truncate_new_epochs(c, &parts, &mut synced).await?;
                let ready: Vec<Arc<Partition>> = parts
                    .iter()
                    .filter(|p| synced.get(&p.tp) == Some(&p.leader_epoch()))
                    .cloned()
                    .collect();
                // follower.replication.throttled.rate: what throttled replicas fetch counts
                // against it (in sync or not, as Kafka); while it is exceeded, those that
                // are out of sync sit this round out.
                let quota = &self.replicas.replication_quotas().follower;
                let throttled = |p: &Partition| p.settings().follower_throttled;
                let holdable = |p: &Partition, lags: &HashMap<TopicPartition, i64>| {
                    throttled(p) && lags.get(&p.tp).is_none_or(|l| *l > 0)
                };
                let hold =
                    ready.iter().any(|p| holdable(p, &lags)) && quota.is_exceeded(crate::now_ms());
                let (fetchable, held): (Vec<_>, Vec<_>) = ready
                    .into_iter()
                    .partition(|p| !(hold && holdable(p, &lags)));
                if fetchable.is_empty() && !held.is_empty() {
                    // Only held replicas: wait as Kafka's fetcher does with nothing to ask.
                    self.metadata.changed(self.config.backoff).await;
                    return Ok(());
                }
                let counted: Vec<bool> = fetchable.iter().map(|p| throttled(p)).collect();
                let received = self
                    .fetch_once(c, leader, &fetchable, &counted, &mut lags, &mut session)
                    .await?;
                quota.record(received, crate::now_ms());
                Ok::<(), std::io::Error>(())
            }
            .await;
            if let Err(e) = result {
                debug!(leader, error = %e, "replica fetch failed");
                session.failed();
                conn = None;
                self.metadata.changed(self.config.backoff).await;
            }
        }
    }

    /// Partitions following a new leader epoch truncate to where their latest epoch ends on
    /// the leader (or to their HW when the leader cannot say).
    async fn truncate_new_epochs(
        &self,
        c: &mut BrokerConn,
        parts: &[Arc<Partition>],
        synced: &mut HashMap<TopicPartition, i32>,
    ) -> std::io::Result<()> {
        let pending: Vec<&Arc<Partition>> = parts
            .iter()
            .filter(|p| synced.get(&p.tp) != Some(&p.leader_epoch()))
            .collect();
        if pending.is_empty() {
            return Ok(());
        }
        let mut topics: BTreeMap<String, Vec<OffsetForLeaderPartition>> = BTreeMap::new();
        let mut asked: HashMap<TopicPartition, i32> = HashMap::new();
        for p in &pending {
            let epoch = p.leader_epoch();
            topics.entry(p.tp.topic.to_string()).or_default().push(
                OffsetForLeaderPartition::default()
                    .with_partition(p.tp.partition.0)
                    .with_current_leader_epoch(epoch)
                    .with_leader_epoch(p.latest_epoch().unwrap_or(-1)),
            );
            asked.insert(p.tp.clone(), epoch);
        }
        let req = OffsetForLeaderEpochRequest::default()
            .with_replica_id(BrokerId(self.node_id))
            .with_topics(
                topics
                    .into_iter()
                    .map(|(t, ps)| {
                        OffsetForLeaderTopic::default()
                            .with_topic(TopicName(StrBytes::from_string(t)))
                            .with_partitions(ps)
                    })
                    .collect(),
            );
        let resp: OffsetForLeaderEpochResponse = within(
            self.inter.timeout,
            c.call(ApiKey::OffsetForLeaderEpoch, EPOCH_VERSION, &req),
        )
        .await?;
        let now = crate::now_ms();
        for t in resp.topics {
            for r in t.partitions {
                let tp = TopicPartition::new(t.topic.to_string(), r.partition);
                let (Some(p), Some(&epoch)) = (pending.iter().find(|p| p.tp == tp), asked.get(&tp))
                else {
                    continue;
                };
                if p.leader_epoch() != epoch {
                    // The leader moved while we asked: the answer is for an epoch we no
                    // longer follow; the next round asks the new leader.
                    continue;
                }
                if r.error_code == ErrorCode::ClusterAuthorizationFailed.code() {
                    warn!(partition = %tp, "the leader refuses this broker's OffsetForLeaderEpoch (super.users / CLUSTER_ACTION)");
                    continue;
                }
                if r.error_code != 0 {
                    debug!(partition = %tp, code = r.error_code, "leader refused OffsetForLeaderEpoch");
                    continue;
                }
                let leo = p.log_end_offset();
                let leader_end = (r.leader_epoch >= 0 && r.end_offset >= 0)
                    .then_some((r.leader_epoch, r.end_offset));
                let (target, done) = truncation_target(
                    leader_end,
                    |e| p.own_end_offset_for(e),
                    leo,
                    p.high_watermark(),
                );
                if target < leo {
                    info!(partition = %tp, from = leo, to = target, leader_epoch = r.leader_epoch, "truncating to the leader's epoch end");
                    let p = Arc::clone(p);
                    sluice_rt::task::spawn_blocking(move || p.truncate_to(target, now))
                        .await
                        .map_err(std::io::Error::other)?
                        .map_err(std::io::Error::other)?;
                }
                if done {
                    synced.insert(tp, epoch);
                }
            }
        }
        Ok(())
    }

    /// One fetch for `parts`; returns the bytes received for the parts `throttled` marks
    /// (for the follower's replication quota) and notes each part's lag behind the
    /// leader's HW in `lags`.
    async fn fetch_once(
        &self,
        c: &mut BrokerConn,
        leader: i32,
        parts: &[Arc<Partition>],
        throttled: &[bool],
        lags: &mut HashMap<TopicPartition, i64>,
        session: &mut SessionClient,
    ) -> std::io::Result<u64> {
        if parts.is_empty() {
            // Every partition waits to truncate: the leader refused, because its metadata
            // or ours is behind. Ours wakes us; the leader's we cannot see, so retry soon.
            self.metadata.changed(LAGGING_METADATA_RETRY).await;
            return Ok(0);
        }
        let mut wanted = Vec::with_capacity(parts.len());
        let mut sent: HashMap<TopicPartition, FetchedFrom> = HashMap::new();
        for p in parts {
            let fetched = FetchedFrom {
                leader,
                leader_epoch: p.leader_epoch(),
                offset: p.log_end_offset(),
            };
            wanted.push((
                p.tp.clone(),
                FetchPartition::default()
                    .with_partition(p.tp.partition.0)
                    .with_current_leader_epoch(fetched.leader_epoch)
                    .with_fetch_offset(fetched.offset)
                    .with_log_start_offset(p.log_start_offset())
                    .with_partition_max_bytes(self.config.max_bytes_per_partition),
            ));
            sent.insert(p.tp.clone(), fetched);
        }
        let (session_id, session_epoch, changed, forget) = session.build(wanted);
        let mut topics: BTreeMap<String, Vec<FetchPartition>> = BTreeMap::new();
        for (tp, fp) in changed {
            topics.entry(tp.topic.clone()).or_default().push(fp);
        }
        let mut forgotten: BTreeMap<String, Vec<i32>> = BTreeMap::new();
        for tp in forget {
            forgotten.entry(tp.topic).or_default().push(tp.partition.0);
        }
        let req = FetchRequest::default()
            .with_replica_id(BrokerId(self.node_id))
            .with_max_wait_ms(self.config.max_wait_ms)
            .with_min_bytes(1)
            .with_max_bytes(self.config.max_bytes)
            .with_session_id(session_id)
            .with_session_epoch(session_epoch)
            .with_topics(
                topics
                    .into_iter()
                    .map(|(t, ps)| {
                        FetchTopic::default()
                            .with_topic(TopicName(StrBytes::from_string(t)))
                            .with_partitions(ps)
                    })
                    .collect(),
            )
            .with_forgotten_topics_data(
                forgotten
                    .into_iter()
                    .map(|(t, ps)| {
                        ForgottenTopic::default()
                            .with_topic(TopicName(StrBytes::from_string(t)))
                            .with_partitions(ps)
                    })
                    .collect(),
            );
        let wait = Duration::from_millis(self.config.max_wait_ms.max(0) as u64);
        let resp: FetchResponse = within(
            wait + self.inter.timeout,
            c.call(ApiKey::Fetch, FETCH_VERSION, &req),
        )
        .await?;
        session.answered(resp.error_code, resp.session_id);
        if resp.error_code != 0 {
            debug!(
                leader,
                code = resp.error_code,
                "fetch session refused; the next fetch is a full one"
            );
            return Ok(0);
        }
        let now = crate::now_ms();
        let mut backoff = false;
        let mut throttled_bytes = 0u64;
        // Appends go to a blocking thread together: disk work stays off the async workers.
        let mut appends = Vec::new();
        for t in resp.responses {
            for d in t.partitions {
                let tp = TopicPartition::new(t.topic.to_string(), d.partition_index);
                let Some(i) = parts.iter().position(|p| p.tp == tp) else {
                    continue;
                };
                let (p, Some(fetched)) = (&parts[i], sent.get(&tp)) else {
                    continue;
                };
                match ErrorCode::try_from_code(d.error_code) {
                    None => {
                        let records = d.records.unwrap_or_default();
                        if throttled.get(i) == Some(&true) {
                            throttled_bytes += records.len() as u64;
                        }
                        appends.push((Arc::clone(p), records, d.high_watermark, *fetched));
                    }
                    Some(ErrorCode::OffsetOutOfRange)
                        if p.log_end_offset() < d.log_start_offset
                            && p.leader_epoch() == fetched.leader_epoch =>
                    {
                        // The leader deleted what we still miss: start over at its log start.
                        let (p, start) = (Arc::clone(p), d.log_start_offset);
                        sluice_rt::task::spawn_blocking(move || {
                            p.truncate_fully_and_start_at(start, now)
                        })
                        .await
                        .map_err(std::io::Error::other)?
                        .map_err(std::io::Error::other)?;
                    }
                    // What we miss is in the remote tier only: start after it, as the
                    // leader's own local log does (tiered storage).
                    Some(ErrorCode::OffsetMovedToTieredStorage)
                        if p.leader_epoch() == fetched.leader_epoch =>
                    {
                        if let Err(e) = self.replicas.start_follower_from_remote(p, now).await {
                            debug!(partition = %tp, error = %e, "cannot start from the remote tier yet");
                            backoff = true;
                        }
                    }
                    // The leader's ACLs refuse this broker's principal: it will not heal
                    // by itself, so say so where an operator looks.
                    Some(
                        code @ (ErrorCode::ClusterAuthorizationFailed
                        | ErrorCode::TopicAuthorizationFailed),
                    ) => {
                        warn!(partition = %tp, ?code, "the leader refuses this broker's replica fetches (super.users / CLUSTER_ACTION)");
                        backoff = true;
                    }
                    Some(code) => {
                        debug!(partition = %tp, ?code, "replica fetch error");
                        backoff = true;
                    }
                }
            }
        }
        let appended = sluice_rt::task::spawn_blocking(move || {
            appends
                .into_iter()
                .map(|(p, records, hw, fetched)| {
                    let r = p.append_as_follower(&records, hw, fetched, now);
                    (p, hw, fetched, r)
                })
                .collect::<Vec<_>>()
        })
        .await
        .map_err(std::io::Error::other)?;
        for (p, hw, fetched, r) in appended {
            match r {
                Ok(Some(_)) => {
                    lags.insert(p.tp.clone(), (hw - p.log_end_offset()).max(0));
                }
                Ok(None) => {
                    debug!(partition = %p.tp, ?fetched, "dropping a stale fetch answer");
                }
                Err(e) => {
                    warn!(partition = %p.tp, error = %e, "cannot append replicated records");
                    backoff = true;
                }
            }
        }
        if backoff {
            // NOT_LEADER / FENCED_LEADER_EPOCH and the like clear with new metadata (ours,
            // which wakes us, or the leader's, which a short retry picks up).
            self.metadata.changed(LAGGING_METADATA_RETRY).await;
        }
        Ok(throttled_bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::truncation_target;

    /// This replica's epochs: 1 from 0, 3 from 50, 5 from 90; log end 100.
    fn own(e: i32) -> Option<(i32, i64)> {
        let entries = [(1, 0i64), (3, 50), (5, 90)];
        let (floor, _) = *entries.iter().rev().find(|(x, _)| *x <= e)?;
        let end = entries
            .iter()
            .find(|(x, _)| *x > e)
            .map_or(100, |(_, o)| *o);
        Some((floor, end))
    }

    #[test]
    fn follows_kafkas_fetcher() {
        // The leader has epoch 5 up to 95: cut to 95.
        assert_eq!(truncation_target(Some((5, 95)), own, 100, 40), (95, true));
        // KIP-101: our epoch 5 (90..100) was never the leader's, whose epoch 4 ended at 100
        // (epoch 6 started there). We have no epoch 4: our floor is 3, ending at 90. Cut to
        // 90 and ask again (not 100, which would keep records the leader does not have).
        assert_eq!(truncation_target(Some((4, 100)), own, 100, 40), (90, false));
        // Same epoch, the leader's is shorter.
        assert_eq!(truncation_target(Some((3, 70)), own, 100, 40), (70, true));
        // Nothing that old here.
        assert_eq!(truncation_target(Some((0, 20)), own, 100, 40), (20, true));
        // The leader cannot say: the high watermark.
        assert_eq!(truncation_target(None, own, 100, 40), (40, true));
        // Never past our own end.
        assert_eq!(truncation_target(Some((5, 500)), own, 100, 40), (100, true));
    }
}
