//! Partition leader election, a pure decision: who leads a partition given its replicas,
//! its in-sync replicas and which brokers are live.

/// The leader and ISR a partition should have. `leader` is -1 when nobody may lead
/// (the partition is offline until an eligible replica comes back).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Election {
    pub leader: i32,
    pub isr: Vec<i32>,
}

/// Elect in assignment order: the first live replica that is in the ISR. If the ISR is
/// empty, the first live eligible leader replica (`elr`, KIP-966: out of an ISR smaller than
/// `min.insync.replicas`, so holding every committed record), which then is the whole ISR.
/// If none is either and `unclean` (`unclean.leader.election.enable`) allows it, the first
/// live replica, which then is the whole ISR (it may have lost committed records; that is
/// the trade unclean election makes). Otherwise nobody.
pub fn elect(
    replicas: &[i32],
    isr: &[i32],
    elr: &[i32],
    live: impl Fn(i32) -> bool,
    unclean: bool,
) -> Election {
    if let Some(&leader) = replicas.iter().find(|r| isr.contains(r) && live(**r)) {
        return Election {
            leader,
            isr: isr.to_vec(),
        };
    }
    // As Kafka 4.4: eligible replicas are candidates once the ISR is empty (with ELR on,
    // fenced members leave it at once, so a non-empty ISR has a live member but briefly).
    let eligible = replicas
        .iter()
        .find(|r| isr.is_empty() && elr.contains(r) && live(**r));
    if let Some(&leader) = eligible.or(replicas.iter().find(|r| unclean && live(**r))) {
        return Election {
            leader,
            isr: vec![leader],
        };
    }
    Election {
        leader: -1,
        isr: isr.to_vec(),
    }
}

/// The ISR without `broker`, except that the last member stays (Kafka keeps it, so the
/// partition remembers who has every committed record).
pub fn isr_without(isr: &[i32], broker: i32) -> Vec<i32> {
    let rest: Vec<i32> = isr.iter().copied().filter(|r| *r != broker).collect();
    if rest.is_empty() {
        isr.to_vec()
    } else {
        rest
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn isr_first_in_assignment_order() {
        let live = |b: i32| b != 1;
        assert_eq!(
            elect(&[1, 2, 3], &[1, 3, 2], &[], live, false),
            Election {
                leader: 2,
                isr: vec![1, 3, 2]
            }
        );
        assert_eq!(elect(&[1, 2, 3], &[3], &[], live, false).leader, 3);
        assert_eq!(
            elect(&[1, 2, 3], &[1, 2, 3], &[], |_| true, false).leader,
            1
        );
    }

    #[test]
    fn out_of_sync_replicas_lead_only_when_unclean_election_is_enabled() {
        let live = |b: i32| b == 2 || b == 3;
        assert_eq!(
            elect(&[1, 2, 3], &[1], &[], live, false),
            Election {
                leader: -1,
                isr: vec![1]
            }
        );
        assert_eq!(
            elect(&[1, 3, 2], &[1], &[], live, true),
            Election {
                leader: 3,
                isr: vec![3]
            }
        );
        assert_eq!(elect(&[1], &[1], &[], |_| false, true).leader, -1);
    }

    #[test]
    fn eligible_leader_replicas_lead_when_no_isr_member_can() {
        let live = |b: i32| b != 1;
        // The ISR first, then (once it is empty) the ELR in assignment order, alone in the
        // new ISR.
        assert_eq!(elect(&[1, 2, 3], &[2], &[3], live, false).leader, 2);
        assert_eq!(elect(&[1, 2, 3], &[1], &[3], live, false).leader, -1);
        assert_eq!(
            elect(&[1, 3, 2], &[], &[2, 3], live, false),
            Election {
                leader: 3,
                isr: vec![3]
            }
        );
        assert_eq!(elect(&[1, 2, 3], &[], &[1], live, false).leader, -1);
        // Before an out-of-sync replica even when unclean election is on.
        assert_eq!(elect(&[2, 3], &[], &[3], |_| true, true).leader, 3);
        assert_eq!(elect(&[2, 3], &[], &[], |b| b == 3, true).leader, 3);
    }

    #[test]
    fn the_last_isr_member_stays() {
        assert_eq!(isr_without(&[1, 2], 1), vec![2]);
        assert_eq!(isr_without(&[1], 1), vec![1]);
        assert_eq!(isr_without(&[2, 3], 1), vec![2, 3]);
    }
}
