use std::collections::{BTreeMap, HashMap, HashSet};

use proptest::prelude::*;
use sluice_protocol::types::TopicPartition;

use super::{Assignor, MemberSubscription};

fn member(id: &str, topics: &[&str]) -> MemberSubscription {
    MemberSubscription {
        member_id: id.into(),
        instance_id: None,
        topics: topics.iter().map(|t| t.to_string()).collect(),
        owned: Vec::new(),
        generation: -1,
    }
}

fn tps(list: &[(&str, i32)]) -> Vec<TopicPartition> {
    list.iter()
        .map(|(t, p)| TopicPartition::new(*t, *p))
        .collect()
}

fn counts(list: &[(&str, i32)]) -> BTreeMap<String, i32> {
    list.iter().map(|(t, c)| (t.to_string(), *c)).collect()
}

#[test]
fn range_gives_contiguous_blocks_per_topic_like_kafka() {
    // Kafka's RangeAssignor javadoc example: two consumers, two topics of three partitions.
    let members = [member("c0", &["t0", "t1"]), member("c1", &["t0", "t1"])];
    let out = Assignor::Range.assign(&members, &counts(&[("t0", 3), ("t1", 3)]));
    assert_eq!(
        out["c0"],
        tps(&[("t0", 0), ("t0", 1), ("t1", 0), ("t1", 1)])
    );
    assert_eq!(out["c1"], tps(&[("t0", 2), ("t1", 2)]));

    let three = [
        member("a", &["w"]),
        member("b", &["w"]),
        member("c", &["w"]),
    ];
    let out = Assignor::Range.assign(&three, &counts(&[("w", 12)]));
    assert_eq!(
        out["a"],
        (0..4)
            .map(|p| TopicPartition::new("w", p))
            .collect::<Vec<_>>()
    );
    assert_eq!(
        out["c"],
        (8..12)
            .map(|p| TopicPartition::new("w", p))
            .collect::<Vec<_>>()
    );
}

#[test]
fn round_robin_deals_partitions_in_order_like_kafka() {
    // Kafka's RoundRobinAssignor javadoc example.
    let members = [member("c0", &["t0", "t1"]), member("c1", &["t0", "t1"])];
    let out = Assignor::RoundRobin.assign(&members, &counts(&[("t0", 3), ("t1", 3)]));
    assert_eq!(out["c0"], tps(&[("t0", 0), ("t0", 2), ("t1", 1)]));
    assert_eq!(out["c1"], tps(&[("t0", 1), ("t1", 0), ("t1", 2)]));
    // Different subscriptions: only subscribers are dealt a topic's partitions.
    let members = [
        member("c0", &["t0"]),
        member("c1", &["t0", "t1"]),
        member("c2", &["t0", "t1", "t2"]),
    ];
    let out = Assignor::RoundRobin.assign(&members, &counts(&[("t0", 1), ("t1", 2), ("t2", 3)]));
    assert_eq!(out["c0"], tps(&[("t0", 0)]));
    assert_eq!(out["c1"], tps(&[("t1", 0)]));
    assert_eq!(
        out["c2"],
        tps(&[("t1", 1), ("t2", 0), ("t2", 1), ("t2", 2)])
    );
}

#[test]
fn static_members_come_first_in_instance_id_order() {
    let mut a = member("zzz", &["t"]);
    a.instance_id = Some("i-1".into());
    let b = member("aaa", &["t"]);
    let out = Assignor::Range.assign(&[b, a], &counts(&[("t", 3)]));
    assert_eq!(out["zzz"], tps(&[("t", 0), ("t", 1)]));
    assert_eq!(out["aaa"], tps(&[("t", 2)]));
}

#[test]
fn cooperative_sticky_moves_partitions_in_two_rounds_and_keeps_the_rest() {
    let mut a = member("a", &["t"]);
    let mut b = member("b", &["t"]);
    a.owned = tps(&[("t", 0), ("t", 1), ("t", 2)]);
    b.owned = tps(&[("t", 3), ("t", 4), ("t", 5)]);
    a.generation = 1;
    b.generation = 1;
    let c = member("c", &["t"]);
    let parts = counts(&[("t", 6)]);
    let round1 = Assignor::CooperativeSticky.assign(&[a.clone(), b.clone(), c.clone()], &parts);
    // Nothing moves yet: c gets nothing, a and b each give one up.
    assert!(round1["c"].is_empty());
    assert_eq!(round1["a"].len(), 2);
    assert_eq!(round1["b"].len(), 2);
    assert!(round1["a"].iter().all(|tp| a.owned.contains(tp)));
    assert!(round1["b"].iter().all(|tp| b.owned.contains(tp)));
    // a and b revoke and rejoin owning what they were given; c now gets the two freed ones.
    a.owned = round1["a"].clone();
    b.owned = round1["b"].clone();
    a.generation = 2;
    b.generation = 2;
    let round2 = Assignor::CooperativeSticky.assign(&[a.clone(), b.clone(), c], &parts);
    assert_eq!(round2["a"], round1["a"]);
    assert_eq!(round2["b"], round1["b"]);
    assert_eq!(round2["c"].len(), 2);
}

#[test]
fn cooperative_sticky_voids_a_claim_two_members_make_in_the_same_generation() {
    let mut a = member("a", &["t"]);
    let mut b = member("b", &["t"]);
    a.owned = tps(&[("t", 0)]);
    b.owned = tps(&[("t", 0)]);
    a.generation = 3;
    b.generation = 3;
    let out = Assignor::CooperativeSticky.assign(&[a.clone(), b.clone()], &counts(&[("t", 2)]));
    assert!(!out.values().flatten().any(|tp| tp.partition.0 == 0));
    // A newer generation's claim wins.
    b.generation = 2;
    let out = Assignor::CooperativeSticky.assign(&[a, b], &counts(&[("t", 2)]));
    assert_eq!(out["a"], tps(&[("t", 0)]));
    assert_eq!(out["b"], tps(&[("t", 1)]));
}

fn arb_group() -> impl Strategy<Value = (Vec<MemberSubscription>, BTreeMap<String, i32>)> {
    let topics = prop::collection::vec(0..8i32, 1..4);
    (topics, 1..6usize)
        .prop_flat_map(|(sizes, n)| {
            let names: Vec<String> = (0..sizes.len()).map(|i| format!("t{i}")).collect();
            let counts: BTreeMap<String, i32> =
                names.iter().cloned().zip(sizes.iter().copied()).collect();
            let subs =
                prop::collection::vec(prop::sample::subsequence(names.clone(), 1..=names.len()), n);
            (subs, Just(counts))
        })
        .prop_map(|(subs, counts)| {
            let members = subs
                .into_iter()
                .enumerate()
                .map(|(i, topics)| MemberSubscription {
                    member_id: format!("m{i}"),
                    topics,
                    ..Default::default()
                })
                .collect();
            (members, counts)
        })
}

/// Each partition at most once, only to a subscriber; with `complete`, every subscribed
/// partition exactly once.
fn check_valid(
    members: &[MemberSubscription],
    counts: &BTreeMap<String, i32>,
    out: &BTreeMap<String, Vec<TopicPartition>>,
    complete: bool,
) -> Result<(), TestCaseError> {
    let wants: HashMap<&str, &MemberSubscription> =
        members.iter().map(|m| (m.member_id.as_str(), m)).collect();
    let mut seen = HashSet::new();
    for (id, parts) in out {
        for tp in parts {
            prop_assert!(seen.insert(tp.clone()), "{tp} assigned twice");
            prop_assert!(wants[id.as_str()].topics.contains(&tp.topic));
            prop_assert!(tp.partition.0 < counts[&tp.topic]);
        }
    }
    if complete {
        for (topic, count) in counts {
            if members.iter().any(|m| m.topics.contains(topic)) {
                for p in 0..*count {
                    prop_assert!(seen.contains(&TopicPartition::new(topic.clone(), p)));
                }
            }
        }
    }
    Ok(())
}

/// One cooperative rebalance: assign, check, and let every member keep what it was given.
fn cooperative_round(
    present: &mut [MemberSubscription],
    counts: &BTreeMap<String, i32>,
    generation: &mut i32,
) -> Result<(), TestCaseError> {
    *generation += 1;
    let out = Assignor::CooperativeSticky.assign(present, counts);
    check_valid(present, counts, &out, false)?;
    for m in present.iter() {
        for tp in &out[&m.member_id] {
            for other in present.iter().filter(|o| o.member_id != m.member_id) {
                prop_assert!(
                    !other.owned.contains(tp),
                    "{} handed {tp} still owned by {}",
                    m.member_id,
                    other.member_id
                );
            }
        }
    }
    for m in present.iter_mut() {
        m.owned = out[&m.member_id].clone();
        m.generation = *generation;
    }
    Ok(())
}

proptest! {
    #[test]
    fn every_assignor_hands_out_each_subscribed_partition_exactly_once((members, counts) in arb_group()) {
        for a in [Assignor::Range, Assignor::RoundRobin, Assignor::CooperativeSticky] {
            let out = a.assign(&members, &counts);
            prop_assert_eq!(out.len(), members.len());
            check_valid(&members, &counts, &out, true)?;
        }
    }

    #[test]
    fn cooperative_sticky_is_balanced_when_everyone_subscribes_to_everything(
        n in 1..7usize, sizes in prop::collection::vec(0..10i32, 1..4)
    ) {
        let topics: Vec<String> = (0..sizes.len()).map(|i| format!("t{i}")).collect();
        let counts: BTreeMap<String, i32> = topics.iter().cloned().zip(sizes).collect();
        let members: Vec<MemberSubscription> = (0..n)
            .map(|i| MemberSubscription { member_id: format!("m{i}"), topics: topics.clone(), ..Default::default() })
            .collect();
        let out = Assignor::CooperativeSticky.assign(&members, &counts);
        let loads: Vec<usize> = out.values().map(Vec::len).collect();
        prop_assert!(loads.iter().max().unwrap() - loads.iter().min().unwrap() <= 1);
    }

    /// Members come and go; each round every member revokes what it lost and reports what
    /// it kept. Nothing is ever owned twice, nobody is handed a partition another member
    /// still claims, and once membership settles two rounds hand out everything.
    #[test]
    fn cooperative_rounds_never_double_assign_and_converge(
        (members, counts) in arb_group(),
        churn in prop::collection::vec((0..6usize, any::<bool>()), 1..6),
    ) {
        let mut present: Vec<MemberSubscription> = members.clone();
        let mut generation = 0;
        for (who, join) in churn {
            if join || present.len() <= 1 {
                let mut m = members[who % members.len()].clone();
                m.member_id = format!("{}-{generation}", m.member_id);
                m.owned.clear();
                present.push(m);
            } else {
                present.remove(who % present.len());
            }
            cooperative_round(&mut present, &counts, &mut generation)?;
        }
        cooperative_round(&mut present, &counts, &mut generation)?;
        cooperative_round(&mut present, &counts, &mut generation)?;
        let out = Assignor::CooperativeSticky.assign(&present, &counts);
        check_valid(&present, &counts, &out, true)?;
    }
}
