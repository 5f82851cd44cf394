use super::*;

#[test]
fn throttled_replica_lists_and_per_ip_overrides() {
    let check = |k: &str, v: &str| validate_topic_configs([(k, Some(v))]);
    let key = "leader.replication.throttled.replicas";
    for ok in ["", "*", "0:1", "0:1, 1:2,2:3"] {
        assert!(check(key, ok).is_ok(), "{ok}");
    }
    for bad in ["0", "a:1", "0:1,x", "*,0:1"] {
        assert!(check(key, bad).is_err(), "{bad}");
    }
    assert!(names_replica("*", 5, 9));
    assert!(names_replica("0:1, 1:2", 1, 2));
    assert!(!names_replica("0:1,1:2", 1, 1));
    assert!(!names_replica("", 0, 1));
    let d = broker_def("max.connections.per.ip.overrides").unwrap();
    assert!(validate(d, "127.0.0.1:5,host.example:0").is_ok());
    for bad in ["127.0.0.1", ":3", "h:-1", "h:x"] {
        assert!(validate(d, bad).is_err(), "{bad}");
    }
    assert_eq!(
        parse_per_ip_overrides("::1:4, a:2"),
        Some(vec![("::1".to_string(), 4), ("a".to_string(), 2)])
    );
    for k in [
        "leader.replication.throttled.rate",
        "max.connections.per.ip",
        "log.retention.ms",
    ] {
        assert!(dynamic_broker_key(k), "{k}");
    }
    // Kafka 4.4 settings Sluice accepts without acting on them, changed at runtime as in
    // Kafka, also per listener.
    for k in [
        "sasl.kerberos.min.time.before.relogin",
        "listener.name.sasl_ssl.sasl.kerberos.min.time.before.relogin",
        "num.io.threads",
    ] {
        assert!(dynamic_broker_key(k), "{k}");
    }
    assert!(!dynamic_broker_key("sasl.login.class"));
    // As Kafka: a topic default's first broker synonym only; static keys stay static.
    for k in [
        "log.retention.hours",
        "log.roll.hours",
        "log.dirs",
        "node.id",
    ] {
        assert!(!dynamic_broker_key(k), "{k}");
    }
}

fn build(pairs: &[(Origin, &str, &str)]) -> Result<(BrokerConfig, Vec<String>), ConfigError> {
    let owned: Vec<(Origin, String, String)> = pairs
        .iter()
        .map(|(o, k, v)| (*o, k.to_string(), v.to_string()))
        .collect();
    BrokerConfig::build(&owned)
}

#[test]
fn defaults_are_kafkas() {
    let (c, w) = build(&[]).unwrap();
    assert!(w.is_empty());
    assert_eq!(c.node_id(), 0);
    assert_eq!(c.num_partitions(), 1);
    assert!(c.auto_create_topics());
    assert_eq!(c.socket_request_max_bytes(), 104_857_600);
    assert_eq!(c.value("log.segment.bytes").as_deref(), Some("1073741824"));
    assert_eq!(c.value("log.index.interval.bytes").as_deref(), Some("4096"));
    assert_eq!(c.topic_default("retention.ms").unwrap().0, "604800000");
    assert_eq!(c.listeners()[0].port, 9092);
    assert_eq!(c.log_dirs(), vec![PathBuf::from("./sluice-data")]);
}

#[test]
fn ssl_settings_may_be_given_per_listener() {
    let o = Origin::Override;
    let (c, w) = build(&[
        (o, "listeners", "PLAINTEXT://:0,INTERNAL://:0,EXTERNAL://:0"),
        (
            o,
            "listener.security.protocol.map",
            "PLAINTEXT:PLAINTEXT,INTERNAL:SSL,EXTERNAL:SSL",
        ),
        (o, "ssl.keystore.location", "shared.pem"),
        (o, "listener.name.external.ssl.keystore.location", "ext.pem"),
        (o, "listener.name.external.ssl.client.auth", "required"),
        (
            o,
            "listener.name.external.ssl.truststore.location",
            "ca.pem",
        ),
    ])
    .unwrap();
    assert!(w.is_empty(), "{w:?}");
    assert_eq!(
        c.security_protocol("EXTERNAL").unwrap(),
        SecurityProtocol::Ssl
    );
    let v = |l: &str, k: &str| c.listener_value(l, k).unwrap_or_default();
    assert_eq!(v("EXTERNAL", "ssl.keystore.location"), "ext.pem");
    assert_eq!(v("INTERNAL", "ssl.keystore.location"), "shared.pem");
    assert_eq!(v("EXTERNAL", "ssl.client.auth"), "required");
    assert_eq!(v("INTERNAL", "ssl.client.auth"), "none");
    // A per-listener value is checked like the broker-wide one.
    let e = build(&[(o, "listener.name.x.ssl.client.auth", "sometimes")]).unwrap_err();
    assert_eq!(e.key, "listener.name.x.ssl.client.auth");
    // Only ssl.* settings are per listener here.
    let (_, w) = build(&[(o, "listener.name.x.num.partitions", "3")]).unwrap();
    assert_eq!(w.len(), 1);
}

#[test]
fn sasl_listeners_need_supported_mechanisms_and_plain_users() {
    let o = Origin::Override;
    let base = [
        (o, "listeners", "PLAINTEXT://:0,SECURE://:0,INNER://:0"),
        (
            o,
            "listener.security.protocol.map",
            "PLAINTEXT:PLAINTEXT,SECURE:SASL_SSL,INNER:SASL_PLAINTEXT",
        ),
        (o, "ssl.keystore.location", "server.pem"),
    ];
    let with = |extra: &[(Origin, &'static str, &'static str)]| {
        let mut v = base.to_vec();
        v.extend_from_slice(extra);
        build(&v)
    };
    // Kafka's default mechanism (GSSAPI) is refused with the supported list.
    let e = with(&[]).unwrap_err();
    assert_eq!(e.key, "sasl.enabled.mechanisms");
    assert!(e.message.contains("GSSAPI is not supported"), "{e}");
    let jaas = r#"org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="a" user_admin="a" user_alice="al\"ice";"#;
    let (c, w) = with(&[
        (o, "sasl.enabled.mechanisms", "SCRAM-SHA-512"),
        (
            o,
            "listener.name.inner.sasl.enabled.mechanisms",
            "PLAIN,SCRAM-SHA-256",
        ),
        (o, "listener.name.inner.plain.sasl.jaas.config", jaas),
    ])
    .unwrap();
    assert!(w.is_empty(), "{w:?}");
    assert_eq!(c.sasl_mechanisms("SECURE"), vec!["SCRAM-SHA-512"]);
    assert_eq!(c.sasl_mechanisms("INNER"), vec!["PLAIN", "SCRAM-SHA-256"]);
    let users = c.plain_users("INNER").unwrap();
    assert_eq!(users["alice"], "al\"ice");
    assert_eq!(users.len(), 2);
    // PLAIN without its users, a broken JAAS entry, and the SSL half of SASL_SSL.
    let e = with(&[(o, "sasl.enabled.mechanisms", "PLAIN")]).unwrap_err();
    assert_eq!(e.key, "listener.name.secure.plain.sasl.jaas.config");
    let e = with(&[
        (o, "sasl.enabled.mechanisms", "PLAIN"),
        (
            o,
            "listener.name.secure.plain.sasl.jaas.config",
            "Foo required",
        ),
        (o, "listener.name.inner.plain.sasl.jaas.config", jaas),
    ])
    .unwrap_err();
    assert!(e.message.contains("';'"), "{e}");
    let e = build(&[
        (o, "listeners", "PLAINTEXT://:0,SECURE://:0"),
        (
            o,
            "listener.security.protocol.map",
            "PLAINTEXT:PLAINTEXT,SECURE:SASL_SSL",
        ),
        (o, "sasl.enabled.mechanisms", "SCRAM-SHA-256"),
    ])
    .unwrap_err();
    assert_eq!(e.key, "ssl.keystore.location");
    let e = with(&[
        (o, "sasl.enabled.mechanisms", "SCRAM-SHA-256"),
        (o, "connections.max.reauth.ms", "-1"),
    ])
    .unwrap_err();
    assert_eq!(e.key, "connections.max.reauth.ms");
}

#[test]
fn precedence_unknown_keys_and_invalid_values() {
    let (c, w) = build(&[
        (Origin::Override, "num.partitions", "6"),
        (Origin::File, "num.partitions", "3"),
        (Origin::File, "zookeeper.connect", "x"),
        (Origin::Env, "log.retention.hours", "2"),
    ])
    .unwrap();
    assert_eq!(c.num_partitions(), 6);
    assert_eq!(
        w,
        vec!["unknown configuration key 'zookeeper.connect' is ignored".to_string()]
    );
    assert_eq!(c.topic_default("retention.ms").unwrap().0, "7200000");
    let err = build(&[(Origin::File, "num.partitions", "zero")]).unwrap_err();
    assert_eq!(err.key, "num.partitions");
    assert!(err.to_string().contains("num.partitions"), "{err}");
    assert!(build(&[(Origin::File, "num.partitions", "0")]).is_err());
    assert!(build(&[(Origin::File, "listeners", "nonsense")]).is_err());
    assert!(build(&[(Origin::File, "auto.create.topics.enable", "yes")]).is_err());
}

#[test]
fn env_names_map_like_kafka_images() {
    assert_eq!(
        env_key_to_config("SLUICE_LOG_SEGMENT_BYTES").as_deref(),
        Some("log.segment.bytes")
    );
    assert_eq!(
        env_key_to_config("SLUICE_A__B___C").as_deref(),
        Some("a_b-c")
    );
    assert_eq!(env_key_to_config("SLUICE_BOOTSTRAP"), None);
    assert_eq!(env_key_to_config("OTHER"), None);
}

#[test]
fn topic_config_validation_and_description() {
    assert!(validate_topic_configs([("retention.ms", Some("1000"))]).is_ok());
    assert_eq!(
        validate_topic_configs([("nope", Some("1"))]).unwrap_err(),
        "Unknown topic config name: nope"
    );
    assert!(validate_topic_configs([("retention.ms", Some("x"))])
        .unwrap_err()
        .contains("Not a number"));
    assert!(validate_topic_configs([("cleanup.policy", Some("compact,delete"))]).is_ok());
    assert!(validate_topic_configs([("cleanup.policy", Some("shred"))]).is_err());
    assert!(validate_topic_configs([("compression.type", Some("brotli"))]).is_err());
    let (broker, _) = build(&[(Origin::File, "log.segment.bytes", "2048")]).unwrap();
    let mut overrides = BTreeMap::new();
    overrides.insert("retention.ms".to_string(), "5".to_string());
    let d = describe_topic(&broker, &overrides);
    assert_eq!(d.len(), TOPIC_CONFIGS.len());
    let r = d.iter().find(|e| e.name == "retention.ms").unwrap();
    assert_eq!(
        (r.value.as_deref(), r.source),
        (Some("5"), ConfigSource::TopicConfig)
    );
    let s = d.iter().find(|e| e.name == "segment.bytes").unwrap();
    assert_eq!(
        (s.value.as_deref(), s.source),
        (Some("2048"), ConfigSource::StaticBrokerConfig)
    );
    let m = d.iter().find(|e| e.name == "max.message.bytes").unwrap();
    assert_eq!(
        (m.value.as_deref(), m.source),
        (Some("1048588"), ConfigSource::DefaultConfig)
    );
}

/// Every broker and topic config a default Kafka 4.4 node describes is described by Sluice
/// with Kafka's type, sensitivity, read-only flag and default, except the differences listed
/// here (each with its reason; the README gives them too).
#[test]
fn configs_are_described_as_kafka_4_4_describes_them() {
    // Sluice's defaults that differ on purpose: a node that runs with no configuration.
    const OWN_DEFAULTS: &[&str] = &[
        "listeners",
        "log.dir",
        "log.dirs",
        "process.roles",
        "node.id",
        "controller.listener.names",
        "controller.quorum.voters",
        "advertised.listeners",
        "listener.security.protocol.map",
        "metadata.log.dir",
        "auto.create.topics.enable",
        "offsets.topic.replication.factor",
        "transaction.state.log.replication.factor",
        "transaction.state.log.min.isr",
        // Sluice reads PEM key and trust stores only.
        "ssl.keystore.type",
        "ssl.truststore.type",
    ];
    // Changed at runtime in Kafka, read at startup by Sluice (a restart applies them):
    // listeners cannot be added or removed at runtime, the producer-state expiry is fixed
    // when the log manager starts, and TLS/SASL settings change at runtime only as a
    // listener's key or trust store (`listener.name.<l>.ssl.keystore.location`, ...).
    const READ_AT_STARTUP: &[&str] = &[
        "listeners",
        "listener.security.protocol.map",
        "producer.id.expiration.ms",
        "sasl.enabled.mechanisms",
        "sasl.jaas.config",
        "sasl.mechanism.inter.broker.protocol",
        "ssl.client.auth",
        "ssl.enabled.protocols",
        "ssl.endpoint.identification.algorithm",
        "ssl.key.password",
        "ssl.keystore.location",
        "ssl.keystore.type",
        "ssl.truststore.location",
        "ssl.truststore.type",
    ];
    let (broker, _) = build(&[]).unwrap();
    let described = describe_broker(&broker);
    let mut problems = Vec::new();
    let mut compare = |what: &str, k: &KafkaConfig, d: Option<&DescribedConfig>| {
        let Some(d) = d else {
            problems.push(format!("{what} {}: not described", k.name));
            return;
        };
        if d.ty != k.ty {
            problems.push(format!(
                "{what} {}: type {:?}, Kafka {:?}",
                k.name, d.ty, k.ty
            ));
        }
        if d.sensitive != k.sensitive {
            problems.push(format!("{what} {}: sensitive {}", k.name, d.sensitive));
        }
        if d.read_only == k.dynamic && !READ_AT_STARTUP.contains(&k.name) {
            problems.push(format!("{what} {}: read-only {}", k.name, d.read_only));
        }
        // As interop/kafka/DumpConfigs.java reads Kafka's answer.
        let default = if d.source == ConfigSource::DefaultConfig {
            d.value.as_deref()
        } else {
            d.synonyms
                .iter()
                .find(|s| s.2 == ConfigSource::DefaultConfig)
                .and_then(|s| s.1.as_deref())
        };
        if default != k.default && !OWN_DEFAULTS.contains(&k.name) {
            problems.push(format!(
                "{what} {}: default {default:?}, Kafka {:?}",
                k.name, k.default
            ));
        }
    };
    for k in kafka_broker_configs() {
        compare("broker", k, described.iter().find(|d| d.name == k.name));
    }
    let topic = describe_topic(&broker, &BTreeMap::new());
    for k in kafka_topic_configs() {
        compare("topic", k, topic.iter().find(|d| d.name == k.name));
    }
    assert!(kafka_broker_configs().len() > 300 && kafka_topic_configs().len() > 30);
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// The README lists exactly the Kafka 4.4 broker configs Sluice accepts without acting on.
#[test]
fn the_readme_lists_the_configs_sluice_does_not_act_on() {
    let readme = include_str!("../../../../README.md");
    let block = readme
        .split("<summary>Kafka 4.4 broker configs Sluice accepts and does not act on</summary>")
        .nth(1)
        .and_then(|rest| rest.split("</details>").next())
        .expect("README block of configs not acted on");
    let listed: std::collections::BTreeSet<&str> = block.split('`').skip(1).step_by(2).collect();
    let accepted: std::collections::BTreeSet<&str> =
        accepted_broker_configs().iter().map(|d| d.name).collect();
    assert_eq!(listed, accepted);
    assert!(accepted
        .iter()
        .all(|n| broker_def(n).is_some_and(|d| d.doc == NOT_ACTED_ON)));
}

/// The consumer group protocol's broker configs are checked as Kafka's GroupCoordinatorConfig
/// checks them, with its messages.
#[test]
fn consumer_group_timeouts_are_checked_against_their_bounds() {
    let refused = |pairs: &[(&str, &str)]| {
        let pairs: Vec<(Origin, &str, &str)> =
            pairs.iter().map(|(k, v)| (Origin::File, *k, *v)).collect();
        build(&pairs).err().map(|e| e.message)
    };
    assert_eq!(refused(&[]), None);
    assert_eq!(
        refused(&[("group.consumer.session.timeout.ms", "6000")]).as_deref(),
        Some("group.consumer.session.timeout.ms must be greater than or equal to group.consumer.min.session.timeout.ms")
    );
    assert_eq!(
        refused(&[
            ("group.consumer.min.session.timeout.ms", "6000"),
            ("group.consumer.session.timeout.ms", "6000"),
            ("group.consumer.min.heartbeat.interval.ms", "500"),
            ("group.consumer.heartbeat.interval.ms", "500"),
        ]),
        None
    );
    assert_eq!(
        refused(&[("group.consumer.heartbeat.interval.ms", "20000")]).as_deref(),
        Some("group.consumer.heartbeat.interval.ms must be less than or equal to group.consumer.max.heartbeat.interval.ms")
    );
    assert_eq!(
        refused(&[
            ("group.consumer.max.heartbeat.interval.ms", "50000"),
            ("group.consumer.heartbeat.interval.ms", "45000"),
        ])
        .as_deref(),
        Some("group.consumer.heartbeat.interval.ms must be less than group.consumer.session.timeout.ms")
    );
    // The same checks for streams groups (KIP-1071).
    assert_eq!(
        refused(&[("group.streams.session.timeout.ms", "6000")]).as_deref(),
        Some("group.streams.session.timeout.ms must be greater than or equal to group.streams.min.session.timeout.ms")
    );
    assert_eq!(
        refused(&[("group.streams.heartbeat.interval.ms", "2000")]).as_deref(),
        Some("group.streams.heartbeat.interval.ms must be greater than or equal to group.streams.min.heartbeat.interval.ms")
    );
    assert!(refused(&[("group.consumer.assignors", "sticky")])
        .is_some_and(|m| m.contains("unknown assignor sticky")));
    assert!(
        refused(&[("group.coordinator.rebalance.protocols", "consumer")])
            .is_some_and(|m| m.contains("must contain classic"))
    );
}

#[test]
fn tiered_storage_configs_follow_kafka_s_rules() {
    let m = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    };
    let broker = BrokerConfig::default();
    let default = |k: &str| broker.topic_default(k).map(|(v, _)| v);
    let check = |enabled: bool, old: &[(&str, &str)], new: &[(&str, &str)]| {
        validate_tiered_storage(enabled, &default, &m(old), &m(new))
    };
    let on = [("remote.storage.enable", "true")];
    assert!(check(true, &[], &on).is_ok());
    assert!(check(false, &[], &[]).is_ok());
    assert!(check(false, &[], &on)
        .unwrap_err()
        .starts_with("Tiered Storage functionality is disabled in the broker."));
    let compact = [
        ("remote.storage.enable", "true"),
        ("cleanup.policy", "compact"),
    ];
    assert!(check(true, &[], &compact)
        .unwrap_err()
        .contains("only supports topics with cleanup.policy=delete"));
    let too_long = [
        ("remote.storage.enable", "true"),
        ("retention.ms", "1000"),
        ("local.retention.ms", "2000"),
    ];
    assert_eq!(
        check(true, &[], &too_long).unwrap_err(),
        "Invalid value 2000 for configuration local.retention.ms: Value must not be more than \
         retention.ms property value: 1000"
    );
    let minus_one = [
        ("remote.storage.enable", "true"),
        ("retention.bytes", "1000"),
        ("local.retention.bytes", "-1"),
    ];
    assert!(check(true, &[], &minus_one)
        .unwrap_err()
        .contains("Value must not be -1 as retention.bytes value is set as 1000."));
    // Infinite total retention: any local value.
    let unbounded = [
        ("remote.storage.enable", "true"),
        ("retention.ms", "-1"),
        ("local.retention.ms", "5000"),
    ];
    assert!(check(true, &[], &unbounded).is_ok());
    // Turning it off needs remote.log.delete.on.disable.
    let off = [("remote.storage.enable", "false")];
    assert!(check(true, &on, &off)
        .unwrap_err()
        .starts_with("It is invalid to disable remote storage without deleting remote data."));
    let off_delete = [
        ("remote.storage.enable", "false"),
        ("remote.log.delete.on.disable", "true"),
    ];
    assert!(check(true, &on, &off_delete).is_ok());
    let copy_off = [
        ("remote.storage.enable", "true"),
        ("remote.log.copy.disable", "true"),
        ("local.retention.ms", "100"),
    ];
    assert!(check(true, &[], &copy_off)
        .unwrap_err()
        .starts_with("When `remote.log.copy.disable` is set to true, the `local.retention.ms`"));
}
