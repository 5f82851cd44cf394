//! One transactional id's state (Kafka's `TransactionMetadata`): its producer id and epoch,
//! the partitions of the open transaction, and the state that says what the coordinator does
//! next. Transactions v1 and v2 (KIP-890 part 2) share it: a v2 client's EndTxn
//! ([`TxnMetadata::end_v2`]) bumps the epoch of every transaction it ends, so nothing its
//! producer wrote under the old epoch can join the next transaction. Pure, with time passed in: the coordinator persists each change in
//! `__transaction_state` before it answers, and for `PrepareCommit`/`PrepareAbort` writes the
//! markers to `partitions`, then calls [`TxnMetadata::complete`].

use std::collections::BTreeSet;

use sluice_protocol::ErrorCode;

/// The states, with Kafka's ids and names (as DescribeTransactions and the log show them).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TxnState {
    Empty,
    Ongoing,
    PrepareCommit,
    PrepareAbort,
    CompleteCommit,
    CompleteAbort,
    Dead,
    PrepareEpochFence,
}

impl TxnState {
    pub fn id(self) -> u8 {
        self as u8
    }

    /// Every state, in id order.
    pub const ALL: [TxnState; 8] = [
        TxnState::Empty,
        TxnState::Ongoing,
        TxnState::PrepareCommit,
        TxnState::PrepareAbort,
        TxnState::CompleteCommit,
        TxnState::CompleteAbort,
        TxnState::Dead,
        TxnState::PrepareEpochFence,
    ];

    pub fn from_id(id: u8) -> Option<TxnState> {
        Self::ALL.get(usize::from(id)).copied()
    }

    pub fn name(self) -> &'static str {
        match self {
            TxnState::Empty => "Empty",
            TxnState::Ongoing => "Ongoing",
            TxnState::PrepareCommit => "PrepareCommit",
            TxnState::PrepareAbort => "PrepareAbort",
            TxnState::CompleteCommit => "CompleteCommit",
            TxnState::CompleteAbort => "CompleteAbort",
            TxnState::Dead => "Dead",
            TxnState::PrepareEpochFence => "PrepareEpochFence",
        }
    }

    /// Kafka's `validPreviousStates`.
    pub fn may_follow(self, previous: TxnState) -> bool {
        use TxnState::*;
        let allowed: &[TxnState] = match self {
            Empty => &[Empty, CompleteCommit, CompleteAbort],
            Ongoing => &[Ongoing, Empty, CompleteCommit, CompleteAbort],
            PrepareCommit => &[Ongoing],
            // A v2 client may abort with nothing open (to bump its epoch).
            PrepareAbort => &[
                Ongoing,
                PrepareEpochFence,
                Empty,
                CompleteCommit,
                CompleteAbort,
            ],
            CompleteCommit => &[PrepareCommit],
            CompleteAbort => &[PrepareAbort],
            Dead => &[Empty, CompleteAbort, CompleteCommit],
            PrepareEpochFence => &[Ongoing],
        };
        allowed.contains(&previous)
    }
}

/// Why a request is refused; each is the Kafka error code of the same name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TxnError {
    InvalidProducerIdMapping,
    ProducerFenced,
    ConcurrentTransactions,
    InvalidTxnState,
}

impl TxnError {
    pub fn code(self) -> ErrorCode {
        match self {
            TxnError::InvalidProducerIdMapping => ErrorCode::InvalidProducerIdMapping,
            TxnError::ProducerFenced => ErrorCode::ProducerFenced,
            TxnError::ConcurrentTransactions => ErrorCode::ConcurrentTransactions,
            TxnError::InvalidTxnState => ErrorCode::InvalidTxnState,
        }
    }
}

/// Past this epoch a producer id is retired and the transactional id gets a new one.
pub const MAX_EPOCH: i16 = i16::MAX - 1;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TxnMetadata {
    pub transactional_id: String,
    pub producer_id: i64,
    pub producer_epoch: i16,
    /// `transaction.timeout.ms` the producer asked for.
    pub timeout_ms: i64,
    pub state: TxnState,
    /// (topic, partition) written in the open transaction.
    pub partitions: BTreeSet<(String, i32)>,
    /// When the open transaction began (its first partition), -1 when none is open.
    pub txn_start_ms: i64,
    pub last_update_ms: i64,
    /// The producer id before the last one the id was given when an epoch ran out (-1: none):
    /// a v2 client retrying the EndTxn that moved it still presents it.
    pub previous_producer_id: i64,
    /// The producer id a v2 EndTxn gave out when the epoch ran out, taken on completion
    /// (-1: none). Until then the markers go out under the old id, at epoch `i16::MAX`.
    pub next_producer_id: i64,
    /// The transactions version (KIP-890) of the client's last request that changed the
    /// transaction: 2 for v2, else 0.
    pub client_version: i16,
}

impl TxnMetadata {
    /// A transactional id seen for the first time (epoch -1: the first InitProducerId makes
    /// it 0).
    pub fn new(transactional_id: &str, producer_id: i64, timeout_ms: i64, now_ms: i64) -> Self {
        Self {
            transactional_id: transactional_id.to_string(),
            producer_id,
            producer_epoch: -1,
            timeout_ms,
            state: TxnState::Empty,
            partitions: BTreeSet::new(),
            txn_start_ms: -1,
            last_update_ms: now_ms,
            previous_producer_id: -1,
            next_producer_id: -1,
            client_version: 0,
        }
    }

    fn go(&mut self, next: TxnState, now_ms: i64) -> Result<(), TxnError> {
        if !next.may_follow(self.state) {
            return Err(TxnError::InvalidTxnState);
        }
        self.state = next;
        self.last_update_ms = now_ms;
        Ok(())
    }

    /// A new epoch (or a new producer id once the epoch is exhausted).
    fn bump_epoch(&mut self, new_producer_id: impl FnOnce() -> i64) {
        if self.producer_epoch >= MAX_EPOCH {
            self.producer_id = new_producer_id();
            self.producer_epoch = 0;
        } else {
            self.producer_epoch += 1;
        }
    }

    /// InitProducerId: a producer (re)starts. Between transactions it gets the next epoch,
    /// which fences every older instance. With a transaction open, that transaction is
    /// aborted first (the epoch moves, the state becomes PrepareAbort: the coordinator
    /// writes abort markers) and the caller is told to retry (CONCURRENT_TRANSACTIONS).
    /// `expected`: the producer id and epoch a restarting producer presents (KIP-360).
    pub fn init_producer_id(
        &mut self,
        timeout_ms: i64,
        expected: Option<(i64, i16)>,
        now_ms: i64,
        new_producer_id: impl FnOnce() -> i64,
    ) -> Result<(i64, i16), TxnError> {
        if let Some((id, epoch)) = expected {
            self.ahead_of_completion(id)?;
            if self.producer_epoch >= 0 && (id != self.producer_id || epoch != self.producer_epoch)
            {
                return Err(TxnError::ProducerFenced);
            }
        }
        match self.state {
            TxnState::PrepareCommit | TxnState::PrepareAbort => {
                Err(TxnError::ConcurrentTransactions)
            }
            TxnState::Empty | TxnState::CompleteCommit | TxnState::CompleteAbort => {
                self.bump_epoch(new_producer_id);
                self.go(TxnState::Empty, now_ms)?;
                self.timeout_ms = timeout_ms;
                self.partitions.clear();
                self.txn_start_ms = -1;
                Ok((self.producer_id, self.producer_epoch))
            }
            TxnState::Ongoing => {
                self.fence_and_abort(now_ms)?;
                Err(TxnError::ConcurrentTransactions)
            }
            TxnState::Dead | TxnState::PrepareEpochFence => Err(TxnError::InvalidTxnState),
        }
    }

    /// Bump the epoch of an open transaction and abort it: a zombie holding the old epoch
    /// can no longer add to it or end it.
    fn fence_and_abort(&mut self, now_ms: i64) -> Result<(), TxnError> {
        self.go(TxnState::PrepareEpochFence, now_ms)?;
        // The epoch of an open transaction is never exhausted here: fencing only increments
        // (a retrying InitProducerId rotates the id when it must).
        self.producer_epoch = self.producer_epoch.saturating_add(1);
        self.go(TxnState::PrepareAbort, now_ms)
    }

    /// A request from the producer id a v2 end moved the producer to, before that end's
    /// markers are written: it waits (CONCURRENT_TRANSACTIONS), as in Kafka, whose pending
    /// state holds the new id until then.
    fn ahead_of_completion(&self, producer_id: i64) -> Result<(), TxnError> {
        if self.next_producer_id >= 0 && producer_id == self.next_producer_id {
            return Err(TxnError::ConcurrentTransactions);
        }
        Ok(())
    }

    fn check_producer(&self, producer_id: i64, epoch: i16) -> Result<(), TxnError> {
        self.ahead_of_completion(producer_id)?;
        if producer_id != self.producer_id {
            return Err(TxnError::InvalidProducerIdMapping);
        }
        if epoch != self.producer_epoch {
            return Err(TxnError::ProducerFenced);
        }
        Ok(())
    }

    /// AddPartitionsToTxn / AddOffsetsToTxn: the transaction writes these partitions (it
    /// opens with the first).
    pub fn add_partitions(
        &mut self,
        producer_id: i64,
        epoch: i16,
        partitions: &[(String, i32)],
        now_ms: i64,
    ) -> Result<(), TxnError> {
        self.check_producer(producer_id, epoch)?;
        match self.state {
            TxnState::PrepareCommit | TxnState::PrepareAbort => {
                return Err(TxnError::ConcurrentTransactions)
            }
            TxnState::Dead | TxnState::PrepareEpochFence => return Err(TxnError::InvalidTxnState),
            _ => {}
        }
        if self.state != TxnState::Ongoing {
            self.txn_start_ms = now_ms;
        }
        self.go(TxnState::Ongoing, now_ms)?;
        self.partitions.extend(partitions.iter().cloned());
        Ok(())
    }

    /// EndTxn: commit or abort the open transaction (PrepareCommit / PrepareAbort; the
    /// coordinator then writes the markers). A retry of a finished end is answered Ok.
    pub fn end(
        &mut self,
        producer_id: i64,
        epoch: i16,
        commit: bool,
        now_ms: i64,
    ) -> Result<(), TxnError> {
        self.check_producer(producer_id, epoch)?;
        match (self.state, commit) {
            (TxnState::Ongoing, true) => self.go(TxnState::PrepareCommit, now_ms),
            (TxnState::Ongoing, false) => self.go(TxnState::PrepareAbort, now_ms),
            (TxnState::CompleteCommit, true) | (TxnState::CompleteAbort, false) => Ok(()),
            (TxnState::PrepareCommit, true) | (TxnState::PrepareAbort, false) => {
                Err(TxnError::ConcurrentTransactions)
            }
            _ => Err(TxnError::InvalidTxnState),
        }
    }

    /// Every marker is written: the transaction is complete.
    pub fn complete(&mut self, now_ms: i64) -> Result<(), TxnError> {
        let next = match self.state {
            TxnState::PrepareCommit => TxnState::CompleteCommit,
            TxnState::PrepareAbort => TxnState::CompleteAbort,
            _ => return Err(TxnError::InvalidTxnState),
        };
        self.go(next, now_ms)?;
        self.partitions.clear();
        self.txn_start_ms = -1;
        if self.next_producer_id >= 0 {
            self.previous_producer_id = self.producer_id;
            self.producer_id = self.next_producer_id;
            self.producer_epoch = 0;
            self.next_producer_id = -1;
        }
        Ok(())
    }

    /// The producer id and epoch the producer uses once the transaction being ended is
    /// complete: the id a run-out epoch moved it to, or the current ones.
    pub fn producer_after_completion(&self) -> (i64, i16) {
        if self.next_producer_id >= 0 {
            (self.next_producer_id, 0)
        } else {
            (self.producer_id, self.producer_epoch)
        }
    }

    /// EndTxn from a transactions-v2 client (v5+): commit or abort under a new epoch, which
    /// the markers carry and the answer gives the producer (or a new producer id when the
    /// epoch ran out: `fresh`, needed only then). Kafka's rules, in its order:
    /// - a retry presents the epoch before the bump (or, across a change of producer id, the
    ///   previous id at the last epoch): answered with the current id and epoch when that
    ///   end is complete, CONCURRENT_TRANSACTIONS while its markers are written;
    /// - an abort with no transaction open still bumps the epoch; a commit is refused.
    pub fn end_v2(
        &mut self,
        producer_id: i64,
        epoch: i16,
        commit: bool,
        now_ms: i64,
        fresh: Option<i64>,
    ) -> Result<(i64, i16), TxnError> {
        use TxnState::*;
        self.ahead_of_completion(producer_id)?;
        let retry_on_bump = producer_id == self.producer_id
            && i32::from(epoch) + 1 == i32::from(self.producer_epoch);
        let retry_on_overflow = self.previous_producer_id == producer_id
            && producer_id != self.producer_id
            && epoch == MAX_EPOCH
            && self.producer_epoch == 0;
        if producer_id != self.producer_id && !retry_on_overflow {
            return Err(TxnError::InvalidProducerIdMapping);
        }
        let valid_epoch = match self.state {
            Ongoing | Empty => epoch == self.producer_epoch,
            PrepareCommit | PrepareAbort => retry_on_bump,
            CompleteCommit | CompleteAbort => {
                retry_on_bump || retry_on_overflow || epoch == self.producer_epoch
            }
            Dead | PrepareEpochFence => return Err(TxnError::ConcurrentTransactions),
        };
        if !valid_epoch {
            return Err(TxnError::ProducerFenced);
        }
        let retry = retry_on_bump || retry_on_overflow;
        match (self.state, commit) {
            (PrepareCommit, true) | (PrepareAbort, false) => {
                return Err(TxnError::ConcurrentTransactions)
            }
            (PrepareCommit, false) | (PrepareAbort, true) => return Err(TxnError::InvalidTxnState),
            (CompleteCommit, true) | (CompleteAbort, false) if retry => {
                return Ok((self.producer_id, self.producer_epoch))
            }
            (Ongoing, _) | (Empty | CompleteCommit | CompleteAbort, false) if !retry => {}
            _ => return Err(TxnError::InvalidTxnState),
        }
        if self.producer_epoch >= MAX_EPOCH {
            // The id is used up: the markers go out under it at the last epoch, then the
            // producer continues with a new one.
            self.next_producer_id = fresh.ok_or(TxnError::ConcurrentTransactions)?;
            self.producer_epoch = i16::MAX;
        } else {
            self.producer_epoch += 1;
        }
        if self.state != Ongoing {
            // An abort with nothing open: an empty transaction, begun now.
            self.partitions.clear();
            self.txn_start_ms = now_ms;
        }
        self.client_version = 2;
        self.go(if commit { PrepareCommit } else { PrepareAbort }, now_ms)?;
        Ok(self.producer_after_completion())
    }

    /// An open transaction that has been open for longer than its timeout
    /// (`transaction.timeout.ms`). The caller measures `open_ms` on a monotonic clock:
    /// `txn_start_ms` is wall-clock time, which a clock step would stretch or shrink.
    pub fn timed_out(&self, open_ms: i64) -> bool {
        self.state == TxnState::Ongoing && open_ms > self.timeout_ms
    }

    /// Abort a timed-out transaction (open for `open_ms`), fencing its producer's epoch.
    pub fn abort_timed_out(&mut self, open_ms: i64, now_ms: i64) -> Result<(), TxnError> {
        if !self.timed_out(open_ms) {
            return Err(TxnError::InvalidTxnState);
        }
        self.fence_and_abort(now_ms)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tp(p: i32) -> (String, i32) {
        ("out".to_string(), p)
    }

    #[test]
    fn ids_and_names_are_kafkas() {
        let all = TxnState::ALL;
        for (i, s) in all.iter().enumerate() {
            assert_eq!(s.id() as usize, i);
            assert_eq!(TxnState::from_id(i as u8), Some(*s));
        }
        assert_eq!(TxnState::from_id(8), None);
        assert_eq!(TxnState::PrepareEpochFence.name(), "PrepareEpochFence");
        assert!(TxnState::CompleteCommit.may_follow(TxnState::PrepareCommit));
        assert!(!TxnState::CompleteCommit.may_follow(TxnState::Ongoing));
        assert!(!TxnState::PrepareCommit.may_follow(TxnState::Empty));
    }

    #[test]
    fn commit_then_abort_with_retries() {
        let mut t = TxnMetadata::new("tx", 100, 60_000, 0);
        assert_eq!(t.init_producer_id(60_000, None, 1, || 0), Ok((100, 0)));
        // Ending with nothing open is refused.
        assert_eq!(t.end(100, 0, true, 2), Err(TxnError::InvalidTxnState));
        t.add_partitions(100, 0, &[tp(0), tp(1)], 3).unwrap();
        assert_eq!((t.state, t.txn_start_ms), (TxnState::Ongoing, 3));
        t.add_partitions(100, 0, &[tp(1), tp(2)], 4).unwrap();
        assert_eq!(t.partitions.len(), 3);
        assert_eq!(
            t.txn_start_ms, 3,
            "the transaction began with its first partition"
        );
        t.end(100, 0, true, 5).unwrap();
        assert_eq!(t.state, TxnState::PrepareCommit);
        // While markers are written: a retry waits, the other outcome is refused, and so
        // is adding.
        assert_eq!(
            t.end(100, 0, true, 6),
            Err(TxnError::ConcurrentTransactions)
        );
        assert_eq!(t.end(100, 0, false, 6), Err(TxnError::InvalidTxnState));
        assert_eq!(
            t.add_partitions(100, 0, &[tp(3)], 6),
            Err(TxnError::ConcurrentTransactions)
        );
        t.complete(7).unwrap();
        assert_eq!(t.state, TxnState::CompleteCommit);
        assert!(t.partitions.is_empty());
        assert_eq!(
            t.end(100, 0, true, 8),
            Ok(()),
            "a retried commit is answered Ok"
        );
        // The next transaction, aborted.
        t.add_partitions(100, 0, &[tp(0)], 9).unwrap();
        t.end(100, 0, false, 10).unwrap();
        t.complete(11).unwrap();
        assert_eq!(t.state, TxnState::CompleteAbort);
        assert_eq!(t.complete(12), Err(TxnError::InvalidTxnState));
    }

    #[test]
    fn a_new_instance_fences_the_old_one_and_aborts_its_transaction() {
        let mut t = TxnMetadata::new("tx", 100, 60_000, 0);
        t.init_producer_id(60_000, None, 0, || 0).unwrap();
        t.add_partitions(100, 0, &[tp(0)], 1).unwrap();
        // A second instance starts while the first has a transaction open: it is aborted
        // under a new epoch and the newcomer retries.
        assert_eq!(
            t.init_producer_id(60_000, None, 2, || 0),
            Err(TxnError::ConcurrentTransactions)
        );
        assert_eq!((t.state, t.producer_epoch), (TxnState::PrepareAbort, 1));
        assert_eq!(
            t.partitions.len(),
            1,
            "the markers still go to its partitions"
        );
        // The zombie can neither add nor end.
        assert_eq!(
            t.add_partitions(100, 0, &[tp(1)], 3),
            Err(TxnError::ProducerFenced)
        );
        assert_eq!(t.end(100, 0, true, 3), Err(TxnError::ProducerFenced));
        assert_eq!(
            t.end(7, 1, true, 3),
            Err(TxnError::InvalidProducerIdMapping)
        );
        assert_eq!(
            t.init_producer_id(60_000, None, 3, || 0),
            Err(TxnError::ConcurrentTransactions)
        );
        t.complete(4).unwrap();
        assert_eq!(t.init_producer_id(60_000, None, 5, || 0), Ok((100, 2)));
        // KIP-360: a producer presenting an older epoch is fenced.
        assert_eq!(
            t.init_producer_id(60_000, Some((100, 1)), 6, || 0),
            Err(TxnError::ProducerFenced)
        );
        assert_eq!(
            t.init_producer_id(60_000, Some((100, 2)), 6, || 0),
            Ok((100, 3))
        );
    }

    #[test]
    fn v2_ends_bump_the_epoch_and_answer_retries_as_kafka() {
        let mut t = TxnMetadata::new("tx", 100, 60_000, 0);
        t.init_producer_id(60_000, None, 0, || 0).unwrap();
        // Committing with nothing open is refused; aborting bumps the epoch all the same.
        assert_eq!(
            t.end_v2(100, 0, true, 1, None),
            Err(TxnError::InvalidTxnState)
        );
        assert_eq!(t.end_v2(100, 0, false, 1, None), Ok((100, 1)));
        assert_eq!((t.state, t.partitions.len()), (TxnState::PrepareAbort, 0));
        t.complete(2).unwrap();
        assert_eq!(t.state, TxnState::CompleteAbort);
        // A commit at epoch 1: the markers and the producer go on at 2.
        t.add_partitions(100, 1, &[tp(0)], 3).unwrap();
        assert_eq!(t.end_v2(100, 1, true, 4, None), Ok((100, 2)));
        assert_eq!((t.state, t.producer_epoch), (TxnState::PrepareCommit, 2));
        // Retries (the epoch before the bump): wait while markers are written, then Ok.
        assert_eq!(
            t.end_v2(100, 1, true, 5, None),
            Err(TxnError::ConcurrentTransactions)
        );
        assert_eq!(
            t.end_v2(100, 1, false, 5, None),
            Err(TxnError::InvalidTxnState)
        );
        assert_eq!(
            t.end_v2(100, 0, true, 5, None),
            Err(TxnError::ProducerFenced)
        );
        // Nothing is added under the old epoch: a late write of the ended transaction.
        assert_eq!(
            t.add_partitions(100, 1, &[tp(1)], 5),
            Err(TxnError::ProducerFenced)
        );
        t.complete(6).unwrap();
        assert_eq!(t.end_v2(100, 1, true, 7, None), Ok((100, 2)));
        assert_eq!(
            t.end_v2(100, 1, false, 7, None),
            Err(TxnError::InvalidTxnState)
        );
        assert_eq!(
            t.end_v2(100, 2, true, 7, None),
            Err(TxnError::InvalidTxnState),
            "a commit with nothing open"
        );
        assert_eq!(
            t.end_v2(7, 2, true, 7, None),
            Err(TxnError::InvalidProducerIdMapping)
        );
    }

    #[test]
    fn a_v2_end_at_the_last_epoch_moves_the_producer_to_a_new_id() {
        let mut t = TxnMetadata::new("tx", 100, 60_000, 0);
        t.init_producer_id(60_000, None, 0, || 0).unwrap();
        t.producer_epoch = MAX_EPOCH;
        t.add_partitions(100, MAX_EPOCH, &[tp(0)], 1).unwrap();
        // A new id is needed and must be supplied.
        assert_eq!(
            t.clone().end_v2(100, MAX_EPOCH, true, 2, None),
            Err(TxnError::ConcurrentTransactions)
        );
        assert_eq!(t.end_v2(100, MAX_EPOCH, true, 2, Some(555)), Ok((555, 0)));
        // The markers go out under the old id at the very last epoch.
        assert_eq!((t.producer_id, t.producer_epoch), (100, i16::MAX));
        assert_eq!(
            t.end_v2(100, MAX_EPOCH, true, 3, Some(556)),
            Err(TxnError::ConcurrentTransactions)
        );
        // The producer, already on its new id, waits for the markers.
        assert_eq!(
            t.add_partitions(555, 0, &[tp(1)], 3),
            Err(TxnError::ConcurrentTransactions)
        );
        assert_eq!(
            t.end_v2(555, 0, false, 3, None),
            Err(TxnError::ConcurrentTransactions)
        );
        assert_eq!(
            t.init_producer_id(60_000, Some((555, 0)), 3, || 0),
            Err(TxnError::ConcurrentTransactions)
        );
        t.complete(4).unwrap();
        assert_eq!((t.producer_id, t.producer_epoch), (555, 0));
        assert_eq!((t.previous_producer_id, t.next_producer_id), (100, -1));
        // The retry across the change of id is answered with the new id.
        assert_eq!(t.end_v2(100, MAX_EPOCH, true, 5, None), Ok((555, 0)));
        assert_eq!(
            t.end_v2(100, MAX_EPOCH - 1, true, 5, None),
            Err(TxnError::InvalidProducerIdMapping)
        );
        t.add_partitions(555, 0, &[tp(0)], 6).unwrap();
        assert_eq!(t.end_v2(555, 0, false, 7, None), Ok((555, 1)));
    }

    #[test]
    fn hung_transactions_time_out_and_exhausted_epochs_rotate_the_id() {
        let mut t = TxnMetadata::new("tx", 100, 1_000, 0);
        t.init_producer_id(1_000, None, 0, || 0).unwrap();
        t.add_partitions(100, 0, &[tp(0)], 10).unwrap();
        assert!(!t.timed_out(1_000));
        assert_eq!(
            t.abort_timed_out(1_000, 1_010),
            Err(TxnError::InvalidTxnState)
        );
        assert!(t.timed_out(1_001));
        t.abort_timed_out(1_001, 1_011).unwrap();
        assert_eq!((t.state, t.producer_epoch), (TxnState::PrepareAbort, 1));
        t.complete(1_012).unwrap();
        // At the last epoch, the next init hands out a new producer id.
        t.producer_epoch = MAX_EPOCH;
        assert_eq!(t.init_producer_id(1_000, None, 2_000, || 555), Ok((555, 0)));
    }
}
