//! Consumer groups with `sluice-client` members: exactly-once consumption while members come
//! and go, eviction of a killed member, independent groups, committed offsets across a broker
//! restart, static membership, `max.poll.interval.ms`, cooperative rebalancing, and groups
//! that mix librdkafka and sluice-client members, on the classic and the consumer (KIP-848)
//! group protocol; and share groups (KIP-932) with the client's `ShareConsumer`.

mod common;

use std::collections::HashSet;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::*;
use rdkafka::consumer::{BaseConsumer, Consumer as _};
use rdkafka::message::Message;
use sluice_client::admin::{AlterOp, ConfigResource, NewTopic};
use sluice_client::{
    AcknowledgeType, AcknowledgementResult, Admin, ClientConfig, Consumer, ErrorCode, Producer,
    ProducerRecord, RebalanceListener, ShareConsumer, ShareRecord, TopicPartition,
};

#[derive(Clone, Debug, PartialEq, Eq)]
enum Event {
    Assigned(Vec<TopicPartition>),
    Revoked(Vec<TopicPartition>),
    Lost(Vec<TopicPartition>),
}

/// Records every listener call.
#[derive(Clone, Default)]
struct Recorder(Arc<Mutex<Vec<Event>>>);

impl Recorder {
    fn events(&self) -> Vec<Event> {
        self.0.lock().unwrap().clone()
    }
}

impl RebalanceListener for Recorder {
    fn on_assigned(&mut self, p: &[TopicPartition]) {
        self.0.lock().unwrap().push(Event::Assigned(p.to_vec()));
    }
    fn on_revoked(&mut self, p: &[TopicPartition]) {
        self.0.lock().unwrap().push(Event::Revoked(p.to_vec()));
    }
    fn on_lost(&mut self, p: &[TopicPartition]) {
        self.0.lock().unwrap().push(Event::Lost(p.to_vec()));
    }
}

fn member_config(bootstrap: &str, group: &str, extra: &[(&str, &str)]) -> ClientConfig {
    ClientConfig::new(bootstrap)
        .set_all([
            ("group.id", group),
            ("auto.offset.reset", "earliest"),
            ("auto.commit.interval.ms", "100"),
            ("session.timeout.ms", "6000"),
            ("heartbeat.interval.ms", "500"),
            ("fetch.max.wait.ms", "100"),
        ])
        .and_then(|c| c.set_all(extra.iter().copied()))
        .unwrap()
}

async fn member(
    bootstrap: &str,
    group: &str,
    topic: &str,
    extra: &[(&str, &str)],
) -> (Consumer, Recorder) {
    let mut c = Consumer::new(member_config(bootstrap, group, extra)).unwrap();
    let rec = Recorder::default();
    c.subscribe_with_listener(&[topic], Box::new(rec.clone()))
        .await
        .unwrap();
    (c, rec)
}

async fn create(bootstrap: &str, topic: &str, partitions: i32) {
    let admin = Admin::new(ClientConfig::new(bootstrap)).unwrap();
    let res = admin
        .create_topics(&[NewTopic::new(topic, partitions, 1)], false)
        .await
        .unwrap();
    res[0].1.as_ref().unwrap();
}

async fn produce(bootstrap: &str, topic: &str, tag: &str, range: std::ops::Range<usize>) {
    let p = Producer::new(ClientConfig::new(bootstrap)).unwrap();
    let mut acks = Vec::new();
    for i in range {
        acks.push(
            p.send(
                ProducerRecord::new(topic)
                    .key(format!("k{i}"))
                    .value(format!("{tag}-{i}")),
            )
            .await
            .unwrap(),
        );
    }
    for a in acks {
        a.wait().await.unwrap();
    }
    p.close(Duration::from_secs(10)).await;
}

/// Take what `c` has ready and record the values.
async fn drain(c: &mut Consumer, seen: &Mutex<Vec<String>>) {
    let records = c.poll(Duration::from_millis(20)).await.unwrap();
    let mut seen = seen.lock().unwrap();
    for r in records {
        seen.push(String::from_utf8(r.value.unwrap().to_vec()).unwrap());
    }
}

fn check_exactly_once(seen: &Mutex<Vec<String>>, total: usize) {
    let seen = seen.lock().unwrap();
    let unique: HashSet<&String> = seen.iter().collect();
    assert_eq!(unique.len(), total, "every record was consumed");
    assert_eq!(seen.len(), total, "no record was consumed twice");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_group_consumes_every_record_exactly_once_while_members_join_and_leave() {
    let server = start(&["group.initial.rebalance.delay.ms=0"]);
    let b = server.bootstrap.as_str();
    create(b, "work", 12).await;
    let total = 6000;
    let seen = Mutex::new(Vec::new());
    let (mut first, first_events) = member(b, "workers", "work", &[]).await;
    produce(b, "work", "w", 0..2000).await;
    let deadline = Instant::now() + Duration::from_secs(60);
    while seen.lock().unwrap().len() < 500 {
        assert!(Instant::now() < deadline);
        drain(&mut first, &seen).await;
    }
    let (mut second, second_events) = member(b, "workers", "work", &[]).await;
    let (mut third, third_events) = member(b, "workers", "work", &[]).await;
    while [&first, &second, &third]
        .iter()
        .any(|m| m.assignment().is_empty())
    {
        assert!(
            Instant::now() < deadline,
            "the group never spread over three members"
        );
        for m in [&mut first, &mut second, &mut third] {
            drain(m, &seen).await;
        }
    }
    // Range over 12 partitions: four each, none shared.
    let mut all: Vec<TopicPartition> = [&first, &second, &third]
        .iter()
        .flat_map(|m| m.assignment())
        .collect();
    all.sort();
    all.dedup();
    assert_eq!(all.len(), 12);
    produce(b, "work", "w", 2000..4000).await;
    while seen.lock().unwrap().len() < 3500 {
        assert!(Instant::now() < deadline);
        for m in [&mut first, &mut second, &mut third] {
            drain(m, &seen).await;
        }
    }
    second.close().await.unwrap();
    produce(b, "work", "w", 4000..total).await;
    while seen.lock().unwrap().len() < total {
        assert!(
            Instant::now() < deadline,
            "consumed {}",
            seen.lock().unwrap().len()
        );
        drain(&mut first, &seen).await;
        drain(&mut third, &seen).await;
    }
    for _ in 0..10 {
        drain(&mut first, &seen).await;
        drain(&mut third, &seen).await;
    }
    check_exactly_once(&seen, total);
    for (name, events) in [
        ("first", &first_events),
        ("second", &second_events),
        ("third", &third_events),
    ] {
        let events = events.events();
        assert!(
            events
                .iter()
                .any(|e| matches!(e, Event::Assigned(p) if !p.is_empty())),
            "{name} was given partitions: {events:?}"
        );
        assert!(
            !events.iter().any(|e| matches!(e, Event::Lost(_))),
            "{name} lost partitions: {events:?}"
        );
    }
    // `second` revoked what it had when it closed.
    assert!(matches!(
        second_events.events().last(),
        Some(Event::Revoked(p)) if !p.is_empty()
    ));
    first.close().await.unwrap();
    third.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_killed_without_leaving_is_evicted_and_its_partitions_move() {
    let server = start(&["group.initial.rebalance.delay.ms=0"]);
    let b = server.bootstrap.as_str();
    create(b, "evict", 12).await;
    let (mut survivor, _) = member(b, "evictors", "evict", &[]).await;
    // The other member is `sluice consume --group` (sluice-client) in its own process.
    let mut other = Command::new(sluice_bin())
        .args([
            "consume",
            "--bootstrap-server",
            b,
            "--topic",
            "evict",
            "--group",
            "evictors",
            "--consumer-property",
            "session.timeout.ms=6000",
            "--consumer-property",
            "heartbeat.interval.ms=500",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while !(1..12).contains(&survivor.assignment().len()) {
        assert!(
            Instant::now() < deadline,
            "the two members never shared the partitions"
        );
        survivor.poll(Duration::from_millis(100)).await.unwrap();
    }
    let killed_at = Instant::now();
    other.kill().unwrap();
    other.wait().unwrap();
    while survivor.assignment().len() < 12 {
        assert!(
            Instant::now() < deadline,
            "the dead member's partitions never moved"
        );
        survivor.poll(Duration::from_millis(100)).await.unwrap();
    }
    let waited = killed_at.elapsed();
    assert!(
        waited >= Duration::from_secs(4),
        "moved before the session timeout: {waited:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_groups_each_see_every_record() {
    let server = start(&["group.initial.rebalance.delay.ms=0"]);
    let b = server.bootstrap.as_str();
    create(b, "fanout", 4).await;
    produce(b, "fanout", "f", 0..1000).await;
    for group in ["alpha", "beta"] {
        let (mut c, _) = member(b, group, "fanout", &[]).await;
        let seen = Mutex::new(Vec::new());
        let deadline = Instant::now() + Duration::from_secs(60);
        while seen.lock().unwrap().len() < 1000 {
            assert!(Instant::now() < deadline, "{group}");
            drain(&mut c, &seen).await;
        }
        check_exactly_once(&seen, 1000);
        c.close().await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn committed_offsets_survive_a_broker_restart() {
    let mut server = start(&["group.initial.rebalance.delay.ms=0"]);
    create(&server.bootstrap, "kept", 3).await;
    produce(&server.bootstrap, "kept", "c", 0..300).await;
    let (mut c, _) = member(
        &server.bootstrap,
        "keepers",
        "kept",
        &[("enable.auto.commit", "false")],
    )
    .await;
    let seen = Mutex::new(Vec::new());
    let deadline = Instant::now() + Duration::from_secs(60);
    while seen.lock().unwrap().len() < 300 {
        assert!(Instant::now() < deadline);
        drain(&mut c, &seen).await;
    }
    c.commit_sync().await.unwrap();
    c.close().await.unwrap();
    server.restart();

    let tps: Vec<TopicPartition> = (0..3).map(|p| TopicPartition::new("kept", p)).collect();
    let (mut c, _) = member(&server.bootstrap, "keepers", "kept", &[]).await;
    let committed = c.committed(&tps).await.unwrap();
    let total: i64 = committed
        .iter()
        .map(|(tp, o)| o.as_ref().unwrap_or_else(|| panic!("{tp}: nothing")).offset)
        .sum();
    assert_eq!(total, 300, "the committed offsets cover every record");
    // The restarted member resumes after them: nothing to read.
    let until = Instant::now() + Duration::from_secs(3);
    let seen = Mutex::new(Vec::new());
    while Instant::now() < until {
        drain(&mut c, &seen).await;
    }
    assert_eq!(c.assignment().len(), 3);
    assert!(seen.lock().unwrap().is_empty());
    for tp in &tps {
        let pos = c.position(tp).await.unwrap();
        let committed = committed.iter().find(|(t, _)| t == tp).unwrap();
        assert_eq!(pos, committed.1.as_ref().unwrap().offset);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_static_member_restarting_within_the_session_timeout_causes_no_rebalance() {
    let server = start(&["group.initial.rebalance.delay.ms=0"]);
    let b = server.bootstrap.as_str();
    create(b, "static", 6).await;
    let (mut stay, stay_events) =
        member(b, "statics", "static", &[("group.instance.id", "stay")]).await;
    let (mut bounce, _) = member(b, "statics", "static", &[("group.instance.id", "bounce")]).await;
    let deadline = Instant::now() + Duration::from_secs(60);
    while !(stay.assignment().len() == 3 && bounce.assignment().len() == 3) {
        assert!(Instant::now() < deadline);
        stay.poll(Duration::from_millis(50)).await.unwrap();
        bounce.poll(Duration::from_millis(50)).await.unwrap();
    }
    let before = stay_events.events().len();
    let held = bounce.assignment();
    // A static member's close does not leave; its replacement takes the same partitions.
    bounce.close().await.unwrap();
    let (mut back, _) = member(b, "statics", "static", &[("group.instance.id", "bounce")]).await;
    let until = Instant::now() + Duration::from_secs(4);
    while back.assignment().len() < 3 || Instant::now() < until {
        assert!(Instant::now() < deadline);
        stay.poll(Duration::from_millis(50)).await.unwrap();
        back.poll(Duration::from_millis(50)).await.unwrap();
    }
    assert_eq!(
        stay_events.events().len(),
        before,
        "the other member saw a rebalance: {:?}",
        stay_events.events()
    );
    assert_eq!(back.assignment(), held);
    // A second live member with the same instance id fences the first.
    let (mut twin, _) = member(b, "statics", "static", &[("group.instance.id", "bounce")]).await;
    let mut fenced = None;
    while fenced.is_none() {
        assert!(Instant::now() < deadline, "the old instance was not fenced");
        let _ = twin.poll(Duration::from_millis(50)).await;
        stay.poll(Duration::from_millis(50)).await.unwrap();
        if let Err(e) = back.poll(Duration::from_millis(50)).await {
            fenced = Some(e);
        }
    }
    assert_eq!(fenced.unwrap().code(), Some(ErrorCode::FencedInstanceId));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_that_stops_polling_leaves_and_rejoins_having_lost_its_partitions() {
    let server = start(&["group.initial.rebalance.delay.ms=0"]);
    let b = server.bootstrap.as_str();
    create(b, "slow", 4).await;
    let (mut busy, _) = member(b, "pollers", "slow", &[]).await;
    let (mut slow, slow_events) =
        member(b, "pollers", "slow", &[("max.poll.interval.ms", "1500")]).await;
    let deadline = Instant::now() + Duration::from_secs(60);
    while busy.assignment().len() != 2 || slow.assignment().len() != 2 {
        assert!(Instant::now() < deadline);
        busy.poll(Duration::from_millis(50)).await.unwrap();
        slow.poll(Duration::from_millis(50)).await.unwrap();
    }
    // `slow` stops polling: its heartbeat task leaves the group, `busy` takes everything.
    while busy.assignment().len() != 4 {
        assert!(Instant::now() < deadline, "the idle member never left");
        busy.poll(Duration::from_millis(50)).await.unwrap();
    }
    // When `slow` polls again its partitions are reported lost and it joins afresh.
    while slow.assignment().len() != 2 || busy.assignment().len() != 2 {
        assert!(Instant::now() < deadline, "the idle member never rejoined");
        busy.poll(Duration::from_millis(50)).await.unwrap();
        slow.poll(Duration::from_millis(50)).await.unwrap();
    }
    assert!(
        slow_events
            .events()
            .iter()
            .any(|e| matches!(e, Event::Lost(p) if p.len() == 2)),
        "{:?}",
        slow_events.events()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cooperative_members_keep_their_partitions_when_a_member_joins() {
    let server = start(&["group.initial.rebalance.delay.ms=0"]);
    let b = server.bootstrap.as_str();
    create(b, "coop", 6).await;
    let coop = [("partition.assignment.strategy", "cooperative-sticky")];
    let (mut a, a_events) = member(b, "coops", "coop", &coop).await;
    let (mut c, _) = member(b, "coops", "coop", &coop).await;
    let deadline = Instant::now() + Duration::from_secs(60);
    while a.assignment().len() != 3 || c.assignment().len() != 3 {
        assert!(Instant::now() < deadline);
        a.poll(Duration::from_millis(50)).await.unwrap();
        c.poll(Duration::from_millis(50)).await.unwrap();
    }
    let a_before = a.assignment();
    let seen_events = a_events.events().len();
    let (mut d, _) = member(b, "coops", "coop", &coop).await;
    while a.assignment().len() != 2 || c.assignment().len() != 2 || d.assignment().len() != 2 {
        assert!(Instant::now() < deadline, "no 2/2/2 split");
        for m in [&mut a, &mut c, &mut d] {
            m.poll(Duration::from_millis(50)).await.unwrap();
        }
        // Never two owners at once.
        let mut owned: Vec<TopicPartition> =
            [&a, &c, &d].iter().flat_map(|m| m.assignment()).collect();
        let n = owned.len();
        owned.sort();
        owned.dedup();
        assert_eq!(owned.len(), n, "a partition had two owners");
    }
    // `a` gave up exactly one partition and kept the rest: no revoke-everything.
    assert!(a.assignment().iter().all(|tp| a_before.contains(tp)));
    let revoked: Vec<Vec<TopicPartition>> = a_events.events()[seen_events..]
        .iter()
        .cloned()
        .filter_map(|e| match e {
            Event::Revoked(p) => Some(p),
            _ => None,
        })
        .collect();
    assert_eq!(revoked.len(), 1, "{revoked:?}");
    assert_eq!(revoked[0].len(), 1);
}

fn rdkafka_member(bootstrap: &str, group: &str, strategy: &str) -> BaseConsumer {
    consumer(
        bootstrap,
        &[
            ("group.id", group),
            ("auto.offset.reset", "earliest"),
            ("enable.auto.commit", "true"),
            ("auto.commit.interval.ms", "100"),
            ("session.timeout.ms", "6000"),
            ("heartbeat.interval.ms", "500"),
            ("partition.assignment.strategy", strategy),
        ],
    )
}

fn drain_rdkafka(c: &BaseConsumer, seen: &Mutex<Vec<String>>) {
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

/// librdkafka and sluice-client members in one group, each able to lead it.
async fn mixed_group(strategy: &str) {
    let server = start(&["group.initial.rebalance.delay.ms=0"]);
    let b = server.bootstrap.as_str();
    let topic = format!("mixed-{strategy}");
    create(b, &topic, 12).await;
    let total = 4000;
    produce(b, &topic, "m", 0..2000).await;
    let seen = Mutex::new(Vec::new());
    let rd = rdkafka_member(b, "mixed", strategy);
    rd.subscribe(&[topic.as_str()]).unwrap();
    let strategy_prop = [("partition.assignment.strategy", strategy)];
    let (mut ours, _) = member(b, "mixed", &topic, &strategy_prop).await;
    let rd_count = |c: &BaseConsumer| c.assignment().map(|a| a.count()).unwrap_or(0);
    let deadline = Instant::now() + Duration::from_secs(60);
    while !(rd_count(&rd) == 6 && ours.assignment().len() == 6) {
        assert!(
            Instant::now() < deadline,
            "{strategy}: no even split (librdkafka {}, sluice-client {})",
            rd_count(&rd),
            ours.assignment().len()
        );
        drain_rdkafka(&rd, &seen);
        drain(&mut ours, &seen).await;
    }
    // A second sluice-client member joins, then leaves again.
    let (mut late, _) = member(b, "mixed", &topic, &strategy_prop).await;
    while rd_count(&rd) != 4 || ours.assignment().len() != 4 || late.assignment().len() != 4 {
        assert!(Instant::now() < deadline, "{strategy}: no three-way split");
        drain_rdkafka(&rd, &seen);
        drain(&mut ours, &seen).await;
        drain(&mut late, &seen).await;
    }
    produce(b, &topic, "m", 2000..total).await;
    while seen.lock().unwrap().len() < total * 3 / 4 {
        assert!(Instant::now() < deadline);
        drain_rdkafka(&rd, &seen);
        drain(&mut ours, &seen).await;
        drain(&mut late, &seen).await;
    }
    late.close().await.unwrap();
    while seen.lock().unwrap().len() < total {
        assert!(
            Instant::now() < deadline,
            "{strategy}: consumed {}",
            seen.lock().unwrap().len()
        );
        drain_rdkafka(&rd, &seen);
        drain(&mut ours, &seen).await;
    }
    for _ in 0..10 {
        drain_rdkafka(&rd, &seen);
        drain(&mut ours, &seen).await;
    }
    check_exactly_once(&seen, total);
    // Unsubscribe and let librdkafka finish revoking before the drop (dropping a subscribed
    // librdkafka consumer can hang in its close path, confluentinc/librdkafka#4884).
    rd.unsubscribe();
    while rd_count(&rd) > 0 {
        assert!(Instant::now() < deadline);
        rd.poll(Duration::from_millis(50));
        drain(&mut ours, &seen).await;
    }
    ours.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mixed_group_of_librdkafka_and_sluice_client_members_with_range() {
    mixed_group("range").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mixed_group_of_librdkafka_and_sluice_client_members_with_cooperative_sticky() {
    mixed_group("cooperative-sticky").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_empty_groups_offsets_expire_after_the_retention_and_an_active_groups_stay() {
    let server = start(&[
        "group.initial.rebalance.delay.ms=0",
        "offsets.retention.minutes=1",
        "offsets.retention.check.interval.ms=500",
    ]);
    let b = server.bootstrap.as_str();
    create(b, "exp", 1).await;
    produce(b, "exp", "e", 0..10).await;
    let tp = TopicPartition::new("exp", 0);
    let admin = Admin::new(ClientConfig::new(b)).unwrap();
    // A group that only commits (no members): Empty from the start.
    for (_, r) in admin
        .alter_group_offsets("gone", &[(tp.clone(), 5)])
        .await
        .unwrap()
    {
        r.unwrap();
    }
    // A consumer group (KIP-848) whose only member committed and left: its offsets expire
    // likewise, then the empty group is deleted.
    {
        let modern: BaseConsumer = rdkafka::ClientConfig::new()
            .set("bootstrap.servers", b)
            .set("group.id", "gone-modern")
            .set("group.protocol", "consumer")
            .set("auto.offset.reset", "earliest")
            .set("enable.auto.commit", "false")
            .create()
            .unwrap();
        modern.subscribe(&["exp"]).unwrap();
        let until = Instant::now() + Duration::from_secs(30);
        let mut read = 0;
        while read < 10 {
            assert!(
                Instant::now() < until,
                "the consumer-protocol member read {read}"
            );
            if let Some(Ok(_)) = modern.poll(Duration::from_millis(100)) {
                read += 1;
            }
        }
        modern
            .commit_consumer_state(rdkafka::consumer::CommitMode::Sync)
            .unwrap();
        modern.unsubscribe();
        for _ in 0..10 {
            modern.poll(Duration::from_millis(20));
        }
    }
    let listed = |admin: &Admin| {
        let admin = admin.clone();
        async move {
            admin
                .list_groups(&[])
                .await
                .unwrap()
                .into_iter()
                .any(|g| g.group_id == "gone-modern")
        }
    };
    assert!(listed(&admin).await, "the consumer group exists");
    let modern = admin.list_group_offsets("gone-modern", None).await.unwrap();
    assert_eq!(modern.len(), 1, "{modern:?}");
    assert_eq!(modern[0].1.as_ref().map(|o| o.offset), Some(10));
    let committed_at = Instant::now();
    // A group with a live member that committed.
    let (mut c, _) = member(b, "kept", "exp", &[]).await;
    let seen = Mutex::new(Vec::new());
    let deadline = Instant::now() + Duration::from_secs(150);
    while seen.lock().unwrap().len() < 10 {
        assert!(Instant::now() < deadline);
        drain(&mut c, &seen).await;
    }
    c.commit_sync().await.unwrap();
    loop {
        assert!(
            Instant::now() < deadline,
            "the empty group's offsets never expired"
        );
        c.poll(Duration::from_millis(200)).await.unwrap();
        let gone = admin.list_group_offsets("gone", None).await.unwrap();
        let modern = admin.list_group_offsets("gone-modern", None).await.unwrap();
        if gone.iter().any(|(_, o)| o.is_some()) {
            // Committed after the classic group's: not expired before them.
            assert!(modern.iter().all(|(_, o)| o.is_some()), "{modern:?}");
        }
        if gone.iter().chain(&modern).all(|(_, o)| o.is_none()) && !listed(&admin).await {
            break;
        }
    }
    let waited = committed_at.elapsed();
    assert!(
        waited >= Duration::from_secs(59),
        "expired before offsets.retention.minutes: {waited:?}"
    );
    let kept = admin.list_group_offsets("kept", None).await.unwrap();
    assert_eq!(kept.len(), 1);
    assert_eq!(kept[0].1.as_ref().map(|o| o.offset), Some(10));
}

/// The consumer group protocol (KIP-848, `group.protocol=consumer`) spoken by sluice-client
/// members, in one group with a librdkafka 2.12 member on the same protocol and a
/// `sluice consume` member in its own process: the coordinator's `uniform` assignor spreads
/// 12 partitions over two members, then three, then four; the separate process is killed
/// (SIGKILL) and its partitions move once its session ends; a member leaves (epoch -1, its
/// partitions revoked, never lost); every record is read exactly once (auto-commits carry
/// member epochs).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn consumer_protocol_members_share_a_group_with_librdkafka_and_read_each_record_once() {
    let server = start(&[
        "group.consumer.min.session.timeout.ms=6000",
        "group.consumer.session.timeout.ms=6000",
        "group.consumer.min.heartbeat.interval.ms=500",
        "group.consumer.heartbeat.interval.ms=500",
    ]);
    let b = server.bootstrap.as_str();
    let topic = "kip848";
    create(b, topic, 12).await;
    let total = 4000;
    produce(b, topic, "c", 0..2000).await;
    let seen = Mutex::new(Vec::new());
    let protocol = [("group.protocol", "consumer")];
    let (mut ours, ours_events) = member(b, "cp", topic, &protocol).await;
    let rd = consumer(
        b,
        &[
            ("group.id", "cp"),
            ("group.protocol", "consumer"),
            ("auto.offset.reset", "earliest"),
            ("enable.auto.commit", "true"),
            ("auto.commit.interval.ms", "100"),
        ],
    );
    rd.subscribe(&[topic]).unwrap();
    let rd_count = |c: &BaseConsumer| c.assignment().map(|a| a.count()).unwrap_or(0);
    let deadline = Instant::now() + Duration::from_secs(90);
    while !(rd_count(&rd) == 6 && ours.assignment().len() == 6) {
        assert!(
            Instant::now() < deadline,
            "no even split (librdkafka {}, sluice-client {})",
            rd_count(&rd),
            ours.assignment().len()
        );
        drain_rdkafka(&rd, &seen);
        drain(&mut ours, &seen).await;
    }
    // A member in its own process and a late sluice-client member: 3 partitions each.
    let mut other = Command::new(sluice_bin())
        .args(["consume", "--bootstrap-server", b, "--topic", topic])
        .args(["--group", "cp", "--from-beginning"])
        .args(["--consumer-property", "group.protocol=consumer"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let (mut late, late_events) = member(b, "cp", topic, &protocol).await;
    while rd_count(&rd) != 3 || ours.assignment().len() != 3 || late.assignment().len() != 3 {
        assert!(
            Instant::now() < deadline,
            "no four-way split: {} {} {}",
            rd_count(&rd),
            ours.assignment().len(),
            late.assignment().len()
        );
        drain_rdkafka(&rd, &seen);
        drain(&mut ours, &seen).await;
        drain(&mut late, &seen).await;
    }
    // Every member speaks the consumer protocol (none is a classic member of a consumer
    // group), each at an epoch, each holding its target.
    let admin = Admin::new(ClientConfig::new(b)).unwrap();
    let d = admin.describe_groups(&["cp"]).await.unwrap().remove(0);
    assert_eq!(
        (d.group_type.as_str(), d.members.len()),
        ("consumer", 4),
        "{d:?}"
    );
    assert!(
        d.members
            .iter()
            .all(|m| !m.classic && m.member_epoch > Some(0)),
        "{d:?}"
    );
    // The process dies; once its session ends, its three partitions are shared out.
    other.kill().unwrap();
    other.wait().unwrap();
    while rd_count(&rd) != 4 || ours.assignment().len() != 4 || late.assignment().len() != 4 {
        assert!(
            Instant::now() < deadline,
            "the killed member's partitions never moved"
        );
        drain_rdkafka(&rd, &seen);
        drain(&mut ours, &seen).await;
        drain(&mut late, &seen).await;
    }
    // The process read records of its partitions and committed some: what it did not
    // commit is read again by the others (at least once); what comes next, exactly once.
    produce(b, topic, "c", 2000..total).await;
    while seen.lock().unwrap().len() < total * 3 / 4 {
        assert!(Instant::now() < deadline);
        drain_rdkafka(&rd, &seen);
        drain(&mut ours, &seen).await;
        drain(&mut late, &seen).await;
    }
    late.close().await.unwrap();
    let mut values: HashSet<String> = HashSet::new();
    while values.len() < total - 2000 {
        assert!(
            Instant::now() < deadline,
            "consumed {} of the later records",
            values.len()
        );
        drain_rdkafka(&rd, &seen);
        drain(&mut ours, &seen).await;
        values = seen
            .lock()
            .unwrap()
            .iter()
            .filter(|v| v.strip_prefix("c-").and_then(|n| n.parse::<usize>().ok()) >= Some(2000))
            .cloned()
            .collect();
    }
    for _ in 0..10 {
        drain_rdkafka(&rd, &seen);
        drain(&mut ours, &seen).await;
    }
    // The records produced after the kill: each read exactly once.
    let later: Vec<String> = seen
        .lock()
        .unwrap()
        .iter()
        .filter(|v| v.strip_prefix("c-").and_then(|n| n.parse::<usize>().ok()) >= Some(2000))
        .cloned()
        .collect();
    check_exactly_once(&Mutex::new(later), total - 2000);
    // The earlier ones: each read at least once.
    let all: HashSet<String> = seen.lock().unwrap().iter().cloned().collect();
    assert_eq!(all.len(), total, "every record was consumed");
    for (name, events) in [("ours", &ours_events), ("late", &late_events)] {
        let events = events.events();
        assert!(
            !events.iter().any(|e| matches!(e, Event::Lost(_))),
            "{name} lost partitions: {events:?}"
        );
    }
    assert!(matches!(
        late_events.events().last(),
        Some(Event::Revoked(p)) if p.len() == 4
    ));
    rd.unsubscribe();
    while rd_count(&rd) > 0 {
        assert!(Instant::now() < deadline);
        rd.poll(Duration::from_millis(50));
        drain(&mut ours, &seen).await;
    }
    ours.close().await.unwrap();
}

/// Broker settings that make share-group locks quick to expire.
const SHARE_SETTINGS: &[&str] = &[
    "group.share.min.record.lock.duration.ms=1000",
    "group.share.record.lock.duration.ms=2000",
    "group.share.delivery.count.limit=3",
];

fn share_member(bootstrap: &str, group: &str, mode: &str) -> ShareConsumer {
    ShareConsumer::new(
        ClientConfig::new(bootstrap)
            .set_all([
                ("group.id", group),
                ("share.acknowledgement.mode", mode),
                ("fetch.max.wait.ms", "100"),
            ])
            .unwrap(),
    )
    .unwrap()
}

/// A share group that starts at the earliest offset (share groups start at the latest).
async fn share_group_from_earliest(bootstrap: &str, group: &str) {
    let admin = Admin::new(ClientConfig::new(bootstrap)).unwrap();
    admin
        .alter_configs(
            &ConfigResource::Group(group.into()),
            &[AlterOp::Set(
                "share.auto.offset.reset".into(),
                "earliest".into(),
            )],
            false,
        )
        .await
        .unwrap();
}

/// Poll until `want` records arrived (or a minute passed); implicit mode accepts them.
async fn share_poll_until(c: &mut ShareConsumer, want: usize) -> Vec<ShareRecord> {
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut got = Vec::new();
    while got.len() < want && Instant::now() < deadline {
        got.extend(c.poll(Duration::from_millis(200)).await.unwrap());
    }
    got
}

fn offsets(records: &[ShareRecord]) -> Vec<(i64, i16)> {
    let mut o: Vec<(i64, i16)> = records
        .iter()
        .map(|r| (r.offset, r.delivery_count))
        .collect();
    o.sort_unstable();
    o
}

/// Three sluice-client share consumers (implicit acknowledgement) read one partition
/// together: every record is delivered once, to one of them, and all three are assigned it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn share_consumers_of_the_rust_client_split_a_partition_and_read_each_record_once() {
    let server = start(SHARE_SETTINGS);
    let b = server.bootstrap.clone();
    create(&b, "queue", 1).await;
    share_group_from_earliest(&b, "workers").await;
    produce(&b, "queue", "job", 0..3000).await;
    let seen = Arc::new(Mutex::new(Vec::<(String, i16)>::new()));
    let mut tasks = Vec::new();
    for _ in 0..3 {
        let (b, seen) = (b.clone(), Arc::clone(&seen));
        tasks.push(tokio::spawn(async move {
            let mut c = share_member(&b, "workers", "implicit");
            c.subscribe(&["queue"]).await.unwrap();
            let deadline = Instant::now() + Duration::from_secs(60);
            let mut mine = 0;
            let mut assigned = false;
            while seen.lock().unwrap().len() < 3000 && Instant::now() < deadline {
                let records = c.poll(Duration::from_millis(100)).await.unwrap();
                assigned |= c.assignment() == vec![TopicPartition::new("queue", 0)];
                mine += records.len();
                let mut seen = seen.lock().unwrap();
                for r in records {
                    let v = String::from_utf8(r.value.clone().unwrap().to_vec()).unwrap();
                    seen.push((v, r.delivery_count));
                }
            }
            let results = c.close().await.unwrap();
            assert!(
                results.iter().all(|r| r.error.is_none()),
                "acknowledgements refused: {results:?}"
            );
            (mine, assigned)
        }));
    }
    let mut per_member = Vec::new();
    for t in tasks {
        let (mine, assigned) = t.await.unwrap();
        assert!(assigned, "every member is assigned the partition");
        per_member.push(mine);
    }
    let seen = seen.lock().unwrap();
    let unique: HashSet<&String> = seen.iter().map(|(v, _)| v).collect();
    assert_eq!(unique.len(), 3000, "every record delivered");
    assert_eq!(
        seen.len(),
        3000,
        "no record delivered twice: {per_member:?}"
    );
    assert!(seen.iter().all(|(_, n)| *n == 1), "all first deliveries");
}

/// Explicit acknowledgement with the sluice-client ShareConsumer: RELEASE redelivers with a
/// higher delivery count, REJECT never delivers again, a poll with records unacknowledged is
/// refused, closing releases what is held, a lock that expires hands the records to another
/// member (and the first member's late acknowledgement is refused).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn explicit_share_acknowledgements_release_reject_and_expire_as_kafkas() {
    let server = start(SHARE_SETTINGS);
    let b = server.bootstrap.clone();
    create(&b, "tasks", 1).await;
    share_group_from_earliest(&b, "explicit").await;
    produce(&b, "tasks", "t", 0..10).await;

    let mut a = share_member(&b, "explicit", "explicit");
    a.subscribe(&["tasks"]).await.unwrap();
    let first = share_poll_until(&mut a, 10).await;
    assert_eq!(offsets(&first), (0..10).map(|o| (o, 1)).collect::<Vec<_>>());
    let refused = a.poll(Duration::from_millis(10)).await.unwrap_err();
    assert!(refused.to_string().contains("explicit"), "{refused}");
    for r in &first {
        let how = match r.offset {
            0..=2 => AcknowledgeType::Release,
            3 => AcknowledgeType::Reject,
            _ => AcknowledgeType::Accept,
        };
        a.acknowledge(r, how).unwrap();
    }
    assert!(
        a.acknowledge(&first[0], AcknowledgeType::Accept).is_err(),
        "a record is acknowledged once"
    );
    let results = a.commit_sync().await.unwrap();
    let acked: usize = results.iter().map(|r| r.offsets.len()).sum();
    assert_eq!(acked, 10, "{results:?}");
    assert!(results.iter().all(|r| r.error.is_none()), "{results:?}");

    // Released ones come back counted twice; the rejected one does not.
    let again = share_poll_until(&mut a, 3).await;
    assert_eq!(offsets(&again), vec![(0, 2), (1, 2), (2, 2)]);
    let zero = again.iter().find(|r| r.offset == 0).unwrap();
    a.acknowledge(zero, AcknowledgeType::Accept).unwrap();
    // Closing with 1 and 2 unacknowledged ends the share session: they go back at once.
    a.close().await.unwrap();

    let mut b1 = share_member(&b, "explicit", "explicit");
    b1.subscribe(&["tasks"]).await.unwrap();
    let third = share_poll_until(&mut b1, 2).await;
    assert_eq!(offsets(&third), vec![(1, 3), (2, 3)]);
    // b1 sits on them: at the lock's end they have had the limit (3) of deliveries and are
    // archived, so another member sees only newer records.
    produce(&b, "tasks", "t", 10..15).await;
    let mut c = share_member(&b, "explicit", "implicit");
    c.subscribe(&["tasks"]).await.unwrap();
    let newer = share_poll_until(&mut c, 5).await;
    assert_eq!(
        offsets(&newer),
        (10..15).map(|o| (o, 1)).collect::<Vec<_>>()
    );
    c.commit_sync().await.unwrap();
    // b1 takes the next records and sits on them until c receives them, after their lock.
    produce(&b, "tasks", "t", 15..20).await;
    for r in &third {
        b1.acknowledge(r, AcknowledgeType::Accept).unwrap();
    }
    let held = share_poll_until(&mut b1, 5).await;
    assert_eq!(offsets(&held), (15..20).map(|o| (o, 1)).collect::<Vec<_>>());
    let taken = share_poll_until(&mut c, 5).await;
    assert_eq!(
        offsets(&taken),
        (15..20).map(|o| (o, 2)).collect::<Vec<_>>(),
        "records whose lock expired go to another member"
    );
    c.commit_sync().await.unwrap();
    for r in &held {
        b1.acknowledge(r, AcknowledgeType::Accept).unwrap();
    }
    let late = b1.commit_sync().await.unwrap();
    let refused: Vec<&AcknowledgementResult> =
        late.iter().filter(|r| r.offsets.contains(&15)).collect();
    assert_eq!(refused.len(), 1, "{late:?}");
    assert!(
        refused[0].error.as_ref().and_then(|e| e.code()) == Some(ErrorCode::InvalidRecordState),
        "an acknowledgement after the lock expired is refused: {late:?}"
    );
    b1.close().await.unwrap();
    c.close().await.unwrap();
}
