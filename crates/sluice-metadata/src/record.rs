//! Metadata records: every change the controller makes to cluster metadata, appended to the
//! metadata log and applied, in order, by every node.
//!
//! Each record is the value of one record in a v2 batch of `__cluster_metadata-0`, encoded as
//! `type u8, version u8` then the fields, big-endian: strings as `u16 length + UTF-8`,
//! nullable strings with length -1 (`i16`) for null, uuids as 16 bytes, int lists as
//! `i32 count` then the values.

use thiserror::Error;
use uuid::Uuid;

use crate::acl::AclBinding;
use crate::diskless::{AbortedTxn, BatchCoord, BatchKind, LogState, ProducerSeqs, SegmentCoord};
use crate::image::{QuotaEntity, QuotaValue};
use crate::remote::{RemoteSegment, RemoteSegmentState};

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Endpoint {
    pub name: String,
    pub host: String,
    pub port: u16,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MetadataRecord {
    /// A broker (re)registered, with the listeners clients should use.
    RegisterBroker {
        node_id: i32,
        epoch: i64,
        incarnation_id: Uuid,
        endpoints: Vec<Endpoint>,
        rack: Option<String>,
        /// A fresh registration is fenced until the broker has caught up with the log.
        fenced: bool,
    },
    /// The broker missed its session, shut down, or re-registered: it leads nothing.
    FenceBroker { node_id: i32, epoch: i64 },
    /// The broker caught up with the metadata log and may lead partitions.
    UnfenceBroker { node_id: i32, epoch: i64 },
    /// An operator removed the broker's registration (UnregisterBroker).
    /// If it still runs, its next heartbeat registers it anew.
    UnregisterBroker { node_id: i32, epoch: i64 },
    /// A controller of a dynamic quorum (KIP-853) made itself known: the directory id of
    /// its metadata log and its controller listener, which DescribeQuorum shows. Who votes
    /// is the Raft membership's business, not this record's.
    RegisterController {
        node_id: i32,
        directory_id: Uuid,
        endpoints: Vec<Endpoint>,
    },
    /// A partition's leader and/or ISR changed, and with `assignment` its replica set (a
    /// reassignment starting, completing or cancelled). The leader epoch moves when the
    /// leader does or a replica leaves the set, the partition epoch on every change.
    PartitionChange {
        topic_id: Uuid,
        partition: i32,
        leader: i32,
        isr: Vec<i32>,
        assignment: Option<Assignment>,
        /// The eligible leader replicas (KIP-966) when they change (None: as they were).
        elr: Option<Elr>,
    },
    /// A topic was created.
    Topic { name: String, id: Uuid },
    /// A partition was created or its assignment replaced.
    Partition {
        topic_id: Uuid,
        partition: i32,
        replicas: Vec<i32>,
        isr: Vec<i32>,
        leader: i32,
        leader_epoch: i32,
        partition_epoch: i32,
        /// Replicas a reassignment is adding / removing (empty when none is in progress).
        adding: Vec<i32>,
        removing: Vec<i32>,
        /// Eligible leader replicas (KIP-966; empty when none).
        elr: Elr,
    },
    /// A config was set (`value` Some) or removed (None).
    Config {
        resource_type: i8,
        resource_name: String,
        name: String,
        value: Option<String>,
    },
    /// A topic and all its partitions were deleted.
    RemoveTopic { topic_id: Uuid },
    /// A block of producer ids was handed out to `node_id`; ids below `next_producer_id`
    /// are taken.
    ProducerIds { node_id: i32, next_producer_id: i64 },
    /// A user's SCRAM credential for one mechanism (1 SCRAM-SHA-256, 2 SCRAM-SHA-512) was
    /// set: what authenticates the user, never the password itself.
    ScramCredential {
        user: String,
        mechanism: i8,
        salt: Vec<u8>,
        stored_key: Vec<u8>,
        server_key: Vec<u8>,
        iterations: i32,
    },
    /// A user's SCRAM credential for one mechanism was deleted.
    RemoveScramCredential { user: String, mechanism: i8 },
    /// An ACL was created.
    Acl { id: Uuid, binding: AclBinding },
    /// An ACL was deleted.
    RemoveAcl { id: Uuid },
    /// A feature's finalized level was set (0: disabled); see [`crate::features`].
    FeatureLevel { name: String, level: i16 },
    /// A client quota value was set (Some) or removed (None).
    ClientQuota {
        entity: QuotaEntity,
        key: String,
        value: Option<QuotaValue>,
    },
    /// A delegation token was created, or its expiry changed (renewed, expired): Kafka's
    /// DelegationTokenRecord. The HMAC is not in it: each node derives it from the token id
    /// and its `delegation.token.secret.key`.
    DelegationToken(TokenRecord),
    /// A delegation token was removed (expired by request or by the controller's sweep).
    RemoveDelegationToken { token_id: String },
    /// A remote log segment (tiered storage) changed state; see [`crate::remote`].
    RemoteLogSegment(RemoteSegment),
    /// The sequencer committed batches of diskless partitions (see [`crate::diskless`]):
    /// each with its partition and coordinates, in commit order. A snapshot writes a
    /// partition's whole log this way, `broker_id` -1.
    DisklessBatches {
        broker_id: i32,
        batches: Vec<(Uuid, i32, BatchCoord)>,
    },
    /// A diskless partition's log now starts at `start_offset` (retention, DeleteRecords):
    /// the batches wholly below it are dropped. A snapshot writes one after a partition's
    /// batches.
    DisklessTrim {
        topic_id: Uuid,
        partition: i32,
        start_offset: i64,
    },
    /// WAL compaction: `segment` replaces the batches of a diskless partition it was made
    /// of (see [`crate::diskless`]). A snapshot writes a partition's segments this way, before
    /// its batches.
    DisklessSegment {
        topic_id: Uuid,
        partition: i32,
        segment: SegmentCoord,
    },
    /// A diskless partition's offsets, producers and transactions, written by a snapshot
    /// after its segments and batches.
    DisklessState {
        topic_id: Uuid,
        partition: i32,
        state: LogState,
    },
}

/// A delegation token as the metadata log holds it. Principals as `Type:name`; times in ms
/// since the epoch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TokenRecord {
    pub token_id: String,
    pub owner: String,
    pub requester: String,
    pub renewers: Vec<String>,
    pub issue_ms: i64,
    pub max_ms: i64,
    pub expiry_ms: i64,
}

/// A partition's replica set during a reassignment (KIP-455): every replica (the targets
/// first, then those being removed) and which are being added and removed. Both lists
/// empty means no reassignment is in progress.
/// A partition's eligible leader replicas (KIP-966): replicas out of an ISR smaller than
/// `min.insync.replicas` that still hold every committed record (the high watermark does not
/// move while the ISR is that small), so they may lead when no ISR member can; and the last
/// known ones, remembered when the last of them left after an unclean shutdown.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Elr {
    pub eligible: Vec<i32>,
    pub last_known: Vec<i32>,
}

impl Elr {
    pub fn is_empty(&self) -> bool {
        self.eligible.is_empty() && self.last_known.is_empty()
    }
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Assignment {
    pub replicas: Vec<i32>,
    pub adding: Vec<i32>,
    pub removing: Vec<i32>,
}

#[derive(Debug, Error, PartialEq, Eq)]
pub enum RecordError {
    #[error("metadata record truncated")]
    Truncated,
    #[error("unknown metadata record type {0} version {1}")]
    UnknownType(u8, u8),
    #[error("metadata record has invalid UTF-8")]
    BadUtf8,
    #[error("metadata record has {0} trailing bytes")]
    Trailing(usize),
}

struct Writer(Vec<u8>);

impl Writer {
    fn i8(&mut self, v: i8) {
        self.0.push(v as u8);
    }
    fn i32(&mut self, v: i32) {
        self.0.extend_from_slice(&v.to_be_bytes());
    }
    fn i64(&mut self, v: i64) {
        self.0.extend_from_slice(&v.to_be_bytes());
    }
    fn u16(&mut self, v: u16) {
        self.0.extend_from_slice(&v.to_be_bytes());
    }
    fn str(&mut self, s: &str) {
        let b = &s.as_bytes()[..s.len().min(u16::MAX as usize)];
        self.u16(b.len() as u16);
        self.0.extend_from_slice(b);
    }
    fn opt_str(&mut self, s: Option<&str>) {
        match s {
            Some(s) => self.str(s),
            None => self.0.extend_from_slice(&(-1i16).to_be_bytes()),
        }
    }
    fn uuid(&mut self, id: &Uuid) {
        self.0.extend_from_slice(id.as_bytes());
    }
    fn endpoints(&mut self, endpoints: &[Endpoint]) {
        self.i32(endpoints.len() as i32);
        for e in endpoints {
            self.str(&e.name);
            self.str(&e.host);
            self.u16(e.port);
        }
    }
    fn bytes(&mut self, b: &[u8]) {
        let b = &b[..b.len().min(u16::MAX as usize)];
        self.u16(b.len() as u16);
        self.0.extend_from_slice(b);
    }
    fn ints(&mut self, v: &[i32]) {
        self.i32(v.len() as i32);
        for x in v {
            self.i32(*x);
        }
    }
}

struct Reader<'a> {
    buf: &'a [u8],
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], RecordError> {
        if self.buf.len() < n {
            return Err(RecordError::Truncated);
        }
        let (head, rest) = self.buf.split_at(n);
        self.buf = rest;
        Ok(head)
    }
    fn u8(&mut self) -> Result<u8, RecordError> {
        Ok(self.take(1)?[0])
    }
    fn i32(&mut self) -> Result<i32, RecordError> {
        let b = self.take(4)?;
        Ok(i32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }
    fn i64(&mut self) -> Result<i64, RecordError> {
        let mut a = [0u8; 8];
        a.copy_from_slice(self.take(8)?);
        Ok(i64::from_be_bytes(a))
    }
    fn u16(&mut self) -> Result<u16, RecordError> {
        let b = self.take(2)?;
        Ok(u16::from_be_bytes([b[0], b[1]]))
    }
    fn str(&mut self) -> Result<String, RecordError> {
        let n = self.u16()? as usize;
        String::from_utf8(self.take(n)?.to_vec()).map_err(|_| RecordError::BadUtf8)
    }
    fn opt_str(&mut self) -> Result<Option<String>, RecordError> {
        let n = self.u16()? as i16;
        if n < 0 {
            return Ok(None);
        }
        String::from_utf8(self.take(n as usize)?.to_vec())
            .map(Some)
            .map_err(|_| RecordError::BadUtf8)
    }
    fn bytes(&mut self) -> Result<Vec<u8>, RecordError> {
        let n = self.u16()? as usize;
        Ok(self.take(n)?.to_vec())
    }
    fn uuid(&mut self) -> Result<Uuid, RecordError> {
        let b = self.take(16)?;
        let mut a = [0u8; 16];
        a.copy_from_slice(b);
        Ok(Uuid::from_bytes(a))
    }
    fn endpoints(&mut self) -> Result<Vec<Endpoint>, RecordError> {
        let n = self.i32()?;
        if n < 0 || n as usize > self.buf.len() {
            return Err(RecordError::Truncated);
        }
        let mut endpoints = Vec::with_capacity(n as usize);
        for _ in 0..n {
            endpoints.push(Endpoint {
                name: self.str()?,
                host: self.str()?,
                port: self.u16()?,
            });
        }
        Ok(endpoints)
    }
    fn ints(&mut self) -> Result<Vec<i32>, RecordError> {
        let n = self.i32()?;
        if n < 0 || n as usize > self.buf.len() / 4 {
            return Err(RecordError::Truncated);
        }
        (0..n).map(|_| self.i32()).collect()
    }
}

impl MetadataRecord {
    pub fn encode(&self) -> Vec<u8> {
        let mut w = Writer(Vec::with_capacity(64));
        match self {
            MetadataRecord::RegisterBroker {
                node_id,
                epoch,
                incarnation_id,
                endpoints,
                rack,
                fenced,
            } => {
                w.0.extend_from_slice(&[1, 1]);
                w.i32(*node_id);
                w.i64(*epoch);
                w.uuid(incarnation_id);
                w.endpoints(endpoints);
                w.opt_str(rack.as_deref());
                w.i8(i8::from(*fenced));
            }
            MetadataRecord::FenceBroker { node_id, epoch } => {
                w.0.extend_from_slice(&[7, 0]);
                w.i32(*node_id);
                w.i64(*epoch);
            }
            MetadataRecord::UnfenceBroker { node_id, epoch } => {
                w.0.extend_from_slice(&[8, 0]);
                w.i32(*node_id);
                w.i64(*epoch);
            }
            MetadataRecord::UnregisterBroker { node_id, epoch } => {
                w.0.extend_from_slice(&[16, 0]);
                w.i32(*node_id);
                w.i64(*epoch);
            }
            MetadataRecord::RegisterController {
                node_id,
                directory_id,
                endpoints,
            } => {
                w.0.extend_from_slice(&[17, 0]);
                w.i32(*node_id);
                w.uuid(directory_id);
                w.endpoints(endpoints);
            }
            MetadataRecord::PartitionChange {
                topic_id,
                partition,
                leader,
                isr,
                assignment,
                elr,
            } => {
                // Versions 2 and 3 (0 and 1 with the ELR) only when the ELR changes, so
                // other changes stay readable by nodes that predate it.
                let version = u8::from(assignment.is_some()) + 2 * u8::from(elr.is_some());
                w.0.extend_from_slice(&[9, version]);
                w.uuid(topic_id);
                w.i32(*partition);
                w.i32(*leader);
                w.ints(isr);
                if let Some(a) = assignment {
                    w.ints(&a.replicas);
                    w.ints(&a.adding);
                    w.ints(&a.removing);
                }
                if let Some(e) = elr {
                    w.ints(&e.eligible);
                    w.ints(&e.last_known);
                }
            }
            MetadataRecord::Topic { name, id } => {
                w.0.extend_from_slice(&[2, 0]);
                w.str(name);
                w.uuid(id);
            }
            MetadataRecord::Partition {
                topic_id,
                partition,
                replicas,
                isr,
                leader,
                leader_epoch,
                partition_epoch,
                adding,
                removing,
                elr,
            } => {
                // Version 1 only while reassigning and 2 only with an ELR, so ordinary
                // snapshots stay readable by nodes that predate both.
                let reassigning = !adding.is_empty() || !removing.is_empty();
                let version = match (reassigning, elr.is_empty()) {
                    (false, true) => 0,
                    (true, true) => 1,
                    (_, false) => 2,
                };
                w.0.extend_from_slice(&[3, version]);
                w.uuid(topic_id);
                w.i32(*partition);
                w.ints(replicas);
                w.ints(isr);
                w.i32(*leader);
                w.i32(*leader_epoch);
                w.i32(*partition_epoch);
                if version >= 1 {
                    w.ints(adding);
                    w.ints(removing);
                }
                if version >= 2 {
                    w.ints(&elr.eligible);
                    w.ints(&elr.last_known);
                }
            }
            MetadataRecord::Config {
                resource_type,
                resource_name,
                name,
                value,
            } => {
                w.0.extend_from_slice(&[4, 0]);
                w.i8(*resource_type);
                w.str(resource_name);
                w.str(name);
                w.opt_str(value.as_deref());
            }
            MetadataRecord::RemoveTopic { topic_id } => {
                w.0.extend_from_slice(&[5, 0]);
                w.uuid(topic_id);
            }
            MetadataRecord::ProducerIds {
                node_id,
                next_producer_id,
            } => {
                w.0.extend_from_slice(&[6, 0]);
                w.i32(*node_id);
                w.i64(*next_producer_id);
            }
            MetadataRecord::ScramCredential {
                user,
                mechanism,
                salt,
                stored_key,
                server_key,
                iterations,
            } => {
                w.0.extend_from_slice(&[10, 0]);
                w.str(user);
                w.i8(*mechanism);
                w.bytes(salt);
                w.bytes(stored_key);
                w.bytes(server_key);
                w.i32(*iterations);
            }
            MetadataRecord::RemoveScramCredential { user, mechanism } => {
                w.0.extend_from_slice(&[11, 0]);
                w.str(user);
                w.i8(*mechanism);
            }
            MetadataRecord::Acl { id, binding: b } => {
                w.0.extend_from_slice(&[12, 0]);
                w.uuid(id);
                w.i8(b.resource_type);
                w.str(&b.resource_name);
                w.i8(b.pattern_type);
                w.str(&b.principal);
                w.str(&b.host);
                w.i8(b.operation);
                w.i8(b.permission);
            }
            MetadataRecord::RemoveAcl { id } => {
                w.0.extend_from_slice(&[13, 0]);
                w.uuid(id);
            }
            MetadataRecord::FeatureLevel { name, level } => {
                w.0.extend_from_slice(&[15, 0]);
                w.str(name);
                w.u16(*level as u16);
            }
            MetadataRecord::DelegationToken(t) => {
                w.0.extend_from_slice(&[18, 0]);
                w.str(&t.token_id);
                w.str(&t.owner);
                w.str(&t.requester);
                w.i32(t.renewers.len() as i32);
                for r in &t.renewers {
                    w.str(r);
                }
                w.i64(t.issue_ms);
                w.i64(t.max_ms);
                w.i64(t.expiry_ms);
            }
            MetadataRecord::RemoveDelegationToken { token_id } => {
                w.0.extend_from_slice(&[19, 0]);
                w.str(token_id);
            }
            MetadataRecord::ClientQuota { entity, key, value } => {
                w.0.extend_from_slice(&[14, 0]);
                for part in [&entity.user, &entity.client_id] {
                    match part {
                        None => w.i8(0),
                        Some(None) => w.i8(1),
                        Some(Some(name)) => {
                            w.i8(2);
                            w.str(name);
                        }
                    }
                }
                w.str(key);
                match value {
                    Some(v) => {
                        w.i8(1);
                        w.i64(v.0.to_bits() as i64);
                    }
                    None => w.i8(0),
                }
            }
            MetadataRecord::RemoteLogSegment(seg) => {
                w.0.extend_from_slice(&[30, 0]);
                w.uuid(&seg.topic_id);
                w.i32(seg.partition);
                w.uuid(&seg.segment_id);
                w.i64(seg.base_offset);
                w.i64(seg.end_offset);
                w.i64(seg.max_timestamp_ms);
                w.i64(seg.size_bytes);
                w.i32(seg.broker_id);
                w.i32(seg.leader_epoch);
                w.i32(seg.epochs.len() as i32);
                for (epoch, start) in &seg.epochs {
                    w.i32(*epoch);
                    w.i64(*start);
                }
                w.i8(seg.state as i8);
            }
            MetadataRecord::DisklessTrim {
                topic_id,
                partition,
                start_offset,
            } => {
                w.0.extend_from_slice(&[32, 0]);
                w.uuid(topic_id);
                w.i32(*partition);
                w.i64(*start_offset);
            }
            MetadataRecord::DisklessSegment {
                topic_id,
                partition,
                segment,
            } => {
                w.0.extend_from_slice(&[33, 0]);
                w.uuid(topic_id);
                w.i32(*partition);
                w.uuid(&segment.segment_id);
                w.i64(segment.base_offset);
                w.i64(segment.last_offset);
                w.i64(segment.size as i64);
                w.i64(segment.max_timestamp_ms);
                w.i64(segment.max_timestamp_offset);
            }
            MetadataRecord::DisklessState {
                topic_id,
                partition,
                state,
            } => {
                w.0.extend_from_slice(&[34, 0]);
                w.uuid(topic_id);
                w.i32(*partition);
                w.i64(state.start_offset);
                w.i64(state.end_offset);
                w.i32(state.producers.len() as i32);
                for (pid, p) in &state.producers {
                    w.i64(*pid);
                    w.u16(p.epoch as u16);
                    w.i32(p.recent.len() as i32);
                    for (first, last, base) in &p.recent {
                        w.i32(*first);
                        w.i32(*last);
                        w.i64(*base);
                    }
                }
                w.i32(state.ongoing.len() as i32);
                for (pid, first) in &state.ongoing {
                    w.i64(*pid);
                    w.i64(*first);
                }
                w.i32(state.aborted.len() as i32);
                for a in &state.aborted {
                    w.i64(a.producer_id);
                    w.i64(a.first_offset);
                    w.i64(a.last_offset);
                }
            }
            MetadataRecord::DisklessBatches { broker_id, batches } => {
                w.0.extend_from_slice(&[31, 0]);
                w.i32(*broker_id);
                w.i32(batches.len() as i32);
                for (topic_id, partition, b) in batches {
                    w.uuid(topic_id);
                    w.i32(*partition);
                    w.i64(b.base_offset);
                    w.i64(b.last_offset);
                    w.uuid(&b.object_id);
                    w.i32(b.position as i32);
                    w.i32(b.size as i32);
                    w.i64(b.max_timestamp_ms);
                    w.i64(b.producer_id);
                    w.u16(b.producer_epoch as u16);
                    w.i32(b.base_sequence);
                    w.i8(b.kind.code() as i8);
                }
            }
        }
        w.0
    }

    pub fn decode(buf: &[u8]) -> Result<Self, RecordError> {
        let mut r = Reader { buf };
        let (ty, version) = (r.u8()?, r.u8()?);
        let rec = match (ty, version) {
            (1, v @ (0 | 1)) => {
                let node_id = r.i32()?;
                let epoch = r.i64()?;
                let incarnation_id = r.uuid()?;
                let endpoints = r.endpoints()?;
                let rack = r.opt_str()?;
                // Version 0 predates fencing: those brokers were registered live.
                let fenced = v == 1 && r.u8()? != 0;
                MetadataRecord::RegisterBroker {
                    node_id,
                    epoch,
                    incarnation_id,
                    endpoints,
                    rack,
                    fenced,
                }
            }
            (7, 0) => MetadataRecord::FenceBroker {
                node_id: r.i32()?,
                epoch: r.i64()?,
            },
            (8, 0) => MetadataRecord::UnfenceBroker {
                node_id: r.i32()?,
                epoch: r.i64()?,
            },
            (16, 0) => MetadataRecord::UnregisterBroker {
                node_id: r.i32()?,
                epoch: r.i64()?,
            },
            (17, 0) => MetadataRecord::RegisterController {
                node_id: r.i32()?,
                directory_id: r.uuid()?,
                endpoints: r.endpoints()?,
            },
            (9, v @ 0..=3) => MetadataRecord::PartitionChange {
                topic_id: r.uuid()?,
                partition: r.i32()?,
                leader: r.i32()?,
                isr: r.ints()?,
                assignment: if v & 1 == 1 {
                    Some(Assignment {
                        replicas: r.ints()?,
                        adding: r.ints()?,
                        removing: r.ints()?,
                    })
                } else {
                    None
                },
                elr: if v >= 2 {
                    Some(Elr {
                        eligible: r.ints()?,
                        last_known: r.ints()?,
                    })
                } else {
                    None
                },
            },
            (2, 0) => MetadataRecord::Topic {
                name: r.str()?,
                id: r.uuid()?,
            },
            (3, v @ 0..=2) => {
                let topic_id = r.uuid()?;
                let partition = r.i32()?;
                let replicas = r.ints()?;
                let isr = r.ints()?;
                let leader = r.i32()?;
                let leader_epoch = r.i32()?;
                let partition_epoch = r.i32()?;
                let (adding, removing) = if v >= 1 {
                    (r.ints()?, r.ints()?)
                } else {
                    (Vec::new(), Vec::new())
                };
                let elr = if v >= 2 {
                    Elr {
                        eligible: r.ints()?,
                        last_known: r.ints()?,
                    }
                } else {
                    Elr::default()
                };
                MetadataRecord::Partition {
                    topic_id,
                    partition,
                    replicas,
                    isr,
                    leader,
                    leader_epoch,
                    partition_epoch,
                    adding,
                    removing,
                    elr,
                }
            }
            (4, 0) => MetadataRecord::Config {
                resource_type: r.u8()? as i8,
                resource_name: r.str()?,
                name: r.str()?,
                value: r.opt_str()?,
            },
            (5, 0) => MetadataRecord::RemoveTopic {
                topic_id: r.uuid()?,
            },
            (6, 0) => MetadataRecord::ProducerIds {
                node_id: r.i32()?,
                next_producer_id: r.i64()?,
            },
            (10, 0) => MetadataRecord::ScramCredential {
                user: r.str()?,
                mechanism: r.u8()? as i8,
                salt: r.bytes()?,
                stored_key: r.bytes()?,
                server_key: r.bytes()?,
                iterations: r.i32()?,
            },
            (11, 0) => MetadataRecord::RemoveScramCredential {
                user: r.str()?,
                mechanism: r.u8()? as i8,
            },
            (12, 0) => MetadataRecord::Acl {
                id: r.uuid()?,
                binding: AclBinding {
                    resource_type: r.u8()? as i8,
                    resource_name: r.str()?,
                    pattern_type: r.u8()? as i8,
                    principal: r.str()?,
                    host: r.str()?,
                    operation: r.u8()? as i8,
                    permission: r.u8()? as i8,
                },
            },
            (13, 0) => MetadataRecord::RemoveAcl { id: r.uuid()? },
            (14, 0) => {
                let mut part = || -> Result<Option<Option<String>>, RecordError> {
                    Ok(match r.u8()? {
                        0 => None,
                        1 => Some(None),
                        _ => Some(Some(r.str()?)),
                    })
                };
                let user = part()?;
                let client_id = part()?;
                let key = r.str()?;
                let value = match r.u8()? {
                    0 => None,
                    _ => Some(QuotaValue(f64::from_bits(r.i64()? as u64))),
                };
                MetadataRecord::ClientQuota {
                    entity: QuotaEntity { user, client_id },
                    key,
                    value,
                }
            }
            (15, 0) => MetadataRecord::FeatureLevel {
                name: r.str()?,
                level: r.u16()? as i16,
            },
            (18, 0) => {
                let token_id = r.str()?;
                let owner = r.str()?;
                let requester = r.str()?;
                let n = r.i32()?;
                // Each renewer takes at least its 2-byte length.
                if n < 0 || n as usize > r.buf.len() / 2 {
                    return Err(RecordError::Truncated);
                }
                let renewers = (0..n).map(|_| r.str()).collect::<Result<_, _>>()?;
                MetadataRecord::DelegationToken(TokenRecord {
                    token_id,
                    owner,
                    requester,
                    renewers,
                    issue_ms: r.i64()?,
                    max_ms: r.i64()?,
                    expiry_ms: r.i64()?,
                })
            }
            (19, 0) => MetadataRecord::RemoveDelegationToken { token_id: r.str()? },
            (30, 0) => {
                let topic_id = r.uuid()?;
                let partition = r.i32()?;
                let segment_id = r.uuid()?;
                let base_offset = r.i64()?;
                let end_offset = r.i64()?;
                let max_timestamp_ms = r.i64()?;
                let size_bytes = r.i64()?;
                let broker_id = r.i32()?;
                let leader_epoch = r.i32()?;
                let n = r.i32()?;
                if n < 0 || n as usize > r.buf.len() / 12 {
                    return Err(RecordError::Truncated);
                }
                let epochs = (0..n)
                    .map(|_| Ok((r.i32()?, r.i64()?)))
                    .collect::<Result<_, RecordError>>()?;
                let state =
                    RemoteSegmentState::from_i8(r.u8()? as i8).ok_or(RecordError::Truncated)?;
                MetadataRecord::RemoteLogSegment(RemoteSegment {
                    topic_id,
                    partition,
                    segment_id,
                    base_offset,
                    end_offset,
                    max_timestamp_ms,
                    size_bytes,
                    broker_id,
                    leader_epoch,
                    epochs,
                    state,
                })
            }
            (32, 0) => MetadataRecord::DisklessTrim {
                topic_id: r.uuid()?,
                partition: r.i32()?,
                start_offset: r.i64()?,
            },
            (33, 0) => MetadataRecord::DisklessSegment {
                topic_id: r.uuid()?,
                partition: r.i32()?,
                segment: SegmentCoord {
                    segment_id: r.uuid()?,
                    base_offset: r.i64()?,
                    last_offset: r.i64()?,
                    size: r.i64()? as u64,
                    max_timestamp_ms: r.i64()?,
                    max_timestamp_offset: r.i64()?,
                },
            },
            (34, 0) => {
                let topic_id = r.uuid()?;
                let partition = r.i32()?;
                let start_offset = r.i64()?;
                let end_offset = r.i64()?;
                // The least bytes an element takes, to bound what a count may claim.
                let count = |r: &Reader<'_>, n: i32, each: usize| {
                    if n < 0 || n as usize > r.buf.len() / each {
                        Err(RecordError::Truncated)
                    } else {
                        Ok(n as usize)
                    }
                };
                let n = r.i32()?;
                let n = count(&r, n, 14)?;
                let mut producers = Vec::with_capacity(n);
                for _ in 0..n {
                    let pid = r.i64()?;
                    let epoch = r.u16()? as i16;
                    let m = r.i32()?;
                    let m = count(&r, m, 16)?;
                    let mut recent = std::collections::VecDeque::with_capacity(m);
                    for _ in 0..m {
                        recent.push_back((r.i32()?, r.i32()?, r.i64()?));
                    }
                    producers.push((pid, ProducerSeqs { epoch, recent }));
                }
                let n = r.i32()?;
                let n = count(&r, n, 16)?;
                let ongoing = (0..n)
                    .map(|_| Ok((r.i64()?, r.i64()?)))
                    .collect::<Result<_, RecordError>>()?;
                let n = r.i32()?;
                let n = count(&r, n, 24)?;
                let aborted = (0..n)
                    .map(|_| {
                        Ok(AbortedTxn {
                            producer_id: r.i64()?,
                            first_offset: r.i64()?,
                            last_offset: r.i64()?,
                        })
                    })
                    .collect::<Result<_, RecordError>>()?;
                MetadataRecord::DisklessState {
                    topic_id,
                    partition,
                    state: LogState {
                        start_offset,
                        end_offset,
                        producers,
                        ongoing,
                        aborted,
                    },
                }
            }
            (31, 0) => {
                let broker_id = r.i32()?;
                let n = r.i32()?;
                // 83 bytes each.
                if n < 0 || n as usize > r.buf.len() / 83 {
                    return Err(RecordError::Truncated);
                }
                let mut batches = Vec::with_capacity(n as usize);
                for _ in 0..n {
                    let topic_id = r.uuid()?;
                    let partition = r.i32()?;
                    batches.push((
                        topic_id,
                        partition,
                        BatchCoord {
                            base_offset: r.i64()?,
                            last_offset: r.i64()?,
                            object_id: r.uuid()?,
                            position: r.i32()? as u32,
                            size: r.i32()? as u32,
                            max_timestamp_ms: r.i64()?,
                            producer_id: r.i64()?,
                            producer_epoch: r.u16()? as i16,
                            base_sequence: r.i32()?,
                            kind: BatchKind::from_code(r.u8()?).ok_or(RecordError::Truncated)?,
                        },
                    ));
                }
                MetadataRecord::DisklessBatches { broker_id, batches }
            }
            (t, v) => return Err(RecordError::UnknownType(t, v)),
        };
        if !r.buf.is_empty() {
            return Err(RecordError::Trailing(r.buf.len()));
        }
        Ok(rec)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn samples() -> Vec<MetadataRecord> {
        vec![
            MetadataRecord::DisklessSegment {
                topic_id: Uuid::from_bytes([9; 16]),
                partition: 4,
                segment: SegmentCoord {
                    segment_id: Uuid::from_bytes([2; 16]),
                    base_offset: 100,
                    last_offset: 199,
                    size: 5000,
                    max_timestamp_ms: 77,
                    max_timestamp_offset: 150,
                },
            },
            MetadataRecord::DisklessState {
                topic_id: Uuid::from_bytes([9; 16]),
                partition: 4,
                state: LogState {
                    start_offset: 3,
                    end_offset: 300,
                    producers: vec![(
                        8,
                        ProducerSeqs {
                            epoch: 2,
                            recent: [(0, 4, 10), (5, 9, 20)].into_iter().collect(),
                        },
                    )],
                    ongoing: vec![(8, 20)],
                    aborted: vec![AbortedTxn {
                        producer_id: 6,
                        first_offset: 1,
                        last_offset: 2,
                    }],
                },
            },
            MetadataRecord::DisklessTrim {
                topic_id: Uuid::from_bytes([9; 16]),
                partition: 4,
                start_offset: 1234,
            },
            MetadataRecord::RegisterBroker {
                node_id: 1,
                epoch: 7,
                incarnation_id: Uuid::from_bytes([3; 16]),
                endpoints: vec![Endpoint {
                    name: "PLAINTEXT".into(),
                    host: "h".into(),
                    port: 9092,
                }],
                rack: None,
                fenced: true,
            },
            MetadataRecord::FenceBroker {
                node_id: 1,
                epoch: 7,
            },
            MetadataRecord::UnfenceBroker {
                node_id: 1,
                epoch: 7,
            },
            MetadataRecord::UnregisterBroker {
                node_id: 1,
                epoch: 7,
            },
            MetadataRecord::RegisterController {
                node_id: 2,
                directory_id: Uuid::from_bytes([9; 16]),
                endpoints: vec![Endpoint {
                    name: "CONTROLLER".into(),
                    host: "h".into(),
                    port: 9093,
                }],
            },
            MetadataRecord::PartitionChange {
                topic_id: Uuid::from_bytes([1; 16]),
                partition: 2,
                leader: -1,
                isr: vec![2],
                assignment: None,
                elr: None,
            },
            MetadataRecord::PartitionChange {
                topic_id: Uuid::from_bytes([1; 16]),
                partition: 2,
                leader: 3,
                isr: vec![3, 1],
                assignment: Some(Assignment {
                    replicas: vec![3, 4, 1],
                    adding: vec![4],
                    removing: vec![1],
                }),
                elr: None,
            },
            MetadataRecord::Topic {
                name: "t".into(),
                id: Uuid::from_bytes([1; 16]),
            },
            MetadataRecord::Partition {
                topic_id: Uuid::from_bytes([1; 16]),
                partition: 2,
                replicas: vec![1, 2],
                isr: vec![1],
                leader: 1,
                leader_epoch: 0,
                partition_epoch: 0,
                adding: vec![],
                removing: vec![],
                elr: Default::default(),
            },
            MetadataRecord::Partition {
                topic_id: Uuid::from_bytes([1; 16]),
                partition: 3,
                replicas: vec![2, 1],
                isr: vec![1],
                leader: 1,
                leader_epoch: 4,
                partition_epoch: 5,
                adding: vec![2],
                removing: vec![],
                elr: Default::default(),
            },
            // With eligible leader replicas (KIP-966): versions 2 and 3 of a change, 2 of a
            // partition.
            MetadataRecord::PartitionChange {
                topic_id: Uuid::from_bytes([1; 16]),
                partition: 2,
                leader: -1,
                isr: vec![],
                assignment: None,
                elr: Some(Elr {
                    eligible: vec![2, 1],
                    last_known: vec![],
                }),
            },
            MetadataRecord::PartitionChange {
                topic_id: Uuid::from_bytes([1; 16]),
                partition: 2,
                leader: 3,
                isr: vec![3],
                assignment: Some(Assignment {
                    replicas: vec![3, 4],
                    adding: vec![4],
                    removing: vec![],
                }),
                elr: Some(Elr::default()),
            },
            MetadataRecord::Partition {
                topic_id: Uuid::from_bytes([1; 16]),
                partition: 4,
                replicas: vec![1, 2, 3],
                isr: vec![],
                leader: -1,
                leader_epoch: 4,
                partition_epoch: 5,
                adding: vec![],
                removing: vec![],
                elr: Elr {
                    eligible: vec![],
                    last_known: vec![3],
                },
            },
            MetadataRecord::Config {
                resource_type: 2,
                resource_name: "t".into(),
                name: "retention.ms".into(),
                value: Some("5".into()),
            },
            MetadataRecord::RemoveTopic {
                topic_id: Uuid::from_bytes([1; 16]),
            },
            MetadataRecord::ProducerIds {
                node_id: 0,
                next_producer_id: 2000,
            },
            MetadataRecord::ScramCredential {
                user: "alice".into(),
                mechanism: 2,
                salt: vec![1, 2, 3],
                stored_key: vec![4; 64],
                server_key: vec![5; 64],
                iterations: 8192,
            },
            MetadataRecord::RemoveScramCredential {
                user: "alice".into(),
                mechanism: 1,
            },
            MetadataRecord::Acl {
                id: Uuid::from_bytes([6; 16]),
                binding: AclBinding {
                    resource_type: 2,
                    resource_name: "orders".into(),
                    pattern_type: 4,
                    principal: "User:alice".into(),
                    host: "*".into(),
                    operation: 3,
                    permission: 3,
                },
            },
            MetadataRecord::RemoveAcl {
                id: Uuid::from_bytes([6; 16]),
            },
            MetadataRecord::ClientQuota {
                entity: QuotaEntity {
                    user: Some(Some("alice".into())),
                    client_id: Some(None),
                },
                key: "producer_byte_rate".into(),
                value: Some(QuotaValue(1024.0)),
            },
            MetadataRecord::FeatureLevel {
                name: "metadata.version".into(),
                level: 21,
            },
            MetadataRecord::ClientQuota {
                entity: QuotaEntity {
                    user: None,
                    client_id: Some(Some("app".into())),
                },
                key: "request_percentage".into(),
                value: None,
            },
            MetadataRecord::DelegationToken(TokenRecord {
                token_id: "tok".into(),
                owner: "User:alice".into(),
                requester: "User:admin".into(),
                renewers: vec!["User:bob".into(), "User:carol".into()],
                issue_ms: 1,
                max_ms: 3,
                expiry_ms: 2,
            }),
            MetadataRecord::RemoveDelegationToken {
                token_id: "tok".into(),
            },
            MetadataRecord::RemoteLogSegment(RemoteSegment {
                topic_id: Uuid::from_bytes([3; 16]),
                partition: 2,
                segment_id: Uuid::from_bytes([4; 16]),
                base_offset: 100,
                end_offset: 199,
                max_timestamp_ms: 1_700_000_000_000,
                size_bytes: 1 << 30,
                broker_id: 1,
                leader_epoch: 5,
                epochs: vec![(4, 100), (5, 150)],
                state: RemoteSegmentState::CopyFinished,
            }),
            MetadataRecord::DisklessBatches {
                broker_id: 2,
                batches: vec![
                    (
                        Uuid::from_bytes([5; 16]),
                        3,
                        BatchCoord {
                            base_offset: 10,
                            last_offset: 14,
                            object_id: Uuid::from_bytes([6; 16]),
                            position: 4096,
                            size: 300,
                            max_timestamp_ms: 1_700_000_000_001,
                            producer_id: 77,
                            producer_epoch: 2,
                            base_sequence: 40,
                            kind: BatchKind::TxnData,
                        },
                    ),
                    (
                        Uuid::from_bytes([5; 16]),
                        4,
                        BatchCoord {
                            base_offset: 0,
                            last_offset: 0,
                            object_id: Uuid::from_bytes([6; 16]),
                            position: 4396,
                            size: 70,
                            max_timestamp_ms: -1,
                            producer_id: -1,
                            producer_epoch: -1,
                            base_sequence: -1,
                            kind: BatchKind::Commit,
                        },
                    ),
                ],
            },
        ]
    }

    #[test]
    fn records_round_trip_and_truncations_fail() {
        for rec in samples() {
            let bytes = rec.encode();
            assert_eq!(MetadataRecord::decode(&bytes).unwrap(), rec);
            for cut in 0..bytes.len() {
                assert!(MetadataRecord::decode(&bytes[..cut]).is_err());
            }
        }
        assert_eq!(
            MetadataRecord::decode(&[99, 0]),
            Err(RecordError::UnknownType(99, 0))
        );
    }
}
