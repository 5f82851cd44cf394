use super::*;

const SETTINGS: ShareSettings = ShareSettings {
    max_size: 3,
    session_timeout_ms: 45_000,
};

fn topics(list: &[(&str, i32)]) -> TopicsView {
    list.iter()
        .enumerate()
        .map(|(i, (n, p))| (n.to_string(), (i as u128 + 1, *p)))
        .collect()
}

fn hb(member: &str, epoch: i32, subscribed: Option<&[&str]>) -> ShareHeartbeat {
    ShareHeartbeat {
        member_id: member.to_string(),
        member_epoch: epoch,
        rack_id: None,
        subscribed: subscribed.map(|s| s.iter().map(|t| t.to_string()).collect()),
        client_id: "c".into(),
        client_host: "/127.0.0.1".into(),
    }
}

fn parts(a: &Option<Assignment>, topic: &str) -> Vec<i32> {
    a.as_ref()
        .and_then(|a| a.get(topic))
        .map(|ps| ps.iter().copied().collect())
        .unwrap_or_default()
}

#[test]
fn members_share_one_partition_and_split_many() {
    let mut g = ShareGroup::default();
    let one = topics(&[("t", 1)]);
    for m in ["a", "b", "c"] {
        let a = g
            .heartbeat(hb(m, 0, Some(&["t"])), &one, SETTINGS, 0)
            .unwrap();
        assert_eq!(parts(&a.assignment, "t"), vec![0], "{m} shares partition 0");
    }
    // Three members, four partitions: 2, 1, 1.
    let four = topics(&[("t", 4)]);
    let mut counts = Vec::new();
    for m in ["a", "b", "c"] {
        let epoch = g.members[m].member_epoch;
        let a = g.heartbeat(hb(m, epoch, None), &four, SETTINGS, 0).unwrap();
        counts.push(parts(&a.assignment, "t").len());
    }
    counts.sort();
    assert_eq!(counts, vec![1, 1, 2]);
    let mut all: Vec<i32> = g
        .members
        .values()
        .flat_map(|m| m.assigned["t"].iter().copied())
        .collect();
    all.sort();
    assert_eq!(all, vec![0, 1, 2, 3], "every partition once");
}

#[test]
fn more_members_than_partitions_share_them_evenly() {
    let members: BTreeMap<String, ShareMember> = (0..5)
        .map(|i| {
            let m = ShareMember {
                member_epoch: 1,
                previous_epoch: 0,
                rack_id: None,
                client_id: String::new(),
                client_host: String::new(),
                subscribed: ["t".to_string()].into(),
                assigned: Assignment::new(),
                deadline_ms: 0,
            };
            (format!("m{i}"), m)
        })
        .collect();
    let out = assignor::assign(&members, &[("t".to_string(), 2)].into());
    // ceil(5/2) = 3 members per partition: 6 slots over 5 members.
    let mut per_partition = [0; 2];
    for a in out.values() {
        let ps = &a["t"];
        assert!(!ps.is_empty() && ps.len() <= 2);
        for p in ps {
            per_partition[*p as usize] += 1;
        }
    }
    assert_eq!(per_partition, [3, 3]);
}

#[test]
fn epochs_are_checked_as_kafka_checks_them() {
    let mut g = ShareGroup::default();
    let t = topics(&[("t", 2)]);
    assert_eq!(
        g.heartbeat(hb("a", 3, None), &t, SETTINGS, 0)
            .unwrap_err()
            .0,
        ErrorCode::UnknownMemberId
    );
    let a = g
        .heartbeat(hb("a", 0, Some(&["t"])), &t, SETTINGS, 0)
        .unwrap();
    assert_eq!(a.member_epoch, 1);
    g.heartbeat(hb("b", 0, Some(&["t"])), &t, SETTINGS, 0)
        .unwrap();
    // a moves to epoch 2; its previous epoch (1) is still accepted once the answer is lost.
    let a2 = g.heartbeat(hb("a", 1, None), &t, SETTINGS, 0).unwrap();
    assert_eq!(a2.member_epoch, 2);
    assert!(a2.assignment.is_some(), "its partitions changed");
    assert!(g.heartbeat(hb("a", 1, None), &t, SETTINGS, 0).is_ok());
    assert_eq!(
        g.heartbeat(hb("a", 7, None), &t, SETTINGS, 0)
            .unwrap_err()
            .0,
        ErrorCode::FencedMemberEpoch
    );
    // A plain heartbeat with nothing new carries no assignment.
    assert_eq!(
        g.heartbeat(hb("a", 2, None), &t, SETTINGS, 0)
            .unwrap()
            .assignment,
        None
    );
    // Full: the group is at its maximum size.
    g.heartbeat(hb("c", 0, Some(&["t"])), &t, SETTINGS, 0)
        .unwrap();
    assert_eq!(
        g.heartbeat(hb("d", 0, Some(&["t"])), &t, SETTINGS, 0)
            .unwrap_err()
            .0,
        ErrorCode::GroupMaxSizeReached
    );
    // Leaving: -1 back; unknown members are told so.
    let left = g.heartbeat(hb("c", -1, None), &t, SETTINGS, 0).unwrap();
    assert_eq!(left.member_epoch, -1);
    assert_eq!(
        g.heartbeat(hb("c", -1, None), &t, SETTINGS, 0)
            .unwrap_err()
            .0,
        ErrorCode::UnknownMemberId
    );
}

#[test]
fn a_silent_member_expires_and_its_partitions_move() {
    let mut g = ShareGroup::default();
    let t = topics(&[("t", 2)]);
    g.heartbeat(hb("a", 0, Some(&["t"])), &t, SETTINGS, 0)
        .unwrap();
    g.heartbeat(hb("b", 0, Some(&["t"])), &t, SETTINGS, 10_000)
        .unwrap();
    assert!(!g.expire(44_999));
    assert!(g.expire(45_000));
    assert_eq!(g.members.keys().collect::<Vec<_>>(), vec!["b"]);
    let epoch = g.members["b"].member_epoch;
    let b = g
        .heartbeat(hb("b", epoch, None), &t, SETTINGS, 46_000)
        .unwrap();
    assert_eq!(parts(&b.assignment, "t"), vec![0, 1]);
    assert_eq!(g.state(), "Stable");
    g.heartbeat(hb("b", b.member_epoch, None), &t, SETTINGS, 47_000)
        .unwrap();
    g.heartbeat(hb("b", -1, None), &t, SETTINGS, 47_000)
        .unwrap();
    assert_eq!(g.state(), "Empty");
}

#[test]
fn new_partitions_reach_members_at_their_next_heartbeat() {
    let mut g = ShareGroup::default();
    let a = g
        .heartbeat(
            hb("a", 0, Some(&["t", "u"])),
            &topics(&[("t", 1)]),
            SETTINGS,
            0,
        )
        .unwrap();
    assert_eq!(parts(&a.assignment, "t"), vec![0]);
    assert_eq!(parts(&a.assignment, "u"), Vec::<i32>::new());
    let a = g
        .heartbeat(
            hb("a", a.member_epoch, None),
            &topics(&[("t", 2), ("u", 1)]),
            SETTINGS,
            0,
        )
        .unwrap();
    assert_eq!(parts(&a.assignment, "t"), vec![0, 1]);
    assert_eq!(parts(&a.assignment, "u"), vec![0]);
}
