//! Incremental fetch sessions (KIP-227), as Kafka's `FetchSession`/`FetchManager` keep them:
//! a client that fetches the same partitions over and over sends them once, then only what
//! changed (a new fetch offset, a partition added or forgotten), and hears back only about
//! partitions with something new (records, a high watermark or log start that moved, an
//! error). A fetch over a thousand idle partitions is then a few bytes each way.
//!
//! Request metadata (session id, epoch): (0, -1) is a full fetch without a session; (x, 0) is
//! a full fetch that ends session x (if any) and asks for a new one; (x, -1) ends session x;
//! any other epoch continues session x, which must be at exactly that epoch
//! (FETCH_SESSION_ID_NOT_FOUND, INVALID_FETCH_SESSION_EPOCH, and FETCH_SESSION_TOPIC_ID_ERROR
//! when topic ids are used on one side only). Sessions are kept in
//! `max.incremental.fetch.session.cache.slots` (over 8 shards); a full cache evicts a session
//! idle for two minutes, else one smaller (followers' sessions, "privileged", go last).

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use sluice_metadata::Uuid;
use sluice_protocol::ErrorCode;

/// Kafka's `FetchMetadata` constants.
pub const INVALID_SESSION_ID: i32 = 0;
pub const INITIAL_EPOCH: i32 = 0;
pub const FINAL_EPOCH: i32 = -1;

const SHARDS: usize = 8;
/// Kafka's `MIN_INCREMENTAL_FETCH_SESSION_EVICTION_MS`.
const EVICTION_MS: i64 = 120_000;
/// Ids per shard: shard `s` hands out ids in `[s * RANGE, (s + 1) * RANGE)`.
const ID_RANGE: i32 = i32::MAX / SHARDS as i32;

/// The epoch after `e`: never 0 again, wrapping to 1.
pub fn next_epoch(e: i32) -> i32 {
    if e < 0 {
        FINAL_EPOCH
    } else if e == i32::MAX {
        1
    } else {
        e + 1
    }
}

/// A partition as a session knows it: by topic id when the session uses ids, else by name.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PartitionKey {
    pub topic_id: Uuid,
    /// Empty when keyed by id.
    pub topic: String,
    pub partition: i32,
}

/// What a fetch request asks of one partition.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PartitionParams {
    pub fetch_offset: i64,
    pub log_start_offset: i64,
    pub max_bytes: i32,
    pub current_leader_epoch: i32,
    pub last_fetched_epoch: i32,
}

#[derive(Clone, Debug)]
struct Cached {
    params: PartitionParams,
    /// What the client last heard, to tell whether it must hear again.
    high_watermark: i64,
    log_start_offset: i64,
}

/// One partition's answer, as far as sessions care.
#[derive(Clone, Copy, Debug)]
pub struct Answered {
    pub records_len: u64,
    pub high_watermark: i64,
    pub log_start_offset: i64,
    pub error: bool,
}

#[derive(Debug)]
struct Session {
    privileged: bool,
    uses_topic_ids: bool,
    creation_ms: i64,
    last_used_ms: i64,
    /// The epoch the next request must carry.
    epoch: i32,
    /// Partitions in session order: key -> sequence, sequence -> partition.
    seq_of: HashMap<PartitionKey, u64>,
    order: BTreeMap<u64, (PartitionKey, Cached)>,
    next_seq: u64,
}

impl Session {
    fn push(&mut self, key: PartitionKey, cached: Cached) {
        let seq = self.next_seq;
        self.next_seq += 1;
        self.seq_of.insert(key.clone(), seq);
        self.order.insert(seq, (key, cached));
    }

    fn remove(&mut self, key: &PartitionKey) -> Option<Cached> {
        let seq = self.seq_of.remove(key)?;
        self.order.remove(&seq).map(|(_, c)| c)
    }

    /// Kafka's `FetchSession.update`: new partitions are appended, known ones get the new
    /// parameters in place; then forgotten ones go.
    fn update(&mut self, wanted: Vec<(PartitionKey, PartitionParams)>, forget: &[PartitionKey]) {
        for (key, params) in wanted {
            match self.seq_of.get(&key) {
                Some(seq) => {
                    if let Some((_, c)) = self.order.get_mut(seq) {
                        c.params = params;
                    }
                }
                None => self.push(
                    key,
                    Cached {
                        params,
                        high_watermark: -1,
                        log_start_offset: -1,
                    },
                ),
            }
        }
        for key in forget {
            self.remove(key);
        }
    }

    fn size(&self) -> usize {
        self.order.len()
    }
}

#[derive(Default)]
struct Shard {
    sessions: HashMap<i32, Session>,
}

/// A fetch request's session fields.
#[derive(Clone, Copy, Debug)]
pub struct SessionRequest {
    pub id: i32,
    pub epoch: i32,
    /// A follower's fetch: its session is kept longest.
    pub privileged: bool,
    /// The request names topics by id (v13+).
    pub uses_topic_ids: bool,
}

/// How a fetch request is to be answered.
#[derive(Debug)]
pub enum FetchContext {
    /// A full fetch: the request's partitions; `new_session` asks for a session to be
    /// created from the answer (epoch 0).
    Full {
        partitions: Vec<(PartitionKey, PartitionParams)>,
        new_session: bool,
        privileged: bool,
        uses_topic_ids: bool,
    },
    /// An incremental fetch of session `id`: every partition it holds, in session order.
    Incremental {
        id: i32,
        partitions: Vec<(PartitionKey, PartitionParams)>,
    },
    /// The session cannot be used: answer this top-level error, nothing else.
    Error(ErrorCode),
}

/// The broker's sessions.
pub struct FetchSessionCache {
    shards: Vec<Mutex<Shard>>,
    per_shard: usize,
    next_shard: AtomicUsize,
    sessions: metrics::Gauge,
    partitions: metrics::Gauge,
    evictions: metrics::Counter,
    incremental: metrics::Counter,
}

impl FetchSessionCache {
    /// `slots`: `max.incremental.fetch.session.cache.slots` (below 8: no sessions).
    pub fn new(slots: usize) -> Self {
        Self {
            shards: (0..SHARDS).map(|_| Mutex::new(Shard::default())).collect(),
            per_shard: slots / SHARDS,
            next_shard: AtomicUsize::new(0),
            sessions: metrics::gauge!("sluice_fetch_sessions"),
            partitions: metrics::gauge!("sluice_fetch_session_partitions"),
            evictions: metrics::counter!("sluice_fetch_session_evictions_total"),
            incremental: metrics::counter!("sluice_fetch_session_incremental_total"),
        }
    }

    fn shard_of(&self, id: i32) -> Option<&Mutex<Shard>> {
        if id <= 0 {
            return None;
        }
        self.shards.get((id / ID_RANGE) as usize)
    }

    fn lock(shard: &Mutex<Shard>) -> std::sync::MutexGuard<'_, Shard> {
        shard
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Sessions held now (tests, metrics).
    pub fn len(&self) -> usize {
        self.shards
            .iter()
            .map(|s| Self::lock(s).sessions.len())
            .sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn remove(&self, id: i32) {
        if let Some(shard) = self.shard_of(id) {
            if let Some(s) = Self::lock(shard).sessions.remove(&id) {
                self.sessions.decrement(1.0);
                self.partitions.decrement(s.size() as f64);
            }
        }
    }

    /// Decide how to answer `request`, which asks for `wanted` and forgets `forget`.
    pub fn context(
        &self,
        request: SessionRequest,
        wanted: Vec<(PartitionKey, PartitionParams)>,
        forget: &[PartitionKey],
        now_ms: i64,
    ) -> FetchContext {
        let SessionRequest {
            id,
            epoch,
            privileged,
            uses_topic_ids,
        } = request;
        if epoch == INITIAL_EPOCH || epoch == FINAL_EPOCH {
            if id != INVALID_SESSION_ID {
                self.remove(id);
            }
            return FetchContext::Full {
                partitions: wanted,
                new_session: epoch == INITIAL_EPOCH && self.per_shard > 0,
                privileged,
                uses_topic_ids,
            };
        }
        let Some(shard) = self.shard_of(id) else {
            return FetchContext::Error(ErrorCode::FetchSessionIdNotFound);
        };
        let mut shard = Self::lock(shard);
        let Some(session) = shard.sessions.get_mut(&id) else {
            return FetchContext::Error(ErrorCode::FetchSessionIdNotFound);
        };
        if session.epoch != epoch {
            return FetchContext::Error(ErrorCode::InvalidFetchSessionEpoch);
        }
        if session.uses_topic_ids != uses_topic_ids {
            return FetchContext::Error(ErrorCode::FetchSessionTopicIdError);
        }
        let before = session.size();
        session.update(wanted, forget);
        let after = session.size();
        self.partitions.increment(after as f64 - before as f64);
        if after == 0 {
            // Emptied: the session ends and the (empty) answer is a sessionless one.
            shard.sessions.remove(&id);
            self.sessions.decrement(1.0);
            return FetchContext::Full {
                partitions: Vec::new(),
                new_session: false,
                privileged,
                uses_topic_ids,
            };
        }
        session.last_used_ms = now_ms;
        session.epoch = next_epoch(session.epoch);
        self.incremental.increment(1);
        let partitions = session
            .order
            .values()
            .map(|(k, c)| (k.clone(), c.params.clone()))
            .collect();
        FetchContext::Incremental { id, partitions }
    }

    /// After a full fetch asked for one: a new session holding `answered` (every partition
    /// of the answer, in its order, errors included). Its id, or 0 when none could be made.
    pub fn create(
        &self,
        privileged: bool,
        uses_topic_ids: bool,
        answered: Vec<(PartitionKey, PartitionParams, Answered)>,
        now_ms: i64,
    ) -> i32 {
        if self.per_shard == 0 {
            return INVALID_SESSION_ID;
        }
        let index = self.next_shard.fetch_add(1, Ordering::Relaxed) % SHARDS;
        let mut shard = Self::lock(&self.shards[index]);
        if shard.sessions.len() >= self.per_shard
            && !self.evict(&mut shard, privileged, answered.len(), now_ms)
        {
            return INVALID_SESSION_ID;
        }
        let id = new_id(&shard, index);
        let mut session = Session {
            privileged,
            uses_topic_ids,
            creation_ms: now_ms,
            last_used_ms: now_ms,
            epoch: next_epoch(INITIAL_EPOCH),
            seq_of: HashMap::new(),
            order: BTreeMap::new(),
            next_seq: 0,
        };
        for (key, params, a) in answered {
            session.push(
                key,
                Cached {
                    params,
                    high_watermark: a.high_watermark,
                    log_start_offset: a.log_start_offset,
                },
            );
        }
        self.sessions.increment(1.0);
        self.partitions.increment(session.size() as f64);
        shard.sessions.insert(id, session);
        id
    }

    /// Kafka's `tryEvict`: a session idle past the eviction time goes first; else the
    /// smallest evictable one, if the newcomer outranks it (privileged over not, then more
    /// partitions). Sessions younger than the eviction time are safe from consumers.
    fn evict(&self, shard: &mut Shard, privileged: bool, size: usize, now_ms: i64) -> bool {
        let stale = shard
            .sessions
            .iter()
            .min_by_key(|(id, s)| (s.last_used_ms, **id))
            .filter(|(_, s)| now_ms - s.last_used_ms > EVICTION_MS)
            .map(|(id, _)| *id);
        let victim = stale.or_else(|| {
            shard
                .sessions
                .iter()
                .filter(|(_, s)| {
                    let old = now_ms - s.creation_ms > EVICTION_MS;
                    if privileged {
                        !s.privileged || old
                    } else {
                        old
                    }
                })
                .min_by_key(|(id, s)| (s.privileged, s.size(), **id))
                .filter(|(_, s)| {
                    (privileged && !s.privileged) || (privileged == s.privileged && size > s.size())
                })
                .map(|(id, _)| *id)
        });
        let Some(id) = victim else { return false };
        if let Some(s) = shard.sessions.remove(&id) {
            self.sessions.decrement(1.0);
            self.partitions.decrement(s.size() as f64);
            self.evictions.increment(1);
        }
        true
    }

    /// After an incremental fetch: which answers the client must hear (in the order given),
    /// updating what the session remembers; partitions that brought records move to the end
    /// of the session's order, so a full answer rotates fairly.
    pub fn incremental_answer(&self, id: i32, answered: &[(PartitionKey, Answered)]) -> Vec<bool> {
        let Some(shard) = self.shard_of(id) else {
            return vec![true; answered.len()];
        };
        let mut shard = Self::lock(shard);
        let Some(session) = shard.sessions.get_mut(&id) else {
            return vec![true; answered.len()];
        };
        answered
            .iter()
            .map(|(key, a)| {
                let Some(seq) = session.seq_of.get(key).copied() else {
                    return true;
                };
                let Some((_, c)) = session.order.get_mut(&seq) else {
                    return true;
                };
                let mut must = a.records_len > 0;
                if c.high_watermark != a.high_watermark {
                    c.high_watermark = a.high_watermark;
                    must = true;
                }
                if c.log_start_offset != a.log_start_offset {
                    c.log_start_offset = a.log_start_offset;
                    must = true;
                }
                if a.error {
                    // Heard again once the error clears.
                    c.high_watermark = -1;
                    must = true;
                }
                if a.records_len > 0 {
                    if let Some(entry) = session.order.remove(&seq) {
                        session.push(entry.0, entry.1);
                    }
                }
                must
            })
            .collect()
    }
}

/// A random id in shard `index`'s range, not in use.
fn new_id(shard: &Shard, index: usize) -> i32 {
    let low = (index as i32 * ID_RANGE).max(1);
    let high = (index as i32 + 1) * ID_RANGE;
    loop {
        let r = random_u32() as i32 & i32::MAX;
        let id = low + r % (high - low);
        if !shard.sessions.contains_key(&id) {
            return id;
        }
    }
}

fn random_u32() -> u32 {
    sluice_rt::random_u128() as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(p: i32) -> PartitionKey {
        PartitionKey {
            topic_id: Uuid::nil(),
            topic: "t".into(),
            partition: p,
        }
    }

    fn params(offset: i64) -> PartitionParams {
        PartitionParams {
            fetch_offset: offset,
            log_start_offset: -1,
            max_bytes: 1 << 20,
            current_leader_epoch: 0,
            last_fetched_epoch: -1,
        }
    }

    fn req(id: i32, epoch: i32, uses_topic_ids: bool) -> SessionRequest {
        SessionRequest {
            id,
            epoch,
            privileged: false,
            uses_topic_ids,
        }
    }

    fn answered(hw: i64, records: u64) -> Answered {
        Answered {
            records_len: records,
            high_watermark: hw,
            log_start_offset: 0,
            error: false,
        }
    }

    /// A session with partitions 0..n, all at HW 10, created at `now`.
    fn session(cache: &FetchSessionCache, n: i32, privileged: bool, now: i64) -> i32 {
        let parts = (0..n)
            .map(|p| (key(p), params(0), answered(10, 0)))
            .collect();
        cache.create(privileged, false, parts, now)
    }

    #[test]
    fn epochs_advance_and_wrap_past_zero() {
        assert_eq!(next_epoch(0), 1);
        assert_eq!(next_epoch(41), 42);
        assert_eq!(next_epoch(i32::MAX), 1);
        assert_eq!(next_epoch(-1), -1);
    }

    #[test]
    fn a_session_continues_only_at_its_epoch_and_answers_only_what_changed() {
        let cache = FetchSessionCache::new(1000);
        let id = session(&cache, 3, false, 0);
        assert!(id > 0);
        // Unknown id, wrong epoch, topic ids on one side only.
        let ctx = |id, epoch, ids| cache.context(req(id, epoch, ids), Vec::new(), &[], 5);
        assert!(matches!(
            ctx(id + 1, 1, false),
            FetchContext::Error(ErrorCode::FetchSessionIdNotFound)
        ));
        assert!(matches!(
            ctx(id, 2, false),
            FetchContext::Error(ErrorCode::InvalidFetchSessionEpoch)
        ));
        assert!(matches!(
            ctx(id, 1, true),
            FetchContext::Error(ErrorCode::FetchSessionTopicIdError)
        ));
        // The right epoch: every cached partition is fetched.
        let FetchContext::Incremental { partitions, .. } = ctx(id, 1, false) else {
            panic!("incremental expected");
        };
        assert_eq!(partitions.len(), 3);
        // Only partition 1 moved: it alone is answered, and goes to the end of the order.
        let must = cache.incremental_answer(
            id,
            &[
                (key(0), answered(10, 0)),
                (key(1), answered(12, 100)),
                (key(2), answered(10, 0)),
            ],
        );
        assert_eq!(must, vec![false, true, false]);
        let FetchContext::Incremental { partitions, .. } = ctx(id, 2, false) else {
            panic!("incremental expected");
        };
        let order: Vec<i32> = partitions.iter().map(|(k, _)| k.partition).collect();
        assert_eq!(order, vec![0, 2, 1]);
        // An error is answered, and the partition is answered again once it clears.
        let must = cache.incremental_answer(
            id,
            &[(
                key(0),
                Answered {
                    error: true,
                    ..answered(-1, 0)
                },
            )],
        );
        assert_eq!(must, vec![true]);
        let must = cache.incremental_answer(id, &[(key(0), answered(10, 0))]);
        assert_eq!(must, vec![true]);
    }

    #[test]
    fn forgetting_every_partition_ends_the_session() {
        let cache = FetchSessionCache::new(1000);
        let id = session(&cache, 2, false, 0);
        let updated = cache.context(req(id, 1, false), vec![(key(5), params(3))], &[key(0)], 1);
        let FetchContext::Incremental { partitions, .. } = updated else {
            panic!("incremental expected");
        };
        let mut seen: Vec<i32> = partitions.iter().map(|(k, _)| k.partition).collect();
        seen.sort_unstable();
        assert_eq!(seen, vec![1, 5]);
        let emptied = cache.context(req(id, 2, false), Vec::new(), &[key(1), key(5)], 2);
        assert!(matches!(
            emptied,
            FetchContext::Full {
                new_session: false,
                ..
            }
        ));
        assert!(cache.is_empty());
        // A full request with epoch -1 closes a session; with epoch 0 it closes it and asks
        // for a new one.
        let id = session(&cache, 1, false, 0);
        assert!(matches!(
            cache.context(req(id, FINAL_EPOCH, false), Vec::new(), &[], 1),
            FetchContext::Full {
                new_session: false,
                ..
            }
        ));
        assert!(cache.is_empty());
    }

    #[test]
    fn a_full_cache_evicts_as_kafka_does() {
        // 8 slots: one per shard, and shards are taken in turn.
        let cache = FetchSessionCache::new(8);
        let ids: Vec<i32> = (0..8).map(|_| session(&cache, 5, false, 0)).collect();
        assert!(ids.iter().all(|id| *id > 0));
        // A consumer cannot evict young sessions, even with more partitions.
        assert_eq!(session(&cache, 50, false, 1_000), INVALID_SESSION_ID);
        // A follower may evict a consumer's.
        assert!(session(&cache, 1, true, 1_000) > 0);
        // Once idle past two minutes, any newcomer takes a slot.
        assert!(session(&cache, 1, false, 200_000) > 0);
        // No sessions at all below 8 slots.
        let none = FetchSessionCache::new(7);
        assert_eq!(session(&none, 1, true, 0), INVALID_SESSION_ID);
    }
}
