//! Clients other than librdkafka-through-Rust: Python confluent-kafka and kafka-python,
//! Debian's kcat (librdkafka 2.0), and the Java client 3.x and 4.x. They run as child
//! processes against a real node; `scripts/test` installs them first.

mod common;
#[path = "common/moto.rs"]
mod moto;
#[path = "common/wire.rs"]
mod wire;

use std::collections::{BTreeSet, HashMap};
use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use common::*;

fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Run a command to completion; panic with its output unless it succeeds.
fn must_succeed(cmd: &mut Command, what: &str) -> String {
    let out = cmd.output().unwrap_or_else(|e| {
        panic!("{what}: cannot run ({e}); run scripts/test, which installs it")
    });
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{what} failed ({}):\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

#[test]
fn python_confluent_kafka() {
    let server = start(&[]);
    let script = repo_root().join("interop/python/confluent_kafka_roundtrip.py");
    let out = must_succeed(
        Command::new("python3").arg(script).arg(&server.bootstrap),
        "confluent-kafka",
    );
    assert!(out.contains("confluent-kafka OK"));
}

#[test]
fn python_kafka_python() {
    let server = start(&[]);
    let script = repo_root().join("interop/python/kafka_python_roundtrip.py");
    let out = must_succeed(
        Command::new("python3").arg(script).arg(&server.bootstrap),
        "kafka-python",
    );
    assert!(out.contains("kafka-python OK"));
}

#[test]
fn kcat_produces_consumes_and_queries_offsets() {
    let server = start(&[]);
    let b = server.bootstrap.as_str();
    let version = must_succeed(Command::new("kcat").arg("-V"), "kcat -V");
    println!("{version}");
    let mut child = Command::new("kcat")
        .args(["-b", b, "-P", "-t", "kc", "-K", ":", "-z", "snappy"])
        .stdin(Stdio::piped())
        .spawn()
        .expect("kcat installed (scripts/test installs it)");
    {
        let stdin = child.stdin.as_mut().unwrap();
        for i in 0..1000 {
            writeln!(stdin, "key{i}:value{i}").unwrap();
        }
    }
    assert!(child.wait().unwrap().success());
    let out = must_succeed(
        Command::new("kcat").args([
            "-b",
            b,
            "-C",
            "-t",
            "kc",
            "-o",
            "beginning",
            "-e",
            "-f",
            "%k=%s %o\n",
        ]),
        "kcat consume",
    );
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 1000, "{out}");
    assert_eq!(lines[0], "key0=value0 0");
    assert_eq!(lines[999], "key999=value999 999");
    let meta = must_succeed(
        Command::new("kcat").args(["-b", b, "-L", "-t", "kc"]),
        "kcat -L",
    );
    assert!(meta.contains("topic \"kc\" with 1 partitions"), "{meta}");
    // Offsets by timestamp: far past -> 0, far future -> end (-1).
    let q = must_succeed(
        Command::new("kcat").args(["-b", b, "-Q", "-t", "kc:0:1"]),
        "kcat -Q",
    );
    assert!(q.contains("offset 0"), "{q}");
}

/// Build `interop/java` for a client version, once per test process (tests that use it run
/// in parallel and share its output directory); its classpath, relative to that directory.
fn java_build(profile: &str, version: &str) -> String {
    static BUILT: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());
    let mut built = BUILT.lock().unwrap_or_else(|e| e.into_inner());
    if !built.iter().any(|v| v == version) {
        must_succeed(
            Command::new("mvn")
                .args(["-q", "-B", &format!("-P{profile}"), "package"])
                .current_dir(repo_root().join("interop/java")),
            "mvn package",
        );
        built.push(version.to_string());
    }
    format!("target-{version}/classes:target-{version}/lib/*")
}

fn java_client(profile: &str, version: &str) {
    let server = start(&[]);
    let dir = repo_root().join("interop/java");
    let cp = java_build(profile, version);
    let out = must_succeed(
        Command::new("java")
            .args(["-cp", &cp, "interop.Main", &server.bootstrap, "5000"])
            .current_dir(&dir),
        &format!("java client {version}"),
    );
    assert!(out.contains(" 0 failed"), "{out}");
    // The Java consumer fetches in incremental sessions (KIP-227).
    let scrape = http_get(&server.admin().expect("admin listener"), "/metrics").1;
    let incremental = metric(&scrape, "sluice_fetch_session_incremental_total").unwrap_or(0.0);
    assert!(incremental > 0.0, "no incremental fetch was served");
}

#[test]
fn java_client_3x() {
    java_client("kafka3", "3.9.2");
}

#[test]
fn java_client_4x() {
    java_client("kafka4", "4.4.0");
}

/// Delegation tokens with Kafka 4.4's Java client (`interop/java/.../Tokens.java`: create,
/// describe, produce and consume with the token over SCRAM, renew, expire) and with Kafka's
/// own `kafka-delegation-tokens.sh` (its class, `DelegationTokenCommand`), whose output is
/// read as an operator would.
#[test]
fn delegation_tokens_with_the_java_client_and_kafkas_tool() {
    let jaas = "listener.name.sasl_plaintext.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required user_alice=\"pw\" user_bob=\"pw\";";
    let server = start(&[
        "listeners=PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
        "sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-512",
        jaas,
        "delegation.token.secret.key=interop-secret",
    ]);
    let sasl = server.listener("SASL_PLAINTEXT").expect("SASL listener");
    sluice_tool(
        "topics",
        &server.bootstrap,
        &["--create", "--topic", "tokens", "--partitions", "1"],
    );
    let dir = repo_root().join("interop/java");
    let cp = java_build("kafka4", "4.4.0");
    let out = must_succeed(
        Command::new("java")
            .args(["-cp", &cp, "interop.Tokens", &sasl, "tokens"])
            .current_dir(&dir),
        "java interop.Tokens",
    );
    assert!(out.contains("TOKENS OK"), "{out}");

    let tmp = tempfile::tempdir().unwrap();
    let config = tmp.path().join("alice.properties");
    std::fs::write(
        &config,
        "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n\
         sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username=\"alice\" password=\"pw\";\n",
    )
    .unwrap();
    let config = config.display().to_string();
    let tool = |args: &[&str]| {
        must_succeed(
            Command::new("java")
                .args(["-cp", &cp, "org.apache.kafka.tools.DelegationTokenCommand"])
                .args(["--bootstrap-server", &sasl, "--command-config", &config])
                .args(args)
                .current_dir(&dir),
            &format!("kafka-delegation-tokens {args:?}"),
        )
    };
    let created = tool(&[
        "--create",
        "--max-life-time-period",
        "-1",
        "--renewer-principal",
        "User:bob",
    ]);
    let id = created
        .lines()
        .find_map(|l| l.strip_prefix("Created delegation token with tokenId : "))
        .unwrap_or_else(|| panic!("no token id in {created}"))
        .trim()
        .to_string();
    // The table row: TOKENID HMAC OWNER REQUESTER RENEWERS ...
    let row: Vec<&str> = created
        .lines()
        .find(|l| l.starts_with(&format!("{id} ")))
        .unwrap_or_else(|| panic!("no row for {id} in {created}"))
        .split_whitespace()
        .collect();
    let hmac = row[1].to_string();
    assert_eq!(
        (row[2], row[3], row[4]),
        ("User:alice", "User:alice", "[User:bob]")
    );
    let described = tool(&["--describe", "--owner-principal", "User:alice"]);
    assert!(
        described.contains("Total number of tokens : 1"),
        "{described}"
    );
    assert!(
        described.contains(&id) && described.contains(&hmac),
        "{described}"
    );
    let renewed = tool(&["--renew", "--hmac", &hmac, "--renew-time-period", "60000"]);
    assert!(
        renewed.contains("Completed renew operation. New expiry date : "),
        "{renewed}"
    );
    let expired = tool(&["--expire", "--hmac", &hmac, "--expiry-time-period", "-1"]);
    assert!(expired.contains("Completed expire operation."), "{expired}");
    let described = tool(&["--describe", "--owner-principal", "User:alice"]);
    assert!(
        described.contains("Total number of tokens : 0"),
        "{described}"
    );
}

fn tls_fixture(name: &str) -> String {
    repo_root()
        .join("crates/sluice/tests/fixtures/tls")
        .join(name)
        .display()
        .to_string()
}

/// A node with an SSL listener that requires a client certificate (mutual TLS) next to
/// its PLAINTEXT one.
fn start_mtls() -> TestServer {
    let keystore = format!("ssl.keystore.location={}", tls_fixture("server.pem"));
    let truststore = format!("ssl.truststore.location={}", tls_fixture("ca.pem"));
    start(&[
        "listeners=PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0",
        &keystore,
        &truststore,
        "ssl.client.auth=required",
    ])
}

/// One run of `interop/python/tls_clients.py`: (client, mode, address, certificate, and
/// for SASL [mechanism, user, password]).
type SecureCase<'a> = (&'a str, &'a str, &'a str, &'a str, &'a [&'a str]);

/// Run `interop/python/tls_clients.py` for each case at once; returns each one's output,
/// panicking on a failed run.
fn tls_clients(cases: &[SecureCase<'_>]) -> Vec<String> {
    let script = repo_root().join("interop/python/tls_clients.py");
    let ca = tls_fixture("ca.pem");
    let children: Vec<_> = cases
        .iter()
        .map(|(client, mode, addr, cert, sasl)| {
            Command::new("python3")
                .arg(&script)
                .args([*client, *mode, *addr, ca.as_str(), *cert])
                .args(*sasl)
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .expect("python3 (run scripts/test, which installs the clients)")
        })
        .collect();
    children
        .into_iter()
        .zip(cases)
        .map(|(child, case)| {
            let out = child.wait_with_output().unwrap();
            let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
            assert!(
                out.status.success(),
                "{case:?} failed ({}):\n{stdout}\n{}",
                out.status,
                String::from_utf8_lossy(&out.stderr)
            );
            stdout
        })
        .collect()
}

#[test]
fn python_clients_over_mutual_tls() {
    let server = start_mtls();
    let ssl = server.listener("SSL").expect("the SSL listener's address");
    let cert = tls_fixture("client.pem");
    let outs = tls_clients(&[
        ("confluent", "ok", &ssl, &cert, &[]),
        ("kafka-python", "ok", &ssl, &cert, &[]),
    ]);
    assert!(outs[0].contains("confluent-kafka TLS OK"), "{}", outs[0]);
    assert!(outs[1].contains("kafka-python TLS OK"), "{}", outs[1]);
}

/// Every way a TLS connection can be wrong fails that connection with a clear error on
/// the client, and the broker logs why and carries on.
#[test]
fn tls_failures_fail_cleanly_and_hurt_nothing() {
    let server = start_mtls();
    let ssl = server.listener("SSL").expect("the SSL listener's address");
    let plain = server.bootstrap.clone();
    let (foreign, expired, good) = (
        tls_fixture("foreign-client.pem"),
        tls_fixture("expired-client.pem"),
        tls_fixture("client.pem"),
    );
    let wrong: [(&str, &str, &str); 5] = [
        ("no client certificate", &ssl, "-"),
        ("a certificate from an unknown CA", &ssl, &foreign),
        ("an expired certificate", &ssl, &expired),
        ("plaintext to the TLS port", &ssl, "plaintext"),
        ("TLS to the plaintext port", &plain, &good),
    ];
    let cases: Vec<SecureCase<'_>> = ["confluent", "kafka-python"]
        .into_iter()
        .flat_map(|client| {
            wrong
                .iter()
                .map(move |(_, a, c)| (client, "fail", *a, *c, &[][..]))
        })
        .collect();
    for (out, case) in tls_clients(&cases).iter().zip(&cases) {
        assert!(out.contains("FAILED CLEANLY"), "{case:?}: {out}");
    }
    let log = server.log();
    assert!(log.contains("TLS handshake failed"), "{log}");
    assert!(log.contains("exceeds socket.request.max.bytes"), "{log}");
    // The broker is unharmed: both listeners still serve.
    let outs = tls_clients(&[
        ("confluent", "ok", &ssl, &good, &[]),
        ("confluent", "ok", &plain, "plaintext", &[]),
    ]);
    assert!(
        outs[0].contains("TLS OK") && outs[1].contains("PLAINTEXT OK"),
        "{outs:?}"
    );
}

/// SCRAM users created with `sluice users`; librdkafka (confluent-kafka) and kafka-python
/// authenticate over SASL_SSL with SCRAM-SHA-512 and SCRAM-SHA-256, and with PLAIN over
/// SASL_PLAINTEXT; a wrong password, an unknown user, a mechanism the listener does not offer
/// and a deleted credential all fail cleanly.
#[test]
fn python_clients_over_sasl_scram_and_plain() {
    let keystore = format!("ssl.keystore.location={}", tls_fixture("server.pem"));
    let jaas = r#"listener.name.sasl_plaintext.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required user_carol="carol-secret";"#;
    let server = start(&[
        "listeners=PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
        &keystore,
        "sasl.enabled.mechanisms=SCRAM-SHA-512,SCRAM-SHA-256",
        "listener.name.sasl_plaintext.sasl.enabled.mechanisms=PLAIN",
        jaas,
    ]);
    let secure = server.listener("SASL_SSL").expect("the SASL_SSL listener");
    let inner = server
        .listener("SASL_PLAINTEXT")
        .expect("the SASL_PLAINTEXT listener");
    let users = |args: &[&str]| sluice_tool("users", &server.bootstrap, args);
    users(&[
        "--add",
        "alice",
        "--password",
        "alice-secret",
        "--mechanism",
        "SCRAM-SHA-512",
        "--mechanism",
        "SCRAM-SHA-256",
        "--iterations",
        "8192",
    ]);
    let listed = users(&["--describe"]);
    assert!(
        listed.contains("'alice'")
            && listed.contains("SCRAM-SHA-256=iterations=8192")
            && listed.contains("SCRAM-SHA-512=iterations=8192"),
        "{listed}"
    );

    let scram512: &[&str] = &["SCRAM-SHA-512", "alice", "alice-secret"];
    let scram256: &[&str] = &["SCRAM-SHA-256", "alice", "alice-secret"];
    let plain: &[&str] = &["PLAIN", "carol", "carol-secret"];
    let outs = tls_clients(&[
        ("confluent", "ok", &secure, "-", scram512),
        ("kafka-python", "ok", &secure, "-", scram512),
        ("confluent", "ok", &secure, "-", scram256),
        ("confluent", "ok", &inner, "plaintext", plain),
        ("kafka-python", "ok", &inner, "plaintext", plain),
    ]);
    for out in &outs {
        assert!(out.contains("OK"), "{out}");
    }
    assert!(
        outs[0].contains("confluent-kafka SASL TLS OK"),
        "{}",
        outs[0]
    );
    assert!(
        outs[3].contains("confluent-kafka SASL PLAINTEXT OK"),
        "{}",
        outs[3]
    );

    let wrong: [(&str, &str, &[&str]); 4] = [
        (&secure, "-", &["SCRAM-SHA-512", "alice", "guess"]),
        (&secure, "-", &["SCRAM-SHA-512", "mallory", "alice-secret"]),
        (&secure, "-", &["PLAIN", "carol", "carol-secret"]),
        (&inner, "plaintext", &["PLAIN", "carol", "guess"]),
    ];
    let cases: Vec<SecureCase<'_>> = ["confluent", "kafka-python"]
        .into_iter()
        .flat_map(|client| {
            wrong
                .iter()
                .map(move |(a, c, s)| (client, "fail", *a, *c, *s))
        })
        .collect();
    for (out, case) in tls_clients(&cases).iter().zip(&cases) {
        assert!(out.contains("FAILED CLEANLY"), "{case:?}: {out}");
    }
    assert!(
        server.wait_for_log(std::time::Duration::from_secs(10), |l| l
            .contains("SASL authentication failed"))
    );

    // A deleted credential no longer authenticates; the other mechanism still does.
    users(&["--delete", "alice", "--mechanism", "SCRAM-SHA-512"]);
    let outs = tls_clients(&[
        ("confluent", "fail", &secure, "-", scram512),
        ("confluent", "ok", &secure, "-", scram256),
    ]);
    assert!(outs[0].contains("FAILED CLEANLY"), "{}", outs[0]);
    assert!(outs[1].contains("OK"), "{}", outs[1]);
}

/// The rdkafka crate's librdkafka (built with its `ssl` feature) over SASL_SSL with
/// SCRAM-SHA-512 and over mutual TLS: a producer and a consumer round-trip records; a wrong
/// password and a foreign client certificate fail cleanly (an error, no hang, nothing
/// delivered), and the broker keeps serving.
/// SASL/OAUTHBEARER with unsecured tokens (Kafka's default validator): librdkafka's own
/// unsecured JWTs authenticate as their `sub`, which the authorizer then sees (alice is a
/// super user, bob has no ACLs); a token without the scope the listener requires is refused.
#[test]
fn librdkafka_authenticates_with_unsecured_oauthbearer_tokens() {
    use rdkafka::consumer::{BaseConsumer, Consumer};
    use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
    use rdkafka::{ClientConfig, Message, Offset, TopicPartitionList};
    use std::time::{Duration, Instant};

    let jaas = "listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config=\
        org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required \
        unsecuredValidatorRequiredScope=\"kafka\";";
    let server = start(&[
        "listeners=PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
        "sasl.enabled.mechanisms=OAUTHBEARER",
        jaas,
        "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users=User:ANONYMOUS;User:alice",
    ]);
    sluice_tool(
        "topics",
        &server.bootstrap,
        &["--create", "--topic", "tokens", "--partitions", "1"],
    );
    let listener = server
        .listener("SASL_PLAINTEXT")
        .expect("the SASL listener");
    let client = |token: &str| {
        let mut c = ClientConfig::new();
        c.set("bootstrap.servers", &listener)
            .set("security.protocol", "SASL_PLAINTEXT")
            .set("sasl.mechanism", "OAUTHBEARER")
            .set("enable.sasl.oauthbearer.unsecure.jwt", "true")
            .set("sasl.oauthbearer.config", token);
        c
    };
    let alice = client("principal=alice scope=kafka");
    let p: BaseProducer = alice
        .clone()
        .set("message.timeout.ms", "20000")
        .create()
        .unwrap();
    p.send(BaseRecord::<(), _>::to("tokens").payload("from-alice"))
        .unwrap();
    p.flush(Duration::from_secs(20)).expect("alice's record");
    let c: BaseConsumer = alice.clone().set("group.id", "g-alice").create().unwrap();
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset("tokens", 0, Offset::Beginning)
        .unwrap();
    c.assign(&tpl).unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        assert!(Instant::now() < deadline, "alice read nothing");
        if let Some(m) = c.poll(Duration::from_millis(200)) {
            let m = m.expect("alice's fetch");
            assert_eq!(m.payload(), Some(&b"from-alice"[..]));
            break;
        }
    }
    // Authenticated but not authorized (bob), and not authenticated (no required scope).
    for (name, token) in [
        ("bob without ACLs", "principal=bob scope=kafka"),
        ("alice without the scope", "principal=alice scope=other"),
    ] {
        let p: BaseProducer<Deliveries> = client(token)
            .set("message.timeout.ms", "3000")
            .create_with_context(Deliveries::default())
            .unwrap();
        p.send(BaseRecord::<(), _>::to("tokens").payload("never"))
            .unwrap();
        let _ = p.flush(Duration::from_secs(15));
        let d = p.context();
        assert!(d.acked.lock().unwrap().is_empty(), "{name} delivered");
        assert_eq!(
            d.failed.load(std::sync::atomic::Ordering::Relaxed),
            1,
            "{name}: no failed delivery report"
        );
    }
    assert!(
        server
            .log()
            .contains("the token lacks the required scope kafka"),
        "the refusal is not logged"
    );
}

/// KIP-368 with a real client: librdkafka re-authenticates its connections before their
/// SASL sessions end (`connections.max.reauth.ms`), so a producer that keeps sending for
/// several session lifetimes has every record delivered and no connection is cut for an
/// expired session.
#[test]
fn librdkafka_reauthenticates_before_its_sessions_end() {
    use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
    use rdkafka::ClientConfig;
    use std::time::{Duration, Instant};

    let jaas = r#"listener.name.sasl_plaintext.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="alice-secret";"#;
    let server = start(&[
        "listeners=PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
        "sasl.enabled.mechanisms=PLAIN",
        "connections.max.reauth.ms=1000",
        jaas,
    ]);
    sluice_tool(
        "topics",
        &server.bootstrap,
        &["--create", "--topic", "renewed", "--partitions", "1"],
    );
    let p: BaseProducer<Deliveries> = ClientConfig::new()
        .set(
            "bootstrap.servers",
            server
                .listener("SASL_PLAINTEXT")
                .expect("the SASL listener"),
        )
        .set("security.protocol", "SASL_PLAINTEXT")
        .set("sasl.mechanism", "PLAIN")
        .set("sasl.username", "alice")
        .set("sasl.password", "alice-secret")
        .set("message.timeout.ms", "20000")
        .create_with_context(Deliveries::default())
        .unwrap();
    let until = Instant::now() + Duration::from_secs(4);
    let mut sent = 0;
    while Instant::now() < until {
        p.send(BaseRecord::<(), _>::to("renewed").payload("x"))
            .unwrap();
        sent += 1;
        p.poll(Duration::from_millis(200));
    }
    p.flush(Duration::from_secs(20)).expect("flush");
    assert_eq!(p.context().acked.lock().unwrap().len(), sent);
    let log = server.log();
    assert!(
        !log.contains("SASL session expired"),
        "a connection outlived its session"
    );
    let scrape = http_get(&server.admin().expect("admin listener"), "/metrics").1;
    let renewed = metric(
        &scrape,
        "sluice_successful_reauthentication_total{listener=\"SASL_PLAINTEXT\"}",
    )
    .unwrap_or(0.0);
    assert!(renewed >= 2.0, "re-authentications: {renewed}");
}

#[test]
fn librdkafka_from_rust_over_sasl_ssl_scram_and_mutual_tls() {
    use rdkafka::consumer::{BaseConsumer, Consumer};
    use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
    use rdkafka::{ClientConfig, Message, Offset, TopicPartitionList};
    use std::time::{Duration, Instant};

    let keystore = format!("ssl.keystore.location={}", tls_fixture("server.pem"));
    let truststore = format!("ssl.truststore.location={}", tls_fixture("ca.pem"));
    let server = start(&[
        "listeners=PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0,SSL://127.0.0.1:0",
        &keystore,
        &truststore,
        "listener.name.ssl.ssl.client.auth=required",
        "sasl.enabled.mechanisms=SCRAM-SHA-512",
    ]);
    sluice_tool(
        "users",
        &server.bootstrap,
        &["--add", "alice", "--password", "alice-secret"],
    );
    sluice_tool(
        "topics",
        &server.bootstrap,
        &["--create", "--topic", "secured", "--partitions", "1"],
    );
    let ca = tls_fixture("ca.pem");
    let sasl_ssl = server.listener("SASL_SSL").expect("the SASL_SSL listener");
    let ssl = server.listener("SSL").expect("the SSL listener");
    let scram = |password: &str| {
        let mut c = ClientConfig::new();
        c.set("bootstrap.servers", &sasl_ssl)
            .set("security.protocol", "SASL_SSL")
            .set("ssl.ca.location", &ca)
            .set("sasl.mechanism", "SCRAM-SHA-512")
            .set("sasl.username", "alice")
            .set("sasl.password", password);
        c
    };
    let mtls = |cert: &str| {
        let mut c = ClientConfig::new();
        c.set("bootstrap.servers", &ssl)
            .set("security.protocol", "SSL")
            .set("ssl.ca.location", &ca)
            .set("ssl.certificate.location", tls_fixture(cert))
            .set("ssl.key.location", tls_fixture(cert));
        c
    };
    for (name, config, value) in [
        (
            "SASL_SSL SCRAM-SHA-512",
            scram("alice-secret"),
            "over-scram",
        ),
        ("mutual TLS", mtls("client.pem"), "over-mtls"),
    ] {
        let p: BaseProducer = config
            .clone()
            .set("message.timeout.ms", "20000")
            .create()
            .unwrap();
        p.send(BaseRecord::<(), _>::to("secured").payload(value))
            .unwrap();
        p.flush(Duration::from_secs(20))
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let c: BaseConsumer = config
            .clone()
            .set("group.id", format!("g-{value}"))
            .create()
            .unwrap();
        let mut tpl = TopicPartitionList::new();
        tpl.add_partition_offset("secured", 0, Offset::Beginning)
            .unwrap();
        c.assign(&tpl).unwrap();
        let deadline = Instant::now() + Duration::from_secs(20);
        let mut seen = Vec::new();
        while !seen.iter().any(|v| v == value) {
            assert!(Instant::now() < deadline, "{name}: read only {seen:?}");
            if let Some(m) = c.poll(Duration::from_millis(200)) {
                let m = m.unwrap_or_else(|e| panic!("{name}: {e}"));
                seen.push(String::from_utf8_lossy(m.payload().unwrap_or_default()).into_owned());
            }
        }
    }
    // Wrong credentials: the record is not delivered, and the delivery report says so
    // once message.timeout.ms passes (librdkafka keeps retrying until then).
    for (name, config) in [
        ("a wrong SCRAM password", scram("not-alice")),
        ("a foreign client certificate", mtls("foreign-client.pem")),
    ] {
        let p: BaseProducer<Deliveries> = config
            .clone()
            .set("message.timeout.ms", "3000")
            .create_with_context(Deliveries::default())
            .unwrap();
        p.send(BaseRecord::<(), _>::to("secured").payload("never"))
            .unwrap();
        let started = Instant::now();
        let _ = p.flush(Duration::from_secs(15));
        assert!(started.elapsed() < Duration::from_secs(15), "{name}: hung");
        let d = p.context();
        assert!(d.acked.lock().unwrap().is_empty(), "{name} delivered");
        assert_eq!(
            d.failed.load(std::sync::atomic::Ordering::Relaxed),
            1,
            "{name}: no failed delivery report"
        );
    }
    let out = sluice_tool(
        "consume",
        &server.bootstrap,
        &[
            "--topic",
            "secured",
            "--from-beginning",
            "--max-messages",
            "2",
            "--timeout-ms",
            "10000",
        ],
    );
    assert_eq!(out.lines().collect::<Vec<_>>(), ["over-scram", "over-mtls"]);
}

/// The base64 body of the first certificate in a PEM file or text.
fn certificate_of(pem: &str) -> String {
    let start = pem
        .find("-----BEGIN CERTIFICATE-----")
        .expect("a certificate");
    let body = &pem[start + "-----BEGIN CERTIFICATE-----".len()..];
    let end = body.find("-----END CERTIFICATE-----").expect("its end");
    body[..end].split_whitespace().collect()
}

/// The certificate a TLS listener presents now (Python's ssl module, no verification).
fn served_certificate(addr: &str) -> String {
    let (host, port) = addr.rsplit_once(':').unwrap();
    let out = Command::new("python3")
        .args([
            "-c",
            "import ssl,sys; print(ssl.get_server_certificate((sys.argv[1], int(sys.argv[2]))))",
            host,
            port,
        ])
        .output()
        .expect("python3");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    certificate_of(&String::from_utf8_lossy(&out.stdout))
}

/// `sluice configs --alter --entity-type brokers …`: (success, stdout + stderr).
fn alter_broker_config(bootstrap: &str, entity: &[&str], config: &str) -> (bool, String) {
    let out = Command::new(sluice_bin())
        .args(["configs", "--bootstrap-server", bootstrap])
        .args(["--alter", "--entity-type", "brokers"])
        .args(entity)
        .args(["--add-config", config])
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

/// Listener security settings at runtime, as Kafka 4.4 answers them (checked against it):
/// with the listener prefix, any TLS or SASL setting may be set on a broker, for any
/// listener name, and is kept (a running listener takes only new key and trust stores); not
/// as a cluster-wide default; and the stores only with the prefix.
#[test]
fn listener_security_settings_are_kept_per_broker_and_listener() {
    let jaas = r#"listener.name.sasl_plaintext.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="alice-secret";"#;
    let server = start(&[
        "listeners=PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
        "sasl.enabled.mechanisms=PLAIN",
        jaas,
    ]);
    let b = server.bootstrap.clone();
    let me = ["--entity-name", "0"];
    let kept = [
        "listener.name.sasl_plaintext.sasl.kerberos.min.time.before.relogin=120000",
        "listener.name.sasl_plaintext.sasl.enabled.mechanisms=SCRAM-SHA-512",
        "listener.name.external.ssl.client.auth=required",
        "listener.name.plaintext.ssl.keystore.location=/nowhere/keystore.pem",
    ];
    for config in kept {
        let (ok, out) = alter_broker_config(&b, &me, config);
        assert!(ok, "{config}: {out}");
    }
    let shown = sluice_tool(
        "configs",
        &b,
        &[
            "--describe",
            "--entity-type",
            "brokers",
            "--entity-name",
            "0",
        ],
    );
    for config in kept {
        assert!(shown.contains(config), "{config} not in {shown}");
    }
    // The running SASL listener keeps its mechanisms until a restart, as Kafka's does.
    use kafka_protocol::messages::{ApiKey, SaslHandshakeRequest, SaslHandshakeResponse};
    use kafka_protocol::protocol::StrBytes;
    use wire::Wire;
    let sasl = server.listener("SASL_PLAINTEXT").expect("SASL listener");
    let mut w = Wire::connect(&sasl);
    let handshake: SaslHandshakeResponse = w.call(
        ApiKey::SaslHandshake,
        1,
        &SaslHandshakeRequest::default().with_mechanism(StrBytes::from_static_str("PLAIN")),
    );
    assert_eq!(handshake.error_code, 0);
    for (entity, config, why) in [
        (
            &["--entity-default"][..],
            "listener.name.sasl_plaintext.sasl.enabled.mechanisms=PLAIN",
            "broker id must be specified",
        ),
        (
            &me[..],
            "ssl.keystore.location=/nowhere/keystore.pem",
            "only per-listener using the listener prefix",
        ),
    ] {
        let (ok, out) = alter_broker_config(&b, entity, config);
        assert!(!ok && out.contains(why), "{config}: {out}");
    }
}

/// Certificate rotation as in Kafka: `listener.name.<l>.ssl.keystore.location` set on one
/// broker at runtime makes the listener present the new certificate to new connections,
/// re-reading the file when the path is the same; a store for another subject, a missing
/// file and the cluster-wide default are refused; a restarted broker applies what
/// metadata holds.
#[test]
fn a_listener_key_store_is_replaced_at_runtime() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("keystore.pem");
    let path_s = path.display().to_string();
    std::fs::copy(tls_fixture("server.pem"), &path).unwrap();
    let mut server = start(&[
        "listeners=PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0",
        &format!("ssl.keystore.location={path_s}"),
    ]);
    let ssl = server.listener("SSL").expect("the SSL listener's address");
    let b = server.bootstrap.clone();
    let cert = |name: &str| certificate_of(&std::fs::read_to_string(tls_fixture(name)).unwrap());
    let (original, renewed) = (cert("server.pem"), cert("server-renewed.pem"));
    assert_ne!(original, renewed);
    assert_eq!(served_certificate(&ssl), original);
    // The file is replaced; the listener keeps what it loaded until told.
    std::fs::copy(tls_fixture("server-renewed.pem"), &path).unwrap();
    assert_eq!(served_certificate(&ssl), original);
    let key = "listener.name.ssl.ssl.keystore.location";
    let me = ["--entity-name", "0"];
    let (ok, out) = alter_broker_config(&b, &me, &format!("{key}={path_s}"));
    assert!(ok, "{out}");
    assert_eq!(served_certificate(&ssl), renewed, "the same path re-read");
    let shown = sluice_tool(
        "configs",
        &b,
        &[
            "--describe",
            "--entity-type",
            "brokers",
            "--entity-name",
            "0",
        ],
    );
    assert!(
        shown.contains(&format!("{key}={path_s}")) && shown.contains("DYNAMIC_BROKER_CONFIG"),
        "{shown}"
    );
    // Refused, and the listener keeps serving the renewed certificate.
    let other = tls_fixture("server-other.pem");
    for (entity, config, why) in [
        (&me[..], format!("{key}={other}"), "must match"),
        (&me[..], format!("{key}={path_s}.missing"), "No such file"),
        (
            &["--entity-default"][..],
            format!("{key}={}", tls_fixture("server.pem")),
            "broker id must be specified",
        ),
    ] {
        let (ok, out) = alter_broker_config(&b, entity, &config);
        assert!(!ok && out.contains(why), "{config}: {out}");
        assert_eq!(out.trim().lines().count(), 1, "one line: {out}");
    }
    assert_eq!(served_certificate(&ssl), renewed);
    // Another path; then after a restart (the static setting names the renewed file) the
    // broker applies the path kept in metadata.
    let (ok, out) = alter_broker_config(&b, &me, &format!("{key}={}", tls_fixture("server.pem")));
    assert!(ok, "{out}");
    assert_eq!(served_certificate(&ssl), original);
    server.kill();
    server.restart();
    let ssl = server.listener("SSL").expect("the SSL listener's address");
    // Applied before the listener serves: the first connection already gets it.
    assert_eq!(
        served_certificate(&ssl),
        original,
        "the restarted broker served its static key store"
    );
}

/// Wait (at most `timeout`) for `/metrics` to satisfy `done`; the last scrape.
fn scrape_until(admin: &str, timeout: std::time::Duration, done: impl Fn(&str) -> bool) -> String {
    let deadline = std::time::Instant::now() + timeout;
    loop {
        let text = http_get(admin, "/metrics").1;
        if done(&text) || std::time::Instant::now() > deadline {
            return text;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}

/// Client telemetry (KIP-714): subscriptions set and shown with Kafka 4.4's
/// kafka-client-metrics tool (same output as against Kafka 4.4), then the Java 4.4 producer
/// and librdkafka (confluent-kafka) push what they are subscribed to, which `/metrics`
/// exports labelled with the client until the client closes.
#[test]
fn client_telemetry_with_kafkas_tool_the_java_client_and_librdkafka() {
    let server = start(&[]);
    let admin = server.admin().expect("admin listener");
    let dir = repo_root().join("interop/java");
    let cp = java_build("kafka4", "4.4.0");
    let tool = |args: &[&str]| {
        let out = Command::new("java")
            .args(["-cp", &cp, "org.apache.kafka.tools.ClientMetricsCommand"])
            .args(["--bootstrap-server", &server.bootstrap])
            .args(args)
            .current_dir(&dir)
            .output()
            .expect("java");
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    assert_eq!(
        tool(&[
            "--alter",
            "--name",
            "java-producers",
            "--metrics",
            "org.apache.kafka.producer.",
            "--interval",
            "300",
            "--match",
            "client_id=telemetry-.*,client_software_name=apache-kafka-java",
        ]),
        "Altered client metrics config for java-producers.\n"
    );
    assert_eq!(
        tool(&[
            "--alter",
            "--name",
            "librdkafka",
            "--metrics",
            "*",
            "--interval",
            "300",
            "--match",
            "client_software_name=confluent-kafka-python"
        ]),
        "Altered client metrics config for librdkafka.\n"
    );
    assert_eq!(
        tool(&["--describe", "--name", "java-producers"]),
        "Client metrics configs for java-producers are:\n  interval.ms=300\n  \
         match=client_id=telemetry-.*,client_software_name=apache-kafka-java\n  \
         metrics=org.apache.kafka.producer.\n"
    );
    assert_eq!(tool(&["--list"]), "java-producers\nlibrdkafka\n");
    assert_eq!(
        tool(&["--describe", "--name", "nope"]),
        "The client metric resource nope doesn't exist and doesn't have dynamic config.\n"
    );
    assert!(
        tool(&["--alter", "--name", "bad", "--interval", "5"]).starts_with(
            "Error while executing client metrics command : Invalid value 5 for interval.ms, \
             interval must be between 100 and 3600000 (1 hour)"
        )
    );
    assert!(tool(&["--alter", "--name", "bad", "--match", "client_id=("])
        .starts_with("Error while executing client metrics command : Illegal client matching pattern: client_id=("));

    // The Java producer: it learns its instance id from the broker, pushes producer metrics
    // only, and is forgotten once it has closed.
    let mut child = Command::new("java")
        .args([
            "-cp",
            &cp,
            "interop.Telemetry",
            &server.bootstrap,
            "telemetry",
            "telemetry-1",
        ])
        .current_dir(&dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("java interop.Telemetry");
    let mut stdout = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    std::io::BufRead::read_line(&mut stdout, &mut line).unwrap();
    let id = line
        .strip_prefix("INSTANCE ")
        .unwrap_or_else(|| panic!("no instance id: {line:?}"))
        .trim()
        .to_string();
    let sent = format!("org_apache_kafka_producer_record_send_total{{client_instance_id=\"{id}\",client_id=\"telemetry-1\",client_software_name=\"apache-kafka-java\",client_software_version=\"4.4.0\"}}");
    let text = scrape_until(&admin, std::time::Duration::from_secs(60), |t| {
        metric(t, &sent).is_some_and(|v| v > 0.0)
    });
    assert!(
        metric(&text, &sent).is_some_and(|v| v > 0.0),
        "{sent} not in\n{text}"
    );
    assert!(text.contains("# TYPE org_apache_kafka_producer_record_send_total counter\n"));
    let java_lines: Vec<&str> = text.lines().filter(|l| l.contains(&id)).collect();
    assert!(
        java_lines
            .iter()
            .all(|l| l.starts_with("org_apache_kafka_producer_")),
        "only subscribed metrics: {java_lines:?}"
    );
    drop(child.stdin.take());
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut stdout, &mut rest).unwrap();
    assert!(
        child.wait().unwrap().success() && rest.contains("TELEMETRY DONE"),
        "{rest}"
    );
    let text = scrape_until(&admin, std::time::Duration::from_secs(30), |t| {
        !t.contains(&id)
    });
    assert!(
        !text.contains(&id),
        "a closed client's metrics stay:\n{text}"
    );

    // librdkafka, through confluent-kafka: every metric, each 300 ms.
    let script = format!(
        r#"
import sys, time, urllib.request, confluent_kafka
p = confluent_kafka.Producer({{'bootstrap.servers': '{bootstrap}', 'client.id': 'rdkafka-1'}})
deadline = time.time() + 60
while time.time() < deadline:
    p.produce('telemetry', b'v'); p.poll(0.05)
    text = urllib.request.urlopen('http://{admin}/metrics').read().decode()
    lines = [l for l in text.splitlines() if 'client_id="rdkafka-1"' in l and 'client_software_name="confluent-kafka-python"' in l]
    if any(l.startswith('org_apache_kafka_producer_') for l in lines):
        print('PUSHED', len(lines)); break
p.flush()
"#,
        bootstrap = server.bootstrap,
    );
    let out = must_succeed(
        Command::new("python3").args(["-c", &script]),
        "confluent-kafka telemetry",
    );
    assert!(
        out.starts_with("PUSHED "),
        "librdkafka pushed nothing: {out}"
    );

    assert_eq!(
        tool(&["--delete", "--name", "java-producers"]),
        "Deleted client metrics config for java-producers.\n"
    );
    assert_eq!(tool(&["--list"]), "librdkafka\n");
}

/// SASL/OAUTHBEARER with signed tokens, as Kafka's OAuthBearerValidatorCallbackHandler checks
/// them against an identity provider's JWKS endpoint (here a local HTTP server): the Java 4.4
/// client (Kafka's console producer and consumer, reading an RS256 token from a file) and
/// librdkafka (an ES256 token from its refresh callback) produce and consume as the token's
/// subject; tokens for another audience, from another issuer, expired, or signed by a key
/// the JWKS does not have are refused, and a key the provider adds later is picked up.
#[test]
fn oauthbearer_with_signed_tokens_from_a_jwks_endpoint() {
    use rdkafka::client::{ClientContext, OAuthToken};
    use rdkafka::consumer::{BaseConsumer, Consumer};
    use rdkafka::producer::{BaseProducer, BaseRecord, Producer, ProducerContext};
    use rdkafka::{ClientConfig, Message, Offset, TopicPartitionList};
    use serde_json::json;
    use sluice_broker::oauthbearer::jwt::testing::{jwks, serve_jwks, Signer};
    use std::sync::{Arc, Mutex};
    use std::time::{Duration, Instant};

    let rsa = Signer::rs256(include_bytes!("fixtures/oauth/rsa-2048.pk8"));
    let ec = Signer::es256();
    let keys = Arc::new(Mutex::new(jwks(&[rsa.jwk("rsa-1"), ec.jwk("ec-1")])));
    let url = serve_jwks(Arc::clone(&keys));
    let server = start(&[
        "listeners=PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
        "sasl.enabled.mechanisms=OAUTHBEARER",
        "listener.name.sasl_plaintext.oauthbearer.sasl.server.callback.handler.class=\
         org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler",
        &format!("sasl.oauthbearer.jwks.endpoint.url={url}"),
        "sasl.oauthbearer.expected.audience=kafka",
        "sasl.oauthbearer.expected.issuer=https://idp.test",
        "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users=User:ANONYMOUS;User:alice",
    ]);
    let sasl = server.listener("SASL_PLAINTEXT").expect("SASL listener");
    sluice_tool(
        "topics",
        &server.bootstrap,
        &["--create", "--topic", "signed", "--partitions", "1"],
    );
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let claims = |sub: &str, aud: &str, iss: &str, exp: u64| json!({"sub": sub, "aud": aud, "iss": iss, "iat": now - 5, "exp": exp, "scope": "kafka"});
    let good = |sub: &str| claims(sub, "kafka", "https://idp.test", now + 3600);

    // The Java client: Kafka's login handler reads the token from a file.
    let tmp = tempfile::tempdir().unwrap();
    let token_file = tmp.path().join("token.jwt");
    std::fs::write(&token_file, rsa.token(Some("rsa-1"), &good("alice"))).unwrap();
    let token_url = format!("file://{}", token_file.display());
    let props = tmp.path().join("client.properties");
    std::fs::write(
        &props,
        format!(
            "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=OAUTHBEARER\n\
             sasl.login.callback.handler.class=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler\n\
             sasl.oauthbearer.token.endpoint.url={token_url}\n\
             sasl.jaas.config=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required ;\n"
        ),
    )
    .unwrap();
    let dir = repo_root().join("interop/java");
    let cp = java_build("kafka4", "4.4.0");
    let allowed = format!("-Dorg.apache.kafka.sasl.oauthbearer.allowed.urls={token_url}");
    let props = props.display().to_string();
    let mut producer = Command::new("java")
        .args([
            &allowed,
            "-cp",
            &cp,
            "org.apache.kafka.tools.ConsoleProducer",
        ])
        .args([
            "--bootstrap-server",
            &sasl,
            "--topic",
            "signed",
            "--command-config",
            &props,
        ])
        .current_dir(&dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("java ConsoleProducer");
    producer
        .stdin
        .take()
        .unwrap()
        .write_all(b"one\ntwo\nthree\n")
        .unwrap();
    let out = producer.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let consumed = must_succeed(
        Command::new("java")
            .args([
                &allowed,
                "-cp",
                &cp,
                "org.apache.kafka.tools.consumer.ConsoleConsumer",
            ])
            .args([
                "--bootstrap-server",
                &sasl,
                "--topic",
                "signed",
                "--from-beginning",
            ])
            .args([
                "--max-messages",
                "3",
                "--timeout-ms",
                "30000",
                "--command-config",
                &props,
            ])
            .current_dir(&dir),
        "java ConsoleConsumer",
    );
    assert_eq!(consumed, "one\ntwo\nthree\n");

    // librdkafka: the token comes from the refresh callback.
    /// A token to authenticate with, and what became of the records sent with it.
    struct Token {
        token: String,
        expires_ms: i64,
        acked: std::sync::atomic::AtomicUsize,
        failed: std::sync::atomic::AtomicUsize,
    }
    impl ClientContext for Token {
        const ENABLE_REFRESH_OAUTH_TOKEN: bool = true;
        fn generate_oauth_token(
            &self,
            _: Option<&str>,
        ) -> Result<OAuthToken, Box<dyn std::error::Error>> {
            Ok(OAuthToken {
                token: self.token.clone(),
                principal_name: "from-token".into(),
                lifetime_ms: self.expires_ms,
            })
        }
    }
    impl ProducerContext for Token {
        type DeliveryOpaque = ();
        fn delivery(&self, r: &rdkafka::message::DeliveryResult<'_>, _: ()) {
            let n = if r.is_ok() { &self.acked } else { &self.failed };
            n.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
    }
    impl rdkafka::consumer::ConsumerContext for Token {}
    let with = |token: String| Token {
        token,
        expires_ms: i64::try_from(now + 3600).unwrap() * 1000,
        acked: Default::default(),
        failed: Default::default(),
    };
    let config = || {
        let mut c = ClientConfig::new();
        c.set("bootstrap.servers", &sasl)
            .set("security.protocol", "SASL_PLAINTEXT")
            .set("sasl.mechanism", "OAUTHBEARER");
        c
    };
    let p: BaseProducer<Token> = config()
        .create_with_context(with(ec.token(Some("ec-1"), &good("alice"))))
        .unwrap();
    p.send(BaseRecord::<(), _>::to("signed").payload("four"))
        .unwrap();
    p.flush(Duration::from_secs(20))
        .expect("librdkafka's record");
    let c: BaseConsumer<Token> = config()
        .set("group.id", "g-signed")
        .create_with_context(with(ec.token(None, &good("alice"))))
        .unwrap();
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset("signed", 0, Offset::Offset(3))
        .unwrap();
    c.assign(&tpl).unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        assert!(Instant::now() < deadline, "librdkafka read nothing");
        if let Some(m) = c.poll(Duration::from_millis(200)) {
            assert_eq!(m.expect("fetch").payload(), Some(&b"four"[..]));
            break;
        }
    }

    // Refused tokens: the connection fails authentication and nothing is delivered.
    let other = Signer::es256();
    let refused = [
        (
            "another audience",
            ec.token(
                Some("ec-1"),
                &claims("alice", "billing", "https://idp.test", now + 3600),
            ),
            "names none of [kafka]",
        ),
        (
            "another issuer",
            ec.token(
                Some("ec-1"),
                &claims("alice", "kafka", "https://evil.test", now + 3600),
            ),
            "is not https://idp.test",
        ),
        (
            "expired",
            ec.token(
                Some("ec-1"),
                &claims("alice", "kafka", "https://idp.test", now - 600),
            ),
            "has expired",
        ),
        (
            "an unknown key",
            other.token(Some("ec-2"), &good("alice")),
            "no ES256 key with kid ec-2",
        ),
    ];
    for (what, token, logged) in refused {
        let p: BaseProducer<Token> = config()
            .set("message.timeout.ms", "3000")
            .create_with_context(with(token))
            .unwrap();
        p.send(BaseRecord::<(), _>::to("signed").payload("never"))
            .unwrap();
        let _ = p.flush(Duration::from_secs(15));
        let acked = p.context().acked.load(std::sync::atomic::Ordering::Relaxed);
        let failed = p
            .context()
            .failed
            .load(std::sync::atomic::Ordering::Relaxed);
        assert_eq!((acked, failed), (0, 1), "{what}: delivered or never failed");
        assert!(
            server.wait_for_log(Duration::from_secs(20), |l| l.contains(logged)),
            "{what}: no refusal logged ({logged})"
        );
    }
    // The provider publishes that key: it is read again and the token accepted.
    *keys.lock().unwrap() = jwks(&[rsa.jwk("rsa-1"), ec.jwk("ec-1"), other.jwk("ec-2")]);
    let p: BaseProducer<Token> = config()
        .set("message.timeout.ms", "30000")
        .create_with_context(with(other.token(Some("ec-2"), &good("alice"))))
        .unwrap();
    p.send(BaseRecord::<(), _>::to("signed").payload("five"))
        .unwrap();
    p.flush(Duration::from_secs(30))
        .expect("the rotated-in key's token");
}

/// JBOD with Kafka 4.4's tools: `kafka-log-dirs --describe` lists each of a node's log
/// directories with the replicas in it, and `kafka-reassign-partitions` with `log_dirs` in its
/// plan moves replicas between them (AlterReplicaLogDirs) while a producer keeps writing;
/// `--verify` reports the moves done, and every acknowledged record is there, also after a
/// kill -9.
#[test]
fn kafkas_tools_describe_and_move_replicas_between_log_dirs() {
    use rdkafka::producer::{BaseRecord, Producer};
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    let disks = tempfile::tempdir().unwrap();
    let d1 = disks.path().join("disk1").display().to_string();
    let d2 = disks.path().join("disk2").display().to_string();
    let mut server = start(&[&format!("log.dirs={d1},{d2}")]);
    create_topic(&server.bootstrap, "moving", 2, &[]);
    let dir = repo_root().join("interop/java");
    let cp = java_build("kafka4", "4.4.0");
    let tool = |class: &str, args: &[&str]| {
        must_succeed(
            Command::new("java")
                .args(["-cp", &cp, class, "--bootstrap-server", &server.bootstrap])
                .args(args)
                .current_dir(&dir),
            class,
        )
    };
    // partition -> (log dir, is future), from kafka-log-dirs' JSON.
    let placement = |out: &str| -> Vec<(String, String, bool)> {
        let json: serde_json::Value = serde_json::from_str(out.lines().last().unwrap()).unwrap();
        let mut v = Vec::new();
        for d in json["brokers"][0]["logDirs"].as_array().unwrap() {
            assert!(d["error"].is_null(), "{d}");
            for p in d["partitions"].as_array().unwrap() {
                v.push((
                    p["partition"].as_str().unwrap().to_string(),
                    d["logDir"].as_str().unwrap().to_string(),
                    p["isFuture"].as_bool().unwrap(),
                ));
            }
        }
        v.sort();
        v
    };
    let describe = || {
        placement(&tool(
            "org.apache.kafka.tools.LogDirsCommand",
            &["--describe", "--topic-list", "moving"],
        ))
    };
    let before = describe();
    assert_eq!(before.len(), 2, "{before:?}");
    assert_ne!(
        before[0].1, before[1].1,
        "one partition in each directory: {before:?}"
    );

    // A producer writes all along.
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let (stop, bootstrap) = (Arc::clone(&stop), server.bootstrap.clone());
        std::thread::spawn(move || {
            let p = producer(&bootstrap, &[("acks", "all"), ("linger.ms", "2")]);
            let mut i = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let key = format!("k{i}");
                let value = vec![b'v'; 200];
                let rec = BaseRecord::to("moving").key(&key).payload(&value);
                if p.send(rec).is_err() {
                    p.poll(Duration::from_millis(10));
                    continue;
                }
                p.poll(Duration::ZERO);
                i += 1;
                if i % 500 == 0 {
                    std::thread::sleep(Duration::from_millis(5));
                }
            }
            p.flush(Duration::from_secs(60)).expect("flush");
            assert_eq!(p.context().failed.load(Ordering::Relaxed), 0);
            let acked = p.context().acked.lock().unwrap().len();
            acked
        })
    };
    std::thread::sleep(Duration::from_millis(500));
    // Swap the two partitions' directories.
    let plan = disks.path().join("plan.json");
    std::fs::write(
        &plan,
        serde_json::json!({"version": 1, "partitions": [
            {"topic": "moving", "partition": 0, "replicas": [0], "log_dirs": [before[1].1]},
            {"topic": "moving", "partition": 1, "replicas": [0], "log_dirs": [before[0].1]},
        ]})
        .to_string(),
    )
    .unwrap();
    let plan = plan.display().to_string();
    let reassign = "org.apache.kafka.tools.reassign.ReassignPartitionsCommand";
    let out = tool(reassign, &["--reassignment-json-file", &plan, "--execute"]);
    assert!(
        out.contains("Successfully started moving log directory to")
            && out.contains("for replica moving-0 with broker 0"),
        "{out}"
    );
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let out = tool(reassign, &["--reassignment-json-file", &plan, "--verify"]);
        if out.contains("Reassignment of replica moving-0-0 completed successfully.")
            && out.contains("Reassignment of replica moving-1-0 completed successfully.")
        {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the moves never finished:\n{out}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    std::thread::sleep(Duration::from_millis(300));
    stop.store(true, Ordering::Relaxed);
    let acked = writer.join().unwrap();
    assert!(acked > 1000, "only {acked} records written");
    let after = describe();
    assert_eq!(
        after,
        vec![
            ("moving-0".to_string(), before[1].1.clone(), false),
            ("moving-1".to_string(), before[0].1.clone(), false),
        ]
    );
    assert_eq!(
        consume_all(&server.bootstrap, "moving", 2, acked).len(),
        acked
    );
    server.kill();
    server.restart();
    assert_eq!(
        consume_all(&server.bootstrap, "moving", 2, acked).len(),
        acked
    );
}

/// Offsets for a topic or partition the cluster does not have are refused with
/// UNKNOWN_TOPIC_OR_PARTITION and not written, as Kafka answers; the rest of the same commit
/// is written (confluent-kafka's commit and AlterConsumerGroupOffsets; the same script gives
/// the same output against Kafka 4.4).
#[test]
fn offset_commits_for_unknown_topics_or_partitions_are_refused() {
    let server = start(&[]);
    create_topic(&server.bootstrap, "known", 3, &[]);
    let script = format!(
        r#"
from confluent_kafka import Consumer, TopicPartition as TP, KafkaException, ConsumerGroupTopicPartitions
from confluent_kafka.admin import AdminClient
bs = '{bootstrap}'
c = Consumer({{'bootstrap.servers': bs, 'group.id': 'cu', 'enable.auto.commit': False}})
try:
    c.commit(offsets=[TP('known', 0, 5), TP('known', 7, 1), TP('nowhere', 0, 3)], asynchronous=False)
    print('commit OK')
except KafkaException as e:
    print('commit', e.args[0].name())
a = AdminClient({{'bootstrap.servers': bs}})
r = a.alter_consumer_group_offsets([ConsumerGroupTopicPartitions('cu2', [TP('nowhere', 1, 4)])])
try:
    for tp in r['cu2'].result().topic_partitions:
        print('alter', tp.topic, tp.partition, tp.error.name() if tp.error else 'OK')
except KafkaException as e:
    print('alter', e.args[0].name())
for tp in c.committed([TP('known', 0), TP('known', 7), TP('nowhere', 0)], timeout=10):
    print('committed', tp.topic, tp.partition, tp.offset)
c.close()
"#,
        bootstrap = server.bootstrap,
    );
    let out = must_succeed(
        Command::new("python3").args(["-c", &script]),
        "confluent-kafka commits",
    );
    assert_eq!(
        out,
        "commit UNKNOWN_TOPIC_OR_PART\n\
         alter nowhere 1 UNKNOWN_TOPIC_OR_PART\n\
         committed known 0 5\n\
         committed known 7 -1001\n\
         committed nowhere 0 -1001\n"
    );
}

/// The consumer group protocol (KIP-848) with the Java client 4.4 (`group.protocol=consumer`):
/// three members, one joining late and one leaving, read every record exactly once; the admin
/// client describes and lists the group as a consumer group and deletes it once empty.
#[test]
fn java_consumer_protocol_group() {
    let server = start(&[
        "group.consumer.min.heartbeat.interval.ms=500",
        "group.consumer.heartbeat.interval.ms=500",
    ]);
    let cp = java_build("kafka4", "4.4.0");
    let out = must_succeed(
        Command::new("java")
            .args(["-cp", &cp, "interop.ConsumerProtocol", &server.bootstrap])
            .current_dir(repo_root().join("interop/java")),
        "java consumer protocol",
    );
    assert!(out.contains("5 passed, 0 failed"), "{out}");
}

/// Group configs with Kafka 4.4's kafka-configs tool: described with the broker's defaults,
/// set, shown as the group's own with the default as a synonym, refused with Kafka's
/// messages (the same output as against Kafka 4.4), deleted; `sluice configs` too.
#[test]
fn group_configs_with_kafkas_tool() {
    let server = start(&[]);
    let cp = java_build("kafka4", "4.4.0");
    let dir = repo_root().join("interop/java");
    let tool = |args: &[&str]| {
        let out = Command::new("java")
            .args(["-cp", &cp, "org.apache.kafka.tools.ConfigCommand"])
            .args([
                "--bootstrap-server",
                &server.bootstrap,
                "--entity-type",
                "groups",
            ])
            .args(args)
            .current_dir(&dir)
            .output()
            .expect("java");
        let err = String::from_utf8_lossy(&out.stderr);
        let cause = err
            .lines()
            .find_map(|l| l.strip_prefix("Caused by: "))
            .map(|l| format!("{l}\n"))
            .unwrap_or_default();
        format!("{}{cause}", String::from_utf8_lossy(&out.stdout))
    };
    let all = tool(&["--describe", "--entity-name", "g1", "--all"]);
    assert!(all.starts_with("All configs for group g1 are:\n"), "{all}");
    assert_eq!(all.lines().count(), 22, "{all}");
    assert!(all.contains("  consumer.session.timeout.ms=45000 sensitive=false synonyms={DEFAULT_CONFIG:group.consumer.session.timeout.ms=45000}\n"), "{all}");
    assert!(all.contains("  streams.assignor.name=sticky sensitive=false synonyms={DEFAULT_CONFIG:group.streams.assignors=sticky}\n"), "{all}");
    assert!(all.contains("  share.auto.offset.reset=latest sensitive=false synonyms={DEFAULT_CONFIG:share.auto.offset.reset=latest}\n"), "{all}");
    assert_eq!(
        tool(&[
            "--alter",
            "--entity-name",
            "g1",
            "--add-config",
            "consumer.session.timeout.ms=50000"
        ]),
        "Completed updating config for group g1.\n"
    );
    assert_eq!(
        tool(&["--describe", "--entity-name", "g1"]),
        "Dynamic configs for group g1 are:\n  consumer.session.timeout.ms=50000 sensitive=false synonyms={DYNAMIC_GROUP_CONFIG:consumer.session.timeout.ms=50000, DEFAULT_CONFIG:group.consumer.session.timeout.ms=45000}\n"
    );
    for (config, cause) in [
        ("consumer.session.timeout.ms=5000", "consumer.session.timeout.ms must be in the range 45000 to 60000 inclusive."),
        ("foo=1", "Unknown group config name: foo"),
        ("consumer.heartbeat.interval.ms=abc", "Invalid value abc for configuration consumer.heartbeat.interval.ms: Not a number of type INT"),
        ("streams.num.standby.replicas=5", "streams.num.standby.replicas must be less than or equal to 2"),
    ] {
        assert_eq!(
            tool(&["--alter", "--entity-name", "g1", "--add-config", config]),
            format!("org.apache.kafka.common.errors.InvalidConfigurationException: {cause}\n"),
            "{config}"
        );
    }
    // Kafka's tool lists the groups with configs.
    assert!(tool(&["--describe"]).contains("Dynamic configs for group g1 are:\n"),);
    let out = sluice_tool(
        "configs",
        &server.bootstrap,
        &[
            "--describe",
            "--entity-type",
            "groups",
            "--entity-name",
            "g1",
        ],
    );
    assert_eq!(
        out,
        "Dynamic configs for group g1 are:\n  consumer.session.timeout.ms=50000 sensitive=false source=DYNAMIC_GROUP_CONFIG\n"
    );
    sluice_tool(
        "configs",
        &server.bootstrap,
        &[
            "--alter",
            "--entity-type",
            "groups",
            "--entity-name",
            "g1",
            "--delete-config",
            "consumer.session.timeout.ms",
        ],
    );
    assert_eq!(
        tool(&["--describe", "--entity-name", "g1"]),
        "The group 'g1' doesn't exist and doesn't have dynamic config.\n"
    );
}

/// A child process killed (SIGKILL) when dropped, so a failing test leaves none behind.
struct Killed(std::process::Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The latest count of each word in a Kafka Streams output topic, read committed (what an
/// exactly-once application has committed; a count over the truth would be a duplicate).
fn committed_counts(bootstrap: &str, topic: &str, partitions: i32) -> HashMap<String, i64> {
    use rdkafka::consumer::{BaseConsumer, Consumer};
    use rdkafka::{Message, Offset, TopicPartitionList};
    use std::time::{Duration, Instant};
    let c: BaseConsumer = consumer(bootstrap, &[("isolation.level", "read_committed")]);
    let mut tpl = TopicPartitionList::new();
    for p in 0..partitions {
        tpl.add_partition_offset(topic, p, Offset::Beginning)
            .unwrap();
    }
    c.assign(&tpl).unwrap();
    let mut counts = HashMap::new();
    let mut quiet_since = Instant::now();
    while quiet_since.elapsed() < Duration::from_millis(1500) {
        if let Some(m) = c.poll(Duration::from_millis(200)) {
            let m = m.expect("consume");
            let key = String::from_utf8_lossy(m.key().unwrap_or_default()).into_owned();
            let value: [u8; 8] = m.payload().unwrap_or_default().try_into().expect("a long");
            counts.insert(key, i64::from_be_bytes(value));
            quiet_since = Instant::now();
        }
    }
    counts
}

/// A streams group as its coordinator describes it (StreamsGroupDescribe): its coordinator's
/// node id, the group epoch and the member ids.
fn streams_group_epoch(bootstrap: &str, group: &str) -> (i32, i32, BTreeSet<String>) {
    use kafka_protocol::messages::*;
    use kafka_protocol::protocol::StrBytes;
    let first = bootstrap.split(',').next().unwrap_or(bootstrap);
    let r: FindCoordinatorResponse = wire::Wire::connect(first).call(
        ApiKey::FindCoordinator,
        4,
        &FindCoordinatorRequest::default()
            .with_key_type(0)
            .with_coordinator_keys(vec![StrBytes::from_string(group.to_string())]),
    );
    let c = &r.coordinators[0];
    assert_eq!(c.error_code, 0, "FindCoordinator: {c:?}");
    let d: StreamsGroupDescribeResponse = wire::Wire::connect(&format!("{}:{}", c.host, c.port))
        .call(
            ApiKey::StreamsGroupDescribe,
            0,
            &StreamsGroupDescribeRequest::default()
                .with_group_ids(vec![StrBytes::from_string(group.to_string()).into()]),
        );
    let g = &d.groups[0];
    assert_eq!(g.error_code, 0, "StreamsGroupDescribe: {g:?}");
    let members = g.members.iter().map(|m| m.member_id.to_string()).collect();
    (c.node_id.0, g.group_epoch, members)
}

/// The streams group protocol (KIP-1071) with Kafka Streams 4.4 (`group.protocol=streams`,
/// `exactly_once_v2`) on three nodes: two instances of an application counting words
/// through a repartition topic and a state store (topics and internal topics replicated
/// three times); the broker configures the topology, creates the internal topics and
/// assigns the tasks. One instance is killed (SIGKILL) mid-run and restarted while more
/// records arrive; then the node coordinating the group is killed, and the next leader of
/// the group's `__consumer_offsets` partition resumes the group from its records: same
/// members, its epoch carried on (a group rebuilt from scratch would start again at 2).
/// Every count is exact: never over (no duplicate survives), and finally all of them;
/// Kafka's kafka-streams-groups tool then shows both instances holding active tasks.
#[test]
fn kafka_streams_group_protocol_counts_exactly_once_across_kills() {
    use std::time::{Duration, Instant};
    let mut nodes = sluice_testkit::TestServer::start_all(
        sluice_bin(),
        &sluice_testkit::combined_nodes(&[
            "broker.session.timeout.ms=2000",
            "broker.heartbeat.interval.ms=250",
            "controller.quorum.election.timeout.ms=500",
            "offsets.topic.replication.factor=3",
            "transaction.state.log.replication.factor=3",
            "transaction.state.log.min.isr=2",
            "default.replication.factor=3",
            "min.insync.replicas=2",
            "group.streams.min.session.timeout.ms=6000",
            "group.streams.session.timeout.ms=6000",
            "group.streams.min.heartbeat.interval.ms=500",
            "group.streams.heartbeat.interval.ms=500",
        ]),
    );
    let addrs: Vec<String> = nodes.iter().map(|n| n.bootstrap.clone()).collect();
    let all = |skip: Option<usize>| {
        addrs
            .iter()
            .enumerate()
            .filter(|(i, _)| Some(*i) != skip)
            .map(|(_, a)| a.as_str())
            .collect::<Vec<_>>()
            .join(",")
    };
    let b = all(None);
    let cp = java_build("kafka4", "4.4.0");
    let dir = repo_root().join("interop/java");
    for (topic, partitions) in [("words", 4), ("counts", 2)] {
        use rdkafka::admin::{AdminOptions, NewTopic, TopicReplication};
        let t = NewTopic::new(topic, partitions, TopicReplication::Fixed(3));
        for r in block_on(admin(&b).create_topics([&t], &AdminOptions::new())).expect("create") {
            r.unwrap_or_else(|(t, e)| panic!("create {t}: {e:?}"));
        }
    }
    let batch = |from: usize, to: usize| -> Vec<(Vec<u8>, Vec<u8>, Option<i64>)> {
        (from..to)
            .map(|i| {
                (
                    i.to_string().into_bytes(),
                    format!("w{}", i % 100).into_bytes(),
                    None,
                )
            })
            .collect()
    };
    produce_all(&producer(&b, &[]), "words", &batch(0, 10_000));
    let state = std::env::temp_dir().join(format!("sluice-streams-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&state);
    let instance = |name: &str| {
        let log =
            std::fs::File::create(state.with_extension(format!("{name}.log"))).expect("log file");
        Killed(
            Command::new("java")
                .args([
                    "-cp",
                    &cp,
                    "interop.StreamsCount",
                    &b,
                    "wordcount",
                    "words",
                    "counts",
                ])
                .arg(state.join(name))
                .args(["streams", "-1"])
                .current_dir(&dir)
                .stdout(log)
                .stderr(Stdio::null())
                .spawn()
                .expect("java"),
        )
    };
    let wait_for = |bootstrap: &str, expected: i64| {
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            let counts = committed_counts(bootstrap, "counts", 2);
            let over: Vec<_> = counts.iter().filter(|(_, n)| **n > expected).collect();
            assert!(over.is_empty(), "counted twice: {over:?}");
            if counts.len() == 100 && counts.values().all(|n| *n == expected) {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "not all counts reached {expected}: {} words, {:?}",
                counts.len(),
                counts.values().min()
            );
        }
    };
    let _a = instance("a");
    let second = instance("b");
    wait_for(&b, 100);
    // An instance dies and comes back.
    drop(second);
    produce_all(&producer(&b, &[]), "words", &batch(10_000, 20_000));
    let _b = instance("b");
    wait_for(&b, 200);
    // The group's coordinator dies.
    let (coordinator, epoch_before, members_before) = streams_group_epoch(&b, "wordcount");
    nodes[(coordinator - 1) as usize].kill();
    let survivors = all(Some((coordinator - 1) as usize));
    produce_all(&producer(&survivors, &[]), "words", &batch(20_000, 30_000));
    wait_for(&survivors, 300);
    let (now_at, epoch_after, members_after) = streams_group_epoch(&survivors, "wordcount");
    assert_ne!(
        now_at, coordinator,
        "the group moved to another coordinator"
    );
    assert!(
        epoch_after >= epoch_before && members_after == members_before,
        "the group resumed at epoch {epoch_after} with {members_after:?} (was {epoch_before} with {members_before:?})"
    );
    eprintln!("streams group epoch {epoch_before} before the failover, {epoch_after} after");
    // Both instances hold active tasks, as Kafka's tool shows.
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let out = Command::new("java")
            .args([
                "-cp",
                &cp,
                "org.apache.kafka.tools.streams.StreamsGroupCommand",
            ])
            .args([
                "--bootstrap-server",
                &survivors,
                "--describe",
                "--group",
                "wordcount",
            ])
            .args(["--members", "--verbose"])
            .current_dir(&dir)
            .output()
            .expect("java");
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let processes: BTreeSet<&str> = text
            .lines()
            .filter(|l| l.contains("ACTIVE: "))
            .filter_map(|l| l.split_whitespace().nth(6))
            .collect();
        if processes.len() == 2 {
            assert!(text.contains(" streams "), "{text}");
            break;
        }
        assert!(
            Instant::now() < deadline,
            "not both instances active:\n{text}"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    let _ = std::fs::remove_dir_all(&state);
}

/// Tiered storage with Kafka 4.4's Java client (`interop/java/.../Tiered.java`): its Admin
/// client's `OffsetSpec.earliestLocal()` / `latestTiered()` (ListOffsets -4 / -5), and a
/// consumer that reads every record from offset 0, most of them from the remote tier.
#[test]
fn java_client_reads_a_tiered_topic_from_offset_zero() {
    let remote = tempfile::tempdir().unwrap();
    let uri = format!("remote.log.storage.uri=file://{}", remote.path().display());
    let server = start(&[
        "remote.log.storage.system.enable=true",
        &uri,
        "remote.log.manager.task.interval.ms=200",
        "log.retention.check.interval.ms=200",
    ]);
    let b = server.bootstrap.as_str();
    sluice_tool(
        "topics",
        b,
        &[
            "--create",
            "--topic",
            "tj",
            "--config",
            "remote.storage.enable=true",
            "--config",
            "segment.bytes=1048576",
            "--config",
            "local.retention.bytes=1",
        ],
    );
    must_succeed(
        Command::new(sluice_bin()).args([
            "perf",
            "produce",
            "--bootstrap-server",
            b,
            "--topic",
            "tj",
            "--records",
            "4000",
            "--record-size",
            "1000",
        ]),
        "sluice perf produce",
    );
    let offset = |spec: &str| -> i64 {
        let out = sluice_tool("offsets", b, &["--topic", "tj", "--time", spec]);
        out.trim()
            .rsplit(':')
            .next()
            .unwrap_or("")
            .parse()
            .unwrap_or(-1)
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let (local, tiered) = loop {
        let (local, tiered) = (offset("earliest-local"), offset("latest-tiered"));
        if local > 0 && tiered == local - 1 {
            break (local, tiered);
        }
        assert!(
            std::time::Instant::now() < deadline,
            "not tiered: {local} {tiered}"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    };
    let cp = java_build("kafka4", "4.4.0");
    let out = must_succeed(
        Command::new("java")
            .args(["-cp", &cp, "interop.Tiered", b, "tj", "4000"])
            .current_dir(repo_root().join("interop/java")),
        "java interop.Tiered",
    );
    assert!(
        out.contains(&format!(
            "EARLIEST 0 EARLIEST_LOCAL {local} LATEST_TIERED {tiered} LATEST 4000"
        )),
        "{out}"
    );
    assert!(out.contains("READ 4000 4000000"), "{out}");
}

/// A diskless topic of a three-node cluster on moto's S3 server with Kafka 4.4's Java client
/// (`interop/java/.../Diskless.java`): Admin creates it, an idempotent producer's records
/// are read back by a consumer group at the offsets acknowledged, and read_committed sees a
/// committed transaction and not an aborted one.
#[test]
fn java_client_on_a_diskless_topic() {
    // Three nodes sharing a bucket of moto's S3 server; the client knows them all.
    let moto = moto::Moto::start_on(free_port());
    moto.create_bucket("java");
    let mut extra = moto.store_overrides("java");
    extra.push("diskless.append.linger.ms=20".into());
    let refs: Vec<&str> = extra.iter().map(String::as_str).collect();
    let nodes =
        sluice_testkit::TestServer::start_all(sluice_bin(), &sluice_testkit::combined_nodes(&refs));
    let bootstrap: Vec<&str> = nodes.iter().map(|n| n.bootstrap.as_str()).collect();
    let cp = java_build("kafka4", "4.4.0");
    let out = must_succeed(
        Command::new("java")
            .args([
                "-cp",
                &cp,
                "interop.Diskless",
                &bootstrap.join(","),
                "jdl",
                "3000",
            ])
            .current_dir(repo_root().join("interop/java")),
        "java interop.Diskless",
    );
    assert!(out.contains("PRODUCED 3000"), "{out}");
    assert!(out.contains("GROUP READ 3000"), "{out}");
    assert!(out.contains("READ_COMMITTED 100"), "{out}");
}

/// Broker settings that make share-group lock expiry and the delivery limit quick to see.
const SHARE_TEST_SETTINGS: &[&str] = &[
    "group.share.min.record.lock.duration.ms=1000",
    "group.share.record.lock.duration.ms=2000",
    "group.share.delivery.count.limit=3",
];

/// Share groups (KIP-932) with the Java 4.4 KafkaShareConsumer: three consumers share one
/// partition and read every record once; RELEASE redelivers with delivery count 2 and REJECT
/// never delivers again; records a consumer stops acknowledging go to another after the lock;
/// a record released at every delivery is archived after the limit; the admin client
/// describes the group.
#[test]
fn java_share_consumers() {
    let server = start(SHARE_TEST_SETTINGS);
    let cp = java_build("kafka4", "4.4.0");
    let out = must_succeed(
        Command::new("java")
            .args(["-cp", &cp, "interop.ShareGroups", &server.bootstrap])
            .current_dir(repo_root().join("interop/java")),
        "java share groups",
    );
    assert!(out.contains("7 passed, 0 failed"), "{out}");
    // What the consumers did shows in the broker's counters.
    let scrape = http_get(&server.admin().expect("admin listener"), "/metrics").1;
    let count = |name: &str| metric(&scrape, name).unwrap_or(0.0);
    assert!(
        count("sluice_share_acquired_records_total") >= 600.0,
        "{scrape}"
    );
    assert!(
        count("sluice_share_acknowledged_records_total") >= 600.0,
        "{scrape}"
    );
    assert!(
        count("sluice_share_redelivered_records_total") >= 7.0,
        "{scrape}"
    );
    assert!(
        count("sluice_share_released_records_total") >= 3.0,
        "{scrape}"
    );
    assert!(
        count("sluice_share_archived_records_total") >= 1.0,
        "{scrape}"
    );
}

/// The leader of `topic`-`partition` as the cluster's metadata names it.
fn partition_leader(bootstrap: &str, topic: &str, partition: i32) -> Option<i32> {
    use rdkafka::consumer::{BaseConsumer, Consumer};
    let c: BaseConsumer = rdkafka::ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .create()
        .ok()?;
    let md = c
        .fetch_metadata(Some(topic), std::time::Duration::from_secs(5))
        .ok()?;
    let t = md.topics().first()?;
    let p = t.partitions().iter().find(|p| p.id() == partition)?;
    (p.leader() >= 0).then_some(p.leader())
}

/// Share groups survive kill -9 (KIP-932 durability): three Java 4.4 KafkaShareConsumers
/// accept 4,000 records of a partition replicated on three nodes while the test kills the
/// partition's leader, brings it back, then kills the share coordinator of the partition's
/// state (the leader of its `__share_group_state` partition). No record is accepted twice
/// (an acknowledgement that succeeded is never undone by a failover), every record is
/// delivered, and in the end the share-partition start offset is past all of them: every
/// record accepted, none lost.
#[test]
fn java_share_consumers_survive_killed_leader_and_share_coordinator() {
    use std::io::{BufRead, BufReader};
    use std::sync::mpsc;
    use std::time::{Duration, Instant};
    const RECORDS: usize = 4_000;
    const STATE_PARTITIONS: i32 = 3;
    let mut nodes = sluice_testkit::TestServer::start_all(
        sluice_bin(),
        &sluice_testkit::combined_nodes(&[
            "broker.session.timeout.ms=2000",
            "broker.heartbeat.interval.ms=250",
            "controller.quorum.election.timeout.ms=500",
            "offsets.topic.replication.factor=3",
            "default.replication.factor=3",
            "min.insync.replicas=2",
            "share.coordinator.state.topic.num.partitions=3",
            "group.share.min.record.lock.duration.ms=1000",
            "group.share.record.lock.duration.ms=3000",
            "group.share.delivery.count.limit=10",
        ]),
    );
    let addrs: Vec<String> = nodes.iter().map(|n| n.bootstrap.clone()).collect();
    let b = addrs.join(",");
    {
        use rdkafka::admin::{AdminOptions, NewTopic, TopicReplication};
        let t = NewTopic::new("jobs", 1, TopicReplication::Fixed(3));
        for r in block_on(admin(&b).create_topics([&t], &AdminOptions::new())).expect("create") {
            r.unwrap_or_else(|(t, e)| panic!("create {t}: {e:?}"));
        }
    }
    let records: Vec<(Vec<u8>, Vec<u8>, Option<i64>)> = (0..RECORDS)
        .map(|i| {
            (
                i.to_string().into_bytes(),
                format!("job {i}").into_bytes(),
                None,
            )
        })
        .collect();
    // Jobs arrive in small batches: a share fetch acquires whole batches, and one batch of
    // all 4,000 would outlive its lock in a consumer that takes 5 ms a record.
    produce_all(
        &producer(&b, &[("acks", "all"), ("batch.num.messages", "50")]),
        "jobs",
        &records,
    );
    let cp = java_build("kafka4", "4.4.0");
    let mut java = Killed(
        Command::new("java")
            .args([
                "-cp",
                &cp,
                "interop.ShareFailover",
                &b,
                "jobs",
                "failover",
                "3",
            ])
            .current_dir(repo_root().join("interop/java"))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("java"),
    );
    let (tx, rx) = mpsc::channel::<String>();
    let stdout = java.0.stdout.take().expect("stdout");
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let mut out = String::new();
    let mut accepted = 0usize;
    let mut topic_id = String::new();
    // Read the program's lines until `done` says so; a minute without a line fails.
    let mut read_until = |done: &mut dyn FnMut(usize, &str) -> bool| loop {
        let line = rx
            .recv_timeout(Duration::from_secs(90))
            .unwrap_or_else(|_| panic!("the share consumers stalled after {accepted}:\n{out}"));
        if line.starts_with("ACCEPTED ") {
            accepted += 1;
        } else {
            out.push_str(&line);
            out.push('\n');
        }
        if let Some(id) = line.strip_prefix("TOPIC_ID ") {
            topic_id = id.trim().to_string();
        }
        if done(accepted, &line) {
            return (accepted, topic_id.clone(), out.clone());
        }
    };
    let kill_leader_of = |nodes: &mut Vec<sluice_testkit::TestServer>, topic: &str, p: i32| {
        let deadline = Instant::now() + Duration::from_secs(30);
        let leader = loop {
            if let Some(l) = partition_leader(&b, topic, p) {
                break l;
            }
            assert!(Instant::now() < deadline, "no leader for {topic}-{p}");
            std::thread::sleep(Duration::from_millis(100));
        };
        let i = (leader - 1) as usize;
        nodes[i].kill();
        i
    };
    // The share-partition leader, mid-stream.
    read_until(&mut |n, _| n >= 800);
    let killed = kill_leader_of(&mut nodes, "jobs", 0);
    read_until(&mut |n, _| n >= 1_600);
    sluice_testkit::TestServer::restart_all(&mut [&mut nodes[killed]]);
    // The share coordinator of the partition's state.
    let (_, id, _) = read_until(&mut |n, _| n >= 2_200);
    assert!(!id.is_empty(), "no topic id printed");
    let key = format!("failover:{id}:0");
    let hash = key
        .encode_utf16()
        .fold(0i32, |h, c| h.wrapping_mul(31).wrapping_add(i32::from(c)));
    let state_partition = if hash == i32::MIN { 0 } else { hash.abs() } % STATE_PARTITIONS;
    let killed = kill_leader_of(&mut nodes, "__share_group_state", state_partition);
    read_until(&mut |n, _| n >= 3_000);
    sluice_testkit::TestServer::restart_all(&mut [&mut nodes[killed]]);
    let stdin = java.0.stdin.as_mut().expect("stdin");
    writeln!(stdin, "finish").expect("finish");
    stdin.flush().expect("flush");
    let (_, _, out) = read_until(&mut |_, line| line.starts_with("START "));
    assert!(
        out.contains("\nTWICE\n"),
        "a record was accepted twice:\n{out}"
    );
    assert!(
        out.contains(&format!("RECEIVED {RECORDS}\n")),
        "not every record was delivered:\n{out}"
    );
    assert!(
        out.contains(&format!("START {RECORDS}\n")),
        "records left unaccepted:\n{out}"
    );
}

/// `sluice share-groups` as kafka-share-groups.sh, on the state Java 4.4 share consumers left:
/// list, describe (start offset and lag), reset to the earliest offset, delete.
#[test]
fn share_groups_tool_shows_and_resets_what_java_share_consumers_left() {
    use std::io::Read;
    const RECORDS: usize = 200;
    let server = start(SHARE_TEST_SETTINGS);
    let b = server.bootstrap.clone();
    let records: Vec<(Vec<u8>, Vec<u8>, Option<i64>)> = (0..RECORDS)
        .map(|i| (i.to_string().into_bytes(), b"job".to_vec(), None))
        .collect();
    produce_all(
        &producer(&b, &[("batch.num.messages", "50")]),
        "jobs",
        &records,
    );
    let cp = java_build("kafka4", "4.4.0");
    let mut java = Killed(
        Command::new("java")
            .args([
                "-cp",
                &cp,
                "interop.ShareFailover",
                &b,
                "jobs",
                "failover",
                "2",
            ])
            .current_dir(repo_root().join("interop/java"))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("java"),
    );
    // Finish once every record was delivered and the consumers went idle.
    writeln!(java.0.stdin.as_mut().expect("stdin"), "finish").expect("finish");
    let mut out = String::new();
    java.0
        .stdout
        .take()
        .expect("stdout")
        .read_to_string(&mut out)
        .expect("read");
    assert!(out.contains(&format!("START {RECORDS}\n")), "{out}");
    // The consumers closed (left the group): the state is the tools' to show and change.
    java.0.wait().expect("java exits");
    let cli = |args: &[&str]| {
        let o = Command::new(sluice_bin())
            .arg("share-groups")
            .args(args)
            .env("SLUICE_BOOTSTRAP", &b)
            .output()
            .expect("sluice");
        let text = String::from_utf8_lossy(&o.stdout).into_owned();
        assert!(
            o.status.success(),
            "share-groups {args:?}: {text}{}",
            String::from_utf8_lossy(&o.stderr)
        );
        text
    };
    let row = |text: &str| -> Vec<String> {
        let line = text
            .lines()
            .find(|l| l.starts_with("failover "))
            .unwrap_or_else(|| panic!("no row:\n{text}"));
        line.split_whitespace().map(str::to_string).collect()
    };
    assert!(cli(&["--list"]).lines().any(|l| l.trim() == "failover"));
    let described = cli(&["--describe", "--group", "failover"]);
    assert_eq!(
        row(&described),
        ["failover", "jobs", "0", "200", "0"],
        "{described}"
    );
    cli(&[
        "--reset-offsets",
        "--group",
        "failover",
        "--topic",
        "jobs",
        "--to-earliest",
        "--execute",
    ]);
    let described = cli(&["--describe", "--group", "failover"]);
    assert_eq!(
        row(&described),
        ["failover", "jobs", "0", "0", "200"],
        "{described}"
    );
    assert!(cli(&["--delete", "--group", "failover"]).contains("deleted"));
    assert!(!cli(&["--list"]).lines().any(|l| l.trim() == "failover"));
}

/// Share groups with confluent-kafka's ShareConsumer (librdkafka 2.15+).
#[test]
fn python_share_consumer() {
    let server = start(SHARE_TEST_SETTINGS);
    let script = repo_root().join("interop/python/share_consumer.py");
    let out = must_succeed(
        Command::new("python3").arg(script).arg(&server.bootstrap),
        "confluent-kafka share consumer",
    );
    assert!(out.contains("share-consumer OK"), "{out}");
}
