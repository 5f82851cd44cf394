//! [`SharePartitionState`]: one share group's view of one partition (KIP-932), as a pure
//! state machine driven by `(input, now_ms)`.
//!
//! The partition leader keeps one per (share group, partition) it serves. It tracks the
//! in-flight window from the share-partition start offset (SPSO, the first offset not yet in a
//! terminal state) to the end offset (one past the last offset taken from the log), and for
//! each offset in it: its [`RecordState`], its delivery count, and while acquired, the member
//! holding it and when that member's acquisition lock expires.
//!
//! Offsets are tracked one by one: the window is bounded by
//! `group.share.partition.max.record.locks` (default 2,000), so a slot per offset costs at
//! most a few tens of kilobytes and keeps every transition a single index. Kafka tracks
//! batches and splits them on partial acknowledgement; the states clients see are the same.
//!
//! Invariants (asserted in tests): `start <= end`; `slots.len() == end - start`; the first
//! slot, when there is one, is not terminal (the window starts at the SPSO); an acquired slot
//! has an owner and a deadline, no other slot has an owner.

use std::collections::VecDeque;
use std::sync::Arc;

use sluice_protocol::ErrorCode;

/// A record's delivery state, with Kafka's wire and persisted ids.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RecordState {
    Available = 0,
    Acquired = 1,
    Acknowledged = 2,
    Archived = 4,
}

impl RecordState {
    pub fn is_terminal(self) -> bool {
        matches!(self, RecordState::Acknowledged | RecordState::Archived)
    }

    pub fn id(self) -> i8 {
        self as i8
    }

    /// The state persisted under `id` (acquisitions are never persisted).
    pub fn from_persisted(id: i8) -> Option<Self> {
        match id {
            0 => Some(RecordState::Available),
            2 => Some(RecordState::Acknowledged),
            // 3 is ARCHIVING (a dead-letter queue still to be written): Sluice has none, so
            // such a record is as good as archived.
            3 | 4 => Some(RecordState::Archived),
            _ => None,
        }
    }
}

/// An acknowledgement type (ShareFetch/ShareAcknowledge `AcknowledgeTypes`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AckType {
    /// No record at this offset (a control record, a compacted or aborted one).
    Gap,
    Accept,
    Release,
    Reject,
    /// Keep the lock for another lock duration (ShareFetch/ShareAcknowledge v2).
    Renew,
}

impl AckType {
    pub fn from_wire(t: i8) -> Option<Self> {
        Some(match t {
            0 => AckType::Gap,
            1 => AckType::Accept,
            2 => AckType::Release,
            3 => AckType::Reject,
            4 => AckType::Renew,
            _ => return None,
        })
    }
}

/// A member's id as share sessions and locks name it.
pub type MemberId = Arc<str>;

#[derive(Clone, Debug, PartialEq, Eq)]
struct Slot {
    state: RecordState,
    delivery_count: i16,
    owner: Option<MemberId>,
    lock_deadline_ms: i64,
}

impl Slot {
    fn new(state: RecordState, delivery_count: i16) -> Self {
        Slot {
            state,
            delivery_count,
            owner: None,
            lock_deadline_ms: 0,
        }
    }
}

/// One log batch as the leader read it, for [`SharePartitionState::acquire`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LogBatch {
    pub base_offset: i64,
    pub last_offset: i64,
    /// A batch no consumer may see (an aborted transaction's, under read_committed): its
    /// offsets are archived at once instead of being handed out.
    pub skip: bool,
}

/// A run of offsets acquired by one fetch, all with the same delivery count (the
/// `AcquiredRecords` of a ShareFetch answer).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AcquiredRange {
    pub first_offset: i64,
    pub last_offset: i64,
    pub delivery_count: i16,
}

/// A run of offsets with one state and delivery count, as persisted
/// (`__share_group_state` StateBatches).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StateBatch {
    pub first_offset: i64,
    pub last_offset: i64,
    pub state: RecordState,
    pub delivery_count: i16,
}

/// The limits a share group puts on its partitions (group configs `share.*`, else the broker's
/// `group.share.*`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ShareLimits {
    /// `share.record.lock.duration.ms` (30,000).
    pub lock_duration_ms: i64,
    /// `share.delivery.count.limit` (5): a record released or timed out after this many
    /// deliveries is archived.
    pub delivery_count_limit: i16,
    /// `share.partition.max.record.locks` (2,000): the most offsets the window may span.
    pub max_record_locks: i64,
}

impl Default for ShareLimits {
    fn default() -> Self {
        ShareLimits {
            lock_duration_ms: 30_000,
            delivery_count_limit: 5,
            max_record_locks: 2_000,
        }
    }
}

/// What a fetch may acquire.
#[derive(Clone, Copy, Debug)]
pub struct AcquireLimits {
    /// Soft: the batch that crosses it is still acquired whole (`batch_optimized`).
    pub max_records: i64,
}

/// What an acknowledgement or expiry changed, for the shell: persist when `changed`, wake
/// waiting fetches when records became available.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Changed {
    pub changed: bool,
    pub released: bool,
}

impl Changed {
    fn merge(&mut self, other: Changed) {
        self.changed |= other.changed;
        self.released |= other.released;
    }
}

/// One share group's in-flight window over one partition.
#[derive(Clone, Debug)]
pub struct SharePartitionState {
    start: i64,
    slots: VecDeque<Slot>,
    pub limits: ShareLimits,
}

impl SharePartitionState {
    /// A window starting (empty) at `start_offset`.
    pub fn new(start_offset: i64, limits: ShareLimits) -> Self {
        SharePartitionState {
            start: start_offset.max(0),
            slots: VecDeque::new(),
            limits,
        }
    }

    /// The window as persisted: `start_offset` and the state batches from it on (anything
    /// not named is available with no deliveries, so batches may leave gaps).
    pub fn restore(start_offset: i64, batches: &[StateBatch], limits: ShareLimits) -> Self {
        let mut s = SharePartitionState::new(start_offset, limits);
        let mut sorted: Vec<StateBatch> = batches
            .iter()
            .copied()
            .filter(|b| b.last_offset >= s.start && b.first_offset <= b.last_offset)
            .collect();
        sorted.sort_by_key(|b| b.first_offset);
        for b in sorted {
            let first = b.first_offset.max(s.start);
            // A persisted window never spans more than the lock limit; a corrupt one that
            // claims to is cut rather than allowed to allocate without bound.
            let last = b
                .last_offset
                .min(s.start + limits.max_record_locks.max(1) * 4);
            for offset in first..=last {
                s.extend_to(offset + 1, RecordState::Available);
                let slot = s.slot_mut(offset).expect("extended above");
                slot.state = b.state;
                slot.delivery_count = b.delivery_count.max(0);
            }
        }
        s.advance();
        s
    }

    /// The share-partition start offset (SPSO).
    pub fn start_offset(&self) -> i64 {
        self.start
    }

    /// One past the last offset taken from the log.
    pub fn end_offset(&self) -> i64 {
        self.start + self.slots.len() as i64
    }

    /// Where the next fetch reads the log from: the first available offset in the window,
    /// else its end.
    pub fn next_fetch_offset(&self) -> i64 {
        self.slots
            .iter()
            .position(|s| s.state == RecordState::Available)
            .map_or(self.end_offset(), |i| self.start + i as i64)
    }

    /// Whether a fetch could acquire anything: a record available in the window, or room to
    /// take new ones from the log (whether the log has any is the caller's question).
    pub fn can_acquire(&self) -> bool {
        self.slots.iter().any(|s| s.state == RecordState::Available) || self.has_room()
    }

    fn has_room(&self) -> bool {
        (self.slots.len() as i64) < self.limits.max_record_locks
    }

    /// The state of `offset` (None outside the window: below it everything is terminal,
    /// above it nothing has been read).
    pub fn state_of(&self, offset: i64) -> Option<(RecordState, i16)> {
        self.slot(offset).map(|s| (s.state, s.delivery_count))
    }

    /// Records acquired now, held by anyone.
    pub fn acquired_count(&self) -> usize {
        self.slots
            .iter()
            .filter(|s| s.state == RecordState::Acquired)
            .count()
    }

    /// Offsets in the window already acknowledged or archived (Kafka's
    /// DeliveryCompleteCount, which lag subtracts).
    pub fn delivery_complete_count(&self) -> i64 {
        self.slots.iter().filter(|s| s.state.is_terminal()).count() as i64
    }

    /// The earliest acquisition lock deadline (None: nothing acquired).
    pub fn next_deadline_ms(&self) -> Option<i64> {
        self.slots
            .iter()
            .filter(|s| s.state == RecordState::Acquired)
            .map(|s| s.lock_deadline_ms)
            .min()
    }

    fn slot(&self, offset: i64) -> Option<&Slot> {
        let i = usize::try_from(offset.checked_sub(self.start)?).ok()?;
        self.slots.get(i)
    }

    fn slot_mut(&mut self, offset: i64) -> Option<&mut Slot> {
        let i = usize::try_from(offset.checked_sub(self.start)?).ok()?;
        self.slots.get_mut(i)
    }

    /// Grow the window to end at `end` (exclusive), new slots in `state`.
    fn extend_to(&mut self, end: i64, state: RecordState) {
        while self.end_offset() < end {
            self.slots.push_back(Slot::new(state, 0));
        }
    }

    /// Acquire for `member` what `batches` (read from the log at
    /// [`Self::next_fetch_offset`], in offset order) offer: available records in the window
    /// first, then new records past its end while the window has room. Whole batches are
    /// taken until `limits.max_records` is reached. Returns the acquired runs.
    pub fn acquire(
        &mut self,
        member: &MemberId,
        batches: &[LogBatch],
        limits: AcquireLimits,
        now_ms: i64,
    ) -> Vec<AcquiredRange> {
        let deadline = now_ms.saturating_add(self.limits.lock_duration_ms);
        let mut out: Vec<AcquiredRange> = Vec::new();
        let mut taken = 0i64;
        for b in batches {
            if taken >= limits.max_records.max(1) {
                break;
            }
            if b.last_offset < self.start || b.last_offset < b.base_offset {
                continue;
            }
            let end = self.end_offset();
            if b.last_offset >= end {
                if !self.has_room() && b.base_offset >= end {
                    break;
                }
                // Offsets the log skips (compacted away) are nobody's to deliver.
                self.extend_to(b.base_offset.max(end), RecordState::Archived);
                let state = if b.skip {
                    RecordState::Archived
                } else {
                    RecordState::Available
                };
                self.extend_to(b.last_offset + 1, state);
            }
            for offset in b.base_offset.max(self.start)..=b.last_offset {
                let Some(slot) = self.slot_mut(offset) else {
                    continue;
                };
                if slot.state != RecordState::Available {
                    continue;
                }
                if b.skip {
                    slot.state = RecordState::Archived;
                    continue;
                }
                slot.state = RecordState::Acquired;
                slot.delivery_count = slot.delivery_count.saturating_add(1);
                slot.owner = Some(member.clone());
                slot.lock_deadline_ms = deadline;
                taken += 1;
                let dc = slot.delivery_count;
                match out.last_mut() {
                    Some(r) if r.last_offset + 1 == offset && r.delivery_count == dc => {
                        r.last_offset = offset;
                    }
                    _ => out.push(AcquiredRange {
                        first_offset: offset,
                        last_offset: offset,
                        delivery_count: dc,
                    }),
                }
            }
        }
        self.advance();
        out
    }

    /// Apply one acknowledgement batch from `member`: `types` has one type for the whole
    /// range or one per offset. All or nothing: INVALID_REQUEST for a malformed batch or one
    /// reaching past the window, INVALID_RECORD_STATE when an offset is not acquired by
    /// `member`.
    pub fn acknowledge(
        &mut self,
        member: &str,
        first_offset: i64,
        last_offset: i64,
        types: &[i8],
        now_ms: i64,
    ) -> Result<Changed, ErrorCode> {
        let count = last_offset
            .checked_sub(first_offset)
            .and_then(|d| d.checked_add(1))
            .filter(|c| *c > 0)
            .ok_or(ErrorCode::InvalidRequest)?;
        if types.is_empty() || (types.len() > 1 && types.len() as i64 != count) {
            return Err(ErrorCode::InvalidRequest);
        }
        let types: Vec<AckType> = types
            .iter()
            .map(|t| AckType::from_wire(*t).ok_or(ErrorCode::InvalidRequest))
            .collect::<Result<_, _>>()?;
        if last_offset >= self.end_offset() {
            return Err(ErrorCode::InvalidRequest);
        }
        let type_at = |offset: i64| {
            if types.len() == 1 {
                types[0]
            } else {
                types[(offset - first_offset) as usize]
            }
        };
        for offset in first_offset..=last_offset {
            // A gap acknowledges an offset with no record: it may be one the window has
            // already archived itself (an aborted or compacted-away offset).
            let ok = match self.slot(offset) {
                Some(s) if s.state == RecordState::Acquired => s.owner.as_deref() == Some(member),
                Some(s) => type_at(offset) == AckType::Gap && s.state == RecordState::Archived,
                None => type_at(offset) == AckType::Gap && offset < self.start,
            };
            if !ok {
                return Err(ErrorCode::InvalidRecordState);
            }
        }
        let mut changed = Changed::default();
        for offset in first_offset..=last_offset {
            let ack = type_at(offset);
            changed.merge(self.apply(offset, ack, now_ms));
        }
        self.advance();
        Ok(changed)
    }

    fn apply(&mut self, offset: i64, ack: AckType, now_ms: i64) -> Changed {
        let lock_ms = self.limits.lock_duration_ms;
        let limit = self.limits.delivery_count_limit;
        let Some(slot) = self.slot_mut(offset) else {
            return Changed::default();
        };
        if slot.state != RecordState::Acquired {
            return Changed::default();
        }
        match ack {
            AckType::Renew => {
                slot.lock_deadline_ms = now_ms.saturating_add(lock_ms);
                Changed::default()
            }
            AckType::Accept => Self::finish(slot, RecordState::Acknowledged),
            AckType::Gap | AckType::Reject => Self::finish(slot, RecordState::Archived),
            AckType::Release => Self::release(slot, limit),
        }
    }

    fn finish(slot: &mut Slot, state: RecordState) -> Changed {
        slot.state = state;
        slot.owner = None;
        Changed {
            changed: true,
            released: false,
        }
    }

    /// Give an acquired record back: available again, or archived once it has been
    /// delivered `limit` times.
    fn release(slot: &mut Slot, limit: i16) -> Changed {
        slot.owner = None;
        if slot.delivery_count >= limit {
            slot.state = RecordState::Archived;
            Changed {
                changed: true,
                released: false,
            }
        } else {
            slot.state = RecordState::Available;
            Changed {
                changed: true,
                released: true,
            }
        }
    }

    /// Release every record whose acquisition lock expired by `now_ms`.
    pub fn expire_locks(&mut self, now_ms: i64) -> Changed {
        self.release_where(|s| s.lock_deadline_ms <= now_ms)
    }

    /// Release every record `member` holds (its share session closed or its connection
    /// dropped).
    pub fn release_member(&mut self, member: &str) -> Changed {
        self.release_where(|s| s.owner.as_deref() == Some(member))
    }

    fn release_where(&mut self, pick: impl Fn(&Slot) -> bool) -> Changed {
        let limit = self.limits.delivery_count_limit;
        let mut changed = Changed::default();
        for slot in self.slots.iter_mut() {
            if slot.state == RecordState::Acquired && pick(slot) {
                changed.merge(Self::release(slot, limit));
            }
        }
        self.advance();
        changed
    }

    /// The log start moved to `log_start` (retention, DeleteRecords): offsets below it are
    /// gone, whatever their state. A start offset beyond the log end (the log was truncated
    /// or recreated) is also moved back, to `log_end`.
    pub fn log_moved(&mut self, log_start: i64, log_end: i64) -> bool {
        if self.start > log_end && self.slots.is_empty() {
            self.start = log_end.max(0);
            return true;
        }
        if log_start <= self.start {
            return false;
        }
        while self.start < log_start {
            if self.slots.pop_front().is_none() {
                self.start = log_start;
                break;
            }
            self.start += 1;
        }
        self.advance();
        true
    }

    /// Move the SPSO past the leading run of terminal records.
    fn advance(&mut self) {
        while self.slots.front().is_some_and(|s| s.state.is_terminal()) {
            self.slots.pop_front();
            self.start += 1;
        }
    }

    /// The window as state batches to persist: runs of equal state and delivery count, an
    /// acquired record persisted as available (acquisition is never persisted: after a
    /// failover it is delivered again).
    pub fn state_batches(&self) -> Vec<StateBatch> {
        let mut out: Vec<StateBatch> = Vec::new();
        for (i, s) in self.slots.iter().enumerate() {
            let offset = self.start + i as i64;
            let state = match s.state {
                RecordState::Acquired => RecordState::Available,
                other => other,
            };
            if state == RecordState::Available && s.delivery_count == 0 {
                continue;
            }
            match out.last_mut() {
                Some(b)
                    if b.last_offset + 1 == offset
                        && b.state == state
                        && b.delivery_count == s.delivery_count =>
                {
                    b.last_offset = offset;
                }
                _ => out.push(StateBatch {
                    first_offset: offset,
                    last_offset: offset,
                    state,
                    delivery_count: s.delivery_count,
                }),
            }
        }
        out
    }

    #[cfg(test)]
    pub(crate) fn check_invariants(&self) {
        if let Some(first) = self.slots.front() {
            assert!(!first.state.is_terminal(), "the window starts at the SPSO");
        }
        for s in &self.slots {
            assert_eq!(
                s.state == RecordState::Acquired,
                s.owner.is_some(),
                "only acquired records have an owner"
            );
        }
    }
}

#[cfg(test)]
mod tests;
