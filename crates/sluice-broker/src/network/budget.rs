//! How much the broker holds of what clients sent: Kafka's `queued.max.requests` (requests
//! read and being worked on) and `queued.max.request.bytes` (their bytes). A connection
//! reserves a frame's size once it has read the frame's size prefix, before reading the rest;
//! while the budget is spent it reads nothing more, so clients wait in their sockets instead
//! of the broker growing. A reservation ends when its request no longer holds its bytes: at
//! the latest when the answer is ready, earlier when a handler parks the request (an acks=all
//! produce waiting for replicas, a long-poll fetch), so parked requests never starve the
//! fetches that would complete them.
//!
//! As in Kafka's memory pool, the byte budget is not strict: a frame is admitted while any
//! budget is left, so one frame may take it below zero (a frame larger than the whole
//! budget still gets through, alone). The request count is strict.

use std::sync::{Arc, Mutex};

use tokio::sync::Notify;

/// The broker-wide budget; shared by every connection.
pub struct RequestBudget {
    state: Mutex<State>,
    freed: Notify,
}

#[derive(Debug)]
struct State {
    /// Bytes still available; None: `queued.max.request.bytes` is -1 (no byte bound).
    bytes: Option<i64>,
    /// Requests that may still be admitted.
    requests: i64,
}

impl RequestBudget {
    /// `max_requests`: `queued.max.requests`; `max_bytes`: `queued.max.request.bytes`
    /// (non-positive: unbounded, Kafka's -1).
    pub fn new(max_requests: usize, max_bytes: i64) -> Arc<Self> {
        Arc::new(Self {
            state: Mutex::new(State {
                bytes: (max_bytes > 0).then_some(max_bytes),
                requests: max_requests.max(1) as i64,
            }),
            freed: Notify::new(),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn try_admit(&self, bytes: usize) -> bool {
        let mut s = self.lock();
        let bytes_ok = s.bytes.is_none_or(|b| b > 0);
        if !bytes_ok || s.requests <= 0 {
            return false;
        }
        s.requests -= 1;
        if let Some(b) = s.bytes.as_mut() {
            *b -= bytes as i64;
        }
        true
    }

    /// Wait until a request of `bytes` may be read.
    pub async fn admit(self: &Arc<Self>, bytes: usize) -> Reservation {
        loop {
            let freed = self.freed.notified();
            tokio::pin!(freed);
            freed.as_mut().enable();
            if self.try_admit(bytes) {
                return Reservation {
                    budget: Some(Arc::clone(self)),
                    bytes,
                };
            }
            freed.await;
        }
    }

    fn give_back(&self, bytes: usize) {
        {
            let mut s = self.lock();
            s.requests += 1;
            if let Some(b) = s.bytes.as_mut() {
                *b += bytes as i64;
            }
        }
        self.freed.notify_waiters();
    }

    /// (requests, bytes) still available (bytes None: unbounded), for tests and metrics.
    pub fn available(&self) -> (i64, Option<i64>) {
        let s = self.lock();
        (s.requests, s.bytes)
    }
}

/// One admitted request's share of the budget, given back once when released or dropped.
#[derive(Default)]
pub struct Reservation {
    budget: Option<Arc<RequestBudget>>,
    bytes: usize,
}

impl Reservation {
    pub fn release(&mut self) {
        if let Some(b) = self.budget.take() {
            b.give_back(self.bytes);
        }
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        self.release();
    }
}

impl std::fmt::Debug for Reservation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reservation")
            .field("bytes", &self.bytes)
            .field("held", &self.budget.is_some())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn bytes_are_admitted_while_any_are_left_and_requests_strictly() {
        let budget = RequestBudget::new(2, 100);
        let a = budget.admit(150).await; // over the whole budget, admitted alone
        assert_eq!(budget.available(), (1, Some(-50)));
        let blocked = tokio::time::timeout(Duration::from_millis(50), budget.admit(1)).await;
        assert!(blocked.is_err(), "no bytes left: the next frame waits");
        let waiter = {
            let budget = Arc::clone(&budget);
            tokio::spawn(async move { budget.admit(10).await })
        };
        drop(a);
        let b = waiter.await.unwrap();
        assert_eq!(budget.available(), (1, Some(90)));
        let c = budget.admit(10).await;
        // Two requests held: the third waits even though bytes are left.
        let third = tokio::time::timeout(Duration::from_millis(50), budget.admit(1)).await;
        assert!(third.is_err());
        let mut b = b;
        b.release();
        b.release(); // once only
        assert_eq!(budget.available(), (1, Some(90)));
        drop(c);
        assert_eq!(budget.available(), (2, Some(100)));
    }

    #[tokio::test]
    async fn unbounded_bytes_still_count_requests() {
        let budget = RequestBudget::new(1, -1);
        let a = budget.admit(1 << 30).await;
        assert_eq!(budget.available(), (0, None));
        drop(a);
        assert_eq!(budget.available(), (1, None));
    }
}
