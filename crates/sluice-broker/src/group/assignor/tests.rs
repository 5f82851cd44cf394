use super::*;
use proptest::prelude::*;

type Spec = BTreeMap<String, MemberSpec<String>>;

fn topics(pairs: &[(&str, i32)]) -> BTreeMap<String, i32> {
    pairs.iter().map(|(t, n)| (t.to_string(), *n)).collect()
}

fn member(subscribed: &[&str]) -> MemberSpec<String> {
    MemberSpec {
        subscribed: subscribed.iter().map(|t| t.to_string()).collect(),
        current: Partitions::new(),
        instance_id: None,
    }
}

fn count(p: &Partitions<String>) -> usize {
    p.values().map(BTreeSet::len).sum()
}

/// Every partition of a subscribed topic is assigned exactly once, to a subscriber; nothing
/// else is assigned.
fn check_valid(
    members: &Spec,
    counts: &BTreeMap<String, i32>,
    out: &BTreeMap<String, Partitions<String>>,
) {
    let mut seen = BTreeSet::new();
    for (id, parts) in out {
        for (t, ps) in parts {
            assert!(
                members[id].subscribed.contains(t),
                "{id} got {t} it does not subscribe to"
            );
            for p in ps {
                assert!((0..counts[t]).contains(p), "{t}-{p} does not exist");
                assert!(seen.insert((t.clone(), *p)), "{t}-{p} assigned twice");
            }
        }
    }
    for (t, n) in counts {
        if members.values().any(|m| m.subscribed.contains(t)) {
            for p in 0..*n {
                assert!(seen.contains(&(t.clone(), p)), "{t}-{p} not assigned");
            }
        }
    }
}

#[test]
fn range_gives_contiguous_ranges_per_topic() {
    // Kafka's RangeAssignor example: two members, two topics of three partitions.
    let members: Spec = [
        ("c0".into(), member(&["t0", "t1"])),
        ("c1".into(), member(&["t0", "t1"])),
    ]
    .into();
    let out = assign(
        ServerAssignor::Range,
        &members,
        &topics(&[("t0", 3), ("t1", 3)]),
    );
    let expect = |pairs: &[(&str, &[i32])]| -> Partitions<String> {
        pairs
            .iter()
            .map(|(t, ps)| (t.to_string(), ps.iter().copied().collect()))
            .collect()
    };
    assert_eq!(out["c0"], expect(&[("t0", &[0, 1]), ("t1", &[0, 1])]));
    assert_eq!(out["c1"], expect(&[("t0", &[2]), ("t1", &[2])]));
}

#[test]
fn range_puts_static_members_first_by_instance_id() {
    let mut members: Spec = [("a".into(), member(&["t"])), ("b".into(), member(&["t"]))].into();
    members.get_mut("b").unwrap().instance_id = Some("z".into());
    let out = assign(ServerAssignor::Range, &members, &topics(&[("t", 3)]));
    assert_eq!(out["b"]["t"], [0, 1].into());
    assert_eq!(out["a"]["t"], [2].into());
}

#[test]
fn uniform_moves_only_the_new_members_share_when_an_eleventh_joins_ten() {
    let mut members: Spec = (0..10)
        .map(|i| (format!("m{i:02}"), member(&["t"])))
        .collect();
    let counts = topics(&[("t", 100)]);
    let first = assign(ServerAssignor::Uniform, &members, &counts);
    check_valid(&members, &counts, &first);
    assert!(first.values().all(|p| count(p) == 10));
    for (id, p) in &first {
        members.get_mut(id).unwrap().current = p.clone();
    }
    members.insert("m10".into(), member(&["t"]));
    let second = assign(ServerAssignor::Uniform, &members, &counts);
    check_valid(&members, &counts, &second);
    let counts_after: Vec<usize> = second.values().map(count).collect();
    assert!(
        counts_after.iter().all(|c| *c == 9 || *c == 10),
        "{counts_after:?}"
    );
    assert_eq!(count(&second["m10"]), 9);
    // Nobody lost more than it had to, nobody gained but the new member.
    let moved: usize = first
        .iter()
        .map(|(id, p)| count(p) - count(&second[id]))
        .sum();
    assert_eq!(moved, 9);
    for (id, p) in &first {
        for (t, ps) in &second[id] {
            assert!(ps.is_subset(&p[t]), "{id} gained partitions");
        }
    }
}

#[test]
fn uniform_balances_different_subscriptions_within_each_topic() {
    // a: t1 only; b and c: t1 and t2. t2's partitions can only go to b and c.
    let members: Spec = [
        ("a".into(), member(&["t1"])),
        ("b".into(), member(&["t1", "t2"])),
        ("c".into(), member(&["t1", "t2"])),
    ]
    .into();
    let counts = topics(&[("t1", 6), ("t2", 6)]);
    let out = assign(ServerAssignor::Uniform, &members, &counts);
    check_valid(&members, &counts, &out);
    let n: Vec<usize> = ["a", "b", "c"].iter().map(|m| count(&out[*m])).collect();
    assert_eq!(n, vec![4, 4, 4]);
}

fn arbitrary_group() -> impl Strategy<Value = (Spec, BTreeMap<String, i32>)> {
    let counts = proptest::collection::vec(0i32..12, 1..5);
    counts
        .prop_flat_map(|counts| {
            let topics: BTreeMap<String, i32> = counts
                .iter()
                .enumerate()
                .map(|(i, n)| (format!("t{i}"), *n))
                .collect();
            let n = topics.len();
            let member = (
                proptest::collection::btree_set(0..n, 0..=n),
                proptest::collection::btree_set((0..n, 0i32..14), 0..10),
            );
            (proptest::collection::vec(member, 1..8), Just(topics))
        })
        .prop_map(|(ms, topics)| {
            let names: Vec<String> = topics.keys().cloned().collect();
            let spec = ms
                .into_iter()
                .enumerate()
                .map(|(i, (subs, current))| {
                    let mut cur = Partitions::new();
                    for (t, p) in current {
                        cur.entry(names[t].clone())
                            .or_insert_with(BTreeSet::new)
                            .insert(p);
                    }
                    (
                        format!("m{i}"),
                        MemberSpec {
                            subscribed: subs.into_iter().map(|t| names[t].clone()).collect(),
                            current: cur,
                            instance_id: (i % 2 == 0).then(|| format!("i{}", 9 - i)),
                        },
                    )
                })
                .collect();
            (spec, topics)
        })
}

proptest! {
    /// Both assignors give a valid assignment from any subscriptions and any (even
    /// overlapping or stale) current assignments; uniform's is balanced: no partition could
    /// move to another subscriber of its topic holding two or more fewer.
    #[test]
    fn assignments_are_valid_and_uniform_is_balanced((members, counts) in arbitrary_group()) {
        for a in [ServerAssignor::Uniform, ServerAssignor::Range] {
            let out = assign(a, &members, &counts);
            prop_assert_eq!(out.len(), members.len());
            check_valid(&members, &counts, &out);
        }
        let out = assign(ServerAssignor::Uniform, &members, &counts);
        for (id, parts) in &out {
            for t in parts.keys() {
                for (other, m) in &members {
                    if m.subscribed.contains(t) {
                        prop_assert!(count(&out[other]) + 1 >= count(parts), "{} holds {} of which {}, {} subscribed holds {}", id, count(parts), t, other, count(&out[other]));
                    }
                }
            }
        }
    }
}
