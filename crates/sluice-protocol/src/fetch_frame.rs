//! Fetch responses whose record sets are spliced in by the connection writer instead of being
//! copied into the frame: the frame is a list of parts, encoded bytes and record sets (file
//! ranges on the broker), so stored batches can go from the page cache to the socket with
//! `sendfile`.
//!
//! Every field except the records is encoded here exactly as `kafka-protocol` encodes
//! [`FetchResponse`] (versions 4 to 18; the tests check byte equality against it): the
//! records are the last regular field of a partition, followed only by its tagged fields, so
//! a record set is one part between two runs of bytes.

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::fetch_response::{FetchableTopicResponse, PartitionData};
use kafka_protocol::messages::{ApiKey, FetchResponse};
use kafka_protocol::protocol::Encodable;

use crate::frame::{FrameError, SIZE_PREFIX_LEN};

/// A record set that the writer puts on the wire itself: only its length is known here.
pub trait SplicedRecords {
    fn records_len(&self) -> usize;
}

/// One piece of a frame, in wire order.
#[derive(Debug)]
pub enum Part<R> {
    Bytes(Bytes),
    Records(R),
}

/// A complete response frame (size prefix included) as parts.
#[derive(Debug)]
pub struct SplicedFrame<R> {
    pub parts: Vec<Part<R>>,
    /// Bytes on the wire, size prefix included.
    pub len: usize,
}

impl<R: SplicedRecords> SplicedFrame<R> {
    /// The frame as one buffer, each record set written by `records` (tests, and writers
    /// without a zero-copy path).
    pub fn flatten(
        &self,
        mut records: impl FnMut(&R, &mut Vec<u8>) -> std::io::Result<()>,
    ) -> std::io::Result<Vec<u8>> {
        let mut out = Vec::with_capacity(self.len);
        for p in &self.parts {
            match p {
                Part::Bytes(b) => out.extend_from_slice(b),
                Part::Records(r) => {
                    let before = out.len();
                    records(r, &mut out)?;
                    if out.len() - before != r.records_len() {
                        return Err(std::io::Error::other("record set length changed"));
                    }
                }
            }
        }
        Ok(out)
    }
}

fn encode_err(e: impl std::fmt::Display) -> FrameError {
    FrameError::Encode {
        what: "fetch response",
        reason: e.to_string(),
    }
}

fn put_uvarint(out: &mut BytesMut, mut v: u32) {
    while v >= 0x80 {
        out.put_u8((v as u8) | 0x80);
        v >>= 7;
    }
    out.put_u8(v as u8);
}

fn put_len(out: &mut BytesMut, flexible: bool, len: usize) -> Result<(), FrameError> {
    if flexible {
        let n = u32::try_from(len + 1).map_err(encode_err)?;
        put_uvarint(out, n);
    } else {
        out.put_i32(i32::try_from(len).map_err(encode_err)?);
    }
    Ok(())
}

fn put_null(out: &mut BytesMut, flexible: bool) {
    if flexible {
        out.put_u8(0);
    } else {
        out.put_i32(-1);
    }
}

fn put_struct<T: Encodable>(out: &mut BytesMut, v: &T, version: i16) -> Result<(), FrameError> {
    v.encode(out, version).map_err(encode_err)
}

fn put_array<T: Encodable>(
    out: &mut BytesMut,
    items: &[T],
    flexible: bool,
    version: i16,
) -> Result<(), FrameError> {
    put_len(out, flexible, items.len())?;
    for i in items {
        put_struct(out, i, version)?;
    }
    Ok(())
}

/// A tagged field: tag, size, value.
fn put_tagged<T: Encodable>(
    out: &mut BytesMut,
    tag: u32,
    v: &T,
    version: i16,
) -> Result<(), FrameError> {
    let size = v.compute_size(version).map_err(encode_err)?;
    put_uvarint(out, tag);
    put_uvarint(out, u32::try_from(size).map_err(encode_err)?);
    put_struct(out, v, version)
}

struct Writer<R> {
    parts: Vec<Part<R>>,
    cur: BytesMut,
    len: usize,
}

impl<R: SplicedRecords> Writer<R> {
    fn cut(&mut self) {
        if !self.cur.is_empty() {
            self.len += self.cur.len();
            self.parts.push(Part::Bytes(self.cur.split().freeze()));
        }
    }

    fn records(&mut self, r: R) {
        self.cut();
        self.len += r.records_len();
        self.parts.push(Part::Records(r));
    }
}

/// Encode `resp` as the response frame to request `correlation_id`, at `version`. The i-th
/// partition in response order takes its records from `spliced[i]` when that is Some (and
/// its `records` field is then ignored), else from its own `records` field.
pub fn encode_fetch_response<R: SplicedRecords>(
    version: i16,
    correlation_id: i32,
    resp: &FetchResponse,
    spliced: Vec<Option<R>>,
) -> Result<SplicedFrame<R>, FrameError> {
    if !(4..=18).contains(&version) {
        return Err(encode_err(format!("fetch version {version} not supported")));
    }
    let flexible = version >= 12;
    let mut w = Writer {
        parts: Vec::new(),
        cur: BytesMut::with_capacity(256),
        len: 0,
    };
    // The size prefix is filled in at the end.
    w.cur.put_i32(0);
    w.cur.put_i32(correlation_id);
    if ApiKey::Fetch.response_header_version(version) >= 1 {
        put_uvarint(&mut w.cur, 0);
    }
    w.cur.put_i32(resp.throttle_time_ms);
    if version >= 7 {
        w.cur.put_i16(resp.error_code);
        w.cur.put_i32(resp.session_id);
    } else if resp.session_id != 0 {
        return Err(encode_err("session id set below version 7"));
    }
    let mut spliced = spliced.into_iter();
    put_len(&mut w.cur, flexible, resp.responses.len())?;
    for topic in &resp.responses {
        topic_head(&mut w.cur, topic, version)?;
        put_len(&mut w.cur, flexible, topic.partitions.len())?;
        for p in &topic.partitions {
            partition(&mut w, p, spliced.next().flatten(), version)?;
        }
        if flexible {
            put_uvarint(&mut w.cur, 0);
        }
    }
    if flexible {
        if version >= 16 && !resp.node_endpoints.is_empty() {
            put_uvarint(&mut w.cur, 1);
            let size: usize = resp
                .node_endpoints
                .iter()
                .map(|n| n.compute_size(version))
                .sum::<Result<usize, _>>()
                .map_err(encode_err)?;
            let count_len = uvarint_len(resp.node_endpoints.len() as u32 + 1);
            put_uvarint(&mut w.cur, 0);
            put_uvarint(
                &mut w.cur,
                u32::try_from(size + count_len).map_err(encode_err)?,
            );
            put_array(&mut w.cur, &resp.node_endpoints, true, version)?;
        } else {
            put_uvarint(&mut w.cur, 0);
        }
    }
    w.cut();
    let size = i32::try_from(w.len - SIZE_PREFIX_LEN).map_err(encode_err)?;
    if let Some(Part::Bytes(first)) = w.parts.first_mut() {
        let mut head = BytesMut::from(&first[..]);
        head[..SIZE_PREFIX_LEN].copy_from_slice(&size.to_be_bytes());
        *first = head.freeze();
    }
    Ok(SplicedFrame {
        parts: w.parts,
        len: w.len,
    })
}

fn uvarint_len(mut v: u32) -> usize {
    let mut n = 1;
    while v >= 0x80 {
        v >>= 7;
        n += 1;
    }
    n
}

fn topic_head(
    out: &mut BytesMut,
    topic: &FetchableTopicResponse,
    version: i16,
) -> Result<(), FrameError> {
    if version <= 12 {
        let name = topic.topic.as_bytes();
        if version >= 12 {
            put_len(out, true, name.len())?;
        } else {
            out.put_i16(i16::try_from(name.len()).map_err(encode_err)?);
        }
        out.put_slice(name);
    }
    if version >= 13 {
        out.put_slice(topic.topic_id.as_bytes());
    }
    Ok(())
}

fn partition<R: SplicedRecords>(
    w: &mut Writer<R>,
    p: &PartitionData,
    spliced: Option<R>,
    version: i16,
) -> Result<(), FrameError> {
    let flexible = version >= 12;
    let out = &mut w.cur;
    out.put_i32(p.partition_index);
    out.put_i16(p.error_code);
    out.put_i64(p.high_watermark);
    out.put_i64(p.last_stable_offset);
    if version >= 5 {
        out.put_i64(p.log_start_offset);
    }
    match &p.aborted_transactions {
        None => put_null(out, flexible),
        Some(a) => put_array(out, a, flexible, version)?,
    }
    if version >= 11 {
        out.put_i32(p.preferred_read_replica.0);
    } else if p.preferred_read_replica.0 != -1 {
        return Err(encode_err("preferred read replica set below version 11"));
    }
    match (spliced, &p.records) {
        (Some(r), _) => {
            put_len(out, flexible, r.records_len())?;
            w.records(r);
        }
        (None, Some(b)) => {
            put_len(out, flexible, b.len())?;
            out.put_slice(b);
        }
        (None, None) => put_null(out, flexible),
    }
    if flexible {
        let out = &mut w.cur;
        let diverging = p.diverging_epoch != Default::default();
        let leader = p.current_leader != Default::default();
        let snapshot = p.snapshot_id != Default::default();
        put_uvarint(
            out,
            u32::from(diverging) + u32::from(leader) + u32::from(snapshot),
        );
        if diverging {
            put_tagged(out, 0, &p.diverging_epoch, version)?;
        }
        if leader {
            put_tagged(out, 1, &p.current_leader, version)?;
        }
        if snapshot {
            put_tagged(out, 2, &p.snapshot_id, version)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::messages::fetch_response::{
        AbortedTransaction, EpochEndOffset, LeaderIdAndEpoch, NodeEndpoint, SnapshotId,
    };
    use kafka_protocol::messages::{BrokerId, TopicName};
    use kafka_protocol::protocol::StrBytes;
    use proptest::prelude::*;

    /// A record set held in memory (the broker's are file ranges).
    struct Held(Bytes);

    impl SplicedRecords for Held {
        fn records_len(&self) -> usize {
            self.0.len()
        }
    }

    fn reference(version: i16, correlation_id: i32, resp: &FetchResponse) -> Vec<u8> {
        let mut out = BytesMut::new();
        crate::frame::encode_response(&mut out, ApiKey::Fetch, version, correlation_id, resp)
            .unwrap();
        out.to_vec()
    }

    fn partition_strategy(version: i16) -> impl Strategy<Value = PartitionData> {
        (
            any::<i32>(),
            any::<i16>(),
            any::<(i64, i64, i64)>(),
            proptest::option::of(proptest::collection::vec(any::<(i64, i64)>(), 0..3)),
            proptest::option::of(proptest::collection::vec(any::<u8>(), 0..300)),
            any::<(bool, bool, bool, i32)>(),
        )
            .prop_map(move |(index, code, offsets, aborted, records, tags)| {
                let mut p = PartitionData::default();
                p.partition_index = index;
                p.error_code = code;
                (p.high_watermark, p.last_stable_offset, p.log_start_offset) = offsets;
                if version < 5 {
                    p.log_start_offset = -1;
                }
                p.aborted_transactions = aborted.map(|a| {
                    a.into_iter()
                        .map(|(id, first)| {
                            let mut t = AbortedTransaction::default();
                            t.producer_id = id.into();
                            t.first_offset = first;
                            t
                        })
                        .collect()
                });
                if version >= 11 {
                    p.preferred_read_replica = BrokerId(tags.3);
                }
                p.records = records.map(Bytes::from);
                if version >= 12 {
                    if tags.0 {
                        p.diverging_epoch = EpochEndOffset::default()
                            .with_epoch(tags.3)
                            .with_end_offset(7);
                    }
                    if tags.1 {
                        p.current_leader = LeaderIdAndEpoch::default()
                            .with_leader_id(BrokerId(3))
                            .with_leader_epoch(tags.3);
                    }
                    if tags.2 {
                        p.snapshot_id = SnapshotId::default().with_end_offset(9).with_epoch(2);
                    }
                }
                p
            })
    }

    fn response_strategy() -> impl Strategy<Value = (i16, FetchResponse)> {
        (4i16..=18).prop_flat_map(|version| {
            let topics = proptest::collection::vec(
                (
                    "[a-z]{1,12}",
                    any::<u128>(),
                    proptest::collection::vec(partition_strategy(version), 0..4),
                ),
                0..4,
            );
            (Just(version), topics, any::<(i32, i16, i32, bool)>()).prop_map(
                |(version, topics, (throttle, code, session, endpoints))| {
                    let mut r = FetchResponse::default();
                    r.throttle_time_ms = throttle;
                    if version >= 7 {
                        r.error_code = code;
                        r.session_id = session;
                    }
                    for (name, id, partitions) in topics {
                        let mut t = FetchableTopicResponse::default();
                        if version <= 12 {
                            t.topic = TopicName(StrBytes::from_string(name));
                        }
                        if version >= 13 {
                            t.topic_id = uuid::Uuid::from_u128(id);
                        }
                        t.partitions = partitions;
                        r.responses.push(t);
                    }
                    if version >= 16 && endpoints {
                        r.node_endpoints = vec![NodeEndpoint::default()
                            .with_node_id(BrokerId(2))
                            .with_host(StrBytes::from_static_str("h"))
                            .with_port(9092)];
                    }
                    (version, r)
                },
            )
        })
    }

    proptest! {
        /// Inline records: byte-identical to kafka-protocol's own encoding.
        #[test]
        fn matches_kafka_protocol((version, resp) in response_strategy(), correlation in any::<i32>()) {
            let n: usize = resp.responses.iter().map(|t| t.partitions.len()).sum();
            let none: Vec<Option<Held>> = (0..n).map(|_| None).collect();
            let frame = encode_fetch_response(version, correlation, &resp, none).unwrap();
            let flat = frame.flatten(|_, _| unreachable!()).unwrap();
            prop_assert_eq!(flat.len(), frame.len);
            prop_assert_eq!(flat, reference(version, correlation, &resp));
        }

        /// Spliced records land where inline ones would: the same bytes once each record set
        /// is put in its place, whatever the partition's own field holds.
        #[test]
        fn spliced_records_land_where_inline_ones_would((version, resp) in response_strategy()) {
            let expected = reference(version, 5, &resp);
            let mut spliced = Vec::new();
            let mut stripped = resp.clone();
            for t in &mut stripped.responses {
                for p in &mut t.partitions {
                    match p.records.take() {
                        Some(r) if spliced.len() % 2 == 0 => {
                            spliced.push(Some(Held(r)));
                            p.records = Some(Bytes::from_static(b"ignored"));
                        }
                        other => {
                            spliced.push(None);
                            p.records = other;
                        }
                    }
                }
            }
            let frame = encode_fetch_response(version, 5, &stripped, spliced).unwrap();
            let flat = frame.flatten(|r, out| {
                out.extend_from_slice(&r.0);
                Ok(())
            }).unwrap();
            prop_assert_eq!(flat.len(), frame.len);
            prop_assert_eq!(flat, expected);
        }
    }
}
