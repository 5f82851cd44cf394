//! The overview (cluster, brokers, this node's traffic) and the broker pages (a broker's
//! configs, static and dynamic).

use axum::extract::Path;
use axum::response::Response;
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

/// Bytes per second between consecutive samples: (time, in, out).
fn rates(samples: &[Sample]) -> Vec<(i64, f64, f64)> {
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

/// A small line chart of the rates, as inline SVG (with a text summary for screen readers).
fn chart(samples: &[Sample]) -> String {
    let mut r = rates(samples);
    if r.len() == 1 {
        // One rate so far: a level line across the chart.
        r.insert(0, r[0]);
    }
    if r.is_empty() {
        return "<p class=\"muted\">No samples yet: the chart fills in every 10 seconds.</p>"
            .into();
    }
    let (w, h) = (600.0, 120.0);
    let max = r.iter().map(|&(_, i, o)| i.max(o)).fold(1.0_f64, f64::max);
    let span = (r.len().max(2) - 1) as f64;
    let line = |pick: fn(&(i64, f64, f64)) -> f64| {
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
<figcaption><span class=\"key in\">in</span> {lin}/s · <span class=\"key out\">out</span> {lout}/s now; peak {peak}/s over {mins} min (this node, produce in and fetch out)</figcaption></figure>",
        mins = (samples.len().saturating_sub(1) * SAMPLE_EVERY.as_secs() as usize)
            .div_ceil(60)
            .max(1),
        pin = line(|p| p.1),
        pout = line(|p| p.2),
        lin = html::bytes(last.1 as i64),
        lout = html::bytes(last.2 as i64),
        peak = html::bytes(max as i64),
    )
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
    let samples: Vec<Sample> = ctx
        .console()
        .traffic
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .iter()
        .copied()
        .collect();
    body.push_str(&chart(&samples));
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
        let one = chart(&[s(0, 0.0, 0.0), s(10_000, 1000.0, 500.0)]);
        assert!(one.contains("points=\"0.0,4.0 600.0,4.0\""), "{one}");
        assert!(one.contains("100 B/s"), "{one}");
    }
}
