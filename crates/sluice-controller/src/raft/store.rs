//! Raft storage. [`LogStore`]: entries in `__cluster_metadata-0` (one batch per entry, the
//! entry kind as the record key), the vote and commit point in `quorum-state`.
//! [`StateMachine`]: the [`MetadataImage`] built by applying committed entries, published
//! to the node through [`Shared`]; snapshots (`<index>-<term>.checkpoint`, the image as
//! records) bound the log and bring lagging or new nodes up to date.

use std::collections::VecDeque;
use std::fmt::Debug;
use std::io::Cursor;
use std::ops::{Bound, RangeBounds};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use openraft::storage::{LogFlushed, LogState, RaftLogStorage, RaftStateMachine, Snapshot};
use openraft::{
    BasicNode, Entry, EntryPayload, ErrorSubject, ErrorVerb, OptionalSend, RaftLogReader,
    RaftSnapshotBuilder, SnapshotMeta, StorageError, StoredMembership, Vote,
};
use sluice_metadata::{topic, MetadataImage, MetadataRecord};
use sluice_protocol::batch::{decode_records, BatchBuilder, BatchIter, RecordLimits};
use sluice_protocol::compression::Compression;
use sluice_protocol::types::TopicPartition;
use sluice_storage::checkpoint::write_atomically;
use sluice_storage::log::OpenOptions;
use sluice_storage::{Log, LogConfig};
use tokio::sync::watch;

use super::{
    decode_payload, encode_payload, get_log_id, get_records, get_snapshot_meta, get_vote, log_id,
    put_log_id, put_records, put_snapshot_meta, put_vote, Command, RaftLogId, TypeConfig,
};
use crate::wire::{Reader, Writer};

type SErr = StorageError<u64>;

fn serr(subject: ErrorSubject<u64>, verb: ErrorVerb, e: impl ToString) -> SErr {
    StorageError::from_io_error(subject, verb, std::io::Error::other(e.to_string()))
}

fn now_ms() -> i64 {
    sluice_rt::wall_ms()
}

fn metadata_log_config(segment_bytes: u64) -> LogConfig {
    LogConfig {
        flush_messages: u64::MAX,
        retention_ms: -1,
        retention_bytes: -1,
        segment_bytes,
        max_message_bytes: 64 * 1024 * 1024,
        message_timestamp_after_max_ms: i64::MAX,
        message_timestamp_before_max_ms: i64::MAX,
        ..LogConfig::default()
    }
}

/// The persistent Raft state besides the entries.
#[derive(Default)]
struct QuorumState {
    vote: Option<Vote<u64>>,
    committed: Option<RaftLogId>,
    purged: Option<RaftLogId>,
}

impl QuorumState {
    const FILE: &'static str = "quorum-state";

    fn read(dir: &Path) -> Result<Self, String> {
        let bytes = match std::fs::read(dir.join(Self::FILE)) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Self::default()),
            Err(e) => return Err(e.to_string()),
        };
        let mut r = Reader::new(&bytes);
        let parse = |r: &mut Reader| -> Result<Self, crate::wire::WireError> {
            let vote = if r.bool()? { Some(get_vote(r)?) } else { None };
            Ok(Self {
                vote,
                committed: get_log_id(r)?,
                purged: get_log_id(r)?,
            })
        };
        parse(&mut r).map_err(|e| format!("{}: {e}", Self::FILE))
    }

    fn write(&self, dir: &Path) -> Result<(), String> {
        let mut w = Writer::default();
        match &self.vote {
            Some(v) => {
                w.bool(true);
                put_vote(&mut w, v);
            }
            None => {
                w.bool(false);
            }
        }
        put_log_id(&mut w, &self.committed);
        put_log_id(&mut w, &self.purged);
        write_atomically(&dir.join(Self::FILE), &w.0).map_err(|e| e.to_string())
    }
}

struct LogInner {
    log: Log,
    dir: PathBuf,
    state: QuorumState,
}

impl LogInner {
    fn entries(&self, from: u64, to: u64) -> Result<Vec<Entry<TypeConfig>>, String> {
        let end = self.log.log_end_offset().min(to as i64);
        let mut next = (from as i64).max(self.log.log_start_offset());
        let mut out = Vec::new();
        while next < end {
            let info = self
                .log
                .read(next, 1 << 20, end, true)
                .map_err(|e| e.to_string())?;
            let Some(slice) = info.slice else { break };
            let mut buf = Vec::new();
            slice.read_into(&mut buf).map_err(|e| e.to_string())?;
            let before = next;
            for item in BatchIter::new(&buf) {
                let (h, bytes) = item.map_err(|e| e.to_string())?;
                let records =
                    decode_records(bytes, RecordLimits::default()).map_err(|e| e.to_string())?;
                for rec in records {
                    if rec.offset >= next && rec.offset < end {
                        let payload = decode_payload(
                            rec.key.as_deref().unwrap_or_default(),
                            rec.value.as_deref().unwrap_or_default(),
                        )
                        .map_err(|e| format!("metadata log offset {}: {e}", rec.offset))?;
                        out.push(Entry {
                            log_id: log_id(h.partition_leader_epoch as u64, rec.offset as u64),
                            payload,
                        });
                    }
                }
                next = next.max(h.next_offset());
            }
            if next == before {
                break;
            }
        }
        Ok(out)
    }
}

/// The Raft log. Cloning shares it (the reader openraft asks for is a clone).
#[derive(Clone)]
pub struct LogStore {
    inner: Arc<Mutex<LogInner>>,
}

impl LogStore {
    pub fn open(dir: &Path, segment_bytes: u64) -> Result<Self, String> {
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let state = QuorumState::read(dir)?;
        let tp = TopicPartition::new(topic::CLUSTER_METADATA, 0);
        let log_dir = dir.join(tp.dir_name());
        let now = now_ms();
        let start = state.purged.map_or(0, |p| p.index as i64 + 1);
        let mut log = if log_dir.exists() {
            Log::open(
                &log_dir,
                tp,
                metadata_log_config(segment_bytes),
                OpenOptions {
                    clean_shutdown: false,
                    recovery_point: 0,
                    log_start_offset: 0,
                    now_ms: now,
                },
            )
        } else {
            Log::create(dir, tp, [0; 16], metadata_log_config(segment_bytes), now)
        }
        .map_err(|e| e.to_string())?;
        if log.log_end_offset() < start {
            log.truncate_fully_and_start_at(start, now)
                .map_err(|e| e.to_string())?;
        } else if start > log.log_start_offset() {
            log.advance_log_start_offset(start)
                .map_err(|e| e.to_string())?;
        }
        Ok(Self {
            inner: Arc::new(Mutex::new(LogInner {
                log,
                dir: dir.to_path_buf(),
                state,
            })),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, LogInner> {
        self.inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Offsets held (log start, log end) and the segment count: what snapshots bound.
    pub fn extent(&self) -> (i64, i64, usize) {
        let g = self.lock();
        (
            g.log.log_start_offset(),
            g.log.log_end_offset(),
            g.log.segment_count(),
        )
    }

    pub fn close(&self) {
        let _ = self.lock().log.close(now_ms());
    }
}

fn range_of<RB: RangeBounds<u64>>(range: &RB) -> (u64, u64) {
    let from = match range.start_bound() {
        Bound::Included(x) => *x,
        Bound::Excluded(x) => x + 1,
        Bound::Unbounded => 0,
    };
    let to = match range.end_bound() {
        Bound::Included(x) => x + 1,
        Bound::Excluded(x) => *x,
        Bound::Unbounded => u64::MAX,
    };
    (from, to)
}

impl RaftLogReader<TypeConfig> for LogStore {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + OptionalSend>(
        &mut self,
        range: RB,
    ) -> Result<Vec<Entry<TypeConfig>>, SErr> {
        let (from, to) = range_of(&range);
        self.lock()
            .entries(from, to)
            .map_err(|e| serr(ErrorSubject::Logs, ErrorVerb::Read, e))
    }
}

fn write_err(e: impl ToString) -> SErr {
    serr(ErrorSubject::Logs, ErrorVerb::Write, e)
}

impl RaftLogStorage<TypeConfig> for LogStore {
    type LogReader = Self;

    async fn get_log_state(&mut self) -> Result<LogState<TypeConfig>, SErr> {
        let g = self.lock();
        let purged = g.state.purged;
        let leo = g.log.log_end_offset();
        let last = if leo > g.log.log_start_offset() {
            g.entries(leo as u64 - 1, leo as u64)
                .map_err(|e| serr(ErrorSubject::Logs, ErrorVerb::Read, e))?
                .last()
                .map(|e| e.log_id)
        } else {
            None
        };
        Ok(LogState {
            last_purged_log_id: purged,
            last_log_id: last.or(purged),
        })
    }

    async fn get_log_reader(&mut self) -> Self::LogReader {
        self.clone()
    }

    async fn save_vote(&mut self, vote: &Vote<u64>) -> Result<(), SErr> {
        let mut g = self.lock();
        g.state.vote = Some(*vote);
        g.state
            .write(&g.dir)
            .map_err(|e| serr(ErrorSubject::Vote, ErrorVerb::Write, e))
    }

    async fn read_vote(&mut self) -> Result<Option<Vote<u64>>, SErr> {
        Ok(self.lock().state.vote)
    }

    async fn save_committed(&mut self, committed: Option<RaftLogId>) -> Result<(), SErr> {
        let mut g = self.lock();
        g.state.committed = committed;
        g.state.write(&g.dir).map_err(write_err)
    }

    async fn read_committed(&mut self) -> Result<Option<RaftLogId>, SErr> {
        Ok(self.lock().state.committed)
    }

    async fn append<I>(&mut self, entries: I, callback: LogFlushed<TypeConfig>) -> Result<(), SErr>
    where
        I: IntoIterator<Item = Entry<TypeConfig>> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        let result = (|| -> Result<(), String> {
            let mut g = self.lock();
            let now = now_ms();
            for e in entries {
                let index = e.log_id.index as i64;
                if index > g.log.log_end_offset() {
                    // After a snapshot install the log restarts past its old end.
                    g.log
                        .truncate_fully_and_start_at(index, now)
                        .map_err(|e| e.to_string())?;
                } else if index < g.log.log_end_offset() {
                    g.log.truncate_to(index, now).map_err(|e| e.to_string())?;
                }
                let (tag, value) = encode_payload(&e.payload);
                let mut b = BatchBuilder::new(Compression::None);
                b.append(now, Some(tag), Some(&value), &[]);
                let batch = b.build(0).map_err(|e| e.to_string())?;
                g.log
                    .append_as_leader(batch, e.log_id.leader_id.term as i32, now)
                    .map_err(|e| e.to_string())?;
            }
            g.log.flush(now).map_err(|e| e.to_string())
        })();
        match &result {
            Ok(()) => callback.log_io_completed(Ok(())),
            Err(e) => callback.log_io_completed(Err(std::io::Error::other(e.clone()))),
        }
        result.map_err(write_err)
    }

    async fn truncate(&mut self, log_id: RaftLogId) -> Result<(), SErr> {
        let mut g = self.lock();
        g.log
            .truncate_to(log_id.index as i64, now_ms())
            .map_err(write_err)
    }

    async fn purge(&mut self, log_id: RaftLogId) -> Result<(), SErr> {
        let mut g = self.lock();
        // Never drop entries that no snapshot on disk covers: openraft purges right after
        // handing a received snapshot to the state machine, possibly before that snapshot is
        // written, and a crash in between would leave a hole below the log. Purge up to the
        // snapshot that is on disk; a later purge catches up.
        let covered = latest_snapshot(&g.dir)
            .map_err(|e| serr(ErrorSubject::Snapshot(None), ErrorVerb::Read, e))?
            .and_then(|(meta, _)| meta.last_log_id);
        let log_id = match covered {
            Some(c) if c < log_id => c,
            Some(_) => log_id,
            None => return Ok(()),
        };
        if g.state.purged.is_some_and(|p| p >= log_id) {
            return Ok(());
        }
        g.state.purged = Some(log_id);
        g.state.write(&g.dir).map_err(write_err)?;
        let start = log_id.index as i64 + 1;
        let now = now_ms();
        if start > g.log.log_end_offset() {
            g.log
                .truncate_fully_and_start_at(start, now)
                .map_err(write_err)?;
        } else {
            g.log.advance_log_start_offset(start).map_err(write_err)?;
            let leo = g.log.log_end_offset();
            g.log.delete_old_segments(leo, now).map_err(write_err)?;
        }
        Ok(())
    }
}

/// How many applied entries the state machine remembers for brokers fetching changes.
const RECENT_ENTRIES: usize = 4096;

/// What the state machine publishes to the rest of the node.
pub struct Shared {
    pub image: watch::Sender<Arc<MetadataImage>>,
    /// Recently applied entries (log index, records), oldest first.
    recent: Mutex<VecDeque<(i64, Vec<MetadataRecord>)>>,
}

/// What a metadata fetch from `offset` gets: the entries after it, or the whole image
/// when they are no longer remembered.
pub enum Changes {
    Entries(Vec<(i64, Vec<MetadataRecord>)>),
    Snapshot(Arc<MetadataImage>),
}

impl Shared {
    pub fn new() -> Arc<Self> {
        Arc::new(Self {
            image: watch::channel(Arc::new(MetadataImage::empty())).0,
            recent: Mutex::new(VecDeque::new()),
        })
    }

    pub fn current(&self) -> Arc<MetadataImage> {
        Arc::clone(&self.image.borrow())
    }

    /// Changes after `offset` (empty when there are none yet).
    pub fn changes_since(&self, offset: i64) -> Changes {
        let image = self.current();
        if offset >= image.offset {
            return Changes::Entries(Vec::new());
        }
        let recent = self
            .recent
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        match recent.front() {
            Some((first, _)) if *first <= offset + 1 => Changes::Entries(
                recent
                    .iter()
                    .filter(|(o, _)| *o > offset && *o <= image.offset)
                    .cloned()
                    .collect(),
            ),
            _ => Changes::Snapshot(image),
        }
    }

    fn push(&self, offset: i64, records: Vec<MetadataRecord>) {
        let mut recent = self
            .recent
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        recent.push_back((offset, records));
        while recent.len() > RECENT_ENTRIES {
            recent.pop_front();
        }
    }

    fn reset(&self) {
        self.recent
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clear();
    }
}

pub struct StateMachine {
    dir: PathBuf,
    image: MetadataImage,
    last_applied: Option<RaftLogId>,
    membership: StoredMembership<u64, BasicNode>,
    shared: Arc<Shared>,
    snapshots_built: u64,
}

/// A snapshot file's name: last included index and term.
pub fn snapshot_name(id: &Option<RaftLogId>) -> String {
    let (index, term) = id.map_or((0, 0), |l| (l.index, l.leader_id.term));
    format!("{index:020}-{term:010}.checkpoint")
}

/// A snapshot's data: the image's offset and the records that rebuild it.
pub fn snapshot_bytes(image: &MetadataImage) -> Vec<u8> {
    let mut w = Writer::default();
    w.i64(image.offset);
    put_records(&mut w, &image.to_records());
    w.0
}

/// The image a snapshot's data rebuilds (what a restarting or lagging controller loads).
pub fn image_from(bytes: &[u8]) -> Result<MetadataImage, String> {
    let mut r = Reader::new(bytes);
    let offset = r.i64().map_err(|e| e.to_string())?;
    let records = get_records(&mut r).map_err(|e| e.to_string())?;
    let mut image = MetadataImage::empty();
    for rec in &records {
        image.apply(offset, rec);
    }
    image.offset = offset;
    Ok(image)
}

/// The newest snapshot file in `dir`: (meta, data).
type StoredSnapshot = (SnapshotMeta<u64, BasicNode>, Vec<u8>);

fn latest_snapshot(dir: &Path) -> Result<Option<StoredSnapshot>, String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .map_err(|e| format!("{}: {e}", dir.display()))?
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.ends_with(".checkpoint") && n.len() == 20 + 1 + 10 + 11)
        .collect();
    names.sort();
    let Some(name) = names.pop() else {
        return Ok(None);
    };
    let bytes = std::fs::read(dir.join(&name)).map_err(|e| format!("{name}: {e}"))?;
    let mut r = Reader::new(&bytes);
    let meta = get_snapshot_meta(&mut r).map_err(|e| format!("{name}: {e}"))?;
    let data = r.bytes().map_err(|e| format!("{name}: {e}"))?.to_vec();
    Ok(Some((meta, data)))
}

/// Write a snapshot file (tmp + rename + fsync) and remove older ones.
fn save_snapshot(
    dir: &Path,
    meta: &SnapshotMeta<u64, BasicNode>,
    data: &[u8],
) -> Result<(), String> {
    let mut w = Writer::default();
    put_snapshot_meta(&mut w, meta);
    w.bytes(data);
    let name = snapshot_name(&meta.last_log_id);
    write_atomically(&dir.join(&name), &w.0).map_err(|e| e.to_string())?;
    for e in std::fs::read_dir(dir).map_err(|e| e.to_string())?.flatten() {
        let other = e.file_name().to_string_lossy().into_owned();
        if other.ends_with(".checkpoint") && other.len() == name.len() && other < name {
            let _ = std::fs::remove_file(e.path());
        }
    }
    Ok(())
}

impl StateMachine {
    /// Start from the newest snapshot in `dir`, if any.
    pub fn open(dir: &Path, shared: Arc<Shared>) -> Result<Self, String> {
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let mut sm = Self {
            dir: dir.to_path_buf(),
            image: MetadataImage::empty(),
            last_applied: None,
            membership: StoredMembership::default(),
            shared,
            snapshots_built: 0,
        };
        if let Some((meta, data)) = latest_snapshot(dir)? {
            sm.image = image_from(&data)?;
            sm.last_applied = meta.last_log_id;
            sm.membership = meta.last_membership;
        }
        sm.shared.image.send_replace(Arc::new(sm.image.clone()));
        Ok(sm)
    }
}

pub struct SnapshotBuilder {
    dir: PathBuf,
    image: MetadataImage,
    last_applied: Option<RaftLogId>,
    membership: StoredMembership<u64, BasicNode>,
    seq: u64,
}

impl RaftSnapshotBuilder<TypeConfig> for SnapshotBuilder {
    async fn build_snapshot(&mut self) -> Result<Snapshot<TypeConfig>, SErr> {
        let data = snapshot_bytes(&self.image);
        let meta = SnapshotMeta {
            last_log_id: self.last_applied,
            last_membership: self.membership.clone(),
            snapshot_id: format!("{}-{}", snapshot_name(&self.last_applied), self.seq),
        };
        save_snapshot(&self.dir, &meta, &data)
            .map_err(|e| serr(ErrorSubject::Snapshot(None), ErrorVerb::Write, e))?;
        Ok(Snapshot {
            meta,
            snapshot: Box::new(Cursor::new(data)),
        })
    }
}

impl RaftStateMachine<TypeConfig> for StateMachine {
    type SnapshotBuilder = SnapshotBuilder;

    async fn applied_state(
        &mut self,
    ) -> Result<(Option<RaftLogId>, StoredMembership<u64, BasicNode>), SErr> {
        Ok((self.last_applied, self.membership.clone()))
    }

    async fn apply<I>(&mut self, entries: I) -> Result<Vec<()>, SErr>
    where
        I: IntoIterator<Item = Entry<TypeConfig>> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        let mut out = Vec::new();
        for e in entries {
            let offset = e.log_id.index as i64;
            match e.payload {
                EntryPayload::Normal(Command(records)) => {
                    for r in &records {
                        self.image.apply(offset, r);
                    }
                    self.image.offset = offset;
                    self.shared.push(offset, records);
                }
                EntryPayload::Membership(m) => {
                    self.membership = StoredMembership::new(Some(e.log_id), m);
                    self.image.offset = offset;
                    self.shared.push(offset, Vec::new());
                }
                EntryPayload::Blank => {
                    self.image.offset = offset;
                    self.shared.push(offset, Vec::new());
                }
            }
            self.last_applied = Some(e.log_id);
            out.push(());
        }
        self.shared.image.send_replace(Arc::new(self.image.clone()));
        Ok(out)
    }

    async fn get_snapshot_builder(&mut self) -> Self::SnapshotBuilder {
        self.snapshots_built += 1;
        SnapshotBuilder {
            dir: self.dir.clone(),
            image: self.image.clone(),
            last_applied: self.last_applied,
            membership: self.membership.clone(),
            seq: self.snapshots_built,
        }
    }

    async fn begin_receiving_snapshot(&mut self) -> Result<Box<Cursor<Vec<u8>>>, SErr> {
        Ok(Box::new(Cursor::new(Vec::new())))
    }

    async fn install_snapshot(
        &mut self,
        meta: &SnapshotMeta<u64, BasicNode>,
        snapshot: Box<Cursor<Vec<u8>>>,
    ) -> Result<(), SErr> {
        let data = snapshot.into_inner();
        let read_err = |e: String| serr(ErrorSubject::Snapshot(None), ErrorVerb::Read, e);
        let image = image_from(&data).map_err(read_err)?;
        save_snapshot(&self.dir, meta, &data)
            .map_err(|e| serr(ErrorSubject::Snapshot(None), ErrorVerb::Write, e))?;
        self.image = image;
        self.last_applied = meta.last_log_id;
        self.membership = meta.last_membership.clone();
        self.shared.reset();
        self.shared.image.send_replace(Arc::new(self.image.clone()));
        Ok(())
    }

    async fn get_current_snapshot(&mut self) -> Result<Option<Snapshot<TypeConfig>>, SErr> {
        let found = latest_snapshot(&self.dir)
            .map_err(|e| serr(ErrorSubject::Snapshot(None), ErrorVerb::Read, e))?;
        Ok(found.map(|(meta, data)| Snapshot {
            meta,
            snapshot: Box::new(Cursor::new(data)),
        }))
    }
}
