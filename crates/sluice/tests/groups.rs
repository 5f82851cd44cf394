//! Consumer groups with librdkafka (and kcat for members that die without leaving):
//! exactly-once consumption while members come and go, eviction after the session timeout,
//! independent groups, committed offsets across a broker restart, static membership, and
//! log compaction.

mod common;

use std::collections::{HashMap, HashSet};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::*;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer, ConsumerContext, Rebalance};
use rdkafka::message::Message;
use rdkafka::{ClientContext, Offset, TopicPartitionList};

#[derive(Default)]
struct Rebalances {
    assigns: AtomicUsize,
    revokes: AtomicUsize,
}

impl ClientContext for Rebalances {}

impl ConsumerContext for Rebalances {
    fn post_rebalance(&self, _: &BaseConsumer<Self>, r: &Rebalance<'_>) {
        match r {
            Rebalance::Assign(_) => self.assigns.fetch_add(1, Ordering::SeqCst),
            Rebalance::Revoke(_) => self.revokes.fetch_add(1, Ordering::SeqCst),
            Rebalance::Error(_) => 0,
        };
    }
}

type Member = BaseConsumer<Rebalances>;

fn member(bootstrap: &str, group: &str, extra: &[(&str, &str)]) -> Member {
    let mut cfg = ClientConfig::new();
    cfg.set("bootstrap.servers", bootstrap)
        .set("group.id", group)
        .set("auto.offset.reset", "earliest")
        .set("enable.auto.commit", "true")
        .set("auto.commit.interval.ms", "100")
        .set("session.timeout.ms", "6000")
        .set("heartbeat.interval.ms", "500")
        .set("fetch.wait.max.ms", "100");
    for (k, v) in extra {
        cfg.set(*k, *v);
    }
    cfg.create_with_context(Rebalances::default())
        .expect("consumer")
}

fn values(n: usize, tag: &str) -> Vec<(Vec<u8>, Vec<u8>, Option<i64>)> {
    (0..n)
        .map(|i| {
            (
                format!("k{i}").into_bytes(),
                format!("{tag}-{i}").into_bytes(),
                None,
            )
        })
        .collect()
}

/// Leave the group the way an application does: unsubscribe, then keep polling so
/// librdkafka can run the revocation (it waits for the app before sending LeaveGroup).
/// Dropping a subscribed librdkafka consumer instead can hang in its close path
/// (confluentinc/librdkafka#4884), so every test ends its members this way.
fn leave(c: Member) {
    c.unsubscribe();
    let deadline = Instant::now() + Duration::from_secs(10);
    while c.assignment().map(|a| a.count()).unwrap_or(0) > 0 && Instant::now() < deadline {
        c.poll(Duration::from_millis(50));
    }
    for _ in 0..5 {
        c.poll(Duration::from_millis(20));
    }
    drop(c);
}

/// Take what `c` has ready (waiting briefly for the first record) and record it.
fn drain(c: &Member, seen: &Mutex<Vec<String>>) {
    let mut timeout = Duration::from_millis(20);
    for _ in 0..1000 {
        match c.poll(timeout) {
            Some(Ok(m)) => seen
                .lock()
                .unwrap()
                .push(String::from_utf8(m.payload().unwrap().to_vec()).unwrap()),
            _ => break,
        }
        timeout = Duration::ZERO;
    }
}

#[test]
fn a_group_consumes_every_record_exactly_once_while_members_join_and_leave() {
    let server = start(&["group.initial.rebalance.delay.ms=0"]);
    create_topic(&server.bootstrap, "work", 12, &[]);
    let total = 6000;
    let records = values(total, "w");
    let seen = Arc::new(Mutex::new(Vec::new()));
    let first = member(&server.bootstrap, "workers", &[]);
    first.subscribe(&["work"]).unwrap();
    produce_all(&producer(&server.bootstrap, &[]), "work", &records[..2000]);
    let deadline = Instant::now() + Duration::from_secs(60);
    while seen.lock().unwrap().len() < 500 && Instant::now() < deadline {
        drain(&first, &seen);
    }
    // Two more members join while records keep coming.
    let second = member(&server.bootstrap, "workers", &[]);
    second.subscribe(&["work"]).unwrap();
    let third = member(&server.bootstrap, "workers", &[]);
    third.subscribe(&["work"]).unwrap();
    {
        let members = [&first, &second, &third];
        // Keep consuming until the rebalance has given every member a share.
        while members
            .iter()
            .any(|m| m.assignment().map(|a| a.count()).unwrap_or(0) == 0)
        {
            assert!(
                Instant::now() < deadline,
                "the group never spread over three members"
            );
            for m in members {
                drain(m, &seen);
            }
        }
    }
    produce_all(
        &producer(&server.bootstrap, &[]),
        "work",
        &records[2000..4000],
    );
    {
        let members = [&first, &second, &third];
        while seen.lock().unwrap().len() < 3500 && Instant::now() < deadline {
            for m in members {
                drain(m, &seen);
            }
        }
    }
    let got_work: Vec<bool> = [&first, &second, &third]
        .iter()
        .map(|m| m.context().assigns.load(Ordering::SeqCst) > 0)
        .collect();
    assert!(
        got_work.iter().all(|x| *x),
        "every member was given partitions: {got_work:?}"
    );
    // One leaves cleanly; the rest finish.
    leave(second);
    produce_all(&producer(&server.bootstrap, &[]), "work", &records[4000..]);
    while seen.lock().unwrap().len() < total && Instant::now() < deadline {
        drain(&first, &seen);
        drain(&third, &seen);
    }
    // Give any duplicate a chance to show up.
    for _ in 0..10 {
        drain(&first, &seen);
        drain(&third, &seen);
    }
    let seen = seen.lock().unwrap();
    let unique: HashSet<&String> = seen.iter().collect();
    if unique.len() != total {
        eprintln!("{}", server.log());
    }
    assert_eq!(unique.len(), total, "every record was consumed");
    assert_eq!(seen.len(), total, "no record was consumed twice");
    drop(seen);
    leave(first);
    leave(third);
}

#[test]
fn a_member_killed_without_leaving_is_evicted_and_its_partitions_move() {
    let server = start(&["group.initial.rebalance.delay.ms=0"]);
    create_topic(&server.bootstrap, "evict", 12, &[]);
    let survivor = member(&server.bootstrap, "evictors", &[]);
    survivor.subscribe(&["evict"]).unwrap();
    // A second member in another process, killed with SIGKILL once it holds partitions.
    let mut kcat = Command::new("kcat")
        .args([
            "-b",
            &server.bootstrap,
            "-G",
            "evictors",
            "-X",
            "session.timeout.ms=6000",
            "-X",
            "heartbeat.interval.ms=500",
            "evict",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("kcat installed");
    let deadline = Instant::now() + Duration::from_secs(60);
    let mine = |c: &Member| c.assignment().map(|a| a.count()).unwrap_or(0);
    while !(mine(&survivor) > 0 && mine(&survivor) < 12) {
        assert!(
            Instant::now() < deadline,
            "the two members never shared the partitions"
        );
        survivor.poll(Duration::from_millis(100));
    }
    let killed_at = Instant::now();
    kcat.kill().unwrap();
    kcat.wait().unwrap();
    while mine(&survivor) < 12 {
        assert!(
            Instant::now() < deadline,
            "the dead member's partitions never moved"
        );
        survivor.poll(Duration::from_millis(100));
    }
    let waited = killed_at.elapsed();
    assert!(
        waited >= Duration::from_secs(4),
        "moved before the session timeout: {waited:?}"
    );
    leave(survivor);
}

#[test]
fn two_groups_each_see_every_record() {
    let server = start(&["group.initial.rebalance.delay.ms=0"]);
    create_topic(&server.bootstrap, "fanout", 4, &[]);
    produce_all(
        &producer(&server.bootstrap, &[]),
        "fanout",
        &values(1000, "f"),
    );
    for group in ["alpha", "beta"] {
        let c = member(&server.bootstrap, group, &[]);
        c.subscribe(&["fanout"]).unwrap();
        let seen = Mutex::new(Vec::new());
        let deadline = Instant::now() + Duration::from_secs(60);
        while seen.lock().unwrap().len() < 1000 {
            assert!(
                Instant::now() < deadline,
                "{group} saw {}",
                seen.lock().unwrap().len()
            );
            drain(&c, &seen);
        }
        assert_eq!(
            seen.lock().unwrap().iter().collect::<HashSet<_>>().len(),
            1000
        );
        leave(c);
    }
}

#[test]
fn committed_offsets_survive_a_broker_restart() {
    let mut server = start(&["group.initial.rebalance.delay.ms=0"]);
    create_topic(&server.bootstrap, "kept", 3, &[]);
    produce_all(&producer(&server.bootstrap, &[]), "kept", &values(300, "c"));
    let c = member(
        &server.bootstrap,
        "keepers",
        &[("enable.auto.commit", "false")],
    );
    c.subscribe(&["kept"]).unwrap();
    let seen = Mutex::new(Vec::new());
    let deadline = Instant::now() + Duration::from_secs(60);
    while seen.lock().unwrap().len() < 300 {
        assert!(Instant::now() < deadline);
        drain(&c, &seen);
    }
    c.commit_consumer_state(CommitMode::Sync).unwrap();
    leave(c);
    server.restart();
    let c = member(&server.bootstrap, "keepers", &[]);
    let mut tpl = TopicPartitionList::new();
    for p in 0..3 {
        tpl.add_partition("kept", p);
    }
    let after = c.committed_offsets(tpl, Duration::from_secs(10)).unwrap();
    let total: i64 = after
        .elements()
        .iter()
        .map(|e| match e.offset() {
            Offset::Offset(o) => o,
            other => panic!(
                "partition {} has no committed offset: {other:?}",
                e.partition()
            ),
        })
        .sum();
    assert_eq!(total, 300, "the committed offsets cover every record");
    // A restarted consumer resumes after the committed offsets: nothing new to read.
    c.subscribe(&["kept"]).unwrap();
    let seen = Mutex::new(Vec::new());
    let until = Instant::now() + Duration::from_secs(3);
    while Instant::now() < until {
        drain(&c, &seen);
    }
    assert!(
        seen.lock().unwrap().is_empty(),
        "re-read {} records",
        seen.lock().unwrap().len()
    );
    leave(c);
}

/// A static member in its own process (kcat with `group.instance.id`).
fn static_kcat(bootstrap: &str) -> std::process::Child {
    Command::new("kcat")
        .args([
            "-b",
            bootstrap,
            "-G",
            "statics",
            "-X",
            "group.instance.id=bounce",
            "-X",
            "session.timeout.ms=6000",
            "-X",
            "heartbeat.interval.ms=500",
            "static",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("kcat installed")
}

/// The group's members as the coordinator describes them: (instance id, partition count).
fn static_members(bootstrap: &str) -> (String, Vec<(Option<String>, usize)>) {
    block_on(async {
        let admin = sluice_client::Admin::new(sluice_client::ClientConfig::new(bootstrap)).unwrap();
        let d = admin.describe_groups(&["statics"]).await.unwrap().remove(0);
        let mut members: Vec<(Option<String>, usize)> = d
            .members
            .iter()
            .map(|m| (m.instance_id.clone(), m.assignment.len()))
            .collect();
        members.sort();
        (d.state, members)
    })
}

#[test]
fn a_static_member_restarting_within_the_session_timeout_causes_no_rebalance() {
    let server = start(&["group.initial.rebalance.delay.ms=0"]);
    let b = server.bootstrap.as_str();
    create_topic(b, "static", 6, &[]);
    let stay = member(b, "statics", &[("group.instance.id", "stay")]);
    stay.subscribe(&["static"]).unwrap();
    let mut bounce = static_kcat(b);
    let split = vec![
        (Some("bounce".to_string()), 3),
        (Some("stay".to_string()), 3),
    ];
    let deadline = Instant::now() + Duration::from_secs(60);
    // Settled: the coordinator's view, and `stay` has run its assignment callback.
    while static_members(b) != ("Stable".to_string(), split.clone())
        || stay.assignment().map(|a| a.count()).unwrap_or(0) != 3
    {
        assert!(
            Instant::now() < deadline,
            "the two static members never split the partitions: {:?}",
            static_members(b)
        );
        stay.poll(Duration::from_millis(100));
    }
    let rebalances_before = stay.context().assigns.load(Ordering::SeqCst)
        + stay.context().revokes.load(Ordering::SeqCst);
    // The process dies and a new one with the same instance id takes its place well within
    // the session timeout: the coordinator hands it the old member's partitions.
    bounce.kill().unwrap();
    bounce.wait().unwrap();
    let mut back = static_kcat(b);
    let until = Instant::now() + Duration::from_secs(4);
    while Instant::now() < until {
        stay.poll(Duration::from_millis(50));
    }
    let rebalances_after = stay.context().assigns.load(Ordering::SeqCst)
        + stay.context().revokes.load(Ordering::SeqCst);
    assert_eq!(
        rebalances_after, rebalances_before,
        "the other member saw a rebalance"
    );
    assert_eq!(stay.assignment().unwrap().count(), 3);
    assert_eq!(static_members(b), ("Stable".to_string(), split));
    back.kill().unwrap();
    back.wait().unwrap();
    leave(stay);
}

#[test]
fn compaction_keeps_the_latest_value_of_every_key() {
    let server = start(&["log.cleaner.backoff.ms=200"]);
    create_topic(
        &server.bootstrap,
        "table",
        1,
        &[
            ("cleanup.policy", "compact"),
            ("segment.bytes", "65536"),
            // Tiny, so that the last few updates are cleaned even when the cleaner has already
            // compacted everything before them while they still sat in the active segment (a few
            // hundred dirty bytes beside tens of kilobytes of clean ones).
            ("min.cleanable.dirty.ratio", "0.0001"),
            ("segment.ms", "1000"),
        ],
    );
    let keys = 1000;
    let updates = 100_000;
    let records: Vec<_> = (0..updates)
        .map(|i| {
            (
                format!("key-{}", i % keys).into_bytes(),
                format!("value-{i}").into_bytes(),
                None,
            )
        })
        .collect();
    produce_all(&producer(&server.bootstrap, &[]), "table", &records);
    // Roll past the last update so every update sits in a cleanable segment.
    std::thread::sleep(Duration::from_millis(1100));
    produce_all(
        &producer(&server.bootstrap, &[]),
        "table",
        &[(b"marker".to_vec(), b"end".to_vec(), None)],
    );
    let latest: HashMap<String, String> = (updates - keys..updates)
        .map(|i| (format!("key-{}", i % keys), format!("value-{i}")))
        .collect();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        assert!(
            Instant::now() < deadline,
            "the cleaner never compacted the topic: {}",
            server.log()
        );
        let c = consumer(&server.bootstrap, &[]);
        let mut tpl = TopicPartitionList::new();
        tpl.add_partition_offset("table", 0, Offset::Beginning)
            .unwrap();
        c.assign(&tpl).unwrap();
        let mut live: Vec<(String, String)> = Vec::new();
        let (_, high) = c
            .fetch_watermarks("table", 0, Duration::from_secs(5))
            .unwrap();
        let read_by = Instant::now() + Duration::from_secs(20);
        while Instant::now() < read_by {
            if let Some(Ok(m)) = c.poll(Duration::from_millis(200)) {
                live.push((
                    String::from_utf8(m.key().unwrap().to_vec()).unwrap(),
                    String::from_utf8(m.payload().unwrap().to_vec()).unwrap(),
                ));
                if m.offset() + 1 >= high {
                    break;
                }
            }
        }
        if live.len() <= keys + 1 {
            let mut view: HashMap<String, String> = HashMap::new();
            for (k, v) in &live {
                view.insert(k.clone(), v.clone());
            }
            view.remove("marker");
            assert!(view == latest, "a reader from the start must see the latest value of every key ({} of {} keys right)", view.iter().filter(|(k, v)| latest.get(*k) == Some(*v)).count(), latest.len());
            let distinct: HashSet<&String> = live.iter().map(|(k, _)| k).collect();
            assert_eq!(
                distinct.len(),
                live.len(),
                "one record per key after cleaning"
            );
            break;
        }
        std::thread::sleep(Duration::from_millis(300));
    }
}

/// Broker settings for consumer-protocol tests: sessions of 6 s and heartbeats every 500 ms
/// (Kafka's floors are 45 s and 5 s; lowered the way Kafka lets them be).
const CONSUMER_PROTOCOL: &[&str] = &[
    "group.consumer.min.session.timeout.ms=6000",
    "group.consumer.session.timeout.ms=6000",
    "group.consumer.min.heartbeat.interval.ms=500",
    "group.consumer.heartbeat.interval.ms=500",
];

/// A librdkafka member on the consumer group protocol (KIP-848): the broker assigns.
fn modern_member(bootstrap: &str, group: &str) -> Member {
    ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", group)
        .set("group.protocol", "consumer")
        .set("auto.offset.reset", "earliest")
        .set("enable.auto.commit", "true")
        .set("auto.commit.interval.ms", "100")
        .set("fetch.wait.max.ms", "100")
        .create_with_context(Rebalances::default())
        .expect("consumer")
}

/// A consumer-protocol member in a process of its own (Python confluent-kafka), which the
/// test can kill: what it prints goes into `seen` (values it committed) and `owned` (how
/// many partitions it holds).
fn modern_process(
    bootstrap: &str,
    group: &str,
    topic: &str,
    seen: Arc<Mutex<Vec<String>>>,
    owned: Arc<AtomicUsize>,
) -> std::process::Child {
    use std::io::BufRead;
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../interop/python/consumer_protocol_member.py");
    let mut child = Command::new("python3")
        .arg(script)
        .args([bootstrap, group, topic])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("python3 with confluent-kafka");
    let out = child.stdout.take().expect("stdout");
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(out).lines().map_while(Result::ok) {
            if let Some(v) = line.strip_prefix("value ") {
                seen.lock().unwrap().push(v.to_string());
            } else if let Some(n) = line.strip_prefix("assigned ") {
                owned.store(n.parse().unwrap_or(0), Ordering::SeqCst);
            }
        }
    });
    child
}

/// The consumer group protocol with librdkafka (KIP-848, `group.protocol=consumer`): members
/// join (one late), one leaves, one is killed; the broker's assignments move partitions
/// without two owners at once, so every record is consumed exactly once by the group.
#[test]
fn consumer_protocol_members_join_leave_and_die_and_every_record_is_read_once() {
    let server = start(CONSUMER_PROTOCOL);
    let bs = server.bootstrap.clone();
    create_topic(&bs, "modern", 12, &[]);
    let records = values(6000, "m");
    let seen = Arc::new(Mutex::new(Vec::new()));
    let doomed_owns = Arc::new(AtomicUsize::new(0));
    let first = modern_member(&bs, "moderns");
    first.subscribe(&["modern"]).unwrap();
    let second = modern_member(&bs, "moderns");
    second.subscribe(&["modern"]).unwrap();
    let mut doomed = modern_process(&bs, "moderns", "modern", seen.clone(), doomed_owns.clone());
    let deadline = Instant::now() + Duration::from_secs(120);
    let owns = |c: &Member| c.assignment().map(|a| a.count()).unwrap_or(0);
    let consume_until = |members: &[&Member], count: usize, also: &dyn Fn() -> bool, what: &str| {
        while seen.lock().unwrap().len() < count || !also() {
            assert!(
                Instant::now() < deadline,
                "{what}: {} of {count} consumed\n{}",
                seen.lock().unwrap().len(),
                server.log()
            );
            for m in members {
                drain(m, &seen);
            }
        }
    };
    produce_all(&producer(&bs, &[]), "modern", &records[..2000]);
    consume_until(
        &[&first, &second],
        2000,
        &|| owns(&first) > 0 && owns(&second) > 0 && doomed_owns.load(Ordering::SeqCst) > 0,
        "three members share the topic",
    );
    // A member joins late: the broker moves partitions to it, each released first.
    let third = modern_member(&bs, "moderns");
    third.subscribe(&["modern"]).unwrap();
    produce_all(&producer(&bs, &[]), "modern", &records[2000..3000]);
    // Until it has some and the reconciliation is over (partitions being handed over are
    // owned by nobody for a moment; that none is read twice is checked at the end).
    consume_until(
        &[&first, &second, &third],
        3000,
        &|| {
            owns(&third) > 0
                && owns(&first) + owns(&second) + owns(&third) + doomed_owns.load(Ordering::SeqCst)
                    == 12
        },
        "the late member is given partitions",
    );
    // `sluice groups` describes it as kafka-consumer-groups.sh does a consumer group: each
    // member's epoch, current and target assignment; the targets cover the topic once.
    let out = Command::new(sluice_bin())
        .args([
            "groups",
            "--bootstrap-server",
            &bs,
            "--describe",
            "--group",
            "moderns",
        ])
        .args(["--members", "--verbose"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("CURRENT-EPOCH") && text.contains("TARGET-ASSIGNMENT"),
        "{text}"
    );
    let mut targets: Vec<i32> = text
        .lines()
        .filter(|l| l.starts_with("moderns "))
        .filter_map(|l| l.split_whitespace().last())
        .filter_map(|cell| cell.strip_prefix("modern:"))
        .flat_map(|ps| ps.split(',').map(|p| p.parse::<i32>().unwrap()))
        .collect();
    targets.sort_unstable();
    assert_eq!(targets, (0..12).collect::<Vec<_>>(), "{text}");
    // One dies without leaving (it has committed all it printed): after its session its
    // partitions move, from its committed offsets.
    doomed.kill().unwrap();
    doomed.wait().unwrap();
    produce_all(&producer(&bs, &[]), "modern", &records[3000..4500]);
    consume_until(
        &[&first, &second, &third],
        4500,
        &|| owns(&first) + owns(&second) + owns(&third) == 12,
        "the killed member's partitions move to the others",
    );
    // One leaves cleanly; the rest finish.
    leave(second);
    produce_all(&producer(&bs, &[]), "modern", &records[4500..]);
    consume_until(
        &[&first, &third],
        6000,
        &|| owns(&first) + owns(&third) == 12,
        "the leaving member's partitions move",
    );
    for _ in 0..10 {
        drain(&first, &seen);
        drain(&third, &seen);
    }
    let seen = seen.lock().unwrap();
    let unique: HashSet<&String> = seen.iter().collect();
    assert_eq!(unique.len(), 6000, "every record was consumed");
    assert_eq!(seen.len(), 6000, "no record was consumed twice");
    drop(seen);
    leave(first);
    leave(third);
}

/// A librdkafka member subscribing by regular expression on the consumer group protocol:
/// the broker resolves the expression (librdkafka sends it as SubscribedTopicRegex) and
/// assigns a topic created later that it matches.
#[test]
fn consumer_protocol_regex_subscription_picks_up_new_topics() {
    let server = start(CONSUMER_PROTOCOL);
    let bs = server.bootstrap.clone();
    create_topic(&bs, "rx-a", 2, &[]);
    create_topic(&bs, "other", 1, &[]);
    produce_all(&producer(&bs, &[]), "rx-a", &values(100, "a"));
    produce_all(&producer(&bs, &[]), "other", &values(10, "o"));
    let c = modern_member(&bs, "regexers");
    c.subscribe(&["^rx-.*"]).unwrap();
    let seen = Mutex::new(Vec::new());
    let deadline = Instant::now() + Duration::from_secs(60);
    while seen.lock().unwrap().len() < 100 {
        assert!(Instant::now() < deadline, "{}", server.log());
        drain(&c, &seen);
    }
    create_topic(&bs, "rx-b", 2, &[]);
    produce_all(&producer(&bs, &[]), "rx-b", &values(100, "b"));
    while seen.lock().unwrap().len() < 200 || c.assignment().map(|a| a.count()).unwrap_or(0) < 4 {
        assert!(
            Instant::now() < deadline,
            "rx-b never assigned: {} read, {:?}",
            seen.lock().unwrap().len(),
            c.assignment()
        );
        drain(&c, &seen);
    }
    let seen = seen.lock().unwrap();
    assert!(
        seen.iter().all(|v| !v.starts_with("o-")),
        "read a topic the expression does not match"
    );
    assert_eq!(seen.iter().collect::<HashSet<_>>().len(), 200);
    drop(seen);
    leave(c);
}

/// A rolling upgrade from the classic to the consumer group protocol (KIP-848's online
/// migration), with librdkafka: two classic members consume; one is restarted on the
/// consumer protocol (the group becomes a consumer group, the other member staying on the
/// classic protocol inside it), then the other; and back to the classic protocol the same
/// way; every record is read exactly once.
#[test]
fn a_classic_group_upgrades_to_the_consumer_protocol_member_by_member() {
    let mut overrides = CONSUMER_PROTOCOL.to_vec();
    overrides.push("group.initial.rebalance.delay.ms=0");
    let server = start(&overrides);
    let bs = server.bootstrap.clone();
    create_topic(&bs, "roll", 6, &[]);
    let records = values(8000, "r");
    let seen = Mutex::new(Vec::new());
    let deadline = Instant::now() + Duration::from_secs(120);
    let owns = |c: &Member| c.assignment().map(|a| a.count()).unwrap_or(0);
    let consume_until = |members: &[&Member], count: usize, also: &dyn Fn() -> bool, what: &str| {
        while seen.lock().unwrap().len() < count || !also() {
            assert!(
                Instant::now() < deadline,
                "{what}: {} of {count} consumed, owned {:?}\n{}",
                seen.lock().unwrap().len(),
                members.iter().map(|m| owns(m)).collect::<Vec<_>>(),
                server.log()
            );
            for m in members {
                drain(m, &seen);
            }
        }
    };
    let c1 = member(&bs, "rolling", &[]);
    c1.subscribe(&["roll"]).unwrap();
    let c2 = member(&bs, "rolling", &[]);
    c2.subscribe(&["roll"]).unwrap();
    produce_all(&producer(&bs, &[]), "roll", &records[..2000]);
    consume_until(
        &[&c1, &c2],
        2000,
        &|| owns(&c1) > 0 && owns(&c2) > 0,
        "two classic members share the topic",
    );
    // The first member is restarted on the consumer protocol.
    leave(c1);
    let m1 = modern_member(&bs, "rolling");
    m1.subscribe(&["roll"]).unwrap();
    produce_all(&producer(&bs, &[]), "roll", &records[2000..4000]);
    consume_until(
        &[&c2, &m1],
        4000,
        &|| owns(&c2) > 0 && owns(&m1) > 0 && owns(&c2) + owns(&m1) == 6,
        "a classic and a consumer-protocol member share the topic",
    );
    assert!(
        server
            .log()
            .contains("converting a classic group to a consumer group"),
        "the group was converted, not rebuilt"
    );
    // Then the second.
    leave(c2);
    let m2 = modern_member(&bs, "rolling");
    m2.subscribe(&["roll"]).unwrap();
    produce_all(&producer(&bs, &[]), "roll", &records[4000..6000]);
    consume_until(
        &[&m1, &m2],
        6000,
        &|| owns(&m1) > 0 && owns(&m2) > 0 && owns(&m1) + owns(&m2) == 6,
        "two consumer-protocol members share the topic",
    );
    // And back: each is restarted on the classic protocol again.
    leave(m1);
    let c3 = member(&bs, "rolling", &[]);
    c3.subscribe(&["roll"]).unwrap();
    produce_all(&producer(&bs, &[]), "roll", &records[6000..7000]);
    consume_until(
        &[&m2, &c3],
        7000,
        &|| owns(&m2) > 0 && owns(&c3) > 0 && owns(&m2) + owns(&c3) == 6,
        "a classic member joins the consumer group",
    );
    leave(m2);
    let c4 = member(&bs, "rolling", &[]);
    c4.subscribe(&["roll"]).unwrap();
    produce_all(&producer(&bs, &[]), "roll", &records[7000..]);
    consume_until(
        &[&c3, &c4],
        8000,
        &|| owns(&c3) > 0 && owns(&c4) > 0 && owns(&c3) + owns(&c4) == 6,
        "two classic members again",
    );
    for _ in 0..10 {
        drain(&c3, &seen);
        drain(&c4, &seen);
    }
    let seen = seen.lock().unwrap();
    let unique: HashSet<&String> = seen.iter().collect();
    assert_eq!(unique.len(), 8000, "every record was consumed");
    assert_eq!(seen.len(), 8000, "no record was consumed twice");
    drop(seen);
    leave(c3);
    leave(c4);
}
