//! The replication state of one partition replica, as a pure state machine: the local log
//! end offset (LEO), the high watermark (HW), the ISR and the leader epoch. No I/O, no
//! clock; the partition feeds it events and acts on what it returns.
//!
//! Invariants: `high_watermark <= log_end_offset` on the leader; the HW never moves back
//! while this replica stays leader; the HW is the smallest LEO among ISR members.

use std::collections::BTreeMap;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReplicaState {
    node_id: i32,
    leader_id: i32,
    leader_epoch: i32,
    replicas: Vec<i32>,
    isr: Vec<i32>,
    high_watermark: i64,
    log_end_offset: i64,
    /// Last LEO each follower reported (leader only).
    follower_leos: BTreeMap<i32, i64>,
    partition_epoch: i32,
    /// Per follower: (last time it was caught up, leader LEO at its last fetch, that fetch's
    /// time), in ms (leader only).
    follower_times: BTreeMap<i32, (i64, i64, i64)>,
    /// When this replica last became leader (set by the first ISR check after).
    leader_since: Option<i64>,
    /// The ISR change this leader proposed and the partition epoch it was computed from,
    /// until metadata moves past that epoch. Until then the HW counts the proposed ISR's
    /// new members too (Kafka's "maximal ISR", KIP-497): the controller may already have
    /// committed them, and an ISR member must hold everything below the HW, or its
    /// election loses acknowledged records (seen in the simulator, seed 1848: a replica
    /// joined at HW 1320 while the leader, not yet told, took the HW to 1352 without it).
    pending_isr: Option<(i32, Vec<i32>)>,
    /// The HW stays while the ISR is smaller than this (or than the replica count, if that
    /// is smaller): `min.insync.replicas`. Replicas that left such an ISR are eligible to
    /// lead (KIP-966), so they must hold everything below the HW. Kafka holds the HW this
    /// way for every partition since 3.7 (KAFKA-15583), whether ELR is on or not; an acks=all
    /// write appended before the ISR shrank then times out rather than being answered
    /// NOT_ENOUGH_REPLICAS_AFTER_APPEND (`Partition.checkEnoughReplicasReachOffset`).
    min_isr: usize,
    /// Leader: its log end when it became leader at this epoch (Kafka's leader epoch start
    /// offset). Until the HW reaches it, the HW may stand below records earlier leaders
    /// acknowledged, so the latest offset is not known yet (ListOffsets answers
    /// OFFSET_NOT_AVAILABLE and the client asks again).
    epoch_start_offset: i64,
}

impl ReplicaState {
    pub fn new(node_id: i32, log_end_offset: i64, high_watermark: i64) -> Self {
        Self {
            node_id,
            leader_id: -1,
            leader_epoch: -1,
            replicas: Vec::new(),
            isr: Vec::new(),
            high_watermark: high_watermark.min(log_end_offset),
            log_end_offset,
            follower_leos: BTreeMap::new(),
            partition_epoch: -1,
            follower_times: BTreeMap::new(),
            leader_since: None,
            pending_isr: None,
            min_isr: 1,
            epoch_start_offset: 0,
        }
    }

    /// The ISR size below which the HW stays changed. Returns true if the HW moved.
    pub fn set_min_isr(&mut self, min_isr: i32) -> bool {
        self.min_isr = min_isr.max(1) as usize;
        self.maybe_advance_hw()
    }

    /// Whether the ISR is smaller than the effective `min.insync.replicas` (at most the
    /// replica count): then the HW does not move.
    fn under_min_isr(&self) -> bool {
        self.isr.len() < self.min_isr.min(self.replicas.len().max(1))
    }

    pub fn set_partition_epoch(&mut self, epoch: i32) {
        self.partition_epoch = epoch;
        // Committed, or refused as stale: either way metadata now says what the ISR is.
        if self
            .pending_isr
            .as_ref()
            .is_some_and(|(base, _)| *base != epoch)
        {
            self.pending_isr = None;
        }
    }

    pub fn partition_epoch(&self) -> i32 {
        self.partition_epoch
    }

    /// Leader: a follower fetched at `now_ms`. It counts as caught up when it asked for
    /// the current log end, or for at least the log end of its previous fetch (then it was
    /// caught up as of that fetch) — Kafka's rule for `replica.lag.time.max.ms`.
    pub fn on_follower_fetch_at(&mut self, follower: i32, fetch_offset: i64, now_ms: i64) -> bool {
        let leo = self.log_end_offset;
        let entry = self
            .follower_times
            .entry(follower)
            .or_insert((i64::MIN, -1, now_ms));
        if fetch_offset >= leo {
            entry.0 = now_ms;
        } else if entry.1 >= 0 && fetch_offset >= entry.1 {
            entry.0 = entry.0.max(entry.2);
        }
        entry.1 = leo;
        entry.2 = now_ms;
        self.on_follower_fetch(follower, fetch_offset)
    }

    /// Leader: the ISR this partition should have now, if it differs — followers that have
    /// not been caught up for `lag_max_ms` leave; live replicas that reached the HW join.
    pub fn isr_proposal(
        &mut self,
        now_ms: i64,
        lag_max_ms: i64,
        live: impl Fn(i32) -> bool,
    ) -> Option<Vec<i32>> {
        if !self.is_leader() {
            return None;
        }
        let since = *self.leader_since.get_or_insert(now_ms);
        let caught_up = |r: &i32| {
            let last = self.follower_times.get(r).map_or(since, |t| t.0.max(since));
            now_ms - last <= lag_max_ms
        };
        let mut isr: Vec<i32> = self
            .isr
            .iter()
            .copied()
            // A fenced replica goes at once: the controller leaves it in an ISR that would
            // otherwise drop below min.insync.replicas, for the leader to take it out after
            // making its own log durable (see flush_log).
            .filter(|r| *r == self.node_id || (caught_up(r) && live(*r)))
            .collect();
        for r in &self.replicas {
            let reached = self
                .follower_leos
                .get(r)
                .is_some_and(|leo| *leo >= self.high_watermark);
            if !isr.contains(r) && live(*r) && reached && caught_up(r) {
                isr.push(*r);
            }
        }
        let (mut a, mut b) = (isr.clone(), self.isr.clone());
        a.sort_unstable();
        b.sort_unstable();
        // The caller sends the proposal; no other is made for this partition while it is
        // in flight, so the last one made is the one pending.
        self.pending_isr = (a != b).then(|| (self.partition_epoch, isr.clone()));
        (a != b).then_some(isr)
    }

    /// Adopt a new registration from metadata. Returns true if the HW moved.
    pub fn update_registration(
        &mut self,
        leader_id: i32,
        leader_epoch: i32,
        replicas: &[i32],
        isr: &[i32],
    ) -> bool {
        let became_leader = leader_id == self.node_id
            && (self.leader_id != self.node_id || leader_epoch != self.leader_epoch);
        self.leader_id = leader_id;
        self.leader_epoch = leader_epoch;
        self.replicas = replicas.to_vec();
        self.isr = isr.to_vec();
        if became_leader {
            self.epoch_start_offset = self.log_end_offset;
            // What followers had under an earlier leadership says nothing about their logs
            // now (they may have truncated since): as in Kafka, a new leader knows no
            // follower's log end until it fetches, so the HW cannot pass records a follower
            // no longer holds.
            self.follower_leos.clear();
            self.follower_times.clear();
            self.leader_since = None;
            self.pending_isr = None;
        }
        self.maybe_advance_hw()
    }

    pub fn is_leader(&self) -> bool {
        self.leader_id == self.node_id
    }

    pub fn leader_id(&self) -> i32 {
        self.leader_id
    }

    pub fn leader_epoch(&self) -> i32 {
        self.leader_epoch
    }

    pub fn node_id(&self) -> i32 {
        self.node_id
    }

    /// Leader: the log end offset `follower` last reported by fetching (None: not heard).
    pub fn follower_leo(&self, follower: i32) -> Option<i64> {
        self.follower_leos.get(&follower).copied()
    }

    pub fn replicas(&self) -> &[i32] {
        &self.replicas
    }

    pub fn isr(&self) -> &[i32] {
        &self.isr
    }

    pub fn high_watermark(&self) -> i64 {
        self.high_watermark
    }

    /// Leader: whether its HW has reached the log end it had when it became leader (so the
    /// HW says what earlier leaders acknowledged). Kafka's check before it answers a
    /// ListOffsets for the latest offset or a timestamp.
    pub fn high_watermark_caught_up(&self) -> bool {
        self.high_watermark >= self.epoch_start_offset
    }

    pub fn log_end_offset(&self) -> i64 {
        self.log_end_offset
    }

    /// The local log grew (leader append). Returns true if the HW moved.
    pub fn on_local_append(&mut self, log_end_offset: i64) -> bool {
        debug_assert!(
            log_end_offset >= self.log_end_offset,
            "the log end never moves back on append"
        );
        self.log_end_offset = log_end_offset;
        self.maybe_advance_hw()
    }

    /// The local log was truncated or reset (LEO may move back).
    pub fn on_local_reset(&mut self, log_end_offset: i64, log_start_offset: i64) {
        self.log_end_offset = log_end_offset;
        self.high_watermark = self.high_watermark.clamp(log_start_offset, log_end_offset);
    }

    /// A follower fetched from `fetch_offset`: its LEO. Returns true if the HW moved.
    /// Follower: the leader's HW, capped by what this replica has.
    pub fn on_leader_high_watermark(&mut self, leader_hw: i64) {
        if !self.is_leader() {
            self.high_watermark = leader_hw.min(self.log_end_offset).max(0);
        }
    }

    pub fn on_follower_fetch(&mut self, follower: i32, fetch_offset: i64) -> bool {
        self.follower_leos.insert(follower, fetch_offset);
        self.maybe_advance_hw()
    }

    fn leo_of(&self, id: i32) -> i64 {
        if id == self.node_id {
            self.log_end_offset
        } else {
            self.follower_leos.get(&id).copied().unwrap_or(0)
        }
    }

    fn maybe_advance_hw(&mut self) -> bool {
        if !self.is_leader() || self.under_min_isr() {
            return false;
        }
        let joining = self
            .pending_isr
            .iter()
            .flat_map(|(_, isr)| isr)
            .filter(|id| !self.isr.contains(id));
        let mut candidate = self
            .isr
            .iter()
            .chain(joining)
            .map(|id| self.leo_of(*id))
            .min()
            .unwrap_or(self.log_end_offset)
            .min(self.log_end_offset);
        if sluice_rt::broken(sluice_rt::Broken::HighWatermarkIgnoresIsr) {
            candidate = self.log_end_offset;
        }
        if candidate > self.high_watermark {
            self.high_watermark = candidate;
            true
        } else {
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn single_replica_hw_follows_leo() {
        let mut s = ReplicaState::new(0, 10, 0);
        assert!(s.update_registration(0, 1, &[0], &[0]));
        assert_eq!(s.high_watermark(), 10);
        assert!(s.on_local_append(15));
        assert_eq!(s.high_watermark(), 15);
        assert!(!s.on_local_append(15));
    }

    /// A follower's log end from an earlier leadership is forgotten: it may have truncated
    /// since. Kept, it let the HW pass records an in-sync follower did not have, and a record
    /// acknowledged that way was lost once that follower was elected.
    #[test]
    fn a_new_leadership_forgets_follower_log_ends() {
        let mut s = ReplicaState::new(0, 0, 0);
        s.update_registration(0, 1, &[0, 1, 2], &[0, 1, 2]);
        s.on_local_append(120);
        s.on_follower_fetch(1, 110);
        s.on_follower_fetch(2, 100);
        assert_eq!(s.high_watermark(), 100);
        // Replica 2 leads epoch 2; this one follows, truncates to 100 and takes 100..115 of
        // the new leader's records; replica 1 truncates too (its 100..110 were never
        // committed).
        s.update_registration(2, 2, &[0, 1, 2], &[0, 1, 2]);
        s.on_local_reset(100, 0);
        s.on_local_append(115);
        // This one leads epoch 3. Replica 2 fetches up to 115; replica 1 has not fetched
        // yet: its 110 from epoch 1 is no longer its log, so the HW must stay at 100.
        s.update_registration(0, 3, &[0, 1, 2], &[0, 1, 2]);
        s.on_follower_fetch(2, 115);
        assert_eq!(s.high_watermark(), 100);
        assert!(s.on_follower_fetch(1, 115));
        assert_eq!(s.high_watermark(), 115);
    }

    /// With eligible leader replicas (KIP-966): the HW stays while the ISR is below
    /// min.insync.replicas (or the replica count, when smaller), so the replicas that left
    /// it, eligible to lead, hold everything below it.
    #[test]
    fn the_hw_stays_while_the_isr_is_below_min_insync_replicas() {
        let mut s = ReplicaState::new(0, 0, 0);
        s.set_min_isr(2);
        s.update_registration(0, 1, &[0, 1, 2], &[0, 1]);
        s.on_local_append(10);
        assert!(s.on_follower_fetch(1, 10));
        assert_eq!(s.high_watermark(), 10);
        // Replica 1 left the ISR: acks=1 appends are not committed while it is out.
        s.update_registration(0, 1, &[0, 1, 2], &[0]);
        assert!(!s.on_local_append(20));
        assert_eq!(s.high_watermark(), 10);
        // It is back (once it reached the HW): the HW moves again.
        s.update_registration(0, 1, &[0, 1, 2], &[0, 1]);
        assert!(s.on_follower_fetch(1, 20));
        assert_eq!(s.high_watermark(), 20);
        // Lowering the setting lets it move at once.
        s.update_registration(0, 1, &[0, 1, 2], &[0]);
        s.on_local_append(30);
        assert_eq!(s.high_watermark(), 20);
        assert!(s.set_min_isr(1));
        assert_eq!(s.high_watermark(), 30);
        // A single replica is never below (min.insync.replicas counts at most the replicas).
        let mut one = ReplicaState::new(0, 5, 0);
        one.set_min_isr(2);
        assert!(one.update_registration(0, 1, &[0], &[0]));
        assert_eq!(one.high_watermark(), 5);
    }

    #[test]
    fn hw_is_min_leo_over_isr_and_never_moves_back() {
        let mut s = ReplicaState::new(0, 0, 0);
        s.update_registration(0, 1, &[0, 1, 2], &[0, 1]);
        s.on_local_append(10);
        assert_eq!(s.high_watermark(), 0);
        assert!(s.on_follower_fetch(1, 7));
        assert_eq!(s.high_watermark(), 7);
        // Replica 2 is not in the ISR: it does not hold the HW back.
        assert!(!s.on_follower_fetch(2, 1));
        assert!(!s.on_follower_fetch(1, 5));
        assert_eq!(s.high_watermark(), 7);
    }

    #[test]
    fn lagging_followers_leave_the_isr_and_caught_up_ones_join() {
        let live = |_: i32| true;
        let mut s = ReplicaState::new(0, 0, 0);
        s.update_registration(0, 1, &[0, 1, 2], &[0, 1, 2]);
        s.on_local_append(10);
        // Just became leader: everyone gets a full lag window.
        assert_eq!(s.isr_proposal(1_000, 500, live), None);
        s.on_follower_fetch_at(1, 10, 1_200);
        // Follower 2 never fetched: out after the window; follower 1 is caught up.
        assert_eq!(s.isr_proposal(1_400, 500, live), None);
        assert_eq!(s.isr_proposal(1_600, 500, live), Some(vec![0, 1]));
        s.update_registration(0, 1, &[0, 1, 2], &[0, 1]);
        assert_eq!(s.high_watermark(), 10);
        // Follower 2 catches up to the HW: it joins (if it is live).
        s.on_follower_fetch_at(2, 10, 1_700);
        assert_eq!(s.isr_proposal(1_700, 500, |r| r != 2), None);
        assert_eq!(s.isr_proposal(1_700, 500, live), Some(vec![0, 1, 2]));
        // A follower that keeps fetching but stays behind the previous log end lags out.
        s.update_registration(0, 1, &[0, 1, 2], &[0, 1, 2]);
        s.on_local_append(20);
        s.on_follower_fetch_at(1, 12, 1_800);
        s.on_follower_fetch_at(2, 20, 1_800);
        s.on_local_append(30);
        s.on_follower_fetch_at(1, 15, 2_500);
        s.on_follower_fetch_at(2, 30, 2_500);
        assert_eq!(s.isr_proposal(2_500, 500, live), Some(vec![0, 2]));
    }

    /// A replica proposed to join the ISR holds the HW back from the moment the leader
    /// proposes it: the controller may commit it before the leader hears, and a member of
    /// the ISR missing records below the HW could be elected and lose them.
    #[test]
    fn a_proposed_isr_member_holds_the_hw_back_until_metadata_says() {
        let live = |_: i32| true;
        let mut s = ReplicaState::new(0, 0, 0);
        s.set_partition_epoch(4);
        s.update_registration(0, 1, &[0, 1, 2], &[0, 1]);
        s.on_local_append(20);
        s.on_follower_fetch_at(1, 20, 1_000);
        assert_eq!(s.high_watermark(), 20);
        s.on_follower_fetch_at(2, 20, 1_000);
        assert_eq!(s.isr_proposal(1_000, 500, live), Some(vec![0, 1, 2]));
        s.on_local_append(30);
        s.on_follower_fetch_at(1, 30, 1_100);
        assert_eq!(
            s.high_watermark(),
            20,
            "replica 2 may already be in the ISR"
        );
        s.on_follower_fetch_at(2, 30, 1_200);
        assert_eq!(s.high_watermark(), 30);
        // Committed: metadata at the next partition epoch; the ISR is what it says.
        s.set_partition_epoch(5);
        s.update_registration(0, 1, &[0, 1, 2], &[0, 1, 2]);
        assert_eq!(s.isr_proposal(1_300, 500, live), None);
        // A shrink proposal keeps the leaving member counted until it is committed.
        s.on_local_append(40);
        s.on_follower_fetch_at(1, 40, 1_900);
        assert_eq!(s.isr_proposal(1_900, 500, live), Some(vec![0, 1]));
        assert_eq!(s.high_watermark(), 30);
        s.set_partition_epoch(6);
        s.update_registration(0, 1, &[0, 1, 2], &[0, 1]);
        assert_eq!(s.high_watermark(), 40);
    }

    #[test]
    fn followers_do_not_advance_hw() {
        let mut s = ReplicaState::new(1, 5, 0);
        s.update_registration(0, 3, &[0, 1], &[0, 1]);
        assert!(!s.is_leader());
        assert!(!s.on_local_append(9));
        assert_eq!(s.high_watermark(), 0);
    }
}
