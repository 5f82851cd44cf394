//! The overview (cluster, brokers, the cluster's traffic) and the broker pages (a broker's
//! configs, static and dynamic). Traffic: every node samples its own byte counters every
//! 10 s and serves them at `/api/traffic`; the overview sums the live brokers' samples.

use std::sync::Arc;

use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use sluice_client::admin::ConfigResource;
use std::collections::BTreeMap;
use std::fmt::Write;

use super::html::{self, esc};
use super::{failure, Console, Ctx};

/// Samples kept: ten minutes at one per [`SAMPLE_EVERY`].
pub const SAMPLES_KEPT: usize = 60;
pub const SAMPLE_EVERY: std::time::Duration = std::time::Duration::from_secs(10);

/// This node's traffic counters at one moment (totals since it started).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Sample {
    pub at_ms: i64,
    pub bytes_in: f64,
    pub bytes_out: f64,
}

impl Console {
    /// Keep one sample of this node's metrics (the Prometheus text it serves at /metrics):
    /// bytes produced to and fetched by consumers from the partitions it leads.
    pub(crate) fn record_traffic(&self, at_ms: i64, metrics_text: &str) {
        let sample = Sample {
            at_ms,
            bytes_in: metric_sum(metrics_text, "sluice_topic_bytes_in_total"),
            bytes_out: metric_sum(metrics_text, "sluice_topic_bytes_out_total"),
        };
        let mut t = self
            .traffic
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        t.push_back(sample);
        while t.len() > SAMPLES_KEPT {
            t.pop_front();
        }
    }
}

/// The sum of every series of one metric in Prometheus text.
fn metric_sum(text: &str, name: &str) -> f64 {
    text.lines()
        .filter(|l| {
            l.strip_prefix(name)
                .is_some_and(|rest| rest.starts_with('{') || rest.starts_with(' '))
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// Bytes per second between consecutive samples.
fn rates(samples: &[Sample]) -> Vec<Rate> {
    samples
        .windows(2)
        .filter_map(|w| {
            let dt = (w[1].at_ms - w[0].at_ms) as f64 / 1000.0;
            (dt > 0.0).then(|| {
                (
                    w[1].at_ms,
                    ((w[1].bytes_in - w[0].bytes_in) / dt).max(0.0),
                    ((w[1].bytes_out - w[0].bytes_out) / dt).max(0.0),
                )
            })
        })
        .collect()
}

/// One rate: (time in ms, bytes in per second, bytes out per second).
type Rate = (i64, f64, f64);

/// The nodes' rates summed per sampling period (every node samples once a period); a
/// newest period not every node has reported yet is left out, rather than shown as a dip.
fn sum_rates(per_node: &[Vec<Rate>]) -> Vec<Rate> {
    let period = SAMPLE_EVERY.as_millis() as i64;
    let mut by: BTreeMap<i64, (f64, f64, usize)> = BTreeMap::new();
    for rates in per_node {
        for &(t, i, o) in rates {
            let e = by.entry(t.div_euclid(period)).or_default();
            e.0 += i;
            e.1 += o;
            e.2 += 1;
        }
    }
    while by
        .last_key_value()
        .is_some_and(|(_, e)| e.2 < per_node.len() && by.len() > 1)
    {
        by.pop_last();
    }
    let mut out: Vec<Rate> = by
        .into_iter()
        .map(|(b, (i, o, _))| (b * period, i, o))
        .collect();
    if out.len() > SAMPLES_KEPT {
        out.drain(..out.len() - SAMPLES_KEPT);
    }
    out
}

/// A small line chart of the rates, as inline SVG (with a text summary for screen readers);
/// `whose` says which nodes the rates are of.
fn chart(rates: &[Rate], whose: &str) -> String {
    let mut r = rates.to_vec();
    if r.len() == 1 {
        // One rate so far: a level line across the chart.
        r.insert(0, r[0]);
    }
    if r.is_empty() {
        return format!(
            "<p class=\"muted\">No samples yet: the chart fills in every 10 seconds ({}).</p>",
            esc(whose)
        );
    }
    let (w, h) = (600.0, 120.0);
    let max = r.iter().map(|&(_, i, o)| i.max(o)).fold(1.0_f64, f64::max);
    let span = (r.len() - 1) as f64;
    let line = |pick: fn(&Rate) -> f64| {
        r.iter()
            .enumerate()
            .map(|(k, p)| {
                let x = k as f64 / span * w;
                format!("{x:.1},{:.1}", h - pick(p) / max * (h - 4.0))
            })
            .collect::<Vec<_>>()
            .join(" ")
    };
    let last = r[r.len() - 1];
    format!(
        "<figure class=\"chart\"><svg viewBox=\"0 0 {w} {h}\" role=\"img\" aria-label=\"Bytes per second in and out over the last {mins} minutes\">\
<polyline class=\"in\" points=\"{pin}\"/><polyline class=\"out\" points=\"{pout}\"/></svg>\
<figcaption><span class=\"key in\">in</span> {lin}/s · <span class=\"key out\">out</span> {lout}/s now; peak {peak}/s over {mins} min ({whose}: produce in, fetch out)</figcaption></figure>",
        mins = (rates.len() * SAMPLE_EVERY.as_secs() as usize).div_ceil(60).max(1),
        pin = line(|p| p.1),
        pout = line(|p| p.2),
        lin = html::bytes(last.1 as i64),
        lout = html::bytes(last.2 as i64),
        peak = html::bytes(max as i64),
        whose = esc(whose),
    )
}

impl Console {
    pub(crate) fn samples(&self) -> Vec<Sample> {
        self.traffic
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .iter()
            .copied()
            .collect()
    }
}

/// `/api/traffic`: this node's samples, `[[at_ms, bytes_in, bytes_out], ...]`, for the
/// other nodes' overviews.
pub(crate) async fn traffic_json(State(c): State<Arc<Console>>) -> Response {
    let rows: Vec<serde_json::Value> = c
        .samples()
        .iter()
        .map(|s| serde_json::json!([s.at_ms, s.bytes_in, s.bytes_out]))
        .collect();
    (
        [(axum::http::header::CONTENT_TYPE, "application/json")],
        serde_json::Value::Array(rows).to_string(),
    )
        .into_response()
}

/// Another node's samples, from its admin HTTP listener.
async fn samples_of(addr: &str) -> Result<Vec<Sample>, String> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let ask = async {
        let mut s = tokio::net::TcpStream::connect(addr)
            .await
            .map_err(|e| e.to_string())?;
        s.write_all(
            format!("GET /api/traffic HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n")
                .as_bytes(),
        )
        .await
        .map_err(|e| e.to_string())?;
        let mut raw = Vec::new();
        s.take(PEER_ANSWER_MAX_BYTES)
            .read_to_end(&mut raw)
            .await
            .map_err(|e| e.to_string())?;
        Ok::<_, String>(raw)
    };
    let raw = tokio::time::timeout(PEER_TIMEOUT, ask)
        .await
        .map_err(|_| "no answer in time".to_string())??;
    let text = String::from_utf8_lossy(&raw);
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    if !head.starts_with("HTTP/1.1 200") {
        return Err(head.lines().next().unwrap_or("no answer").to_string());
    }
    let rows: Vec<(i64, f64, f64)> =
        serde_json::from_str(body.trim()).map_err(|e| format!("not traffic samples: {e}"))?;
    Ok(rows
        .into_iter()
        .map(|(at_ms, bytes_in, bytes_out)| Sample {
            at_ms,
            bytes_in,
            bytes_out,
        })
        .collect())
}

const PEER_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(2);
const PEER_ANSWER_MAX_BYTES: u64 = 1 << 20;

/// The traffic of every live broker: this node's own samples, the others' from their admin
/// HTTP listeners (found in their `admin.http.listener` config; a wildcard host is the
/// broker's advertised one). A node that cannot be asked is named under the chart.
async fn cluster_traffic(ctx: &Ctx) -> String {
    let admin = ctx.admin();
    // Without the brokers' list (the overview above says why), this node's own traffic.
    let brokers = admin.list_endpoints(false).await.unwrap_or_default();
    let mut asks = tokio::task::JoinSet::new();
    for (id, host, ..) in brokers.iter().filter(|b| b.0 != ctx.node_id()) {
        let (admin, id, host) = (admin.clone(), *id, host.clone());
        asks.spawn(async move {
            let asked = async {
                let configs = admin
                    .describe_configs(&[ConfigResource::Broker(id)])
                    .await
                    .map_err(|e| failure(&e))?;
                let listener = configs
                    .into_iter()
                    .flatten()
                    .flatten()
                    .find(|e| e.name == "admin.http.listener")
                    .and_then(|e| e.value)
                    .filter(|v| !v.trim().is_empty())
                    .ok_or_else(|| "no admin HTTP listener".to_string())?;
                samples_of(&peer_address(listener.trim(), &host)).await
            };
            asked.await.map_err(|e| (id, e))
        });
    }
    let mut per_node = vec![rates(&ctx.console().samples())];
    let mut missing = Vec::new();
    while let Some(done) = asks.join_next().await {
        match done {
            Ok(Ok(samples)) => per_node.push(rates(&samples)),
            Ok(Err((id, e))) => missing.push(format!("broker {id}: {e}")),
            Err(e) => missing.push(e.to_string()),
        }
    }
    let whose = if per_node.len() == 1 {
        "this node".to_string()
    } else {
        format!("{} brokers", per_node.len())
    };
    let mut out = chart(&sum_rates(&per_node), &whose);
    if !missing.is_empty() {
        missing.sort();
        out.push_str(&format!(
            "<p class=\"warn\" id=\"traffic-missing\">Not counted: {}</p>",
            esc(&missing.join("; "))
        ));
    }
    out
}

/// Where another node's admin HTTP listener is: its configured address, with a wildcard
/// host replaced by the broker's advertised host.
fn peer_address(listener: &str, broker_host: &str) -> String {
    let (host, port) = listener.rsplit_once(':').unwrap_or((listener, "9644"));
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let host = if host.is_empty() || host == "0.0.0.0" || host == "::" {
        broker_host
    } else {
        host
    };
    if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

pub(crate) async fn page(ctx: Ctx) -> Response {
    let mut body = String::new();
    let admin = ctx.admin();
    let cluster = admin.describe_cluster().await;
    let topics = admin.describe_topics(&[]).await;
    match (&cluster, &topics) {
        (Ok(cl), Ok(ts)) => {
            let partitions: Vec<_> = ts.iter().flat_map(|t| t.partitions.iter()).collect();
            let under = partitions
                .iter()
                .filter(|p| p.isr.len() < p.replicas.len())
                .count();
            let offline = partitions.iter().filter(|p| p.leader < 0).count();
            let _ = write!(
                body,
                "<section aria-labelledby=\"cl\"><h2 id=\"cl\">Cluster</h2><dl class=\"facts\">\
<dt>Cluster id</dt><dd>{}</dd><dt>Active controller</dt><dd>{}</dd><dt>This node</dt><dd>{}</dd>\
<dt>Topics</dt><dd>{}</dd><dt>Partitions</dt><dd>{}</dd>\
<dt>Under-replicated</dt><dd class=\"{}\">{}</dd><dt>Offline</dt><dd class=\"{}\">{}</dd></dl></section>",
                esc(&cl.cluster_id),
                cl.controller_id,
                ctx.node_id(),
                html::count(ts.len() as i64),
                html::count(partitions.len() as i64),
                if under > 0 { "warn" } else { "" },
                under,
                if offline > 0 { "bad" } else { "" },
                offline,
            );
        }
        (Err(e), _) | (_, Err(e)) => {
            body.push_str(&html::error_box("Cannot describe the cluster", &failure(e)));
        }
    }
    body.push_str("<section aria-labelledby=\"br\"><h2 id=\"br\">Brokers</h2>");
    body.push_str(&brokers_table(&ctx, topics.as_ref().ok()).await);
    body.push_str("</section><section aria-labelledby=\"tr\"><h2 id=\"tr\">Traffic</h2>");
    body.push_str(&cluster_traffic(&ctx).await);
    body.push_str("</section>");
    html::page(&ctx.frame(), "/", "Overview", &body)
}

/// Every broker (fenced ones too) with its leaders, replicas and disk use.
async fn brokers_table(
    ctx: &Ctx,
    topics: Option<&Vec<sluice_client::cluster::TopicInfo>>,
) -> String {
    let admin = ctx.admin();
    let endpoints = match admin.list_endpoints(true).await {
        Ok(e) => e,
        Err(e) => return html::error_box("Cannot list the brokers", &failure(&e)),
    };
    let controller = admin.describe_cluster().await.map(|c| c.controller_id).ok();
    let mut leaders: BTreeMap<i32, usize> = BTreeMap::new();
    let mut replicas: BTreeMap<i32, usize> = BTreeMap::new();
    for p in topics
        .into_iter()
        .flatten()
        .flat_map(|t| t.partitions.iter())
    {
        *leaders.entry(p.leader).or_default() += 1;
        for r in &p.replicas {
            *replicas.entry(*r).or_default() += 1;
        }
    }
    let mut disks = tokio::task::JoinSet::new();
    for (id, ..) in &endpoints {
        let (admin, id) = (admin.clone(), *id);
        disks.spawn(async move { (id, admin.describe_log_dirs(id, None).await) });
    }
    let mut used: BTreeMap<i32, String> = BTreeMap::new();
    while let Some(Ok((id, dirs))) = disks.join_next().await {
        let shown = match dirs {
            Ok(dirs) => html::bytes(dirs.iter().flat_map(|d| d.partitions.values()).sum()),
            Err(e) => format!("unavailable ({})", failure(&e)),
        };
        used.insert(id, shown);
    }
    let mut out = String::from(
        "<table><thead><tr><th scope=\"col\">Id</th><th scope=\"col\">Address</th><th scope=\"col\">Rack</th><th scope=\"col\">State</th><th scope=\"col\">Leaders</th><th scope=\"col\">Replicas</th><th scope=\"col\">Disk used</th></tr></thead><tbody>",
    );
    for (id, host, port, rack, fenced) in &endpoints {
        let role = if Some(*id) == controller {
            " <span class=\"badge\">controller</span>"
        } else {
            ""
        };
        let state = if *fenced {
            "<span class=\"bad\">fenced</span>"
        } else {
            "<span class=\"good\">alive</span>"
        };
        let _ = write!(
            out,
            "<tr><td><a href=\"/brokers/{id}\">{id}</a>{role}</td><td>{}:{port}</td><td>{}</td><td>{state}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(host),
            esc(rack.as_deref().unwrap_or("–")),
            leaders.get(id).copied().unwrap_or(0),
            replicas.get(id).copied().unwrap_or(0),
            esc(used.get(id).map(String::as_str).unwrap_or("–")),
        );
    }
    out.push_str("</tbody></table>");
    out
}

pub(crate) async fn brokers(ctx: Ctx) -> Response {
    let topics = ctx.admin().describe_topics(&[]).await.ok();
    let body = format!(
        "<p>Select a broker to see its configs.</p>{}",
        brokers_table(&ctx, topics.as_ref()).await
    );
    html::page(&ctx.frame(), "/brokers", "Brokers", &body)
}

/// Kafka's config sources, as kafka-configs.sh names them.
pub(crate) fn source_name(source: i8) -> &'static str {
    match source {
        1 => "topic override",
        2 => "dynamic (this broker)",
        3 => "dynamic (cluster default)",
        4 => "static (server.properties)",
        5 => "default",
        6 => "dynamic (logger)",
        7 => "client metrics",
        8 => "group override",
        _ => "unknown",
    }
}

pub(crate) async fn broker(ctx: Ctx, Path(id): Path<String>) -> Response {
    let Ok(id) = id.parse::<i32>() else {
        return html::page_with_status(
            axum::http::StatusCode::NOT_FOUND,
            &ctx.frame(),
            "/brokers",
            "No such broker",
            "<p class=\"error\" role=\"alert\">A broker id is a number.</p>",
        );
    };
    let title = format!("Broker {id}");
    let body = match ctx
        .admin()
        .describe_configs(&[ConfigResource::Broker(id)])
        .await
        .map(|mut v| v.pop())
    {
        Ok(Some(Ok(entries))) => {
            let mut out = String::from("<p>Every config of the broker: static ones from its properties file, dynamic ones from the cluster's metadata, the rest defaults. Secrets are never shown.</p><table><thead><tr><th scope=\"col\">Name</th><th scope=\"col\">Value</th><th scope=\"col\">Source</th></tr></thead><tbody>");
            let mut entries = entries;
            entries.sort_by(|a, b| (a.source == 5, &a.name).cmp(&(b.source == 5, &b.name)));
            for e in entries {
                let value = if e.sensitive {
                    "<em>(secret)</em>".to_string()
                } else {
                    esc(e.value.as_deref().unwrap_or("null"))
                };
                let _ = write!(
                    out,
                    "<tr><td><code>{}</code></td><td class=\"value\">{value}</td><td>{}</td></tr>",
                    esc(&e.name),
                    source_name(e.source)
                );
            }
            out.push_str("</tbody></table>");
            out
        }
        Ok(Some(Err(e))) | Err(e) => {
            html::error_box("Cannot describe the broker's configs", &failure(&e))
        }
        Ok(None) => html::error_box("Cannot describe the broker's configs", "no answer"),
    };
    html::page(&ctx.frame(), "/brokers", &title, &body)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn traffic_is_summed_over_every_topic_series_and_turned_into_rates() {
        let text = "# TYPE sluice_topic_bytes_in_total counter\n\
sluice_topic_bytes_in_total{topic=\"a\"} 100\n\
sluice_topic_bytes_in_total{topic=\"b\"} 50\n\
sluice_topic_bytes_in_total_extra 7\n\
sluice_topic_bytes_out_total{topic=\"a\"} 10\n";
        assert_eq!(metric_sum(text, "sluice_topic_bytes_in_total"), 150.0);
        assert_eq!(metric_sum(text, "sluice_topic_bytes_out_total"), 10.0);
        let s = |at_ms, i, o| Sample {
            at_ms,
            bytes_in: i,
            bytes_out: o,
        };
        assert_eq!(
            rates(&[
                s(0, 0.0, 0.0),
                s(10_000, 1000.0, 500.0),
                s(20_000, 1000.0, 700.0)
            ]),
            vec![(10_000, 100.0, 50.0), (20_000, 0.0, 20.0)]
        );
        let one = chart(
            &rates(&[s(0, 0.0, 0.0), s(10_000, 1000.0, 500.0)]),
            "this node",
        );
        assert!(one.contains("points=\"0.0,4.0 600.0,4.0\""), "{one}");
        assert!(one.contains("100 B/s"), "{one}");
    }

    #[test]
    fn the_nodes_rates_are_summed_per_period_and_an_unfinished_period_waits() {
        let a = vec![(10_100, 1.0, 2.0), (20_100, 3.0, 4.0), (30_100, 5.0, 6.0)];
        let b = vec![(10_900, 10.0, 20.0), (20_900, 30.0, 40.0)];
        assert_eq!(
            sum_rates(&[a, b]),
            vec![(10_000, 11.0, 22.0), (20_000, 33.0, 44.0)]
        );
        assert_eq!(sum_rates(&[vec![(5, 1.0, 1.0)]]), vec![(0, 1.0, 1.0)]);
        assert!(sum_rates(&[]).is_empty());
    }

    #[test]
    fn a_wildcard_admin_host_is_the_brokers_own() {
        assert_eq!(peer_address("0.0.0.0:9644", "10.0.0.7"), "10.0.0.7:9644");
        assert_eq!(peer_address("[::]:9644", "10.0.0.7"), "10.0.0.7:9644");
        assert_eq!(peer_address(":9644", "h2"), "h2:9644");
        assert_eq!(peer_address("127.0.0.1:9744", "h2"), "127.0.0.1:9744");
        assert_eq!(peer_address("0.0.0.0:9644", "fe80::1"), "[fe80::1]:9644");
    }
}
