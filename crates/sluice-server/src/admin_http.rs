//! The admin HTTP listener (`admin.http.listener`, default `127.0.0.1:9644`; empty to turn it
//! off): `/metrics` in Prometheus text format, `/health` (the process answers) and `/ready`
//! (a broker that is registered, unfenced and caught up with the metadata log; a
//! controller-only node once it serves), a read-only JSON API: `/api/cluster`,
//! `/api/brokers`, `/api/topics`, `/api/groups`; and on a broker the web console at `/`
//! (see `console`).
//!
//! Most metrics are recorded where things happen (requests, bytes, ISR changes, throttling,
//! parked requests); the ones that describe state — partitions under-replicated or offline,
//! the active controller, consumer-group lag — are computed at scrape time.

use std::sync::{Arc, OnceLock};

use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};
use serde_json::{json, Value};
use sluice_broker::services::Services;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tracing::warn;

pub use crate::console::ConsoleConfig;

/// The process-wide Prometheus recorder (metrics are global; one node per process).
fn recorder() -> Option<&'static PrometheusHandle> {
    static HANDLE: OnceLock<Option<PrometheusHandle>> = OnceLock::new();
    HANDLE
        .get_or_init(|| {
            let buckets = [
                0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
                10.0, 30.0,
            ];
            let builder = PrometheusBuilder::new()
                .set_buckets(&buckets)
                .map_err(|e| warn!(error = %e, "metrics buckets"))
                .ok()?;
            builder
                .install_recorder()
                .map_err(|e| warn!(error = %e, "cannot install the metrics recorder"))
                .ok()
        })
        .as_ref()
}

/// Install the metrics recorder (before anything records), and run its upkeep every few
/// seconds: histograms keep their raw samples until upkeep folds them in, so without it
/// memory would grow with every request on a node nobody scrapes.
pub fn install_metrics() {
    static UPKEEP: OnceLock<()> = OnceLock::new();
    if let Some(handle) = recorder() {
        UPKEEP.get_or_init(|| {
            // Gauges that only move when a request parks: shown (at 0) from the start, so a
            // scrape before the first long poll still finds them.
            for kind in ["produce", "fetch"] {
                metrics::gauge!("sluice_purgatory_size", "kind" => kind).increment(0.0);
            }
            let handle = handle.clone();
            tokio::spawn(async move {
                let mut tick = tokio::time::interval(std::time::Duration::from_secs(5));
                loop {
                    tick.tick().await;
                    handle.run_upkeep();
                }
            });
        });
    }
}

#[derive(Clone)]
struct AdminState {
    broker: Option<Arc<Services>>,
    node_id: i32,
}

/// Serve until `shutdown` flips; with a `console` config, the web console too.
pub async fn serve(
    listener: TcpListener,
    broker: Option<Arc<Services>>,
    console: Option<ConsoleConfig>,
    node_id: i32,
    mut shutdown: watch::Receiver<bool>,
) {
    let mut app = Router::new()
        .route("/metrics", get(metrics_text))
        .route("/health", get(|| async { "ok\n" }))
        .route("/ready", get(ready))
        .route("/api/cluster", get(cluster))
        .route("/api/brokers", get(brokers))
        .route("/api/topics", get(topics))
        .route("/api/groups", get(groups))
        .route("/api/diskless", get(diskless))
        .with_state(AdminState {
            broker: broker.clone(),
            node_id,
        });
    let mut sampler = None;
    if let (Some(config), Some(_)) = (console, &broker) {
        let (pages, console) = crate::console::router(config, node_id);
        app = app.merge(pages);
        sampler = Some(tokio::spawn(sample_traffic(console)));
    }
    let stop = async move {
        let _ = shutdown.wait_for(|s| *s).await;
    };
    if let Err(e) = axum::serve(listener, app)
        .with_graceful_shutdown(stop)
        .await
    {
        warn!(error = %e, "admin HTTP listener failed");
    }
    if let Some(task) = sampler {
        task.abort();
        let _ = task.await;
    }
}

/// The console's traffic chart: this node's byte counters, every ten seconds.
async fn sample_traffic(console: Arc<crate::console::Console>) {
    let mut tick = tokio::time::interval(crate::console::SAMPLE_EVERY);
    loop {
        tick.tick().await;
        if let Some(handle) = recorder() {
            console.record_traffic(sluice_broker::now_ms(), &handle.render());
        }
    }
}

fn json_response(v: Value) -> Response {
    (
        [(header::CONTENT_TYPE, "application/json")],
        format!("{v}\n"),
    )
        .into_response()
}

async fn ready(State(s): State<AdminState>) -> Response {
    let ready = match &s.broker {
        Some(b) => b.metadata.current().is_live(b.identity.node_id),
        None => true,
    };
    if ready {
        (StatusCode::OK, "ready\n").into_response()
    } else {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            "not ready: not registered or fenced\n",
        )
            .into_response()
    }
}

/// State gauges, computed now.
async fn update_state_gauges(b: &Services) {
    let image = b.metadata.current();
    let (leaders, under_replicated) = b.replicas.leadership_counts();
    let offline = image
        .topics
        .values()
        .flat_map(|t| t.partitions.values())
        .filter(|p| p.leader < 0)
        .count();
    metrics::gauge!("sluice_under_replicated_partitions").set(under_replicated as f64);
    metrics::gauge!("sluice_leader_partitions").set(leaders as f64);
    metrics::gauge!("sluice_offline_partitions").set(offline as f64);
    let active = b.controller.api().active_controller();
    metrics::gauge!("sluice_active_controller").set(if active == Some(b.identity.node_id) {
        1.0
    } else {
        0.0
    });
    metrics::gauge!("sluice_active_controller_id").set(f64::from(active.unwrap_or(-1)));
    metrics::gauge!("sluice_brokers_live").set(image.live_brokers().count() as f64);
    // Lag of the groups this broker coordinates, on partitions it leads.
    if let Ok(groups) = b.groups.list().await {
        for (group, ..) in groups {
            let Ok(rows) = b.groups.fetch(group.clone(), None, false, (None, -1)).await else {
                continue;
            };
            for (topic, partition, value) in rows {
                let Ok(Some(committed)) = value else { continue };
                let tp = sluice_protocol::types::TopicPartition::new(topic.clone(), partition);
                let Some(hw) = b.replicas.led_high_watermark(&tp) else {
                    continue;
                };
                let lag = (hw.0 - committed.offset).max(0);
                metrics::gauge!(
                    "sluice_consumer_group_lag",
                    "group" => group.clone(),
                    "topic" => topic,
                    "partition" => partition.to_string()
                )
                .set(lag as f64);
            }
        }
    }
}

async fn metrics_text(State(s): State<AdminState>) -> Response {
    let Some(handle) = recorder() else {
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            "metrics are not available\n",
        )
            .into_response();
    };
    if let Some(b) = &s.broker {
        update_state_gauges(b).await;
    }
    handle.run_upkeep();
    let mut text = handle.render();
    // What clients pushed (KIP-714), after the broker's own metrics.
    if let Some(b) = &s.broker {
        text.push_str(&b.telemetry.render());
    }
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], text).into_response()
}

fn no_broker() -> Response {
    (
        StatusCode::NOT_FOUND,
        "this node has no broker role: ask a broker\n",
    )
        .into_response()
}

async fn cluster(State(s): State<AdminState>) -> Response {
    let Some(b) = &s.broker else {
        return json_response(json!({ "node_id": s.node_id, "roles": ["controller"] }));
    };
    let image = b.metadata.current();
    json_response(json!({
        "cluster_id": b.identity.cluster_id,
        "node_id": b.identity.node_id,
        "controller_id": b.controller.api().active_controller(),
        "metadata_offset": image.offset,
        "brokers": image.brokers.len(),
        "live_brokers": image.live_brokers().count(),
        "topics": image.topics.len(),
        "partitions": image.topics.values().map(|t| t.partitions.len()).sum::<usize>(),
    }))
}

async fn brokers(State(s): State<AdminState>) -> Response {
    let Some(b) = &s.broker else {
        return no_broker();
    };
    let image = b.metadata.current();
    let list: Vec<Value> = image
        .brokers
        .values()
        .map(|r| {
            json!({
                "node_id": r.node_id,
                "epoch": r.epoch,
                "rack": r.rack,
                "fenced": r.fenced,
                "endpoints": r.endpoints.iter().map(|e| json!({
                    "listener": e.name, "host": e.host, "port": e.port,
                })).collect::<Vec<_>>(),
            })
        })
        .collect();
    json_response(Value::Array(list))
}

async fn topics(State(s): State<AdminState>) -> Response {
    let Some(b) = &s.broker else {
        return no_broker();
    };
    let image = b.metadata.current();
    let list: Vec<Value> = image
        .topics
        .values()
        .map(|t| {
            json!({
                "name": t.name,
                "id": sluice_protocol::base64::encode(t.id.as_bytes()),
                "internal": sluice_metadata::topic::is_internal(&t.name),
                "configs": image.topic_configs(&t.name),
                "partitions": t.partitions.iter().map(|(i, p)| {
                    let mut v = json!({
                        "partition": i,
                        "leader": p.leader,
                        "leader_epoch": p.leader_epoch,
                        "replicas": p.replicas,
                        "isr": p.isr,
                    });
                    if image.diskless_topics.contains(&t.name) {
                        v["diskless"] = diskless_partition(image.diskless_log(&t.id, *i));
                    }
                    v
                }).collect::<Vec<_>>(),
            })
        })
        .collect();
    json_response(Value::Array(list))
}

/// What the store holds of a diskless partition: its segment objects, and its batches still
/// in shared WAL objects.
fn diskless_partition(log: Option<&Arc<sluice_metadata::diskless::DisklessLog>>) -> Value {
    let Some(l) = log else {
        return json!({ "log_start_offset": 0, "log_end_offset": 0, "segments": 0,
            "segment_bytes": 0, "wal_batches": 0, "wal_objects": 0, "wal_bytes": 0 });
    };
    let segment_bytes: u64 = l.segments.iter().map(|s| s.size).sum();
    json!({
        "log_start_offset": l.start_offset,
        "log_end_offset": l.end_offset,
        "segments": l.segments.len(),
        "segment_bytes": segment_bytes,
        "wal_batches": l.batch_count(),
        "wal_objects": l.object_count(),
        "wal_bytes": l.size_bytes() - segment_bytes,
    })
}

/// This broker's diskless uploads and commits: percentiles of the last ones (null before the
/// first).
async fn diskless(State(s): State<AdminState>) -> Response {
    let Some(b) = &s.broker else {
        return no_broker();
    };
    let summary = |r: &sluice_broker::diskless::Recent| {
        r.summary().map_or(
            Value::Null,
            |x| json!({ "count": x.count, "p50": x.p50, "p99": x.p99, "max": x.max }),
        )
    };
    let (upload, commit) = match b.replicas.diskless() {
        Some(d) => (
            summary(&d.metrics.recent_upload_ms),
            summary(&d.metrics.recent_commit_ms),
        ),
        None => (Value::Null, Value::Null),
    };
    json_response(json!({ "node": s.node_id, "upload_ms": upload, "commit_ms": commit }))
}

async fn groups(State(s): State<AdminState>) -> Response {
    let Some(b) = &s.broker else {
        return no_broker();
    };
    match b.groups.list().await {
        Ok(groups) => json_response(Value::Array(
            groups
                .into_iter()
                .map(|(id, protocol_type, state, group_type)| {
                    json!({ "group": id, "protocol_type": protocol_type, "state": state, "type": group_type, "coordinator": b.identity.node_id })
                })
                .collect(),
        )),
        Err(code) => (
            StatusCode::SERVICE_UNAVAILABLE,
            format!("groups unavailable: {code:?}\n"),
        )
            .into_response(),
    }
}
