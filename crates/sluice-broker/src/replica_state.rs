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
        }
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
            self.follower_leos.retain(|id, _| replicas.contains(id));
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

    pub fn replicas(&self) -> &[i32] {
        &self.replicas
    }

    pub fn isr(&self) -> &[i32] {
        &self.isr
    }

    pub fn high_watermark(&self) -> i64 {
        self.high_watermark
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
        if !self.is_leader() {
            return false;
        }
        let candidate = self
            .isr
            .iter()
            .map(|id| self.leo_of(*id))
            .min()
            .unwrap_or(self.log_end_offset)
            .min(self.log_end_offset);
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
    fn followers_do_not_advance_hw() {
        let mut s = ReplicaState::new(1, 5, 0);
        s.update_registration(0, 3, &[0, 1], &[0, 1]);
        assert!(!s.is_leader());
        assert!(!s.on_local_append(9));
        assert_eq!(s.high_watermark(), 0);
    }
}
