//! Topics: the list (searched and paged on the server), creation, and a topic's page
//! (partitions, configs with their sources, more partitions, deletion, a test message).

use axum::extract::Path;
use axum::http::{StatusCode, Uri};
use axum::response::Response;
use bytes::Bytes as Buf;
use sluice_client::admin::{AlterOp, ConfigResource, NewTopic, OffsetSpec};
use sluice_client::cluster::TopicInfo;
use sluice_client::{Admin, ProducerRecord, TopicPartition};
use std::collections::{BTreeMap, HashMap};
use std::fmt::Write;

use super::form::{encode, Fields};
use super::html::{self, esc};
use super::overview::source_name;
use super::{failure, Change, Ctx};

/// Topics per page of the list.
const PER_PAGE: usize = 50;

/// Log start and end offsets of partitions (missing ones were not answered).
pub(crate) async fn offsets(
    admin: &Admin,
    tps: &[TopicPartition],
) -> (HashMap<TopicPartition, i64>, HashMap<TopicPartition, i64>) {
    let ask = |spec| {
        tps.iter()
            .map(|tp| (tp.clone(), spec))
            .collect::<Vec<(TopicPartition, OffsetSpec)>>()
    };
    let collect = |r: sluice_client::error::Result<
        Vec<(
            TopicPartition,
            sluice_client::error::Result<sluice_client::admin::OffsetAndTimestamp>,
        )>,
    >| {
        r.map(|rows| {
            rows.into_iter()
                .filter_map(|(tp, o)| Some((tp, o.ok()?.offset)))
                .collect()
        })
        .unwrap_or_default()
    };
    let (earliest, latest) = (ask(OffsetSpec::Earliest), ask(OffsetSpec::Latest));
    let (start, end) = tokio::join!(admin.list_offsets(&earliest), admin.list_offsets(&latest));
    (collect(start), collect(end))
}

/// Bytes of each partition's leader replica (asked of each leader for these topics).
async fn sizes(admin: &Admin, topics: &[&TopicInfo]) -> HashMap<(String, i32), i64> {
    let mut by_leader: BTreeMap<i32, BTreeMap<String, Vec<i32>>> = BTreeMap::new();
    for t in topics {
        for p in &t.partitions {
            if p.leader >= 0 {
                by_leader
                    .entry(p.leader)
                    .or_default()
                    .entry(t.name.clone())
                    .or_default()
                    .push(p.partition);
            }
        }
    }
    let mut asks = tokio::task::JoinSet::new();
    for (leader, topics) in by_leader {
        let admin = admin.clone();
        asks.spawn(async move {
            let wanted: Vec<(String, Vec<i32>)> = topics.into_iter().collect();
            let dirs = admin.describe_log_dirs(leader, Some(&wanted)).await;
            (leader, wanted, dirs)
        });
    }
    let mut out = HashMap::new();
    while let Some(Ok((_, wanted, Ok(dirs)))) = asks.join_next().await {
        for d in dirs {
            for ((t, p), size) in d.partitions {
                if wanted.iter().any(|(w, ps)| *w == t && ps.contains(&p)) {
                    *out.entry((t, p)).or_insert(0) += size;
                }
            }
        }
    }
    out
}

pub(crate) async fn list(ctx: Ctx, uri: Uri) -> Response {
    let q = Fields::from_query(uri.query());
    let search = q.get("q").to_string();
    let internal = q.get("internal") == "1";
    let page: usize = q.number("page", 1).unwrap_or(1).max(1);
    let mut body = html::notice(q.get("msg"), q.get("err"));
    let _ = write!(
        body,
        "<form method=\"get\" action=\"/topics\" class=\"inline\" role=\"search\">\
<label>Search <input type=\"search\" name=\"q\" value=\"{}\"></label>\
<label><input type=\"checkbox\" name=\"internal\" value=\"1\"{}> internal topics</label>\
<button type=\"submit\">Search</button></form>",
        esc(&search),
        if internal { " checked" } else { "" }
    );
    let mut topics = match ctx.admin().describe_topics(&[]).await {
        Ok(t) => t,
        Err(e) => {
            body.push_str(&html::error_box("Cannot list the topics", &failure(&e)));
            return html::page(&ctx.frame(), "/topics", "Topics", &body);
        }
    };
    topics.retain(|t| (internal || !t.internal) && t.name.contains(search.as_str()));
    topics.sort_by(|a, b| a.name.cmp(&b.name));
    let total = topics.len();
    let shown: Vec<&TopicInfo> = topics
        .iter()
        .skip((page - 1) * PER_PAGE)
        .take(PER_PAGE)
        .collect();
    let tps: Vec<TopicPartition> = shown
        .iter()
        .flat_map(|t| {
            t.partitions
                .iter()
                .map(|p| TopicPartition::new(t.name.clone(), p.partition))
        })
        .collect();
    let ((start, end), size) = tokio::join!(offsets(ctx.admin(), &tps), sizes(ctx.admin(), &shown));
    let _ = write!(
        body,
        "<p class=\"muted\">{} topic{}{}.</p><table><thead><tr><th scope=\"col\">Name</th><th scope=\"col\">Partitions</th><th scope=\"col\">Replication</th><th scope=\"col\">Under-replicated</th><th scope=\"col\">Records</th><th scope=\"col\">Size</th></tr></thead><tbody>",
        html::count(total as i64),
        if total == 1 { "" } else { "s" },
        if search.is_empty() { String::new() } else { format!(" matching “{}”", esc(&search)) }
    );
    for t in &shown {
        let rf = t.partitions.first().map(|p| p.replicas.len()).unwrap_or(0);
        let under = t
            .partitions
            .iter()
            .filter(|p| p.isr.len() < p.replicas.len())
            .count();
        let mut records = 0i64;
        let mut bytes = 0i64;
        for p in &t.partitions {
            let tp = TopicPartition::new(t.name.clone(), p.partition);
            if let (Some(s), Some(e)) = (start.get(&tp), end.get(&tp)) {
                records += (e - s).max(0);
            }
            bytes += size
                .get(&(t.name.clone(), p.partition))
                .copied()
                .unwrap_or(0);
        }
        let _ = write!(
            body,
            "<tr><td><a href=\"/topics/{}\">{}</a>{}</td><td>{}</td><td>{rf}</td><td class=\"{}\">{under}</td><td>{}</td><td>{}</td></tr>",
            encode(&t.name),
            esc(&t.name),
            if t.internal { " <span class=\"badge\">internal</span>" } else { "" },
            t.partitions.len(),
            if under > 0 { "warn" } else { "" },
            html::count(records),
            html::bytes(bytes),
        );
    }
    body.push_str("</tbody></table>");
    body.push_str(&html::pager(
        &format!(
            "/topics?q={}{}&",
            encode(&search),
            if internal { "&internal=1" } else { "" }
        ),
        page,
        PER_PAGE,
        total,
    ));
    if ctx.can_change() {
        let _ = write!(
            body,
            "<section aria-labelledby=\"new\"><h2 id=\"new\">Create a topic</h2>\
<form method=\"post\" action=\"/topics\" class=\"stack\">{}\
<label>Name <input name=\"name\" required pattern=\"[a-zA-Z0-9._\\-]+\" maxlength=\"249\"></label>\
<label>Partitions <input name=\"partitions\" type=\"number\" min=\"1\" placeholder=\"broker default (num.partitions)\"></label>\
<label>Replication factor <input name=\"replication_factor\" type=\"number\" min=\"1\" placeholder=\"broker default (default.replication.factor)\"></label>\
<label><span>Configs, one <code>key=value</code> per line</span> <textarea name=\"configs\" rows=\"3\" placeholder=\"retention.ms=86400000\"></textarea></label>\
<button type=\"submit\">Create topic</button></form></section>",
            ctx.csrf_field()
        );
    }
    html::page(&ctx.frame(), "/topics", "Topics", &body)
}

/// `key=value` lines.
fn config_lines(text: &str) -> Result<Vec<(String, String)>, String> {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(|l| {
            l.split_once('=')
                .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
                .filter(|(k, _)| !k.is_empty())
                .ok_or_else(|| format!("'{l}' is not key=value"))
        })
        .collect()
}

pub(crate) async fn create(Change(ctx, form): Change) -> Response {
    let name = form.get("name").to_string();
    let parsed = (|| {
        let partitions: i32 = form.number("partitions", -1)?;
        let rf: i16 = form.number("replication_factor", -1)?;
        let configs = config_lines(form.raw("configs").unwrap_or(""))?;
        Ok::<_, String>(NewTopic {
            name: name.clone(),
            partitions,
            replication_factor: rf,
            configs,
        })
    })();
    let topic = match parsed {
        Ok(t) => t,
        Err(e) => return html::redirect_with("/topics", "err", &e),
    };
    match ctx.admin().create_topics(&[topic], false).await {
        Ok(mut r) => match r.pop() {
            Some((_, Ok(()))) => html::redirect_with(
                &format!("/topics/{}", encode(&name)),
                "msg",
                &format!("Topic {name} created."),
            ),
            Some((_, Err(e))) => html::redirect_with("/topics", "err", &failure(&e)),
            None => {
                html::redirect_with("/topics", "err", "The broker did not answer for the topic.")
            }
        },
        Err(e) => html::redirect_with("/topics", "err", &failure(&e)),
    }
}

pub(crate) async fn show(ctx: Ctx, Path(name): Path<String>, uri: Uri) -> Response {
    let q = Fields::from_query(uri.query());
    let info = match ctx.admin().describe_topics(&[name.as_str()]).await {
        Ok(mut t) if !t.is_empty() => t.remove(0),
        Ok(_) => return not_found(&ctx, &name),
        Err(e) => {
            let status = match &e {
                sluice_client::Error::Kafka { code, .. }
                    if *code == sluice_client::ErrorCode::UnknownTopicOrPartition =>
                {
                    StatusCode::NOT_FOUND
                }
                _ => StatusCode::SERVICE_UNAVAILABLE,
            };
            let body = html::error_box(&format!("Cannot describe topic {name}"), &failure(&e));
            return html::page_with_status(status, &ctx.frame(), "/topics", &name, &body);
        }
    };
    let enc = encode(&name);
    let mut body = html::notice(q.get("msg"), q.get("err"));
    let _ = write!(
        body,
        "<p><a class=\"button\" href=\"/topics/{enc}/messages\">Browse messages</a></p>"
    );
    body.push_str(&partitions_section(&ctx, &info).await);
    body.push_str(&configs_section(&ctx, &name, &enc, q.get("config_err")).await);
    if ctx.can_change() {
        body.push_str(&produce_form(&ctx, &enc, info.partitions.len()));
        let _ = write!(
            body,
            "<section aria-labelledby=\"more\"><h2 id=\"more\">Add partitions</h2>\
<form method=\"post\" action=\"/topics/{enc}/partitions\" class=\"inline\">{csrf}\
<label>New partition count <input name=\"count\" type=\"number\" min=\"{min}\" value=\"{min}\" required></label>\
<button type=\"submit\">Add partitions</button></form></section>\
<section aria-labelledby=\"del\"><h2 id=\"del\">Delete the topic</h2>\
<form method=\"post\" action=\"/topics/{enc}/delete\" class=\"inline danger\">{csrf}\
<label>Type the topic's name to confirm <input name=\"confirm\" required autocomplete=\"off\"></label>\
<button type=\"submit\" class=\"danger\">Delete topic</button></form></section>",
            csrf = ctx.csrf_field(),
            min = info.partitions.len() + 1,
        );
    }
    html::page(&ctx.frame(), "/topics", &format!("Topic {name}"), &body)
}

fn not_found(ctx: &Ctx, name: &str) -> Response {
    html::page_with_status(
        StatusCode::NOT_FOUND,
        &ctx.frame(),
        "/topics",
        "No such topic",
        &html::error_box(
            name,
            "this topic does not exist, or you may not describe it",
        ),
    )
}

async fn partitions_section(ctx: &Ctx, info: &TopicInfo) -> String {
    let tps: Vec<TopicPartition> = info
        .partitions
        .iter()
        .map(|p| TopicPartition::new(info.name.clone(), p.partition))
        .collect();
    let one = [info];
    let ((start, end), size) = tokio::join!(offsets(ctx.admin(), &tps), sizes(ctx.admin(), &one));
    let mut out = String::from("<section aria-labelledby=\"parts\"><h2 id=\"parts\">Partitions</h2><table><thead><tr><th scope=\"col\">Partition</th><th scope=\"col\">Leader</th><th scope=\"col\">Replicas</th><th scope=\"col\">In-sync replicas</th><th scope=\"col\">Log start</th><th scope=\"col\">Log end</th><th scope=\"col\">Size</th></tr></thead><tbody>");
    let ids = |v: &[i32]| v.iter().map(i32::to_string).collect::<Vec<_>>().join(", ");
    let mut parts: Vec<_> = info.partitions.iter().collect();
    parts.sort_by_key(|p| p.partition);
    for (p, tp) in parts.iter().zip(tps.iter()) {
        let off = |m: &HashMap<TopicPartition, i64>| {
            m.get(tp)
                .map(|o| html::count(*o))
                .unwrap_or_else(|| "–".into())
        };
        let leader = if p.leader < 0 {
            "<span class=\"bad\">none</span>".to_string()
        } else {
            p.leader.to_string()
        };
        let _ = write!(
            out,
            "<tr><td>{}</td><td>{leader}</td><td>{}</td><td class=\"{}\">{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            p.partition,
            ids(&p.replicas),
            if p.isr.len() < p.replicas.len() { "warn" } else { "" },
            ids(&p.isr),
            off(&start),
            off(&end),
            size.get(&(info.name.clone(), p.partition)).map(|b| html::bytes(*b)).unwrap_or_else(|| "–".into()),
        );
    }
    out.push_str("</tbody></table></section>");
    out
}

async fn configs_section(ctx: &Ctx, name: &str, enc: &str, err: &str) -> String {
    let entries = match ctx
        .admin()
        .describe_configs(&[ConfigResource::Topic(name.to_string())])
        .await
        .map(|mut v| v.pop())
    {
        Ok(Some(Ok(e))) => e,
        Ok(Some(Err(e))) | Err(e) => {
            return html::error_box("Cannot describe the topic's configs", &failure(&e))
        }
        Ok(None) => return html::error_box("Cannot describe the topic's configs", "no answer"),
    };
    let mut out = String::from("<section aria-labelledby=\"cfg\"><h2 id=\"cfg\">Configs</h2>");
    if ctx.can_change() {
        let names: String = entries
            .iter()
            .map(|e| format!("<option value=\"{}\">", esc(&e.name)))
            .collect();
        let _ = write!(
            out,
            "<form method=\"post\" action=\"/topics/{enc}/configs\" class=\"inline\">{}\
<label>Config <input name=\"key\" list=\"config-names\" required></label><datalist id=\"config-names\">{names}</datalist>\
<label>Value <input name=\"value\"></label><button type=\"submit\" name=\"op\" value=\"set\">Set</button></form>{}",
            ctx.csrf_field(),
            if err.is_empty() { String::new() } else { format!("<p class=\"error\" role=\"alert\" id=\"config-error\">{}</p>", esc(err)) }
        );
    }
    out.push_str("<table><thead><tr><th scope=\"col\">Name</th><th scope=\"col\">Value</th><th scope=\"col\">Source</th>");
    if ctx.can_change() {
        out.push_str("<th scope=\"col\"><span class=\"visually-hidden\">Action</span></th>");
    }
    out.push_str("</tr></thead><tbody>");
    let mut entries = entries;
    // Overrides first, then the rest by name.
    entries.sort_by(|a, b| (a.source != 1, &a.name).cmp(&(b.source != 1, &b.name)));
    for e in entries {
        let value = if e.sensitive {
            "<em>(secret)</em>".to_string()
        } else {
            esc(e.value.as_deref().unwrap_or("null"))
        };
        let class = if e.source == 1 {
            " class=\"override\""
        } else {
            ""
        };
        let _ = write!(
            out,
            "<tr{class}><td><code>{}</code></td><td class=\"value\">{value}</td><td>{}</td>",
            esc(&e.name),
            source_name(e.source)
        );
        if ctx.can_change() {
            out.push_str("<td>");
            if e.source == 1 {
                let _ = write!(
                    out,
                    "<form method=\"post\" action=\"/topics/{enc}/configs\">{}<input type=\"hidden\" name=\"key\" value=\"{}\"><button type=\"submit\" name=\"op\" value=\"delete\" class=\"link\">Reset to default<span class=\"visually-hidden\"> {}</span></button></form>",
                    ctx.csrf_field(),
                    esc(&e.name),
                    esc(&e.name)
                );
            }
            out.push_str("</td>");
        }
        out.push_str("</tr>");
    }
    out.push_str("</tbody></table></section>");
    out
}

fn produce_form(ctx: &Ctx, enc: &str, partitions: usize) -> String {
    let options: String = (0..partitions)
        .map(|p| format!("<option value=\"{p}\">{p}</option>"))
        .collect();
    format!(
        "<section aria-labelledby=\"prod\"><h2 id=\"prod\">Produce a test message</h2>\
<form method=\"post\" action=\"/topics/{enc}/produce\" class=\"stack\">{}\
<label>Partition <select name=\"partition\"><option value=\"\">by key (default partitioner)</option>{options}</select></label>\
<label>Key <input name=\"key\" autocomplete=\"off\"></label>\
<label>Value <textarea name=\"value\" rows=\"3\"></textarea></label>\
<label><span>Headers, one <code>name: value</code> per line</span> <textarea name=\"headers\" rows=\"2\"></textarea></label>\
<button type=\"submit\">Produce</button></form></section>",
        ctx.csrf_field()
    )
}

pub(crate) async fn delete(Path(name): Path<String>, Change(ctx, form): Change) -> Response {
    let back = format!("/topics/{}", encode(&name));
    if form.get("confirm") != name {
        return html::redirect_with(
            &back,
            "err",
            "Not deleted: the name typed does not match the topic's.",
        );
    }
    match ctx.admin().delete_topics(&[name.as_str()]).await {
        Ok(mut r) => match r.pop() {
            Some((_, Ok(()))) => {
                html::redirect_with("/topics", "msg", &format!("Topic {name} deleted."))
            }
            Some((_, Err(e))) => html::redirect_with(&back, "err", &failure(&e)),
            None => html::redirect_with(&back, "err", "The broker did not answer for the topic."),
        },
        Err(e) => html::redirect_with(&back, "err", &failure(&e)),
    }
}

pub(crate) async fn add_partitions(
    Path(name): Path<String>,
    Change(ctx, form): Change,
) -> Response {
    let back = format!("/topics/{}", encode(&name));
    let count: i32 = match form.number("count", 0) {
        Ok(n) => n,
        Err(e) => return html::redirect_with(&back, "err", &e),
    };
    match ctx.admin().create_partitions(&name, count, false).await {
        Ok(()) => html::redirect_with(
            &back,
            "msg",
            &format!("Topic {name} now has {count} partitions."),
        ),
        Err(e) => html::redirect_with(&back, "err", &failure(&e)),
    }
}

pub(crate) async fn alter_config(Path(name): Path<String>, Change(ctx, form): Change) -> Response {
    let back = format!("/topics/{}", encode(&name));
    let key = form.get("key").to_string();
    let op = match form.get("op") {
        "delete" => AlterOp::Delete(key.clone()),
        _ => AlterOp::Set(key.clone(), form.get("value").to_string()),
    };
    let done = match &op {
        AlterOp::Delete(_) => format!("{key} reset to its default."),
        AlterOp::Set(_, v) => format!("{key} set to {v}."),
    };
    match ctx
        .admin()
        .alter_configs(&ConfigResource::Topic(name.clone()), &[op], false)
        .await
    {
        Ok(()) => html::redirect_with(&format!("{back}#cfg"), "msg", &done),
        Err(e) => html::redirect_with(&back, "config_err", &failure(&e)),
    }
}

/// `name: value` lines.
fn header_lines(text: &str) -> Result<Vec<(String, Option<Buf>)>, String> {
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let (k, v) = l
                .split_once(':')
                .ok_or_else(|| format!("header '{l}' is not name: value"))?;
            Ok((k.trim().to_string(), Some(Buf::from(v.trim().to_string()))))
        })
        .collect()
}

pub(crate) async fn produce(Path(name): Path<String>, Change(ctx, form): Change) -> Response {
    let back = format!("/topics/{}", encode(&name));
    let mut record = ProducerRecord::new(name.as_str());
    let built = (|| {
        if !form.get("partition").is_empty() {
            record.partition = Some(form.number("partition", 0)?);
        }
        let key = form.raw("key").unwrap_or("");
        if !key.is_empty() {
            record.key = Some(Buf::from(key.to_string()));
        }
        record.value = Some(Buf::from(
            form.raw("value").unwrap_or("").replace("\r\n", "\n"),
        ));
        record.headers = header_lines(form.raw("headers").unwrap_or(""))?;
        Ok::<_, String>(())
    })();
    if let Err(e) = built {
        return html::redirect_with(&back, "err", &e);
    }
    let producer = match ctx.producer() {
        Ok(p) => p,
        Err(e) => return html::redirect_with(&back, "err", &e),
    };
    let sent = producer.send_and_wait(record).await;
    match sent {
        Ok(md) => html::redirect_with(
            &back,
            "msg",
            &format!(
                "Produced to partition {} at offset {}.",
                md.partition, md.offset
            ),
        ),
        Err(e) => html::redirect_with(&back, "err", &failure(&e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_and_header_lines_are_parsed_or_refused() {
        assert_eq!(
            config_lines("retention.ms = 1000\n\n cleanup.policy=compact \n").unwrap(),
            vec![
                ("retention.ms".to_string(), "1000".to_string()),
                ("cleanup.policy".to_string(), "compact".to_string())
            ]
        );
        assert!(config_lines("retention.ms").is_err());
        assert!(config_lines("=1").is_err());
        let h = header_lines("trace: abc\nempty:\n").unwrap();
        assert_eq!(h[0], ("trace".to_string(), Some(Buf::from("abc"))));
        assert_eq!(h[1], ("empty".to_string(), Some(Buf::new())));
        assert!(header_lines("no colon").is_err());
    }
}
