use super::*;

const P: &str = "range";

fn cfg(initial_delay: i64) -> GroupConfig {
    GroupConfig {
        initial_rebalance_delay_ms: initial_delay,
        ..GroupConfig::default()
    }
}

fn join_req(member: &str, instance: Option<&str>, version: i16) -> JoinRequest {
    JoinRequest {
        group_id: "g".into(),
        member_id: member.into(),
        instance_id: instance.map(str::to_owned),
        protocol_type: "consumer".into(),
        protocols: vec![
            (P.into(), Bytes::from_static(b"meta")),
            ("roundrobin".into(), Bytes::new()),
        ],
        session_timeout_ms: 10_000,
        rebalance_timeout_ms: 30_000,
        client_id: "c".into(),
        client_host: "/127.0.0.1".into(),
        version,
    }
}

#[allow(clippy::too_many_arguments)]
fn sr(
    generation: i32,
    member: &str,
    instance: Option<&str>,
    protocol_type: Option<&str>,
    protocol_name: Option<&str>,
    assignments: Vec<(String, Bytes)>,
) -> SyncRequest {
    SyncRequest {
        group_id: "g".into(),
        generation,
        member_id: member.into(),
        instance_id: instance.map(str::to_owned),
        protocol_type: protocol_type.map(str::to_owned),
        protocol_name: protocol_name.map(str::to_owned),
        assignments,
    }
}

fn joins(fx: &[Effect]) -> Vec<(Token, JoinOutcome)> {
    fx.iter()
        .filter_map(|e| match e {
            Effect::Join(t, o) => Some((*t, o.clone())),
            _ => None,
        })
        .collect()
}

fn syncs(fx: &[Effect]) -> Vec<(Token, SyncOutcome)> {
    fx.iter()
        .filter_map(|e| match e {
            Effect::Sync(t, o) => Some((*t, o.clone())),
            _ => None,
        })
        .collect()
}

/// Join a new member through the KIP-394 round trip; returns its member id and the
/// effects of the second join.
fn join_new(m: &mut GroupMachine, token: Token, now: i64) -> (String, Vec<Effect>) {
    let fx = m.join(join_req("", None, 5), token, now);
    let first = joins(&fx);
    assert_eq!(first[0].1.error, Some(ErrorCode::MemberIdRequired));
    let id = first[0].1.member_id.clone();
    (
        id.clone(),
        join_and_tick(m, join_req(&id, None, 5), token, now),
    )
}

/// A join, then the coordinator's timers at the same instant: the first rebalance of an
/// empty group completes on the timer even with no initial delay (as Kafka's).
fn join_and_tick(m: &mut GroupMachine, req: JoinRequest, token: Token, now: i64) -> Vec<Effect> {
    let mut fx = m.join(req, token, now);
    fx.extend(m.tick(now));
    fx
}

#[test]
fn two_members_form_a_generation_and_the_leader_assigns() {
    let mut m = GroupMachine::new(cfg(0));
    let (a, fx) = join_new(&mut m, 1, 0);
    let done = joins(&fx);
    assert_eq!(
        done.len(),
        1,
        "a lone member completes the join on the first timer"
    );
    assert_eq!(
        (done[0].1.generation, done[0].1.leader.as_str()),
        (1, a.as_str())
    );
    // A second member: a new rebalance; a must rejoin.
    let (b, fx) = join_new(&mut m, 2, 10);
    assert!(joins(&fx).is_empty(), "b waits for a to rejoin");
    assert_eq!(
        m.heartbeat("g", 1, &a, None, 11),
        Some(ErrorCode::RebalanceInProgress)
    );
    let fx = m.join(join_req(&a, None, 5), 3, 12);
    let done = joins(&fx);
    assert_eq!(done.len(), 2);
    let leader = done.iter().find(|(t, _)| *t == 3).unwrap().1.clone();
    let follower = done.iter().find(|(t, _)| *t == 2).unwrap().1.clone();
    assert_eq!(
        (
            leader.generation,
            leader.leader.as_str(),
            leader.protocol.as_deref()
        ),
        (2, a.as_str(), Some(P))
    );
    assert_eq!(leader.members.len(), 2);
    assert!(follower.members.is_empty());
    assert_eq!(m.group("g").unwrap().state, GroupState::CompletingRebalance);
    // The follower's sync waits for the leader's.
    let fx = m.sync(&sr(2, &b, None, None, None, vec![]), 4, 13);
    assert!(syncs(&fx).is_empty());
    let fx = m.sync(
        &sr(
            2,
            &a,
            None,
            Some("consumer"),
            Some(P),
            vec![
                (a.clone(), Bytes::from_static(b"A")),
                (b.clone(), Bytes::from_static(b"B")),
            ],
        ),
        5,
        14,
    );
    let s = syncs(&fx);
    assert_eq!(s.len(), 2);
    assert!(s
        .iter()
        .any(|(t, o)| *t == 4 && o.assignment == Bytes::from_static(b"B")));
    assert!(fx.contains(&Effect::Persist("g".into())));
    assert_eq!(m.group("g").unwrap().state, GroupState::Stable);
    assert_eq!(m.heartbeat("g", 2, &b, None, 15), None);
    assert_eq!(
        m.heartbeat("g", 1, &b, None, 15),
        Some(ErrorCode::IllegalGeneration)
    );
    assert_eq!(
        m.heartbeat("g", 2, "stranger", None, 15),
        Some(ErrorCode::UnknownMemberId)
    );
    assert_eq!(
        m.heartbeat("nope", 2, &b, None, 15),
        Some(ErrorCode::UnknownMemberId)
    );
}

#[test]
fn input_errors_follow_kafka() {
    let mut m = GroupMachine::new(cfg(0));
    let mut r = join_req("", None, 5);
    r.session_timeout_ms = 10;
    assert_eq!(
        joins(&m.join(r, 1, 0))[0].1.error,
        Some(ErrorCode::InvalidSessionTimeout)
    );
    let mut r = join_req("", None, 5);
    r.group_id.clear();
    assert_eq!(
        joins(&m.join(r, 1, 0))[0].1.error,
        Some(ErrorCode::InvalidGroupId)
    );
    assert_eq!(
        joins(&m.join(join_req("ghost", None, 5), 1, 0))[0].1.error,
        Some(ErrorCode::UnknownMemberId)
    );
    let (_a, _) = join_new(&mut m, 1, 0);
    let mut other = join_req("", None, 5);
    other.protocols = vec![("other".into(), Bytes::new())];
    assert_eq!(
        joins(&m.join(other, 2, 0))[0].1.error,
        Some(ErrorCode::InconsistentGroupProtocol)
    );
}

#[test]
fn a_silent_member_is_evicted_after_its_session_timeout() {
    let mut m = GroupMachine::new(cfg(0));
    let (a, _) = join_new(&mut m, 1, 0);
    let (b, _) = join_new(&mut m, 2, 0);
    m.join(join_req(&a, None, 5), 3, 0);
    m.sync(&sr(2, &a, None, None, None, vec![]), 4, 0);
    assert_eq!(m.group("g").unwrap().state, GroupState::Stable);
    // a heartbeats, b goes silent.
    assert_eq!(m.heartbeat("g", 2, &a, None, 9_000), None);
    assert!(m.next_deadline().unwrap() <= 10_000);
    let _ = m.tick(10_000);
    let g = m.group("g").unwrap();
    assert!(!g.members.contains_key(&b));
    assert_eq!(g.state, GroupState::PreparingRebalance);
    let fx = m.join(join_req(&a, None, 5), 5, 10_001);
    assert_eq!(joins(&fx)[0].1.generation, 3);
}

#[test]
fn leaving_triggers_a_rebalance_and_the_last_leaver_empties_the_group() {
    let mut m = GroupMachine::new(cfg(0));
    let (a, _) = join_new(&mut m, 1, 0);
    let (b, _) = join_new(&mut m, 2, 0);
    m.join(join_req(&a, None, 5), 3, 0);
    m.sync(&sr(2, &a, None, None, None, vec![]), 4, 0);
    let (res, _) = m.leave("g", &[(b.clone(), None), ("ghost".into(), None)], 1);
    assert_eq!(res, vec![None, Some(ErrorCode::UnknownMemberId)]);
    assert_eq!(m.group("g").unwrap().state, GroupState::PreparingRebalance);
    let (res, fx) = m.leave("g", &[(a.clone(), None)], 2);
    assert_eq!(res, vec![None]);
    assert_eq!(m.group("g").unwrap().state, GroupState::Empty);
    assert!(fx.contains(&Effect::Persist("g".into())));
    assert_eq!(m.delete("g"), Ok(()));
    assert_eq!(m.delete("g"), Err(ErrorCode::GroupIdNotFound));
}

#[test]
fn the_last_member_leaving_a_stable_group_empties_it_at_once() {
    // ListGroups filtered by state right after the LeaveGroup must see Empty (Kafka completes
    // the join phase of a group with nobody left in the same step).
    let mut m = GroupMachine::new(cfg(0));
    let (a, _) = join_new(&mut m, 1, 0);
    m.sync(&sr(1, &a, None, None, None, vec![]), 2, 0);
    assert_eq!(m.group("g").unwrap().state, GroupState::Stable);
    let (res, fx) = m.leave("g", &[(a.clone(), None)], 5);
    assert_eq!(res, vec![None]);
    assert_eq!(m.group("g").unwrap().state, GroupState::Empty);
    assert!(fx.contains(&Effect::Persist("g".into())));
    // The same when the last member's session expires: Empty on that very tick.
    let (b, fx) = join_new(&mut m, 3, 10);
    let generation = joins(&fx)[0].1.generation;
    m.sync(&sr(generation, &b, None, None, None, vec![]), 4, 10);
    assert_eq!(m.group("g").unwrap().state, GroupState::Stable);
    let _ = m.tick(10 + 10_000);
    assert_eq!(m.group("g").unwrap().state, GroupState::Empty);
}

#[test]
fn the_initial_delay_gathers_members_into_one_generation() {
    let mut m = GroupMachine::new(cfg(3_000));
    let (_a, fx) = join_new(&mut m, 1, 0);
    assert!(
        joins(&fx).is_empty(),
        "the first join waits for the initial delay"
    );
    let (_b, fx) = join_new(&mut m, 2, 1_000);
    assert!(joins(&fx).is_empty());
    assert!(m.tick(3_500).is_empty(), "each join extends the delay");
    let fx = m.tick(4_000);
    let done = joins(&fx);
    assert_eq!(done.len(), 2);
    assert!(done.iter().all(|(_, o)| o.generation == 1));
}

#[test]
fn a_static_member_rejoins_without_a_rebalance_and_fences_its_old_id() {
    // Two static members starting together, with no initial delay: both joins are in
    // before the timer completes the first rebalance, so one generation holds both (Kafka
    // assigns them together; completing at the first join gave one member everything,
    // then a second rebalance took half of it back).
    let mut m = GroupMachine::new(cfg(0));
    assert!(joins(&m.join(join_req("", Some("i1"), 5), 1, 0)).is_empty());
    assert!(joins(&m.join(join_req("", Some("i2"), 5), 2, 0)).is_empty());
    let done = joins(&m.tick(0));
    assert_eq!(done.len(), 2);
    assert!(done
        .iter()
        .all(|(_, o)| o.generation == 1 && o.error.is_none()));
    let id = |t: Token| {
        done.iter()
            .find(|(x, _)| *x == t)
            .unwrap()
            .1
            .member_id
            .clone()
    };
    let (a, b) = (id(1), id(2));
    assert_eq!(
        done.iter().find(|(t, _)| *t == 1).unwrap().1.members.len(),
        2
    );
    m.sync(
        &sr(
            1,
            &a,
            Some("i1"),
            None,
            None,
            vec![(b.clone(), Bytes::from_static(b"B"))],
        ),
        4,
        0,
    );
    // i2 restarts: it joins with no member id but its instance id.
    let fx = m.join(join_req("", Some("i2"), 5), 5, 100);
    let back = joins(&fx);
    assert_eq!(back.len(), 1);
    assert_eq!(back[0].1.error, None);
    assert_eq!(back[0].1.generation, 1, "no new generation");
    let new_b = back[0].1.member_id.clone();
    assert_ne!(new_b, b);
    assert_eq!(m.group("g").unwrap().state, GroupState::Stable);
    assert_eq!(
        m.heartbeat("g", 1, &b, Some("i2"), 101),
        Some(ErrorCode::FencedInstanceId)
    );
    let fx = m.sync(&sr(1, &new_b, Some("i2"), None, None, vec![]), 6, 102);
    assert_eq!(syncs(&fx)[0].1.assignment, Bytes::from_static(b"B"));
}

#[test]
fn commit_checks_follow_membership() {
    let mut m = GroupMachine::new(cfg(0));
    assert_eq!(m.check_commit("simple", -1, "", None, 8, 0), Ok(()));
    assert_eq!(
        m.check_commit("absent", 3, "x", None, 8, 0),
        Err(ErrorCode::IllegalGeneration)
    );
    assert_eq!(
        m.check_commit("absent", 3, "x", None, 9, 0),
        Err(ErrorCode::GroupIdNotFound)
    );
    let (a, _) = join_new(&mut m, 1, 0);
    // CompletingRebalance: wait for the assignment.
    assert_eq!(
        m.check_commit("g", 1, &a, None, 8, 0),
        Err(ErrorCode::RebalanceInProgress)
    );
    m.sync(&sr(1, &a, None, None, None, vec![]), 9, 0);
    assert_eq!(m.check_commit("g", 1, &a, None, 8, 0), Ok(()));
    assert_eq!(
        m.check_commit("g", 7, &a, None, 8, 0),
        Err(ErrorCode::IllegalGeneration)
    );
    assert_eq!(
        m.check_commit("g", 1, "ghost", None, 8, 0),
        Err(ErrorCode::UnknownMemberId)
    );
    assert_eq!(
        m.check_commit("g", -1, "", None, 8, 0),
        Err(ErrorCode::UnknownMemberId)
    );
    // PreparingRebalance: commits of the current generation still go through.
    join_new(&mut m, 2, 1);
    assert_eq!(m.check_commit("g", 1, &a, None, 8, 1), Ok(()));
    assert_eq!(m.delete("g"), Err(ErrorCode::NonEmptyGroup));
}

#[test]
fn a_reloaded_empty_group_keeps_the_time_it_became_empty() {
    use crate::group::records::GroupValue;
    let mut m = GroupMachine::new(cfg(0));
    let empty = GroupValue {
        protocol_type: "consumer".into(),
        generation: 4,
        protocol: None,
        leader: None,
        current_state_timestamp: 1_000,
        members: Vec::new(),
    };
    m.restore("g", &empty, 50_000);
    let g = m.group("g").unwrap();
    assert_eq!(
        (g.state, g.generation, g.state_since_ms),
        (GroupState::Empty, 4, 1_000)
    );
    // A timestamp from the future (clock skew) is capped at now.
    m.restore(
        "h",
        &GroupValue {
            current_state_timestamp: 90_000,
            ..empty
        },
        50_000,
    );
    assert_eq!(m.group("h").unwrap().state_since_ms, 50_000);
}
