//! The Raft quorum in one process over loopback: election, forwarding-free writes on the
//! leader, failover when the leader stops, restart from snapshot + log, broker liveness.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use sluice_controller::rpc::{ControllerRequest, ControllerResponse, Heartbeat, ReplyBody};
use sluice_controller::{ControllerDefaults, CreateTopicSpec, QuorumConfig, QuorumController};
use sluice_metadata::controller_types::{ApiError, ControllerSpec};
use sluice_metadata::record::Endpoint;
use sluice_metadata::Uuid;
use sluice_protocol::ErrorCode;
use tokio::sync::watch;

fn config(id: i32, voters: &BTreeMap<u64, String>, dir: &std::path::Path) -> QuorumConfig {
    QuorumConfig {
        node_id: id,
        voters: voters.clone(),
        dynamic: false,
        bootstrap_features: Vec::new(),
        directories: BTreeMap::new(),
        dir: dir.join(format!("n{id}")),
        segment_bytes: 4096,
        snapshot_every: 5,
        session_timeout_ms: 600,
        election_timeout_ms: 300,
        defaults: ControllerDefaults {
            num_partitions: 1,
            replication_factor: 1,
            delete_topic_enable: true,
            unclean_leader_election: false,
            min_insync_replicas: 1,
            tokens: Default::default(),
            group_settings: Default::default(),
            broker: Default::default(),
        },
        auto_leader_rebalance: false,
        imbalance_check_ms: 300_000,
        imbalance_pct: 10,
        transport: sluice_controller::transport::tcp(),
    }
}

struct Node {
    q: Arc<QuorumController>,
    stop: watch::Sender<bool>,
}

async fn start(id: i32, voters: &BTreeMap<u64, String>, dir: &std::path::Path) -> Node {
    let addr = &voters[&(id as u64)];
    let listener = tokio::net::TcpListener::bind(addr).await.unwrap();
    let q = QuorumController::start(config(id, voters, dir))
        .await
        .unwrap();
    let (stop, rx) = watch::channel(false);
    tokio::spawn(Arc::clone(&q).serve(listener.into(), rx.clone()));
    q.spawn_liveness(rx);
    Node { q, stop }
}

/// Three voters on loopback ports picked now.
async fn three_voters(dir: &std::path::Path) -> (BTreeMap<u64, String>, BTreeMap<i32, Node>) {
    let mut voters = BTreeMap::new();
    for id in 1..=3u64 {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        voters.insert(id, l.local_addr().unwrap().to_string());
    }
    let mut nodes = BTreeMap::new();
    for id in 1..=3 {
        nodes.insert(id, start(id, &voters, dir).await);
    }
    (voters, nodes)
}

async fn leader_of(nodes: &BTreeMap<i32, Node>) -> i32 {
    for _ in 0..200 {
        for (id, n) in nodes {
            if n.q.is_leader() {
                return *id;
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("no leader elected");
}

fn topic(name: &str) -> ControllerRequest {
    ControllerRequest::CreateTopics {
        specs: vec![CreateTopicSpec {
            name: name.into(),
            num_partitions: 1,
            replication_factor: 1,
            ..CreateTopicSpec::default()
        }],
        validate_only: false,
    }
}

async fn wait_for(q: &QuorumController, f: impl Fn(&sluice_metadata::MetadataImage) -> bool) {
    let mut rx = q.images();
    tokio::time::timeout(Duration::from_secs(10), rx.wait_for(|i| f(i)))
        .await
        .expect("metadata converges")
        .unwrap();
}

fn hb(node_id: i32, incarnation_id: Uuid, offset: i64) -> ControllerRequest {
    ControllerRequest::Heartbeat(Heartbeat {
        node_id,
        incarnation_id,
        endpoints: vec![],
        rack: None,
        metadata_offset: offset,
        want_shutdown: false,
        offline_replicas: Vec::new(),
        unclean_shutdown: false,
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_voters_fail_over_and_restart_without_losing_metadata() {
    let dir = tempfile::tempdir().unwrap();
    let (voters, mut nodes) = three_voters(dir.path()).await;
    // Broker 7 registers (fenced), catches up (unfenced) and keeps heartbeating to
    // whichever controller leads. The first leader may still lose to an election that
    // overlapped its own (a loaded machine delays its first heartbeats): the broker
    // registers with whichever one answers as the leader.
    let inc = Uuid::new_v4();
    let mut tries = 0;
    let (first, offset, body) = loop {
        let id = leader_of(&nodes).await;
        match nodes[&id].q.handle(hb(7, inc, -1)).await {
            ControllerResponse::Ok { offset, body } => break (id, offset, body),
            other => {
                tries += 1;
                assert!(tries < 50, "register failed: {other:?}");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    };
    let q = &nodes[&first].q;
    assert_eq!(
        body,
        ReplyBody::Heartbeat {
            fenced: true,
            should_shutdown: false
        }
    );
    let r = q.handle(hb(7, inc, offset)).await;
    assert!(
        matches!(
            r,
            ControllerResponse::Ok {
                body: ReplyBody::Heartbeat { fenced: false, .. },
                ..
            }
        ),
        "{r:?}"
    );
    assert!(q.image().is_live(7));
    let all: Vec<Arc<QuorumController>> = nodes.values().map(|n| Arc::clone(&n.q)).collect();
    let beat = tokio::spawn(async move {
        loop {
            for q in &all {
                if q.is_leader() {
                    q.handle(hb(7, inc, q.image().offset)).await;
                }
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    });
    // A follower refuses writes and names the leader.
    let follower = *nodes.keys().find(|id| **id != first).unwrap();
    nodes[&follower]
        .q
        .wait_for_leader(Duration::from_secs(10))
        .await
        .expect("the follower learns the leader");
    match nodes[&follower].q.handle(topic("x")).await {
        ControllerResponse::NotController(Some((id, addr))) => {
            assert_eq!(id, first);
            assert_eq!(addr, voters[&(first as u64)]);
        }
        other => panic!("follower answered {other:?}"),
    }
    for i in 0..8 {
        let r = nodes[&first].q.handle(topic(&format!("t{i}"))).await;
        assert!(
            matches!(r, ControllerResponse::Ok { body: ReplyBody::Created(ref v), .. } if v[0].is_ok()),
            "{r:?}"
        );
    }
    // Snapshots bound the log: entries below the last snapshot are purged.
    let (start_offset, end, _) = nodes[&first].q.log_extent();
    assert!(start_offset > 0, "log start {start_offset} (end {end})");
    // The leader stops; a new one is elected and has everything.
    let old = nodes.remove(&first).unwrap();
    let _ = old.stop.send(true);
    old.q.shutdown().await;
    drop(old);
    let second = leader_of(&nodes).await;
    assert_ne!(second, first);
    wait_for(&nodes[&second].q, |i| i.topics.len() == 8).await;
    let r = nodes[&second].q.handle(topic("after")).await;
    assert!(matches!(r, ControllerResponse::Ok { .. }), "{r:?}");
    // The old leader comes back and catches up (from a snapshot or the log).
    nodes.insert(first, start(first, &voters, dir.path()).await);
    wait_for(&nodes[&first].q, |i| {
        i.topic("after").is_some() && i.topics.len() == 9
    })
    .await;
    // The broker stops heartbeating: its session expires and the active controller fences it.
    beat.abort();
    let leader = leader_of(&nodes).await;
    wait_for(&nodes[&leader].q, |i| {
        i.brokers.get(&7).is_some_and(|b| b.fenced)
    })
    .await;
    for n in nodes.values() {
        let _ = n.stop.send(true);
        n.q.shutdown().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_partitioned_leader_cannot_commit_and_its_write_is_discarded() {
    let dir = tempfile::tempdir().unwrap();
    let (_, mut nodes) = three_voters(dir.path()).await;
    let pids = |count| ControllerRequest::AllocateProducerIds { node_id: 1, count };
    // The leader serves a write, so it is fully established as the active controller. On a
    // loaded machine the first leader may lose its term before it confirms it (the write is
    // then refused with NOT_CONTROLLER): ask whoever leads next.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    let (old, first) = loop {
        let leader = leader_of(&nodes).await;
        match nodes[&leader].q.handle(pids(1)).await {
            ControllerResponse::Ok {
                body: ReplyBody::ProducerIds(first),
                ..
            } => break (leader, first),
            r => assert!(
                tokio::time::Instant::now() < deadline,
                "no leader served a write: {r:?}"
            ),
        }
    };
    // Partition the leader away; the majority elects another.
    nodes[&old].q.set_isolated(true);
    let rest: BTreeMap<i32, Node> = BTreeMap::new();
    let mut majority = rest;
    for id in nodes
        .keys()
        .copied()
        .filter(|id| *id != old)
        .collect::<Vec<_>>()
    {
        majority.insert(id, nodes.remove(&id).unwrap());
    }
    let new = leader_of(&majority).await;
    assert_ne!(new, old);
    // The deposed leader may still think it leads, but nothing it writes commits.
    let deposed = nodes.remove(&old).unwrap();
    let split = tokio::time::timeout(Duration::from_secs(3), deposed.q.handle(pids(7))).await;
    assert!(
        !matches!(split, Ok(ControllerResponse::Ok { .. })),
        "a leader without a majority committed: {split:?}"
    );
    // The new leader's writes commit.
    let r = majority[&new].q.handle(pids(1000)).await;
    assert!(
        matches!(
            r,
            ControllerResponse::Ok {
                body: ReplyBody::ProducerIds(next),
                ..
            } if next == first + 1
        ),
        "{r:?}"
    );
    // Heal: the old leader learns the newer term, drops its uncommitted entry and catches
    // up (it may later win an election again; that is fine).
    deposed.q.set_isolated(false);
    wait_for(&deposed.q, |i| i.next_producer_id == first + 1001).await;
    // Nothing of the deposed leader's write survives anywhere (it would show as first + 1008).
    for q in [&deposed.q, &majority[&new].q] {
        assert_eq!(q.image().next_producer_id, first + 1001);
    }
    for n in majority.values().chain([&deposed]) {
        let _ = n.stop.send(true);
        n.q.shutdown().await;
    }
}

/// A controller of a dynamic quorum: `voters` are the ones it was formatted with (empty: it
/// waits to be added), listening on `addr`.
async fn start_dynamic(
    id: i32,
    addr: &str,
    voters: &BTreeMap<u64, String>,
    dir: &std::path::Path,
) -> Node {
    let listener = tokio::net::TcpListener::bind(addr).await.unwrap();
    let mut c = config(id, voters, dir);
    c.dynamic = true;
    c.directories = voters.keys().map(|v| (*v, directory(*v as i32))).collect();
    let q = QuorumController::start(c).await.unwrap();
    let (stop, rx) = watch::channel(false);
    tokio::spawn(Arc::clone(&q).serve(listener.into(), rx.clone()));
    q.spawn_liveness(rx);
    Node { q, stop }
}

fn directory(id: i32) -> Uuid {
    Uuid::from_bytes([id as u8; 16])
}

fn spec(id: i32, addr: &str) -> ControllerSpec {
    let (host, port) = addr.rsplit_once(':').unwrap();
    ControllerSpec {
        node_id: id,
        directory_id: directory(id),
        endpoints: vec![Endpoint {
            name: "CONTROLLER".into(),
            host: host.into(),
            port: port.parse().unwrap(),
        }],
    }
}

/// Send `req` to whichever controller leads until one answers (a voter change may move
/// the leadership); the answer's outcome.
async fn ask(nodes: &BTreeMap<i32, Node>, req: ControllerRequest) -> Result<(), ApiError> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let leader = leader_of(nodes).await;
        match nodes[&leader].q.handle(req.clone()).await {
            ControllerResponse::Ok {
                body: ReplyBody::Done(r),
                ..
            } => return r,
            r => {
                assert!(tokio::time::Instant::now() < deadline, "no answer: {r:?}");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
}

/// Hand out 1000 producer ids on whichever controller leads (a metadata write).
async fn write(nodes: &BTreeMap<i32, Node>) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    let req = ControllerRequest::AllocateProducerIds {
        node_id: 1,
        count: 1000,
    };
    loop {
        let leader = leader_of(nodes).await;
        match nodes[&leader].q.handle(req.clone()).await {
            ControllerResponse::Ok {
                body: ReplyBody::ProducerIds(_),
                ..
            } => return,
            r => assert!(tokio::time::Instant::now() < deadline, "{r:?}"),
        }
    }
}

async fn quorum(nodes: &BTreeMap<i32, Node>) -> sluice_metadata::controller_types::QuorumInfo {
    let leader = leader_of(nodes).await;
    match nodes[&leader]
        .q
        .handle(ControllerRequest::DescribeQuorum)
        .await
    {
        ControllerResponse::Ok {
            body: ReplyBody::Quorum(q),
            ..
        } => q,
        r => panic!("describe quorum: {r:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dynamic_quorum_grows_from_one_voter_to_three_and_loses_its_first() {
    let dir = tempfile::tempdir().unwrap();
    let addrs: BTreeMap<i32, String> = (1..=3)
        .map(|id| {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            (id, l.local_addr().unwrap().to_string())
        })
        .collect();
    // Node 1 formatted standalone; 2 and 3 with no initial controllers.
    let standalone = BTreeMap::from([(1u64, addrs[&1].clone())]);
    let mut nodes = BTreeMap::new();
    nodes.insert(
        1,
        start_dynamic(1, &addrs[&1], &standalone, dir.path()).await,
    );
    for id in [2, 3] {
        nodes.insert(
            id,
            start_dynamic(id, &addrs[&id], &BTreeMap::new(), dir.path()).await,
        );
    }
    // Nodes 2 and 3 know no quorum: only node 1 leads.
    assert_eq!(leader_of(&nodes).await, 1);
    write(&nodes).await;
    wait_for(&nodes[&1].q, |i| {
        sluice_metadata::features::dynamic_quorum(i) && i.controllers.contains_key(&1)
    })
    .await;
    // Adding a controller that does not follow the log yet catches it up first.
    ask(&nodes, ControllerRequest::AddVoter(spec(2, &addrs[&2])))
        .await
        .unwrap();
    // Node 3 observes first, as a starting controller does, then is added.
    ask(
        &nodes,
        ControllerRequest::ObserveQuorum(spec(3, &addrs[&3])),
    )
    .await
    .unwrap();
    let q = quorum(&nodes).await;
    assert_eq!(q.voters.iter().map(|r| r.id).collect::<Vec<_>>(), [1, 2]);
    assert_eq!(q.observers.iter().map(|r| r.id).collect::<Vec<_>>(), [3]);
    assert_eq!(q.observers[0].directory_id, directory(3));
    let next = nodes[&1].q.image().next_producer_id;
    assert!(next >= 1000);
    wait_for(&nodes[&3].q, |i| i.next_producer_id == next).await;
    ask(&nodes, ControllerRequest::AddVoter(spec(3, &addrs[&3])))
        .await
        .unwrap();
    let q = quorum(&nodes).await;
    assert_eq!(q.voters.iter().map(|r| r.id).collect::<Vec<_>>(), [1, 2, 3]);
    assert_eq!(
        q.voters.iter().map(|r| r.directory_id).collect::<Vec<_>>(),
        [directory(1), directory(2), directory(3)]
    );
    assert_eq!(q.voter_endpoints.len(), 3);
    // Adding it again, or removing a voter under another directory id, is refused.
    let again = ask(&nodes, ControllerRequest::AddVoter(spec(3, &addrs[&3]))).await;
    assert_eq!(again.unwrap_err().code, ErrorCode::DuplicateVoter);
    let wrong = ControllerRequest::RemoveVoter {
        node_id: 2,
        directory_id: directory(9),
    };
    assert_eq!(
        ask(&nodes, wrong).await.unwrap_err().code,
        ErrorCode::VoterNotFound
    );
    // UpdateRaftVoter: the same endpoints change nothing; another replica (directory) or a
    // controller the quorum does not know is not found.
    ask(&nodes, ControllerRequest::UpdateVoter(spec(3, &addrs[&3])))
        .await
        .unwrap();
    let mut other = spec(3, &addrs[&3]);
    other.directory_id = directory(9);
    for bad in [other, spec(9, &addrs[&3])] {
        let refused = ask(&nodes, ControllerRequest::UpdateVoter(bad)).await;
        assert_eq!(refused.unwrap_err().code, ErrorCode::VoterNotFound);
    }
    // Remove node 1, the first voter (and the active controller when the test started):
    // the other two carry on and elect among themselves.
    ask(
        &nodes,
        ControllerRequest::RemoveVoter {
            node_id: 1,
            directory_id: directory(1),
        },
    )
    .await
    .unwrap();
    // Node 1 steps down once the change is committed; 2 or 3 takes over.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    let q = loop {
        let q = quorum(&nodes).await;
        if q.leader_id != 1 {
            break q;
        }
        assert!(tokio::time::Instant::now() < deadline, "node 1 still leads");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(q.voters.iter().map(|r| r.id).collect::<Vec<_>>(), [2, 3]);
    assert!(q.observers.iter().any(|r| r.id == 1), "{q:?}");
    // Stop node 1: the remaining voters still commit.
    let one = nodes.remove(&1).unwrap();
    let _ = one.stop.send(true);
    one.q.shutdown().await;
    write(&nodes).await;
    for n in nodes.values() {
        wait_for(&n.q, |i| i.next_producer_id == next + 1000).await;
    }
    for n in nodes.values() {
        let _ = n.stop.send(true);
        n.q.shutdown().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_static_quorum_refuses_voter_changes_until_kraft_version_1() {
    let dir = tempfile::tempdir().unwrap();
    let (_, nodes) = three_voters(dir.path()).await;
    let remove = ControllerRequest::RemoveVoter {
        node_id: 3,
        directory_id: Uuid::nil(),
    };
    let refused = ask(&nodes, remove.clone()).await.unwrap_err();
    assert_eq!(refused.code, ErrorCode::UnsupportedVersion);
    assert!(refused.message.contains("kraft.version"), "{refused:?}");
    ask(
        &nodes,
        ControllerRequest::UpdateFeatures {
            updates: vec![("kraft.version".into(), 1, 1)],
            validate_only: false,
        },
    )
    .await
    .unwrap();
    // Static voters have no registered directory: any directory id names them.
    ask(&nodes, remove).await.unwrap();
    let q = quorum(&nodes).await;
    assert_eq!(q.voters.len(), 2, "{q:?}");
    for n in nodes.values() {
        let _ = n.stop.send(true);
        n.q.shutdown().await;
    }
}
