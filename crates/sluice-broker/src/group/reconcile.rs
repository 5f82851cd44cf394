//! Reconciliation of one member of a consumer group (KIP-848) towards its target assignment,
//! as Kafka's coordinator does it: a partition is never owned by two members, so a member
//! first gives up (revokes) what its target no longer holds, keeping its member epoch, and
//! only then moves to the target epoch and receives new partitions, each as soon as its
//! previous owner has released it. Pure: the coordinator supplies who owns what.

use std::collections::{BTreeMap, BTreeSet};

use super::assignor::Partitions;

/// Where a member is in its reconciliation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MemberState {
    /// At the target epoch with everything of its target it can have.
    Stable,
    /// Must revoke `pending_revocation` (it keeps its epoch until it reports them gone).
    UnrevokedPartitions,
    /// At the target epoch, waiting for partitions other members still own.
    UnreleasedPartitions,
}

/// A member's reconciliation state.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemberAssignment<T: Ord> {
    pub state: MemberState,
    pub member_epoch: i32,
    pub previous_member_epoch: i32,
    /// What the member may own now (its current assignment).
    pub assigned: Partitions<T>,
    /// What it must give up before it moves on.
    pub pending_revocation: Partitions<T>,
}

impl<T: Ord> MemberAssignment<T> {
    /// A member that just joined: epoch 0, nothing assigned.
    pub fn joining() -> Self {
        MemberAssignment {
            state: MemberState::Stable,
            member_epoch: 0,
            previous_member_epoch: 0,
            assigned: BTreeMap::new(),
            pending_revocation: BTreeMap::new(),
        }
    }

    /// The epochs after moving to `epoch`: the one it had becomes the previous one (also
    /// when it stays, as Kafka's), which a member whose answer was lost may still send.
    fn with_epoch(&self, epoch: i32) -> (i32, i32) {
        (epoch, self.member_epoch)
    }
}

/// What reconciliation looks at besides the member.
pub struct Target<'a, T: Ord> {
    pub epoch: i32,
    pub partitions: &'a Partitions<T>,
    /// The topics the member subscribes to now.
    pub subscribed: &'a BTreeSet<T>,
    pub subscription_changed: bool,
    /// What the member reports it owns (None: it did not say, so it may still own anything).
    pub owned: Option<&'a Partitions<T>>,
}

/// One reconciliation step for `member`. `owned_elsewhere(topic, partition)` says whether
/// another member of the group still owns the partition (assigned or pending revocation).
pub fn reconcile<T: Ord + Clone>(
    member: &MemberAssignment<T>,
    target: &Target<'_, T>,
    owned_elsewhere: &dyn Fn(&T, i32) -> bool,
) -> MemberAssignment<T> {
    match member.state {
        MemberState::Stable if member.member_epoch != target.epoch => {
            next(member, target, owned_elsewhere)
        }
        MemberState::Stable if target.subscription_changed => drop_unsubscribed(member, target),
        MemberState::Stable => member.clone(),
        MemberState::UnrevokedPartitions => {
            if still_owns(target.owned, &member.pending_revocation) {
                if target.subscription_changed {
                    drop_unsubscribed(member, target)
                } else {
                    member.clone()
                }
            } else {
                next(member, target, owned_elsewhere)
            }
        }
        MemberState::UnreleasedPartitions => next(member, target, owned_elsewhere),
    }
}

/// Whether the member (by what it reports) still owns any of `revoking`.
fn still_owns<T: Ord>(owned: Option<&Partitions<T>>, revoking: &Partitions<T>) -> bool {
    let Some(owned) = owned else {
        return true;
    };
    owned.iter().any(|(t, ps)| {
        revoking
            .get(t)
            .is_some_and(|r| ps.iter().any(|p| r.contains(p)))
    })
}

/// The member's subscription changed at the same epoch: partitions of topics it no longer
/// subscribes to are to be revoked.
fn drop_unsubscribed<T: Ord + Clone>(
    member: &MemberAssignment<T>,
    target: &Target<'_, T>,
) -> MemberAssignment<T> {
    let mut assigned = member.assigned.clone();
    let mut revoking = member.pending_revocation.clone();
    let gone: Vec<T> = assigned
        .keys()
        .filter(|t| !target.subscribed.contains(*t))
        .cloned()
        .collect();
    if gone.is_empty() {
        return member.clone();
    }
    for t in gone {
        let ps = assigned.remove(&t).unwrap_or_default();
        revoking.entry(t).or_default().extend(ps);
    }
    let mut out = member.clone();
    out.assigned = assigned;
    if !revoking.is_empty() && still_owns(target.owned, &revoking) {
        out.state = MemberState::UnrevokedPartitions;
        out.pending_revocation = revoking;
    }
    out
}

/// Move the member towards the target: revoke first (same epoch), else take the target
/// epoch with every target partition that no other member still owns.
fn next<T: Ord + Clone>(
    member: &MemberAssignment<T>,
    target: &Target<'_, T>,
    owned_elsewhere: &dyn Fn(&T, i32) -> bool,
) -> MemberAssignment<T> {
    let empty = BTreeSet::new();
    let topics: BTreeSet<&T> = target
        .partitions
        .keys()
        .chain(member.assigned.keys())
        .collect();
    let mut kept: Partitions<T> = BTreeMap::new();
    let mut revoking: Partitions<T> = BTreeMap::new();
    let mut adding: Partitions<T> = BTreeMap::new();
    let mut unreleased = false;
    for t in topics {
        let goal = if target.subscribed.contains(t) {
            target.partitions.get(t).unwrap_or(&empty)
        } else {
            &empty
        };
        let current = member.assigned.get(t).unwrap_or(&empty);
        let keep: BTreeSet<i32> = current.intersection(goal).copied().collect();
        let revoke: BTreeSet<i32> = current.difference(&keep).copied().collect();
        let mine_pending = member.pending_revocation.get(t).unwrap_or(&empty);
        let mut add = BTreeSet::new();
        for p in goal.difference(&keep) {
            // A partition this member itself is revoking is not held up by anyone else.
            if owned_elsewhere(t, *p) && !mine_pending.contains(p) {
                unreleased = true;
            } else {
                add.insert(*p);
            }
        }
        if !keep.is_empty() {
            kept.insert(t.clone(), keep);
        }
        if !revoke.is_empty() {
            revoking.insert(t.clone(), revoke);
        }
        if !add.is_empty() {
            adding.insert(t.clone(), add);
        }
    }
    if !revoking.is_empty() && still_owns(target.owned, &revoking) {
        let (member_epoch, previous_member_epoch) = member.with_epoch(member.member_epoch);
        return MemberAssignment {
            state: MemberState::UnrevokedPartitions,
            member_epoch,
            previous_member_epoch,
            assigned: kept,
            pending_revocation: revoking,
        };
    }
    for (t, ps) in adding {
        kept.entry(t).or_default().extend(ps);
    }
    let (member_epoch, previous_member_epoch) = member.with_epoch(target.epoch);
    MemberAssignment {
        state: if unreleased {
            MemberState::UnreleasedPartitions
        } else {
            MemberState::Stable
        },
        member_epoch,
        previous_member_epoch,
        assigned: kept,
        pending_revocation: BTreeMap::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parts(pairs: &[(&str, &[i32])]) -> Partitions<String> {
        pairs
            .iter()
            .map(|(t, ps)| (t.to_string(), ps.iter().copied().collect()))
            .collect()
    }

    fn subs(topics: &[&str]) -> BTreeSet<String> {
        topics.iter().map(|t| t.to_string()).collect()
    }

    fn target<'a>(
        epoch: i32,
        partitions: &'a Partitions<String>,
        subscribed: &'a BTreeSet<String>,
        owned: Option<&'a Partitions<String>>,
    ) -> Target<'a, String> {
        Target {
            epoch,
            partitions,
            subscribed,
            subscription_changed: false,
            owned,
        }
    }

    const FREE: &dyn Fn(&String, i32) -> bool = &|_, _| false;

    #[test]
    fn a_joining_member_gets_its_free_target_at_the_target_epoch() {
        let goal = parts(&[("t", &[0, 1])]);
        let s = subs(&["t"]);
        let m = reconcile(
            &MemberAssignment::joining(),
            &target(3, &goal, &s, None),
            FREE,
        );
        assert_eq!(m.state, MemberState::Stable);
        assert_eq!((m.member_epoch, m.previous_member_epoch), (3, 0));
        assert_eq!(m.assigned, goal);
        // Nothing new: nothing changes.
        assert_eq!(reconcile(&m, &target(3, &goal, &s, Some(&goal)), FREE), m);
    }

    #[test]
    fn revoke_before_assign_then_take_what_is_released() {
        let s = subs(&["t"]);
        let mut m = MemberAssignment::joining();
        let first = parts(&[("t", &[0, 1, 2])]);
        m = reconcile(&m, &target(1, &first, &s, None), FREE);
        // The target moves 2 away and brings 3, which another member still owns.
        let second = parts(&[("t", &[0, 1, 3])]);
        let other_owns_3: &dyn Fn(&String, i32) -> bool = &|_, p| p == 3;
        let r = reconcile(&m, &target(2, &second, &s, Some(&first)), other_owns_3);
        assert_eq!(r.state, MemberState::UnrevokedPartitions);
        assert_eq!(r.member_epoch, 1, "the epoch waits for the revocation");
        assert_eq!(r.assigned, parts(&[("t", &[0, 1])]));
        assert_eq!(r.pending_revocation, parts(&[("t", &[2])]));
        // Still reporting 2: no progress.
        assert_eq!(
            reconcile(&r, &target(2, &second, &s, Some(&first)), other_owns_3),
            r
        );
        // 2 revoked; 3 still owned elsewhere: target epoch, waiting for 3.
        let owned = parts(&[("t", &[0, 1])]);
        let u = reconcile(&r, &target(2, &second, &s, Some(&owned)), other_owns_3);
        assert_eq!(u.state, MemberState::UnreleasedPartitions);
        assert_eq!((u.member_epoch, u.previous_member_epoch), (2, 1));
        assert_eq!(u.assigned, owned);
        assert!(u.pending_revocation.is_empty());
        // 3 released: it is assigned.
        let s2 = reconcile(&u, &target(2, &second, &s, Some(&owned)), FREE);
        assert_eq!(s2.state, MemberState::Stable);
        assert_eq!(s2.assigned, second);
        assert_eq!(s2.member_epoch, 2);
    }

    #[test]
    fn a_member_that_does_not_report_what_it_owns_is_assumed_to_still_own_it() {
        let s = subs(&["t"]);
        let first = parts(&[("t", &[0, 1])]);
        let m = reconcile(
            &MemberAssignment::joining(),
            &target(1, &first, &s, None),
            FREE,
        );
        let second = parts(&[("t", &[0])]);
        let r = reconcile(&m, &target(2, &second, &s, None), FREE);
        assert_eq!(r.state, MemberState::UnrevokedPartitions);
        assert_eq!(reconcile(&r, &target(2, &second, &s, None), FREE), r);
        // A member that already dropped them (owned reported without them) moves on at once.
        let direct = reconcile(&m, &target(2, &second, &s, Some(&second)), FREE);
        assert_eq!(direct.state, MemberState::Stable);
        assert_eq!(direct.member_epoch, 2);
    }

    #[test]
    fn unsubscribing_a_topic_revokes_its_partitions_at_the_same_epoch() {
        let both = subs(&["a", "b"]);
        let goal = parts(&[("a", &[0]), ("b", &[0])]);
        let m = reconcile(
            &MemberAssignment::joining(),
            &target(1, &goal, &both, None),
            FREE,
        );
        let only_a = subs(&["a"]);
        let mut t = target(1, &goal, &only_a, Some(&goal));
        t.subscription_changed = true;
        let r = reconcile(&m, &t, FREE);
        assert_eq!(r.state, MemberState::UnrevokedPartitions);
        assert_eq!(r.member_epoch, 1);
        assert_eq!(r.assigned, parts(&[("a", &[0])]));
        assert_eq!(r.pending_revocation, parts(&[("b", &[0])]));
    }
}
