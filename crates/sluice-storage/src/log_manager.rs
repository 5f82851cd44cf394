//! [`LogManager`]: every partition log of the node's log directories (`log.dirs`, JBOD), plus
//! each directory's own files: the recovery-point, log-start-offset and cleaner checkpoints and
//! the clean-shutdown marker.
//!
//! A new partition's log goes to the directory that holds the fewest (the first of those on a
//! tie), as Kafka places them; an existing one stays where it is found. The marker
//! (`.kafka_cleanshutdown`, as Kafka names it) is written last on a clean shutdown and removed
//! at startup, so its absence at the next start means "recover" (per directory).

use std::collections::{BTreeMap, HashMap};
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use sluice_protocol::types::TopicPartition;
use tracing::{error, info, warn};

use crate::checkpoint;
use crate::config::LogConfig;
use crate::error::{IoContext, LogError};
use crate::log::{Log, OpenOptions};
use crate::pending_io::PendingIo;

pub const CLEAN_SHUTDOWN_FILE: &str = ".kafka_cleanshutdown";
/// The machine boot the last process ran in (see [`LogManager::previous_writes_intact`]).
pub const BOOT_FILE: &str = ".sluice_boot";
pub const RECOVERY_POINT_CHECKPOINT: &str = "recovery-point-offset-checkpoint";
pub const LOG_START_OFFSET_CHECKPOINT: &str = "log-start-offset-checkpoint";
pub const CLEANER_OFFSET_CHECKPOINT: &str = "cleaner-offset-checkpoint";
/// Directory of the metadata log, which is not a partition of a user topic.
pub const METADATA_LOG_DIR: &str = "__cluster_metadata-0";
/// Where tiered storage caches chunks of remote segments, in the first log dir.
pub const REMOTE_CACHE_DIR: &str = "remote-cache";
/// The read cache of diskless topics' WAL objects, in the first log dir.
pub const DISKLESS_CACHE_DIR: &str = "diskless-cache";
const DELETE_SUFFIX: &str = "-delete";
/// A log being copied to another directory (AlterReplicaLogDirs), as Kafka names it.
const FUTURE_SUFFIX: &str = "-future";

pub type SharedLog = Arc<RwLock<Log>>;

/// Told the index of each log directory that goes offline (see [`LogManager::fail_on`]).
pub type DirFailureListener = Box<dyn Fn(usize) + Send + Sync>;

/// A partition directory found on disk at startup.
#[derive(Clone, Debug)]
pub struct FoundLog {
    pub tp: TopicPartition,
    pub topic_id: Option<[u8; 16]>,
}

/// Run disk work `log` left (see [`PendingIo`]) without its lock, then record it done.
pub fn run_pending_io(log: &SharedLog, io: PendingIo) -> Result<(), LogError> {
    if io.is_empty() {
        return Ok(());
    }
    io.run()?;
    lock_write(log).complete_io(&io);
    Ok(())
}

/// One log directory: where it is and what its files said at startup.
struct LogDir {
    /// As configured: every file of the directory is reached through it.
    dir: PathBuf,
    /// Absolute and canonical, as Kafka names log directories to clients (DescribeLogDirs,
    /// AlterReplicaLogDirs).
    name: PathBuf,
    had_clean_shutdown: bool,
    recovery_points: HashMap<TopicPartition, i64>,
    log_start_offsets: HashMap<TopicPartition, i64>,
    /// How far each compacted log is clean (the cleaner's checkpoint).
    cleaned_up_to: Mutex<BTreeMap<TopicPartition, i64>>,
    /// An I/O error happened in it: nothing of it is touched again until a restart.
    offline: AtomicBool,
}

impl LogDir {
    fn open(dir: &Path) -> Result<Self, LogError> {
        fs::create_dir_all(dir).at(dir)?;
        let marker = dir.join(CLEAN_SHUTDOWN_FILE);
        let had_clean_shutdown = marker.exists();
        if had_clean_shutdown {
            fs::remove_file(&marker).at(&marker)?;
            checkpoint::sync_dir(dir)?;
        }
        let read_or_empty = |name: &str| match checkpoint::read_offsets(&dir.join(name)) {
            Ok(m) => m,
            Err(e) => {
                warn!(error = %e, "ignoring unreadable checkpoint; logs will be fully recovered");
                HashMap::new()
            }
        };
        Ok(Self {
            dir: dir.to_path_buf(),
            name: fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf()),
            had_clean_shutdown,
            recovery_points: read_or_empty(RECOVERY_POINT_CHECKPOINT),
            log_start_offsets: read_or_empty(LOG_START_OFFSET_CHECKPOINT),
            cleaned_up_to: Mutex::new(
                read_or_empty(CLEANER_OFFSET_CHECKPOINT)
                    .into_iter()
                    .collect(),
            ),
            offline: AtomicBool::new(false),
        })
    }

    fn cleaned_up_to(&self) -> std::sync::MutexGuard<'_, BTreeMap<TopicPartition, i64>> {
        self.cleaned_up_to
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

pub struct LogManager {
    dirs: Vec<LogDir>,
    /// Each log and the index of the directory it is in.
    logs: Mutex<HashMap<TopicPartition, (usize, SharedLog)>>,
    /// Logs being moved to another directory, and to which (a "future" replica there).
    moving: Mutex<HashMap<TopicPartition, usize>>,
    /// Where a partition this node does not hold yet is to be created (AlterReplicaLogDirs
    /// before the replica arrives, as Kafka remembers it).
    preferred: Mutex<HashMap<TopicPartition, usize>>,
    delete_counter: AtomicU64,
    on_failure: Mutex<Option<DirFailureListener>>,
}

/// A file as it was when copied: it has changed since if any of these differ.
type Stamp = (u64, u64, Option<std::time::SystemTime>);

fn stamp(path: &Path) -> Result<Stamp, LogError> {
    use std::os::unix::fs::MetadataExt;
    let m = fs::metadata(path).at(path)?;
    Ok((m.ino(), m.len(), m.modified().ok()))
}

/// Copy every file of `src` to `dst` that is not there as it is now (`copied` holds what
/// each was when copied), remove from `dst` what `src` no longer has, and with `always`
/// copy the files it names whatever their stamp (indexes written through a memory map).
fn sync_files(
    src: &Path,
    dst: &Path,
    copied: &mut HashMap<std::ffi::OsString, Stamp>,
    always: impl Fn(&str) -> bool,
) -> Result<(), LogError> {
    let mut present = std::collections::HashSet::new();
    for entry in fs::read_dir(src).at(src)? {
        let entry = entry.at(src)?;
        let name = entry.file_name();
        let from = entry.path();
        // Taken before the copy: a change during it shows at the next pass.
        let Ok(now) = stamp(&from) else { continue };
        present.insert(name.clone());
        if copied.get(&name) == Some(&now) && !always(&name.to_string_lossy()) {
            continue;
        }
        let to = dst.join(&name);
        match fs::copy(&from, &to) {
            Ok(_) => {
                copied.insert(name, now);
            }
            // Deleted meanwhile (retention): gone from the copy too, below.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                present.remove(&name);
            }
            Err(e) => return Err(LogError::io(to, e)),
        }
    }
    for entry in fs::read_dir(dst).at(dst)? {
        let entry = entry.at(dst)?;
        if !present.contains(&entry.file_name()) {
            fs::remove_file(entry.path()).at(&entry.path())?;
            copied.remove(&entry.file_name());
        }
    }
    Ok(())
}

/// fsync every file of `dir`, then `dir` itself.
fn sync_all(dir: &Path) -> Result<(), LogError> {
    for entry in fs::read_dir(dir).at(dir)? {
        let path = entry.at(dir)?.path();
        fs::File::open(&path).and_then(|f| f.sync_all()).at(&path)?;
    }
    checkpoint::sync_dir(dir)
}

fn lock_read(log: &SharedLog) -> std::sync::RwLockReadGuard<'_, Log> {
    log.read()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn lock_write(log: &SharedLog) -> std::sync::RwLockWriteGuard<'_, Log> {
    log.write()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl LogManager {
    /// Open (creating if needed) one log directory and read its checkpoints.
    pub fn open(dir: &Path) -> Result<Self, LogError> {
        Self::open_all(&[dir.to_path_buf()])
    }

    /// Open (creating if needed) the log directories, each with its checkpoints.
    pub fn open_all(dirs: &[PathBuf]) -> Result<Self, LogError> {
        Ok(Self {
            dirs: dirs
                .iter()
                .map(|d| LogDir::open(d))
                .collect::<Result<_, _>>()?,
            logs: Mutex::new(HashMap::new()),
            moving: Mutex::new(HashMap::new()),
            preferred: Mutex::new(HashMap::new()),
            delete_counter: AtomicU64::new(0),
            on_failure: Mutex::new(None),
        })
    }

    /// Who is told when a directory goes offline (one listener; a later call replaces it).
    pub fn on_dir_failure(&self, listener: DirFailureListener) {
        *self
            .on_failure
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(listener);
    }

    /// Take the log directory an I/O error happened in offline, as Kafka's log directory
    /// failure channel does: from then on no log of it is written, read, flushed, cleaned or
    /// checkpointed, no new log is placed there, and the listener is told (once). Returns
    /// whether `e` was such an error (an error that is not I/O, or outside every directory,
    /// changes nothing).
    pub fn fail_on(&self, e: &LogError) -> bool {
        let LogError::Io { path, source } = e else {
            return false;
        };
        let Some(i) = self.dirs.iter().position(|d| path.starts_with(&d.dir)) else {
            return false;
        };
        if !self.dirs[i].offline.swap(true, Ordering::SeqCst) {
            error!(dir = %self.dirs[i].name.display(), path = %path.display(), error = %source, "log directory failed: taken offline");
            // Its page cache may have dropped writes it could not write back, unless the
            // disk was only full: its files may no longer hold what this process wrote.
            if source.kind() != std::io::ErrorKind::StorageFull {
                let _ = fs::remove_file(self.dirs[i].dir.join(BOOT_FILE));
            }
            if let Some(listener) = self
                .on_failure
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .as_ref()
            {
                listener(i);
            }
        }
        true
    }

    /// Whether directory `i` is offline.
    pub fn is_offline(&self, i: usize) -> bool {
        self.dirs
            .get(i)
            .is_some_and(|d| d.offline.load(Ordering::SeqCst))
    }

    /// Whether every directory is offline (the broker can hold no replica any more).
    pub fn all_offline(&self) -> bool {
        (0..self.dirs.len()).all(|i| self.is_offline(i))
    }

    /// The index of the directory `tp`'s log is in.
    pub fn index_of(&self, tp: &TopicPartition) -> Option<usize> {
        self.logs().get(tp).map(|(i, _)| *i)
    }

    /// Forget the logs of offline directory `i` (their files are left as they are) and
    /// return their partitions.
    pub fn forget_offline(&self, i: usize) -> Vec<TopicPartition> {
        let mut logs = self.logs();
        let gone: Vec<TopicPartition> = logs
            .iter()
            .filter(|(_, (d, _))| *d == i)
            .map(|(tp, _)| tp.clone())
            .collect();
        for tp in &gone {
            logs.remove(tp);
        }
        gone
    }

    /// `result`, after taking its directory offline if it is an I/O error.
    fn seen<T>(&self, result: Result<T, LogError>) -> Result<T, LogError> {
        if let Err(e) = &result {
            self.fail_on(e);
        }
        result
    }

    /// The first log directory (where the metadata log lives unless configured elsewhere).
    pub fn dir(&self) -> &Path {
        &self.dirs[0].dir
    }

    /// Every log directory, in `log.dirs` order, as clients name it (absolute, canonical).
    pub fn dirs(&self) -> Vec<&Path> {
        self.dirs.iter().map(|d| d.name.as_path()).collect()
    }

    /// The directory `tp`'s log is in, named as [`LogManager::dirs`] names it.
    pub fn dir_of(&self, tp: &TopicPartition) -> Option<&Path> {
        let i = self.logs().get(tp).map(|(i, _)| *i)?;
        Some(&self.dirs[i].name)
    }

    /// Whether the files in `dirs` hold everything the last process wrote to them, looked
    /// at before they are opened (opening removes the clean-shutdown marker): a broker says
    /// so when it registers, and one that cannot may have lost writes it had not fsynced
    /// (KIP-966's unclean shutdown, which keeps it from leading). True after a clean
    /// shutdown (every directory has the marker, as Kafka decides), and also after a
    /// process that stopped while the machine kept running (kill -9, a fatal error): every
    /// directory names `boot` (see [`Self::mark_boot`]), the machine boot this process runs
    /// in, so the page cache still holds what it wrote. A directory whose I/O failed
    /// forgets its boot (a failed write-back may have dropped pages).
    pub fn previous_writes_intact(dirs: &[PathBuf], boot: Option<&str>) -> bool {
        if dirs.is_empty() {
            return false;
        }
        if dirs.iter().all(|d| d.join(CLEAN_SHUTDOWN_FILE).exists()) {
            return true;
        }
        boot.is_some_and(|boot| {
            dirs.iter()
                .all(|d| fs::read_to_string(d.join(BOOT_FILE)).is_ok_and(|b| b.trim() == boot))
        })
    }

    /// Write the machine boot this process runs in into every directory, durably (see
    /// [`Self::previous_writes_intact`]).
    pub fn mark_boot(&self, boot: &str) -> Result<(), LogError> {
        for d in &self.dirs {
            let path = d.dir.join(BOOT_FILE);
            checkpoint::write_atomically(&path, boot.as_bytes())?;
        }
        Ok(())
    }

    /// Forget the machine boot in every directory (best effort): the next start counts as
    /// unclean.
    pub fn forget_boot(&self) {
        for d in &self.dirs {
            let _ = fs::remove_file(d.dir.join(BOOT_FILE));
        }
    }

    /// Whether every directory was shut down cleanly last time.
    pub fn had_clean_shutdown(&self) -> bool {
        self.dirs.iter().all(|d| d.had_clean_shutdown)
    }

    fn logs(&self) -> std::sync::MutexGuard<'_, HashMap<TopicPartition, (usize, SharedLog)>> {
        self.logs
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Partition directories on disk, in every log directory. Directories left by an
    /// interrupted delete are removed. The same partition in two directories is an error
    /// (as in Kafka): which copy is right cannot be told.
    pub fn scan(&self) -> Result<Vec<FoundLog>, LogError> {
        self.settle_moves()?;
        let mut found: Vec<FoundLog> = Vec::new();
        let mut seen: HashMap<TopicPartition, PathBuf> = HashMap::new();
        for d in &self.dirs {
            for entry in fs::read_dir(&d.dir).at(&d.dir)? {
                let entry = entry.at(&d.dir)?;
                if !entry.file_type().at(&entry.path())?.is_dir() {
                    continue;
                }
                let name = entry.file_name().to_string_lossy().into_owned();
                if name.ends_with(DELETE_SUFFIX) {
                    info!(dir = %name, "removing a partially deleted log");
                    fs::remove_dir_all(entry.path()).at(&entry.path())?;
                    continue;
                }
                if name == METADATA_LOG_DIR
                    || name == REMOTE_CACHE_DIR
                    || name == DISKLESS_CACHE_DIR
                {
                    continue;
                }
                let Some(tp) = TopicPartition::parse_dir_name(&name) else {
                    warn!(dir = %name, "ignoring a directory that is not a partition log");
                    continue;
                };
                if let Some(other) = seen.insert(tp.clone(), entry.path()) {
                    return Err(LogError::io(
                        entry.path(),
                        std::io::Error::other(format!(
                            "duplicate log directories for {tp}: {} and {}; remove the one that is not current",
                            other.display(),
                            entry.path().display()
                        )),
                    ));
                }
                let topic_id = checkpoint::read_partition_metadata(&entry.path())?;
                found.push(FoundLog { tp, topic_id });
            }
        }
        Ok(found)
    }

    /// Finish or drop moves a crash interrupted: a future log whose partition has no
    /// current log anywhere was complete (the current one had been renamed away to be
    /// deleted) and becomes the current one; any other future log is removed.
    fn settle_moves(&self) -> Result<(), LogError> {
        for d in &self.dirs {
            for entry in fs::read_dir(&d.dir).at(&d.dir)? {
                let entry = entry.at(&d.dir)?;
                let name = entry.file_name().to_string_lossy().into_owned();
                let Some(tp) = name
                    .strip_suffix(FUTURE_SUFFIX)
                    .and_then(|n| n.rsplit_once('.'))
                    .and_then(|(tp, _)| TopicPartition::parse_dir_name(tp))
                else {
                    continue;
                };
                if self.on_disk(&tp).is_none() {
                    let to = d.dir.join(tp.dir_name());
                    info!(partition = %tp, dir = %d.dir.display(), "completing a log move a crash interrupted");
                    fs::rename(entry.path(), &to).at(&to)?;
                    checkpoint::sync_dir(&d.dir)?;
                } else {
                    info!(partition = %tp, dir = %d.dir.display(), "removing an unfinished copy of a moving log");
                    fs::remove_dir_all(entry.path()).at(&entry.path())?;
                }
            }
        }
        Ok(())
    }

    /// The index of the directory `path` names (as `log.dirs` lists it), if it is one.
    pub fn dir_index(&self, path: &Path) -> Option<usize> {
        let path = fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
        self.dirs.iter().position(|d| d.name == path)
    }

    /// Partitions being moved, with the directory each goes to.
    pub fn moving(&self) -> Vec<(TopicPartition, &Path)> {
        self.moving
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .iter()
            .map(|(tp, i)| (tp.clone(), self.dirs[*i].name.as_path()))
            .collect()
    }

    /// Create `tp`'s log in directory `dir` when it comes (it is not here yet).
    pub fn prefer(&self, tp: &TopicPartition, dir: usize) {
        self.preferred
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(tp.clone(), dir);
    }

    /// Start moving `tp`'s log to directory `to`; false when it is already there or on its
    /// way there (nothing to start).
    pub fn begin_move(&self, tp: &TopicPartition, to: usize) -> bool {
        if self.logs().get(tp).is_some_and(|(i, _)| *i == to) {
            return false;
        }
        let mut moving = self
            .moving
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if moving.get(tp) == Some(&to) {
            return false;
        }
        moving.insert(tp.clone(), to);
        true
    }

    /// Move `tp`'s log to the directory [`LogManager::begin_move`] named (AlterReplicaLogDirs),
    /// while the partition keeps serving: its files are copied to a future log there, then,
    /// with the log's lock held, what changed meanwhile is copied again, the current log is
    /// renamed away, the future log takes its name and is opened in its place, and the old
    /// copy is deleted. A crash at any point leaves one whole copy (see `settle_moves`).
    pub fn move_log(&self, tp: &TopicPartition, now_ms: i64) -> Result<(), LogError> {
        let result = self.seen(self.move_log_inner(tp, now_ms));
        self.moving
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .remove(tp);
        result
    }

    fn move_log_inner(&self, tp: &TopicPartition, now_ms: i64) -> Result<(), LogError> {
        let Some(to) = self
            .moving
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(tp)
            .copied()
        else {
            return Ok(());
        };
        let Some((from, shared)) = self.logs().get(tp).map(|(i, l)| (*i, Arc::clone(l))) else {
            return Ok(());
        };
        if from == to {
            return Ok(());
        }
        let (src_root, dst_root) = (&self.dirs[from].dir, &self.dirs[to].dir);
        let src = src_root.join(tp.dir_name());
        let n = self.delete_counter.fetch_add(1, Ordering::Relaxed);
        let future = dst_root.join(format!(
            "{}.{}-{n}{FUTURE_SUFFIX}",
            tp.dir_name(),
            std::process::id()
        ));
        fs::create_dir_all(&future).at(&future)?;
        let mut copied = HashMap::new();
        // Without the lock: the bulk of the data.
        if let Err(e) = sync_files(&src, &future, &mut copied, |_| false) {
            let _ = fs::remove_dir_all(&future);
            return Err(e);
        }
        let mut log = lock_write(&shared);
        let io = log.take_pending_io();
        if let Err(e) = io.run() {
            let _ = fs::remove_dir_all(&future);
            return Err(e);
        }
        log.complete_io(&io);
        let (config, recovery_point, log_start_offset) = (
            log.config().clone(),
            log.recovery_point(),
            log.log_start_offset(),
        );
        // `clean`: closed whole (indexes trimmed, producer state written).
        let reopen = |dir: &Path, clean: bool| {
            Log::open(
                dir,
                tp.clone(),
                config.clone(),
                OpenOptions {
                    clean_shutdown: clean,
                    recovery_point,
                    log_start_offset,
                    now_ms,
                },
            )
        };
        if let Err(e) = log.close(now_ms) {
            let _ = fs::remove_dir_all(&future);
            *log = reopen(&src, false)?;
            return Err(e);
        }
        let doomed = src_root.join(format!(
            "{}.{}-{n}{DELETE_SUFFIX}",
            tp.dir_name(),
            std::process::id()
        ));
        let dst = dst_root.join(tp.dir_name());
        // With it: what changed, and the indexes written through memory maps; then the swap.
        let mut swap = || -> Result<(), LogError> {
            sync_files(&src, &future, &mut copied, |name| {
                name.ends_with(".index") || name.ends_with(".timeindex")
            })?;
            sync_all(&future)?;
            fs::rename(&src, &doomed).at(&src)?;
            checkpoint::sync_dir(src_root)?;
            fs::rename(&future, &dst).at(&dst)?;
            checkpoint::sync_dir(dst_root)
        };
        if let Err(e) = swap() {
            // Back where it was: the current log under its name, no future copy.
            if !src.exists() && doomed.exists() {
                fs::rename(&doomed, &src).at(&src)?;
            }
            let _ = fs::remove_dir_all(&future);
            *log = reopen(&src, true)?;
            return Err(e);
        }
        *log = reopen(&dst, true)?;
        self.logs().insert(tp.clone(), (to, Arc::clone(&shared)));
        drop(log);
        if let Some(clean) = self.dirs[from].cleaned_up_to().remove(tp) {
            self.dirs[to].cleaned_up_to().insert(tp.clone(), clean);
        }
        fs::remove_dir_all(&doomed).at(&doomed)?;
        info!(partition = %tp, from = %src_root.display(), to = %dst_root.display(), "moved partition log");
        Ok(())
    }

    /// The index of the directory holding `tp` on disk, if any.
    fn on_disk(&self, tp: &TopicPartition) -> Option<usize> {
        self.dirs
            .iter()
            .position(|d| !d.offline.load(Ordering::SeqCst) && d.dir.join(tp.dir_name()).exists())
    }

    /// Open an existing partition log found by [`LogManager::scan`].
    pub fn load(
        &self,
        tp: &TopicPartition,
        config: LogConfig,
        now_ms: i64,
    ) -> Result<SharedLog, LogError> {
        let i = self.on_disk(tp).unwrap_or(0);
        let d = &self.dirs[i];
        let opts = OpenOptions {
            clean_shutdown: d.had_clean_shutdown,
            recovery_point: d.recovery_points.get(tp).copied().unwrap_or(0),
            log_start_offset: d.log_start_offsets.get(tp).copied().unwrap_or(0),
            now_ms,
        };
        let log = Log::open(&d.dir.join(tp.dir_name()), tp.clone(), config, opts)?;
        let shared = Arc::new(RwLock::new(log));
        self.logs().insert(tp.clone(), (i, Arc::clone(&shared)));
        Ok(shared)
    }

    /// The directory a new log goes to: the one asked for, else the one with the fewest
    /// logs, the first on a tie; never an offline one (None: every one is).
    fn place(&self, tp: &TopicPartition) -> Option<usize> {
        if let Some(i) = self
            .preferred
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .remove(tp)
        {
            if !self.is_offline(i) {
                return Some(i);
            }
        }
        let logs = self.logs();
        (0..self.dirs.len())
            .filter(|i| !self.is_offline(*i))
            .min_by_key(|i| logs.values().filter(|(d, _)| d == i).count())
    }

    /// The log of `tp`, creating an empty one if there is none.
    pub fn get_or_create(
        &self,
        tp: &TopicPartition,
        topic_id: [u8; 16],
        config: LogConfig,
        now_ms: i64,
    ) -> Result<SharedLog, LogError> {
        if let Some(log) = self.get(tp) {
            return Ok(log);
        }
        let log = if self.on_disk(tp).is_some() {
            self.load(tp, config, now_ms)?
        } else {
            let Some(i) = self.place(tp) else {
                return Err(LogError::io(
                    &self.dirs[0].dir,
                    std::io::Error::other("every log directory is offline"),
                ));
            };
            let log = Arc::new(RwLock::new(self.seen(Log::create(
                &self.dirs[i].dir,
                tp.clone(),
                topic_id,
                config,
                now_ms,
            ))?));
            self.logs().insert(tp.clone(), (i, Arc::clone(&log)));
            log
        };
        Ok(log)
    }

    pub fn get(&self, tp: &TopicPartition) -> Option<SharedLog> {
        self.logs().get(tp).map(|(_, l)| Arc::clone(l))
    }

    /// Every log of the directories that are online.
    pub fn all(&self) -> Vec<(TopicPartition, SharedLog)> {
        self.logs()
            .iter()
            .filter(|(_, (d, _))| !self.is_offline(*d))
            .map(|(k, (_, v))| (k.clone(), Arc::clone(v)))
            .collect()
    }

    /// The logs of directory `i`.
    fn all_in(&self, i: usize) -> Vec<(TopicPartition, SharedLog)> {
        self.logs()
            .iter()
            .filter(|(_, (d, _))| *d == i)
            .map(|(k, (_, v))| (k.clone(), Arc::clone(v)))
            .collect()
    }

    /// Remove a partition's log: rename its directory out of the way (so a crash midway
    /// cannot resurrect it), then delete it.
    pub fn delete(&self, tp: &TopicPartition) -> Result<(), LogError> {
        let entry = self.logs().remove(tp);
        let i = entry
            .as_ref()
            .map(|(i, _)| *i)
            .or_else(|| self.on_disk(tp))
            .unwrap_or(0);
        drop(entry);
        if self.is_offline(i) {
            // Its files stay until the directory is back (and the replica is found a stray).
            return Ok(());
        }
        let d = &self.dirs[i];
        d.cleaned_up_to().remove(tp);
        let dir = d.dir.join(tp.dir_name());
        if !dir.exists() {
            return Ok(());
        }
        let n = self.delete_counter.fetch_add(1, Ordering::Relaxed);
        let doomed = d.dir.join(format!(
            "{}.{}-{}{}",
            tp.dir_name(),
            std::process::id(),
            n,
            DELETE_SUFFIX
        ));
        self.seen(fs::rename(&dir, &doomed).at(&dir))?;
        self.seen(checkpoint::sync_dir(&d.dir))?;
        self.seen(fs::remove_dir_all(&doomed).at(&doomed))?;
        info!(partition = %tp, "deleted partition log");
        Ok(())
    }

    /// Write each directory's recovery-point and log-start-offset checkpoints.
    pub fn checkpoint(&self) -> Result<(), LogError> {
        let mut result = Ok(());
        for (i, d) in self.dirs.iter().enumerate() {
            if self.is_offline(i) {
                continue;
            }
            let mut recovery = BTreeMap::new();
            let mut starts = BTreeMap::new();
            for (tp, log) in self.all_in(i) {
                let log = lock_read(&log);
                recovery.insert(tp.clone(), log.recovery_point());
                starts.insert(tp, log.log_start_offset());
            }
            let written =
                checkpoint::write_offsets(&d.dir.join(RECOVERY_POINT_CHECKPOINT), &recovery)
                    .and_then(|()| {
                        checkpoint::write_offsets(&d.dir.join(LOG_START_OFFSET_CHECKPOINT), &starts)
                    });
            // One directory failing takes only itself offline; the others are still written.
            if let Err(e) = self.seen(written) {
                result = Err(e);
            }
        }
        result
    }

    /// One retention pass over every log; `upper_bound` gives each partition's high
    /// watermark. Returns segments deleted.
    pub fn cleanup(&self, now_ms: i64, upper_bound: impl Fn(&TopicPartition) -> i64) -> usize {
        let mut deleted = 0;
        for (tp, log) in self.all() {
            let bound = upper_bound(&tp);
            let (result, io) = {
                let mut l = lock_write(&log);
                (l.delete_old_segments(bound, now_ms), l.take_pending_io())
            };
            match self.seen(result.and_then(|n| run_pending_io(&log, io).map(|()| n))) {
                Ok(n) => deleted += n,
                Err(e) => warn!(partition = %tp, error = %e, "retention failed"),
            }
        }
        deleted
    }

    /// One cleaner pass: compact every `cleanup.policy=compact` log whose dirty ratio reached
    /// `min.cleanable.dirty.ratio`. The log's lock is held only to plan and to swap files.
    /// Returns the number of logs cleaned.
    pub fn clean(&self, now_ms: i64) -> usize {
        let mut cleaned = 0;
        for (i, d) in self.dirs.iter().enumerate() {
            if self.is_offline(i) {
                continue;
            }
            let mut cleaned_here = 0;
            for (tp, log) in self.all_in(i) {
                let first_dirty = d.cleaned_up_to().get(&tp).copied().unwrap_or(0);
                let input = {
                    let l = lock_read(&log);
                    if !l.config().cleanup_compact
                        || l.dirty_ratio(first_dirty) < l.config().min_cleanable_dirty_ratio
                    {
                        continue;
                    }
                    l.compaction_input(first_dirty, now_ms)
                };
                let Some(input) = input else { continue };
                let result = crate::cleaner::compact(&input, now_ms).and_then(|output| {
                    lock_write(&log)
                        .install_compacted(&input, &output, now_ms)
                        .map(|()| output)
                });
                match self.seen(result) {
                    Ok(output) => {
                        info!(partition = %tp, records_removed = output.records_removed, cleaned_up_to = output.cleaned_up_to, "compacted log");
                        d.cleaned_up_to().insert(tp, output.cleaned_up_to);
                        cleaned_here += 1;
                    }
                    Err(e) => warn!(partition = %tp, error = %e, "compaction failed"),
                }
            }
            if cleaned_here > 0 {
                let snapshot = d.cleaned_up_to().clone();
                if let Err(e) = self.seen(checkpoint::write_offsets(
                    &d.dir.join(CLEANER_OFFSET_CHECKPOINT),
                    &snapshot,
                )) {
                    warn!(error = %e, "cannot write the cleaner checkpoint");
                }
            }
            cleaned += cleaned_here;
        }
        cleaned
    }

    /// fsync logs whose `flush.ms` is due, and whatever disk work earlier changes left; the
    /// fsyncs run without the logs' locks.
    pub fn flush_due(&self, now_ms: i64) {
        for (tp, log) in self.all() {
            let io = {
                let mut l = lock_write(&log);
                if l.flush_due(now_ms) {
                    l.plan_flush(now_ms);
                }
                l.take_pending_io()
            };
            if let Err(e) = self.seen(run_pending_io(&log, io)) {
                warn!(partition = %tp, error = %e, "scheduled flush failed");
            }
        }
    }

    /// Close every log, write the checkpoints and then each directory's clean-shutdown
    /// marker. An offline directory gets none of it: its logs are recovered at the next start.
    pub fn shutdown(&self, now_ms: i64) -> Result<(), LogError> {
        for (tp, log) in self.all() {
            lock_write(&log)
                .close(now_ms)
                .inspect_err(|e| warn!(partition = %tp, error = %e, "close failed"))?;
        }
        self.checkpoint()?;
        for d in self
            .dirs
            .iter()
            .filter(|d| !d.offline.load(Ordering::SeqCst))
        {
            let marker = d.dir.join(CLEAN_SHUTDOWN_FILE);
            fs::write(&marker, b"").at(&marker)?;
            checkpoint::sync_dir(&d.dir)?;
        }
        Ok(())
    }
}
