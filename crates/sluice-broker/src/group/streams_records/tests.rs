use super::*;

/// What Kafka 4.4's own serializers (the generated `StreamsGroup*Key`/`*Value` classes of
/// `kafka-group-coordinator-4.4.0.jar`, `MessageUtil.toCoordinatorTypePrefixedByteBuffer`
/// and `toVersionPrefixedByteBuffer(0, ..)`) write for the values the tests below build.
const KEYS: [(&str, StreamsRecord, &str); 6] = [
    ("0011000167", StreamsRecord::Metadata, ""),
    ("001300016700016d", StreamsRecord::MemberMetadata, "m"),
    ("0014000167", StreamsRecord::TargetAssignmentMetadata, ""),
    (
        "001500016700016d",
        StreamsRecord::TargetAssignmentMember,
        "m",
    ),
    (
        "001600016700016d",
        StreamsRecord::CurrentMemberAssignment,
        "m",
    ),
    ("0017000167", StreamsRecord::Topology, ""),
];
const META_DEFAULT: &str = "000000000005fffffffffffffffe00";
const META_FULL: &str =
    "000000000005010203040506070802000400000000011902156e756d2e7374616e6462792e7265706c69636173023100";
const MEMBER: &str =
    "00000002720263092f312e322e332e34000493e0000000000270010268ffff0002026b02760000";
const MEMBER_NO_ENDPOINT: &str = "000002690002630268ffffffff000000030270ff0100";
const TARGET_MEMBER: &str = "0000020230030000000000000002000202310200000001000100";
const CURRENT: &str = "00000000000400000003010202300300000000000000020100090300000003000000040202310200000001000102023002000000010100050200000002010100";
const TOPOLOGY: &str = "0000000000000302300203696e010102086170702d7265700101000231010102076170702d636c000000000000020f636c65616e75702e706f6c69637908636f6d7061637400000102086170702d72657000000004ffff0100020101020000000000";

fn hex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

/// Decode, compare, encode back to Kafka's bytes; every truncation refused.
fn round_trip<T: std::fmt::Debug + PartialEq>(
    hex_value: &str,
    decode: fn(&[u8]) -> Option<T>,
    encode: fn(&T) -> Vec<u8>,
    expected: T,
) {
    let bytes = hex(hex_value);
    let v = decode(&bytes).expect("decodes");
    assert_eq!(v, expected);
    assert_eq!(encode(&v), bytes, "{v:?} encodes to other bytes");
    for n in 0..bytes.len() {
        assert!(decode(&bytes[..n]).is_none(), "{n} bytes of {v:?} decoded");
    }
}

fn ids(sub: &str, partitions: &[i32], epochs: Option<&[i32]>) -> TaskIds {
    TaskIds {
        subtopology_id: sub.into(),
        partitions: partitions.to_vec(),
        assignment_epochs: epochs.map(<[i32]>::to_vec),
    }
}

#[test]
fn keys_are_kafkas() {
    for (h, kind, member) in KEYS {
        let bytes = hex(h);
        let key = StreamsGroupKey::decode(&bytes).expect("a streams group key");
        assert_eq!(key.kind, kind);
        assert_eq!((key.group.as_str(), key.member.as_str()), ("g", member));
        assert_eq!(key.encode(), bytes);
    }
    // Consumer group and offset keys are not streams group keys.
    assert_eq!(StreamsGroupKey::decode(&hex("0003000167")), None);
    assert_eq!(StreamsGroupKey::decode(&hex("0001000167")), None);
    assert_eq!(StreamsGroupKey::decode(&hex("0013000167")), None);
}

#[test]
fn group_metadata_is_kafkas() {
    round_trip(
        META_DEFAULT,
        StreamsMetadataValue::decode,
        StreamsMetadataValue::encode,
        StreamsMetadataValue {
            epoch: 5,
            metadata_hash: -2,
            validated_topology_epoch: -1,
            last_assignment_configs: None,
            tags: Vec::new(),
        },
    );
    round_trip(
        META_FULL,
        StreamsMetadataValue::decode,
        StreamsMetadataValue::encode,
        StreamsMetadataValue {
            epoch: 5,
            metadata_hash: 0x0102030405060708,
            validated_topology_epoch: 0,
            last_assignment_configs: Some(vec![("num.standby.replicas".into(), "1".into())]),
            tags: Vec::new(),
        },
    );
    // Kafka 4.4's tags 2 and 3 (stored/failed description topology epochs) are kept.
    let mut v = StreamsMetadataValue::decode(&hex(META_FULL)).unwrap();
    v.tags = vec![(3, 7i32.to_be_bytes().to_vec()), (2, vec![0, 0, 0, 1])];
    let again = StreamsMetadataValue::decode(&v.encode()).unwrap();
    assert_eq!(again.validated_topology_epoch, 0);
    assert_eq!(
        again.tags,
        vec![(2, vec![0, 0, 0, 1]), (3, vec![0, 0, 0, 7])]
    );
}

#[test]
fn member_metadata_is_kafkas() {
    round_trip(
        MEMBER,
        StreamsMemberValue::decode,
        StreamsMemberValue::encode,
        StreamsMemberValue {
            instance_id: None,
            rack_id: Some("r".into()),
            client_id: "c".into(),
            client_host: "/1.2.3.4".into(),
            rebalance_timeout_ms: 300_000,
            topology_epoch: 0,
            process_id: "p".into(),
            user_endpoint: Some(("h".into(), 65535)),
            client_tags: vec![("k".into(), "v".into())],
            tags: Vec::new(),
        },
    );
    round_trip(
        MEMBER_NO_ENDPOINT,
        StreamsMemberValue::decode,
        StreamsMemberValue::encode,
        StreamsMemberValue {
            instance_id: Some("i".into()),
            rack_id: None,
            client_id: "c".into(),
            client_host: "h".into(),
            rebalance_timeout_ms: -1,
            topology_epoch: 3,
            process_id: "p".into(),
            user_endpoint: None,
            client_tags: Vec::new(),
            tags: Vec::new(),
        },
    );
}

#[test]
fn assignments_are_kafkas() {
    round_trip(
        TARGET_MEMBER,
        StreamsTargetMemberValue::decode,
        StreamsTargetMemberValue::encode,
        StreamsTargetMemberValue {
            tasks: TaskLists {
                active: vec![ids("0", &[0, 2], None)],
                standby: vec![ids("1", &[1], None)],
                warmup: Vec::new(),
            },
            tags: Vec::new(),
        },
    );
    round_trip(
        CURRENT,
        StreamsCurrentAssignmentValue::decode,
        StreamsCurrentAssignmentValue::encode,
        StreamsCurrentAssignmentValue {
            member_epoch: 4,
            previous_member_epoch: 3,
            state: 1,
            assigned: TaskLists {
                active: vec![ids("0", &[0, 2], Some(&[3, 4]))],
                standby: vec![ids("1", &[1], None)],
                warmup: Vec::new(),
            },
            pending_revocation: TaskLists {
                active: vec![ids("0", &[1], Some(&[2]))],
                standby: Vec::new(),
                warmup: Vec::new(),
            },
            tags: Vec::new(),
        },
    );
}

#[test]
fn topology_is_kafkas() {
    let topology = Topology {
        epoch: 0,
        subtopologies: vec![
            Subtopology {
                id: "0".into(),
                source_topics: vec!["in".into()],
                repartition_sink_topics: vec!["app-rep".into()],
                ..Default::default()
            },
            Subtopology {
                id: "1".into(),
                state_changelog_topics: vec![TopicInfo {
                    name: "app-cl".into(),
                    partitions: 0,
                    replication_factor: 0,
                    configs: vec![("cleanup.policy".into(), "compact".into())],
                }],
                repartition_source_topics: vec![TopicInfo {
                    name: "app-rep".into(),
                    partitions: 4,
                    replication_factor: -1,
                    configs: Vec::new(),
                }],
                copartition_groups: vec![CopartitionGroup {
                    source_topics: Vec::new(),
                    repartition_source_topics: vec![0],
                }],
                ..Default::default()
            },
        ],
    };
    round_trip(
        TOPOLOGY,
        StreamsTopologyValue::decode,
        StreamsTopologyValue::encode,
        StreamsTopologyValue {
            topology,
            tags: Vec::new(),
        },
    );
}

#[test]
fn a_topology_with_source_regexes_is_not_read() {
    // Subtopology "0" reading regex "a.*" (Kafka can write it; this broker refuses such
    // topologies, so it cannot have written one).
    let mut w = W(vec![0, 0]);
    w.i32(0);
    len(&mut w, 1);
    compact_str(&mut w, Some("0"));
    strings(&mut w, &[]);
    strings(&mut w, &["a.*".to_string()]);
    for _ in 0..4 {
        len(&mut w, 0);
    }
    uvarint(&mut w, 0);
    uvarint(&mut w, 0);
    assert_eq!(StreamsTopologyValue::decode(&w.0), None);
}

#[test]
fn garbage_is_refused_not_a_panic() {
    for bytes in [
        hex("0001"),
        hex("00000000000000000000000000000000ff"),
        hex("0000ffffffffff0f"),
        vec![0, 0, 0xff, 0xff, 0xff, 0xff, 0x0f],
    ] {
        assert_eq!(StreamsMetadataValue::decode(&bytes), None);
        assert_eq!(StreamsMemberValue::decode(&bytes), None);
        assert_eq!(StreamsTargetMemberValue::decode(&bytes), None);
        assert_eq!(StreamsCurrentAssignmentValue::decode(&bytes), None);
        assert_eq!(StreamsTopologyValue::decode(&bytes), None);
    }
}
