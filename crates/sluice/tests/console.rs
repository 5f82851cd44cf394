//! The web console (`/` on the admin HTTP listener) in a real browser: headless Chromium
//! driven by Selenium (`interop/console/e2e.py`; scripts/test installs chromium,
//! chromium-driver and selenium), with confluent-kafka as the real client beside it. Each
//! scenario saves a screenshot of every page it checks under
//! `target/tmp/console-screenshots/<scenario>/`.

mod common;

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use common::*;

fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Run one scenario of the browser tests against a node.
fn browser(scenario: &str, server: &TestServer, bootstrap: &str) {
    let admin = server.admin().expect("the admin HTTP listener's address");
    let shots = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join("console-screenshots")
        .join(scenario);
    let _ = std::fs::remove_dir_all(&shots);
    let out = Command::new("python3")
        .arg(repo_root().join("interop/console/e2e.py"))
        .arg(scenario)
        .arg(format!("http://{admin}"))
        .arg(bootstrap)
        .arg(&shots)
        .args(server.registry())
        .output()
        .unwrap_or_else(|e| panic!("python3: {e}; run scripts/test, which installs it"));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "console {scenario} failed ({}):\n{stdout}\n{}\nscreenshots in {}",
        out.status,
        String::from_utf8_lossy(&out.stderr),
        shots.display()
    );
    assert!(
        stdout.contains(&format!("console {scenario} OK")),
        "{stdout}"
    );
    println!("{stdout}");
}

/// Create a topic, produce from the page, browse it (JSON, hex, a filter), a consumer group
/// from confluent-kafka with its lag, stopped, its offsets previewed and reset (the lag
/// follows), a config Kafka refuses shown inline, deletion with a typed confirmation.
#[test]
fn a_topic_and_a_group_are_operated_from_the_browser() {
    let server = start(&[]);
    browser("flow", &server, &server.bootstrap);
}

/// `admin.http.console.read.only=true`: pages show no form that changes anything, and a
/// POST that would is refused (403) and changes nothing.
#[test]
fn a_read_only_console_changes_nothing() {
    let server = start(&["admin.http.console.read.only=true"]);
    browser("readonly", &server, &server.bootstrap);
}

/// A SASL cluster: the console asks who signs in (a wrong password is refused), acts as
/// that user (ACLs filter the topics and groups listed and refuse what the user may not
/// do), signs out, and refuses a form without the session's CSRF token; a SCRAM user made
/// on the security page signs in with SCRAM-SHA-512.
#[test]
fn on_a_sasl_cluster_the_console_signs_in_and_acls_apply() {
    let jaas = "listener.name.sasl_plaintext.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required user_alice=\"alice-pw\" user_admin=\"admin-pw\";";
    let server = start(&[
        "listeners=PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
        "sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-512",
        jaas,
        "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users=User:admin;User:ANONYMOUS",
    ]);
    browser("sasl", &server, &server.bootstrap);
}

/// Without a browser: the pages and the stylesheet, a cross-site POST without a token
/// refused, the console turned off with `admin.http.console.enable=false`, and one that
/// cannot reach a listener saying why.
#[test]
fn the_console_is_served_guarded_and_can_be_turned_off() {
    let server = start(&[]);
    let admin = server.admin().expect("admin listener");
    let (status, page) = http_get(&admin, "/");
    assert_eq!(status, 200, "{page}");
    assert!(page.contains("<h1>Overview</h1>"), "{page}");
    let (status, css) = http_get(&admin, "/console.css");
    assert_eq!(status, 200);
    assert!(css.contains("--accent"));
    let (status, page) = http_get(&admin, "/topics/no-such-topic");
    assert_eq!(status, 404, "{page}");
    // A POST with no session and no token: refused, nothing created.
    let mut s = std::net::TcpStream::connect(&admin).unwrap();
    let body = "name=forged&partitions=1";
    std::io::Write::write_fmt(
        &mut s,
        format_args!(
            "POST /topics HTTP/1.1\r\nHost: {admin}\r\nOrigin: http://evil.example\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        ),
    )
    .unwrap();
    let mut raw = String::new();
    std::io::Read::read_to_string(&mut s, &mut raw).unwrap();
    assert!(raw.starts_with("HTTP/1.1 403"), "{raw}");
    let topics = sluice_tool("topics", &server.bootstrap, &["--list"]);
    assert!(!topics.contains("forged"), "{topics}");

    let off = start(&["admin.http.console.enable=false"]);
    let admin = off.admin().expect("admin listener");
    assert_eq!(http_get(&admin, "/").0, 404);
    assert_eq!(http_get(&admin, "/health").0, 200);

    // A console that cannot work says why on every page.
    let wrong = start(&["admin.http.console.listener=NOPE"]);
    let admin = wrong.admin().expect("admin listener");
    let (status, page) = http_get(&admin, "/topics");
    assert_eq!(status, 503, "{page}");
    assert!(
        page.contains("admin.http.console.listener NOPE is not a listener of this node"),
        "{page}"
    );
}

/// The overview row of broker `id`.
fn broker_row(page: &str, id: i32) -> Option<&str> {
    let start = page.find(&format!("href=\"/brokers/{id}\""))?;
    let row = &page[start..];
    Some(&row[..row.find("</tr>")?])
}

/// Three nodes: any node's console shows the whole cluster (every topic, every broker) and
/// charts the traffic of all three (each node's own samples, fetched from its admin
/// listener); a killed broker does not break the pages: it is shown fenced, and left out of
/// the chart with the reason.
#[test]
fn any_node_shows_the_whole_cluster_and_a_dead_broker() {
    let mut configs = sluice_testkit::combined_nodes(&[
        "broker.session.timeout.ms=4000",
        "broker.heartbeat.interval.ms=500",
    ]);
    // Fixed admin ports: a node finds the others' in their configs (port 0 is not there).
    for c in &mut configs {
        c.push(format!("admin.http.listener=127.0.0.1:{}", free_port()));
    }
    let mut nodes = TestServer::start_all(sluice_bin(), &configs);
    create_topic(&nodes[0].bootstrap, "spread", 6, &[]);
    let p = producer(&nodes[1].bootstrap, &[]);
    let records: Vec<_> = (0..600)
        .map(|i| (format!("k{i}").into_bytes(), vec![b'v'; 200], None))
        .collect();
    produce_all(&p, "spread", &records);
    let admins: Vec<String> = nodes.iter().map(|n| n.admin().expect("admin")).collect();

    for a in &admins {
        let (status, page) = http_get(a, "/topics");
        assert_eq!(status, 200, "{page}");
        assert!(page.contains(">spread</a>"), "{page}");
    }
    // Every node samples every 10 s: the chart is there once each has two samples.
    let deadline = Instant::now() + Duration::from_secs(60);
    let page = loop {
        let (_, page) = http_get(&admins[0], "/");
        if page.contains("(3 brokers: produce in, fetch out)")
            && page.contains("polyline class=\"in\"")
        {
            break page;
        }
        assert!(Instant::now() < deadline, "no 3-broker chart:\n{page}");
        std::thread::sleep(Duration::from_millis(500));
    };
    for id in 1..=3 {
        let row = broker_row(&page, id).unwrap_or_else(|| panic!("broker {id} row:\n{page}"));
        assert!(row.contains("alive"), "{row}");
    }

    nodes[2].kill();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let (status, page) = http_get(&admins[0], "/");
        assert_eq!(status, 200, "{page}");
        if broker_row(&page, 3).is_some_and(|r| r.contains("fenced"))
            && page.contains("(2 brokers: produce in, fetch out)")
        {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "broker 3 never shown fenced:\n{page}"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
}
