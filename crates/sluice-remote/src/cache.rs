//! Bounded caches of what was read from the store, with single-flight fills: concurrent
//! readers of one key wait for the one fetch in flight instead of each asking the store.
//!
//! [`Lru`] holds values by key up to a total weight and evicts the least recently used.
//! Ranges of remote segments are cached as files on local disk ([`CachedRange`]: evicting
//! one unlinks its file, and a reader that still holds it keeps reading it, as the kernel
//! keeps an unlinked file's data while a descriptor is open); remote indexes are cached in
//! memory.

use std::collections::HashMap;
use std::fs::File;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::OnceCell;

use crate::error::RemoteError;

/// What an [`Lru`] holds: its weight, and what to do when evicted.
pub trait Weighed: Send + Sync {
    fn weight(&self) -> u64;
    fn evicted(&self) {}
}

impl Weighed for bytes::Bytes {
    fn weight(&self) -> u64 {
        self.len() as u64
    }
}

struct Slot<V> {
    cell: Arc<OnceCell<Arc<V>>>,
    last_used: u64,
    /// Its weight once filled and counted.
    counted: Option<u64>,
}

struct State<V> {
    slots: HashMap<String, Slot<V>>,
    weight: u64,
    tick: u64,
}

/// Values by key, at most `max_weight` in all (one value heavier than that is still kept
/// until the next fill).
pub struct Lru<V> {
    max_weight: u64,
    state: Mutex<State<V>>,
    fetches: AtomicU64,
}

impl<V: Weighed + 'static> Lru<V> {
    pub fn new(max_weight: u64) -> Self {
        Self {
            max_weight,
            state: Mutex::new(State {
                slots: HashMap::new(),
                weight: 0,
                tick: 0,
            }),
            fetches: AtomicU64::new(0),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State<V>> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The value at `key`, filled by `fill` when absent (once, however many ask at once).
    pub async fn get_or_fill<F, Fut>(&self, key: &str, fill: F) -> Result<Arc<V>, RemoteError>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<V, RemoteError>>,
    {
        let cell = {
            let mut s = self.lock();
            s.tick += 1;
            let tick = s.tick;
            let slot = s.slots.entry(key.to_string()).or_insert_with(|| Slot {
                cell: Arc::new(OnceCell::new()),
                last_used: tick,
                counted: None,
            });
            slot.last_used = tick;
            Arc::clone(&slot.cell)
        };
        let value = cell
            .get_or_try_init(|| async {
                self.fetches.fetch_add(1, Ordering::Relaxed);
                fill().await.map(Arc::new)
            })
            .await?
            .clone();
        self.count(key, &cell, value.weight());
        Ok(value)
    }

    /// Count a filled value once, then evict down to the limit (never `key` itself).
    fn count(&self, key: &str, cell: &Arc<OnceCell<Arc<V>>>, weight: u64) {
        let mut s = self.lock();
        let Some(slot) = s
            .slots
            .get_mut(key)
            .filter(|sl| Arc::ptr_eq(&sl.cell, cell))
        else {
            return;
        };
        if slot.counted.is_some() {
            return;
        }
        slot.counted = Some(weight);
        s.weight += weight;
        while s.weight > self.max_weight {
            let victim = s
                .slots
                .iter()
                .filter(|(k, sl)| k.as_str() != key && sl.counted.is_some())
                .min_by_key(|(_, sl)| sl.last_used)
                .map(|(k, _)| k.clone());
            let Some(victim) = victim else { break };
            if let Some(sl) = s.slots.remove(&victim) {
                s.weight -= sl.counted.unwrap_or(0);
                if let Some(v) = sl.cell.get() {
                    v.evicted();
                }
            }
        }
    }

    /// Total weight held.
    pub fn weight(&self) -> u64 {
        self.lock().weight
    }

    /// Fills started (each is one read of the store).
    pub fn fetches(&self) -> u64 {
        self.fetches.load(Ordering::Relaxed)
    }

    /// Forget every entry whose key starts with `prefix` (a deleted remote segment).
    pub fn forget_prefix(&self, prefix: &str) {
        let mut s = self.lock();
        let keys: Vec<String> = s
            .slots
            .keys()
            .filter(|k| k.starts_with(prefix))
            .cloned()
            .collect();
        for k in keys {
            if let Some(sl) = s.slots.remove(&k) {
                s.weight -= sl.counted.unwrap_or(0);
                if let Some(v) = sl.cell.get() {
                    v.evicted();
                }
            }
        }
    }
}

/// A cached range of a remote file, as a local file of its own, checked when it was filled.
pub struct CachedRange {
    pub file: Arc<File>,
    pub len: u64,
    path: PathBuf,
    /// The batches in it: (last offset, position in this file), in order.
    pub batches: Vec<(i64, u32)>,
}

impl Weighed for CachedRange {
    fn weight(&self) -> u64 {
        self.len
    }

    fn evicted(&self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Where cached ranges are written: a directory emptied when the broker starts.
pub struct CacheDir {
    dir: PathBuf,
    next: AtomicU64,
}

impl CacheDir {
    /// Empty (or create) `dir` for this process's cache.
    pub fn create(dir: &Path) -> Result<Self, RemoteError> {
        if dir.exists() {
            std::fs::remove_dir_all(dir).map_err(|e| RemoteError::io(dir, e))?;
        }
        std::fs::create_dir_all(dir).map_err(|e| RemoteError::io(dir, e))?;
        Ok(Self {
            dir: dir.to_path_buf(),
            next: AtomicU64::new(0),
        })
    }

    /// Write `bytes` to a new file of the cache.
    pub async fn store(
        &self,
        bytes: bytes::Bytes,
        batches: Vec<(i64, u32)>,
    ) -> Result<CachedRange, RemoteError> {
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        let path = self.dir.join(format!("{n:016x}.range"));
        let len = bytes.len() as u64;
        let written = path.clone();
        let file = sluice_rt::task::spawn_blocking(move || {
            std::fs::write(&written, &bytes)?;
            File::open(&written)
        })
        .await
        .map_err(|e| RemoteError::io(&path, std::io::Error::other(e)))?
        .map_err(|e| RemoteError::io(&path, e))?;
        Ok(CachedRange {
            file: Arc::new(file),
            len,
            path,
            batches,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;

    #[tokio::test]
    async fn concurrent_readers_of_a_key_fill_it_once_and_the_oldest_goes_first() {
        let lru: Arc<Lru<Bytes>> = Arc::new(Lru::new(10));
        let fill = || async {
            tokio::task::yield_now().await;
            Ok(Bytes::from_static(b"abcd"))
        };
        let (a, b) = tokio::join!(lru.get_or_fill("k1", fill), lru.get_or_fill("k1", fill));
        assert_eq!(a.unwrap(), b.unwrap());
        assert_eq!(lru.fetches(), 1);
        lru.get_or_fill("k2", fill).await.unwrap();
        assert_eq!(lru.weight(), 8);
        lru.get_or_fill("k1", fill).await.unwrap(); // k1 is now the most recent
        lru.get_or_fill("k3", fill).await.unwrap(); // 12 > 10: k2 goes
        assert_eq!(lru.weight(), 8);
        assert_eq!(lru.fetches(), 3);
        lru.get_or_fill("k1", fill).await.unwrap();
        assert_eq!(lru.fetches(), 3, "k1 stayed");
        lru.get_or_fill("k2", fill).await.unwrap();
        assert_eq!(lru.fetches(), 4, "k2 was evicted");
    }

    #[tokio::test]
    async fn a_failed_fill_is_retried_by_the_next_reader() {
        let lru: Lru<Bytes> = Lru::new(100);
        let e = lru
            .get_or_fill("k", || async { Err(RemoteError::Config("down".into())) })
            .await;
        assert!(e.is_err());
        let v = lru
            .get_or_fill("k", || async { Ok(Bytes::from_static(b"x")) })
            .await
            .unwrap();
        assert_eq!(&v[..], b"x");
    }

    #[tokio::test]
    async fn an_evicted_range_file_is_removed_but_readable_by_holders() {
        let dir = tempfile::tempdir().unwrap();
        let cache = CacheDir::create(&dir.path().join("c")).unwrap();
        let lru: Lru<CachedRange> = Lru::new(5);
        let first = lru
            .get_or_fill("a", || cache.store(Bytes::from_static(b"12345"), vec![]))
            .await
            .unwrap();
        lru.get_or_fill("b", || cache.store(Bytes::from_static(b"678"), vec![]))
            .await
            .unwrap();
        assert!(!first.path.exists());
        let mut buf = [0u8; 5];
        std::os::unix::fs::FileExt::read_exact_at(&*first.file, &mut buf, 0).unwrap();
        assert_eq!(&buf, b"12345");
    }
}
