//! Browsing a topic's records: one partition, from the earliest or latest offset, an offset
//! or a time; N per page, newest or oldest first; keys and values as text, JSON or hex,
//! long ones cut with "show all"; an optional key/value substring filter.

use std::fmt::Write;
use std::time::{Duration, Instant};

use axum::extract::Path;
use axum::http::Uri;
use axum::response::Response;
use sluice_client::admin::OffsetSpec;
use sluice_client::{Consumer, ConsumerRecord, TopicPartition};

use super::form::{encode, Fields};
use super::html::{self, esc};
use super::{failure, Ctx};

/// Records per page at most.
const LIMIT_MAX: usize = 500;
/// Characters of a key or value shown before "show all".
const SHOWN_CHARS: usize = 1024;
/// With a filter, records looked at per page at most, and for how long.
const SCAN_MAX: i64 = 20_000;
const SCAN_TIME: Duration = Duration::from_secs(5);

#[derive(Clone, Copy, PartialEq, Eq)]
enum Format {
    Text,
    Json,
    Hex,
}

/// What the page asks for.
struct Query {
    partition: i32,
    from: String,
    offset: i64,
    timestamp: String,
    limit: usize,
    newest_first: bool,
    format: Format,
    filter: String,
}

impl Query {
    fn parse(q: &Fields) -> Result<Query, String> {
        let from = match q.get("from") {
            "" => "latest",
            f @ ("latest" | "earliest" | "offset" | "timestamp") => f,
            other => {
                return Err(format!(
                    "'from' must be latest, earliest, offset or timestamp, not '{other}'"
                ))
            }
        }
        .to_string();
        let order = q.get("order");
        Ok(Query {
            partition: q.number("partition", 0)?,
            offset: q.number("offset", 0)?,
            timestamp: q.get("timestamp").to_string(),
            limit: q.number("limit", 20usize)?.clamp(1, LIMIT_MAX),
            newest_first: match order {
                "" => from == "latest",
                o => o == "newest",
            },
            format: match q.get("format") {
                "json" => Format::Json,
                "hex" => Format::Hex,
                _ => Format::Text,
            },
            filter: q.raw("filter").unwrap_or("").to_string(),
            from,
        })
    }

    fn link(&self, name: &str, from: &str, offset: i64) -> String {
        format!(
            "/topics/{}/messages?partition={}&from={from}&offset={offset}&limit={}&order={}&format={}&filter={}",
            encode(name),
            self.partition,
            self.limit,
            if self.newest_first { "newest" } else { "oldest" },
            match self.format {
                Format::Text => "text",
                Format::Json => "json",
                Format::Hex => "hex",
            },
            encode(&self.filter)
        )
    }
}

pub(crate) async fn page(ctx: Ctx, Path(name): Path<String>, uri: Uri) -> Response {
    let title = format!("Messages of {name}");
    let fields = Fields::from_query(uri.query());
    let mut body = format!(
        "<p><a href=\"/topics/{}\">← Topic {}</a></p>",
        encode(&name),
        esc(&name)
    );
    let q = match Query::parse(&fields) {
        Ok(q) => q,
        Err(e) => {
            body.push_str(&html::notice("", &e));
            return html::page(&ctx.frame(), "/topics", &title, &body);
        }
    };
    let partitions = match ctx.admin().describe_topics(&[name.as_str()]).await {
        Ok(t) => t.first().map(|t| t.partitions.len()).unwrap_or(0),
        Err(e) => {
            body.push_str(&html::error_box(
                &format!("Cannot describe topic {name}"),
                &failure(&e),
            ));
            return html::page(&ctx.frame(), "/topics", &title, &body);
        }
    };
    body.push_str(&controls(&name, &q, partitions));
    match read(&ctx, &name, &q).await {
        Ok(found) => body.push_str(&render(&name, &q, &found)),
        Err(e) => body.push_str(&html::error_box("Cannot read the partition", &e)),
    }
    html::page(&ctx.frame(), "/topics", &title, &body)
}

fn controls(name: &str, q: &Query, partitions: usize) -> String {
    let sel = |cond: bool| if cond { " selected" } else { "" };
    let parts: String = (0..partitions as i32)
        .map(|p| format!("<option{}>{p}</option>", sel(p == q.partition)))
        .collect();
    let from: String = ["latest", "earliest", "offset", "timestamp"]
        .iter()
        .map(|f| format!("<option{}>{f}</option>", sel(q.from == *f)))
        .collect();
    format!(
        "<form method=\"get\" action=\"/topics/{}/messages\" class=\"inline\" aria-label=\"Which messages\">\
<label>Partition <select name=\"partition\">{parts}</select></label>\
<label>From <select name=\"from\">{from}</select></label>\
<label>Offset <input name=\"offset\" type=\"number\" min=\"0\" value=\"{}\"></label>\
<label>Time (UTC) <input name=\"timestamp\" placeholder=\"2026-12-01T09:30\" value=\"{}\"></label>\
<label>Per page <input name=\"limit\" type=\"number\" min=\"1\" max=\"{LIMIT_MAX}\" value=\"{}\"></label>\
<label>Order <select name=\"order\"><option value=\"newest\"{}>newest first</option><option value=\"oldest\"{}>oldest first</option></select></label>\
<label>Show as <select name=\"format\"><option value=\"text\"{}>text</option><option value=\"json\"{}>JSON</option><option value=\"hex\"{}>hex</option></select></label>\
<label>Key or value contains <input name=\"filter\" value=\"{}\"></label>\
<button type=\"submit\">Show</button></form>",
        encode(name),
        q.offset,
        esc(&q.timestamp),
        q.limit,
        sel(q.newest_first),
        sel(!q.newest_first),
        sel(q.format == Format::Text),
        sel(q.format == Format::Json),
        sel(q.format == Format::Hex),
        esc(&q.filter),
    )
}

/// What a page read: the records (in offset order) and the partition's bounds.
struct Found {
    records: Vec<ConsumerRecord>,
    log_start: i64,
    log_end: i64,
    /// The offsets looked at: [from, to).
    from: i64,
    to: i64,
}

fn matches(r: &ConsumerRecord, filter: &str) -> bool {
    let has = |b: &Option<bytes::Bytes>| {
        b.as_ref()
            .is_some_and(|b| String::from_utf8_lossy(b).contains(filter))
    };
    filter.is_empty() || has(&r.key) || has(&r.value)
}

async fn read(ctx: &super::Ctx, name: &str, q: &Query) -> Result<Found, String> {
    let tp = TopicPartition::new(name.to_string(), q.partition);
    let (starts, ends) = super::topics::offsets(ctx.admin(), std::slice::from_ref(&tp)).await;
    let (Some(&log_start), Some(&log_end)) = (starts.get(&tp), ends.get(&tp)) else {
        return Err(format!(
            "partition {} has no leader that answers",
            q.partition
        ));
    };
    let filtering = !q.filter.is_empty();
    let window = if filtering { SCAN_MAX } else { q.limit as i64 };
    let start = match q.from.as_str() {
        "earliest" => log_start,
        "latest" => (log_end - window).max(log_start),
        "offset" => q.offset.clamp(log_start, log_end),
        _ => {
            let ts = html::parse_time_ms(&q.timestamp).ok_or_else(|| {
                format!(
                    "'{}' is not a time: write 2026-12-01T09:30 (UTC) or milliseconds",
                    q.timestamp
                )
            })?;
            let found = ctx
                .admin()
                .list_offsets(&[(tp.clone(), OffsetSpec::Timestamp(ts))])
                .await
                .map_err(|e| failure(&e))?;
            match found.into_iter().next().map(|(_, r)| r) {
                Some(Ok(o)) if o.offset >= 0 => o.offset,
                Some(Ok(_)) => log_end,
                Some(Err(e)) => return Err(failure(&e)),
                None => log_end,
            }
        }
    };
    let stop = if q.from == "latest" {
        log_end
    } else {
        (start + window).min(log_end)
    };
    let mut records = Vec::new();
    if start < stop {
        let config = ctx
            .client_config()?
            .set("auto.offset.reset", "earliest")
            .map_err(|e| e.to_string())?;
        let mut consumer = Consumer::new(config).map_err(|e| e.to_string())?;
        consumer
            .assign(std::slice::from_ref(&tp))
            .map_err(|e| e.to_string())?;
        consumer.seek(&tp, start).map_err(|e| e.to_string())?;
        let deadline = Instant::now() + SCAN_TIME;
        let mut next = start;
        'reading: while next < stop && Instant::now() < deadline {
            let batch = consumer
                .poll(Duration::from_millis(500))
                .await
                .map_err(|e| failure(&e))?;
            if batch.is_empty() {
                // Control batches (transaction markers) and compacted gaps hold no records:
                // the position moves past them all the same.
                next = next.max(consumer.position(&tp).await.map_err(|e| failure(&e))?);
            }
            for r in batch {
                if r.offset >= stop {
                    break 'reading;
                }
                next = r.offset + 1;
                if matches(&r, &q.filter) {
                    records.push(r);
                }
            }
            if !filtering || q.from == "latest" {
                continue;
            }
            if records.len() >= q.limit {
                break;
            }
        }
        let _ = consumer.close().await;
        // With a filter, "latest" keeps the newest matches, the others the first ones.
        if q.from == "latest" && records.len() > q.limit {
            records.drain(..records.len() - q.limit);
        } else {
            records.truncate(q.limit);
        }
        let to = records
            .last()
            .map(|r| r.offset + 1)
            .unwrap_or(next)
            .max(next.min(stop));
        return Ok(Found {
            records,
            log_start,
            log_end,
            from: start,
            to,
        });
    }
    Ok(Found {
        records,
        log_start,
        log_end,
        from: start,
        to: start,
    })
}

fn render(name: &str, q: &Query, found: &Found) -> String {
    let mut out = format!(
        "<p class=\"muted\">Partition {} holds offsets {} to {}. Read {}–{}{}.</p>",
        q.partition,
        html::count(found.log_start),
        html::count((found.log_end - 1).max(found.log_start)),
        found.from,
        (found.to - 1).max(found.from),
        if q.filter.is_empty() {
            String::new()
        } else {
            format!(", {} matching “{}”", found.records.len(), esc(&q.filter))
        }
    );
    // Older and newer pages.
    let first = found
        .records
        .first()
        .map(|r| r.offset)
        .unwrap_or(found.from);
    let last = found
        .records
        .last()
        .map(|r| r.offset)
        .unwrap_or(found.to - 1);
    let mut nav = String::from("<nav class=\"pager\" aria-label=\"Messages\">");
    if first > found.log_start {
        let older = (first - q.limit as i64).max(found.log_start);
        let _ = write!(
            nav,
            "<a href=\"{}\">← Older</a>",
            esc(&q.link(name, "offset", older))
        );
    }
    if last + 1 < found.log_end {
        let _ = write!(
            nav,
            "<a href=\"{}\">Newer →</a>",
            esc(&q.link(name, "offset", last + 1))
        );
    }
    nav.push_str("</nav>");
    if found.records.is_empty() {
        out.push_str("<p class=\"empty\">No messages here.</p>");
        out.push_str(&nav);
        return out;
    }
    out.push_str("<table class=\"records\"><thead><tr><th scope=\"col\">Offset</th><th scope=\"col\">Timestamp (UTC)</th><th scope=\"col\">Key</th><th scope=\"col\">Value</th><th scope=\"col\">Headers</th></tr></thead><tbody>");
    let mut rows: Vec<&ConsumerRecord> = found.records.iter().collect();
    if q.newest_first {
        rows.reverse();
    }
    for r in rows {
        let headers: String = r
            .headers
            .iter()
            .map(|(k, v)| {
                format!(
                    "<div><code>{}</code>: {}</div>",
                    esc(k),
                    v.as_ref()
                        .map(|v| esc(&String::from_utf8_lossy(v)))
                        .unwrap_or_else(|| "<em>null</em>".into())
                )
            })
            .collect();
        let _ = write!(
            out,
            "<tr><td>{}</td><td>{}</td><td class=\"value\">{}</td><td class=\"value\">{}</td><td>{headers}</td></tr>",
            r.offset,
            html::time_ms(r.timestamp),
            r.key.as_ref().map(|k| shown_key(k, q.format)).unwrap_or_else(|| "<em>null</em>".into()),
            r.value.as_ref().map(|v| shown(v, q.format)).unwrap_or_else(|| "<em>null</em>".into()),
        );
    }
    out.push_str("</tbody></table>");
    out.push_str(&nav);
    out
}

/// A key, value or header as the chosen format shows it (escaped), cut after
/// [`SHOWN_CHARS`] with the rest behind "show all".
fn shown(bytes: &[u8], format: Format) -> String {
    let text = match format {
        Format::Text => String::from_utf8_lossy(bytes).into_owned(),
        Format::Hex => hex_dump(bytes),
        Format::Json => match serde_json::from_slice::<serde_json::Value>(bytes) {
            Ok(v) => serde_json::to_string_pretty(&v).unwrap_or_default(),
            Err(_) => {
                return format!(
                    "<span class=\"muted\">(not JSON)</span> {}",
                    shown(bytes, Format::Text)
                )
            }
        },
    };
    let chars = text.chars().count();
    if chars <= SHOWN_CHARS {
        return format!("<pre>{}</pre>", esc(&text));
    }
    let head: String = text.chars().take(SHOWN_CHARS).collect();
    format!(
        "<pre>{}…</pre><details><summary>Show all ({} bytes)</summary><pre>{}</pre></details>",
        esc(&head),
        html::count(bytes.len() as i64),
        esc(&text)
    )
}

/// Keys are often plain strings: in JSON mode one that is not JSON is shown as text,
/// without the "not JSON" mark values get.
fn shown_key(bytes: &[u8], format: Format) -> String {
    if format == Format::Json && serde_json::from_slice::<serde_json::Value>(bytes).is_err() {
        return shown(bytes, Format::Text);
    }
    shown(bytes, format)
}

fn hex_dump(bytes: &[u8]) -> String {
    let mut out = String::new();
    for (i, chunk) in bytes.chunks(16).enumerate() {
        let _ = write!(out, "{:08x}  ", i * 16);
        for b in chunk {
            let _ = write!(out, "{b:02x} ");
        }
        for _ in chunk.len()..16 {
            out.push_str("   ");
        }
        out.push(' ');
        out.extend(chunk.iter().map(|&b| {
            if (0x20..0x7f).contains(&b) {
                b as char
            } else {
                '.'
            }
        }));
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_shown_escaped_in_each_format_and_cut_when_long() {
        assert_eq!(
            shown(b"<b>hi</b>", Format::Text),
            "<pre>&lt;b&gt;hi&lt;/b&gt;</pre>"
        );
        assert_eq!(
            shown(br#"{"a":1}"#, Format::Json),
            "<pre>{\n  &quot;a&quot;: 1\n}</pre>"
        );
        assert!(shown(b"plain", Format::Json).contains("(not JSON)"));
        assert_eq!(
            shown(b"AB\x00", Format::Hex),
            format!(
                "<pre>00000000  41 42 00 {}AB.\n</pre>",
                " ".repeat(3 * 13 + 1)
            )
        );
        let long = "x".repeat(SHOWN_CHARS + 10);
        let s = shown(long.as_bytes(), Format::Text);
        assert!(s.contains("<details><summary>Show all (1,034 bytes)</summary>"));
        assert!(s.contains(&long));
    }

    #[test]
    fn the_query_is_checked() {
        let q = |s: &str| Query::parse(&Fields::from_query(Some(s)));
        assert!(q("from=latest").unwrap().newest_first);
        assert!(!q("from=earliest").unwrap().newest_first);
        assert!(q("from=earliest&order=newest").unwrap().newest_first);
        assert_eq!(q("limit=100000").unwrap().limit, LIMIT_MAX);
        assert!(q("from=tomorrow").is_err());
        assert!(q("partition=x").is_err());
    }
}
