use super::*;

/// Records a Kafka 4.4 node wrote to `__consumer_offsets` for a consumer group (`rbc1`, ten
/// librdkafka members with `group.protocol=consumer` on a 100-partition topic), read back
/// raw: (key, value) in hex.
const KAFKA_4_4: [(&str, &str); 6] = [
    ("0003000472626331", "000000000002010008ca0034b7c3957b3d"),
    (
        "000500047262633100162f4664663361543251562b4f4f614c34356565785a77",
        "00000000036d390b2f3132372e302e302e310203726201000493e00001000100",
    ),
    ("0006000472626331", "00000000001700"),
    (
        "000700047262633100164a31704b6a54774552462b315773426f325875624541",
        "000002bee79c51707c4d3ebb063d9a5bb2bd880a0000001400000015000000160000001700000018000000190000001a0000001b0000001c0000",
    ),
    (
        "000800047262633100163465334e62492f625367615858644a347333466a6c77",
        "00000000000c0000000b0002bee79c51707c4d3ebb063d9a5bb2bd880a0000005000000051000000520000005300000054000000550000005600000057000000580100250a0000000b0000000b0000000b0000000b0000000b0000000b0000000b0000000b0000000b0100",
    ),
    (
        "000800047262633100162f4664663361543251562b4f4f614c34356565785a77",
        "0000000000020000000000010100",
    ),
];

fn hex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

const TOPIC: [u8; 16] = [
    0xbe, 0xe7, 0x9c, 0x51, 0x70, 0x7c, 0x4d, 0x3e, 0xbb, 0x06, 0x3d, 0x9a, 0x5b, 0xb2, 0xbd, 0x88,
];

/// Decode `value` with `decode`, check it, and encode it back to the same bytes.
fn round_trip<T: std::fmt::Debug>(
    value: &[u8],
    decode: fn(&[u8]) -> Option<T>,
    encode: fn(&T) -> Vec<u8>,
) -> T {
    let v = decode(value).expect("decodes");
    assert_eq!(encode(&v), value, "{v:?} encodes to other bytes");
    // Every truncation is refused, never a panic.
    for n in 0..value.len() {
        assert!(decode(&value[..n]).is_none(), "{n} bytes of {v:?} decoded");
    }
    v
}

#[test]
fn kafkas_records_decode_and_encode_to_the_same_bytes() {
    let keys: Vec<ConsumerGroupKey> = KAFKA_4_4
        .iter()
        .map(|(k, _)| {
            let bytes = hex(k);
            let key = ConsumerGroupKey::decode(&bytes).expect("a consumer group key");
            assert_eq!(key.encode(), bytes);
            key
        })
        .collect();
    assert_eq!(
        keys[0],
        ConsumerGroupKey::Metadata {
            group: "rbc1".into()
        }
    );
    assert_eq!(
        keys[1],
        ConsumerGroupKey::MemberMetadata {
            group: "rbc1".into(),
            member: "/Fdf3aT2QV+OOaL45eexZw".into()
        }
    );

    let g = round_trip(
        &hex(KAFKA_4_4[0].1),
        GroupMetadataValue::decode,
        GroupMetadataValue::encode,
    );
    assert_eq!(g.epoch, 2);
    assert_eq!(g.tags[0].0, 0, "the metadata hash (KIP-1101) is tag 0");

    let m = round_trip(
        &hex(KAFKA_4_4[1].1),
        MemberMetadataValue::decode,
        MemberMetadataValue::encode,
    );
    assert_eq!(
        (
            m.instance_id.as_deref(),
            m.client_id.as_str(),
            m.client_host.as_str()
        ),
        (None, "m9", "/127.0.0.1")
    );
    assert_eq!(m.subscribed_topic_names, vec!["rb".to_string()]);
    assert_eq!(m.subscribed_topic_regex.as_deref(), Some(""));
    assert_eq!(
        (m.rebalance_timeout_ms, m.server_assignor.as_deref()),
        (300_000, None)
    );

    let t = round_trip(
        &hex(KAFKA_4_4[2].1),
        TargetAssignmentMetadataValue::decode,
        TargetAssignmentMetadataValue::encode,
    );
    assert_eq!(t.assignment_epoch, 23);

    let tm = round_trip(
        &hex(KAFKA_4_4[3].1),
        TargetAssignmentMemberValue::decode,
        TargetAssignmentMemberValue::encode,
    );
    assert_eq!(tm.topic_partitions.len(), 1);
    assert_eq!(tm.topic_partitions[0].topic_id, TOPIC);
    assert_eq!(
        tm.topic_partitions[0].partitions,
        (20..=28).collect::<Vec<_>>()
    );

    let c = round_trip(
        &hex(KAFKA_4_4[4].1),
        CurrentMemberAssignmentValue::decode,
        CurrentMemberAssignmentValue::encode,
    );
    assert_eq!(
        (c.member_epoch, c.previous_member_epoch, c.state),
        (12, 11, 0)
    );
    assert_eq!(c.assigned[0].partitions, (80..=88).collect::<Vec<_>>());
    assert_eq!(
        c.assigned[0].tags.len(),
        1,
        "Kafka 4.4's per-partition epochs, kept as read"
    );
    assert!(c.pending_revocation.is_empty());

    let e = round_trip(
        &hex(KAFKA_4_4[5].1),
        CurrentMemberAssignmentValue::decode,
        CurrentMemberAssignmentValue::encode,
    );
    assert_eq!((e.member_epoch, e.previous_member_epoch), (2, 0));
    assert!(e.assigned.is_empty());
}

#[test]
fn other_record_types_and_versions_are_not_taken_for_consumer_group_records() {
    // An offset commit key (type 1) and a classic group key (type 2).
    assert_eq!(
        ConsumerGroupKey::decode(&hex("00010001670001740000000000")),
        None
    );
    assert_eq!(ConsumerGroupKey::decode(&hex("0002000167")), None);
    // Value version 1 is not one this broker knows.
    assert_eq!(GroupMetadataValue::decode(&hex("00010000000200")), None);
    // Trailing bytes.
    assert_eq!(GroupMetadataValue::decode(&hex("0000000000020000")), None);
    // A compact array claiming more elements than there are bytes.
    assert_eq!(
        TargetAssignmentMemberValue::decode(&hex("0000ffffff0f")),
        None
    );
}

#[test]
fn written_records_read_back() {
    let v = MemberMetadataValue {
        instance_id: Some("i-1".into()),
        rack_id: None,
        client_id: "c".into(),
        client_host: "/10.0.0.1".into(),
        subscribed_topic_names: vec!["a".into(), "b".into()],
        subscribed_topic_regex: None,
        rebalance_timeout_ms: 60_000,
        server_assignor: Some("range".into()),
        tags: Vec::new(),
    };
    assert_eq!(MemberMetadataValue::decode(&v.encode()), Some(v));
    let c = CurrentMemberAssignmentValue {
        member_epoch: 5,
        previous_member_epoch: 4,
        state: 1,
        assigned: vec![TopicPartitions {
            topic_id: TOPIC,
            partitions: vec![0, 2],
            tags: Vec::new(),
        }],
        pending_revocation: vec![TopicPartitions {
            topic_id: TOPIC,
            partitions: vec![1],
            tags: Vec::new(),
        }],
        tags: Vec::new(),
    };
    assert_eq!(CurrentMemberAssignmentValue::decode(&c.encode()), Some(c));
}

#[test]
fn classic_member_metadata_round_trips_and_refuses_garbage() {
    let m = ClassicMemberMetadata {
        session_timeout_ms: 45_000,
        protocols: vec![
            ("range".into(), vec![0, 3, 1, 2]),
            ("roundrobin".into(), Vec::new()),
        ],
    };
    let bytes = m.encode();
    assert_eq!(bytes[0], 1);
    assert_eq!(ClassicMemberMetadata::decode(&bytes), Some(m));
    assert_eq!(ClassicMemberMetadata::decode(&[0xff]), None);
    assert_eq!(
        ClassicMemberMetadata::decode(&bytes[..bytes.len() - 1]),
        None
    );
}

/// A classic member's metadata inside a consumer group, as a Kafka 4.4 coordinator wrote it
/// (a librdkafka classic member, session 10 s, range and roundrobin, when a consumer-protocol
/// member joined its group): decoded and encoded back byte for byte.
#[test]
fn classic_member_metadata_kafka_wrote_decodes() {
    let value = hex(concat!(
        "000000000872646b61666b610b2f3132372e302e302e3102056d69787401000493e0000100500100002710",
        "030672616e67651b00030000000100046d6978740000000000000000ffffffff0000000b726f756e6472",
        "6f62696e1b00030000000100046d6978740000000000000000ffffffff00000000"
    ));
    let v = MemberMetadataValue::decode(&value).expect("a member metadata value");
    assert_eq!(v.encode(), value);
    let (tag, bytes) = &v.tags[0];
    assert_eq!(*tag, CLASSIC_MEMBER_TAG);
    let c = ClassicMemberMetadata::decode(bytes).expect("classic member metadata");
    assert_eq!(c.session_timeout_ms, 10_000);
    let names: Vec<&str> = c.protocols.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["range", "roundrobin"]);
    assert_eq!(&c.encode(), bytes);
}
