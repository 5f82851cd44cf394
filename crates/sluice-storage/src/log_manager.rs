//! [`LogManager`]: every partition log of one log directory, plus the directory-level files:
//! the recovery-point and log-start-offset checkpoints and the clean-shutdown marker.
//!
//! The marker (`.kafka_cleanshutdown`, as Kafka names it) is written last on a clean
//! shutdown and removed at startup, so its absence at the next start means "recover".

use std::collections::{BTreeMap, HashMap};
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use sluice_protocol::types::TopicPartition;
use tracing::{info, warn};

use crate::checkpoint;
use crate::config::LogConfig;
use crate::error::{IoContext, LogError};
use crate::log::{Log, OpenOptions};
use crate::pending_io::PendingIo;

pub const CLEAN_SHUTDOWN_FILE: &str = ".kafka_cleanshutdown";
pub const RECOVERY_POINT_CHECKPOINT: &str = "recovery-point-offset-checkpoint";
pub const LOG_START_OFFSET_CHECKPOINT: &str = "log-start-offset-checkpoint";
pub const CLEANER_OFFSET_CHECKPOINT: &str = "cleaner-offset-checkpoint";
/// Directory of the metadata log, which is not a partition of a user topic.
pub const METADATA_LOG_DIR: &str = "__cluster_metadata-0";
const DELETE_SUFFIX: &str = "-delete";

pub type SharedLog = Arc<RwLock<Log>>;

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

pub struct LogManager {
    dir: PathBuf,
    logs: Mutex<HashMap<TopicPartition, SharedLog>>,
    had_clean_shutdown: bool,
    recovery_points: HashMap<TopicPartition, i64>,
    log_start_offsets: HashMap<TopicPartition, i64>,
    /// How far each compacted log is clean (the cleaner's checkpoint).
    cleaned_up_to: Mutex<BTreeMap<TopicPartition, i64>>,
    delete_counter: AtomicU64,
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
    /// Open (creating if needed) a log directory and read its checkpoints.
    pub fn open(dir: &Path) -> Result<Self, LogError> {
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
            logs: Mutex::new(HashMap::new()),
            had_clean_shutdown,
            recovery_points: read_or_empty(RECOVERY_POINT_CHECKPOINT),
            log_start_offsets: read_or_empty(LOG_START_OFFSET_CHECKPOINT),
            cleaned_up_to: Mutex::new(
                read_or_empty(CLEANER_OFFSET_CHECKPOINT)
                    .into_iter()
                    .collect(),
            ),
            delete_counter: AtomicU64::new(0),
        })
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn had_clean_shutdown(&self) -> bool {
        self.had_clean_shutdown
    }

    fn logs(&self) -> std::sync::MutexGuard<'_, HashMap<TopicPartition, SharedLog>> {
        self.logs
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Partition directories on disk. Directories left by an interrupted delete are removed.
    pub fn scan(&self) -> Result<Vec<FoundLog>, LogError> {
        let mut found = Vec::new();
        for entry in fs::read_dir(&self.dir).at(&self.dir)? {
            let entry = entry.at(&self.dir)?;
            if !entry.file_type().at(&entry.path())?.is_dir() {
                continue;
            }
            let name = entry.file_name().to_string_lossy().into_owned();
            if name.ends_with(DELETE_SUFFIX) {
                info!(dir = %name, "removing a partially deleted log");
                fs::remove_dir_all(entry.path()).at(&entry.path())?;
                continue;
            }
            if name == METADATA_LOG_DIR {
                continue;
            }
            let Some(tp) = TopicPartition::parse_dir_name(&name) else {
                warn!(dir = %name, "ignoring a directory that is not a partition log");
                continue;
            };
            let topic_id = checkpoint::read_partition_metadata(&entry.path())?;
            found.push(FoundLog { tp, topic_id });
        }
        Ok(found)
    }

    /// Open an existing partition log found by [`LogManager::scan`].
    pub fn load(
        &self,
        tp: &TopicPartition,
        config: LogConfig,
        now_ms: i64,
    ) -> Result<SharedLog, LogError> {
        let opts = OpenOptions {
            clean_shutdown: self.had_clean_shutdown,
            recovery_point: self.recovery_points.get(tp).copied().unwrap_or(0),
            log_start_offset: self.log_start_offsets.get(tp).copied().unwrap_or(0),
            now_ms,
        };
        let log = Log::open(&self.dir.join(tp.dir_name()), tp.clone(), config, opts)?;
        let shared = Arc::new(RwLock::new(log));
        self.logs().insert(tp.clone(), Arc::clone(&shared));
        Ok(shared)
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
        let log = if self.dir.join(tp.dir_name()).exists() {
            self.load(tp, config, now_ms)?
        } else {
            let log = Arc::new(RwLock::new(Log::create(
                &self.dir,
                tp.clone(),
                topic_id,
                config,
                now_ms,
            )?));
            self.logs().insert(tp.clone(), Arc::clone(&log));
            log
        };
        Ok(log)
    }

    pub fn get(&self, tp: &TopicPartition) -> Option<SharedLog> {
        self.logs().get(tp).cloned()
    }

    pub fn all(&self) -> Vec<(TopicPartition, SharedLog)> {
        self.logs()
            .iter()
            .map(|(k, v)| (k.clone(), Arc::clone(v)))
            .collect()
    }

    /// Remove a partition's log: rename its directory out of the way (so a crash midway
    /// cannot resurrect it), then delete it.
    pub fn delete(&self, tp: &TopicPartition) -> Result<(), LogError> {
        self.cleaned_up_to
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .remove(tp);
        let log = self.logs().remove(tp);
        let dir = self.dir.join(tp.dir_name());
        drop(log);
        if !dir.exists() {
            return Ok(());
        }
        let n = self.delete_counter.fetch_add(1, Ordering::Relaxed);
        let doomed = self.dir.join(format!(
            "{}.{}-{}{}",
            tp.dir_name(),
            std::process::id(),
            n,
            DELETE_SUFFIX
        ));
        fs::rename(&dir, &doomed).at(&dir)?;
        checkpoint::sync_dir(&self.dir)?;
        fs::remove_dir_all(&doomed).at(&doomed)?;
        info!(partition = %tp, "deleted partition log");
        Ok(())
    }

    /// Write the recovery-point and log-start-offset checkpoints for every log.
    pub fn checkpoint(&self) -> Result<(), LogError> {
        let mut recovery = BTreeMap::new();
        let mut starts = BTreeMap::new();
        for (tp, log) in self.all() {
            let log = lock_read(&log);
            recovery.insert(tp.clone(), log.recovery_point());
            starts.insert(tp, log.log_start_offset());
        }
        checkpoint::write_offsets(&self.dir.join(RECOVERY_POINT_CHECKPOINT), &recovery)?;
        checkpoint::write_offsets(&self.dir.join(LOG_START_OFFSET_CHECKPOINT), &starts)
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
            match result.and_then(|n| run_pending_io(&log, io).map(|()| n)) {
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
        for (tp, log) in self.all() {
            let first_dirty = self
                .cleaned_up_to
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .get(&tp)
                .copied()
                .unwrap_or(0);
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
            match result {
                Ok(output) => {
                    info!(partition = %tp, records_removed = output.records_removed, cleaned_up_to = output.cleaned_up_to, "compacted log");
                    self.cleaned_up_to
                        .lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner)
                        .insert(tp, output.cleaned_up_to);
                    cleaned += 1;
                }
                Err(e) => warn!(partition = %tp, error = %e, "compaction failed"),
            }
        }
        if cleaned > 0 {
            let snapshot = self
                .cleaned_up_to
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .clone();
            if let Err(e) =
                checkpoint::write_offsets(&self.dir.join(CLEANER_OFFSET_CHECKPOINT), &snapshot)
            {
                warn!(error = %e, "cannot write the cleaner checkpoint");
            }
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
            if let Err(e) = run_pending_io(&log, io) {
                warn!(partition = %tp, error = %e, "scheduled flush failed");
            }
        }
    }

    /// Close every log, write the checkpoints and then the clean-shutdown marker.
    pub fn shutdown(&self, now_ms: i64) -> Result<(), LogError> {
        for (tp, log) in self.all() {
            lock_write(&log)
                .close(now_ms)
                .inspect_err(|e| warn!(partition = %tp, error = %e, "close failed"))?;
        }
        self.checkpoint()?;
        let marker = self.dir.join(CLEAN_SHUTDOWN_FILE);
        fs::write(&marker, b"").at(&marker)?;
        checkpoint::sync_dir(&self.dir)
    }
}
