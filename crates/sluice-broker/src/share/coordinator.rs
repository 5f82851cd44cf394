//! [`ShareCoordinator`]: the share-partition states of the `__share_group_state` partitions
//! this broker leads (KIP-932's share coordinator), behind the share-state APIs
//! (Initialize/Read/Write/Delete/ReadSummaryShareGroupState).
//!
//! A share partition (group, topic id, partition) lives in partition
//! `abs(javaHash("group:topicId:partition")) % share.coordinator.state.topic.num.partitions`.
//! Each write is appended there with acks=all before it is answered: a ShareUpdate carrying
//! the written batches, or every `share.coordinator.snapshot.update.records.per.snapshot`
//! writes a ShareSnapshot with the whole merged state (Kafka's records, see
//! [`super::state_records`]). A new leader of a state partition replays it on its first
//! request: the last snapshot of each key, then the updates of that snapshot's epoch.
//!
//! Fencing as Kafka's coordinator: a write or read with a leader epoch below the stored one
//! is FENCED_LEADER_EPOCH (a deposed partition leader), a write with a state epoch below the
//! stored one FENCED_STATE_EPOCH (the offsets were altered or reset since). A read with a
//! higher leader epoch records it first, so the previous leader's writes are refused from
//! then on.
//!
//! Each state partition is behind an async mutex held across its append's replication:
//! writes to one state partition are applied and made durable in order, and a read never
//! sees a write that may yet be lost.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use sluice_metadata::Uuid;
use sluice_protocol::batch::{decode_records, BatchBuilder, RecordLimits};
use sluice_protocol::compression::Compression;
use sluice_protocol::types::TopicPartition;
use sluice_protocol::ErrorCode;
use tokio::sync::OwnedMutexGuard;

use super::state_records::{
    merge_batches, PersistedBatch, ShareSnapshotValue, ShareStateKey, ShareStateRecord,
    ShareUpdateValue,
};
use crate::group::coordinator::partition_for;
use crate::replica::append::AppendEntry;
use crate::replica::{Acks, AppendOrigin, ReplicaManager};

pub const STATE_TOPIC: &str = "__share_group_state";

/// How long a state write may wait for its replication (`share.coordinator.write.timeout.ms`).
const WRITE_TIMEOUT: Duration = Duration::from_millis(5_000);
/// How long a new leader of a state partition waits for its log to be committed before it
/// loads it (the caller retries COORDINATOR_LOAD_IN_PROGRESS).
const LOAD_WAIT: Duration = Duration::from_millis(5_000);

/// One record of `__share_group_state`: its key, and its value (none for a tombstone).
type StateRecord = (Vec<u8>, Option<Vec<u8>>);

/// The coordinator key of a share partition (Kafka's `SharePartitionKey.asCoordinatorKey`).
pub fn coordinator_key(group: &str, topic_id: &Uuid, partition: i32) -> String {
    format!(
        "{group}:{}:{partition}",
        sluice_protocol::base64::encode(topic_id.as_bytes())
    )
}

/// The `__share_group_state` partition of a share partition.
pub fn state_partition(group: &str, topic_id: &Uuid, partition: i32, partitions: i32) -> i32 {
    partition_for(&coordinator_key(group, topic_id, partition), partitions)
}

/// A share partition's persisted state, as ReadShareGroupState answers it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PersistedState {
    pub state_epoch: i32,
    pub leader_epoch: i32,
    pub start_offset: i64,
    pub batches: Vec<PersistedBatch>,
    /// Offsets from the start on already acknowledged or archived (-1: unknown).
    pub delivery_complete_count: i32,
}

/// A WriteShareGroupState of one share partition.
#[derive(Clone, Debug)]
pub struct StateWrite {
    pub state_epoch: i32,
    /// -1: not a partition leader's write (no fencing by leader epoch).
    pub leader_epoch: i32,
    /// -1: unchanged.
    pub start_offset: i64,
    pub batches: Vec<PersistedBatch>,
    pub delivery_complete_count: i32,
}

type Key = (String, Uuid, i32);

#[derive(Clone, Debug)]
struct Entry {
    /// The merged state, as the snapshot it would be written as.
    state: ShareSnapshotValue,
    /// Updates written since the last snapshot.
    updates: u32,
}

impl Entry {
    fn persisted(&self) -> PersistedState {
        PersistedState {
            state_epoch: self.state.state_epoch,
            leader_epoch: self.state.leader_epoch,
            start_offset: self.state.start_offset,
            batches: self.state.state_batches.clone(),
            delivery_complete_count: self.state.delivery_complete_count,
        }
    }

    /// Apply an update (as written or replayed).
    fn apply(&mut self, u: &ShareUpdateValue) {
        let s = &mut self.state;
        if u.leader_epoch != -1 {
            s.leader_epoch = s.leader_epoch.max(u.leader_epoch);
        }
        if u.start_offset != -1 {
            s.start_offset = u.start_offset;
        }
        s.state_batches = merge_batches(&s.state_batches, &u.state_batches, s.start_offset);
        if u.delivery_complete_count != -1 {
            s.delivery_complete_count = u.delivery_complete_count;
        }
        self.updates += 1;
    }
}

/// The states of one `__share_group_state` partition, loaded at `epoch` (-1: not loaded).
#[derive(Default)]
struct Shard {
    epoch: i32,
    states: HashMap<Key, Entry>,
}

/// The share coordinator of this broker.
pub struct ShareCoordinator {
    replicas: Arc<ReplicaManager>,
    /// `share.coordinator.state.topic.num.partitions`.
    pub partitions: i32,
    /// `share.coordinator.snapshot.update.records.per.snapshot`.
    per_snapshot: u32,
    shards: Mutex<HashMap<i32, Arc<tokio::sync::Mutex<Shard>>>>,
}

fn now_ms() -> i64 {
    crate::now_ms()
}

impl ShareCoordinator {
    pub fn new(replicas: Arc<ReplicaManager>, partitions: i32, per_snapshot: u32) -> Self {
        ShareCoordinator {
            replicas,
            partitions: partitions.max(1),
            per_snapshot: per_snapshot.max(1),
            shards: Mutex::new(HashMap::new()),
        }
    }

    /// From the broker config.
    pub fn from_config(
        replicas: Arc<ReplicaManager>,
        config: &sluice_metadata::BrokerConfig,
    ) -> Self {
        let int = |k: &str, d: i64| {
            config
                .value(k)
                .and_then(|v| v.trim().parse::<i64>().ok())
                .unwrap_or(d)
        };
        Self::new(
            replicas,
            int("share.coordinator.state.topic.num.partitions", 50).clamp(1, 100_000) as i32,
            int(
                "share.coordinator.snapshot.update.records.per.snapshot",
                500,
            )
            .clamp(1, 1 << 20) as u32,
        )
    }

    pub fn partition_of(&self, group: &str, topic_id: &Uuid, partition: i32) -> i32 {
        state_partition(group, topic_id, partition, self.partitions)
    }

    /// The loaded shard of state partition `p`, locked; NOT_COORDINATOR when this broker does
    /// not lead it, COORDINATOR_LOAD_IN_PROGRESS while its log is not yet committed.
    async fn shard(&self, p: i32) -> Result<OwnedMutexGuard<Shard>, ErrorCode> {
        let tp = TopicPartition::new(STATE_TOPIC, p);
        let epoch = self
            .replicas
            .leading_epoch(&tp)
            .ok_or(ErrorCode::NotCoordinator)?;
        let cell = {
            let mut shards = self.shards.lock().unwrap_or_else(|e| e.into_inner());
            Arc::clone(shards.entry(p).or_insert_with(|| {
                Arc::new(tokio::sync::Mutex::new(Shard {
                    epoch: -1,
                    states: HashMap::new(),
                }))
            }))
        };
        let mut shard = cell.lock_owned().await;
        if shard.epoch != epoch {
            shard.epoch = -1;
            shard.states.clear();
            match tokio::time::timeout(LOAD_WAIT, self.replicas.await_committed_log(&tp, epoch))
                .await
            {
                Err(_) => return Err(ErrorCode::CoordinatorLoadInProgress),
                Ok(false) => return Err(ErrorCode::NotCoordinator),
                Ok(true) => {}
            }
            let replicas = Arc::clone(&self.replicas);
            let states = sluice_rt::task::spawn_blocking(move || load(&replicas, p))
                .await
                .map_err(|_| ErrorCode::CoordinatorNotAvailable)?;
            tracing::info!(
                partition = p,
                epoch,
                states = states.len(),
                "share coordinator loaded {STATE_TOPIC}-{p}"
            );
            shard.states = states;
            shard.epoch = epoch;
        }
        Ok(shard)
    }

    /// Append `records` to state partition `p` and wait until they are committed. On any
    /// failure the shard is dropped, so the next request reloads what the log kept.
    async fn append(
        &self,
        shard: &mut Shard,
        p: i32,
        records: Vec<StateRecord>,
    ) -> Result<(), ErrorCode> {
        let tp = TopicPartition::new(STATE_TOPIC, p);
        let mut b = BatchBuilder::new(Compression::None);
        let now = now_ms();
        for (k, v) in &records {
            b.append(now, Some(k), v.as_deref(), &[]);
        }
        let bytes = b.build(0).map_err(|_| ErrorCode::UnknownServerError)?;
        let appended = self
            .replicas
            .append(
                AppendOrigin::Client,
                Acks::All,
                vec![AppendEntry {
                    tp,
                    records: Bytes::from(bytes),
                }],
            )
            .await
            .into_iter()
            .next()
            .ok_or(ErrorCode::UnknownServerError)?;
        let appended = match appended {
            Ok(a) => a,
            Err(e) => {
                shard.epoch = -1;
                return Err(match e.code() {
                    ErrorCode::NotLeaderOrFollower | ErrorCode::UnknownTopicOrPartition => {
                        ErrorCode::NotCoordinator
                    }
                    code => code,
                });
            }
        };
        let outcome = self
            .replicas
            .await_replication(&[&appended], WRITE_TIMEOUT)
            .await;
        match outcome.first().and_then(|o| o.error()) {
            None | Some(ErrorCode::NotEnoughReplicasAfterAppend) => Ok(()),
            Some(code) => {
                shard.epoch = -1;
                Err(match code {
                    ErrorCode::NotLeaderOrFollower => ErrorCode::NotCoordinator,
                    _ => ErrorCode::CoordinatorNotAvailable,
                })
            }
        }
    }

    /// ReadShareGroupState: the state of a share partition (None: none was written), its
    /// stored leader epoch raised to `leader_epoch` first.
    pub async fn read(
        &self,
        group: &str,
        topic_id: Uuid,
        partition: i32,
        leader_epoch: i32,
    ) -> Result<Option<PersistedState>, ErrorCode> {
        let p = self.partition_of(group, &topic_id, partition);
        let mut shard = self.shard(p).await?;
        let key: Key = (group.to_string(), topic_id, partition);
        let Some(entry) = shard.states.get(&key).cloned() else {
            return Ok(None);
        };
        if leader_epoch != -1 && leader_epoch < entry.state.leader_epoch {
            return Err(ErrorCode::FencedLeaderEpoch);
        }
        if leader_epoch > entry.state.leader_epoch {
            let update = ShareUpdateValue {
                snapshot_epoch: entry.state.snapshot_epoch,
                leader_epoch,
                start_offset: -1,
                state_batches: Vec::new(),
                delivery_complete_count: -1,
                tags: Vec::new(),
            };
            let (records, next) = self.records_for(&key, &entry, update);
            self.append(&mut shard, p, records).await?;
            shard.states.insert(key, next.clone());
            return Ok(Some(next.persisted()));
        }
        Ok(Some(entry.persisted()))
    }

    /// ReadShareGroupStateSummary: as [`Self::read`] without touching the leader epoch.
    pub async fn summary(
        &self,
        group: &str,
        topic_id: Uuid,
        partition: i32,
    ) -> Result<Option<PersistedState>, ErrorCode> {
        let p = self.partition_of(group, &topic_id, partition);
        let shard = self.shard(p).await?;
        Ok(shard
            .states
            .get(&(group.to_string(), topic_id, partition))
            .map(Entry::persisted))
    }

    /// WriteShareGroupState.
    pub async fn write(
        &self,
        group: &str,
        topic_id: Uuid,
        partition: i32,
        w: StateWrite,
    ) -> Result<(), ErrorCode> {
        let p = self.partition_of(group, &topic_id, partition);
        let mut shard = self.shard(p).await?;
        let key: Key = (group.to_string(), topic_id, partition);
        let (records, next) = match shard.states.get(&key) {
            None => {
                // The first write of a share partition is its first snapshot.
                let entry = fresh_entry(&w, 0);
                let records = vec![snapshot_record(&key, &entry.state)];
                (records, entry)
            }
            Some(entry) => {
                if w.leader_epoch != -1 && w.leader_epoch < entry.state.leader_epoch {
                    return Err(ErrorCode::FencedLeaderEpoch);
                }
                if w.state_epoch < entry.state.state_epoch {
                    return Err(ErrorCode::FencedStateEpoch);
                }
                let update = ShareUpdateValue {
                    snapshot_epoch: entry.state.snapshot_epoch,
                    leader_epoch: w.leader_epoch,
                    start_offset: w.start_offset,
                    state_batches: w.batches,
                    delivery_complete_count: w.delivery_complete_count,
                    tags: Vec::new(),
                };
                self.records_for(&key, entry, update)
            }
        };
        self.append(&mut shard, p, records).await?;
        shard.states.insert(key, next);
        Ok(())
    }

    /// InitializeShareGroupState: (re)start a share partition's state at `start_offset` with
    /// `state_epoch`, which must be above the stored one.
    pub async fn initialize(
        &self,
        group: &str,
        topic_id: Uuid,
        partition: i32,
        state_epoch: i32,
        start_offset: i64,
    ) -> Result<(), ErrorCode> {
        let p = self.partition_of(group, &topic_id, partition);
        let mut shard = self.shard(p).await?;
        let key: Key = (group.to_string(), topic_id, partition);
        let previous = shard.states.get(&key);
        if previous.is_some_and(|e| state_epoch <= e.state.state_epoch) {
            return Err(ErrorCode::FencedStateEpoch);
        }
        let snapshot_epoch = previous.map_or(0, |e| e.state.snapshot_epoch + 1);
        let leader_epoch = previous.map_or(-1, |e| e.state.leader_epoch);
        let mut entry = fresh_entry(
            &StateWrite {
                state_epoch,
                leader_epoch,
                start_offset,
                batches: Vec::new(),
                delivery_complete_count: 0,
            },
            snapshot_epoch,
        );
        entry.state.create_timestamp = now_ms();
        let records = vec![snapshot_record(&key, &entry.state)];
        self.append(&mut shard, p, records).await?;
        shard.states.insert(key, entry);
        Ok(())
    }

    /// DeleteShareGroupState: forget a share partition (tombstones for both its keys).
    pub async fn delete(
        &self,
        group: &str,
        topic_id: Uuid,
        partition: i32,
    ) -> Result<(), ErrorCode> {
        let p = self.partition_of(group, &topic_id, partition);
        let mut shard = self.shard(p).await?;
        let key: Key = (group.to_string(), topic_id, partition);
        if !shard.states.contains_key(&key) {
            return Ok(());
        }
        let records = [ShareStateRecord::Snapshot, ShareStateRecord::Update]
            .into_iter()
            .map(|kind| (state_key(&key, kind).encode(), None))
            .collect();
        self.append(&mut shard, p, records).await?;
        shard.states.remove(&key);
        Ok(())
    }

    /// The records for `update` over `entry`, and the entry after them: the update itself, or
    /// a snapshot of the merged state when enough updates were written since the last one.
    fn records_for(
        &self,
        key: &Key,
        entry: &Entry,
        update: ShareUpdateValue,
    ) -> (Vec<StateRecord>, Entry) {
        let mut next = entry.clone();
        next.apply(&update);
        next.state.write_timestamp = now_ms();
        if next.updates >= self.per_snapshot {
            next.state.snapshot_epoch += 1;
            next.updates = 0;
            (vec![snapshot_record(key, &next.state)], next)
        } else {
            let record = (
                state_key(key, ShareStateRecord::Update).encode(),
                Some(update.encode()),
            );
            (vec![record], next)
        }
    }
}

fn fresh_entry(w: &StateWrite, snapshot_epoch: i32) -> Entry {
    let start = w.start_offset.max(0);
    let now = now_ms();
    Entry {
        state: ShareSnapshotValue {
            snapshot_epoch,
            state_epoch: w.state_epoch,
            leader_epoch: w.leader_epoch,
            start_offset: start,
            create_timestamp: now,
            write_timestamp: now,
            state_batches: merge_batches(&[], &w.batches, start),
            delivery_complete_count: w.delivery_complete_count,
            tags: Vec::new(),
        },
        updates: 0,
    }
}

fn state_key(key: &Key, kind: ShareStateRecord) -> ShareStateKey {
    ShareStateKey {
        kind,
        group: key.0.clone(),
        topic_id: key.1,
        partition: key.2,
    }
}

fn snapshot_record(key: &Key, s: &ShareSnapshotValue) -> StateRecord {
    (
        state_key(key, ShareStateRecord::Snapshot).encode(),
        Some(s.encode()),
    )
}

/// Replay one state partition: each key's last snapshot, then the updates of its epoch.
fn load(replicas: &ReplicaManager, p: i32) -> HashMap<Key, Entry> {
    let mut states: HashMap<Key, Entry> = HashMap::new();
    replicas.scan(&TopicPartition::new(STATE_TOPIC, p), |h, bytes| {
        if h.is_control() {
            return;
        }
        let Ok(records) = decode_records(bytes, RecordLimits::default()) else {
            return;
        };
        for r in records {
            let Some(k) = r.key.as_deref().and_then(ShareStateKey::decode) else {
                continue;
            };
            replay(&mut states, k, r.value.as_deref());
        }
    });
    states
}

fn replay(states: &mut HashMap<Key, Entry>, k: ShareStateKey, value: Option<&[u8]>) {
    let key: Key = (k.group, k.topic_id, k.partition);
    match (k.kind, value) {
        (ShareStateRecord::Snapshot, None) => {
            states.remove(&key);
        }
        (ShareStateRecord::Snapshot, Some(v)) => {
            if let Some(state) = ShareSnapshotValue::decode(v) {
                states.insert(key, Entry { state, updates: 0 });
            }
        }
        (ShareStateRecord::Update, None) => {}
        (ShareStateRecord::Update, Some(v)) => {
            let (Some(u), Some(entry)) = (ShareUpdateValue::decode(v), states.get_mut(&key)) else {
                return;
            };
            // An update of an older snapshot is already in the newer one.
            if u.snapshot_epoch == entry.state.snapshot_epoch {
                entry.apply(&u);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn batch(first: i64, last: i64, state: i8, count: i16) -> PersistedBatch {
        PersistedBatch {
            first_offset: first,
            last_offset: last,
            delivery_state: state,
            delivery_count: count,
        }
    }

    #[test]
    fn the_coordinator_key_and_partition_are_kafkas() {
        let id = Uuid::from_bytes([0; 16]);
        assert_eq!(coordinator_key("g", &id, 3), "g:AAAAAAAAAAAAAAAAAAAAAA:3");
        let p = state_partition("g", &id, 3, 50);
        assert!((0..50).contains(&p));
        assert_eq!(p, partition_for("g:AAAAAAAAAAAAAAAAAAAAAA:3", 50));
    }

    #[test]
    fn replay_applies_updates_of_the_last_snapshot_only() {
        let id = Uuid::from_bytes([7; 16]);
        let key = |kind| ShareStateKey {
            kind,
            group: "g".into(),
            topic_id: id,
            partition: 0,
        };
        let snap = |epoch: i32, start: i64, batches: Vec<PersistedBatch>| ShareSnapshotValue {
            snapshot_epoch: epoch,
            state_epoch: 0,
            leader_epoch: 1,
            start_offset: start,
            create_timestamp: 0,
            write_timestamp: 0,
            state_batches: batches,
            delivery_complete_count: -1,
            tags: Vec::new(),
        };
        let update = |epoch: i32, start: i64, batches: Vec<PersistedBatch>| ShareUpdateValue {
            snapshot_epoch: epoch,
            leader_epoch: 2,
            start_offset: start,
            state_batches: batches,
            delivery_complete_count: -1,
            tags: Vec::new(),
        };
        let mut states = HashMap::new();
        replay(
            &mut states,
            key(ShareStateRecord::Snapshot),
            Some(&snap(0, 0, vec![batch(0, 9, 0, 1)]).encode()),
        );
        replay(
            &mut states,
            key(ShareStateRecord::Update),
            Some(&update(0, 5, vec![batch(5, 6, 2, 1)]).encode()),
        );
        // An update of an older snapshot (it reached the log after a newer snapshot's
        // replacement was written; cannot happen in order, but replay must not apply it).
        replay(
            &mut states,
            key(ShareStateRecord::Update),
            Some(&update(-1, 0, vec![batch(0, 9, 4, 3)]).encode()),
        );
        let e = &states[&("g".to_string(), id, 0)];
        assert_eq!(e.state.start_offset, 5);
        assert_eq!(e.state.leader_epoch, 2);
        assert_eq!(
            e.state.state_batches,
            vec![batch(5, 6, 2, 1), batch(7, 9, 0, 1)]
        );
        assert_eq!(e.updates, 1);
        // A tombstone forgets the key.
        replay(&mut states, key(ShareStateRecord::Snapshot), None);
        assert!(states.is_empty());
    }
}
