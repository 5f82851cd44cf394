//! Delayed operations (Kafka's `DelayedOperationPurgatory`): a request that cannot be
//! answered yet — an acks=all produce waiting for its high watermark, a fetch waiting for
//! `min_bytes` — parks on the partitions it depends on and is re-examined only when one of
//! them changes (log end, high watermark, leadership, truncation), or answered at its
//! deadline.
//!
//! Each partition has [`Watchers`]: the parked operations watching it and a version that
//! every change bumps, so an operation watching many partitions can tell which of them moved
//! since it last looked. An operation registers once; firing keeps the registration (a
//! `Notify` permit is stored, so a change between two looks is never lost), and the
//! registration dies with the operation.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};

use tokio::sync::Notify;
use tokio::time::Instant;

/// The operations parked on one partition, and how often it changed.
#[derive(Default)]
pub struct Watchers {
    parked: Mutex<Vec<Weak<Notify>>>,
    version: AtomicU64,
}

impl Watchers {
    /// Changes so far; compare two reads to know whether the partition moved in between.
    pub fn version(&self) -> u64 {
        self.version.load(Ordering::Acquire)
    }

    fn watch(&self, op: &Arc<Notify>) {
        let mut parked = self
            .parked
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        parked.retain(|w| w.strong_count() > 0);
        parked.push(Arc::downgrade(op));
    }

    /// The partition changed: every operation parked on it takes another look.
    pub fn fire(&self) {
        self.version.fetch_add(1, Ordering::AcqRel);
        let parked = self
            .parked
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        for w in parked.iter() {
            if let Some(n) = w.upgrade() {
                n.notify_one();
            }
        }
    }

    /// Operations currently watching (for tests).
    pub fn watching(&self) -> usize {
        self.parked
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .iter()
            .filter(|w| w.strong_count() > 0)
            .count()
    }
}

/// One kind of delayed operation (produce, fetch), counted in `sluice_purgatory_size{kind}`
/// while parked.
pub struct Purgatory {
    parked: metrics::Gauge,
}

/// Whether the deadline passed when an operation was last examined.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Look {
    /// A change (or the first look): complete only if the operation can.
    Changed,
    /// The deadline passed: complete now with what there is.
    Expired,
}

impl Purgatory {
    pub fn new(kind: &'static str) -> Self {
        let parked = metrics::gauge!("sluice_purgatory_size", "kind" => kind);
        // Present from startup, at 0, so a scrape always finds it.
        parked.increment(0.0);
        Self { parked }
    }

    /// Complete an operation: `try_complete` looks right away and again whenever one of the
    /// `watched` partitions changes, until it returns a result; at `deadline` it is given
    /// [`Look::Expired`] and must return one.
    pub async fn run<'a, T>(
        &self,
        watched: impl IntoIterator<Item = &'a Watchers>,
        deadline: Instant,
        mut try_complete: impl FnMut(Look) -> Option<T>,
    ) -> T {
        let op = Arc::new(Notify::new());
        // Registered before the first look, so no change after it is missed.
        for w in watched {
            w.watch(&op);
        }
        if let Some(done) = try_complete(Look::Changed) {
            return done;
        }
        let _parked = Parked::new(&self.parked);
        loop {
            if tokio::time::timeout_at(deadline, op.notified())
                .await
                .is_err()
            {
                if let Some(done) = try_complete(Look::Expired) {
                    return done;
                }
                // An operation that cannot answer even at its deadline is a bug; keep it
                // answerable rather than spinning.
                debug_assert!(false, "a delayed operation declined to expire");
                tokio::time::sleep(std::time::Duration::from_millis(10)).await;
                continue;
            }
            if let Some(done) = try_complete(Look::Changed) {
                return done;
            }
        }
    }
}

/// Counts one parked operation while alive.
struct Parked<'a>(&'a metrics::Gauge);

impl<'a> Parked<'a> {
    fn new(g: &'a metrics::Gauge) -> Self {
        g.increment(1.0);
        Parked(g)
    }
}

impl Drop for Parked<'_> {
    fn drop(&mut self) {
        self.0.decrement(1.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;
    use std::time::Duration;

    #[tokio::test]
    async fn completes_on_a_change_and_looks_only_then() {
        let p = Purgatory::new("test");
        let a = Arc::new(Watchers::default());
        let b = Arc::new(Watchers::default());
        let looks = Arc::new(AtomicUsize::new(0));
        let ready = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let op = {
            let (a, b, looks, ready) = (a.clone(), b.clone(), looks.clone(), ready.clone());
            tokio::spawn(async move {
                let deadline = Instant::now() + Duration::from_secs(30);
                p.run([&*a, &*b], deadline, |look| {
                    looks.fetch_add(1, Ordering::SeqCst);
                    (look == Look::Expired || ready.load(Ordering::SeqCst)).then_some(look)
                })
                .await
            })
        };
        while a.watching() == 0 || b.watching() == 0 {
            tokio::task::yield_now().await;
        }
        // A change that does not complete it: one more look.
        let before = looks.load(Ordering::SeqCst);
        b.fire();
        while looks.load(Ordering::SeqCst) == before {
            tokio::task::yield_now().await;
        }
        ready.store(true, Ordering::SeqCst);
        a.fire();
        assert_eq!(op.await.unwrap(), Look::Changed);
        assert_eq!(a.version(), 1);
        // Done: its registrations are gone.
        assert_eq!(a.watching() + b.watching(), 0);
    }

    #[tokio::test]
    async fn expires_at_its_deadline() {
        let p = Purgatory::new("test");
        let w = Watchers::default();
        let deadline = Instant::now() + Duration::from_millis(20);
        let look = p
            .run([&w], deadline, |look| {
                (look == Look::Expired).then_some(look)
            })
            .await;
        assert_eq!(look, Look::Expired);
        assert!(Instant::now() >= deadline);
    }
}
