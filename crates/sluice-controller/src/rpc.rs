//! Requests brokers send the active controller (forwarded admin writes, heartbeats) and
//! metadata fetches, with their binary encodings.

use sluice_metadata::acl::{AclBinding, AclFilter};
use sluice_metadata::controller_types::{
    ApiError, ControllerSpec, CreateTopicSpec, CreatedTopic, DeleteOutcome, IsrChange,
    PartitionOutcome, QuorumInfo, QuorumReplica, QuotaChange, ReassignTarget, ScramChange,
    TokenReply, TokenRequest, TopicRef, UserOutcome,
};
use sluice_metadata::diskless::{BatchKind, SegmentCoord, Sequenced, WalBatch};
use sluice_metadata::image::QuotaEntity;
use sluice_metadata::image::ScramEntry;
use sluice_metadata::record::{Endpoint, TokenRecord};
use sluice_metadata::remote::RemoteSegment;
use sluice_metadata::{MetadataRecord, Uuid};
use sluice_protocol::ErrorCode;

use crate::raft::{get_records, put_records};
use crate::wire::{Reader, WireError, Writer};

/// A broker's heartbeat; the first from a new incarnation registers it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Heartbeat {
    pub node_id: i32,
    pub incarnation_id: Uuid,
    pub endpoints: Vec<Endpoint>,
    pub rack: Option<String>,
    /// The offset of the broker's metadata image.
    pub metadata_offset: i64,
    /// Controlled shutdown: move my leaderships away and fence me.
    pub want_shutdown: bool,
    /// Replicas (topic id, partition) whose log directory failed here (Kafka's brokers report
    /// their offline log directories): they must neither lead nor count as in sync.
    pub offline_replicas: Vec<(Uuid, i32)>,
    /// This incarnation started without a clean-shutdown marker (Kafka's broker registration
    /// says so with PreviousBrokerEpoch -1): it may have lost writes it had not fsynced.
    pub unclean_shutdown: bool,
}

#[derive(Clone, Debug)]
pub enum ControllerRequest {
    CreateTopics {
        specs: Vec<CreateTopicSpec>,
        validate_only: bool,
    },
    DeleteTopics(Vec<TopicRef>),
    CreatePartitions {
        topic: String,
        count: i32,
        assignments: Option<Vec<Vec<i32>>>,
        validate_only: bool,
    },
    AlterTopicConfigs {
        topic: String,
        changes: Vec<(String, Option<String>)>,
        validate_only: bool,
    },
    AllocateProducerIds {
        node_id: i32,
        count: i64,
    },
    /// Dynamic broker configs of one broker ("" = the cluster-wide defaults).
    AlterBrokerConfigs {
        broker: String,
        changes: Vec<(String, Option<String>)>,
        validate_only: bool,
    },
    /// The configs of a cluster link (removing every one deletes it).
    AlterLinkConfigs {
        link: String,
        changes: Vec<(String, Option<String>)>,
        validate_only: bool,
    },
    /// The configs of a resource kept by type (client-metrics subscriptions).
    AlterResourceConfigs {
        resource_type: i8,
        name: String,
        changes: Vec<(String, Option<String>)>,
        validate_only: bool,
    },
    Heartbeat(Heartbeat),
    AlterPartition(IsrChange),
    /// ElectLeaders: preferred (true) or unclean; None = every partition.
    ElectLeaders {
        preferred: bool,
        partitions: Option<Vec<(String, i32)>>,
    },
    /// AlterPartitionReassignments: per partition the target replicas, or None to cancel.
    AlterReassignments {
        targets: Vec<ReassignTarget>,
        allow_rf_change: bool,
    },
    /// AlterUserScramCredentials: per user and mechanism the credential to store, or None
    /// to delete it.
    AlterScramCredentials(Vec<ScramChange>),
    CreateAcls(Vec<AclBinding>),
    /// ACLs copied from a cluster link's source (ACL sync): created as CreateAcls does, with
    /// ids that say they came through `link` (see `sluice_metadata::acl::copied_acl_id`).
    CopyAcls {
        link: String,
        bindings: Vec<AclBinding>,
    },
    DeleteAcls(Vec<AclFilter>),
    AlterClientQuotas {
        changes: Vec<QuotaChange>,
        validate_only: bool,
    },
    /// The quorum's state, as the active controller sees it (DescribeQuorum).
    DescribeQuorum,
    /// UpdateFeatures: (feature, level, Kafka's upgrade type code) each; all or nothing.
    UpdateFeatures {
        updates: Vec<(String, i16, i8)>,
        validate_only: bool,
    },
    /// UnregisterBroker: remove this broker's registration.
    UnregisterBroker(i32),
    /// A controller of a dynamic quorum that is not in it yet asks to follow the metadata
    /// log (an observer: a Raft learner), so that it can be added as a voter.
    ObserveQuorum(ControllerSpec),
    /// AddRaftVoter (KIP-853).
    AddVoter(ControllerSpec),
    /// UpdateRaftVoter (KIP-853): a voter (its id and directory id) that restarted with other
    /// controller endpoints asks to be reached there.
    UpdateVoter(ControllerSpec),
    /// RemoveRaftVoter (KIP-853): the voter's id and directory id.
    RemoveVoter {
        node_id: i32,
        directory_id: Uuid,
    },
    /// Create, Renew or ExpireDelegationToken.
    DelegationToken(TokenRequest),
    /// A leader records a remote log segment's new state (tiered storage).
    RemoteLogSegment {
        node_id: i32,
        segment: RemoteSegment,
    },
    /// A broker wrote a WAL object of diskless topics: offsets for its batches.
    DisklessCommit {
        node_id: i32,
        object_id: Uuid,
        batches: Vec<WalBatch>,
    },
    /// Diskless partitions' new log starts (retention, DeleteRecords): (topic id,
    /// partition, start offset). Answered PerItem.
    DisklessTrim {
        node_id: i32,
        trims: Vec<(Uuid, i32, i64)>,
    },
    /// WAL compaction: segment objects to replace the batches they were made of, each as a
    /// [`MetadataRecord::DisklessSegment`]. Answered PerItem.
    DisklessCompact {
        node_id: i32,
        segments: Vec<(Uuid, i32, SegmentCoord)>,
    },
    /// A barrier: answered with the metadata offset that holds everything committed before
    /// it, once a quorum confirmed this controller still leads (what diskless garbage
    /// collection waits for before it trusts its image to name every object in use).
    /// Answered PerItem, empty.
    MetadataBarrier {
        node_id: i32,
    },
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ReplyBody {
    Created(Vec<Result<CreatedTopic, ApiError>>),
    Deleted(Vec<DeleteOutcome>),
    Done(Result<(), ApiError>),
    ProducerIds(i64),
    Heartbeat {
        fenced: bool,
        should_shutdown: bool,
    },
    /// One outcome per partition (ElectLeaders, AlterPartitionReassignments).
    PerPartition(Vec<PartitionOutcome>),
    /// One outcome per user (AlterUserScramCredentials).
    PerUser(Vec<UserOutcome>),
    /// One outcome per item asked for (CreateAcls, AlterClientQuotas).
    PerItem(Vec<Result<(), ApiError>>),
    /// Per filter the ACLs it deleted (DeleteAcls).
    AclsDeleted(Vec<Result<Vec<AclBinding>, ApiError>>),
    /// DescribeQuorum.
    Quorum(QuorumInfo),
    /// A delegation token request's outcome.
    Token(Box<Result<TokenReply, ApiError>>),
    /// Per batch of a WAL object, its offsets or why not (DisklessCommit).
    Sequenced(Vec<Result<Sequenced, ApiError>>),
}

fn put_endpoints(w: &mut Writer, endpoints: &[Endpoint]) {
    w.u32(endpoints.len() as u32);
    for e in endpoints {
        w.str(&e.name).str(&e.host).i32(i32::from(e.port));
    }
}

fn get_endpoints(r: &mut Reader) -> Result<Vec<Endpoint>, WireError> {
    let n = r.count(12)?;
    let mut endpoints = Vec::with_capacity(n);
    for _ in 0..n {
        endpoints.push(Endpoint {
            name: r.str()?,
            host: r.str()?,
            port: u16::try_from(r.i32()?).map_err(|_| WireError("bad port"))?,
        });
    }
    Ok(endpoints)
}

fn put_controller(w: &mut Writer, c: &ControllerSpec) {
    w.i32(c.node_id).uuid(&c.directory_id);
    put_endpoints(w, &c.endpoints);
}

fn get_controller(r: &mut Reader) -> Result<ControllerSpec, WireError> {
    Ok(ControllerSpec {
        node_id: r.i32()?,
        directory_id: r.uuid()?,
        endpoints: get_endpoints(r)?,
    })
}

fn put_replicas(w: &mut Writer, replicas: &[QuorumReplica]) {
    w.u32(replicas.len() as u32);
    for r in replicas {
        w.i32(r.id)
            .uuid(&r.directory_id)
            .i64(r.log_end_offset)
            .i64(r.last_fetch_ms)
            .i64(r.last_caught_up_ms);
    }
}

fn get_replicas(r: &mut Reader) -> Result<Vec<QuorumReplica>, WireError> {
    let n = r.count(44)?;
    (0..n)
        .map(|_| {
            Ok(QuorumReplica {
                id: r.i32()?,
                directory_id: r.uuid()?,
                log_end_offset: r.i64()?,
                last_fetch_ms: r.i64()?,
                last_caught_up_ms: r.i64()?,
            })
        })
        .collect()
}

fn put_binding(w: &mut Writer, b: &AclBinding) {
    w.u8(b.resource_type as u8)
        .str(&b.resource_name)
        .u8(b.pattern_type as u8)
        .str(&b.principal)
        .str(&b.host)
        .u8(b.operation as u8)
        .u8(b.permission as u8);
}

fn get_binding(r: &mut Reader) -> Result<AclBinding, WireError> {
    Ok(AclBinding {
        resource_type: r.u8()? as i8,
        resource_name: r.str()?,
        pattern_type: r.u8()? as i8,
        principal: r.str()?,
        host: r.str()?,
        operation: r.u8()? as i8,
        permission: r.u8()? as i8,
    })
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ControllerResponse {
    /// Done; the change (if any) is committed at metadata offset `offset`.
    Ok {
        offset: i64,
        body: ReplyBody,
    },
    /// Not the active controller; the leader's (id, controller address) when known.
    NotController(Option<(i32, String)>),
    Failed(String),
}

fn put_api_error(w: &mut Writer, e: &ApiError) {
    w.i16(e.code.code()).str(&e.message);
}

fn get_api_error(r: &mut Reader) -> Result<ApiError, WireError> {
    let code = r.i16()?;
    Ok(ApiError::new(
        ErrorCode::try_from_code(code).unwrap_or(ErrorCode::UnknownServerError),
        r.str()?,
    ))
}

fn put_result<T>(w: &mut Writer, r: &Result<T, ApiError>, ok: impl FnOnce(&mut Writer, &T)) {
    match r {
        Ok(v) => {
            w.bool(true);
            ok(w, v);
        }
        Err(e) => {
            w.bool(false);
            put_api_error(w, e);
        }
    }
}

fn get_result<T>(
    r: &mut Reader,
    ok: impl FnOnce(&mut Reader) -> Result<T, WireError>,
) -> Result<Result<T, ApiError>, WireError> {
    Ok(if r.bool()? {
        Ok(ok(r)?)
    } else {
        Err(get_api_error(r)?)
    })
}

fn put_changes(w: &mut Writer, changes: &[(String, Option<String>)]) {
    w.u32(changes.len() as u32);
    for (k, v) in changes {
        w.str(k).opt_str(v.as_deref());
    }
}

fn get_changes(r: &mut Reader) -> Result<Vec<(String, Option<String>)>, WireError> {
    let n = r.count(5)?;
    (0..n).map(|_| Ok((r.str()?, r.opt_str()?))).collect()
}

impl ControllerRequest {
    pub fn encode(&self) -> Vec<u8> {
        let mut w = Writer::default();
        match self {
            ControllerRequest::CreateTopics {
                specs,
                validate_only,
            } => {
                w.u8(1).bool(*validate_only).u32(specs.len() as u32);
                for s in specs {
                    w.str(&s.name)
                        .i32(s.num_partitions)
                        .i16(s.replication_factor);
                    w.u32(s.assignments.len() as u32);
                    for (p, replicas) in &s.assignments {
                        w.i32(*p).ints(replicas);
                    }
                    put_changes(&mut w, &s.configs);
                }
            }
            ControllerRequest::DeleteTopics(targets) => {
                w.u8(2).u32(targets.len() as u32);
                for t in targets {
                    match t {
                        TopicRef::Name(n) => w.u8(0).str(n),
                        TopicRef::Id(id) => w.u8(1).uuid(id),
                    };
                }
            }
            ControllerRequest::CreatePartitions {
                topic,
                count,
                assignments,
                validate_only,
            } => {
                w.u8(3).str(topic).i32(*count).bool(*validate_only);
                match assignments {
                    Some(a) => {
                        w.bool(true).u32(a.len() as u32);
                        for r in a {
                            w.ints(r);
                        }
                    }
                    None => {
                        w.bool(false);
                    }
                }
            }
            ControllerRequest::AlterTopicConfigs {
                topic,
                changes,
                validate_only,
            } => {
                w.u8(4).str(topic).bool(*validate_only);
                put_changes(&mut w, changes);
            }
            ControllerRequest::AllocateProducerIds { node_id, count } => {
                w.u8(5).i32(*node_id).i64(*count);
            }
            ControllerRequest::AlterBrokerConfigs {
                broker,
                changes,
                validate_only,
            } => {
                w.u8(14).str(broker).bool(*validate_only);
                put_changes(&mut w, changes);
            }
            ControllerRequest::AlterLinkConfigs {
                link,
                changes,
                validate_only,
            } => {
                w.u8(15).str(link).bool(*validate_only);
                put_changes(&mut w, changes);
            }
            ControllerRequest::AlterResourceConfigs {
                resource_type,
                name,
                changes,
                validate_only,
            } => {
                w.u8(24)
                    .u8(*resource_type as u8)
                    .str(name)
                    .bool(*validate_only);
                put_changes(&mut w, changes);
            }
            ControllerRequest::Heartbeat(h) => {
                w.u8(6).i32(h.node_id).uuid(&h.incarnation_id);
                put_endpoints(&mut w, &h.endpoints);
                w.opt_str(h.rack.as_deref())
                    .i64(h.metadata_offset)
                    .bool(h.want_shutdown);
                // Only when there are any: a heartbeat without stays as controllers of
                // earlier versions read it.
                if !h.offline_replicas.is_empty() || h.unclean_shutdown {
                    w.u32(h.offline_replicas.len() as u32);
                    for (topic_id, partition) in &h.offline_replicas {
                        w.uuid(topic_id).i32(*partition);
                    }
                }
                if h.unclean_shutdown {
                    w.bool(true);
                }
            }
            ControllerRequest::AlterPartition(c) => {
                w.u8(7)
                    .i32(c.leader)
                    .uuid(&c.topic_id)
                    .i32(c.partition)
                    .i32(c.leader_epoch)
                    .i32(c.partition_epoch)
                    .ints(&c.isr);
            }
            ControllerRequest::ElectLeaders {
                preferred,
                partitions,
            } => {
                w.u8(8).bool(*preferred);
                match partitions {
                    Some(ps) => {
                        w.bool(true).u32(ps.len() as u32);
                        for (t, p) in ps {
                            w.str(t).i32(*p);
                        }
                    }
                    None => {
                        w.bool(false);
                    }
                }
            }
            ControllerRequest::AlterReassignments {
                targets,
                allow_rf_change,
            } => {
                w.u8(9).bool(*allow_rf_change).u32(targets.len() as u32);
                for (t, p, replicas) in targets {
                    w.str(t).i32(*p);
                    match replicas {
                        Some(r) => {
                            w.bool(true).ints(r);
                        }
                        None => {
                            w.bool(false);
                        }
                    }
                }
            }
            ControllerRequest::AlterClientQuotas {
                changes,
                validate_only,
            } => {
                w.u8(13).bool(*validate_only).u32(changes.len() as u32);
                for (entity, ops) in changes {
                    for part in [&entity.user, &entity.client_id] {
                        match part {
                            None => w.u8(0),
                            Some(None) => w.u8(1),
                            Some(Some(n)) => w.u8(2).str(n),
                        };
                    }
                    w.u32(ops.len() as u32);
                    for (k, v) in ops {
                        w.str(k);
                        match v {
                            Some(v) => w.bool(true).u64(v.to_bits()),
                            None => w.bool(false),
                        };
                    }
                }
            }
            ControllerRequest::CreateAcls(bindings) => {
                w.u8(11).u32(bindings.len() as u32);
                for b in bindings {
                    put_binding(&mut w, b);
                }
            }
            ControllerRequest::DescribeQuorum => {
                w.u8(17);
            }
            ControllerRequest::UnregisterBroker(node_id) => {
                w.u8(19).i32(*node_id);
            }
            ControllerRequest::RemoteLogSegment { node_id, segment } => {
                w.u8(26)
                    .i32(*node_id)
                    .bytes(&MetadataRecord::RemoteLogSegment(segment.clone()).encode());
            }
            ControllerRequest::DisklessCommit {
                node_id,
                object_id,
                batches,
            } => {
                w.u8(27)
                    .i32(*node_id)
                    .uuid(object_id)
                    .u32(batches.len() as u32);
                for b in batches {
                    w.uuid(&b.topic_id)
                        .i32(b.partition)
                        .u32(b.position)
                        .u32(b.size)
                        .i32(b.record_count)
                        .i64(b.max_timestamp_ms)
                        .i64(b.producer_id)
                        .i16(b.producer_epoch)
                        .i32(b.base_sequence)
                        .u8(b.kind.code());
                }
            }
            ControllerRequest::DisklessCompact { node_id, segments } => {
                w.u8(29).i32(*node_id).u32(segments.len() as u32);
                for (topic_id, partition, segment) in segments {
                    w.bytes(
                        &MetadataRecord::DisklessSegment {
                            topic_id: *topic_id,
                            partition: *partition,
                            segment: segment.clone(),
                        }
                        .encode(),
                    );
                }
            }
            ControllerRequest::MetadataBarrier { node_id } => {
                w.u8(30).i32(*node_id);
            }
            ControllerRequest::DisklessTrim { node_id, trims } => {
                w.u8(28).i32(*node_id).u32(trims.len() as u32);
                for (topic_id, partition, start) in trims {
                    w.uuid(topic_id).i32(*partition).i64(*start);
                }
            }
            ControllerRequest::ObserveQuorum(c) => {
                w.u8(20);
                put_controller(&mut w, c);
            }
            ControllerRequest::AddVoter(c) => {
                w.u8(21);
                put_controller(&mut w, c);
            }
            ControllerRequest::UpdateVoter(c) => {
                w.u8(25);
                put_controller(&mut w, c);
            }
            ControllerRequest::RemoveVoter {
                node_id,
                directory_id,
            } => {
                w.u8(22).i32(*node_id).uuid(directory_id);
            }
            ControllerRequest::DelegationToken(t) => {
                w.u8(23);
                match t {
                    TokenRequest::Create {
                        owner,
                        requester,
                        renewers,
                        max_lifetime_ms,
                    } => {
                        w.u8(0).str(owner).str(requester).u32(renewers.len() as u32);
                        for r in renewers {
                            w.str(r);
                        }
                        w.i64(*max_lifetime_ms);
                    }
                    TokenRequest::Renew {
                        hmac,
                        principal,
                        period_ms,
                    } => {
                        w.u8(1).bytes(hmac).str(principal).i64(*period_ms);
                    }
                    TokenRequest::Expire {
                        hmac,
                        principal,
                        period_ms,
                    } => {
                        w.u8(2).bytes(hmac).str(principal).i64(*period_ms);
                    }
                }
            }
            ControllerRequest::UpdateFeatures {
                updates,
                validate_only,
            } => {
                w.u8(18).bool(*validate_only).u32(updates.len() as u32);
                for (name, level, how) in updates {
                    w.str(name).i32(i32::from(*level)).u8(*how as u8);
                }
            }
            ControllerRequest::CopyAcls { link, bindings } => {
                w.u8(16).str(link).u32(bindings.len() as u32);
                for b in bindings {
                    put_binding(&mut w, b);
                }
            }
            ControllerRequest::DeleteAcls(filters) => {
                w.u8(12).u32(filters.len() as u32);
                for f in filters {
                    w.u8(f.resource_type as u8)
                        .opt_str(f.resource_name.as_deref())
                        .u8(f.pattern_type as u8)
                        .opt_str(f.principal.as_deref())
                        .opt_str(f.host.as_deref())
                        .u8(f.operation as u8)
                        .u8(f.permission as u8);
                }
            }
            ControllerRequest::AlterScramCredentials(changes) => {
                w.u8(10).u32(changes.len() as u32);
                for (user, mechanism, cred) in changes {
                    w.str(user).u8(*mechanism as u8);
                    match cred {
                        Some(c) => {
                            w.bool(true)
                                .bytes(&c.salt)
                                .bytes(&c.stored_key)
                                .bytes(&c.server_key)
                                .i32(c.iterations);
                        }
                        None => {
                            w.bool(false);
                        }
                    }
                }
            }
        }
        w.0
    }

    pub fn decode(buf: &[u8]) -> Result<Self, WireError> {
        let mut r = Reader::new(buf);
        let req = match r.u8()? {
            1 => {
                let validate_only = r.bool()?;
                let n = r.count(14)?;
                let mut specs = Vec::with_capacity(n);
                for _ in 0..n {
                    let name = r.str()?;
                    let num_partitions = r.i32()?;
                    let replication_factor = r.i16()?;
                    let k = r.count(8)?;
                    let mut assignments = Vec::with_capacity(k);
                    for _ in 0..k {
                        assignments.push((r.i32()?, r.ints()?));
                    }
                    specs.push(CreateTopicSpec {
                        name,
                        num_partitions,
                        replication_factor,
                        assignments,
                        configs: get_changes(&mut r)?,
                    });
                }
                ControllerRequest::CreateTopics {
                    specs,
                    validate_only,
                }
            }
            2 => {
                let n = r.count(5)?;
                let mut targets = Vec::with_capacity(n);
                for _ in 0..n {
                    targets.push(match r.u8()? {
                        0 => TopicRef::Name(r.str()?),
                        _ => TopicRef::Id(r.uuid()?),
                    });
                }
                ControllerRequest::DeleteTopics(targets)
            }
            3 => {
                let topic = r.str()?;
                let count = r.i32()?;
                let validate_only = r.bool()?;
                let assignments = if r.bool()? {
                    let n = r.count(4)?;
                    Some((0..n).map(|_| r.ints()).collect::<Result<_, _>>()?)
                } else {
                    None
                };
                ControllerRequest::CreatePartitions {
                    topic,
                    count,
                    assignments,
                    validate_only,
                }
            }
            4 => ControllerRequest::AlterTopicConfigs {
                topic: r.str()?,
                validate_only: r.bool()?,
                changes: get_changes(&mut r)?,
            },
            5 => ControllerRequest::AllocateProducerIds {
                node_id: r.i32()?,
                count: r.i64()?,
            },
            14 => ControllerRequest::AlterBrokerConfigs {
                broker: r.str()?,
                validate_only: r.bool()?,
                changes: get_changes(&mut r)?,
            },
            17 => ControllerRequest::DescribeQuorum,
            19 => ControllerRequest::UnregisterBroker(r.i32()?),
            26 => {
                let node_id = r.i32()?;
                match MetadataRecord::decode(r.bytes()?) {
                    Ok(MetadataRecord::RemoteLogSegment(segment)) => {
                        ControllerRequest::RemoteLogSegment { node_id, segment }
                    }
                    _ => return Err(WireError("bad remote log segment")),
                }
            }
            29 => {
                let node_id = r.i32()?;
                let n = r.count(80)?;
                let mut segments = Vec::with_capacity(n);
                for _ in 0..n {
                    match MetadataRecord::decode(r.bytes()?) {
                        Ok(MetadataRecord::DisklessSegment {
                            topic_id,
                            partition,
                            segment,
                        }) => segments.push((topic_id, partition, segment)),
                        _ => return Err(WireError("bad diskless segment")),
                    }
                }
                ControllerRequest::DisklessCompact { node_id, segments }
            }
            30 => ControllerRequest::MetadataBarrier { node_id: r.i32()? },
            28 => {
                let node_id = r.i32()?;
                let n = r.count(28)?;
                let trims = (0..n)
                    .map(|_| Ok((r.uuid()?, r.i32()?, r.i64()?)))
                    .collect::<Result<_, WireError>>()?;
                ControllerRequest::DisklessTrim { node_id, trims }
            }
            27 => {
                let node_id = r.i32()?;
                let object_id = r.uuid()?;
                let n = r.count(55)?;
                let mut batches = Vec::with_capacity(n);
                for _ in 0..n {
                    batches.push(WalBatch {
                        topic_id: r.uuid()?,
                        partition: r.i32()?,
                        position: r.u32()?,
                        size: r.u32()?,
                        record_count: r.i32()?,
                        max_timestamp_ms: r.i64()?,
                        producer_id: r.i64()?,
                        producer_epoch: r.i16()?,
                        base_sequence: r.i32()?,
                        kind: BatchKind::from_code(r.u8()?)
                            .ok_or(WireError("bad diskless batch kind"))?,
                    });
                }
                ControllerRequest::DisklessCommit {
                    node_id,
                    object_id,
                    batches,
                }
            }
            20 => ControllerRequest::ObserveQuorum(get_controller(&mut r)?),
            21 => ControllerRequest::AddVoter(get_controller(&mut r)?),
            25 => ControllerRequest::UpdateVoter(get_controller(&mut r)?),
            22 => ControllerRequest::RemoveVoter {
                node_id: r.i32()?,
                directory_id: r.uuid()?,
            },
            23 => ControllerRequest::DelegationToken(match r.u8()? {
                0 => {
                    let owner = r.str()?;
                    let requester = r.str()?;
                    let n = r.count(2)?;
                    let renewers = (0..n).map(|_| r.str()).collect::<Result<_, _>>()?;
                    TokenRequest::Create {
                        owner,
                        requester,
                        renewers,
                        max_lifetime_ms: r.i64()?,
                    }
                }
                1 => TokenRequest::Renew {
                    hmac: r.bytes()?.to_vec(),
                    principal: r.str()?,
                    period_ms: r.i64()?,
                },
                2 => TokenRequest::Expire {
                    hmac: r.bytes()?.to_vec(),
                    principal: r.str()?,
                    period_ms: r.i64()?,
                },
                _ => return Err(WireError("unknown delegation token request")),
            }),
            18 => {
                let validate_only = r.bool()?;
                let n = r.count(7)?;
                let mut updates = Vec::with_capacity(n);
                for _ in 0..n {
                    let name = r.str()?;
                    let level = i16::try_from(r.i32()?)
                        .map_err(|_| WireError("feature level out of range"))?;
                    updates.push((name, level, r.u8()? as i8));
                }
                ControllerRequest::UpdateFeatures {
                    updates,
                    validate_only,
                }
            }
            16 => {
                let link = r.str()?;
                let n = r.count(9)?;
                let mut bindings = Vec::with_capacity(n);
                for _ in 0..n {
                    bindings.push(get_binding(&mut r)?);
                }
                ControllerRequest::CopyAcls { link, bindings }
            }
            15 => ControllerRequest::AlterLinkConfigs {
                link: r.str()?,
                validate_only: r.bool()?,
                changes: get_changes(&mut r)?,
            },
            24 => ControllerRequest::AlterResourceConfigs {
                resource_type: r.u8()? as i8,
                name: r.str()?,
                validate_only: r.bool()?,
                changes: get_changes(&mut r)?,
            },
            6 => {
                let node_id = r.i32()?;
                let incarnation_id = r.uuid()?;
                let endpoints = get_endpoints(&mut r)?;
                let rack = r.opt_str()?;
                let metadata_offset = r.i64()?;
                let want_shutdown = r.bool()?;
                let mut offline_replicas = Vec::new();
                if !r.buf.is_empty() {
                    for _ in 0..r.count(20)? {
                        offline_replicas.push((r.uuid()?, r.i32()?));
                    }
                }
                let unclean_shutdown = !r.buf.is_empty() && r.bool()?;
                ControllerRequest::Heartbeat(Heartbeat {
                    node_id,
                    incarnation_id,
                    endpoints,
                    rack,
                    metadata_offset,
                    want_shutdown,
                    offline_replicas,
                    unclean_shutdown,
                })
            }
            7 => ControllerRequest::AlterPartition(IsrChange {
                leader: r.i32()?,
                topic_id: r.uuid()?,
                partition: r.i32()?,
                leader_epoch: r.i32()?,
                partition_epoch: r.i32()?,
                isr: r.ints()?,
            }),
            8 => {
                let preferred = r.bool()?;
                let partitions = if r.bool()? {
                    let n = r.count(8)?;
                    Some(
                        (0..n)
                            .map(|_| Ok((r.str()?, r.i32()?)))
                            .collect::<Result<_, _>>()?,
                    )
                } else {
                    None
                };
                ControllerRequest::ElectLeaders {
                    preferred,
                    partitions,
                }
            }
            9 => {
                let allow_rf_change = r.bool()?;
                let n = r.count(7)?;
                let mut targets = Vec::with_capacity(n);
                for _ in 0..n {
                    let t = r.str()?;
                    let p = r.i32()?;
                    let replicas = if r.bool()? { Some(r.ints()?) } else { None };
                    targets.push((t, p, replicas));
                }
                ControllerRequest::AlterReassignments {
                    targets,
                    allow_rf_change,
                }
            }
            10 => {
                let n = r.count(4)?;
                let mut changes = Vec::with_capacity(n);
                for _ in 0..n {
                    let user = r.str()?;
                    let mechanism = r.u8()? as i8;
                    let cred = if r.bool()? {
                        Some(ScramEntry {
                            salt: r.bytes()?.to_vec(),
                            stored_key: r.bytes()?.to_vec(),
                            server_key: r.bytes()?.to_vec(),
                            iterations: r.i32()?,
                        })
                    } else {
                        None
                    };
                    changes.push((user, mechanism, cred));
                }
                ControllerRequest::AlterScramCredentials(changes)
            }
            13 => {
                let validate_only = r.bool()?;
                let n = r.count(6)?;
                let mut changes = Vec::with_capacity(n);
                for _ in 0..n {
                    let mut parts = [None, None];
                    for p in &mut parts {
                        *p = match r.u8()? {
                            0 => None,
                            1 => Some(None),
                            _ => Some(Some(r.str()?)),
                        };
                    }
                    let [user, client_id] = parts;
                    let m = r.count(3)?;
                    let mut ops = Vec::with_capacity(m);
                    for _ in 0..m {
                        let k = r.str()?;
                        let v = if r.bool()? {
                            Some(f64::from_bits(r.u64()?))
                        } else {
                            None
                        };
                        ops.push((k, v));
                    }
                    changes.push((QuotaEntity { user, client_id }, ops));
                }
                ControllerRequest::AlterClientQuotas {
                    changes,
                    validate_only,
                }
            }
            11 => {
                let n = r.count(9)?;
                let mut bindings = Vec::with_capacity(n);
                for _ in 0..n {
                    bindings.push(get_binding(&mut r)?);
                }
                ControllerRequest::CreateAcls(bindings)
            }
            12 => {
                let n = r.count(10)?;
                let mut filters = Vec::with_capacity(n);
                for _ in 0..n {
                    filters.push(AclFilter {
                        resource_type: r.u8()? as i8,
                        resource_name: r.opt_str()?,
                        pattern_type: r.u8()? as i8,
                        principal: r.opt_str()?,
                        host: r.opt_str()?,
                        operation: r.u8()? as i8,
                        permission: r.u8()? as i8,
                    });
                }
                ControllerRequest::DeleteAcls(filters)
            }
            _ => return Err(WireError("unknown controller request")),
        };
        r.done()?;
        Ok(req)
    }
}

impl ControllerResponse {
    pub fn encode(&self) -> Vec<u8> {
        let mut w = Writer::default();
        match self {
            ControllerResponse::Ok { offset, body } => {
                w.u8(0).i64(*offset);
                match body {
                    ReplyBody::Created(v) => {
                        w.u8(1).u32(v.len() as u32);
                        for c in v {
                            put_result(&mut w, c, |w, c| {
                                w.uuid(&c.id)
                                    .i32(c.num_partitions)
                                    .i16(c.replication_factor);
                            });
                        }
                    }
                    ReplyBody::Deleted(v) => {
                        w.u8(2).u32(v.len() as u32);
                        for d in v {
                            put_result(&mut w, d, |w, (n, id)| {
                                w.str(n).uuid(id);
                            });
                        }
                    }
                    ReplyBody::Done(r) => {
                        w.u8(3);
                        put_result(&mut w, r, |_, _| {});
                    }
                    ReplyBody::ProducerIds(first) => {
                        w.u8(4).i64(*first);
                    }
                    ReplyBody::Heartbeat {
                        fenced,
                        should_shutdown,
                    } => {
                        w.u8(5).bool(*fenced).bool(*should_shutdown);
                    }
                    ReplyBody::PerPartition(v) => {
                        w.u8(6).u32(v.len() as u32);
                        for (t, p, r) in v {
                            w.str(t).i32(*p);
                            put_result(&mut w, r, |_, _| {});
                        }
                    }
                    ReplyBody::PerUser(v) => {
                        w.u8(7).u32(v.len() as u32);
                        for (user, r) in v {
                            w.str(user);
                            put_result(&mut w, r, |_, _| {});
                        }
                    }
                    ReplyBody::PerItem(v) => {
                        w.u8(8).u32(v.len() as u32);
                        for r in v {
                            put_result(&mut w, r, |_, _| {});
                        }
                    }
                    ReplyBody::AclsDeleted(v) => {
                        w.u8(9).u32(v.len() as u32);
                        for r in v {
                            put_result(&mut w, r, |w, bindings| {
                                w.u32(bindings.len() as u32);
                                for b in bindings {
                                    put_binding(w, b);
                                }
                            });
                        }
                    }
                    ReplyBody::Sequenced(v) => {
                        w.u8(12).u32(v.len() as u32);
                        for r in v {
                            put_result(&mut w, r, |w, s| match s {
                                Sequenced::New(o) => {
                                    w.u8(0).i64(*o);
                                }
                                Sequenced::Duplicate(o) => {
                                    w.u8(1).i64(*o);
                                }
                            });
                        }
                    }
                    ReplyBody::Token(t) => {
                        w.u8(11);
                        put_result(&mut w, t.as_ref(), |w, t| {
                            w.bytes(&t.hmac)
                                .str(&t.token.token_id)
                                .str(&t.token.owner)
                                .str(&t.token.requester)
                                .u32(t.token.renewers.len() as u32);
                            for r in &t.token.renewers {
                                w.str(r);
                            }
                            w.i64(t.token.issue_ms)
                                .i64(t.token.max_ms)
                                .i64(t.token.expiry_ms);
                        });
                    }
                    ReplyBody::Quorum(q) => {
                        w.u8(10)
                            .i32(q.leader_id)
                            .i32(q.leader_epoch)
                            .i64(q.high_watermark);
                        put_replicas(&mut w, &q.voters);
                        put_replicas(&mut w, &q.observers);
                        w.u32(q.voter_endpoints.len() as u32);
                        for (id, host, port) in &q.voter_endpoints {
                            w.i32(*id).str(host).i32(i32::from(*port));
                        }
                    }
                }
            }
            ControllerResponse::NotController(leader) => {
                w.u8(1);
                match leader {
                    Some((id, addr)) => w.bool(true).i32(*id).str(addr),
                    None => w.bool(false),
                };
            }
            ControllerResponse::Failed(m) => {
                w.u8(2).str(m);
            }
        }
        w.0
    }

    pub fn decode(buf: &[u8]) -> Result<Self, WireError> {
        let mut r = Reader::new(buf);
        let resp = match r.u8()? {
            0 => {
                let offset = r.i64()?;
                let body = match r.u8()? {
                    1 => {
                        let n = r.count(2)?;
                        let mut v = Vec::with_capacity(n);
                        for _ in 0..n {
                            v.push(get_result(&mut r, |r| {
                                Ok(CreatedTopic {
                                    id: r.uuid()?,
                                    num_partitions: r.i32()?,
                                    replication_factor: r.i16()?,
                                })
                            })?);
                        }
                        ReplyBody::Created(v)
                    }
                    2 => {
                        let n = r.count(2)?;
                        let mut v = Vec::with_capacity(n);
                        for _ in 0..n {
                            v.push(get_result(&mut r, |r| Ok((r.str()?, r.uuid()?)))?);
                        }
                        ReplyBody::Deleted(v)
                    }
                    3 => ReplyBody::Done(get_result(&mut r, |_| Ok(()))?),
                    4 => ReplyBody::ProducerIds(r.i64()?),
                    5 => ReplyBody::Heartbeat {
                        fenced: r.bool()?,
                        should_shutdown: r.bool()?,
                    },
                    6 => {
                        let n = r.count(9)?;
                        let mut v = Vec::with_capacity(n);
                        for _ in 0..n {
                            let t = r.str()?;
                            let p = r.i32()?;
                            v.push((t, p, get_result(&mut r, |_| Ok(()))?));
                        }
                        ReplyBody::PerPartition(v)
                    }
                    7 => {
                        let n = r.count(3)?;
                        let mut v = Vec::with_capacity(n);
                        for _ in 0..n {
                            let user = r.str()?;
                            v.push((user, get_result(&mut r, |_| Ok(()))?));
                        }
                        ReplyBody::PerUser(v)
                    }
                    8 => {
                        let n = r.count(1)?;
                        let mut v = Vec::with_capacity(n);
                        for _ in 0..n {
                            v.push(get_result(&mut r, |_| Ok(()))?);
                        }
                        ReplyBody::PerItem(v)
                    }
                    9 => {
                        let n = r.count(1)?;
                        let mut v = Vec::with_capacity(n);
                        for _ in 0..n {
                            v.push(get_result(&mut r, |r| {
                                let m = r.count(9)?;
                                (0..m).map(|_| get_binding(r)).collect()
                            })?);
                        }
                        ReplyBody::AclsDeleted(v)
                    }
                    10 => {
                        let leader_id = r.i32()?;
                        let leader_epoch = r.i32()?;
                        let high_watermark = r.i64()?;
                        let voters = get_replicas(&mut r)?;
                        let observers = get_replicas(&mut r)?;
                        let n = r.count(10)?;
                        let mut voter_endpoints = Vec::with_capacity(n);
                        for _ in 0..n {
                            let id = r.i32()?;
                            let host = r.str()?;
                            let port = u16::try_from(r.i32()?)
                                .map_err(|_| WireError("port out of range"))?;
                            voter_endpoints.push((id, host, port));
                        }
                        ReplyBody::Quorum(QuorumInfo {
                            leader_id,
                            leader_epoch,
                            high_watermark,
                            voters,
                            observers,
                            voter_endpoints,
                        })
                    }
                    12 => {
                        let n = r.count(1)?;
                        let mut v = Vec::with_capacity(n);
                        for _ in 0..n {
                            v.push(get_result(&mut r, |r| {
                                let tag = r.u8()?;
                                let o = r.i64()?;
                                match tag {
                                    0 => Ok(Sequenced::New(o)),
                                    1 => Ok(Sequenced::Duplicate(o)),
                                    _ => Err(WireError("bad sequenced batch")),
                                }
                            })?);
                        }
                        ReplyBody::Sequenced(v)
                    }
                    11 => ReplyBody::Token(Box::new(get_result(&mut r, |r| {
                        let hmac = r.bytes()?.to_vec();
                        let token_id = r.str()?;
                        let owner = r.str()?;
                        let requester = r.str()?;
                        let n = r.count(2)?;
                        let renewers = (0..n).map(|_| r.str()).collect::<Result<_, _>>()?;
                        Ok(TokenReply {
                            hmac,
                            token: TokenRecord {
                                token_id,
                                owner,
                                requester,
                                renewers,
                                issue_ms: r.i64()?,
                                max_ms: r.i64()?,
                                expiry_ms: r.i64()?,
                            },
                        })
                    })?)),
                    _ => return Err(WireError("unknown reply")),
                };
                ControllerResponse::Ok { offset, body }
            }
            1 => ControllerResponse::NotController(if r.bool()? {
                Some((r.i32()?, r.str()?))
            } else {
                None
            }),
            2 => ControllerResponse::Failed(r.str()?),
            _ => return Err(WireError("unknown controller response")),
        };
        r.done()?;
        Ok(resp)
    }
}

/// A broker-only node asking a controller for metadata after `offset`, waiting up to
/// `wait_ms` for something new.
pub fn encode_fetch(offset: i64, wait_ms: u32) -> Vec<u8> {
    let mut w = Writer::default();
    w.i64(offset).u32(wait_ms);
    w.0
}

pub fn decode_fetch(buf: &[u8]) -> Result<(i64, u32), WireError> {
    let mut r = Reader::new(buf);
    let v = (r.i64()?, r.u32()?);
    r.done()?;
    Ok(v)
}

/// The answer: the active controller id (-1 unknown), whether `entries` is a snapshot (one
/// entry: the whole image at its offset) and the entries (offset, records).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FetchResponse {
    pub leader: i32,
    pub snapshot: bool,
    pub entries: Vec<(i64, Vec<MetadataRecord>)>,
}

impl FetchResponse {
    pub fn encode(&self) -> Vec<u8> {
        let mut w = Writer::default();
        w.i32(self.leader)
            .bool(self.snapshot)
            .u32(self.entries.len() as u32);
        for (o, recs) in &self.entries {
            w.i64(*o);
            put_records(&mut w, recs);
        }
        w.0
    }

    pub fn decode(buf: &[u8]) -> Result<Self, WireError> {
        let mut r = Reader::new(buf);
        let leader = r.i32()?;
        let snapshot = r.bool()?;
        let n = r.count(12)?;
        let mut entries = Vec::with_capacity(n);
        for _ in 0..n {
            entries.push((r.i64()?, get_records(&mut r)?));
        }
        r.done()?;
        Ok(Self {
            leader,
            snapshot,
            entries,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample_acl() -> AclBinding {
        AclBinding {
            resource_type: 2,
            resource_name: "t".into(),
            pattern_type: 3,
            principal: "User:a".into(),
            host: "*".into(),
            operation: 3,
            permission: 3,
        }
    }

    #[test]
    fn requests_and_responses_round_trip_and_truncations_fail() {
        let reqs = [
            ControllerRequest::CreateTopics {
                specs: vec![CreateTopicSpec {
                    name: "t".into(),
                    num_partitions: 3,
                    replication_factor: -1,
                    assignments: vec![(0, vec![1, 2])],
                    configs: vec![("a".into(), None), ("b".into(), Some("c".into()))],
                }],
                validate_only: true,
            },
            ControllerRequest::DeleteTopics(vec![
                TopicRef::Name("x".into()),
                TopicRef::Id(Uuid::from_bytes([1; 16])),
            ]),
            ControllerRequest::CreatePartitions {
                topic: "t".into(),
                count: 4,
                assignments: Some(vec![vec![1], vec![2]]),
                validate_only: false,
            },
            ControllerRequest::AlterTopicConfigs {
                topic: "t".into(),
                changes: vec![("x".into(), Some("y".into()))],
                validate_only: false,
            },
            ControllerRequest::AllocateProducerIds {
                node_id: 2,
                count: 1000,
            },
            ControllerRequest::AlterBrokerConfigs {
                broker: "".into(),
                changes: vec![
                    ("log.retention.ms".into(), Some("1".into())),
                    ("x".into(), None),
                ],
                validate_only: true,
            },
            ControllerRequest::AlterLinkConfigs {
                link: "dr".into(),
                changes: vec![("bootstrap.servers".into(), Some("a:1".into()))],
                validate_only: false,
            },
            ControllerRequest::AlterResourceConfigs {
                resource_type: 16,
                name: "sub".into(),
                changes: vec![("metrics".into(), Some("*".into())), ("match".into(), None)],
                validate_only: true,
            },
            ControllerRequest::Heartbeat(Heartbeat {
                node_id: 1,
                incarnation_id: Uuid::from_bytes([2; 16]),
                endpoints: vec![Endpoint {
                    name: "PLAINTEXT".into(),
                    host: "h".into(),
                    port: 9092,
                }],
                rack: Some("r".into()),
                metadata_offset: 17,
                want_shutdown: true,
                offline_replicas: vec![(Uuid::from_bytes([3; 16]), 4), (Uuid::nil(), 0)],
                unclean_shutdown: false,
            }),
            ControllerRequest::Heartbeat(Heartbeat {
                node_id: 2,
                incarnation_id: Uuid::from_bytes([5; 16]),
                endpoints: vec![],
                rack: None,
                metadata_offset: -1,
                want_shutdown: false,
                offline_replicas: vec![],
                unclean_shutdown: true,
            }),
            ControllerRequest::AlterPartition(IsrChange {
                leader: 1,
                topic_id: Uuid::from_bytes([4; 16]),
                partition: 2,
                leader_epoch: 3,
                partition_epoch: 4,
                isr: vec![1, 3],
            }),
            ControllerRequest::ElectLeaders {
                preferred: true,
                partitions: Some(vec![("t".into(), 1)]),
            },
            ControllerRequest::ElectLeaders {
                preferred: false,
                partitions: None,
            },
            ControllerRequest::AlterReassignments {
                targets: vec![("t".into(), 0, Some(vec![2, 3])), ("t".into(), 1, None)],
                allow_rf_change: true,
            },
            ControllerRequest::AlterScramCredentials(vec![
                (
                    "alice".into(),
                    2,
                    Some(ScramEntry {
                        salt: vec![1, 2],
                        stored_key: vec![3; 64],
                        server_key: vec![4; 64],
                        iterations: 4096,
                    }),
                ),
                ("bob".into(), 1, None),
            ]),
            ControllerRequest::CreateAcls(vec![sample_acl()]),
            ControllerRequest::CopyAcls {
                link: "dr".into(),
                bindings: vec![sample_acl()],
            },
            ControllerRequest::DescribeQuorum,
            ControllerRequest::UnregisterBroker(3),
            ControllerRequest::RemoteLogSegment {
                node_id: 2,
                segment: RemoteSegment {
                    topic_id: Uuid::from_bytes([5; 16]),
                    partition: 1,
                    segment_id: Uuid::from_bytes([6; 16]),
                    base_offset: 10,
                    end_offset: 20,
                    max_timestamp_ms: 7,
                    size_bytes: 1000,
                    broker_id: 2,
                    leader_epoch: 4,
                    epochs: vec![(4, 10)],
                    state: sluice_metadata::remote::RemoteSegmentState::CopyStarted,
                },
            },
            ControllerRequest::DisklessTrim {
                node_id: 2,
                trims: vec![(Uuid::from_bytes([3; 16]), 1, 500)],
            },
            ControllerRequest::MetadataBarrier { node_id: 3 },
            ControllerRequest::DisklessCompact {
                node_id: 2,
                segments: vec![(
                    Uuid::from_bytes([3; 16]),
                    1,
                    SegmentCoord {
                        segment_id: Uuid::from_bytes([4; 16]),
                        base_offset: 10,
                        last_offset: 90,
                        size: 4000,
                        max_timestamp_ms: 12,
                        max_timestamp_offset: 80,
                    },
                )],
            },
            ControllerRequest::DisklessCommit {
                node_id: 3,
                object_id: Uuid::from_bytes([8; 16]),
                batches: vec![WalBatch {
                    topic_id: Uuid::from_bytes([5; 16]),
                    partition: 2,
                    position: 100,
                    size: 61,
                    record_count: 3,
                    max_timestamp_ms: 9,
                    producer_id: 44,
                    producer_epoch: 1,
                    base_sequence: 7,
                    kind: BatchKind::Abort,
                }],
            },
            ControllerRequest::ObserveQuorum(ControllerSpec {
                node_id: 4,
                directory_id: Uuid::from_bytes([4; 16]),
                endpoints: vec![Endpoint {
                    name: "CONTROLLER".into(),
                    host: "h".into(),
                    port: 9093,
                }],
            }),
            ControllerRequest::AddVoter(ControllerSpec {
                node_id: 4,
                directory_id: Uuid::from_bytes([4; 16]),
                endpoints: Vec::new(),
            }),
            ControllerRequest::UpdateVoter(ControllerSpec {
                node_id: 3,
                directory_id: Uuid::from_bytes([3; 16]),
                endpoints: vec![Endpoint {
                    name: "CONTROLLER".into(),
                    host: "h2".into(),
                    port: 19093,
                }],
            }),
            ControllerRequest::RemoveVoter {
                node_id: 2,
                directory_id: Uuid::from_bytes([2; 16]),
            },
            ControllerRequest::UpdateFeatures {
                updates: vec![("metadata.version".into(), 21, 1)],
                validate_only: true,
            },
            ControllerRequest::AlterClientQuotas {
                changes: vec![(
                    QuotaEntity {
                        user: Some(None),
                        client_id: Some(Some("app".into())),
                    },
                    vec![
                        ("producer_byte_rate".into(), Some(1024.0)),
                        ("x".into(), None),
                    ],
                )],
                validate_only: true,
            },
            ControllerRequest::DeleteAcls(vec![AclFilter {
                resource_type: 1,
                resource_name: None,
                pattern_type: 2,
                principal: Some("User:a".into()),
                host: None,
                operation: 1,
                permission: 1,
            }]),
            ControllerRequest::DelegationToken(TokenRequest::Create {
                owner: "User:a".into(),
                requester: "User:b".into(),
                renewers: vec!["User:c".into()],
                max_lifetime_ms: -1,
            }),
            ControllerRequest::DelegationToken(TokenRequest::Renew {
                hmac: vec![1, 2],
                principal: "User:a".into(),
                period_ms: 5,
            }),
            ControllerRequest::DelegationToken(TokenRequest::Expire {
                hmac: vec![3],
                principal: "User:a".into(),
                period_ms: -1,
            }),
        ];
        for req in reqs {
            let bytes = req.encode();
            let back = ControllerRequest::decode(&bytes).unwrap();
            assert_eq!(format!("{back:?}"), format!("{req:?}"));
            for cut in 0..bytes.len() {
                match ControllerRequest::decode(&bytes[..cut]) {
                    Err(_) => {}
                    // Where a heartbeat's offline replicas would start: one without any.
                    Ok(ControllerRequest::Heartbeat(h))
                        if h.offline_replicas.is_empty()
                            && matches!(req, ControllerRequest::Heartbeat(_)) => {}
                    Ok(other) => panic!("cut at {cut}: {other:?}"),
                }
            }
        }
        let err = ApiError::new(ErrorCode::TopicAlreadyExists, "no");
        let resps = [
            ControllerResponse::Ok {
                offset: 9,
                body: ReplyBody::Token(Box::new(Ok(TokenReply {
                    hmac: vec![9; 64],
                    token: TokenRecord {
                        token_id: "id".into(),
                        owner: "User:a".into(),
                        requester: "User:b".into(),
                        renewers: vec!["User:c".into(), "User:d".into()],
                        issue_ms: 1,
                        max_ms: 3,
                        expiry_ms: 2,
                    },
                }))),
            },
            ControllerResponse::Ok {
                offset: 10,
                body: ReplyBody::Sequenced(vec![
                    Ok(Sequenced::New(4)),
                    Ok(Sequenced::Duplicate(2)),
                    Err(ApiError::new(ErrorCode::OutOfOrderSequenceNumber, "x")),
                ]),
            },
            ControllerResponse::Ok {
                offset: 9,
                body: ReplyBody::Token(Box::new(Err(ApiError::new(
                    ErrorCode::DelegationTokenExpired,
                    "x",
                )))),
            },
            ControllerResponse::Ok {
                offset: 5,
                body: ReplyBody::Created(vec![
                    Ok(CreatedTopic {
                        id: Uuid::from_bytes([3; 16]),
                        num_partitions: 1,
                        replication_factor: 3,
                    }),
                    Err(err.clone()),
                ]),
            },
            ControllerResponse::Ok {
                offset: 5,
                body: ReplyBody::Deleted(vec![Ok(("t".into(), Uuid::nil())), Err(err.clone())]),
            },
            ControllerResponse::Ok {
                offset: 6,
                body: ReplyBody::Done(Err(err)),
            },
            ControllerResponse::Ok {
                offset: 6,
                body: ReplyBody::ProducerIds(4000),
            },
            ControllerResponse::Ok {
                offset: 6,
                body: ReplyBody::Heartbeat {
                    fenced: true,
                    should_shutdown: false,
                },
            },
            ControllerResponse::Ok {
                offset: 7,
                body: ReplyBody::PerPartition(vec![
                    ("t".into(), 0, Ok(())),
                    (
                        "t".into(),
                        1,
                        Err(ApiError::new(ErrorCode::ElectionNotNeeded, "no")),
                    ),
                ]),
            },
            ControllerResponse::Ok {
                offset: 8,
                body: ReplyBody::PerUser(vec![
                    ("alice".into(), Ok(())),
                    (
                        "bob".into(),
                        Err(ApiError::new(ErrorCode::ResourceNotFound, "no")),
                    ),
                ]),
            },
            ControllerResponse::Ok {
                offset: 9,
                body: ReplyBody::PerItem(vec![
                    Ok(()),
                    Err(ApiError::new(ErrorCode::InvalidRequest, "no")),
                ]),
            },
            ControllerResponse::Ok {
                offset: 9,
                body: ReplyBody::AclsDeleted(vec![
                    Ok(vec![sample_acl()]),
                    Err(ApiError::new(ErrorCode::InvalidRequest, "no")),
                ]),
            },
            ControllerResponse::Ok {
                offset: 10,
                body: ReplyBody::Quorum(QuorumInfo {
                    leader_id: 1,
                    leader_epoch: 4,
                    high_watermark: 77,
                    voters: vec![QuorumReplica {
                        id: 1,
                        directory_id: Uuid::from_bytes([1; 16]),
                        log_end_offset: 77,
                        last_fetch_ms: 1_700_000_000_000,
                        last_caught_up_ms: -1,
                    }],
                    observers: Vec::new(),
                    voter_endpoints: vec![(1, "localhost".into(), 9093)],
                }),
            },
            ControllerResponse::NotController(Some((3, "h:1".into()))),
            ControllerResponse::NotController(None),
            ControllerResponse::Failed("disk".into()),
        ];
        for resp in resps {
            let bytes = resp.encode();
            assert_eq!(ControllerResponse::decode(&bytes).unwrap(), resp);
            for cut in 0..bytes.len() {
                assert!(ControllerResponse::decode(&bytes[..cut]).is_err());
            }
        }
        let f = FetchResponse {
            leader: 1,
            snapshot: false,
            entries: vec![(
                3,
                vec![MetadataRecord::FenceBroker {
                    node_id: 1,
                    epoch: 0,
                }],
            )],
        };
        assert_eq!(FetchResponse::decode(&f.encode()).unwrap(), f);
        assert!(ControllerRequest::decode(&[1, 0, 255, 255, 255, 255]).is_err());
    }
}
