//! Topic administration through librdkafka's Admin API: create (with configs, validation
//! only, bad input), grow partitions, describe configs, delete, and DescribeCluster.

mod common;

use common::*;
use rdkafka::admin::{
    AdminOptions, ConfigSource, NewPartitions, NewTopic, ResourceSpecifier, TopicReplication,
};
use rdkafka::types::RDKafkaErrorCode;

fn create(
    bootstrap: &str,
    topics: &[NewTopic<'_>],
    validate_only: bool,
) -> Vec<Result<String, RDKafkaErrorCode>> {
    let a = admin(bootstrap);
    block_on(a.create_topics(topics, &AdminOptions::new().validate_only(validate_only)))
        .expect("create_topics")
        .into_iter()
        .map(|r| r.map_err(|(_, e)| e))
        .collect()
}

#[test]
fn create_topics_validates_names_configs_and_counts() {
    let server = start(&[]);
    let b = &server.bootstrap;
    let ok = NewTopic::new("orders", 4, TopicReplication::Fixed(1))
        .set("retention.ms", "3600000")
        .set("cleanup.policy", "delete");
    assert_eq!(create(b, &[ok], false), vec![Ok("orders".to_string())]);
    assert!(server
        .data_dir()
        .join("orders-3")
        .join("00000000000000000000.log")
        .exists());
    assert!(server
        .data_dir()
        .join("orders-0")
        .join("partition.metadata")
        .exists());

    let results = create(
        b,
        &[
            NewTopic::new("orders", 1, TopicReplication::Fixed(1)),
            NewTopic::new("bad name", 1, TopicReplication::Fixed(1)),
            NewTopic::new("c1", 1, TopicReplication::Fixed(1)).set("no.such.config", "1"),
            NewTopic::new("c2", 1, TopicReplication::Fixed(1)).set("retention.ms", "soon"),
            NewTopic::new("rf", 1, TopicReplication::Fixed(3)),
            NewTopic::new(&"x".repeat(250), 1, TopicReplication::Fixed(1)),
        ],
        false,
    );
    assert_eq!(
        results,
        vec![
            Err(RDKafkaErrorCode::TopicAlreadyExists),
            Err(RDKafkaErrorCode::InvalidTopic),
            Err(RDKafkaErrorCode::InvalidConfig),
            Err(RDKafkaErrorCode::InvalidConfig),
            Err(RDKafkaErrorCode::InvalidReplicationFactor),
            Err(RDKafkaErrorCode::InvalidTopic),
        ]
    );
    // validate_only checks but creates nothing.
    assert_eq!(
        create(
            b,
            &[NewTopic::new("dry", 2, TopicReplication::Fixed(1))],
            true
        ),
        vec![Ok("dry".to_string())]
    );
    assert!(!server.data_dir().join("dry-0").exists());
    assert_eq!(
        create(
            b,
            &[NewTopic::new("dry", 2, TopicReplication::Fixed(1))],
            false
        ),
        vec![Ok("dry".to_string())]
    );
}

#[test]
fn partitions_only_grow() {
    let server = start(&[]);
    create_topic(&server.bootstrap, "grow", 2, &[]);
    let a = admin(&server.bootstrap);
    let opts = AdminOptions::new();
    let r = block_on(a.create_partitions([&NewPartitions::new("grow", 5)], &opts)).unwrap();
    assert!(r[0].is_ok(), "{r:?}");
    assert!(server.data_dir().join("grow-4").exists());
    let r = block_on(a.create_partitions([&NewPartitions::new("grow", 3)], &opts)).unwrap();
    assert_eq!(
        r[0].as_ref().unwrap_err().1,
        RDKafkaErrorCode::InvalidPartitions
    );
    let r = block_on(a.create_partitions([&NewPartitions::new("missing", 3)], &opts)).unwrap();
    assert_eq!(
        r[0].as_ref().unwrap_err().1,
        RDKafkaErrorCode::UnknownTopicOrPartition
    );
    let md = consumer(&server.bootstrap, &[]);
    let meta = rdkafka::consumer::Consumer::fetch_metadata(
        &md,
        Some("grow"),
        std::time::Duration::from_secs(10),
    )
    .unwrap();
    assert_eq!(meta.topics()[0].partitions().len(), 5);
}

#[test]
fn describe_configs_reports_overrides_broker_values_and_defaults() {
    let server = start(&["log.segment.bytes=2097152"]);
    create_topic(&server.bootstrap, "cfg", 1, &[("retention.ms", "123456")]);
    let a = admin(&server.bootstrap);
    let res = block_on(a.describe_configs(
        [
            &ResourceSpecifier::Topic("cfg"),
            &ResourceSpecifier::Broker(0),
        ],
        &AdminOptions::new(),
    ))
    .unwrap();
    let topic = res[0].as_ref().unwrap();
    let entries = topic.entry_map();
    let retention = entries["retention.ms"];
    assert_eq!(
        (retention.value.as_deref(), &retention.source),
        (Some("123456"), &ConfigSource::DynamicTopic)
    );
    let segment = entries["segment.bytes"];
    assert_eq!(
        (segment.value.as_deref(), &segment.source),
        (Some("2097152"), &ConfigSource::StaticBroker)
    );
    let max = entries["max.message.bytes"];
    assert_eq!(
        (max.value.as_deref(), &max.source),
        (Some("1048588"), &ConfigSource::Default)
    );
    assert!(
        entries.len() >= 30,
        "all topic configs are listed: {}",
        entries.len()
    );
    let broker = res[1].as_ref().unwrap();
    let b = broker.entry_map();
    assert_eq!(b["log.segment.bytes"].value.as_deref(), Some("2097152"));
    assert_eq!(b["num.partitions"].value.as_deref(), Some("1"));
    assert!(b["num.partitions"].is_read_only);
    let missing =
        block_on(a.describe_configs([&ResourceSpecifier::Topic("nope")], &AdminOptions::new()))
            .unwrap();
    // The rdkafka crate drops per-resource error codes; an unknown topic shows up empty.
    assert!(missing[0].as_ref().map_or(true, |r| r.entries.is_empty()));
}

#[test]
fn delete_topics_removes_data_and_metadata() {
    let mut server = start(&[]);
    create_topic(&server.bootstrap, "doomed", 3, &[]);
    produce_all(
        &producer(&server.bootstrap, &[]),
        "doomed",
        &[(b"k".to_vec(), b"v".to_vec(), None)],
    );
    let a = admin(&server.bootstrap);
    let r = block_on(a.delete_topics(&["doomed", "never-was"], &AdminOptions::new())).unwrap();
    assert!(r[0].is_ok());
    assert_eq!(
        r[1].as_ref().unwrap_err().1,
        RDKafkaErrorCode::UnknownTopicOrPartition
    );
    for p in 0..3 {
        assert!(!server.data_dir().join(format!("doomed-{p}")).exists());
    }
    // Deleted for good: a restart does not bring it back, and the name is free again.
    server.restart();
    let md = consumer(&server.bootstrap, &[("allow.auto.create.topics", "false")]);
    let meta =
        rdkafka::consumer::Consumer::fetch_metadata(&md, None, std::time::Duration::from_secs(10))
            .unwrap();
    assert!(meta.topics().iter().all(|t| t.name() != "doomed"));
    create_topic(&server.bootstrap, "doomed", 1, &[]);
}
