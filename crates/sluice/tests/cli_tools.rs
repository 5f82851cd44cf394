//! The `sluice` tools run as a user runs them: real binary, real node, stdout/stderr/exit
//! codes checked — including wrong arguments (exit 2, one line) and an unreachable broker
//! (a clear message within --timeout).

mod common;

use std::io::Write;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::*;

fn sluice(bootstrap: &str, args: &[&str]) -> Output {
    Command::new(sluice_bin())
        .args(args)
        .env("SLUICE_BOOTSTRAP", bootstrap)
        .output()
        .unwrap()
}

fn ok(out: &Output) -> String {
    assert!(
        out.status.success(),
        "exit {:?}\nstdout: {}\nstderr: {}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn fails(out: &Output, code: i32) -> String {
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(code), "stderr: {err}");
    err
}

fn produce_lines(bootstrap: &str, args: &[&str], input: &str) -> Output {
    let mut child = Command::new(sluice_bin())
        .args(args)
        .env("SLUICE_BOOTSTRAP", bootstrap)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
}

#[test]
fn topics_create_list_describe_alter_delete() {
    let server = start(&[]);
    let b = server.bootstrap.as_str();
    let out = ok(&sluice(
        b,
        &[
            "topics",
            "--create",
            "--topic",
            "orders",
            "--partitions",
            "3",
            "--replication-factor",
            "1",
            "--config",
            "retention.ms=60000",
        ],
    ));
    assert_eq!(out.trim(), "Created topic orders.");
    ok(&sluice(
        b,
        &["topics", "--create", "--topic", "orders", "--if-not-exists"],
    ));
    let err = fails(&sluice(b, &["topics", "--create", "--topic", "orders"]), 1);
    assert!(err.contains("TopicAlreadyExists"), "{err}");
    assert_eq!(ok(&sluice(b, &["topics", "--list"])).trim(), "orders");
    let described = ok(&sluice(b, &["topics", "--describe", "--topic", "orders"]));
    assert!(
        described.contains("PartitionCount: 3\tReplicationFactor: 1\tConfigs: retention.ms=60000"),
        "{described}"
    );
    assert!(
        described.contains(
            "Partition: 2\tLeader: 0\tReplicas: 0\tIsr: 0\tElr: \tLastKnownElr: \tLogStartOffset: 0\tLogEndOffset: 0"
        ),
        "{described}"
    );
    ok(&sluice(
        b,
        &[
            "topics",
            "--alter",
            "--topic",
            "orders",
            "--partitions",
            "5",
        ],
    ));
    let err = fails(
        &sluice(
            b,
            &[
                "topics",
                "--alter",
                "--topic",
                "orders",
                "--partitions",
                "2",
            ],
        ),
        1,
    );
    assert!(err.contains("InvalidPartitions"), "{err}");
    assert!(
        ok(&sluice(b, &["topics", "--describe", "--topic", "orders"]))
            .contains("PartitionCount: 5")
    );
    assert_eq!(
        ok(&sluice(b, &["topics", "--delete", "--topic", "orders"])).trim(),
        "Deleted topic orders."
    );
    assert_eq!(ok(&sluice(b, &["topics", "--list"])).trim(), "");
}

#[test]
fn produce_and_consume_like_the_console_tools() {
    let server = start(&[]);
    let b = server.bootstrap.as_str();
    ok(&sluice(
        b,
        &[
            "topics",
            "--create",
            "--topic",
            "lines",
            "--partitions",
            "1",
        ],
    ));
    let input: String = (0..50).map(|i| format!("key{i}:value {i}\n")).collect();
    let out = produce_lines(
        b,
        &[
            "produce",
            "--topic",
            "lines",
            "--property",
            "parse.key=true",
            "--property",
            "key.separator=:",
            "--compression",
            "gzip",
            "--acks",
            "1",
        ],
        &input,
    );
    ok(&out);
    let text = ok(&sluice(
        b,
        &[
            "consume",
            "--topic",
            "lines",
            "--from-beginning",
            "--max-messages",
            "50",
            "--property",
            "print.key=true",
            "--property",
            "print.offset=true",
            "--property",
            "key.separator=|",
        ],
    ));
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 50);
    assert_eq!(lines[0], "Offset:0|key0|value 0");
    assert_eq!(lines[49], "Offset:49|key49|value 49");
    let json = ok(&sluice(
        b,
        &[
            "consume",
            "--topic",
            "lines",
            "--partition",
            "0",
            "--offset",
            "48",
            "--format",
            "json",
            "--timeout-ms",
            "1000",
        ],
    ));
    let rows: Vec<&str> = json.lines().collect();
    assert_eq!(rows.len(), 2, "{json}");
    assert!(
        rows[0].starts_with("{\"topic\":\"lines\",\"partition\":0,\"offset\":48,"),
        "{}",
        rows[0]
    );
    assert!(
        rows[0].contains("\"key\":\"key48\",\"value\":\"value 48\""),
        "{}",
        rows[0]
    );
    // A file instead of stdin; no key parsing.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("in.txt");
    std::fs::write(&file, "plain one\nplain two\n").unwrap();
    ok(&sluice(
        b,
        &[
            "produce",
            "--topic",
            "lines",
            "--file",
            file.to_str().unwrap(),
        ],
    ));
    let tail = ok(&sluice(
        b,
        &[
            "consume",
            "--topic",
            "lines",
            "--partition",
            "0",
            "--offset",
            "50",
            "--max-messages",
            "2",
        ],
    ));
    assert_eq!(tail, "plain one\nplain two\n");
    // A line without the separator is an error unless ignore.error=true.
    let out = produce_lines(
        b,
        &[
            "produce",
            "--topic",
            "lines",
            "--property",
            "parse.key=true",
        ],
        "no-tab-here\n",
    );
    assert!(fails(&out, 1).contains("no key separator"));
}

/// The describe row of one partition: its whitespace-separated columns.
fn row(describe: &str, topic: &str, partition: &str) -> Vec<String> {
    describe
        .lines()
        .map(|l| l.split_whitespace().map(str::to_string).collect::<Vec<_>>())
        .find(|cols| cols.len() >= 3 && cols[1] == topic && cols[2] == partition)
        .unwrap_or_else(|| panic!("no row for {topic}-{partition} in:\n{describe}"))
}

#[test]
fn groups_list_describe_reset_and_delete_like_kafka_consumer_groups() {
    let server = start(&["group.initial.rebalance.delay.ms=0"]);
    let b = server.bootstrap.as_str();
    ok(&sluice(
        b,
        &["topics", "--create", "--topic", "g", "--partitions", "1"],
    ));
    let lines: String = (0..100).map(|i| format!("line-{i}\n")).collect();
    ok(&produce_lines(b, &["produce", "--topic", "g"], &lines));

    // A console consumer in a group commits exactly what it printed.
    let consume = |n: &str| {
        ok(&sluice(
            b,
            &[
                "consume",
                "--topic",
                "g",
                "--group",
                "app",
                "--from-beginning",
                "--max-messages",
                n,
            ],
        ))
    };
    let out = consume("30");
    assert_eq!(out.lines().count(), 30);
    assert_eq!(out.lines().last(), Some("line-29"));
    assert_eq!(ok(&sluice(b, &["groups", "--list"])).trim(), "app");
    let listed = ok(&sluice(b, &["groups", "--list", "--state", "empty"]));
    assert!(
        listed.contains("app") && listed.contains("Empty"),
        "{listed}"
    );
    let describe = ok(&sluice(b, &["groups", "--describe", "--group", "app"]));
    assert!(describe.contains("has no active members"), "{describe}");
    assert_eq!(row(&describe, "g", "0")[3..6], ["30", "100", "70"]);
    // The next run continues where the group left off.
    assert_eq!(consume("5").lines().next(), Some("line-30"));

    // --reset-offsets: a dry run changes nothing; --execute does.
    let plan = ok(&sluice(
        b,
        &[
            "groups",
            "--reset-offsets",
            "--group",
            "app",
            "--topic",
            "g",
            "--to-earliest",
            "--dry-run",
        ],
    ));
    assert_eq!(row(&plan, "g", "0")[3], "0");
    let describe = ok(&sluice(b, &["groups", "--describe", "--group", "app"]));
    assert_eq!(row(&describe, "g", "0")[3], "35");
    for (how, expect) in [
        (vec!["--shift-by", "-10"], "25"),
        (vec!["--to-offset", "1000"], "100"),
        (vec!["--to-datetime", "2000-01-01T00:00:00.000"], "0"),
        (vec!["--to-latest"], "100"),
        (vec!["--to-offset", "42"], "42"),
    ] {
        let mut args = vec![
            "groups",
            "--reset-offsets",
            "--group",
            "app",
            "--topic",
            "g:0",
            "--execute",
        ];
        args.extend(how.iter().copied());
        ok(&sluice(b, &args));
        let describe = ok(&sluice(b, &["groups", "--describe", "--group", "app"]));
        assert_eq!(row(&describe, "g", "0")[3], expect, "{how:?}");
    }
    assert_eq!(consume("1").trim(), "line-42");

    // While a member is active: describe shows it; reset and delete are refused.
    let mut member = Command::new(sluice_bin())
        .args(["consume", "--topic", "g", "--group", "app"])
        .env("SLUICE_BOOTSTRAP", b)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    let state = loop {
        let state = ok(&sluice(
            b,
            &["groups", "--describe", "--group", "app", "--state"],
        ));
        if state.contains("Stable") {
            break state;
        }
        assert!(Instant::now() < deadline, "{state}");
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(state.contains("range"), "{state}");
    let describe = ok(&sluice(b, &["groups", "--describe", "--group", "app"]));
    assert!(
        row(&describe, "g", "0")[6].starts_with("sluice-cli"),
        "{describe}"
    );
    let members = ok(&sluice(
        b,
        &[
            "groups",
            "--describe",
            "--group",
            "app",
            "--members",
            "--verbose",
        ],
    ));
    assert!(members.contains("g:0"), "{members}");
    let err = fails(
        &sluice(
            b,
            &[
                "groups",
                "--reset-offsets",
                "--group",
                "app",
                "--topic",
                "g",
                "--to-earliest",
                "--execute",
            ],
        ),
        1,
    );
    assert!(
        err.contains("can only be reset if the group 'app' is inactive"),
        "{err}"
    );
    let err = fails(&sluice(b, &["groups", "--delete", "--group", "app"]), 1);
    assert!(err.contains("not empty"), "{err}");
    // SIGTERM: the console consumer commits, leaves, and the group is empty at once.
    Command::new("kill")
        .args(["-TERM", &member.id().to_string()])
        .status()
        .unwrap();
    let status = member.wait().unwrap();
    assert!(status.success(), "{status:?}");
    let state = ok(&sluice(
        b,
        &["groups", "--describe", "--group", "app", "--state"],
    ));
    assert!(state.contains("Empty"), "{state}");
    let deleted = ok(&sluice(
        b,
        &[
            "groups",
            "--delete-offsets",
            "--group",
            "app",
            "--topic",
            "g",
        ],
    ));
    assert!(deleted.contains("Successful"), "{deleted}");
    let describe = ok(&sluice(b, &["groups", "--describe", "--group", "app"]));
    assert!(
        !describe.lines().any(|l| l.starts_with("app ")),
        "{describe}"
    );
    assert_eq!(
        ok(&sluice(b, &["groups", "--delete", "--group", "app"])).trim(),
        "Deletion of requested consumer groups ('app') was successful."
    );
    assert_eq!(ok(&sluice(b, &["groups", "--list"])).trim(), "");
    let err = fails(&sluice(b, &["groups", "--describe", "--group", "app"]), 1);
    assert!(err.contains("does not exist"), "{err}");

    // Wrong arguments: one line, exit 2.
    for args in [
        vec!["groups", "--describe"],
        vec!["groups", "--reset-offsets", "--group", "x", "--topic", "g"],
        vec!["groups", "--reset-offsets", "--group", "x", "--to-earliest"],
        vec![
            "groups",
            "--reset-offsets",
            "--group",
            "x",
            "--topic",
            "g",
            "--to-datetime",
            "soon",
        ],
        vec!["groups", "--list", "--state", "bogus"],
        vec![
            "groups",
            "--reset-offsets",
            "--group",
            "x",
            "--topic",
            "g",
            "--to-earliest",
            "--to-latest",
        ],
    ] {
        let err = fails(&sluice(b, &args), 2);
        assert_eq!(err.trim().lines().count(), 1, "{args:?}: {err}");
    }
}

#[test]
fn configs_and_offsets() {
    let server = start(&[]);
    let b = server.bootstrap.as_str();
    ok(&sluice(
        b,
        &["topics", "--create", "--topic", "cfg", "--partitions", "2"],
    ));
    ok(&sluice(
        b,
        &[
            "configs",
            "--alter",
            "--entity-type",
            "topics",
            "--entity-name",
            "cfg",
            "--add-config",
            "retention.ms=5000,max.message.bytes=2048",
        ],
    ));
    let d = ok(&sluice(
        b,
        &[
            "configs",
            "--describe",
            "--entity-type",
            "topics",
            "--entity-name",
            "cfg",
        ],
    ));
    assert!(d.contains("Dynamic configs for topic cfg are:"), "{d}");
    assert!(
        d.contains("  retention.ms=5000 sensitive=false source=DYNAMIC_TOPIC_CONFIG"),
        "{d}"
    );
    assert!(d.contains("  max.message.bytes=2048"), "{d}");
    ok(&sluice(
        b,
        &[
            "configs",
            "--alter",
            "--topic",
            "cfg",
            "--delete-config",
            "retention.ms",
        ],
    ));
    let all = ok(&sluice(
        b,
        &["configs", "--describe", "--topic", "cfg", "--all"],
    ));
    assert!(
        all.contains("  retention.ms=604800000 sensitive=false source=DEFAULT_CONFIG"),
        "{all}"
    );
    let broker = ok(&sluice(
        b,
        &[
            "configs",
            "--describe",
            "--entity-type",
            "brokers",
            "--entity-name",
            "0",
            "--all",
        ],
    ));
    assert!(broker.contains("  num.partitions=1"), "{broker}");
    // Broker configs are static: setting one fails, deleting one (as reassignment tools do
    // with throttles) is a no-op.
    let broker_alter = |op: &str, kv: &str| {
        sluice(
            b,
            &[
                "configs",
                "--alter",
                "--entity-type",
                "brokers",
                "--entity-name",
                "0",
                op,
                kv,
            ],
        )
    };
    ok(&broker_alter(
        "--delete-config",
        "leader.replication.throttled.rate",
    ));
    let err = fails(&broker_alter("--add-config", "num.partitions=3"), 1);
    assert!(
        err.contains("Cannot update these configs dynamically: [num.partitions]"),
        "{err}"
    );
    let err = fails(
        &sluice(
            b,
            &[
                "configs",
                "--alter",
                "--topic",
                "cfg",
                "--add-config",
                "retention.ms=never",
            ],
        ),
        1,
    );
    assert!(err.contains("InvalidConfig"), "{err}");
    fails(
        &sluice(
            b,
            &[
                "configs",
                "--describe",
                "--entity-type",
                "ips",
                "--entity-name",
                "x",
            ],
        ),
        2,
    );

    // Client-metrics subscriptions (KIP-714), as kafka-configs.sh --entity-type client-metrics.
    let cm = |extra: &[&str]| {
        let mut a = vec![
            "configs",
            "--entity-type",
            "client-metrics",
            "--entity-name",
            "prod",
        ];
        a.extend_from_slice(extra);
        sluice(b, &a)
    };
    ok(&cm(&[
        "--alter",
        "--add-config",
        "metrics=[org.apache.kafka.producer.,org.apache.kafka.consumer.],interval.ms=10000,match=[client_id=app-.*]",
    ]));
    assert_eq!(
        ok(&cm(&["--describe"])),
        "Dynamic configs for client-metrics prod are:\n  \
         interval.ms=10000 sensitive=false source=CLIENT_METRICS_CONFIG\n  \
         match=client_id=app-.* sensitive=false source=CLIENT_METRICS_CONFIG\n  \
         metrics=org.apache.kafka.producer.,org.apache.kafka.consumer. sensitive=false source=CLIENT_METRICS_CONFIG\n"
    );
    let err = fails(&cm(&["--alter", "--add-config", "interval.ms=1"]), 1);
    assert!(
        err.contains("Invalid value 1 for interval.ms, interval must be between 100 and 3600000"),
        "{err}"
    );
    let err = fails(&cm(&["--alter", "--add-config", "match=[app=1]"]), 1);
    assert!(
        err.contains("InvalidConfig") && err.contains("Illegal client matching pattern: app=1"),
        "{err}"
    );
    ok(&cm(&["--alter", "--delete-config", "match,metrics"]));
    assert_eq!(
        ok(&cm(&["--describe", "--all"])),
        "All configs for client-metrics prod are:\n  \
         interval.ms=10000 sensitive=false source=CLIENT_METRICS_CONFIG\n  \
         match= sensitive=false source=DEFAULT_CONFIG\n  \
         metrics= sensitive=false source=DEFAULT_CONFIG\n"
    );

    produce_lines(b, &["produce", "--topic", "cfg"], "a\nb\nc\n");
    let latest = ok(&sluice(b, &["offsets", "--topic", "cfg"]));
    let total: i64 = latest
        .lines()
        .map(|l| l.rsplit(':').next().unwrap().parse::<i64>().unwrap())
        .sum();
    assert_eq!(total, 3, "{latest}");
    assert_eq!(
        ok(&sluice(b, &["offsets", "--topic", "cfg", "--time", "-2"])),
        "cfg:0:0\ncfg:1:0\n"
    );
    fails(
        &sluice(b, &["offsets", "--topic", "cfg", "--time", "yesterday"]),
        2,
    );
}

#[test]
fn dump_log_prints_batches_records_and_verifies_indexes() {
    let server = start(&["log.index.interval.bytes=100"]);
    let b = server.bootstrap.as_str();
    ok(&sluice(
        b,
        &["topics", "--create", "--topic", "dump", "--partitions", "1"],
    ));
    for round in 0..5 {
        let input: String = (0..20)
            .map(|i| format!("k{i}\tround {round} value {i}\n"))
            .collect();
        ok(&produce_lines(
            b,
            &[
                "produce",
                "--topic",
                "dump",
                "--property",
                "parse.key=true",
                "--compression",
                "snappy",
            ],
            &input,
        ));
    }
    let dir = server.data_dir().join("dump-0");
    let log = dir.join("00000000000000000000.log");
    let out = ok(&sluice(
        b,
        &[
            "dump-log",
            "--files",
            log.to_str().unwrap(),
            "--print-data-log",
        ],
    ));
    assert!(
        out.starts_with(&format!(
            "Dumping {}\nLog starting offset: 0\n",
            log.display()
        )),
        "{out}"
    );
    assert_eq!(
        out.lines().filter(|l| l.starts_with("baseOffset:")).count(),
        5,
        "{out}"
    );
    assert!(out.contains("compresscodec: snappy"), "{out}");
    assert!(out
        .lines()
        .all(|l| !l.starts_with("baseOffset") || l.ends_with("isvalid: true")));
    assert!(out.contains("| offset: 99 "), "{out}");
    assert!(out.contains("key: k19 payload: round 4 value 19"), "{out}");
    let index = dir.join("00000000000000000000.index");
    let idx = ok(&sluice(
        b,
        &["dump-log", "--files", index.to_str().unwrap()],
    ));
    assert!(
        idx.lines().filter(|l| l.starts_with("offset:")).count() >= 3,
        "{idx}"
    );
    let timeindex = dir.join("00000000000000000000.timeindex");
    let verified = ok(&sluice(
        b,
        &[
            "dump-log",
            "--files",
            &format!("{},{}", index.display(), timeindex.display()),
            "--verify-index-only",
        ],
    ));
    assert!(!verified.contains("Mismatches"), "{verified}");
    fails(&sluice(b, &["dump-log", "--files", "/etc/hostname"]), 2);
}

#[test]
fn perf_produce_consume_and_e2e_report_numbers() {
    let server = start(&[]);
    let b = server.bootstrap.as_str();
    let out = ok(&sluice(
        b,
        &[
            "perf",
            "produce",
            "--topic",
            "perf",
            "--records",
            "20000",
            "--record-size",
            "100",
            "--throughput",
            "-1",
            "--producer-props",
            "acks=1",
            "linger.ms=5",
            "--json",
        ],
    ));
    assert!(
        out.starts_with("{\"records\":20000,\"bytes\":2000000,"),
        "{out}"
    );
    assert!(out.contains("\"latency_ms\":{\"avg\":"), "{out}");
    let text = ok(&sluice(
        b,
        &[
            "perf",
            "produce",
            "--topic",
            "perf",
            "--records",
            "1000",
            "--throughput",
            "5000",
        ],
    ));
    assert!(
        text.contains("1000 records, ") && text.contains("ms p99.9"),
        "{text}"
    );
    let consumed = ok(&sluice(
        b,
        &[
            "perf",
            "consume",
            "--topic",
            "perf",
            "--messages",
            "21000",
            "--json",
        ],
    ));
    assert!(consumed.starts_with("{\"records\":21000,"), "{consumed}");
    let e2e = ok(&sluice(
        b,
        &[
            "perf",
            "e2e",
            "--topic",
            "perf-e2e",
            "--records",
            "2000",
            "--json",
        ],
    ));
    assert!(e2e.contains("\"p99\":"), "{e2e}");
}

#[test]
fn wrong_arguments_exit_2_with_one_line() {
    for args in [
        vec!["topics", "--create"],
        vec!["topics"],
        vec!["topics", "--list", "--delete"],
        vec!["consume"],
        vec!["consume", "--topic", "t", "--offset", "5"],
        vec!["produce", "--topic", "t", "--compression", "brotli"],
        vec!["perf", "produce", "--topic", "t"],
        vec!["no-such-command"],
    ] {
        let out = sluice("127.0.0.1:1", &args);
        let err = fails(&out, 2);
        assert!(!err.trim().is_empty(), "{args:?}");
        assert_eq!(err.trim().lines().count(), 1, "{args:?}: {err}");
        assert!(err.starts_with("sluice: "), "{args:?}: {err}");
    }
    for cmd in [
        "topics", "produce", "consume", "configs", "offsets", "dump-log", "perf", "server",
    ] {
        let help = ok(&sluice("127.0.0.1:1", &[cmd, "--help"]));
        assert!(help.contains("Usage:"), "{cmd}");
    }
    assert!(ok(&sluice("127.0.0.1:1", &["topics", "--help"])).contains("Examples:"));
}

#[test]
fn an_unreachable_broker_gets_a_clear_message_within_the_timeout() {
    // A port nothing listens on.
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let addr = format!("127.0.0.1:{port}");
    let started = Instant::now();
    let out = sluice(&addr, &["topics", "--list", "--timeout", "2000"]);
    let err = fails(&out, 1);
    assert!(started.elapsed() < Duration::from_secs(10));
    assert!(err.contains(&format!("cannot reach {addr}")), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
}

/// `sluice features` and `sluice metadata-quorum` read as kafka-features.sh and
/// kafka-metadata-quorum.sh do; refused feature changes exit 1 with the controller's reason.
#[test]
fn features_and_metadata_quorum_like_kafkas_tools() {
    let server = start(&[]);
    let b = server.bootstrap.as_str();
    // A new node starts where a new Kafka 4.4 node does (share.version 2, dead-letter
    // queues, aside), every level finalized in one bootstrap: one epoch on every line.
    let described = ok(&sluice(b, &["features", "describe"]));
    let (levels, epochs): (Vec<&str>, Vec<&str>) = described
        .lines()
        .map(|l| l.rsplit_once("\tEpoch: ").expect(l))
        .unzip();
    assert_eq!(
        levels,
        [
            "Feature: eligible.leader.replicas.version\tSupportedMinVersion: 0\tSupportedMaxVersion: 1\tFinalizedVersionLevel: 1",
            "Feature: group.version\tSupportedMinVersion: 0\tSupportedMaxVersion: 1\tFinalizedVersionLevel: 1",
            "Feature: kraft.version\tSupportedMinVersion: 0\tSupportedMaxVersion: 1\tFinalizedVersionLevel: 0",
            "Feature: metadata.version\tSupportedMinVersion: 3.3-IV3\tSupportedMaxVersion: 4.4-IV2\tFinalizedVersionLevel: 4.4-IV2",
            "Feature: share.version\tSupportedMinVersion: 0\tSupportedMaxVersion: 1\tFinalizedVersionLevel: 1",
            "Feature: streams.version\tSupportedMinVersion: 0\tSupportedMaxVersion: 1\tFinalizedVersionLevel: 1",
            "Feature: transaction.version\tSupportedMinVersion: 0\tSupportedMaxVersion: 2\tFinalizedVersionLevel: 2",
        ],
        "{described}"
    );
    assert!(
        epochs
            .iter()
            .all(|e| e == &epochs[0] && e.parse::<i64>().unwrap() >= 0),
        "{described}"
    );
    // Transactions v2 is turned off (clients keep to v1 from their next transaction) and on.
    ok(&sluice(
        b,
        &[
            "features",
            "downgrade",
            "--feature",
            "transaction.version=0",
        ],
    ));
    assert!(ok(&sluice(b, &["features", "describe"]))
        .contains("Feature: transaction.version\tSupportedMinVersion: 0\tSupportedMaxVersion: 2\tFinalizedVersionLevel: 0\t"));
    ok(&sluice(
        b,
        &["features", "upgrade", "--feature", "transaction.version=2"],
    ));
    let described = ok(&sluice(b, &["features", "describe"]));
    assert!(
        described.contains("Feature: transaction.version\tSupportedMinVersion: 0\tSupportedMaxVersion: 2\tFinalizedVersionLevel: 2\t"),
        "{described}"
    );
    assert_eq!(
        ok(&sluice(
            b,
            &["features", "upgrade", "--metadata", "4.4", "--dry-run"]
        )),
        "metadata.version can be upgraded to 33.\n"
    );
    let err = fails(
        &sluice(
            b,
            &["features", "downgrade", "--metadata", "3.8", "--unsafe"],
        ),
        1,
    );
    assert!(
        err.contains("Refusing to perform the requested downgrade"),
        "{err}"
    );
    // The consumer group protocol is turned off and on again (the wire test
    // `the_group_protocols_follow_their_features` shows what members see).
    ok(&sluice(
        b,
        &["features", "downgrade", "--feature", "group.version=0"],
    ));
    assert!(ok(&sluice(b, &["features", "describe"])).contains(
        "Feature: group.version\tSupportedMinVersion: 0\tSupportedMaxVersion: 1\tFinalizedVersionLevel: 0\t"
    ));
    ok(&sluice(
        b,
        &["features", "upgrade", "--feature", "group.version=1"],
    ));
    let err = fails(
        &sluice(
            b,
            &["features", "upgrade", "--feature", "unknown.version=1"],
        ),
        1,
    );
    assert!(err.contains("does not support the given feature"), "{err}");
    assert!(fails(&sluice(b, &["features", "upgrade"]), 2).contains("--metadata"));

    let status = ok(&sluice(b, &["metadata-quorum", "describe", "--status"]));
    let line = |key: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(key))
            .map(str::trim)
            .unwrap_or_else(|| panic!("no {key} in {status}"))
            .to_string()
    };
    assert_eq!(line("LeaderId:"), "0");
    assert_eq!(line("MaxFollowerLag:"), "0");
    assert_eq!(line("CurrentVoters:"), r#"[{"id": 0}]"#);
    assert_eq!(line("CurrentObservers:"), "[]");
    assert!(line("HighWatermark:").parse::<i64>().unwrap() > 0);
    let replication = ok(&sluice(
        b,
        &[
            "metadata-quorum",
            "describe",
            "--replication",
            "--human-readable",
        ],
    ));
    let rows: Vec<&str> = replication.lines().collect();
    assert_eq!(rows.len(), 2, "{replication}");
    assert!(
        rows[1].starts_with("0\t") && rows[1].ends_with("ms ago\tLeader"),
        "{replication}"
    );
    fails(&sluice(b, &["metadata-quorum", "describe"]), 2);
}

/// `sluice storage format --release-version / --feature`, as kafka-storage.sh's: the
/// cluster starts at those levels (the first active controller finalizes them), and they
/// survive a restart; unknown features and levels out of range are one-line usage errors.
#[test]
fn storage_format_sets_the_features_the_cluster_starts_with() {
    let cluster_id = "MkU3OEVBNTcwNTJENDM2Qg";
    let format = |args: &[&str]| {
        let dir = tempfile::tempdir().unwrap();
        let mut full = vec![
            "storage".to_string(),
            "format".into(),
            "--override".into(),
            format!("log.dirs={}", dir.path().display()),
            "--cluster-id".into(),
            cluster_id.into(),
        ];
        full.extend(args.iter().map(|a| a.to_string()));
        let args: Vec<&str> = full.iter().map(String::as_str).collect();
        sluice("", &args)
    };
    for (args, why) in [
        (&["--feature", "nope=1"][..], "unknown feature nope"),
        (&["--feature", "transaction.version=9"], "between 0 and 2"),
        (&["--feature", "transaction.version"], "expected NAME=LEVEL"),
        (&["--feature", "kraft.version=1"], "--standalone"),
        (&["--release-version", "9.9"], "Unknown release version"),
        (
            &[
                "--release-version",
                "3.9",
                "--feature",
                "eligible.leader.replicas.version=1",
            ],
            "needs metadata.version 4.0-IV1 or later",
        ),
        (
            &[
                "--release-version",
                "3.8",
                "--feature",
                "metadata.version=3.9",
            ],
            "more than once",
        ),
    ] {
        let err = fails(&format(args), 2);
        assert!(err.contains(why), "{args:?}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "{err}");
    }
    let format_args = vec![
        "--cluster-id".to_string(),
        cluster_id.into(),
        "--release-version".into(),
        "3.8".into(),
        "--feature".into(),
        "transaction.version=2".into(),
    ];
    let mut nodes = TestServer::start_all_formatted(sluice_bin(), &[Vec::new()], &[format_args]);
    // Release 3.8 had none of the new group protocols.
    let expected = [
        "Feature: eligible.leader.replicas.version\tSupportedMinVersion: 0\tSupportedMaxVersion: 1\tFinalizedVersionLevel: 0\t",
        "Feature: group.version\tSupportedMinVersion: 0\tSupportedMaxVersion: 1\tFinalizedVersionLevel: 0\t",
        "Feature: share.version\tSupportedMinVersion: 0\tSupportedMaxVersion: 1\tFinalizedVersionLevel: 0\t",
        "Feature: streams.version\tSupportedMinVersion: 0\tSupportedMaxVersion: 1\tFinalizedVersionLevel: 0\t",
        "Feature: metadata.version\tSupportedMinVersion: 3.3-IV3\tSupportedMaxVersion: 4.4-IV2\tFinalizedVersionLevel: 3.8-IV0\t",
        "Feature: transaction.version\tSupportedMinVersion: 0\tSupportedMaxVersion: 2\tFinalizedVersionLevel: 2\t",
    ];
    for round in ["started", "restarted"] {
        let described = ok(&sluice(&nodes[0].bootstrap, &["features", "describe"]));
        for line in expected {
            assert!(described.contains(line), "{round}: {described}");
        }
        if round == "started" {
            nodes[0].kill();
            nodes[0].restart();
        }
    }
    // ELR needs metadata.version 4.0-IV1 (Kafka's dependency): refused on its own, taken
    // with a release's levels, which upgrade the running cluster without a restart.
    let b = nodes[0].bootstrap.clone();
    let err = fails(
        &sluice(
            &b,
            &[
                "features",
                "upgrade",
                "--feature",
                "eligible.leader.replicas.version=1",
            ],
        ),
        1,
    );
    assert!(err.contains("needs metadata.version 4.0-IV1"), "{err}");
    ok(&sluice(
        &b,
        &["features", "upgrade", "--release-version", "4.4"],
    ));
    let described = ok(&sluice(&b, &["features", "describe"]));
    for line in [
        "Feature: eligible.leader.replicas.version\tSupportedMinVersion: 0\tSupportedMaxVersion: 1\tFinalizedVersionLevel: 1\t",
        "Feature: group.version\tSupportedMinVersion: 0\tSupportedMaxVersion: 1\tFinalizedVersionLevel: 1\t",
        "Feature: share.version\tSupportedMinVersion: 0\tSupportedMaxVersion: 1\tFinalizedVersionLevel: 1\t",
        "Feature: streams.version\tSupportedMinVersion: 0\tSupportedMaxVersion: 1\tFinalizedVersionLevel: 1\t",
        "Feature: metadata.version\tSupportedMinVersion: 3.3-IV3\tSupportedMaxVersion: 4.4-IV2\tFinalizedVersionLevel: 4.4-IV2\t",
        "Feature: transaction.version\tSupportedMinVersion: 0\tSupportedMaxVersion: 2\tFinalizedVersionLevel: 2\t",
    ] {
        assert!(described.contains(line), "upgraded: {described}");
    }
    // The upgraded cluster still serves what it held.
    ok(&sluice(
        &b,
        &[
            "topics",
            "--create",
            "--topic",
            "after-upgrade",
            "--partitions",
            "1",
        ],
    ));
}

/// `sluice share-consume` (kafka-console-share-consumer.sh): prints and accepts what it
/// reads as a share group member; records fetched beyond --max-messages go back at once for
/// the next member; --release hands printed ones back too; wrong flags exit 2.
#[test]
fn share_consume_prints_acknowledges_and_releases_the_rest() {
    let server = start(&[]);
    let b = server.bootstrap.as_str();
    ok(&sluice(
        b,
        &["topics", "--create", "--topic", "jobs", "--partitions", "1"],
    ));
    // Share groups start at the latest offset unless told otherwise.
    ok(&sluice(
        b,
        &[
            "configs",
            "--alter",
            "--entity-type",
            "groups",
            "--entity-name",
            "w",
            "--add-config",
            "share.auto.offset.reset=earliest",
        ],
    ));
    let lines: String = (0..10).map(|i| format!("job-{i}\n")).collect();
    ok(&produce_lines(b, &["produce", "--topic", "jobs"], &lines));
    let share = |extra: &[&str]| {
        let mut args = vec!["share-consume", "--topic", "jobs", "--group", "w"];
        args.extend_from_slice(extra);
        sluice(b, &args)
    };
    let out = share(&["--max-messages", "4", "--property", "print.offset=true"]);
    let printed = ok(&out);
    assert_eq!(
        printed.lines().collect::<Vec<_>>(),
        [
            "Offset:0\tjob-0",
            "Offset:1\tjob-1",
            "Offset:2\tjob-2",
            "Offset:3\tjob-3"
        ]
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("Processed a total of 4 messages"));
    // The six fetched but not printed come back; --release gives two of them back again.
    let out = share(&["--max-messages", "2", "--release"]);
    assert_eq!(ok(&out).lines().collect::<Vec<_>>(), ["job-4", "job-5"]);
    let out = share(&["--timeout-ms", "1500"]);
    let rest: Vec<String> = ok(&out).lines().map(String::from).collect();
    assert_eq!(
        rest,
        (4..10).map(|i| format!("job-{i}")).collect::<Vec<_>>()
    );
    let described = ok(&sluice(b, &["share-groups", "--describe", "--group", "w"]));
    assert!(
        described
            .lines()
            .any(|l| l.split_whitespace().collect::<Vec<_>>() == ["w", "jobs", "0", "10", "0"]),
        "{described}"
    );
    let err = fails(&share(&["--release", "--reject"]), 2);
    assert!(err.contains("cannot be used with"), "{err}");
}
