//! Client telemetry (KIP-714): which metrics a client pushes and how often, from the
//! client-metrics subscriptions kept in cluster metadata; the state of each client instance
//! (its subscription, when it last asked and pushed); and what clients pushed, exported on
//! the admin listener's `/metrics` next to the broker's own metrics.
//!
//! Kafka's broker passes pushed metrics to a plugin and lists the two APIs only when one is
//! configured; Sluice's exporter is built in, so they are always served. Rules as Kafka's
//! `ClientMetricsManager`: a request before the push interval has passed is throttled, a push
//! for an old subscription is UNKNOWN_SUBSCRIPTION_ID, nothing is taken after a terminating
//! push, and an instance is forgotten when its connection closes or it has been silent for
//! three push intervals (at least a minute).
//!
//! Sums are asked for as cumulative values (`delta_temporality` false, where Kafka's plugin
//! interface asks for deltas): a Prometheus counter is cumulative, so the last push is the
//! value to show.

pub mod otlp;

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use sluice_metadata::config::client_metrics::{self as cm, Subscription, ALL_METRICS};
use sluice_metadata::config::RESOURCE_CLIENT_METRICS;
use sluice_metadata::Uuid;
use sluice_protocol::compression::{decompress, Compression};
use sluice_protocol::ErrorCode;

use crate::metadata_cache::MetadataCache;
use crate::request::Connection;

/// Kafka's bound on the client instances a broker keeps.
const MAX_INSTANCES: usize = 16_384;
/// An instance silent this long (or three push intervals, if longer) is forgotten.
const MIN_EXPIRY: Duration = Duration::from_secs(60);
/// The most data points one push may carry.
const MAX_POINTS: usize = 20_000;
/// How far a compressed push may expand, as a multiple of `telemetry.max.bytes`.
const MAX_EXPANSION: u64 = 16;
/// The compression types a push may use, in Kafka's order of preference.
pub const ACCEPTED_COMPRESSION: [i8; 4] = [4, 3, 1, 2];

/// Who a client is, for matching subscriptions and labelling what it pushes.
#[derive(Clone, Debug, Default)]
pub struct ClientAttributes {
    pub client_id: String,
    pub software_name: Option<String>,
    pub software_version: Option<String>,
    pub source_address: String,
    pub source_port: String,
}

/// A refusal: Kafka's error code and message.
pub type Refusal = (ErrorCode, String);

/// What GetTelemetrySubscriptions answers.
#[derive(Clone, Debug, PartialEq)]
pub struct Subscribed {
    pub client_instance_id: Uuid,
    pub subscription_id: i32,
    pub push_interval_ms: i32,
    pub metrics: Vec<String>,
}

/// A PushTelemetry request.
pub struct Push<'a> {
    pub client_instance_id: Uuid,
    pub subscription_id: i32,
    pub terminating: bool,
    pub compression: i8,
    pub metrics: &'a [u8],
}

struct Instance {
    attributes: ClientAttributes,
    /// The subscriptions' version it was computed at.
    version: u64,
    subscription_id: i32,
    push_interval_ms: i32,
    metrics: Vec<String>,
    last_get: Option<Instant>,
    last_push: Option<Instant>,
    terminating: bool,
    /// The error of its last request (None: it succeeded).
    last_error: Option<ErrorCode>,
    expires: Instant,
    /// The connection that last spoke for it (forgotten when that one closes).
    connection: u64,
    /// Its last push, decoded.
    exported: Vec<otlp::Point>,
}

impl Instance {
    /// Kafka's `maybeUpdateGetRequestTimestamp`.
    fn may_get(&mut self, now: Instant) -> bool {
        let last = self.last_get.max(self.last_push);
        if last.is_none_or(|t| now - t >= self.interval()) {
            self.last_get = Some(now);
            return true;
        }
        false
    }

    /// Kafka's `maybeUpdatePushRequestTimestamp`: the first push after a get is taken early
    /// (clients add jitter to the interval).
    fn may_push(&mut self, now: Instant) -> bool {
        let ok = self.last_get > self.last_push
            || self.last_push.is_none_or(|t| now - t >= self.interval());
        if ok {
            self.last_push = Some(now);
        }
        ok
    }

    fn interval(&self) -> Duration {
        Duration::from_millis(self.push_interval_ms.max(0) as u64)
    }
}

#[derive(Default)]
struct State {
    /// The subscriptions' configs as last read from metadata, and compiled.
    configs: BTreeMap<String, BTreeMap<String, String>>,
    subscriptions: Vec<Subscription>,
    version: u64,
    instances: HashMap<Uuid, Instance>,
}

pub struct ClientTelemetry {
    metadata: Arc<MetadataCache>,
    max_bytes: i32,
    state: Mutex<State>,
    this: Weak<ClientTelemetry>,
}

/// Kafka's printed form of an id (URL-safe base64), as clients and `match` see it.
fn kafka_id(id: &Uuid) -> String {
    sluice_protocol::base64::encode(id.as_bytes())
}

/// Java's `Uuid.hashCode`.
fn java_hash(id: &Uuid) -> i32 {
    let (hi, lo) = id.as_u64_pair();
    let h = hi ^ lo;
    ((h >> 32) as i32) ^ (h as i32)
}

/// A new random instance id, never the zero id or one Kafka reserves.
fn new_instance_id(taken: &HashMap<Uuid, Instance>) -> Uuid {
    loop {
        let id = sluice_rt::random_uuid();
        if id.as_u128() > 1 && !taken.contains_key(&id) {
            return id;
        }
    }
}

impl ClientTelemetry {
    pub fn new(metadata: Arc<MetadataCache>, max_bytes: i32) -> Arc<Self> {
        Arc::new_cyclic(|this| Self {
            metadata,
            max_bytes: max_bytes.max(1),
            state: Mutex::new(State::default()),
            this: this.clone(),
        })
    }

    pub fn max_bytes(&self) -> i32 {
        self.max_bytes
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Bring the compiled subscriptions up to the metadata's.
    fn refresh(&self, state: &mut State) {
        let image = self.metadata.current();
        let now: BTreeMap<String, BTreeMap<String, String>> = image
            .configs
            .range((RESOURCE_CLIENT_METRICS, String::new())..)
            .take_while(|((t, _), _)| *t == RESOURCE_CLIENT_METRICS)
            .map(|((_, name), c)| (name.clone(), c.clone()))
            .collect();
        if now == state.configs {
            return;
        }
        state.subscriptions = now
            .iter()
            // Checked by the controller when set; one that no longer passes is skipped.
            .filter_map(|(name, c)| cm::subscription(name, c).ok())
            .collect();
        state.configs = now;
        state.version += 1;
    }

    /// The instance `id`, created (or recomputed after a subscription change) as Kafka does.
    fn instance<'s>(
        &self,
        state: &'s mut State,
        id: Uuid,
        attributes: &ClientAttributes,
        connection: &Connection,
        now: Instant,
    ) -> &'s mut Instance {
        let version = state.version;
        let stale = state
            .instances
            .get(&id)
            .is_some_and(|i| i.version < version);
        if stale || !state.instances.contains_key(&id) {
            if !state.instances.contains_key(&id) && state.instances.len() >= MAX_INSTANCES {
                // Full: the one that would expire first goes.
                if let Some(oldest) = state
                    .instances
                    .iter()
                    .min_by_key(|(_, i)| i.expires)
                    .map(|(k, _)| *k)
                {
                    state.instances.remove(&oldest);
                }
            }
            let attributes = state
                .instances
                .get(&id)
                .map(|i| i.attributes.clone())
                .unwrap_or_else(|| attributes.clone());
            let fresh = compute(&state.subscriptions, id, attributes, version, now);
            state.instances.insert(id, fresh);
        }
        let instance = state.instances.get_mut(&id).expect("just ensured");
        if instance.connection != connection.id() {
            // Forgotten when the connection that last spoke for it closes (as Kafka).
            instance.connection = connection.id();
            let this = self.this.clone();
            let conn = connection.id();
            connection.on_close(id.as_u128(), move || {
                if let Some(t) = this.upgrade() {
                    let mut s = t.lock();
                    if s.instances.get(&id).is_some_and(|i| i.connection == conn) {
                        s.instances.remove(&id);
                    }
                }
            });
        }
        instance.expires = now + MIN_EXPIRY.max(instance.interval() * 3);
        instance
    }

    /// Forget instances that have been silent too long.
    fn sweep(state: &mut State, now: Instant) {
        state.instances.retain(|_, i| i.expires > now);
    }

    /// GetTelemetrySubscriptions.
    pub fn subscriptions(
        &self,
        requested: Uuid,
        attributes: &ClientAttributes,
        connection: &Connection,
    ) -> Result<Subscribed, Refusal> {
        let now = Instant::now();
        let mut state = self.lock();
        self.refresh(&mut state);
        Self::sweep(&mut state, now);
        let id = if requested.is_nil() {
            new_instance_id(&state.instances)
        } else {
            requested
        };
        let instance = self.instance(&mut state, id, attributes, connection, now);
        if !instance.may_get(now)
            && !matches!(
                instance.last_error,
                Some(ErrorCode::UnknownSubscriptionId | ErrorCode::UnsupportedCompressionType)
            )
        {
            return Err((
                ErrorCode::ThrottlingQuotaExceeded,
                format!(
                    "Request from the client [{}] arrived before the next push interval time",
                    kafka_id(&requested)
                ),
            ));
        }
        instance.last_error = None;
        Ok(Subscribed {
            client_instance_id: id,
            subscription_id: instance.subscription_id,
            push_interval_ms: instance.push_interval_ms,
            metrics: instance.metrics.clone(),
        })
    }

    /// PushTelemetry.
    pub fn push(
        &self,
        push: &Push<'_>,
        attributes: &ClientAttributes,
        connection: &Connection,
    ) -> Result<(), Refusal> {
        let id = push.client_instance_id;
        if id.as_u128() <= 1 {
            return Err((
                ErrorCode::InvalidRequest,
                format!(
                    "Invalid request from the client [{}], invalid client instance id",
                    kafka_id(&id)
                ),
            ));
        }
        let now = Instant::now();
        let mut state = self.lock();
        self.refresh(&mut state);
        Self::sweep(&mut state, now);
        let max_bytes = self.max_bytes;
        let instance = self.instance(&mut state, id, attributes, connection, now);
        let checked = check_push(instance, push, max_bytes, now);
        instance.terminating = push.terminating;
        if let Err((code, _)) = &checked {
            instance.last_error = Some(*code);
            return checked;
        }
        if !push.metrics.is_empty() {
            match decode_metrics(push.compression, push.metrics, max_bytes) {
                Ok(points) => instance.exported = points,
                Err(e) => {
                    tracing::debug!(client_instance_id = %id, error = %e, "pushed telemetry not decoded");
                    instance.last_error = Some(ErrorCode::InvalidRecord);
                    return Err((ErrorCode::InvalidRecord, e));
                }
            }
        }
        instance.last_error = None;
        Ok(())
    }

    /// What the live client instances last pushed, in Prometheus' text format (one family
    /// per metric name, each sample labelled with the instance and the client's identity).
    pub fn render(&self) -> String {
        let now = Instant::now();
        let mut state = self.lock();
        Self::sweep(&mut state, now);
        // name -> (type, samples)
        let mut families: BTreeMap<String, (&'static str, Vec<String>)> = BTreeMap::new();
        for (id, instance) in &state.instances {
            let a = &instance.attributes;
            let own = [
                ("client_instance_id", Some(kafka_id(id))),
                ("client_id", Some(a.client_id.clone())),
                ("client_software_name", a.software_name.clone()),
                ("client_software_version", a.software_version.clone()),
            ];
            for p in &instance.exported {
                let mut labels: Vec<(String, String)> = own
                    .iter()
                    .filter_map(|(k, v)| v.clone().map(|v| (k.to_string(), v)))
                    .collect();
                for (k, v) in &p.attributes {
                    let k = label_name(k);
                    if !labels.iter().any(|(l, _)| *l == k) {
                        labels.push((k, v.clone()));
                    }
                }
                let body = labels
                    .iter()
                    .map(|(k, v)| format!("{k}=\"{}\"", escape(v)))
                    .collect::<Vec<_>>()
                    .join(",");
                let name = metric_name(&p.name);
                let ty = if p.kind == otlp::Kind::Counter {
                    "counter"
                } else {
                    "gauge"
                };
                families
                    .entry(name.clone())
                    .or_insert((ty, Vec::new()))
                    .1
                    .push(format!("{name}{{{body}}} {}", number(p.value)));
            }
        }
        let mut out = String::new();
        for (name, (ty, samples)) in families {
            out.push_str(&format!("# TYPE {name} {ty}\n"));
            for s in samples {
                out.push_str(&s);
                out.push('\n');
            }
        }
        out
    }

    /// How many client instances are known (for tests and metrics).
    pub fn instances(&self) -> usize {
        self.lock().instances.len()
    }
}

fn compute(
    subscriptions: &[Subscription],
    id: Uuid,
    attributes: ClientAttributes,
    version: u64,
    now: Instant,
) -> Instance {
    let id_text = kafka_id(&id);
    let attribute = |k: &str| -> Option<&str> {
        match k {
            cm::CLIENT_INSTANCE_ID => Some(&id_text),
            cm::CLIENT_ID => Some(&attributes.client_id),
            cm::CLIENT_SOFTWARE_NAME => attributes.software_name.as_deref(),
            cm::CLIENT_SOFTWARE_VERSION => attributes.software_version.as_deref(),
            cm::CLIENT_SOURCE_ADDRESS => Some(&attributes.source_address),
            cm::CLIENT_SOURCE_PORT => Some(&attributes.source_port),
            _ => None,
        }
    };
    let mut interval = cm::DEFAULT_INTERVAL_MS;
    let mut metrics: Vec<String> = Vec::new();
    for s in subscriptions.iter().filter(|s| s.matches(attribute)) {
        interval = interval.min(s.interval_ms);
        for m in &s.metrics {
            if !metrics.contains(m) {
                metrics.push(m.clone());
            }
        }
    }
    if metrics.iter().any(|m| m == ALL_METRICS) {
        metrics = vec![ALL_METRICS.to_string()];
    }
    metrics.sort();
    let key = format!("[{}]{interval}", metrics.join(", "));
    let subscription_id = (crc32c::crc32c(key.as_bytes()) as i32) ^ java_hash(&id);
    Instance {
        attributes,
        version,
        subscription_id,
        push_interval_ms: interval,
        metrics,
        last_get: None,
        last_push: None,
        terminating: false,
        last_error: None,
        expires: now,
        connection: 0,
        exported: Vec::new(),
    }
}

/// Kafka's checks of a push, in Kafka's order.
fn check_push(
    instance: &mut Instance,
    push: &Push<'_>,
    max_bytes: i32,
    now: Instant,
) -> Result<(), Refusal> {
    let id = kafka_id(&push.client_instance_id);
    if instance.terminating {
        return Err((
            ErrorCode::InvalidRequest,
            format!("Client [{id}] sent the previous request with state terminating to TRUE, can not accept any requests after that"),
        ));
    }
    if !instance.may_push(now) && !push.terminating {
        return Err((
            ErrorCode::ThrottlingQuotaExceeded,
            format!("Request from the client [{id}] arrived before the next push interval time"),
        ));
    }
    if push.subscription_id != instance.subscription_id {
        return Err((
            ErrorCode::UnknownSubscriptionId,
            format!("Unknown client subscription id for the client [{id}]"),
        ));
    }
    if u8::try_from(push.compression)
        .ok()
        .and_then(|c| Compression::from_id(c).ok())
        .is_none()
    {
        return Err((
            ErrorCode::UnsupportedCompressionType,
            format!(
                "Unknown compression type [{}] is received in telemetry request from [{id}]",
                push.compression
            ),
        ));
    }
    if push.metrics.len() > max_bytes as usize {
        return Err((
            ErrorCode::TelemetryTooLarge,
            format!("Telemetry request from [{id}] is larger than the maximum allowed size [{max_bytes}]"),
        ));
    }
    Ok(())
}

/// Decompress and decode pushed metrics (`compression` as PushTelemetry names it), expanding
/// to at most `max_bytes` × 16 and [`MAX_POINTS`] points.
pub fn decode_metrics(
    compression: i8,
    metrics: &[u8],
    max_bytes: i32,
) -> Result<Vec<otlp::Point>, String> {
    let codec = u8::try_from(compression)
        .map_err(|_| "unknown compression".to_string())
        .and_then(|c| Compression::from_id(c).map_err(|e| e.to_string()))?;
    let limit = max_bytes.max(1) as u64 * MAX_EXPANSION;
    let plain = decompress(codec, metrics, limit).map_err(|e| e.to_string())?;
    otlp::decode(&plain, MAX_POINTS).map_err(|e| e.to_string())
}

/// A Prometheus metric name: `[a-zA-Z_:][a-zA-Z0-9_:]*`, dots and dashes as underscores.
fn metric_name(name: &str) -> String {
    let mut out: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == ':' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if out.is_empty() || out.starts_with(|c: char| c.is_ascii_digit()) {
        out.insert(0, '_');
    }
    out
}

/// A Prometheus label name: `[a-zA-Z_][a-zA-Z0-9_]*`.
fn label_name(name: &str) -> String {
    let mut out: String = name
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    if out.is_empty() || out.starts_with(|c: char| c.is_ascii_digit()) || out.starts_with("__") {
        out.insert(0, 'a');
    }
    out
}

fn escape(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

fn number(v: f64) -> String {
    if v.is_nan() {
        "NaN".into()
    } else if v.is_infinite() {
        if v > 0.0 { "+Inf" } else { "-Inf" }.into()
    } else {
        v.to_string()
    }
}

#[cfg(test)]
mod tests;
