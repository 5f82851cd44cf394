//! The metadata quorum's Raft, on `openraft` (pinned; only this module and `quorum` name its
//! types). Raft log index = offset in `__cluster_metadata-0`, Raft term = the batch's
//! partition leader epoch.
//!
//! - [`store`]: the log ([`store::LogStore`]) and the state machine
//!   ([`store::StateMachine`], the [`MetadataImage`] plus snapshots).
//! - [`network`]: Raft RPCs over the controller listener.

pub mod network;
pub mod store;

use std::collections::{BTreeMap, BTreeSet};
use std::io::Cursor;

use openraft::{
    BasicNode, CommittedLeaderId, Entry, EntryPayload, LogId, Membership, SnapshotMeta,
    StoredMembership, TokioRuntime, Vote,
};
use sluice_metadata::MetadataRecord;

use crate::wire::{Reader, WireError, Writer};

/// One controller write: records applied atomically.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Command(pub Vec<MetadataRecord>);

openraft::declare_raft_types!(
    pub TypeConfig:
        D = Command,
        R = (),
        NodeId = u64,
        Node = BasicNode,
        Entry = openraft::Entry<TypeConfig>,
        SnapshotData = Cursor<Vec<u8>>,
        AsyncRuntime = Runtime,
);

/// openraft's runtime: tokio, except that the randomness of the election timeout (drawn once
/// per node start) comes through `sluice_rt`, so the simulator's seed decides it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Runtime;

impl openraft::AsyncRuntime for Runtime {
    type JoinError = <TokioRuntime as openraft::AsyncRuntime>::JoinError;
    type JoinHandle<T: openraft::OptionalSend + 'static> =
        <TokioRuntime as openraft::AsyncRuntime>::JoinHandle<T>;
    type Sleep = <TokioRuntime as openraft::AsyncRuntime>::Sleep;
    type Instant = <TokioRuntime as openraft::AsyncRuntime>::Instant;
    type TimeoutError = <TokioRuntime as openraft::AsyncRuntime>::TimeoutError;
    type Timeout<R, T: std::future::Future<Output = R> + openraft::OptionalSend> =
        <TokioRuntime as openraft::AsyncRuntime>::Timeout<R, T>;
    type ThreadLocalRng = rand::rngs::StdRng;
    type OneshotSender<T: openraft::OptionalSend> =
        <TokioRuntime as openraft::AsyncRuntime>::OneshotSender<T>;
    type OneshotReceiverError = <TokioRuntime as openraft::AsyncRuntime>::OneshotReceiverError;
    type OneshotReceiver<T: openraft::OptionalSend> =
        <TokioRuntime as openraft::AsyncRuntime>::OneshotReceiver<T>;

    fn spawn<T>(future: T) -> Self::JoinHandle<T::Output>
    where
        T: std::future::Future + openraft::OptionalSend + 'static,
        T::Output: openraft::OptionalSend + 'static,
    {
        TokioRuntime::spawn(future)
    }

    fn sleep(duration: std::time::Duration) -> Self::Sleep {
        TokioRuntime::sleep(duration)
    }

    fn sleep_until(deadline: Self::Instant) -> Self::Sleep {
        TokioRuntime::sleep_until(deadline)
    }

    fn timeout<R, F: std::future::Future<Output = R> + openraft::OptionalSend>(
        duration: std::time::Duration,
        future: F,
    ) -> Self::Timeout<R, F> {
        TokioRuntime::timeout(duration, future)
    }

    fn timeout_at<R, F: std::future::Future<Output = R> + openraft::OptionalSend>(
        deadline: Self::Instant,
        future: F,
    ) -> Self::Timeout<R, F> {
        TokioRuntime::timeout_at(deadline, future)
    }

    fn is_panic(join_error: &Self::JoinError) -> bool {
        TokioRuntime::is_panic(join_error)
    }

    fn thread_rng() -> Self::ThreadLocalRng {
        rand::SeedableRng::seed_from_u64(sluice_rt::random_u128() as u64)
    }

    fn oneshot<T: openraft::OptionalSend>() -> (Self::OneshotSender<T>, Self::OneshotReceiver<T>) {
        TokioRuntime::oneshot()
    }
}

pub type Raft = openraft::Raft<TypeConfig>;
pub type RaftLogId = LogId<u64>;

pub fn log_id(term: u64, index: u64) -> RaftLogId {
    LogId::new(CommittedLeaderId::new(term, 0), index)
}

pub fn put_log_id(w: &mut Writer, id: &Option<RaftLogId>) {
    match id {
        Some(id) => {
            w.bool(true).u64(id.leader_id.term).u64(id.index);
        }
        None => {
            w.bool(false);
        }
    }
}

pub fn get_log_id(r: &mut Reader) -> Result<Option<RaftLogId>, WireError> {
    Ok(if r.bool()? {
        Some(log_id(r.u64()?, r.u64()?))
    } else {
        None
    })
}

pub fn put_vote(w: &mut Writer, v: &Vote<u64>) {
    w.u64(v.leader_id.term);
    match v.leader_id.voted_for {
        Some(n) => w.bool(true).u64(n),
        None => w.bool(false),
    };
    w.bool(v.committed);
}

pub fn get_vote(r: &mut Reader) -> Result<Vote<u64>, WireError> {
    let term = r.u64()?;
    let voted_for = if r.bool()? { Some(r.u64()?) } else { None };
    let committed = r.bool()?;
    let mut v = Vote::new(term, 0);
    v.leader_id.voted_for = voted_for;
    v.committed = committed;
    Ok(v)
}

pub fn put_membership(w: &mut Writer, m: &Membership<u64, BasicNode>) {
    let configs = m.get_joint_config();
    w.u32(configs.len() as u32);
    for c in configs {
        w.u32(c.len() as u32);
        for id in c {
            w.u64(*id);
        }
    }
    let nodes: Vec<(&u64, &BasicNode)> = m.nodes().collect();
    w.u32(nodes.len() as u32);
    for (id, n) in nodes {
        w.u64(*id).str(&n.addr);
    }
}

pub fn get_membership(r: &mut Reader) -> Result<Membership<u64, BasicNode>, WireError> {
    let n = r.count(4)?;
    let mut configs = Vec::with_capacity(n);
    for _ in 0..n {
        let k = r.count(8)?;
        let mut set = BTreeSet::new();
        for _ in 0..k {
            set.insert(r.u64()?);
        }
        configs.push(set);
    }
    let n = r.count(12)?;
    let mut nodes = BTreeMap::new();
    for _ in 0..n {
        let id = r.u64()?;
        nodes.insert(id, BasicNode { addr: r.str()? });
    }
    Ok(Membership::new(configs, nodes))
}

pub fn put_stored_membership(w: &mut Writer, m: &StoredMembership<u64, BasicNode>) {
    put_log_id(w, m.log_id());
    put_membership(w, m.membership());
}

pub fn get_stored_membership(
    r: &mut Reader,
) -> Result<StoredMembership<u64, BasicNode>, WireError> {
    let id = get_log_id(r)?;
    Ok(StoredMembership::new(id, get_membership(r)?))
}

pub fn put_snapshot_meta(w: &mut Writer, m: &SnapshotMeta<u64, BasicNode>) {
    put_log_id(w, &m.last_log_id);
    put_stored_membership(w, &m.last_membership);
    w.str(&m.snapshot_id);
}

pub fn get_snapshot_meta(r: &mut Reader) -> Result<SnapshotMeta<u64, BasicNode>, WireError> {
    Ok(SnapshotMeta {
        last_log_id: get_log_id(r)?,
        last_membership: get_stored_membership(r)?,
        snapshot_id: r.str()?,
    })
}

pub fn put_records(w: &mut Writer, records: &[MetadataRecord]) {
    w.u32(records.len() as u32);
    for rec in records {
        w.bytes(&rec.encode());
    }
}

pub fn get_records(r: &mut Reader) -> Result<Vec<MetadataRecord>, WireError> {
    let n = r.count(6)?;
    (0..n)
        .map(|_| MetadataRecord::decode(r.bytes()?).map_err(|_| WireError("bad metadata record")))
        .collect()
}

/// An entry's payload: its kind tag and bytes (the metadata log stores the tag as the
/// record key and the bytes as its value).
pub fn encode_payload(p: &EntryPayload<TypeConfig>) -> (&'static [u8], Vec<u8>) {
    let mut w = Writer::default();
    match p {
        EntryPayload::Blank => (b"B", Vec::new()),
        EntryPayload::Normal(Command(records)) => {
            put_records(&mut w, records);
            (b"N", w.0)
        }
        EntryPayload::Membership(m) => {
            put_membership(&mut w, m);
            (b"M", w.0)
        }
    }
}

pub fn decode_payload(tag: &[u8], value: &[u8]) -> Result<EntryPayload<TypeConfig>, WireError> {
    let mut r = Reader::new(value);
    let p = match tag {
        b"B" => EntryPayload::Blank,
        b"N" => EntryPayload::Normal(Command(get_records(&mut r)?)),
        b"M" => EntryPayload::Membership(get_membership(&mut r)?),
        _ => return Err(WireError("unknown entry kind")),
    };
    r.done()?;
    Ok(p)
}

pub fn put_entry(w: &mut Writer, e: &Entry<TypeConfig>) {
    put_log_id(w, &Some(e.log_id));
    let (tag, bytes) = encode_payload(&e.payload);
    w.bytes(tag).bytes(&bytes);
}

pub fn get_entry(r: &mut Reader) -> Result<Entry<TypeConfig>, WireError> {
    let log_id = get_log_id(r)?.ok_or(WireError("entry without log id"))?;
    let tag = r.bytes()?;
    let value = r.bytes()?;
    Ok(Entry {
        log_id,
        payload: decode_payload(tag, value)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_round_trip() {
        let mut nodes = BTreeMap::new();
        nodes.insert(1, BasicNode { addr: "a:1".into() });
        nodes.insert(2, BasicNode { addr: "b:2".into() });
        let m = Membership::new(vec![BTreeSet::from([1, 2])], nodes);
        for payload in [
            EntryPayload::Blank,
            EntryPayload::Normal(Command(vec![MetadataRecord::FenceBroker {
                node_id: 1,
                epoch: 2,
            }])),
            EntryPayload::Membership(m),
        ] {
            let e = Entry {
                log_id: log_id(3, 9),
                payload,
            };
            let mut w = Writer::default();
            put_entry(&mut w, &e);
            let back = get_entry(&mut Reader::new(&w.0)).unwrap();
            assert_eq!(back.log_id, e.log_id);
            assert_eq!(format!("{:?}", back.payload), format!("{:?}", e.payload));
            for cut in 0..w.0.len() {
                assert!(get_entry(&mut Reader::new(&w.0[..cut])).is_err());
            }
        }
        let mut v = Vote::new(4, 2);
        v.committed = true;
        let mut w = Writer::default();
        put_vote(&mut w, &v);
        assert_eq!(get_vote(&mut Reader::new(&w.0)).unwrap(), v);
    }
}
