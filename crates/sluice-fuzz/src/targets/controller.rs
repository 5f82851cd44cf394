//! What controllers and brokers read from each other and from their metadata directory:
//! Raft RPCs (append entries, vote, install snapshot, and their answers), the controller
//! RPCs brokers send (forwarded admin writes, heartbeats, metadata fetches) and their
//! answers, metadata records applied to an image, snapshot data, and a whole metadata
//! directory opened as a restarting controller opens it.

use std::collections::{BTreeMap, BTreeSet};

use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, VoteRequest, VoteResponse,
};
use openraft::storage::{RaftLogReader, RaftLogStorage};
use openraft::{BasicNode, Entry, EntryPayload, Membership, SnapshotMeta, StoredMembership, Vote};
use sluice_controller::raft::network::{
    decode_append, decode_append_response, decode_snapshot, decode_vote, decode_vote_response,
    encode_append, encode_append_response, encode_snapshot, encode_vote, encode_vote_response,
};
use sluice_controller::raft::store::{
    image_from, snapshot_bytes, snapshot_name, LogStore, Shared, StateMachine,
};
use sluice_controller::raft::{
    decode_payload, encode_payload, log_id, put_snapshot_meta, Command, TypeConfig,
};
use sluice_controller::rpc::{
    decode_fetch, encode_fetch, ControllerRequest, ControllerResponse, FetchResponse, Heartbeat,
};
use sluice_controller::wire::Writer;
use sluice_metadata::image::MetadataImage;
use sluice_metadata::record::Endpoint;
use sluice_metadata::{MetadataRecord, Uuid};
use sluice_protocol::batch::BatchBuilder;
use sluice_protocol::compression::Compression;
use sluice_protocol::types::TopicPartition;
use sluice_storage::{Log, LogConfig};

const NOW: i64 = 1_700_000_000_000;

/// The decoders, by the input's first byte.
const DECODERS: u8 = 12;

/// `[decoder][payload]`: one of the decoders above over the payload.
pub fn rpc(data: &[u8]) {
    let Some((&which, payload)) = data.split_first() else {
        return;
    };
    match which % DECODERS {
        0 => drop(decode_append(payload)),
        1 => drop(decode_vote(payload)),
        2 => drop(decode_snapshot(payload)),
        3 => drop(decode_append_response(payload)),
        4 => drop(decode_vote_response(payload)),
        5 => drop(ControllerRequest::decode(payload)),
        6 => drop(ControllerResponse::decode(payload)),
        7 => drop(decode_fetch(payload)),
        8 => {
            // A broker-only node applies what it fetched to its image.
            if let Ok(resp) = FetchResponse::decode(payload) {
                let mut image = MetadataImage::empty();
                for (offset, records) in &resp.entries {
                    for r in records {
                        image.apply(*offset, r);
                    }
                }
            }
        }
        9 => {
            if let Ok(r) = MetadataRecord::decode(payload) {
                MetadataImage::empty().apply(1, &r);
            }
        }
        10 => drop(image_from(payload)),
        _ => {
            // A Raft entry as stored in the metadata log: tag (the record key) and payload.
            let split = payload
                .first()
                .map_or(0, |&n| usize::from(n))
                .min(payload.len());
            let (tag, value) = payload.split_at(split);
            drop(decode_payload(tag, value));
        }
    }
}

fn records() -> Vec<MetadataRecord> {
    let topic_id = Uuid::from_u128(0xabc);
    vec![
        MetadataRecord::RegisterBroker {
            node_id: 1,
            epoch: 3,
            incarnation_id: Uuid::from_u128(9),
            endpoints: vec![Endpoint {
                name: "PLAINTEXT".into(),
                host: "127.0.0.1".into(),
                port: 9092,
            }],
            rack: Some("r1".into()),
            fenced: true,
        },
        MetadataRecord::UnfenceBroker {
            node_id: 1,
            epoch: 3,
        },
        MetadataRecord::Topic {
            name: "orders".into(),
            id: topic_id,
        },
        MetadataRecord::Partition {
            topic_id,
            partition: 0,
            replicas: vec![1, 2, 3],
            isr: vec![1, 2],
            leader: 1,
            leader_epoch: 4,
            partition_epoch: 6,
            adding: vec![],
            removing: vec![],
            elr: Default::default(),
        },
        MetadataRecord::PartitionChange {
            topic_id,
            partition: 0,
            leader: 2,
            isr: vec![2, 3],
            assignment: None,
            elr: None,
        },
        MetadataRecord::PartitionChange {
            topic_id,
            partition: 0,
            leader: -1,
            isr: vec![],
            assignment: None,
            elr: Some(sluice_metadata::record::Elr {
                eligible: vec![2],
                last_known: vec![3],
            }),
        },
        MetadataRecord::Config {
            resource_type: 2,
            resource_name: "orders".into(),
            name: "retention.ms".into(),
            value: Some("1000".into()),
        },
        MetadataRecord::ProducerIds {
            node_id: 1,
            next_producer_id: 1000,
        },
        MetadataRecord::ScramCredential {
            user: "alice".into(),
            mechanism: 1,
            salt: vec![1; 16],
            stored_key: vec![2; 32],
            server_key: vec![3; 32],
            iterations: 4096,
        },
        MetadataRecord::FenceBroker {
            node_id: 3,
            epoch: 1,
        },
        MetadataRecord::RemoveTopic { topic_id },
    ]
}

fn membership() -> Membership<u64, BasicNode> {
    let nodes: BTreeMap<u64, BasicNode> = (1..=3)
        .map(|i| (i, BasicNode::new(format!("127.0.0.1:{}", 9093 + i))))
        .collect();
    Membership::new(vec![BTreeSet::from([1, 2, 3])], nodes)
}

fn entries() -> Vec<Entry<TypeConfig>> {
    vec![
        Entry {
            log_id: log_id(3, 11),
            payload: EntryPayload::Blank,
        },
        Entry {
            log_id: log_id(3, 12),
            payload: EntryPayload::Normal(Command(records())),
        },
        Entry {
            log_id: log_id(3, 13),
            payload: EntryPayload::Membership(membership()),
        },
    ]
}

fn image() -> MetadataImage {
    let mut image = MetadataImage::empty();
    for (i, r) in records().iter().enumerate() {
        image.apply(i as i64, r);
    }
    image
}

fn snapshot_meta() -> SnapshotMeta<u64, BasicNode> {
    SnapshotMeta {
        last_log_id: Some(log_id(3, 12)),
        last_membership: StoredMembership::new(Some(log_id(2, 5)), membership()),
        snapshot_id: "3-12-1".into(),
    }
}

/// One well-formed message per decoder.
pub fn rpc_seeds() -> Vec<Vec<u8>> {
    let vote = Vote::new_committed(3, 1);
    let payloads: Vec<(u8, Vec<u8>)> = vec![
        (
            0,
            encode_append(&AppendEntriesRequest {
                vote,
                prev_log_id: Some(log_id(3, 10)),
                entries: entries(),
                leader_commit: Some(log_id(3, 10)),
            }),
        ),
        (
            1,
            encode_vote(&VoteRequest {
                vote: Vote::new(4, 2),
                last_log_id: Some(log_id(3, 13)),
            }),
        ),
        (
            2,
            encode_snapshot(&InstallSnapshotRequest {
                vote,
                meta: snapshot_meta(),
                offset: 0,
                data: snapshot_bytes(&image()),
                done: true,
            }),
        ),
        (3, encode_append_response(&AppendEntriesResponse::Success)),
        (
            3,
            encode_append_response(&AppendEntriesResponse::HigherVote(Vote::new(5, 2))),
        ),
        (
            4,
            encode_vote_response(&VoteResponse {
                vote,
                vote_granted: true,
                last_log_id: Some(log_id(3, 13)),
            }),
        ),
        (
            5,
            ControllerRequest::Heartbeat(Heartbeat {
                node_id: 2,
                incarnation_id: Uuid::from_u128(5),
                endpoints: vec![Endpoint {
                    name: "PLAINTEXT".into(),
                    host: "localhost".into(),
                    port: 9092,
                }],
                rack: None,
                metadata_offset: 40,
                want_shutdown: false,
                offline_replicas: Vec::new(),
                unclean_shutdown: true,
            })
            .encode(),
        ),
        (
            5,
            ControllerRequest::AlterTopicConfigs {
                topic: "orders".into(),
                changes: vec![
                    ("retention.ms".into(), Some("5".into())),
                    ("x".into(), None),
                ],
                validate_only: false,
            }
            .encode(),
        ),
        (6, ControllerResponse::Failed("no".into()).encode()),
        (7, encode_fetch(40, 500)),
        (
            8,
            FetchResponse {
                leader: 1,
                snapshot: false,
                entries: vec![(12, records())],
            }
            .encode(),
        ),
        (10, snapshot_bytes(&image())),
    ];
    let mut seeds: Vec<Vec<u8>> = payloads
        .into_iter()
        .map(|(k, p)| {
            let mut seed = vec![k];
            seed.extend(p);
            seed
        })
        .collect();
    for r in records() {
        let mut seed = vec![9];
        seed.extend(r.encode());
        seeds.push(seed);
    }
    for e in entries() {
        let (tag, value) = encode_payload(&e.payload);
        let mut seed = vec![11, tag.len() as u8];
        seed.extend_from_slice(tag);
        seed.extend(value);
        seeds.push(seed);
    }
    seeds
}

/// A metadata directory (see [`super::files::encode_dir`]; the partition directory is
/// `__cluster_metadata-0`) opened as a restarting controller opens it, its log read back.
pub fn metadata_dir(data: &[u8]) {
    let Ok(root) = tempfile::tempdir() else {
        return;
    };
    if !super::files::materialize(data, root.path(), &metadata_tp()) {
        return;
    }
    let _ = StateMachine::open(root.path(), Shared::new());
    let Ok(mut store) = LogStore::open(root.path(), 1 << 20) else {
        return;
    };
    let Ok(rt) = tokio::runtime::Builder::new_current_thread().build() else {
        return;
    };
    rt.block_on(async {
        if let Ok(state) = store.get_log_state().await {
            let end = state.last_log_id.map_or(0, |l| l.index + 1);
            let start = state.last_purged_log_id.map_or(0, |l| l.index + 1);
            let mut reader = store.get_log_reader().await;
            let _ = reader
                .try_get_log_entries(start..end.min(start + 1000))
                .await;
        }
        let _ = store.read_vote().await;
    });
    store.close();
}

fn metadata_tp() -> TopicPartition {
    TopicPartition::new(sluice_metadata::topic::CLUSTER_METADATA, 0)
}

/// A metadata directory as a controller leaves it: quorum state, a snapshot, and a log of
/// Raft entries (one batch per entry, as the log store writes them).
pub fn metadata_dir_seeds() -> Vec<Vec<u8>> {
    let Ok(root) = tempfile::tempdir() else {
        return Vec::new();
    };
    let mut files = Vec::new();
    // quorum-state: a vote, committed and purged log ids.
    let mut w = Writer::default();
    w.bool(true);
    sluice_controller::raft::put_vote(&mut w, &Vote::new_committed(3, 1));
    sluice_controller::raft::put_log_id(&mut w, &Some(log_id(3, 12)));
    sluice_controller::raft::put_log_id(&mut w, &None);
    files.push((false, "quorum-state".to_string(), w.0));
    let mut w = Writer::default();
    put_snapshot_meta(&mut w, &snapshot_meta());
    w.bytes(&snapshot_bytes(&image()));
    files.push((false, snapshot_name(&Some(log_id(3, 12))), w.0));
    let config = LogConfig {
        segment_bytes: 1 << 20,
        ..LogConfig::default()
    };
    if let Ok(mut log) = Log::create(root.path(), metadata_tp(), [0; 16], config, NOW) {
        for e in entries() {
            let (tag, value) = encode_payload(&e.payload);
            let mut b = BatchBuilder::new(Compression::None);
            b.append(NOW, Some(tag), Some(&value), &[]);
            if let Ok(batch) = b.build(0) {
                let _ = log.append_as_leader(batch, e.log_id.leader_id.term as i32, NOW);
            }
        }
        let _ = log.close(NOW);
        let dir = root.path().join(metadata_tp().dir_name());
        if let Ok(entries) = std::fs::read_dir(&dir) {
            let mut entries: Vec<_> = entries.flatten().collect();
            entries.sort_by_key(|e| e.file_name());
            for e in entries {
                if let Ok(bytes) = std::fs::read(e.path()) {
                    files.push((true, e.file_name().to_string_lossy().into_owned(), bytes));
                }
            }
        }
    }
    vec![super::files::encode_dir(false, &files)]
}
