//! The admin HTTP listener: `/metrics` parsed by the Prometheus client library's own text
//! parser, with values that move with load; `/health`, `/ready`; the JSON API.

mod common;

use std::collections::HashMap;
use std::io::Write;
use std::process::{Command, Stdio};
use std::time::Duration;

use common::*;

/// Parse a scrape with `prometheus_client.parser` (Python): sample name + sorted labels ->
/// value. Fails the test if the text does not parse.
fn parse(text: &str) -> HashMap<String, f64> {
    let script = r#"
import sys
from prometheus_client.parser import text_string_to_metric_families
for family in text_string_to_metric_families(sys.stdin.read()):
    for s in family.samples:
        labels = ",".join(f"{k}={v}" for k, v in sorted(s.labels.items()))
        print(f"{s.name}{{{labels}}} {s.value}")
"#;
    let mut child = Command::new("python3")
        .args(["-c", script])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("python3 (scripts/test installs prometheus-client)");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "the Prometheus parser rejected the scrape: {}\n{text}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            let (k, v) = l.rsplit_once(' ')?;
            Some((k.to_string(), v.parse().ok()?))
        })
        .collect()
}

fn value(m: &HashMap<String, f64>, key: &str) -> f64 {
    m.get(key).copied().unwrap_or(0.0)
}

#[test]
fn metrics_health_ready_and_json_api() {
    let server = start(&[]);
    let admin = server.admin().expect("the admin listener's address");
    assert_eq!(http_get(&admin, "/health"), (200, "ok\n".to_string()));
    // Ready once this broker is registered and unfenced; that happens right after start.
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while http_get(&admin, "/ready").0 != 200 {
        assert!(std::time::Instant::now() < deadline, "never ready");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(http_get(&admin, "/nope").0, 404);

    let before = parse(&http_get(&admin, "/metrics").1);
    create_topic(&server.bootstrap, "metered", 2, &[]);
    let p = producer(&server.bootstrap, &[("acks", "all")]);
    let records: Vec<(Vec<u8>, Vec<u8>, Option<i64>)> = (0..200)
        .map(|i| (format!("k{i}").into_bytes(), vec![b'm'; 100], None))
        .collect();
    produce_all(&p, "metered", &records);
    let got = consume_all(&server.bootstrap, "metered", 2, 200);
    assert_eq!(got.len(), 200);

    let (status, text) = http_get(&admin, "/metrics");
    assert_eq!(status, 200);
    let after = parse(&text);
    let bytes_in = value(&after, "sluice_topic_bytes_in_total{topic=metered}");
    let messages_in = value(&after, "sluice_topic_messages_in_total{topic=metered}");
    let bytes_out = value(&after, "sluice_topic_bytes_out_total{topic=metered}");
    assert_eq!(messages_in, 200.0, "{text}");
    assert!(bytes_in >= 200.0 * 100.0, "bytes in {bytes_in}");
    assert!(bytes_out >= 200.0 * 100.0, "bytes out {bytes_out}");
    let produces = |m: &HashMap<String, f64>| value(m, "sluice_requests_total{api=Produce}");
    assert!(
        produces(&after) > produces(&before),
        "Produce requests counted"
    );
    assert!(
        value(&after, "sluice_request_duration_seconds_count{api=Fetch}") > 0.0,
        "Fetch latency histogram"
    );
    assert!(after.contains_key("sluice_request_duration_seconds_bucket{api=Produce,le=0.005}"));
    assert_eq!(value(&after, "sluice_under_replicated_partitions{}"), 0.0);
    assert_eq!(value(&after, "sluice_offline_partitions{}"), 0.0);
    assert_eq!(value(&after, "sluice_active_controller{}"), 1.0);
    assert!(
        after.contains_key("sluice_purgatory_size{kind=fetch}"),
        "{text}"
    );

    // Group lag: a group commits half of what is there.
    let c = consumer(&server.bootstrap, &[("group.id", "lagging")]);
    let mut tpl = rdkafka::TopicPartitionList::new();
    tpl.add_partition_offset("metered", 0, rdkafka::Offset::Offset(0))
        .unwrap();
    rdkafka::consumer::Consumer::commit(&c, &tpl, rdkafka::consumer::CommitMode::Sync).unwrap();
    let lagged = parse(&http_get(&admin, "/metrics").1);
    let lag = value(
        &lagged,
        "sluice_consumer_group_lag{group=lagging,partition=0,topic=metered}",
    );
    assert!(lag > 0.0, "lag of partition 0: {lag}");

    let (status, cluster) = http_get(&admin, "/api/cluster");
    assert_eq!(status, 200);
    assert!(cluster.contains("\"live_brokers\":1"), "{cluster}");
    let (_, topics) = http_get(&admin, "/api/topics");
    assert!(topics.contains("\"name\":\"metered\""), "{topics}");
    let (_, brokers) = http_get(&admin, "/api/brokers");
    assert!(brokers.contains("\"fenced\":false"), "{brokers}");
    let (_, groups) = http_get(&admin, "/api/groups");
    assert!(groups.contains("\"group\":\"lagging\""), "{groups}");
}

#[test]
fn json_logs_are_one_object_per_line() {
    let dir = tempfile::tempdir().unwrap();
    let mut child = Command::new(sluice_bin())
        .args(["server", "--log-format", "json"])
        .args(["--override", "listeners=PLAINTEXT://127.0.0.1:0"])
        .args(["--override", "admin.http.listener="])
        .args(["--override", "schema.registry.listener=none"])
        .args(["--override", &format!("log.dirs={}", dir.path().display())])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let line = std::io::BufRead::lines(std::io::BufReader::new(stdout))
        .map_while(Result::ok)
        .find(|l| l.contains("listening on"))
        .expect("a listening line");
    let _ = Command::new("kill").arg(child.id().to_string()).status();
    let _ = child.wait();
    let check = Command::new("python3")
        .args([
            "-c",
            "import json,sys; d=json.loads(sys.argv[1]); assert d['level']=='INFO' and 'listening on' in d['fields']['message'], d",
            &line,
        ])
        .status()
        .unwrap();
    assert!(check.success(), "not a JSON log line: {line}");
    assert!(
        !line.contains("admin http"),
        "admin listener disabled: {line}"
    );
}
