use super::*;
use proptest::prelude::*;

fn settings() -> GroupSettings {
    GroupSettings {
        assignors: vec![ServerAssignor::Uniform, ServerAssignor::Range],
        max_size: 100,
    }
}

fn topics(pairs: &[(&str, i32)]) -> Topics<String> {
    pairs
        .iter()
        .map(|(t, n)| (t.to_string(), (format!("id-{t}"), *n)))
        .collect()
}

fn join(id: &str, topics: &[&str]) -> HeartbeatRequest<String> {
    HeartbeatRequest {
        member_id: id.into(),
        member_epoch: 0,
        rebalance_timeout_ms: 30_000,
        subscribed_topic_names: Some(topics.iter().map(|t| t.to_string()).collect()),
        owned: Some(Partitions::new()),
        ..Default::default()
    }
}

fn beat(id: &str, epoch: i32, owned: &Partitions<String>) -> HeartbeatRequest<String> {
    HeartbeatRequest {
        member_id: id.into(),
        member_epoch: epoch,
        rebalance_timeout_ms: -1,
        owned: Some(owned.clone()),
        ..Default::default()
    }
}

fn count(p: &Partitions<String>) -> usize {
    p.values().map(BTreeSet::len).sum()
}

/// A client as librdkafka and the Java consumer behave: it owns what the last assignment
/// said (dropping revoked partitions at once) and sends its epoch and what it owns.
#[derive(Clone, Debug, Default)]
struct Client {
    epoch: i32,
    owned: Partitions<String>,
}

impl Client {
    fn apply(&mut self, r: &HeartbeatResponse<String>) {
        self.epoch = r.member_epoch;
        if let Some(a) = &r.assignment {
            self.owned = a.clone();
        }
    }
}

/// No partition is owned by two clients at any moment.
fn exclusive(clients: &BTreeMap<String, Client>) -> Result<(), String> {
    let mut seen = BTreeMap::new();
    for (id, c) in clients {
        for (t, ps) in &c.owned {
            for p in ps {
                if let Some(other) = seen.insert((t.clone(), *p), id.clone()) {
                    return Err(format!("{t}-{p} owned by {other} and {id}"));
                }
            }
        }
    }
    Ok(())
}

#[test]
fn kafkas_worked_example_revoke_then_assign() {
    // M1 stable with p0 and p1; M2 joins: target M1 {p0}, M2 {p1}.
    let mut g = ConsumerGroup::new("g");
    let t = topics(&[("t", 2)]);
    let s = settings();
    let r = g.heartbeat(&join("m1", &["t"]), &t, &s).unwrap();
    assert_eq!(r.member_epoch, 1);
    assert_eq!(count(r.assignment.as_ref().unwrap()), 2);
    let m1_owned = r.assignment.unwrap();
    let r = g.heartbeat(&join("m2", &["t"]), &t, &s).unwrap();
    assert_eq!(r.member_epoch, 2, "m2 goes to the new epoch");
    assert_eq!(
        count(r.assignment.as_ref().unwrap()),
        0,
        "its partition is not released yet"
    );
    assert_eq!(g.state(), GroupState::Reconciling);
    // m1 heartbeats at epoch 1 still owning both: it must revoke one, at epoch 1.
    let r = g.heartbeat(&beat("m1", 1, &m1_owned), &t, &s).unwrap();
    assert_eq!(r.member_epoch, 1);
    let kept = r.assignment.unwrap();
    assert_eq!(count(&kept), 1);
    // m2 still waits while m1 has not acknowledged.
    let r = g
        .heartbeat(&beat("m2", 2, &Partitions::new()), &t, &s)
        .unwrap();
    assert!(r.assignment.is_none());
    // m1 acknowledges: epoch 2; then m2 gets the released partition.
    let r = g.heartbeat(&beat("m1", 1, &kept), &t, &s).unwrap();
    assert_eq!(r.member_epoch, 2);
    let r = g
        .heartbeat(&beat("m2", 2, &Partitions::new()), &t, &s)
        .unwrap();
    assert_eq!(count(r.assignment.as_ref().unwrap()), 1);
    assert_eq!(g.state(), GroupState::Stable);
}

#[test]
fn epochs_unknown_members_and_static_members_are_checked_as_kafka() {
    let mut g = ConsumerGroup::new("g");
    let t = topics(&[("t", 4)]);
    let s = settings();
    let r = g.heartbeat(&join("m1", &["t"]), &t, &s).unwrap();
    let owned = r.assignment.unwrap();
    let err = |r: Result<HeartbeatResponse<String>, Refusal>| r.unwrap_err().0;
    assert_eq!(
        err(g.heartbeat(&beat("m1", 7, &owned), &t, &s)),
        ErrorCode::FencedMemberEpoch
    );
    assert_eq!(
        err(g.heartbeat(&beat("ghost", 1, &owned), &t, &s)),
        ErrorCode::UnknownMemberId
    );
    // A rejoin (epoch 0) of a known member is accepted and gets its assignment back.
    let r = g.heartbeat(&join("m1", &["t"]), &t, &s).unwrap();
    assert_eq!(
        (r.member_epoch, r.assignment.map(|a| count(&a))),
        (1, Some(4))
    );
    // The previous epoch is accepted from a member that owns only what it is assigned.
    g.heartbeat(&join("m2", &["t"]), &t, &s).unwrap();
    let r = g.heartbeat(&beat("m1", 1, &owned), &t, &s).unwrap();
    let kept = r.assignment.unwrap();
    let r = g.heartbeat(&beat("m1", 1, &kept), &t, &s).unwrap();
    assert_eq!(r.member_epoch, 2);
    assert!(
        g.heartbeat(&beat("m1", 1, &kept), &t, &s).is_ok(),
        "lost answer tolerated"
    );
    assert_eq!(
        err(g.heartbeat(&beat("m1", 1, &owned), &t, &s)),
        ErrorCode::FencedMemberEpoch
    );

    // Static members: the instance is held until it leaves with -2; then a new member id
    // takes it over with its partitions.
    let mut st = join("s1", &["t"]);
    st.instance_id = Some("i".into());
    let r = g.heartbeat(&st, &t, &s).unwrap();
    let mut again = join("s2", &["t"]);
    again.instance_id = Some("i".into());
    assert_eq!(
        err(g.heartbeat(&again, &t, &s)),
        ErrorCode::UnreleasedInstanceId
    );
    let mut wrong = beat("s2", r.member_epoch, &Partitions::new());
    wrong.instance_id = Some("i".into());
    assert_eq!(
        err(g.heartbeat(&wrong, &t, &s)),
        ErrorCode::FencedInstanceId
    );
    let epoch_before = g.group_epoch;
    let r = g.leave("s1", Some("i"), -2).unwrap();
    assert_eq!(r.member_epoch, -2);
    assert_eq!(
        g.group_epoch, epoch_before,
        "a static member leaving for a while moves nothing"
    );
    let r = g.heartbeat(&again, &t, &s).unwrap();
    assert_eq!(r.member_id, "s2");
    assert!(!g.members.contains_key("s1"));
    assert_eq!(
        g.group_epoch, epoch_before,
        "taking over the instance moves nothing either"
    );
    // Leaving with -1 removes the member and moves the epoch.
    g.leave("m2", None, -1).unwrap();
    assert_eq!(g.group_epoch, epoch_before + 1);
    assert_eq!(err(g.leave("m2", None, -1)), ErrorCode::UnknownMemberId);
}

#[test]
fn more_partitions_move_the_group_epoch_at_the_next_heartbeat() {
    let mut g = ConsumerGroup::new("g");
    let s = settings();
    let r = g
        .heartbeat(&join("m1", &["t"]), &topics(&[("t", 2)]), &s)
        .unwrap();
    let owned = r.assignment.unwrap();
    let r = g
        .heartbeat(&beat("m1", 1, &owned), &topics(&[("t", 3)]), &s)
        .unwrap();
    assert_eq!(r.member_epoch, 2);
    assert_eq!(count(r.assignment.as_ref().unwrap()), 3);
}

#[derive(Clone, Debug)]
enum Event {
    Join(usize),
    Beat(usize),
    Leave(usize),
    Expire(usize),
    Grow,
}

fn events() -> impl Strategy<Value = Vec<Event>> {
    proptest::collection::vec(
        prop_oneof![
            2 => (0usize..6).prop_map(Event::Join),
            8 => (0usize..6).prop_map(Event::Beat),
            1 => (0usize..6).prop_map(Event::Leave),
            1 => (0usize..6).prop_map(Event::Expire),
            1 => Just(Event::Grow),
        ],
        1..80,
    )
}

proptest! {
    /// Any sequence of joins, heartbeats, leaves, expired sessions and topics gaining
    /// partitions: no partition is ever owned by two clients; once the clients keep
    /// heartbeating, the group becomes Stable with every partition owned exactly once.
    #[test]
    fn partitions_are_never_owned_twice_and_the_group_converges(events in events()) {
        let s = settings();
        let mut parts = 5;
        let mut g = ConsumerGroup::new("g");
        let mut clients: BTreeMap<String, Client> = BTreeMap::new();
        for e in events {
            let t = topics(&[("a", parts), ("b", 3)]);
            match e {
                Event::Join(i) => {
                    let id = format!("m{i}");
                    if clients.contains_key(&id) { continue; }
                    let subs: &[&str] = if i % 2 == 0 { &["a", "b"] } else { &["a"] };
                    let r = g.heartbeat(&join(&id, subs), &t, &s).unwrap();
                    let mut c = Client::default();
                    c.apply(&r);
                    clients.insert(id, c);
                }
                Event::Beat(i) => {
                    let id = format!("m{i}");
                    let Some(c) = clients.get(&id).cloned() else { continue };
                    let r = g.heartbeat(&beat(&id, c.epoch, &c.owned), &t, &s).unwrap();
                    clients.get_mut(&id).unwrap().apply(&r);
                }
                Event::Leave(i) => {
                    let id = format!("m{i}");
                    if clients.remove(&id).is_some() {
                        g.leave(&id, None, -1).unwrap();
                    }
                }
                Event::Expire(i) => {
                    // The coordinator fences a silent member; its client stops consuming
                    // (its session is gone).
                    let id = format!("m{i}");
                    if clients.remove(&id).is_some() {
                        prop_assert!(g.remove(&id));
                    }
                }
                Event::Grow => parts += 1,
            }
            prop_assert_eq!(exclusive(&clients), Ok(()));
        }
        let t = topics(&[("a", parts), ("b", 3)]);
        for _ in 0..20 {
            let ids: Vec<String> = clients.keys().cloned().collect();
            for id in ids {
                let c = clients[&id].clone();
                let r = g.heartbeat(&beat(&id, c.epoch, &c.owned), &t, &s).unwrap();
                clients.get_mut(&id).unwrap().apply(&r);
                prop_assert_eq!(exclusive(&clients), Ok(()));
            }
        }
        if clients.is_empty() {
            prop_assert_eq!(g.state(), GroupState::Empty);
        } else {
            prop_assert_eq!(g.state(), GroupState::Stable);
            let total: usize = clients.values().map(|c| count(&c.owned)).sum();
            // Even-numbered members also subscribe to b.
            let b = if clients.keys().any(|id| id[1..].parse::<usize>().unwrap() % 2 == 0) { 3 } else { 0 };
            prop_assert_eq!(total, parts as usize + b);
        }
    }
}

mod persisted {
    use super::super::records::{changes, replay, tombstones};
    use super::*;
    use crate::group::consumer_records::ConsumerGroupKey;
    use sluice_metadata::Uuid;

    fn hex(s: &str) -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    fn apply(
        groups: &mut BTreeMap<String, ConsumerGroup<Uuid>>,
        records: &[(Vec<u8>, Option<Vec<u8>>)],
    ) {
        for (k, v) in records {
            let key = ConsumerGroupKey::decode(k).expect("a consumer group key");
            replay(groups, &key, v.as_deref());
        }
    }

    /// A classic group converted to a consumer group: its members keep their partitions at
    /// the classic generation; a consumer-protocol member joining moves the epoch, the
    /// classic members are told to rejoin (heartbeat and sync), give up partitions by
    /// rejoining without them, and no partition is owned twice; the group's records
    /// (classic metadata included) rebuild it.
    #[test]
    fn a_converted_classic_group_takes_a_consumer_member_in() {
        use super::super::classic::{ClassicJoin, ClassicSource};
        let s = settings();
        let id = Uuid::from_u128(7);
        let t: Topics<Uuid> = [("t".to_string(), (id, 4))].into();
        let source = |m: &str, ps: &[i32]| ClassicSource {
            member_id: m.into(),
            instance_id: None,
            client_id: m.into(),
            client_host: "/h".into(),
            session_timeout_ms: 10_000,
            rebalance_timeout_ms: 30_000,
            protocols: vec![("range".into(), vec![0, 3])],
            topics: vec!["t".into()],
            rack_id: None,
            assigned: [(id, ps.iter().copied().collect())].into(),
        };
        let mut g = ConsumerGroup::from_classic(
            "g",
            5,
            vec![source("a", &[0, 1]), source("b", &[2, 3])],
            &t,
        );
        assert_eq!(g.state(), GroupState::Stable);
        assert_eq!(g.classic_heartbeat("a", None, 5), Ok(()));
        assert_eq!(
            g.classic_heartbeat("a", None, 4),
            Err(ErrorCode::IllegalGeneration)
        );
        assert_eq!(
            g.classic_heartbeat("zz", None, 5),
            Err(ErrorCode::UnknownMemberId)
        );
        // A consumer-protocol member joins: nothing free yet.
        let r = g
            .heartbeat(
                &HeartbeatRequest::<Uuid> {
                    member_id: "m".into(),
                    member_epoch: 0,
                    rebalance_timeout_ms: 30_000,
                    subscribed_topic_names: Some(vec!["t".into()]),
                    owned: Some(Partitions::new()),
                    ..Default::default()
                },
                &t,
                &s,
            )
            .unwrap();
        assert_eq!(r.member_epoch, 6);
        assert!(r
            .assignment
            .unwrap_or_default()
            .values()
            .all(BTreeSet::is_empty));
        assert_eq!(
            g.classic_heartbeat("a", None, 5),
            Err(ErrorCode::RebalanceInProgress)
        );
        assert_eq!(
            g.classic_sync("a", None, 5, Some("consumer"), Some("range"))
                .map(|_| ()),
            Err(ErrorCode::RebalanceInProgress)
        );
        // The classic members rejoin having revoked everything (eager).
        let join = |m: &str| ClassicJoin::<Uuid> {
            member_id: m.into(),
            instance_id: None,
            rebalance_timeout_ms: 30_000,
            session_timeout_ms: 10_000,
            protocol_type: "consumer".into(),
            protocols: vec![("range".into(), vec![0, 3])],
            topics: vec!["t".into()],
            owned: Partitions::new(),
            rack_id: None,
            client_id: m.into(),
            client_host: "/h".into(),
        };
        let mut wrong = join("a");
        wrong.protocols = vec![("roundrobin".into(), Vec::new())];
        assert_eq!(
            g.classic_join(&wrong, &t, &s).map(|_| ()),
            Err((ErrorCode::InconsistentGroupProtocol, String::new()))
        );
        for m in ["a", "b"] {
            let (epoch, protocol) = g.classic_join(&join(m), &t, &s).unwrap();
            assert_eq!((epoch, protocol.as_str()), (6, "range"));
            let (_, got) = g
                .classic_sync(m, None, 6, Some("consumer"), Some("range"))
                .unwrap();
            assert!(!got.is_empty());
        }
        // The consumer member now gets what was released; every partition has one owner.
        let r = g
            .heartbeat(
                &HeartbeatRequest::<Uuid> {
                    member_id: "m".into(),
                    member_epoch: 6,
                    rebalance_timeout_ms: -1,
                    owned: Some(Partitions::new()),
                    ..Default::default()
                },
                &t,
                &s,
            )
            .unwrap();
        assert!(r
            .assignment
            .is_some_and(|a| a.values().map(BTreeSet::len).sum::<usize>() > 0));
        let mut owned = BTreeSet::new();
        for m in g.members.values() {
            for p in m.assignment.assigned.values().flatten() {
                assert!(owned.insert(*p), "partition {p} owned twice");
            }
        }
        assert_eq!(owned.len(), 4);
        // Its records rebuild it, classic members included.
        let mut groups = BTreeMap::new();
        apply(&mut groups, &changes(None, &g));
        assert_eq!(groups.get("g"), Some(&g));
        assert!(groups["g"].members["a"].classic.is_some());
    }

    /// What a Kafka 4.4 coordinator wrote for a group of librdkafka members (ten, then an
    /// eleventh, on a 100-partition topic, then all closing) replays to the states it went
    /// through: never a partition owned twice, at one point eleven members holding all 100
    /// partitions and Stable, then an empty group at its last epoch, then deleted.
    #[test]
    fn a_group_kafka_wrote_replays() {
        let mut groups = BTreeMap::new();
        let (mut most, mut stable_with_all, mut last) = (0, false, None);
        for line in include_str!("kafka-4.4-rbc1.txt").lines() {
            let (k, v) = line.split_once(' ').unwrap();
            // The legacy partition-metadata record (type 4) is only ever a tombstone now.
            let Some(key) = ConsumerGroupKey::decode(&hex(k)) else {
                assert!(k.starts_with("0004") && v == "null", "{k}");
                continue;
            };
            replay(&mut groups, &key, (v != "null").then(|| hex(v)).as_deref());
            let Some(g) = groups.get("rbc1") else {
                continue;
            };
            last = Some((g.group_epoch, g.state()));
            let mut owned = BTreeSet::new();
            for m in g.members.values() {
                for (t, ps) in m
                    .assignment
                    .assigned
                    .iter()
                    .chain(&m.assignment.pending_revocation)
                {
                    for p in ps {
                        assert!(owned.insert((*t, *p)), "{p} owned twice");
                    }
                }
            }
            most = most.max(g.members.len());
            if g.members.len() == 11 && owned.len() == 100 && g.state() == GroupState::Stable {
                stable_with_all = true;
            }
        }
        assert_eq!(most, 11);
        assert!(stable_with_all);
        let (epoch, state): (i32, GroupState) = last.expect("the group existed");
        assert_eq!(state, GroupState::Empty);
        assert_eq!(epoch, 23);
        // Kafka's cleanup then deleted the empty group (it had no committed offsets).
        assert!(!groups.contains_key("rbc1"));
    }

    #[derive(Clone, Debug)]
    enum Step {
        Join(usize),
        Beat(usize),
        Leave(usize),
        StaticLeave(usize),
        Grow,
    }

    proptest! {
        /// After every change, the records it writes, read back by a coordinator that knows
        /// nothing else, rebuild exactly the group (what a failover resumes from); the
        /// group's tombstones delete it.
        #[test]
        fn the_records_of_each_change_rebuild_the_group(steps in proptest::collection::vec(prop_oneof![
            2 => (0usize..5).prop_map(Step::Join),
            6 => (0usize..5).prop_map(Step::Beat),
            1 => (0usize..5).prop_map(Step::Leave),
            1 => (0usize..5).prop_map(Step::StaticLeave),
            1 => Just(Step::Grow),
        ], 1..60)) {
            let s = settings();
            let ids = [Uuid::from_u128(1), Uuid::from_u128(2)];
            let mut parts = 4;
            let mut live = ConsumerGroup::new("g");
            let mut log: BTreeMap<String, ConsumerGroup<Uuid>> = BTreeMap::new();
            let mut clients: BTreeMap<String, (i32, Partitions<Uuid>)> = BTreeMap::new();
            for step in steps {
                let t: Topics<Uuid> = [("a".to_string(), (ids[0], parts)), ("b".to_string(), (ids[1], 2))].into();
                let before = live.clone();
                let existed = !live.members.is_empty() || live.group_epoch > 0;
                match step {
                    Step::Join(i) => {
                        let id = format!("m{i}");
                        if clients.contains_key(&id) { continue; }
                        let mut req = HeartbeatRequest {
                            member_id: id.clone(),
                            member_epoch: 0,
                            rebalance_timeout_ms: 1000,
                            subscribed_topic_names: Some(if i % 2 == 0 { vec!["a".into(), "b".into()] } else { vec!["a".into()] }),
                            owned: Some(Partitions::new()),
                            client_id: format!("c{i}"),
                            client_host: "/h".into(),
                            ..Default::default()
                        };
                        if i == 4 { req.instance_id = Some("static".into()); }
                        match live.heartbeat(&req, &t, &s) {
                            Ok(r) => { clients.insert(id, (r.member_epoch, r.assignment.unwrap_or_default())); }
                            Err(_) => continue,
                        }
                    }
                    Step::Beat(i) => {
                        let id = format!("m{i}");
                        let Some((epoch, owned)) = clients.get(&id).cloned() else { continue };
                        let mut req = HeartbeatRequest {
                            member_id: id.clone(),
                            member_epoch: epoch,
                            rebalance_timeout_ms: -1,
                            owned: Some(owned),
                            client_id: format!("c{i}"),
                            client_host: "/h".into(),
                            ..Default::default()
                        };
                        if i == 4 { req.instance_id = Some("static".into()); }
                        let Ok(r) = live.heartbeat(&req, &t, &s) else { clients.remove(&id); continue };
                        let c = clients.get_mut(&id).unwrap();
                        c.0 = r.member_epoch;
                        if let Some(a) = r.assignment { c.1 = a; }
                    }
                    Step::Leave(i) | Step::StaticLeave(i) => {
                        let id = format!("m{i}");
                        if clients.remove(&id).is_none() { continue; }
                        let static_leave = matches!(step, Step::StaticLeave(_)) && i == 4;
                        let instance = (i == 4).then_some("static");
                        live.leave(&id, instance, if static_leave { -2 } else { -1 }).unwrap();
                    }
                    Step::Grow => { parts += 1; continue; }
                }
                let records = changes(existed.then_some(&before), &live);
                apply(&mut log, &records);
                prop_assert_eq!(log.get("g"), Some(&live));
            }
            apply(&mut log, &tombstones(&live));
            prop_assert!(log.is_empty());
        }
    }
}

/// A member subscribing by regular expression gets what the expression matches (with what
/// it names); a topic the expression comes to match moves the epoch and is assigned.
#[test]
fn a_regular_expression_subscription_follows_what_it_matches() {
    let mut g = ConsumerGroup::new("g");
    let s = settings();
    let mut t = topics(&[("rx-a", 2), ("named", 1), ("other", 1)]);
    g.resolved = BTreeMap::from([("rx-.*".to_string(), BTreeSet::from(["rx-a".to_string()]))]);
    let mut req = join("m", &["named"]);
    req.subscribed_topic_regex = Some("rx-.*".into());
    let r = g.heartbeat(&req, &t, &s).unwrap();
    let got = r.assignment.unwrap();
    assert_eq!(count(&got), 3, "{got:?}");
    assert!(!got.contains_key("id-other"));
    let epoch = r.member_epoch;
    // A new matching topic: the coordinator resolves it, the next heartbeat assigns it.
    t.insert("rx-b".into(), ("id-rx-b".into(), 2));
    g.resolved
        .get_mut("rx-.*")
        .unwrap()
        .insert("rx-b".to_string());
    let r = g.heartbeat(&beat("m", epoch, &got), &t, &s).unwrap();
    assert!(r.member_epoch > epoch);
    assert_eq!(count(&r.assignment.unwrap()), 5);
    // Dropping the expression ("") leaves the named topic only.
    let mut req = beat("m", r.member_epoch, &Partitions::new());
    req.subscribed_topic_regex = Some(String::new());
    let owned_all: Partitions<String> = g.members["m"].assignment.assigned.clone();
    req.owned = Some(owned_all);
    let r = g.heartbeat(&req, &t, &s).unwrap();
    assert_eq!(g.members["m"].subscribed_topic_regex, None);
    let now = r.assignment.unwrap();
    assert_eq!(now.keys().collect::<Vec<_>>(), vec!["id-named"], "{now:?}");
}
