//! The record accumulator: per-partition queues of open batches. `send` appends under a short
//! lock; the sender drains batches that are full, have waited `linger.ms`, or must go now
//! (flush/close), skipping partitions that already have a batch in flight.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use sluice_protocol::batch::BatchBuilder;
use sluice_protocol::types::TopicPartition;

use super::partitioner::{for_key, random_start};
use super::{BatchOutcome, DeliveryFuture, ProducerRecord};
use crate::config::{ClientConfig, PartitionerKind};
use crate::error::Error;

/// One batch on its way: the records, who waits for them, and its retry state.
pub struct ProducerBatch {
    pub tp: TopicPartition,
    pub builder: BatchBuilder,
    pub created: Instant,
    pub(crate) outcome: Arc<BatchOutcome>,
    /// Bytes of `buffer.memory` this batch holds.
    pub reserved_bytes: usize,
    pub attempts: u32,
    pub retry_at: Option<Instant>,
    /// Per-record timestamps, for acknowledgement callbacks.
    pub timestamps: Vec<i64>,
    /// Idempotence: the producer id, epoch and first sequence this batch was given when it
    /// was first sent; retries resend it unchanged so the broker can recognise them.
    pub sequence: Option<(i64, i16, i32)>,
}

impl ProducerBatch {
    pub(crate) fn complete(&self, result: crate::error::Result<(i64, i64)>) {
        self.outcome.complete(result);
    }
}

impl Drop for ProducerBatch {
    fn drop(&mut self) {
        // A batch dropped without an answer (producer dropped, task aborted) fails its
        // records instead of leaving their futures hanging.
        self.outcome.complete(Err(Error::Closed));
    }
}

#[derive(Default)]
struct PartitionQueue {
    batches: VecDeque<ProducerBatch>,
    in_flight: bool,
}

pub struct Accumulator {
    topics: HashMap<String, Vec<PartitionQueue>>,
    sticky: HashMap<String, i32>,
    round_robin: u32,
    kind: PartitionerKind,
    /// Batches queued or in flight: zero means flushed.
    pending: usize,
}

impl Accumulator {
    pub fn new(kind: PartitionerKind) -> Self {
        Self {
            topics: HashMap::new(),
            sticky: HashMap::new(),
            round_robin: 0,
            kind,
            pending: 0,
        }
    }

    pub fn is_idle(&self) -> bool {
        self.pending == 0
    }

    fn keyless_partition(&mut self, topic: &str, partitions: i32) -> i32 {
        match self.kind {
            PartitionerKind::RoundRobin => {
                self.round_robin = self.round_robin.wrapping_add(1);
                (self.round_robin % partitions as u32) as i32
            }
            PartitionerKind::Default => {
                if let Some(p) = self.sticky.get(topic).copied().filter(|p| *p < partitions) {
                    return p;
                }
                let p = random_start(partitions);
                self.sticky.insert(topic.to_string(), p);
                p
            }
        }
    }

    /// Append a record; returns its delivery future and whether a batch is ready to send.
    pub(crate) fn append(
        &mut self,
        record: ProducerRecord,
        partition: Option<i32>,
        partitions: i32,
        timestamp: i64,
        size: usize,
        config: &ClientConfig,
    ) -> (DeliveryFuture, bool) {
        let keyless = partition.is_none() && record.key.is_none();
        let topic: &str = &record.topic;
        let partition = match (partition, &record.key) {
            (Some(p), _) => p,
            (None, Some(k)) => for_key(k, partitions),
            (None, None) => self.keyless_partition(topic, partitions),
        };
        if !self.topics.contains_key(topic) {
            self.topics.insert(topic.to_string(), Vec::new());
        }
        let queues = self.topics.get_mut(topic).expect("inserted above");
        if queues.len() < partitions as usize {
            queues.resize_with(partitions as usize, PartitionQueue::default);
        }
        let queue = &mut queues[partition as usize];
        // While the partition has a batch in flight, its open batch may grow past batch.size
        // (up to max.request.size): records pile up anyway, and one bigger batch keeps the
        // single in-flight slot busy with more data instead of many small round trips.
        let limit = if queue.in_flight {
            config
                .batch_size
                .max(config.max_request_size.saturating_sub(1024))
        } else {
            config.batch_size
        };
        let fits = queue
            .batches
            .back()
            .is_some_and(|b| b.attempts == 0 && b.builder.estimated_size() + size <= limit);
        let mut new_batch = false;
        if !fits {
            queue.batches.push_back(ProducerBatch {
                tp: TopicPartition::new(topic, partition),
                builder: BatchBuilder::new(config.compression),
                created: Instant::now(),
                outcome: Arc::new(BatchOutcome::new(Arc::clone(&record.topic), partition)),
                reserved_bytes: 0,
                attempts: 0,
                retry_at: None,
                timestamps: Vec::new(),
                sequence: None,
            });
            self.pending += 1;
            new_batch = true;
        }
        let batch = queue.batches.back_mut().expect("a batch was just ensured");
        let size_before = batch.builder.estimated_size();
        let headers: Vec<(&str, Option<&[u8]>)> = record
            .headers
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_deref()))
            .collect();
        batch.builder.append(
            timestamp,
            record.key.as_deref(),
            record.value.as_deref(),
            &headers,
        );
        batch.reserved_bytes += size;
        batch.timestamps.push(timestamp);
        let index = i64::from(batch.builder.record_count() - 1);
        let future = DeliveryFuture {
            outcome: Arc::clone(&batch.outcome),
            index,
            timestamp,
        };
        // Wake the sender when it has something new to do: a new batch (to schedule its
        // linger deadline) or one that just filled up. A partition with a batch in flight
        // gets its turn when that answer arrives, which wakes the sender anyway.
        let filled =
            size_before < config.batch_size && batch.builder.estimated_size() >= config.batch_size;
        let ready = !queue.in_flight && (new_batch || filled);
        // KIP-480: a keyless record that opened a new batch moves the sticky partition on.
        if keyless
            && new_batch
            && queue.batches.len() > 1
            && self.kind == PartitionerKind::Default
            && partitions > 1
        {
            let next = (partition + 1 + random_start(partitions - 1)) % partitions;
            self.sticky.insert(topic.to_string(), next);
        }
        (future, ready)
    }

    /// Take the batches that should be sent now; also returns when to look again and the
    /// batches that ran out of `delivery.timeout.ms`.
    pub fn drain_ready(
        &mut self,
        now: Instant,
        linger: Duration,
        delivery_timeout: Duration,
        send_all: bool,
        batch_size: usize,
    ) -> (Vec<ProducerBatch>, Option<Instant>, Vec<ProducerBatch>) {
        let mut ready = Vec::new();
        let mut expired = Vec::new();
        let mut next: Option<Instant> = None;
        let mut soonest = |t: Instant| next = Some(next.map_or(t, |n: Instant| n.min(t)));
        for queues in self.topics.values_mut() {
            for q in queues.iter_mut() {
                while q
                    .batches
                    .front()
                    .is_some_and(|b| now >= b.created + delivery_timeout)
                    && !q.in_flight
                {
                    if let Some(b) = q.batches.pop_front() {
                        expired.push(b);
                    }
                }
                if q.in_flight {
                    continue;
                }
                let Some(front) = q.batches.front() else {
                    continue;
                };
                if let Some(at) = front.retry_at.filter(|at| *at > now) {
                    soonest(at);
                    continue;
                }
                let due = front.created + linger;
                let full = front.builder.estimated_size() >= batch_size;
                if send_all || full || q.batches.len() > 1 || now >= due || front.attempts > 0 {
                    if let Some(b) = q.batches.pop_front() {
                        q.in_flight = true;
                        ready.push(b);
                    }
                } else {
                    soonest(due);
                }
                if let Some(b) = q.batches.front() {
                    soonest(b.created + delivery_timeout);
                }
            }
        }
        // Expired batches still count as pending until `done` settles them.
        (ready, next, expired)
    }

    fn queue(&mut self, tp: &TopicPartition) -> Option<&mut PartitionQueue> {
        self.topics
            .get_mut(&tp.topic)?
            .get_mut(tp.partition.0 as usize)
    }

    /// A batch came back for another attempt: it goes first in its partition.
    pub fn requeue(&mut self, batch: ProducerBatch) {
        let tp = batch.tp.clone();
        if let Some(q) = self.queue(&tp) {
            q.in_flight = false;
            q.batches.push_front(batch);
        }
    }

    /// A batch is finished (acknowledged or failed for good). `in_flight`: it was the
    /// partition's batch in flight (not one that expired in the queue while another batch of
    /// the partition may be in flight).
    pub fn done(&mut self, tp: &TopicPartition, in_flight: bool) {
        if in_flight {
            if let Some(q) = self.queue(tp) {
                q.in_flight = false;
            }
        }
        self.pending = self.pending.saturating_sub(1);
    }

    /// Fail every queued batch (close/drop).
    pub fn fail_all(&mut self, error: Error) {
        for queues in self.topics.values_mut() {
            for q in queues.iter_mut() {
                for b in q.batches.drain(..) {
                    b.complete(Err(error.clone()));
                    self.pending = self.pending.saturating_sub(1);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;

    fn record() -> ProducerRecord {
        ProducerRecord::new("t").value(Bytes::from(vec![b'x'; 100]))
    }

    #[test]
    fn an_open_batch_grows_past_batch_size_while_its_partition_is_in_flight() {
        let config = ClientConfig::new("x:1");
        let mut acc = Accumulator::new(PartitionerKind::Default);
        let size = record().size_estimate();
        for _ in 0..200 {
            acc.append(record(), Some(0), 1, 0, size, &config);
        }
        let now = Instant::now();
        let (ready, _, _) = acc.drain_ready(
            now,
            config.linger,
            config.delivery_timeout,
            false,
            config.batch_size,
        );
        assert_eq!(ready.len(), 1, "the full first batch goes");
        // The partition is in flight: further records extend one open batch.
        for _ in 0..1000 {
            acc.append(record(), Some(0), 1, 0, size, &config);
        }
        let (none, _, _) = acc.drain_ready(
            now,
            config.linger,
            config.delivery_timeout,
            true,
            config.batch_size,
        );
        assert!(
            none.is_empty(),
            "nothing else goes while a batch is in flight"
        );
        acc.done(&TopicPartition::new("t", 0), true);
        let (next, _, _) = acc.drain_ready(
            now,
            config.linger,
            config.delivery_timeout,
            false,
            config.batch_size,
        );
        assert_eq!(next.len(), 1);
        assert!(
            next[0].builder.record_count() > 1000,
            "{}",
            next[0].builder.record_count()
        );
    }

    /// Found by the simulator (seed 13): a batch that expired in the queue was taken off the
    /// pending count twice (a debug build panicked on the subtraction; a release build would
    /// wrap it and `flush`/`close` would never see the producer idle) and cleared its
    /// partition's in-flight flag while the next batch was in flight.
    #[test]
    fn a_batch_expiring_in_the_queue_is_settled_once_and_leaves_the_batch_in_flight_alone() {
        let config = ClientConfig::new("x:1").set("batch.size", "1").unwrap();
        let mut acc = Accumulator::new(PartitionerKind::Default);
        let size = record().size_estimate();
        for _ in 0..3 {
            acc.append(record(), Some(0), 1, 0, size, &config);
        }
        let tp = TopicPartition::new("t", 0);
        let now = Instant::now();
        acc.queue(&tp).unwrap().batches[0].created =
            now - config.delivery_timeout - Duration::from_secs(1);
        let drain = |acc: &mut Accumulator| {
            acc.drain_ready(
                now,
                config.linger,
                config.delivery_timeout,
                false,
                config.batch_size,
            )
        };
        let (ready, _, expired) = drain(&mut acc);
        assert_eq!((ready.len(), expired.len()), (1, 1));
        acc.done(&tp, false);
        assert!(!acc.is_idle());
        let (ready, _, expired) = drain(&mut acc);
        assert!(
            ready.is_empty() && expired.is_empty(),
            "the second batch is still in flight"
        );
        acc.done(&tp, true);
        let (ready, _, _) = drain(&mut acc);
        assert_eq!(ready.len(), 1);
        assert!(!acc.is_idle());
        acc.done(&tp, true);
        assert!(acc.is_idle());
    }
}
