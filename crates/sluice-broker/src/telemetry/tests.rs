use super::otlp::encode::{metrics_data, Metric};
use super::otlp::Kind;
use super::*;
use sluice_metadata::image::MetadataImage;
use sluice_metadata::MetadataRecord;

fn telemetry(subscriptions: &[(&str, &[(&str, &str)])]) -> Arc<ClientTelemetry> {
    let mut image = MetadataImage::default();
    for (name, configs) in subscriptions {
        for (k, v) in *configs {
            image.apply(
                1,
                &MetadataRecord::Config {
                    resource_type: RESOURCE_CLIENT_METRICS,
                    resource_name: name.to_string(),
                    name: k.to_string(),
                    value: Some(v.to_string()),
                },
            );
        }
    }
    let cache = Arc::new(MetadataCache::new(
        image,
        Arc::new(sluice_metadata::config::BrokerConfig::default()),
        0,
    ));
    ClientTelemetry::new(cache, 1000)
}

fn java(client_id: &str) -> ClientAttributes {
    ClientAttributes {
        client_id: client_id.into(),
        software_name: Some("apache-kafka-java".into()),
        software_version: Some("4.4.0".into()),
        source_address: "127.0.0.1".into(),
        source_port: "50000".into(),
    }
}

fn push<'a>(s: &Subscribed, metrics: &'a [u8]) -> Push<'a> {
    Push {
        client_instance_id: s.client_instance_id,
        subscription_id: s.subscription_id,
        terminating: false,
        compression: 0,
        metrics,
    }
}

#[test]
fn matching_subscriptions_combine_and_others_do_not_apply() {
    let t = telemetry(&[
        (
            "producers",
            &[
                ("metrics", "org.apache.kafka.producer."),
                ("interval.ms", "1000"),
                ("match", "client_id=app-.*"),
            ],
        ),
        (
            "all-java",
            &[
                ("metrics", "org.apache.kafka.consumer."),
                ("match", "client_software_name=apache-kafka-java"),
            ],
        ),
        (
            "python",
            &[
                ("metrics", "*"),
                ("interval.ms", "100"),
                ("match", "client_software_name=confluent.*"),
            ],
        ),
    ]);
    let conn = Connection::default();
    let s = t.subscriptions(Uuid::nil(), &java("app-1"), &conn).unwrap();
    assert!(!s.client_instance_id.is_nil());
    assert_eq!(s.push_interval_ms, 1000);
    assert_eq!(
        s.metrics,
        ["org.apache.kafka.consumer.", "org.apache.kafka.producer."]
    );
    let other = t.subscriptions(Uuid::nil(), &java("other"), &conn).unwrap();
    assert_eq!(other.metrics, ["org.apache.kafka.consumer."]);
    assert_eq!(other.push_interval_ms, cm::DEFAULT_INTERVAL_MS);
    assert_ne!(other.client_instance_id, s.client_instance_id);
    let nothing = ClientAttributes {
        software_name: None,
        ..java("x")
    };
    let none = t.subscriptions(Uuid::nil(), &nothing, &conn).unwrap();
    assert!(none.metrics.is_empty());
}

#[test]
fn requests_follow_kafkas_timing_rules() {
    let t = telemetry(&[("all", &[("metrics", "*"), ("interval.ms", "60000")])]);
    let conn = Connection::default();
    let s = t.subscriptions(Uuid::nil(), &java("c"), &conn).unwrap();
    assert_eq!(s.metrics, ["*"]);
    // Asking again within the interval is throttled.
    let again = t.subscriptions(s.client_instance_id, &java("c"), &conn);
    assert_eq!(again.unwrap_err().0, ErrorCode::ThrottlingQuotaExceeded);
    // The first push after a get is taken at once, the next one is throttled.
    let body = metrics_data(
        &[],
        &[Metric {
            name: "org.apache.kafka.producer.record.send.total",
            kind: Kind::Counter,
            attributes: &[("client_id", "c")],
            value: 7.0,
        }],
    );
    t.push(&push(&s, &body), &java("c"), &conn).unwrap();
    let early = t.push(&push(&s, &body), &java("c"), &conn);
    assert_eq!(early.unwrap_err().0, ErrorCode::ThrottlingQuotaExceeded);
    // A terminating push is taken whenever it comes; nothing is taken after it.
    let last = Push {
        terminating: true,
        ..push(&s, &body)
    };
    t.push(&last, &java("c"), &conn).unwrap();
    let after = t.push(&last, &java("c"), &conn);
    assert_eq!(after.unwrap_err().0, ErrorCode::InvalidRequest);
    // What was pushed is exported, labelled with the client.
    let text = t.render();
    assert!(
        text.contains("# TYPE org_apache_kafka_producer_record_send_total counter\n"),
        "{text}"
    );
    assert!(text.contains(&format!(
        "org_apache_kafka_producer_record_send_total{{client_instance_id=\"{}\",client_id=\"c\",client_software_name=\"apache-kafka-java\",client_software_version=\"4.4.0\"}} 7\n",
        kafka_id(&s.client_instance_id)
    )), "{text}");
}

#[test]
fn bad_pushes_get_kafkas_errors() {
    let t = telemetry(&[("all", &[("metrics", "*"), ("interval.ms", "100")])]);
    let conn = Connection::default();
    let s = t.subscriptions(Uuid::nil(), &java("c"), &conn).unwrap();
    let refused = |p: Push<'_>| t.push(&p, &java("c"), &conn).unwrap_err().0;
    assert_eq!(
        refused(Push {
            client_instance_id: Uuid::nil(),
            ..push(&s, b"")
        }),
        ErrorCode::InvalidRequest
    );
    assert_eq!(
        refused(Push {
            subscription_id: s.subscription_id ^ 1,
            ..push(&s, b"")
        }),
        ErrorCode::UnknownSubscriptionId
    );
    // After UNKNOWN_SUBSCRIPTION_ID a client may ask again at once (its next push still
    // waits for the interval, as in Kafka: the early get does not count as one).
    let s = t
        .subscriptions(s.client_instance_id, &java("c"), &conn)
        .unwrap();
    assert_eq!(refused(push(&s, b"")), ErrorCode::ThrottlingQuotaExceeded);
    std::thread::sleep(Duration::from_millis(110));
    assert_eq!(
        refused(Push {
            compression: 9,
            ..push(&s, b"")
        }),
        ErrorCode::UnsupportedCompressionType
    );
    let s = t
        .subscriptions(s.client_instance_id, &java("c"), &conn)
        .unwrap();
    std::thread::sleep(Duration::from_millis(110));
    assert_eq!(
        refused(push(&s, &[0u8; 1001])),
        ErrorCode::TelemetryTooLarge
    );
    std::thread::sleep(Duration::from_millis(110));
    assert_eq!(refused(push(&s, &[0x0b])), ErrorCode::InvalidRecord);
    // A compressed push is taken.
    let body = metrics_data(
        &[],
        &[Metric {
            name: "m",
            kind: Kind::Gauge,
            attributes: &[],
            value: 1.0,
        }],
    );
    let mut zstd = Vec::new();
    sluice_protocol::compression::compress(Compression::Zstd, &body, &mut zstd).unwrap();
    std::thread::sleep(Duration::from_millis(110));
    t.push(
        &Push {
            compression: 4,
            ..push(&s, &zstd)
        },
        &java("c"),
        &conn,
    )
    .unwrap();
    assert!(t.render().contains("# TYPE m gauge\n"));
}

#[test]
fn a_subscription_change_applies_at_once_and_a_closed_connection_forgets_its_client() {
    let t = telemetry(&[("all", &[("metrics", "a."), ("interval.ms", "60000")])]);
    let conn = Connection::default();
    let s = t.subscriptions(Uuid::nil(), &java("c"), &conn).unwrap();
    assert_eq!(t.instances(), 1);
    // Changed in metadata: the same instance is answered at once, with a new subscription id.
    let mut image = (*t.metadata.current()).clone();
    image.apply(
        1,
        &MetadataRecord::Config {
            resource_type: RESOURCE_CLIENT_METRICS,
            resource_name: "all".into(),
            name: "metrics".into(),
            value: Some("b.".into()),
        },
    );
    t.metadata.replace(image);
    let changed = t
        .subscriptions(s.client_instance_id, &java("c"), &conn)
        .unwrap();
    assert_eq!(changed.metrics, ["b."]);
    assert_ne!(changed.subscription_id, s.subscription_id);
    drop(conn);
    assert_eq!(t.instances(), 0);
}
