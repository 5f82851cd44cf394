use proptest::prelude::*;

use super::*;

fn member(name: &str) -> MemberId {
    Arc::from(name)
}

fn batch(base: i64, last: i64) -> LogBatch {
    LogBatch {
        base_offset: base,
        last_offset: last,
        skip: false,
    }
}

const ALL: AcquireLimits = AcquireLimits {
    max_records: i64::MAX,
};

fn range(first: i64, last: i64, dc: i16) -> AcquiredRange {
    AcquiredRange {
        first_offset: first,
        last_offset: last,
        delivery_count: dc,
    }
}

#[test]
fn a_record_is_acquired_by_one_member_at_a_time() {
    let mut s = SharePartitionState::new(0, ShareLimits::default());
    let a = member("a");
    let b = member("b");
    assert_eq!(s.acquire(&a, &[batch(0, 4)], ALL, 0), vec![range(0, 4, 1)]);
    assert_eq!(s.next_fetch_offset(), 5);
    // The same batch read again gives b nothing: every offset is a's.
    assert_eq!(s.acquire(&b, &[batch(0, 4)], ALL, 0), vec![]);
    assert_eq!(s.acquire(&b, &[batch(5, 6)], ALL, 0), vec![range(5, 6, 1)]);
    assert_eq!(s.acquired_count(), 7);
    s.check_invariants();
}

#[test]
fn accept_moves_the_start_past_acknowledged_records() {
    let mut s = SharePartitionState::new(10, ShareLimits::default());
    let a = member("a");
    s.acquire(&a, &[batch(10, 19)], ALL, 0);
    // Acknowledging the middle first keeps the start where it is.
    s.acknowledge("a", 12, 19, &[1], 0).unwrap();
    assert_eq!(s.start_offset(), 10);
    assert_eq!(s.delivery_complete_count(), 8);
    s.acknowledge("a", 10, 11, &[1], 0).unwrap();
    assert_eq!(s.start_offset(), 20);
    assert_eq!(s.end_offset(), 20);
    assert_eq!(s.delivery_complete_count(), 0);
    s.check_invariants();
}

#[test]
fn release_redelivers_with_a_higher_delivery_count() {
    let mut s = SharePartitionState::new(0, ShareLimits::default());
    let a = member("a");
    let b = member("b");
    s.acquire(&a, &[batch(0, 2)], ALL, 0);
    let changed = s.acknowledge("a", 0, 2, &[1, 2, 1], 0).unwrap();
    assert!(changed.changed && changed.released);
    assert_eq!(s.next_fetch_offset(), 1);
    assert_eq!(s.state_of(1), Some((RecordState::Available, 1)));
    assert_eq!(s.acquire(&b, &[batch(0, 2)], ALL, 5), vec![range(1, 1, 2)]);
    s.acknowledge("b", 1, 1, &[1], 6).unwrap();
    assert_eq!(s.start_offset(), 3);
    s.check_invariants();
}

#[test]
fn reject_never_delivers_again() {
    let mut s = SharePartitionState::new(0, ShareLimits::default());
    let a = member("a");
    s.acquire(&a, &[batch(0, 1)], ALL, 0);
    s.acknowledge("a", 0, 1, &[3, 2], 0).unwrap();
    assert_eq!(s.state_of(0), None, "rejected and passed by the start");
    assert_eq!(s.acquire(&a, &[batch(0, 1)], ALL, 0), vec![range(1, 1, 2)]);
    s.check_invariants();
}

#[test]
fn an_expired_lock_makes_records_available_again() {
    let limits = ShareLimits {
        lock_duration_ms: 1_000,
        ..ShareLimits::default()
    };
    let mut s = SharePartitionState::new(0, limits);
    let a = member("a");
    s.acquire(&a, &[batch(0, 3)], ALL, 100);
    assert_eq!(s.next_deadline_ms(), Some(1_100));
    assert_eq!(s.expire_locks(1_099), Changed::default());
    let changed = s.expire_locks(1_100);
    assert!(changed.released);
    // a's acknowledgement after its lock expired is refused.
    assert_eq!(
        s.acknowledge("a", 0, 3, &[1], 1_200),
        Err(ErrorCode::InvalidRecordState)
    );
    assert_eq!(
        s.acquire(&member("b"), &[batch(0, 3)], ALL, 1_200),
        vec![range(0, 3, 2)]
    );
    s.check_invariants();
}

#[test]
fn renew_extends_the_lock() {
    let limits = ShareLimits {
        lock_duration_ms: 1_000,
        ..ShareLimits::default()
    };
    let mut s = SharePartitionState::new(0, limits);
    s.acquire(&member("a"), &[batch(0, 0)], ALL, 0);
    assert_eq!(s.acknowledge("a", 0, 0, &[4], 900), Ok(Changed::default()));
    assert_eq!(s.expire_locks(1_500), Changed::default());
    assert_eq!(s.state_of(0), Some((RecordState::Acquired, 1)));
    assert!(s.expire_locks(1_900).released);
}

#[test]
fn a_record_is_archived_after_the_delivery_count_limit() {
    let limits = ShareLimits {
        delivery_count_limit: 3,
        ..ShareLimits::default()
    };
    let mut s = SharePartitionState::new(0, limits);
    let a = member("a");
    for delivery in 1..=3 {
        assert_eq!(
            s.acquire(&a, &[batch(0, 0)], ALL, 0),
            vec![range(0, 0, delivery)]
        );
        s.acknowledge("a", 0, 0, &[2], 0).unwrap();
    }
    assert_eq!(s.start_offset(), 1, "archived after the third delivery");
    assert_eq!(s.acquire(&a, &[batch(0, 0)], ALL, 0), vec![]);
    // A timed-out lock counts the same.
    s.acquire(&a, &[batch(1, 1)], ALL, 0);
    s.acknowledge("a", 1, 1, &[2], 0).unwrap();
    s.acquire(&a, &[batch(1, 1)], ALL, 0);
    s.acknowledge("a", 1, 1, &[2], 0).unwrap();
    s.acquire(&a, &[batch(1, 1)], ALL, 0);
    let changed = s.expire_locks(i64::MAX);
    assert!(changed.changed && !changed.released);
    assert_eq!(s.start_offset(), 2);
}

#[test]
fn acknowledgements_are_checked_before_anything_changes() {
    let mut s = SharePartitionState::new(0, ShareLimits::default());
    s.acquire(&member("a"), &[batch(0, 4)], ALL, 0);
    s.acquire(&member("b"), &[batch(5, 9)], ALL, 0);
    // a's range reaching into b's records: refused whole.
    assert_eq!(
        s.acknowledge("a", 3, 6, &[1], 0),
        Err(ErrorCode::InvalidRecordState)
    );
    assert_eq!(s.state_of(3), Some((RecordState::Acquired, 1)));
    // Past the window, malformed, or of an unknown type: invalid requests.
    for (first, last, types) in [
        (8, 10, vec![1i8]),
        (3, 2, vec![1]),
        (0, 1, vec![]),
        (0, 2, vec![1, 1]),
        (0, 0, vec![5]),
        (0, 0, vec![-1]),
    ] {
        assert_eq!(
            s.acknowledge("a", first, last, &types, 0),
            Err(ErrorCode::InvalidRequest),
            "{first}..={last} {types:?}"
        );
    }
    // Twice: the second finds the records acknowledged.
    s.acknowledge("a", 0, 4, &[1], 0).unwrap();
    assert_eq!(
        s.acknowledge("a", 0, 4, &[1], 0),
        Err(ErrorCode::InvalidRecordState)
    );
    s.check_invariants();
}

#[test]
fn the_window_is_bounded_by_the_record_lock_limit() {
    let limits = ShareLimits {
        max_record_locks: 10,
        ..ShareLimits::default()
    };
    let mut s = SharePartitionState::new(0, limits);
    let a = member("a");
    // Whole batches: the one crossing the limit is taken, the next is not.
    assert_eq!(
        s.acquire(&a, &[batch(0, 7), batch(8, 11), batch(12, 13)], ALL, 0),
        vec![range(0, 11, 1)]
    );
    assert!(!s.can_acquire());
    // Acknowledged records still count until the start passes them.
    s.acknowledge("a", 1, 11, &[1], 0).unwrap();
    assert!(!s.can_acquire());
    assert_eq!(s.acquire(&a, &[batch(12, 13)], ALL, 0), vec![]);
    s.acknowledge("a", 0, 0, &[1], 0).unwrap();
    assert!(s.can_acquire());
    assert_eq!(
        s.acquire(&a, &[batch(12, 13)], ALL, 0),
        vec![range(12, 13, 1)]
    );
}

#[test]
fn max_records_is_soft_and_counts_whole_batches() {
    let mut s = SharePartitionState::new(0, ShareLimits::default());
    let a = member("a");
    let few = AcquireLimits { max_records: 3 };
    assert_eq!(
        s.acquire(&a, &[batch(0, 4), batch(5, 9)], few, 0),
        vec![range(0, 4, 1)]
    );
    assert_eq!(s.end_offset(), 5);
}

#[test]
fn skipped_batches_and_log_gaps_are_archived_not_delivered() {
    let mut s = SharePartitionState::new(0, ShareLimits::default());
    let a = member("a");
    let aborted = LogBatch {
        base_offset: 2,
        last_offset: 3,
        skip: true,
    };
    // 0..=1, an aborted 2..=3, a gap 4..=5 (compacted), 6..=7.
    assert_eq!(
        s.acquire(&a, &[batch(0, 1), aborted, batch(6, 7)], ALL, 0),
        vec![range(0, 1, 1), range(6, 7, 1)]
    );
    // The client may still send GAP for what it did not get.
    s.acknowledge("a", 0, 7, &[1, 1, 0, 0, 0, 0, 1, 1], 0)
        .unwrap();
    assert_eq!(s.start_offset(), 8);
}

#[test]
fn a_member_leaving_releases_only_its_records() {
    let mut s = SharePartitionState::new(0, ShareLimits::default());
    s.acquire(&member("a"), &[batch(0, 1)], ALL, 0);
    s.acquire(&member("b"), &[batch(2, 3)], ALL, 0);
    assert!(s.release_member("a").released);
    assert_eq!(s.state_of(0), Some((RecordState::Available, 1)));
    assert_eq!(s.state_of(2), Some((RecordState::Acquired, 1)));
    s.check_invariants();
}

#[test]
fn the_log_start_passing_the_window_drops_what_it_passed() {
    let mut s = SharePartitionState::new(0, ShareLimits::default());
    s.acquire(&member("a"), &[batch(0, 9)], ALL, 0);
    assert!(s.log_moved(5, 10));
    assert_eq!(s.start_offset(), 5);
    assert_eq!(
        s.acknowledge("a", 5, 9, &[1], 0),
        Ok(Changed {
            changed: true,
            released: false,
        })
    );
    assert_eq!(s.start_offset(), 10);
    // A recreated, shorter log: the empty window moves back to its end.
    assert!(s.log_moved(0, 3));
    assert_eq!(s.start_offset(), 3);
    assert!(!s.log_moved(0, 3));
}

#[test]
fn persisted_state_restores_without_acquisitions() {
    let mut s = SharePartitionState::new(0, ShareLimits::default());
    let a = member("a");
    s.acquire(&a, &[batch(0, 9)], ALL, 0);
    s.acknowledge("a", 0, 9, &[2, 1, 1, 3, 2, 1, 1, 1, 1, 1], 0)
        .unwrap();
    s.acquire(&a, &[batch(0, 9), batch(10, 11)], ALL, 0);
    let batches = s.state_batches();
    let restored = SharePartitionState::restore(s.start_offset(), &batches, s.limits);
    // Offsets 0 and 4 were released once and are acquired again: restored, they are
    // available, and the delivery in flight counts (towards the limit, never against it).
    assert_eq!(restored.start_offset(), 0);
    assert_eq!(restored.state_of(0), Some((RecordState::Available, 2)));
    assert_eq!(restored.state_of(1), Some((RecordState::Acknowledged, 1)));
    assert_eq!(restored.state_of(3), Some((RecordState::Archived, 1)));
    assert_eq!(restored.state_of(4), Some((RecordState::Available, 2)));
    assert_eq!(restored.state_of(10), Some((RecordState::Available, 1)));
    assert_eq!(restored.next_fetch_offset(), 0);
    restored.check_invariants();
}

#[derive(Clone, Debug)]
enum Op {
    Fetch(u8, u8),
    Ack(u8, u8, u8, i8),
    Expire(u16),
    Leave(u8),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (0u8..3, 1u8..6).prop_map(|(m, n)| Op::Fetch(m, n)),
        (0u8..3, 0u8..40, 0u8..6, 0i8..4).prop_map(|(m, f, n, t)| Op::Ack(m, f, n, t)),
        (0u16..3_000).prop_map(Op::Expire),
        (0u8..3).prop_map(Op::Leave),
    ]
}

proptest! {
    /// Against any schedule: no offset is held by two members, an accepted offset is never
    /// delivered again, and no offset is delivered more than the limit.
    #[test]
    fn no_record_is_acquired_twice_or_redelivered_after_accept(
        ops in proptest::collection::vec(op(), 1..200)
    ) {
        let limits = ShareLimits {
            lock_duration_ms: 1_000,
            delivery_count_limit: 3,
            max_record_locks: 16,
        };
        let mut s = SharePartitionState::new(0, limits);
        let members: Vec<MemberId> = ["a", "b", "c"].into_iter().map(member).collect();
        let log_end = 40i64;
        let mut holder: std::collections::HashMap<i64, usize> = Default::default();
        let mut accepted = std::collections::HashSet::new();
        let mut deliveries: std::collections::HashMap<i64, i16> = Default::default();
        let mut now = 0i64;
        for op in ops {
            match op {
                Op::Fetch(m, n) => {
                    // The log in batches of 4 from the batch holding the fetch offset.
                    let from = s.next_fetch_offset() / 4 * 4;
                    let batches: Vec<LogBatch> = (from..log_end)
                        .step_by(4)
                        .map(|b| batch(b, b + 3))
                        .collect();
                    let got = s.acquire(
                        &members[m as usize],
                        &batches,
                        AcquireLimits { max_records: i64::from(n) },
                        now,
                    );
                    for r in got {
                        for o in r.first_offset..=r.last_offset {
                            prop_assert!(!accepted.contains(&o), "{o} redelivered after accept");
                            let d = deliveries.entry(o).or_default();
                            *d += 1;
                            prop_assert_eq!(*d, r.delivery_count);
                            prop_assert!(*d <= 3);
                            holder.insert(o, m as usize);
                        }
                    }
                }
                Op::Ack(m, f, n, t) => {
                    let first = i64::from(f);
                    let last = first + i64::from(n);
                    let mine = (first..=last).all(|o| holder.get(&o) == Some(&(m as usize))
                        && s.state_of(o).map(|x| x.0) == Some(RecordState::Acquired));
                    let r = s.acknowledge(members[m as usize].as_ref(), first, last, &[t], now);
                    if t != 0 {
                        prop_assert_eq!(r.is_ok(), mine, "ack {}..={} by {}", first, last, m);
                    }
                    if r.is_ok() {
                        for o in first..=last {
                            holder.remove(&o);
                            if t == 1 {
                                accepted.insert(o);
                            }
                        }
                    }
                }
                Op::Expire(dt) => {
                    now += i64::from(dt);
                    s.expire_locks(now);
                    holder.retain(|o, _| s.state_of(*o).map(|x| x.0) == Some(RecordState::Acquired));
                }
                Op::Leave(m) => {
                    s.release_member(members[m as usize].as_ref());
                    holder.retain(|_, h| *h != m as usize);
                }
            }
            s.check_invariants();
            prop_assert!(s.end_offset() - s.start_offset() <= 16 + 3);
        }
    }
}

#[test]
fn mixed_types_in_one_batch_release_reject_and_accept_each_offset() {
    let mut s = SharePartitionState::new(0, ShareLimits::default());
    let a = member("a");
    assert_eq!(s.acquire(&a, &[batch(0, 9)], ALL, 0), vec![range(0, 9, 1)]);
    s.acknowledge("a", 0, 9, &[2, 2, 2, 3, 1, 1, 1, 1, 1, 1], 0)
        .unwrap();
    assert_eq!(s.next_fetch_offset(), 0);
    assert!(s.can_acquire());
    assert_eq!(s.acquire(&a, &[batch(0, 9)], ALL, 0), vec![range(0, 2, 2)]);
    s.check_invariants();
}
