//! The `sluice server` front door: defaults, configuration sources, bad configuration, clean
//! shutdown with a request in flight, and background retention.

mod common;
#[path = "common/wire.rs"]
mod wire;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::*;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::{ApiKey, BrokerId, FetchRequest, FetchResponse, TopicName};
use kafka_protocol::protocol::StrBytes;
use rdkafka::consumer::Consumer;

/// Run `sluice` with arguments to completion (it must exit by itself).
fn run(args: &[&str], env: &[(&str, &str)]) -> (i32, String, String) {
    let dir = tempfile::tempdir().unwrap();
    let mut cmd = Command::new(sluice_bin());
    // A run that gets as far as binding must not collide with a server already running here
    // (or another test): free ports unless the arguments name their own.
    cmd.args(args)
        .env("SLUICE_LISTENERS", "PLAINTEXT://127.0.0.1:0")
        .env("SLUICE_ADMIN_HTTP_LISTENER", "127.0.0.1:0")
        .current_dir(dir.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn invalid_configuration_stops_startup_with_one_line_naming_the_key() {
    let (code, _, err) = run(&["server", "--override", "num.partitions=zero"], &[]);
    assert_eq!(code, 1);
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.contains("num.partitions"), "{err}");

    let (code, _, err) = run(&["server"], &[("SLUICE_LOG_SEGMENT_BYTES", "huge")]);
    assert_eq!(code, 1);
    assert!(err.contains("log.segment.bytes"), "{err}");

    let (code, _, err) = run(&["server", "--override", "no-equals-sign"], &[]);
    assert_eq!(code, 1);
    assert!(err.contains("--override"), "{err}");

    let (code, _, err) = run(&["server", "--config", "/does/not/exist.properties"], &[]);
    assert_eq!(code, 1);
    assert!(err.contains("/does/not/exist.properties"), "{err}");

    let (code, _, err) = run(&["server", "--bogus-flag"], &[]);
    assert_eq!(code, 2, "wrong arguments exit 2: {err}");

    // Listener security: what is missing or unsupported is named, in one line.
    let two = "listeners=PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0";
    for (overrides, expect) in [
        (vec![two], "ssl.keystore.location"),
        (
            vec![two, "ssl.keystore.location=/does/not/exist.pem"],
            "/does/not/exist.pem",
        ),
        (
            vec![
                two,
                "ssl.keystore.location=x.pem",
                "ssl.client.auth=required",
            ],
            "ssl.truststore.location",
        ),
        (
            vec![two, "ssl.keystore.location=x.pem", "ssl.keystore.type=JKS"],
            "ssl.keystore.type",
        ),
        (
            vec!["listeners=PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0"],
            "GSSAPI is not supported",
        ),
        (
            vec![
                "listeners=PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
                "sasl.enabled.mechanisms=PLAIN",
            ],
            "listener.name.sasl_plaintext.plain.sasl.jaas.config is required",
        ),
        (
            vec![
                "listeners=PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
                "sasl.enabled.mechanisms=SCRAM-SHA-512",
                "connections.max.reauth.ms=-5",
            ],
            "connections.max.reauth.ms",
        ),
        (
            vec![
                "listeners=PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
                "sasl.enabled.mechanisms=OAUTHBEARER",
                "sasl.oauthbearer.jwks.endpoint.url=https://idp.example/jwks",
            ],
            "sasl.oauthbearer.jwks.endpoint.url: OAUTHBEARER on listener SASL_PLAINTEXT: a JWKS endpoint is used by Kafka's org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler",
        ),
        (
            vec![
                "listeners=PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
                "sasl.enabled.mechanisms=OAUTHBEARER",
                "listener.name.sasl_plaintext.oauthbearer.sasl.server.callback.handler.class=org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler",
                "sasl.oauthbearer.jwks.endpoint.url=https://idp.example/jwks",
                "sasl.oauthbearer.expected.issuer=https://idp.example",
            ],
            "sasl.oauthbearer.expected.audience: OAUTHBEARER on listener SASL_PLAINTEXT: with a JWKS endpoint, set the audiences",
        ),
        (
            vec![
                "listeners=PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
                "sasl.enabled.mechanisms=OAUTHBEARER",
                "listener.name.sasl_plaintext.oauthbearer.sasl.server.callback.handler.class=org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler",
                "sasl.oauthbearer.jwks.endpoint.url=file:/nonexistent/jwks.json",
                "sasl.oauthbearer.allow.unverified.audience=true",
                "sasl.oauthbearer.allow.unverified.issuer=true",
            ],
            "file:/nonexistent/jwks.json: No such file or directory",
        ),
        (
            vec![
                "listeners=PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
                "sasl.enabled.mechanisms=OAUTHBEARER",
                "listener.name.sasl_plaintext.oauthbearer.sasl.server.callback.handler.class=com.example.MyHandler",
            ],
            "not com.example.MyHandler",
        ),
        (
            vec!["log.dirs=/tmp/sluice-twice,/tmp/sluice-twice"],
            "log.dirs: /tmp/sluice-twice is listed twice",
        ),
        (
            vec![
                "listeners=SASL_PLAINTEXT://127.0.0.1:0",
                "sasl.enabled.mechanisms=OAUTHBEARER",
                "sasl.mechanism.inter.broker.protocol=OAUTHBEARER",
            ],
            "sasl.mechanism.inter.broker.protocol: OAUTHBEARER is not supported",
        ),
        (
            vec!["listeners=SSL://127.0.0.1:0", "ssl.keystore.location=x.pem"],
            "ssl.truststore.location is required: brokers connect to each other",
        ),
        (
            vec![
                "listeners=SASL_PLAINTEXT://127.0.0.1:0",
                "sasl.enabled.mechanisms=PLAIN",
                "listener.name.sasl_plaintext.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required user_a=\"b\";",
            ],
            "sasl.mechanism.inter.broker.protocol: GSSAPI is not supported",
        ),
        (
            vec![
                "listeners=SASL_PLAINTEXT://127.0.0.1:0",
                "sasl.enabled.mechanisms=PLAIN",
                "sasl.mechanism.inter.broker.protocol=PLAIN",
                "listener.name.sasl_plaintext.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required user_a=\"b\";",
            ],
            "needs a username=",
        ),
        (
            vec![
                "listeners=SASL_PLAINTEXT://127.0.0.1:0",
                "sasl.enabled.mechanisms=PLAIN",
                "sasl.mechanism.inter.broker.protocol=SCRAM-SHA-512",
                "listener.name.sasl_plaintext.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required user_a=\"b\";",
            ],
            "SCRAM-SHA-512 is not in sasl.enabled.mechanisms",
        ),
        (
            vec![
                "process.roles=broker,controller",
                "node.id=1",
                "listeners=PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:0",
                "controller.listener.names=CONTROLLER",
                "controller.quorum.voters=1@127.0.0.1:9093",
                "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:SASL_SSL",
                "ssl.keystore.location=x.pem",
                "sasl.enabled.mechanisms=PLAIN",
                "listener.name.controller.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required user_a=\"b\";",
            ],
            "controller listener CONTROLLER must be PLAINTEXT or SSL",
        ),
        (
            vec![
                "process.roles=broker,controller",
                "node.id=1",
                "listeners=PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:0",
                "controller.listener.names=CONTROLLER",
                "controller.quorum.voters=1@127.0.0.1:9093",
                "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:SSL",
                "ssl.keystore.location=x.pem",
            ],
            "ssl.truststore.location is required: nodes connect to the controllers",
        ),
        (
            vec!["listeners=FOO://127.0.0.1:0"],
            "listener FOO has no security protocol",
        ),
        (
            // A dynamic quorum's controller starts from formatted storage.
            vec![
                "process.roles=broker,controller",
                "node.id=1",
                "listeners=PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:0",
                "controller.listener.names=CONTROLLER",
                "controller.quorum.bootstrap.servers=127.0.0.1:9093",
            ],
            "format its storage first with `sluice storage format",
        ),
    ] {
        let mut args = vec!["server"];
        for o in &overrides {
            args.extend(["--override", o]);
        }
        let (code, _, err) = run(&args, &[]);
        assert_eq!(code, 1, "{overrides:?}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "{overrides:?}: {err}");
        assert!(err.contains(expect), "{overrides:?}: {err}");
    }
}

#[test]
fn defaults_put_data_in_sluice_data_under_the_working_directory() {
    let dir = tempfile::tempdir().unwrap();
    let mut child = Command::new(sluice_bin())
        .args(["server", "--override", "listeners=PLAINTEXT://127.0.0.1:0"])
        .args(["--override", "admin.http.listener=127.0.0.1:0"])
        .args(["--override", "schema.registry.listener=127.0.0.1:0"])
        .current_dir(dir.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let line = std::io::BufRead::lines(std::io::BufReader::new(stdout))
        .map_while(Result::ok)
        .find(|l| l.contains("listening on"))
        .expect("a listening line");
    assert!(line.contains("data in ./sluice-data"), "{line}");
    assert!(dir.path().join("sluice-data/meta.properties").exists());
    assert!(dir.path().join("sluice-data/__cluster_metadata-0").is_dir());
    let _ = Command::new("kill").arg(child.id().to_string()).status();
    assert!(child.wait().unwrap().success());
    assert!(dir.path().join("sluice-data/.kafka_cleanshutdown").exists());
}

#[test]
fn config_file_env_and_overrides_are_layered_and_unknown_keys_warned() {
    let dir = tempfile::tempdir().unwrap();
    let props = dir.path().join("server.properties");
    std::fs::write(&props, "# Kafka style\nnum.partitions=2\nlog.retention.hours=5\nzookeeper.connect=localhost:2181\n").unwrap();
    let data = dir.path().join("data");
    let mut child = Command::new(sluice_bin())
        .args(["server", "--config", props.to_str().unwrap()])
        .args(["--override", "listeners=PLAINTEXT://127.0.0.1:0"])
        .args(["--override", "admin.http.listener=127.0.0.1:0"])
        .args(["--override", "schema.registry.listener=127.0.0.1:0"])
        .args(["--override", &format!("log.dirs={}", data.display())])
        .args(["--override", "default.replication.factor=1"])
        .env("SLUICE_NUM_PARTITIONS", "3")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = Vec::new();
    for line in std::io::BufRead::lines(std::io::BufReader::new(child.stdout.take().unwrap()))
        .map_while(Result::ok)
    {
        let done = line.contains("listening on");
        lines.push(line);
        if done {
            break;
        }
    }
    assert!(
        lines
            .iter()
            .any(|l| l.contains("unknown configuration key 'zookeeper.connect'")),
        "{lines:?}"
    );
    let last = lines.last().expect("a listening line");
    let bootstrap: String = last
        .split("PLAINTEXT://")
        .nth(1)
        .unwrap()
        .chars()
        .take_while(|c| !c.is_whitespace())
        .collect();
    // The environment (3) beats the file (2) for num.partitions.
    let c = consumer(&bootstrap, &[("allow.auto.create.topics", "true")]);
    let meta = c
        .fetch_metadata(Some("auto-created"), Duration::from_secs(10))
        .unwrap();
    assert_eq!(meta.topics()[0].partitions().len(), 3);
    // The file's log.retention.hours=5 shapes the topic default retention.ms.
    let a = admin(&bootstrap);
    let res = block_on(a.describe_configs(
        [&rdkafka::admin::ResourceSpecifier::Topic("auto-created")],
        &rdkafka::admin::AdminOptions::new(),
    ))
    .unwrap();
    let cfg = res[0].as_ref().unwrap();
    assert_eq!(
        cfg.get("retention.ms").and_then(|e| e.value.as_deref()),
        Some("18000000")
    );
    let _ = Command::new("kill").arg(child.id().to_string()).status();
    assert!(child.wait().unwrap().success());
}

#[test]
fn sigterm_lets_an_in_flight_request_finish_then_exits_zero() {
    let mut server = start(&[]);
    create_topic(&server.bootstrap, "idle", 1, &[]);
    let mut w = wire::Wire::connect(&server.bootstrap);
    let req = FetchRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_max_wait_ms(1500)
        .with_min_bytes(1)
        .with_max_bytes(1 << 20)
        .with_topics(vec![FetchTopic::default()
            .with_topic(TopicName(StrBytes::from_static_str("idle")))
            .with_partitions(vec![FetchPartition::default()
                .with_partition(0)
                .with_partition_max_bytes(1 << 20)])]);
    let id = w.send(ApiKey::Fetch, 12, &req);
    // The fetch is parked (nothing to read) when the signal arrives.
    std::thread::sleep(Duration::from_millis(200));
    let pid = server.pid();
    let killer = std::thread::spawn(move || {
        Command::new("kill")
            .arg("-TERM")
            .arg(pid.to_string())
            .status()
    });
    let resp: FetchResponse = w.recv(ApiKey::Fetch, 12, id);
    assert_eq!(resp.responses[0].partitions[0].error_code, 0);
    killer.join().unwrap().unwrap();
    let status = server.stop_after_signal();
    assert!(status.success(), "{status}");
}

#[test]
fn retention_deletes_expired_segments_in_the_background() {
    let server = start(&["log.retention.check.interval.ms=100"]);
    create_topic(
        &server.bootstrap,
        "short",
        1,
        &[("retention.ms", "60000"), ("segment.bytes", "4096")],
    );
    let old = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
        - 3_600_000;
    let records: Vec<_> = (0..300)
        .map(|i| (format!("k{i}").into_bytes(), vec![b'x'; 100], Some(old)))
        .collect();
    produce_all(
        &producer(&server.bootstrap, &[("linger.ms", "0")]),
        "short",
        &records,
    );
    let c = consumer(&server.bootstrap, &[]);
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (low, high) = c
            .fetch_watermarks("short", 0, Duration::from_secs(5))
            .unwrap();
        if low > 0 {
            assert!(low <= high);
            break;
        }
        assert!(
            Instant::now() < deadline,
            "retention never advanced the log start offset"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let segments = std::fs::read_dir(server.data_dir().join("short-0"))
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .path()
                .extension()
                .is_some_and(|x| x == "log")
        })
        .count();
    assert_eq!(segments, 1, "only the (empty) active segment remains");
}

/// `sluice storage format` as `kafka-storage format`: a cluster id that is not a UUID, a
/// dynamic quorum's controller without its start, or a directory formatted twice are
/// refused with one line.
#[test]
fn storage_format_prepares_a_dynamic_controller_and_refuses_mistakes() {
    let dir = tempfile::tempdir().unwrap();
    let data = format!("log.dirs={}", dir.path().join("data").display());
    let port = sluice_testkit::free_port();
    let node = [
        "process.roles=broker,controller".to_string(),
        "node.id=1".into(),
        format!("listeners=PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:{port}"),
        "controller.listener.names=CONTROLLER".into(),
        format!("controller.quorum.bootstrap.servers=127.0.0.1:{port}"),
        data,
    ];
    let with = |extra: &[&str]| {
        let mut args = vec!["storage", "format"];
        for o in &node {
            args.extend(["--override", o.as_str()]);
        }
        args.extend(extra);
        run(&args, &[])
    };
    let (code, out, _) = run(&["storage", "random-uuid"], &[]);
    assert_eq!(code, 0);
    let id = out.trim().to_string();
    assert_eq!(id.len(), 22, "{id}");
    for (extra, code_wanted, expect) in [
        (
            vec!["--cluster-id", "nope", "--standalone"],
            1,
            "does not appear to be a valid UUID",
        ),
        (
            vec!["--cluster-id", &id],
            1,
            "you must specify one of the following: --standalone",
        ),
        (
            vec![
                "--cluster-id",
                &id,
                "--standalone",
                "--no-initial-controllers",
            ],
            2,
            "cannot be used with",
        ),
        (
            vec!["--cluster-id", &id, "--initial-controllers", "1@h:1"],
            1,
            "is not id@host:port:directory-id",
        ),
    ] {
        let (code, _, err) = with(&extra);
        assert_eq!(code, code_wanted, "{extra:?}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "{extra:?}: {err}");
        assert!(err.contains(expect), "{extra:?}: {err}");
    }
    let (code, out, err) = with(&["--cluster-id", &id, "--standalone"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("Formatted"), "{out}");
    let (code, _, err) = with(&["--cluster-id", &id, "--standalone"]);
    assert_eq!(code, 1);
    assert!(err.contains("is already formatted"), "{err}");
    let (code, out, _) = with(&["--cluster-id", &id, "--standalone", "--ignore-formatted"]);
    assert_eq!(code, 0);
    assert!(out.contains("already formatted"), "{out}");
    // meta.properties as Kafka writes it, and the quorum the controller starts from: itself.
    let meta = std::fs::read_to_string(dir.path().join("data/meta.properties")).unwrap();
    assert!(meta.contains(&format!("cluster.id={id}")), "{meta}");
    assert!(
        meta.contains("node.id=1") && meta.contains("version=1"),
        "{meta}"
    );
    let directory = meta
        .lines()
        .find_map(|l| l.strip_prefix("directory.id="))
        .unwrap();
    let start = std::fs::read_to_string(dir.path().join("data/initial-controllers")).unwrap();
    assert_eq!(start.trim(), format!("1@127.0.0.1:{port}:{directory}"));
}
