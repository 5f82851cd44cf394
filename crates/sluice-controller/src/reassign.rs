//! Partition reassignment (KIP-455), as pure decisions over one partition's registration.
//!
//! A reassignment runs in three steps, each one `PartitionChange`:
//! 1. start: the replica set becomes the targets followed by the replicas being removed,
//!    with `adding` and `removing` recorded; new replicas start fetching from the leader;
//! 2. the leader's ordinary ISR expansion (AlterPartition) lets the new replicas join;
//! 3. once every target is in the ISR, the change that made it so also completes the
//!    reassignment: the removed replicas leave the set and the ISR, and leadership moves to
//!    a target if the leader was being removed.
//!
//! A reassignment whose targets are already in sync (a reordering, a shrink) completes in
//! its first step. Cancelling reverts to the original replicas.

use sluice_metadata::image::PartitionRegistration;
use sluice_metadata::record::Assignment;

use crate::election::elect;

/// `v` without the members of `gone`, in order.
fn without(v: &[i32], gone: &[i32]) -> Vec<i32> {
    v.iter().copied().filter(|r| !gone.contains(r)).collect()
}

/// The partition state a change leads to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Planned {
    pub leader: i32,
    pub isr: Vec<i32>,
    pub assignment: Assignment,
}

/// The replica set when moving from `current` (every replica, including any still being
/// added or removed) to `target`: targets first, then those leaving.
pub fn start(current: &[i32], target: &[i32]) -> Assignment {
    let mut removing = without(current, target);
    let mut adding = without(target, current);
    removing.sort_unstable();
    adding.sort_unstable();
    let mut replicas = target.to_vec();
    replicas.extend(&removing);
    Assignment {
        replicas,
        adding,
        removing,
    }
}

/// Finish a reassignment when the ISR holds every target: the removed replicas leave the
/// set and the ISR. None while some target is not yet in sync (or when nothing would be
/// left).
pub fn complete(a: &Assignment, isr: &[i32]) -> Option<(Assignment, Vec<i32>)> {
    if a.adding.is_empty() && a.removing.is_empty() {
        return None;
    }
    let replicas = without(&a.replicas, &a.removing);
    let isr = without(isr, &a.removing);
    if replicas.is_empty() || isr.is_empty() || !replicas.iter().all(|r| isr.contains(r)) {
        return None;
    }
    Some((
        Assignment {
            replicas,
            adding: Vec::new(),
            removing: Vec::new(),
        },
        isr,
    ))
}

/// Apply `assignment` and `isr` to `reg`, completing the reassignment if the ISR allows,
/// and keep the leader if it is still an in-sync live replica, else elect one from the
/// new set (`unclean` as configured for the topic).
pub fn plan(
    reg: &PartitionRegistration,
    assignment: Assignment,
    isr: Vec<i32>,
    live: impl Fn(i32) -> bool,
    unclean: bool,
) -> Planned {
    let (assignment, isr) = complete(&assignment, &isr).unwrap_or((assignment, isr));
    if reg.leader >= 0
        && assignment.replicas.contains(&reg.leader)
        && isr.contains(&reg.leader)
        && live(reg.leader)
    {
        return Planned {
            leader: reg.leader,
            isr,
            assignment,
        };
    }
    let e = elect(&assignment.replicas, &isr, &reg.elr.eligible, live, unclean);
    Planned {
        leader: e.leader,
        isr: e.isr,
        assignment,
    }
}

/// The current state of `reg` as an assignment.
pub fn current(reg: &PartitionRegistration) -> Assignment {
    Assignment {
        replicas: reg.replicas.clone(),
        adding: reg.adding.clone(),
        removing: reg.removing.clone(),
    }
}

/// Cancelling: back to the replicas the partition had before (without those being added);
/// they leave the ISR too. None when that leaves no in-sync replica.
pub fn revert(reg: &PartitionRegistration) -> Option<(Assignment, Vec<i32>)> {
    let replicas = without(&reg.replicas, &reg.adding);
    let isr = without(&reg.isr, &reg.adding);
    if isr.is_empty() {
        return None;
    }
    Some((
        Assignment {
            replicas,
            adding: Vec::new(),
            removing: Vec::new(),
        },
        isr,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reg(replicas: &[i32], isr: &[i32], leader: i32) -> PartitionRegistration {
        PartitionRegistration {
            replicas: replicas.to_vec(),
            isr: isr.to_vec(),
            leader,
            leader_epoch: 0,
            partition_epoch: 0,
            adding: vec![],
            removing: vec![],
            elr: Default::default(),
        }
    }

    #[test]
    fn start_puts_targets_first_then_the_leaving() {
        let a = start(&[1, 2, 3], &[4, 2, 5]);
        assert_eq!(a.replicas, vec![4, 2, 5, 1, 3]);
        assert_eq!(a.adding, vec![4, 5]);
        assert_eq!(a.removing, vec![1, 3]);
        // Reordering adds and removes nothing.
        let a = start(&[1, 2, 3], &[3, 1, 2]);
        assert_eq!(
            (a.replicas, a.adding, a.removing),
            (vec![3, 1, 2], vec![], vec![])
        );
    }

    #[test]
    fn completes_only_when_every_target_is_in_sync() {
        let a = start(&[1, 2], &[2, 3]);
        assert_eq!(complete(&a, &[1, 2]), None);
        let (done, isr) = complete(&a, &[1, 2, 3]).unwrap();
        assert_eq!(done.replicas, vec![2, 3]);
        assert!(done.adding.is_empty() && done.removing.is_empty());
        assert_eq!(isr, vec![2, 3]);
        // Nothing to complete when nothing is in progress.
        assert_eq!(complete(&start(&[1, 2], &[2, 1]), &[1, 2]), None);
    }

    #[test]
    fn plan_keeps_or_moves_the_leader() {
        let live = |_| true;
        // Start: 3 is added, 1 (the leader) stays the leader until completion.
        let r = reg(&[1, 2], &[1, 2], 1);
        let p = plan(&r, start(&r.replicas, &[2, 3]), r.isr.clone(), live, false);
        assert_eq!(p.leader, 1);
        assert_eq!(p.assignment.replicas, vec![2, 3, 1]);
        // The ISR grows to hold 3: completion drops 1 and 2 takes over.
        let mut during = r.clone();
        during.replicas = p.assignment.replicas.clone();
        during.adding = p.assignment.adding.clone();
        during.removing = p.assignment.removing.clone();
        let p = plan(&during, current(&during), vec![1, 2, 3], live, false);
        assert_eq!((p.leader, p.isr.clone()), (2, vec![2, 3]));
        assert_eq!(p.assignment.replicas, vec![2, 3]);
        // A shrink of in-sync replicas completes at once.
        let r = reg(&[1, 2, 3], &[1, 2, 3], 3);
        let p = plan(&r, start(&r.replicas, &[1, 2]), r.isr.clone(), live, false);
        assert_eq!(
            (p.leader, p.isr, p.assignment.replicas),
            (1, vec![1, 2], vec![1, 2])
        );
    }

    #[test]
    fn revert_drops_the_added_replicas() {
        let mut r = reg(&[3, 2, 1], &[1, 2, 3], 3);
        r.adding = vec![3];
        r.removing = vec![1];
        let (a, isr) = revert(&r).unwrap();
        assert_eq!((a.replicas, isr), (vec![2, 1], vec![1, 2]));
        // Only the added replica in sync: cannot revert cleanly.
        r.isr = vec![3];
        assert_eq!(revert(&r), None);
    }
}
