//! The built-in schema registry (Confluent Schema Registry's REST API on
//! `schema.registry.listener`), as its users reach it: confluent-kafka-python's registry
//! client and serializers on one node, and raw HTTP against a three-node cluster whose
//! registry leader is killed mid-registration.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use common::*;
use serde_json::{json, Value};
use sluice_testkit::TestServer;

fn repo_root() -> std::path::PathBuf {
    std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn registry_addr(node: &TestServer) -> String {
    node.registry()
        .expect("the node reports its schema registry listener")
        .trim_start_matches("http://")
        .to_string()
}

#[test]
fn python_clients_round_trip_avro_and_json_through_the_built_in_registry() {
    let server = TestServer::start(sluice_bin(), &[]);
    let url = server.registry().expect("registry listener");
    let script = repo_root().join("interop/python/schema_registry_roundtrip.py");
    let out = Command::new("python3")
        .arg(script)
        .arg(&server.bootstrap)
        .arg(&url)
        .output()
        .expect("python3 (run scripts/test, which installs the clients)");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("schema registry OK"),
        "{stdout}\n{}\nnode log:\n{}",
        String::from_utf8_lossy(&out.stderr),
        server.log()
    );
}

#[test]
fn franz_go_schema_registry_client_works_against_it() {
    let server = TestServer::start(sluice_bin(), &[]);
    let url = server.registry().expect("registry listener");
    let out = Command::new("go")
        .args(["run", "."])
        .arg(&url)
        .current_dir(repo_root().join("interop/go/sr"))
        .output()
        .expect("go (run scripts/test, which installs it)");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("franz-go sr OK"),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Run `sluice schemas --registry <url> <args>`: (exit code, stdout, stderr).
fn schemas_cli(url: &str, args: &[&str]) -> (i32, String, String) {
    let out = Command::new(sluice_bin())
        .args(["schemas", "--registry", url])
        .args(args)
        .output()
        .expect("run sluice");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn the_schemas_tool_registers_checks_shows_and_deletes() {
    let server = TestServer::start(sluice_bin(), &[]);
    let url = server.registry().expect("registry listener");
    let dir = tempfile::tempdir().unwrap();
    let file = |name: &str, text: &str| {
        let p = dir.path().join(name);
        std::fs::write(&p, text).unwrap();
        p.to_str().unwrap().to_string()
    };
    let v1 = file("v1.avsc", &avro_record("Tool"));
    let v2 = file(
        "v2.avsc",
        &json!({"type": "record", "name": "Tool", "fields": [
            {"name": "f", "type": "long"}, {"name": "g", "type": "int", "default": 0}]})
        .to_string(),
    );
    let bad = file(
        "bad.avsc",
        &json!({"type": "record", "name": "Tool", "fields": [{"name": "f", "type": "string"}]})
            .to_string(),
    );
    let proto = file(
        "order.proto",
        "syntax = \"proto3\";\nmessage Order { int64 id = 1; }\n",
    );

    let (code, out, err) = schemas_cli(
        &url,
        &["--register", "--subject", "tool-value", "--file", &v1],
    );
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("Registered tool-value version 1 with id"),
        "{out}"
    );
    let (code, out, _) = schemas_cli(&url, &["--check", "--subject", "tool-value", "--file", &v2]);
    assert_eq!((code, out.trim()), (0, "Compatible with tool-value"));
    let (code, _, err) = schemas_cli(
        &url,
        &["--check", "--subject", "tool-value", "--file", &bad],
    );
    assert_eq!(code, 1, "{err}");
    assert!(
        err.starts_with("sluice: incompatible with tool-value"),
        "{err}"
    );
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    let (code, _, err) = schemas_cli(
        &url,
        &["--register", "--subject", "tool-value", "--file", &bad],
    );
    assert_eq!(code, 1);
    assert!(err.contains("error code 409"), "{err}");
    let (code, out, _) = schemas_cli(
        &url,
        &["--register", "--subject", "order-value", "--file", &proto],
    );
    assert_eq!(code, 0);
    assert!(out.contains("Registered order-value version 1"), "{out}");
    let (_, out, _) = schemas_cli(&url, &["--list"]);
    assert_eq!(
        out.lines().collect::<Vec<_>>(),
        ["order-value", "tool-value"]
    );
    let (code, out, _) = schemas_cli(&url, &["--describe", "--subject", "tool-value"]);
    assert_eq!(code, 0);
    assert!(
        out.starts_with("Subject: tool-value\tVersion: 1\tId: "),
        "{out}"
    );
    assert!(out.contains("\"name\": \"Tool\""), "{out}");
    let (code, out, _) = schemas_cli(
        &url,
        &["--compatibility", "full", "--subject", "tool-value"],
    );
    assert_eq!(
        (code, out.trim()),
        (0, "Compatibility of tool-value is now FULL")
    );
    let (code, _, _) = schemas_cli(
        &url,
        &["--delete", "--subject", "tool-value", "--permanent"],
    );
    assert_eq!(code, 1, "a permanent delete needs a soft delete first");
    let (code, out, _) = schemas_cli(&url, &["--delete", "--subject", "tool-value"]);
    assert_eq!(
        (code, out.trim()),
        (0, "Deleted (soft) tool-value version(s) [1]")
    );
    let (code, _, _) = schemas_cli(
        &url,
        &["--delete", "--subject", "tool-value", "--permanent"],
    );
    assert_eq!(code, 0);
    let (_, out, _) = schemas_cli(&url, &["--list", "--deleted"]);
    assert_eq!(out.trim(), "order-value");

    // Wrong arguments exit 2, an unreachable registry 1, each with one line.
    for (args, expect) in [
        (vec!["--register", "--file", v1.as_str()], 2),
        (vec!["--register", "--subject", "s"], 2),
        (vec!["--list", "--delete"], 2),
        (
            vec![
                "--register",
                "--subject",
                "s",
                "--file",
                &v1,
                "--type",
                "XML",
            ],
            2,
        ),
        (
            vec!["--register", "--subject", "s", "--file", "/no/such/file"],
            1,
        ),
    ] {
        let (code, _, err) = schemas_cli(&url, &args);
        assert_eq!(code, expect, "{args:?}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "{args:?}: {err}");
    }
    let (code, _, err) = schemas_cli("http://127.0.0.1:1", &["--list"]);
    assert_eq!(code, 1);
    assert!(err.contains("cannot reach the schema registry"), "{err}");
}

#[test]
fn basic_auth_takes_sasl_users_and_topic_acls_govern_subjects() {
    let jaas = "listener.name.sasl_plaintext.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required user_admin=\"admin-pw\" user_bob=\"bob-pw\";";
    let server = TestServer::start(
        sluice_bin(),
        &[
            "listeners=PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
            "sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-512",
            jaas,
            "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "super.users=User:admin;User:ANONYMOUS",
        ],
    );
    let admin = |tool: &str, args: &[&str]| sluice_tool(tool, &server.bootstrap, args);
    admin("users", &["--add", "alice", "--password", "alice-pw"]);
    admin(
        "acls",
        &[
            "--add",
            "--allow-principal",
            "User:alice",
            "--producer",
            "--topic",
            "orders",
        ],
    );
    let addr = registry_addr(&server);
    let call = |who: Option<(&str, &str)>, method: &str, path: &str, body: &str| {
        let header = who.map_or_else(String::new, |(u, p)| {
            let token = base64(&format!("{u}:{p}"));
            format!("Authorization: Basic {token}\r\n")
        });
        let (status, body) = http_request_with(&addr, method, path, body, &header);
        let v: Value = serde_json::from_str(&body).unwrap_or(Value::String(body));
        (status, v)
    };
    let alice = Some(("alice", "alice-pw"));
    let root = Some(("admin", "admin-pw"));
    let orders = json!({"schema": avro_record("Order")}).to_string();
    let payments = json!({"schema": avro_record("Payment")}).to_string();

    let (status, v) = call(None, "GET", "/subjects", "");
    assert_eq!((status, v["error_code"].as_i64()), (401, Some(401)), "{v}");
    let (status, _) = call(Some(("alice", "wrong")), "GET", "/subjects", "");
    assert_eq!(status, 401);
    let (status, _) = call(Some(("nobody", "alice-pw")), "GET", "/subjects", "");
    assert_eq!(status, 401);

    // alice (SCRAM) may write orders' subjects only; admin (PLAIN, a super user) anything.
    let (status, v) = call(alice, "POST", "/subjects/orders-value/versions", &orders);
    assert_eq!(status, 200, "{v}");
    let (status, v) = call(
        alice,
        "POST",
        "/subjects/payments-value/versions",
        &payments,
    );
    assert_eq!(
        (status, v["error_code"].as_i64()),
        (403, Some(40301)),
        "{v}"
    );
    let (status, v) = call(root, "POST", "/subjects/payments-value/versions", &payments);
    assert_eq!(status, 200, "{v}");
    let payments_id = v["id"].as_i64().unwrap();
    let (_, v) = call(alice, "GET", "/subjects", "");
    assert_eq!(v, json!(["orders-value"]));
    let (_, v) = call(root, "GET", "/subjects", "");
    assert_eq!(v, json!(["orders-value", "payments-value"]));
    let (status, v) = call(alice, "GET", &format!("/schemas/ids/{payments_id}"), "");
    assert_eq!(
        (status, v["error_code"].as_i64()),
        (404, Some(40403)),
        "{v}"
    );
    let (status, _) = call(alice, "GET", "/subjects/payments-value/versions/latest", "");
    assert_eq!(status, 403);
    // Deleting and configuring need ALTER, which --producer does not give.
    let (status, _) = call(alice, "DELETE", "/subjects/orders-value", "");
    assert_eq!(status, 403);
    let (status, _) = call(alice, "PUT", "/config", r#"{"compatibility":"NONE"}"#);
    assert_eq!(status, 403);
    let (status, v) = call(alice, "GET", "/config", "");
    assert_eq!(
        (status, &v["compatibilityLevel"]),
        (200, &json!("BACKWARD"))
    );
    // bob authenticates but no ACL names him: he sees nothing.
    let (status, v) = call(Some(("bob", "bob-pw")), "GET", "/subjects", "");
    assert_eq!((status, v), (200, json!([])));
}

/// Standard padded base64 (HTTP basic credentials).
fn base64(text: &str) -> String {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in text.as_bytes().chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[test]
fn an_https_listener_serves_the_registry_over_tls_and_forwards_over_it() {
    let tls = repo_root().join("crates/sluice/tests/fixtures/tls");
    let keystore = format!(
        "listener.name.schema_registry.ssl.keystore.location={}",
        tls.join("server.pem").display()
    );
    let truststore = format!(
        "listener.name.schema_registry.ssl.truststore.location={}",
        tls.join("ca.pem").display()
    );
    let nodes = TestServer::start_all(
        sluice_bin(),
        &sluice_testkit::combined_nodes(&[
            "schema.registry.listener=https://127.0.0.1:0",
            &keystore,
            &truststore,
        ]),
    );
    let urls: Vec<String> = nodes
        .iter()
        .map(|n| n.registry().expect("registry listener"))
        .collect();
    assert!(
        urls.iter().all(|u| u.starts_with("https://127.0.0.1:")),
        "{urls:?}"
    );
    // Through every node: two of them forward to the leader, over TLS.
    let script = r#"
import sys
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
ca, urls = sys.argv[1], sys.argv[2:]
ids = set()
for i, url in enumerate(urls):
    client = SchemaRegistryClient({"url": url, "ssl.ca.location": ca})
    sid = client.register_schema("tls-value", Schema('{"type":"record","name":"T","fields":[]}', "AVRO"))
    ids.add(sid)
    assert client.get_schema(sid).schema_type == "AVRO"
    assert client.get_subjects() == ["tls-value"]
assert len(ids) == 1, ids
print("tls OK")
"#;
    let out = Command::new("python3")
        .args(["-c", script])
        .arg(tls.join("ca.pem"))
        .args(&urls)
        .output()
        .expect("python3");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("tls OK"),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Plain HTTP to the TLS listener gets no answer.
    let addr = urls[0].trim_start_matches("https://");
    let answered = std::panic::catch_unwind(|| http_get(addr, "/subjects"));
    assert!(
        answered.map_or(true, |(status, _)| status == 0),
        "plain HTTP was served"
    );
}

#[test]
fn value_schema_validation_refuses_records_without_a_registered_id_on_every_node() {
    let nodes = TestServer::start_all(sluice_bin(), &sluice_testkit::combined_nodes(&[]));
    sluice_tool(
        "topics",
        &nodes[0].bootstrap,
        &[
            "--create",
            "--topic",
            "readings",
            "--partitions",
            "6",
            "--replication-factor",
            "1",
            "--config",
            "confluent.value.schema.validation=true",
        ],
    );
    let url = nodes[0].registry().expect("registry listener");
    let out = Command::new("python3")
        .arg(repo_root().join("interop/python/schema_validation.py"))
        .args([nodes[0].bootstrap.as_str(), &url, "readings", "6"])
        .output()
        .expect("python3");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("schema validation OK"),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The partitions are led by every node, so every node checked ids (two of them by
    // asking the registry's leader).
    let described = sluice_tool(
        "topics",
        &nodes[0].bootstrap,
        &["--describe", "--topic", "readings"],
    );
    let leaders: BTreeSet<&str> = described
        .lines()
        .filter_map(|l| l.split("Leader: ").nth(1)?.split_whitespace().next())
        .collect();
    assert_eq!(leaders.len(), 3, "{described}");
}

fn avro_record(name: &str) -> String {
    json!({"type": "record", "name": name, "fields": [{"name": "f", "type": "long"}]}).to_string()
}

/// Register `schema` under `subject` through `addr`, retrying what a client retries (5xx
/// while the registry's leader moves) for up to a minute: the id, or None on a 4xx.
fn register(addr: &str, subject: &str, schema: &str) -> Option<i64> {
    let body = json!({"schema": schema}).to_string();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let (status, answer) = std::panic::catch_unwind(|| {
            http_request(
                addr,
                "POST",
                &format!("/subjects/{subject}/versions"),
                &body,
            )
        })
        .unwrap_or((0, String::new()));
        match status {
            200 => {
                let v: Value = serde_json::from_str(&answer).expect("JSON answer");
                return v["id"].as_i64();
            }
            400..=499 => panic!("{subject}: {status} {answer}"),
            _ if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(100)),
            _ => panic!("{subject}: no answer within a minute: {status} {answer}"),
        }
    }
}

fn schemas_leader(bootstrap: &str) -> i32 {
    let out = sluice_tool("topics", bootstrap, &["--describe", "--topic", "_schemas"]);
    out.split("Leader: ")
        .nth(1)
        .and_then(|r| r.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no leader in {out}"))
}

#[test]
fn three_nodes_give_distinct_ids_and_lose_nothing_when_the_registry_leader_is_killed() {
    let mut nodes = TestServer::start_all(sluice_bin(), &sluice_testkit::combined_nodes(&[]));
    let addrs: Vec<String> = nodes.iter().map(registry_addr).collect();

    // Every node at once: distinct schemas get distinct ids, one schema sent through every
    // node gets one id.
    let registered: Vec<Vec<(String, String, i64)>> = std::thread::scope(|s| {
        let handles: Vec<_> = addrs
            .iter()
            .enumerate()
            .map(|(n, addr)| {
                s.spawn(move || {
                    let mut out = Vec::new();
                    for j in 0..15 {
                        let (subject, schema) =
                            (format!("n{n}-{j}"), avro_record(&format!("R{n}_{j}")));
                        let id = register(addr, &subject, &schema).expect("registered");
                        out.push((subject, schema, id));
                        let shared = avro_record(&format!("Shared{j}"));
                        let id =
                            register(addr, &format!("shared-{j}"), &shared).expect("registered");
                        out.push((format!("shared-{j}"), shared, id));
                    }
                    out
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let mut by_schema: BTreeMap<String, BTreeSet<i64>> = BTreeMap::new();
    for (_, schema, id) in registered.iter().flatten() {
        by_schema.entry(schema.clone()).or_default().insert(*id);
    }
    assert_eq!(by_schema.len(), 45 + 15);
    for (schema, ids) in &by_schema {
        assert_eq!(ids.len(), 1, "{schema} got ids {ids:?}");
    }
    let distinct: BTreeSet<i64> = by_schema.values().flatten().copied().collect();
    assert_eq!(
        distinct.len(),
        by_schema.len(),
        "an id was given to two schemas"
    );

    // Kill -9 the registry's leader while the other two nodes register.
    let leader = schemas_leader(&nodes[0].bootstrap);
    let killed = usize::try_from(leader - 1).expect("node ids start at 1");
    let survivors: Vec<String> = (0..3)
        .filter(|i| *i != killed)
        .map(|i| addrs[i].clone())
        .collect();
    let killed_flag = AtomicBool::new(false);
    // Each registering thread says when it has five answers: the kill comes while they run.
    let (started_tx, started) = std::sync::mpsc::channel::<()>();
    let acknowledged: Vec<(String, String, i64)> = std::thread::scope(|s| {
        let handles: Vec<_> = survivors
            .iter()
            .enumerate()
            .map(|(n, addr)| {
                let killed_flag = &killed_flag;
                let started_tx = started_tx.clone();
                s.spawn(move || {
                    // Keep registering until ten registrations have been answered after
                    // the kill (so some were in flight when it happened).
                    let mut out = Vec::new();
                    let mut after_kill = 0;
                    for j in 0.. {
                        let was_killed = killed_flag.load(Ordering::SeqCst);
                        let subject = format!("during-{n}-{j}");
                        let schema = avro_record(&format!("D{n}_{j}"));
                        let id = register(addr, &subject, &schema).expect("registered");
                        out.push((subject, schema, id));
                        if out.len() == 5 {
                            let _ = started_tx.send(());
                        }
                        if was_killed {
                            after_kill += 1;
                            if after_kill == 10 {
                                break;
                            }
                        }
                    }
                    out
                })
            })
            .collect();
        for _ in 0..survivors.len() {
            started
                .recv_timeout(Duration::from_secs(60))
                .expect("registrations answered before the kill");
        }
        nodes[killed].kill();
        killed_flag.store(true, Ordering::SeqCst);
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap())
            .collect()
    });
    let new_leader = schemas_leader(&nodes[(killed + 1) % 3].bootstrap);
    assert_ne!(
        new_leader, leader,
        "another node leads _schemas after the kill"
    );

    // Every acknowledged registration is there, through every live node, each id once.
    let mut all = registered.into_iter().flatten().collect::<Vec<_>>();
    all.extend(acknowledged);
    nodes[killed].restart();
    let addrs: Vec<String> = nodes.iter().map(registry_addr).collect();
    let mut ids = BTreeMap::new();
    for (subject, schema, id) in &all {
        if let Some(other) = ids.insert(*id, schema.clone()) {
            assert_eq!(&other, schema, "id {id} names two schemas");
        }
        for addr in &addrs {
            let (status, body) = http_get(addr, &format!("/subjects/{subject}/versions/latest"));
            assert_eq!(status, 200, "{subject} through {addr}: {body}");
            let v: Value = serde_json::from_str(&body).unwrap();
            assert_eq!(v["id"].as_i64(), Some(*id), "{subject}: {v}");
            let stored: Value = serde_json::from_str(v["schema"].as_str().unwrap()).unwrap();
            assert_eq!(stored, serde_json::from_str::<Value>(schema).unwrap());
        }
    }
}
