use super::topology::*;
use super::*;

/// The word count of `interop/java/.../StreamsCount.java`: subtopology 0 reads `words`
/// and writes the repartition topic, subtopology 1 reads it and keeps a store.
fn word_count() -> Topology {
    Topology {
        epoch: 0,
        subtopologies: vec![
            Subtopology {
                id: "0".into(),
                source_topics: vec!["words".into()],
                repartition_sink_topics: vec!["app-by-value-repartition".into()],
                ..Subtopology::default()
            },
            Subtopology {
                id: "1".into(),
                repartition_source_topics: vec![TopicInfo {
                    name: "app-by-value-repartition".into(),
                    configs: vec![("cleanup.policy".into(), "delete".into())],
                    ..TopicInfo::default()
                }],
                state_changelog_topics: vec![TopicInfo {
                    name: "app-counts-changelog".into(),
                    replication_factor: 3,
                    ..TopicInfo::default()
                }],
                ..Subtopology::default()
            },
        ],
    }
}

fn topics(list: &[(&str, i32)]) -> TopicsView {
    list.iter()
        .enumerate()
        .map(|(i, (n, p))| (n.to_string(), (i as u128 + 1, *p)))
        .collect()
}

fn lookup(view: &TopicsView) -> impl Fn(&str) -> Option<i32> + '_ {
    |n| view.get(n).map(|(_, p)| *p)
}

#[test]
fn a_topology_is_configured_against_the_topics() {
    let t = word_count();
    // No source topic: nothing else can be decided.
    let c = t.configure(&lookup(&topics(&[]))).unwrap();
    assert_eq!(
        c.problem,
        Some((
            MISSING_SOURCE_TOPICS,
            "Source topics words are missing.".into()
        ))
    );
    assert!(c.tasks.is_empty());
    // The repartition topic inherits the source's 4 partitions, the changelog the tasks'.
    let c = t.configure(&lookup(&topics(&[("words", 4)]))).unwrap();
    assert_eq!(c.tasks, BTreeMap::from([("0".into(), 4), ("1".into(), 4)]));
    assert_eq!(
        c.problem,
        Some((
            MISSING_INTERNAL_TOPICS,
            "Internal topics are missing: app-by-value-repartition, app-counts-changelog".into()
        ))
    );
    let created: Vec<(&str, i32, i16, usize)> = c
        .to_create
        .iter()
        .map(|t| {
            (
                t.name.as_str(),
                t.partitions,
                t.replication_factor,
                t.configs.len(),
            )
        })
        .collect();
    assert_eq!(
        created,
        [
            ("app-by-value-repartition", 4, -1, 1),
            ("app-counts-changelog", 4, 3, 0)
        ]
    );
    // All there: ready.
    let all = topics(&[
        ("words", 4),
        ("app-by-value-repartition", 4),
        ("app-counts-changelog", 4),
    ]);
    assert!(t.configure(&lookup(&all)).unwrap().is_ready());
    // An internal topic with other partitions than decided.
    let wrong = topics(&[
        ("words", 4),
        ("app-by-value-repartition", 4),
        ("app-counts-changelog", 2),
    ]);
    let c = t.configure(&lookup(&wrong)).unwrap();
    assert_eq!(
        c.problem,
        Some((
            INCORRECTLY_PARTITIONED_TOPICS,
            "Existing topic app-counts-changelog has different number of partitions: expected 4, found 2".into()
        ))
    );
}

#[test]
fn copartitioned_topics_must_agree_and_repartition_topics_follow_them() {
    let mut t = Topology {
        epoch: 0,
        subtopologies: vec![Subtopology {
            id: "0".into(),
            source_topics: vec!["left".into(), "right".into()],
            copartition_groups: vec![CopartitionGroup {
                source_topics: vec![0, 1],
                repartition_source_topics: vec![],
            }],
            ..Subtopology::default()
        }],
    };
    let c = t
        .configure(&lookup(&topics(&[("left", 3), ("right", 4)])))
        .unwrap();
    assert_eq!(
        c.problem,
        Some((
            INCORRECTLY_PARTITIONED_TOPICS,
            "Following topics do not have the same number of partitions: [left=3, right=4]".into()
        ))
    );
    // A repartition topic joined with a source takes the source's count.
    t.subtopologies[0].source_topics = vec!["left".into()];
    t.subtopologies[0].repartition_source_topics = vec![TopicInfo {
        name: "rekeyed".into(),
        ..TopicInfo::default()
    }];
    t.subtopologies[0].copartition_groups[0] = CopartitionGroup {
        source_topics: vec![0],
        repartition_source_topics: vec![0],
    };
    t.subtopologies.push(Subtopology {
        id: "1".into(),
        source_topics: vec!["right".into()],
        repartition_sink_topics: vec!["rekeyed".into()],
        ..Subtopology::default()
    });
    let c = t
        .configure(&lookup(&topics(&[("left", 3), ("right", 8)])))
        .unwrap();
    assert_eq!(c.internal.get("rekeyed"), Some(&3));
    assert_eq!(c.tasks.get("0"), Some(&3));
    // A repartition topic nothing writes is an invalid topology.
    t.subtopologies.pop();
    assert!(t
        .configure(&lookup(&topics(&[("left", 3)])))
        .unwrap_err()
        .contains("never used as a sink topic"));
}

fn member(process: &str, previous: &[(&str, &[i32])]) -> assignor::AssignMember {
    let mut p = TaskSet::default();
    for (s, ps) in previous {
        p.active.insert(s.to_string(), ps.iter().copied().collect());
    }
    assignor::AssignMember {
        process_id: process.into(),
        previous: p,
    }
}

fn count(t: &Tasks) -> usize {
    t.values().map(BTreeSet::len).sum()
}

#[test]
fn the_sticky_assignor_balances_keeps_owners_and_spreads_standbys() {
    let tasks = BTreeMap::from([("0".to_string(), 5), ("1".to_string(), 5)]);
    let stateful = BTreeSet::from(["1".to_string()]);
    // Four members in two processes, nothing before: 10 tasks as 3, 3, 2, 2.
    let members: BTreeMap<String, assignor::AssignMember> = [
        ("a1", member("A", &[])),
        ("a2", member("A", &[])),
        ("b1", member("B", &[])),
        ("b2", member("B", &[])),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    let out = assignor::assign(&members, &tasks, &stateful, 0);
    let mut loads: Vec<usize> = out.values().map(|t| count(&t.active)).collect();
    loads.sort();
    assert_eq!(loads, [2, 2, 3, 3]);
    let all: BTreeSet<(String, i32)> = out
        .values()
        .flat_map(|t| {
            t.active
                .iter()
                .flat_map(|(s, ps)| ps.iter().map(move |p| (s.clone(), *p)))
        })
        .collect();
    assert_eq!(all.len(), 10, "every task once");
    // Previous owners keep their tasks.
    let members: BTreeMap<String, assignor::AssignMember> = [
        ("a1", member("A", &[("0", &[0, 1, 2]), ("1", &[0, 1])])),
        ("b1", member("B", &[("0", &[3, 4]), ("1", &[2, 3, 4])])),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    let out = assignor::assign(&members, &tasks, &stateful, 1);
    assert_eq!(out["a1"].active, members["a1"].previous.active);
    assert_eq!(out["b1"].active, members["b1"].previous.active);
    // One standby of each stateful task, on the other process.
    for (me, other) in [("a1", "b1"), ("b1", "a1")] {
        for (s, ps) in &out[me].standby {
            assert_eq!(s, "1");
            for p in ps {
                assert!(out[other].active["1"].contains(p), "{me} standby 1_{p}");
            }
        }
    }
    assert_eq!(count(&out["a1"].standby) + count(&out["b1"].standby), 5);
}

fn settings() -> StreamsSettings {
    StreamsSettings {
        max_size: 10,
        num_standby: 0,
        delay_initial_assignment: false,
    }
}

fn join(id: &str, process: &str) -> StreamsHeartbeat {
    StreamsHeartbeat {
        member_id: id.into(),
        member_epoch: 0,
        endpoint_information_epoch: -1,
        rebalance_timeout_ms: 30_000,
        topology: Some(word_count()),
        owned: Some(TaskSet::default()),
        process_id: Some(process.into()),
        ..StreamsHeartbeat::default()
    }
}

fn beat(id: &str, epoch: i32, owned: &TaskSet) -> StreamsHeartbeat {
    StreamsHeartbeat {
        member_id: id.into(),
        member_epoch: epoch,
        endpoint_information_epoch: -1,
        rebalance_timeout_ms: -1,
        owned: Some(owned.clone()),
        ..StreamsHeartbeat::default()
    }
}

fn ready() -> TopicsView {
    topics(&[
        ("words", 2),
        ("app-by-value-repartition", 2),
        ("app-counts-changelog", 2),
    ])
}

#[test]
fn members_reconcile_and_an_active_task_never_has_two_owners() {
    let mut g = StreamsGroup::new("g");
    let t = ready();
    let a = g.heartbeat(&join("a", "A"), &t, &settings()).unwrap();
    let a_tasks = a.tasks.clone().expect("tasks on join");
    assert_eq!(count(&a_tasks.active), 4, "alone, it has all four tasks");
    assert!(a.status.is_empty());
    assert_eq!(g.state(), GroupState::Stable);
    // b joins: it gets nothing until a revokes.
    let b = g.heartbeat(&join("b", "B"), &t, &settings()).unwrap();
    assert_eq!(b.tasks.as_ref().map(|t| count(&t.active)), Some(0));
    assert_eq!(g.state(), GroupState::Reconciling);
    // a is told to give two up (it keeps its epoch until it does).
    let a2 = g
        .heartbeat(&beat("a", a.member_epoch, &a_tasks), &t, &settings())
        .unwrap();
    let kept = a2.tasks.clone().expect("a revokes");
    assert_eq!(count(&kept.active), 2);
    assert_eq!(a2.member_epoch, a.member_epoch);
    // b still waits: a has not reported the revocation.
    let b2 = g
        .heartbeat(
            &beat("b", b.member_epoch, &TaskSet::default()),
            &t,
            &settings(),
        )
        .unwrap();
    assert_eq!(b2.tasks, None);
    // a acknowledges; then b receives the two a released.
    let a3 = g
        .heartbeat(&beat("a", a2.member_epoch, &kept), &t, &settings())
        .unwrap();
    assert_eq!(a3.member_epoch, g.assignment_epoch);
    let b3 = g
        .heartbeat(
            &beat("b", b2.member_epoch, &TaskSet::default()),
            &t,
            &settings(),
        )
        .unwrap();
    let got = b3.tasks.expect("b's tasks");
    assert_eq!(count(&got.active), 2);
    assert!(!got.intersects(&kept), "no task twice");
    assert_eq!(g.state(), GroupState::Stable);
    // A stale epoch is fenced; an older one with owned tasks it still has passes.
    let err = g
        .heartbeat(&beat("b", b3.member_epoch + 1, &got), &t, &settings())
        .unwrap_err();
    assert_eq!(err.0, ErrorCode::FencedMemberEpoch);
    // Commits: at the member's epoch; an older one only for tasks it had then.
    let m = &g.members["a"];
    assert!(g.commit_epoch_ok(m, m.member_epoch, &[]).is_ok());
    let (s, p) = kept
        .active
        .iter()
        .next()
        .map(|(s, ps)| (s.clone(), *ps.iter().next().unwrap()))
        .unwrap();
    let topic = if s == "0" {
        "words"
    } else {
        "app-by-value-repartition"
    };
    assert!(g
        .commit_epoch_ok(m, m.member_epoch - 1, &[(topic.into(), p)])
        .is_ok());
    assert!(g.commit_epoch_ok(m, m.member_epoch + 1, &[]).is_err());
    // b leaves: the group epoch moves and a gets everything back at its next heartbeat.
    g.leave("b", None, -1, false).unwrap();
    let a4 = g
        .heartbeat(&beat("a", a3.member_epoch, &kept), &t, &settings())
        .unwrap();
    assert_eq!(a4.tasks.map(|t| count(&t.active)), Some(4));
}

#[test]
fn a_group_waits_for_its_topics_and_its_initial_delay() {
    let mut g = StreamsGroup::new("g");
    let delayed = StreamsSettings {
        delay_initial_assignment: true,
        ..settings()
    };
    // Internal topics missing: no tasks, the broker is to create them.
    let a = g
        .heartbeat(&join("a", "A"), &topics(&[("words", 2)]), &delayed)
        .unwrap();
    assert_eq!(a.tasks.as_ref().map(TaskSet::is_empty), Some(true));
    assert_eq!(a.to_create.len(), 2);
    assert!(a.status.iter().any(|(c, _)| *c == MISSING_INTERNAL_TOPICS));
    assert_eq!(g.state(), GroupState::NotReady);
    // Created: still delayed (epoch 1, no tasks) until the coordinator's timer.
    let a2 = g
        .heartbeat(
            &beat("a", a.member_epoch, &TaskSet::default()),
            &ready(),
            &delayed,
        )
        .unwrap();
    assert!(
        a2.status.iter().any(|(c, _)| *c == ASSIGNMENT_DELAYED),
        "{a2:?}"
    );
    assert_eq!(a2.tasks, None);
    g.assign_now();
    let a3 = g
        .heartbeat(
            &beat("a", a2.member_epoch, &TaskSet::default()),
            &ready(),
            &delayed,
        )
        .unwrap();
    assert!(a3.status.is_empty(), "{a3:?}");
    assert_eq!(a3.tasks.map(|t| count(&t.active)), Some(4));
    // A different topology at the same epoch is refused.
    let mut other = join("c", "C");
    if let Some(t) = other.topology.as_mut() {
        t.subtopologies.pop();
    }
    let err = g.heartbeat(&other, &ready(), &delayed).unwrap_err();
    assert_eq!(
        err,
        (
            ErrorCode::InvalidRequest,
            "Topology updates are not supported yet.".into()
        )
    );
}

#[test]
fn a_static_member_that_comes_back_takes_its_tasks_without_a_rebalance() {
    let mut g = StreamsGroup::new("g");
    let t = ready();
    let mut first = join("a", "A");
    first.instance_id = Some("i1".into());
    let a = g.heartbeat(&first, &t, &settings()).unwrap();
    let tasks = a.tasks.clone().unwrap();
    assert_eq!(count(&tasks.active), 4);
    let epoch = g.group_epoch;
    // Held by a live member: refused. (The same process, restarted: its process id is
    // kept in its state directory.)
    let mut other = join("b", "A");
    other.instance_id = Some("i1".into());
    let err = g.heartbeat(&other, &t, &settings()).unwrap_err();
    assert_eq!(err.0, ErrorCode::UnreleasedInstanceId);
    // Left for a while (-2): its tasks wait for it; the next holder takes them at once.
    g.leave("a", Some("i1"), -2, false).unwrap();
    assert_eq!(g.members["a"].member_epoch, -2);
    let b = g.heartbeat(&other, &t, &settings()).unwrap();
    assert_eq!(b.tasks, Some(tasks));
    assert!(!g.members.contains_key("a"));
    assert_eq!(g.group_epoch, epoch, "no rebalance");
}

/// The group as its records rebuild it: what is not written (the configured topology,
/// the shutdown requester, the endpoints' epoch, the delay in progress) set as a load
/// leaves it.
fn as_persisted(g: &StreamsGroup) -> StreamsGroup {
    let mut g = g.clone();
    g.configured = None;
    g.shutdown_requester = None;
    g.endpoint_information_epoch = 0;
    g.delaying = false;
    g
}

#[test]
fn the_records_of_each_change_rebuild_the_group() {
    use crate::group::streams_records::StreamsGroupKey;
    let mut log: Vec<records::Record> = Vec::new();
    let mut g = StreamsGroup::new("g");
    let t = ready();
    let standby = StreamsSettings {
        num_standby: 1,
        ..settings()
    };
    // After each step: its records, appended to the log, rebuild the group as it is.
    let mut step = |g: &mut StreamsGroup, change: &dyn Fn(&mut StreamsGroup)| -> usize {
        let before = g.clone();
        change(g);
        let written = records::changes(Some(&before), g);
        let n = written.len();
        log.extend(written);
        let mut groups = BTreeMap::new();
        for (k, v) in &log {
            let key = StreamsGroupKey::decode(k).expect("a streams group key");
            records::replay(&mut groups, &key, v.as_deref());
        }
        assert_eq!(groups.get("g").map(as_persisted), Some(as_persisted(g)));
        n
    };
    let mut a_tasks = TaskSet::default();
    step(&mut g, &|g| {
        g.heartbeat(&join("a", "A"), &t, &standby).unwrap();
    });
    // b: static, with an endpoint and client tags.
    step(&mut g, &|g| {
        let mut b = join("b", "B");
        b.instance_id = Some("b-1".into());
        b.user_endpoint = Some(("b.example".into(), 7070));
        b.client_tags = Some(BTreeMap::from([("zone".into(), "z1".into())]));
        g.heartbeat(&b, &t, &standby).unwrap();
    });
    // a is told to revoke (a member in the middle of its reconciliation).
    a_tasks.active = g.members["a"].assigned.active.clone();
    let a_epoch = g.members["a"].member_epoch;
    let owned = a_tasks.clone();
    step(&mut g, &|g| {
        g.heartbeat(&beat("a", a_epoch, &owned), &t, &standby)
            .unwrap();
    });
    assert_eq!(g.members["a"].state, MemberState::UnrevokedTasks);
    assert!(!g.members["a"].active_epochs.is_empty());
    // A heartbeat that changes nothing writes nothing.
    let unchanged = step(&mut g, &|g| {
        g.heartbeat(&beat("a", a_epoch, &owned), &t, &standby)
            .unwrap();
    });
    assert_eq!(unchanged, 0);
    // b leaves for a while (-2), a is fenced.
    step(&mut g, &|g| g.leave("b", Some("b-1"), -2, false).unwrap());
    step(&mut g, &|g| assert!(g.remove("a")));
    // Deleting the group leaves nothing of it.
    log.extend(records::tombstones(&g));
    let mut groups = BTreeMap::new();
    for (k, v) in &log {
        let key = StreamsGroupKey::decode(k).unwrap();
        records::replay(&mut groups, &key, v.as_deref());
    }
    assert!(groups.is_empty(), "{groups:?}");
}
