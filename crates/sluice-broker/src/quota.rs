//! Client quotas (Kafka's ClientQuotaManager): produce and fetch byte rates and the request
//! time percentage, per user, client id, or (user, client id), with `<default>` entities, as
//! set by AlterClientQuotas and kept in cluster metadata.
//!
//! Each quota is measured over a sliding window (`quota.window.num` samples of
//! `quota.window.size.seconds`) shared by every connection the matched entity covers. When a
//! request takes the measured rate over the quota, its response carries `throttle_time_ms`
//! — how long the client must pause for the rate to fall back to the quota — and the broker
//! stops reading from that connection for as long (the connection is muted), so clients
//! that ignore the hint are slowed down too.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;

use sluice_metadata::image::QuotaEntity;
use sluice_metadata::MetadataImage;

/// What is measured.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum QuotaKind {
    /// `producer_byte_rate`: bytes of Produce requests per second.
    Produce,
    /// `consumer_byte_rate`: bytes of Fetch responses per second.
    Fetch,
    /// `request_percentage`: handling time, as a percentage of one thread's second.
    Request,
    /// `controller_mutation_rate`: partitions created or deleted per second (KIP-599),
    /// measured by a token bucket, not a rate (see [`QuotaManager::record_mutations`]).
    ControllerMutation,
}

impl QuotaKind {
    pub fn key(self) -> &'static str {
        match self {
            QuotaKind::Produce => "producer_byte_rate",
            QuotaKind::Fetch => "consumer_byte_rate",
            QuotaKind::Request => "request_percentage",
            QuotaKind::ControllerMutation => "controller_mutation_rate",
        }
    }
}

/// A rate over a sliding window of samples (Kafka's `Rate` with `SampledStat`).
#[derive(Debug)]
struct Rate {
    /// (sample start ms, value recorded in it)
    samples: VecDeque<(i64, f64)>,
}

impl Rate {
    fn new() -> Self {
        Self {
            samples: VecDeque::new(),
        }
    }

    fn record(&mut self, window: &Window, now_ms: i64, value: f64) {
        self.expire(window, now_ms);
        match self.samples.back_mut() {
            Some((start, v)) if now_ms - *start < window.size_ms => *v += value,
            _ => self.samples.push_back((now_ms, value)),
        }
    }

    fn expire(&mut self, window: &Window, now_ms: i64) {
        let horizon = window.size_ms * window.samples as i64;
        while self
            .samples
            .front()
            .is_some_and(|(start, _)| now_ms - start >= horizon)
        {
            self.samples.pop_front();
        }
    }

    /// The time the rate is measured over: since the oldest sample, but at least
    /// `samples - 1` whole windows (so one burst at the start is not an enormous rate).
    fn window_ms(&self, window: &Window, now_ms: i64) -> f64 {
        let oldest = self.samples.front().map_or(now_ms, |(s, _)| *s);
        let elapsed = (now_ms - oldest).max(0);
        let min = window.size_ms * (window.samples as i64 - 1).max(1);
        elapsed.max(min) as f64
    }

    /// Per second.
    fn rate(&self, window: &Window, now_ms: i64) -> f64 {
        let total: f64 = self.samples.iter().map(|(_, v)| v).sum();
        total * 1000.0 / self.window_ms(window, now_ms)
    }
}

/// `quota.window.num` × `quota.window.size.seconds`.
#[derive(Clone, Copy, Debug)]
pub struct Window {
    pub samples: usize,
    pub size_ms: i64,
}

impl From<sluice_metadata::config::QuotaWindow> for Window {
    fn from(w: sluice_metadata::config::QuotaWindow) -> Self {
        Self {
            samples: w.samples,
            size_ms: w.size_ms,
        }
    }
}

impl Default for Window {
    fn default() -> Self {
        Self {
            samples: 11,
            size_ms: 1000,
        }
    }
}

/// The quota that applies to a (user, client id) and the entity it was set on, in Kafka's
/// order of precedence: user+client, user+default client, user, default user+client,
/// default user+default client, default user, client, default client.
pub fn resolve(
    image: &MetadataImage,
    kind: QuotaKind,
    user: &str,
    client_id: &str,
) -> Option<(f64, QuotaEntity)> {
    let named = |s: &str| Some(Some(s.to_string()));
    let default = Some(None);
    let level = |user, client_id| QuotaEntity { user, client_id };
    let levels = [
        level(named(user), named(client_id)),
        level(named(user), default.clone()),
        level(named(user), None),
        level(default.clone(), named(client_id)),
        level(default.clone(), default.clone()),
        level(default.clone(), None),
        level(None, named(client_id)),
        level(None, default),
    ];
    for entity in levels {
        if let Some(v) = image
            .client_quotas
            .get(&entity)
            .and_then(|q| q.get(kind.key()))
        {
            return Some((v.0, entity));
        }
    }
    None
}

/// Whose measurements are pooled: the matched entity with `<default>` replaced by the
/// actual name (a default quota applies to each user / client id on its own).
type SensorKey = (QuotaKind, Option<String>, Option<String>);

fn sensor_key(kind: QuotaKind, entity: &QuotaEntity, user: &str, client_id: &str) -> SensorKey {
    let pick = |part: &Option<Option<String>>, actual: &str| {
        part.as_ref()
            .map(|n| n.clone().unwrap_or_else(|| actual.to_string()))
    };
    (
        kind,
        pick(&entity.user, user),
        pick(&entity.client_id, client_id),
    )
}

/// The measurements of every quota'd entity.
pub struct QuotaManager {
    window: Window,
    /// `controller.quota.window.num` × `controller.quota.window.size.seconds`: the
    /// controller mutation bucket holds the rate times this span.
    mutation_window: Window,
    sensors: Mutex<HashMap<SensorKey, Rate>>,
    /// controller_mutation_rate token buckets: (tokens, last refill ms).
    buckets: Mutex<HashMap<SensorKey, (f64, i64)>>,
}

/// What a controller mutation quota says of some partition mutations.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MutationVerdict {
    /// Whether they may go ahead (false: THROTTLING_QUOTA_EXCEEDED).
    pub accepted: bool,
    /// How long the client should back off, in ms.
    pub throttle_ms: i32,
}

/// Sensors idle this long are dropped.
const IDLE_SENSOR_MS: i64 = 3_600_000;

impl QuotaManager {
    pub fn new(window: Window) -> Self {
        Self::with_mutation_window(window, window)
    }

    pub fn with_mutation_window(window: Window, mutation_window: Window) -> Self {
        Self {
            window,
            mutation_window,
            sensors: Mutex::new(HashMap::new()),
            buckets: Mutex::new(HashMap::new()),
        }
    }

    /// `controller_mutation_rate` (Kafka's ControllerMutationQuotaManager): a token bucket
    /// holding up to rate × `controller.quota.window.num` × its window size in partitions,
    /// refilled at the rate. `strict` (CreateTopics v6+, CreatePartitions v3+, DeleteTopics
    /// v5+): refused while the bucket is in debt, else taken whole even into debt, with no
    /// throttle; permissive (older versions): always taken, throttled once in debt. The
    /// throttle is the time to pay the debt back.
    pub fn record_mutations(
        &self,
        image: &MetadataImage,
        user: &str,
        client_id: &str,
        partitions: f64,
        strict: bool,
        now_ms: i64,
    ) -> MutationVerdict {
        let free = MutationVerdict {
            accepted: true,
            throttle_ms: 0,
        };
        let kind = QuotaKind::ControllerMutation;
        let Some((rate, entity)) = resolve(image, kind, user, client_id) else {
            return free;
        };
        if rate <= 0.0 {
            return free;
        }
        let w = self.mutation_window;
        let burst = rate * w.samples as f64 * w.size_ms as f64 / 1000.0;
        let key = sensor_key(kind, &entity, user, client_id);
        let mut buckets = lock(&self.buckets);
        if buckets.len() > 10_000 {
            buckets.retain(|_, (_, last)| now_ms - *last < IDLE_SENSOR_MS);
        }
        let (tokens, last) = buckets.entry(key).or_insert((burst, now_ms));
        *tokens = (*tokens + rate * (now_ms - *last).max(0) as f64 / 1000.0).min(burst);
        *last = now_ms;
        // Rounded up: a client that waits the time it is told finds the debt paid.
        let debt_ms = |t: f64| (-t / rate * 1000.0).ceil().clamp(0.0, i32::MAX as f64) as i32;
        if strict && *tokens < 0.0 {
            return MutationVerdict {
                accepted: false,
                throttle_ms: debt_ms(*tokens),
            };
        }
        *tokens -= partitions;
        MutationVerdict {
            accepted: true,
            throttle_ms: if strict { 0 } else { debt_ms(*tokens) },
        }
    }

    /// Put back `partitions` that [`Self::record_mutations`] took for mutations that were
    /// then refused (up to the bucket's size).
    pub fn refund_mutations(
        &self,
        image: &MetadataImage,
        user: &str,
        client_id: &str,
        partitions: f64,
    ) {
        let kind = QuotaKind::ControllerMutation;
        let Some((rate, entity)) = resolve(image, kind, user, client_id) else {
            return;
        };
        let w = self.mutation_window;
        let burst = rate * w.samples as f64 * w.size_ms as f64 / 1000.0;
        let key = sensor_key(kind, &entity, user, client_id);
        if let Some((tokens, _)) = lock(&self.buckets).get_mut(&key) {
            *tokens = (*tokens + partitions).min(burst);
        }
    }

    /// Record `value` for the (user, client id) and return how long to throttle it (ms, 0
    /// when within its quota or when it has none).
    pub fn record(
        &self,
        image: &MetadataImage,
        kind: QuotaKind,
        user: &str,
        client_id: &str,
        value: f64,
        now_ms: i64,
    ) -> i32 {
        let Some((quota, entity)) = resolve(image, kind, user, client_id) else {
            return 0;
        };
        let key = sensor_key(kind, &entity, user, client_id);
        let mut sensors = self
            .sensors
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if sensors.len() > 10_000 {
            let window = self.window;
            sensors.retain(|_, r| {
                r.samples
                    .back()
                    .is_some_and(|(s, _)| now_ms - s < IDLE_SENSOR_MS.max(window.size_ms))
            });
        }
        let rate = sensors.entry(key).or_insert_with(Rate::new);
        rate.record(&self.window, now_ms, value);
        throttle_ms(
            rate.rate(&self.window, now_ms),
            quota,
            rate.window_ms(&self.window, now_ms),
        )
    }
}

/// Kafka's throttle time: how long until the rate over the window falls back to the quota,
/// `(observed - quota) / quota × window`, at most one whole window.
fn throttle_ms(observed: f64, quota: f64, window_ms: f64) -> i32 {
    if quota <= 0.0 || observed <= quota {
        return 0;
    }
    let ms = (observed - quota) / quota * window_ms;
    ms.round().clamp(0.0, window_ms) as i32
}

/// A replication throttle (Kafka's ReplicationQuotaManager): one byte rate for all the
/// throttled replicas of one side, leader (bytes sent to out-of-sync followers) or follower
/// (bytes fetched while out of sync). Which replicas count is the topics' business
/// (`*.replication.throttled.replicas`); the rate is `*.replication.throttled.rate`.
/// While the measured rate is over the bound the throttled replicas get no data; others are
/// never held back.
pub struct ReplicationQuota {
    /// "leader" or "follower", for metrics.
    side: &'static str,
    window: Window,
    /// Bytes per second; None while unbounded (Kafka's default, Long.MAX_VALUE).
    bound: Mutex<Option<f64>>,
    rate: Mutex<Rate>,
}

impl ReplicationQuota {
    pub fn new(window: Window, side: &'static str) -> Self {
        Self {
            side,
            window,
            bound: Mutex::new(None),
            rate: Mutex::new(Rate::new()),
        }
    }

    /// Set the bound from the config value (`i64::MAX` lifts it).
    pub fn set_bound(&self, bytes_per_second: i64) {
        let bound = (bytes_per_second < i64::MAX).then_some(bytes_per_second.max(0) as f64);
        *lock(&self.bound) = bound;
    }

    pub fn is_bounded(&self) -> bool {
        lock(&self.bound).is_some()
    }

    /// Whether the throttled replicas must wait: the rate measured so far is over the bound.
    pub fn is_exceeded(&self, now_ms: i64) -> bool {
        let Some(bound) = *lock(&self.bound) else {
            return false;
        };
        let mut rate = lock(&self.rate);
        rate.expire(&self.window, now_ms);
        rate.rate(&self.window, now_ms) > bound
    }

    /// Count bytes moved for throttled replicas.
    pub fn record(&self, bytes: u64, now_ms: i64) {
        if bytes > 0 && self.is_bounded() {
            lock(&self.rate).record(&self.window, now_ms, bytes as f64);
            metrics::counter!("sluice_replication_throttled_bytes_total", "side" => self.side)
                .increment(bytes);
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The leader-side and follower-side throttles of one broker.
pub struct ReplicationQuotas {
    pub leader: ReplicationQuota,
    pub follower: ReplicationQuota,
}

impl ReplicationQuotas {
    pub fn new(window: Window) -> Self {
        Self {
            leader: ReplicationQuota::new(window, "leader"),
            follower: ReplicationQuota::new(window, "follower"),
        }
    }
}

/// Client quotas as requests meet them: the measurements, and the metadata holding the
/// quotas. What a request is charged is also put in its context, which mutes the connection
/// for the throttle time.
pub struct ClientQuotas {
    manager: QuotaManager,
    metadata: std::sync::Arc<crate::metadata_cache::MetadataCache>,
}

impl ClientQuotas {
    pub fn new(
        manager: QuotaManager,
        metadata: std::sync::Arc<crate::metadata_cache::MetadataCache>,
    ) -> Self {
        Self { manager, metadata }
    }

    /// Record `value` against the requester's quota of `kind`; the throttle time (ms) is
    /// put in the request context (the connection is muted for it) and returned for the
    /// response's `throttle_time_ms`.
    pub fn record(&self, ctx: &crate::request::RequestContext, kind: QuotaKind, value: f64) -> i32 {
        let image = self.metadata.current();
        if image.client_quotas.is_empty() {
            return 0;
        }
        let user = quota_user(&ctx.principal);
        let client_id = ctx.client_id.as_deref().unwrap_or("");
        let ms = self
            .manager
            .record(&image, kind, user, client_id, value, crate::now_ms());
        ctx.throttle(ms);
        if ms > 0 {
            metrics::counter!("sluice_throttle_time_ms_total", "quota" => kind.key())
                .increment(ms as u64);
        }
        ms
    }

    /// `controller_mutation_rate`: may this request create or delete `partitions` more
    /// partitions (see [`QuotaManager::record_mutations`])? A throttle is put in the
    /// request context (the connection is muted for it); the caller reports the largest in
    /// the response's `throttle_time_ms`.
    pub fn record_mutations(
        &self,
        ctx: &crate::request::RequestContext,
        partitions: i32,
        strict: bool,
    ) -> MutationVerdict {
        let image = self.metadata.current();
        let verdict = self.manager.record_mutations(
            &image,
            quota_user(&ctx.principal),
            ctx.client_id.as_deref().unwrap_or(""),
            f64::from(partitions.max(0)),
            strict,
            crate::now_ms(),
        );
        ctx.throttle(verdict.throttle_ms);
        if verdict.throttle_ms > 0 {
            metrics::counter!("sluice_throttle_time_ms_total", "quota" => "controller_mutation_rate")
                .increment(verdict.throttle_ms as u64);
        }
        verdict
    }

    /// [`Self::record_mutations`] for each topic of a request: `charged[i]` partitions for
    /// topic i (0: not charged). Returns which topics the quota refuses and which go ahead
    /// (`authorized` and not refused).
    pub fn gate_mutations(
        &self,
        ctx: &crate::request::RequestContext,
        charged: &[i32],
        authorized: &[bool],
        strict: bool,
    ) -> (Vec<bool>, Vec<bool>) {
        let refused: Vec<bool> = charged
            .iter()
            .map(|n| *n > 0 && !self.record_mutations(ctx, *n, strict).accepted)
            .collect();
        let allowed = authorized
            .iter()
            .zip(&refused)
            .map(|(a, r)| *a && !r)
            .collect();
        (refused, allowed)
    }

    /// Whether a `controller_mutation_rate` quota applies to this request's client.
    pub fn mutation_quota_applies(&self, ctx: &crate::request::RequestContext) -> bool {
        let image = self.metadata.current();
        !image.client_quotas.is_empty()
            && resolve(
                &image,
                QuotaKind::ControllerMutation,
                quota_user(&ctx.principal),
                ctx.client_id.as_deref().unwrap_or(""),
            )
            .is_some()
    }

    /// Give back what [`Self::record_mutations`] took for mutations that did not happen.
    pub fn refund_mutations(&self, ctx: &crate::request::RequestContext, partitions: i32) {
        if partitions > 0 {
            self.manager.refund_mutations(
                &self.metadata.current(),
                quota_user(&ctx.principal),
                ctx.client_id.as_deref().unwrap_or(""),
                f64::from(partitions),
            );
        }
    }
}

/// The user name a quota is keyed by: the principal without its `User:` type.
pub fn quota_user(principal: &str) -> &str {
    principal.split_once(':').map_or(principal, |(_, n)| n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn controller_mutations_spend_a_token_bucket() {
        let img = image(&[(
            entity(None, Some(Some("c"))),
            "controller_mutation_rate",
            2.0,
        )]);
        let window = Window {
            samples: 3,
            size_ms: 1000,
        };
        let m = QuotaManager::new(window);
        let rec = |n: f64, strict: bool, at: i64| m.record_mutations(&img, "u", "c", n, strict, at);
        // A burst of 2 × 3 × 1 s = 6 partitions; strict takes a request whole into debt.
        assert_eq!(rec(4.0, true, 0).throttle_ms, 0);
        let v = rec(5.0, true, 0);
        assert!(v.accepted && v.throttle_ms == 0, "{v:?}");
        // 3 in debt at 2/s: refused for 1.5 s.
        assert_eq!(
            rec(1.0, true, 0),
            MutationVerdict {
                accepted: false,
                throttle_ms: 1500
            }
        );
        assert_eq!(rec(1.0, true, 1000).throttle_ms, 500);
        // Paid back after 1.5 s: accepted again.
        assert!(rec(1.0, true, 1500).accepted);
        // Permissive: always accepted, throttled by the debt.
        let v = rec(2.0, false, 1500);
        assert!(v.accepted && v.throttle_ms == 1500, "{v:?}");
        // Others are not affected; without a quota nothing is counted.
        assert!(
            m.record_mutations(&img, "u", "other", 100.0, true, 1500)
                .accepted
        );
        assert!(
            m.record_mutations(&img, "u", "other", 100.0, true, 1500)
                .accepted
        );
    }

    #[test]
    fn a_replication_quota_holds_back_only_while_over_its_bound() {
        let window = Window {
            samples: 3,
            size_ms: 1000,
        };
        let q = ReplicationQuota::new(window, "leader");
        q.record(10_000_000, 0);
        assert!(!q.is_exceeded(0), "unbounded: never exceeded");
        q.set_bound(1000);
        assert!(q.is_bounded());
        // 1500 bytes over the minimum measuring span of 2 s: 750 B/s.
        q.record(1500, 0);
        assert!(!q.is_exceeded(100));
        q.record(1000, 500);
        assert!(q.is_exceeded(600), "2500 B over 2 s");
        // Once the samples age out of the 3 s window, the rate falls below the bound.
        assert!(!q.is_exceeded(3500));
        q.set_bound(i64::MAX);
        q.record(1_000_000, 3600);
        assert!(!q.is_exceeded(3600));
    }

    fn image(quotas: &[(QuotaEntity, &str, f64)]) -> MetadataImage {
        let mut img = MetadataImage::empty();
        for (e, k, v) in quotas {
            img.client_quotas
                .entry(e.clone())
                .or_default()
                .insert(k.to_string(), sluice_metadata::image::QuotaValue(*v));
        }
        img
    }

    fn entity(user: Option<Option<&str>>, client: Option<Option<&str>>) -> QuotaEntity {
        QuotaEntity {
            user: user.map(|u| u.map(str::to_string)),
            client_id: client.map(|c| c.map(str::to_string)),
        }
    }

    #[test]
    fn precedence_follows_kafka() {
        let img = image(&[
            (entity(None, Some(None)), "producer_byte_rate", 1.0),
            (entity(None, Some(Some("app"))), "producer_byte_rate", 2.0),
            (entity(Some(None), None), "producer_byte_rate", 3.0),
            (entity(Some(Some("alice")), None), "producer_byte_rate", 4.0),
            (
                entity(Some(Some("alice")), Some(Some("app"))),
                "producer_byte_rate",
                5.0,
            ),
        ]);
        let q = |u: &str, c: &str| resolve(&img, QuotaKind::Produce, u, c).map(|(v, _)| v);
        assert_eq!(q("alice", "app"), Some(5.0));
        assert_eq!(q("alice", "other"), Some(4.0));
        assert_eq!(
            q("bob", "app"),
            Some(3.0),
            "a default user beats a client id"
        );
        assert_eq!(resolve(&img, QuotaKind::Fetch, "bob", "app"), None);
        let only_clients = image(&[
            (entity(None, Some(None)), "producer_byte_rate", 1.0),
            (entity(None, Some(Some("app"))), "producer_byte_rate", 2.0),
        ]);
        let q = |c: &str| resolve(&only_clients, QuotaKind::Produce, "x", c).map(|(v, _)| v);
        assert_eq!((q("app"), q("other")), (Some(2.0), Some(1.0)));
    }

    #[test]
    fn throttles_by_how_far_over_the_window_rate_is() {
        let img = image(&[(
            entity(Some(Some("alice")), None),
            "producer_byte_rate",
            1000.0,
        )]);
        let m = QuotaManager::new(Window::default());
        // 10 s at 1000 B/s exactly: never throttled.
        for t in 0..10 {
            assert_eq!(
                m.record(&img, QuotaKind::Produce, "alice", "a", 1000.0, t * 1000),
                0
            );
        }
        // Then 10 kB at once: the rate over the 10 s window doubles: ~10 s throttle.
        let t = m.record(&img, QuotaKind::Produce, "alice", "b", 10_000.0, 10_000);
        assert!((9_000..=10_000).contains(&t), "{t}");
        // Shared by the user's client ids; nobody else is affected.
        assert!(m.record(&img, QuotaKind::Produce, "alice", "c", 1.0, 10_001) > 0);
        assert_eq!(
            m.record(&img, QuotaKind::Produce, "bob", "b", 1e9, 10_001),
            0
        );
        // The window slides: after it has passed, the rate is back to zero.
        assert_eq!(
            m.record(&img, QuotaKind::Produce, "alice", "a", 1.0, 40_000),
            0
        );
    }

    #[test]
    fn default_quotas_are_measured_per_user() {
        let img = image(&[(entity(Some(None), None), "consumer_byte_rate", 100.0)]);
        let m = QuotaManager::new(Window::default());
        assert!(m.record(&img, QuotaKind::Fetch, "a", "x", 5_000.0, 0) > 0);
        assert_eq!(m.record(&img, QuotaKind::Fetch, "b", "x", 500.0, 0), 0);
    }
}
