//! Consumer groups: the list (state, type, members, total lag), a group's page (members and
//! what they own, committed offsets and lag per partition), and resetting its offsets with
//! a preview first, only while it has no members (as kafka-consumer-groups.sh).

use axum::extract::Path;
use axum::http::Uri;
use axum::response::Response;
use sluice_client::admin::{GroupDescription, OffsetSpec};
use sluice_client::{Admin, TopicPartition};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write;

use super::form::{encode, Fields};
use super::html::{self, esc};
use super::{failure, Change, Ctx};

const PER_PAGE: usize = 50;

/// Committed offset, log end and lag of each partition a group has an offset for.
struct Lag {
    rows: Vec<(TopicPartition, i64, Option<i64>)>,
}

impl Lag {
    fn total(&self) -> i64 {
        self.rows
            .iter()
            .filter_map(|(_, c, e)| e.map(|e| (e - c).max(0)))
            .sum()
    }
}

async fn lag(admin: &Admin, group: &str) -> Result<Lag, String> {
    let committed = admin
        .list_group_offsets(group, None)
        .await
        .map_err(|e| failure(&e))?;
    let committed: Vec<(TopicPartition, i64)> = committed
        .into_iter()
        .filter_map(|(tp, c)| Some((tp, c?.offset)))
        .collect();
    let tps: Vec<TopicPartition> = committed.iter().map(|(tp, _)| tp.clone()).collect();
    let (_, ends) = super::topics::offsets(admin, &tps).await;
    let mut rows: Vec<_> = committed
        .into_iter()
        .map(|(tp, c)| {
            let end = ends.get(&tp).copied();
            (tp, c, end)
        })
        .collect();
    rows.sort_by(|a, b| (&a.0.topic, a.0.partition).cmp(&(&b.0.topic, b.0.partition)));
    Ok(Lag { rows })
}

pub(crate) async fn list(ctx: Ctx, uri: Uri) -> Response {
    let q = Fields::from_query(uri.query());
    let search = q.get("q").to_string();
    let page: usize = q.number("page", 1).unwrap_or(1).max(1);
    let mut body = html::notice(q.get("msg"), q.get("err"));
    let _ = write!(
        body,
        "<form method=\"get\" action=\"/groups\" class=\"inline\" role=\"search\"><label>Search <input type=\"search\" name=\"q\" value=\"{}\"></label><button type=\"submit\">Search</button></form>",
        esc(&search)
    );
    let mut groups = match ctx.admin().list_groups(&[]).await {
        Ok(g) => g,
        Err(e) => {
            body.push_str(&html::error_box("Cannot list the groups", &failure(&e)));
            return html::page(&ctx.frame(), "/groups", "Consumer groups", &body);
        }
    };
    groups.retain(|g| g.group_id.contains(search.as_str()));
    groups.sort_by(|a, b| a.group_id.cmp(&b.group_id));
    let total = groups.len();
    let shown: Vec<String> = groups
        .iter()
        .skip((page - 1) * PER_PAGE)
        .take(PER_PAGE)
        .map(|g| g.group_id.clone())
        .collect();
    let ids: Vec<&str> = shown.iter().map(String::as_str).collect();
    let described: BTreeMap<String, GroupDescription> = ctx
        .admin()
        .describe_groups(&ids)
        .await
        .map(|d| d.into_iter().map(|g| (g.group_id.clone(), g)).collect())
        .unwrap_or_default();
    let mut lags = tokio::task::JoinSet::new();
    for id in &shown {
        let (admin, id) = (ctx.admin().clone(), id.clone());
        lags.spawn(async move {
            let l = lag(&admin, &id).await;
            (id, l)
        });
    }
    let mut lag_of: BTreeMap<String, Result<i64, String>> = BTreeMap::new();
    while let Some(Ok((id, l))) = lags.join_next().await {
        lag_of.insert(id, l.map(|l| l.total()));
    }
    let _ = write!(
        body,
        "<p class=\"muted\">{} group{}.</p><table><thead><tr><th scope=\"col\">Group</th><th scope=\"col\">State</th><th scope=\"col\">Type</th><th scope=\"col\">Members</th><th scope=\"col\">Total lag</th></tr></thead><tbody>",
        html::count(total as i64),
        if total == 1 { "" } else { "s" }
    );
    for id in &shown {
        let listing = groups.iter().find(|g| &g.group_id == id);
        let d = described.get(id);
        let state = d
            .map(|d| d.state.as_str())
            .or(listing.map(|l| l.state.as_str()))
            .unwrap_or("–");
        let _ = write!(
            body,
            "<tr><td><a href=\"/groups/{}\">{}</a></td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            encode(id),
            esc(id),
            esc(state),
            esc(d.map(|d| d.group_type.as_str()).unwrap_or("–")),
            d.map(|d| d.members.len().to_string()).unwrap_or_else(|| "–".into()),
            match lag_of.get(id) {
                Some(Ok(l)) => html::count(*l),
                _ => "–".into(),
            }
        );
    }
    body.push_str("</tbody></table>");
    body.push_str(&html::pager(
        &format!("/groups?q={}&", encode(&search)),
        page,
        PER_PAGE,
        total,
    ));
    html::page(&ctx.frame(), "/groups", "Consumer groups", &body)
}

pub(crate) async fn show(ctx: Ctx, Path(id): Path<String>, uri: Uri) -> Response {
    let q = Fields::from_query(uri.query());
    let body = group_body(&ctx, &id, html::notice(q.get("msg"), q.get("err")), None).await;
    html::page(&ctx.frame(), "/groups", &format!("Group {id}"), &body)
}

/// The group's page: `notice` first, then (after a preview) what a reset would do.
async fn group_body(ctx: &Ctx, id: &str, notice: String, preview: Option<String>) -> String {
    let mut body = notice;
    let d = match ctx.admin().describe_groups(&[id]).await {
        Ok(mut d) if !d.is_empty() => d.remove(0),
        Ok(_) => return body + &html::error_box(id, "no such group"),
        Err(e) => return body + &html::error_box("Cannot describe the group", &failure(&e)),
    };
    let _ = write!(
        body,
        "<dl class=\"facts\"><dt>State</dt><dd>{}</dd><dt>Type</dt><dd>{}</dd><dt>Protocol</dt><dd>{}</dd><dt>Members</dt><dd>{}</dd>{}</dl>",
        esc(&d.state),
        esc(&d.group_type),
        esc(if d.protocol.is_empty() { "–" } else { &d.protocol }),
        d.members.len(),
        d.group_epoch.map(|e| format!("<dt>Group epoch</dt><dd>{e}</dd>")).unwrap_or_default()
    );
    let mut owner: BTreeMap<TopicPartition, String> = BTreeMap::new();
    if !d.members.is_empty() {
        body.push_str("<section aria-labelledby=\"mem\"><h2 id=\"mem\">Members</h2><table><thead><tr><th scope=\"col\">Member</th><th scope=\"col\">Client id</th><th scope=\"col\">Host</th><th scope=\"col\">Partitions</th></tr></thead><tbody>");
        for m in &d.members {
            let mut parts: BTreeMap<&str, Vec<i32>> = BTreeMap::new();
            for tp in &m.assignment {
                parts
                    .entry(tp.topic.as_str())
                    .or_default()
                    .push(tp.partition.0);
                owner.insert(tp.clone(), m.client_id.clone());
            }
            let parts: Vec<String> = parts
                .into_iter()
                .map(|(t, ps)| {
                    format!(
                        "{} [{}]",
                        esc(t),
                        ps.iter().map(i32::to_string).collect::<Vec<_>>().join(", ")
                    )
                })
                .collect();
            let _ = write!(
                body,
                "<tr><td><code>{}</code>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                esc(&m.member_id),
                m.instance_id
                    .as_deref()
                    .map(|i| format!(" (static: {})", esc(i)))
                    .unwrap_or_default(),
                esc(&m.client_id),
                esc(&m.host),
                parts.join("; ")
            );
        }
        body.push_str("</tbody></table></section>");
    }
    body.push_str("<section aria-labelledby=\"off\"><h2 id=\"off\">Offsets and lag</h2>");
    let lag = match lag(ctx.admin(), id).await {
        Ok(l) => l,
        Err(e) => {
            return body + &html::error_box("Cannot read the group's offsets", &e) + "</section>"
        }
    };
    if lag.rows.is_empty() {
        body.push_str("<p class=\"empty\">The group has committed no offsets.</p>");
    } else {
        let _ = write!(
            body,
            "<p>Total lag: <strong id=\"total-lag\">{}</strong></p><table><thead><tr><th scope=\"col\">Topic</th><th scope=\"col\">Partition</th><th scope=\"col\">Committed</th><th scope=\"col\">Log end</th><th scope=\"col\">Lag</th><th scope=\"col\">Owner</th></tr></thead><tbody>",
            html::count(lag.total())
        );
        for (tp, committed, end) in &lag.rows {
            let _ = write!(
                body,
                "<tr><td><a href=\"/topics/{}\">{}</a></td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                encode(&tp.topic),
                esc(&tp.topic),
                tp.partition,
                html::count(*committed),
                end.map(html::count).unwrap_or_else(|| "–".into()),
                end.map(|e| html::count((e - committed).max(0))).unwrap_or_else(|| "–".into()),
                esc(owner.get(tp).map(String::as_str).unwrap_or("–")),
            );
        }
        body.push_str("</tbody></table>");
    }
    body.push_str("</section>");
    if let Some(p) = preview {
        body.push_str(&p);
    }
    if ctx.can_change() {
        body.push_str(&reset_form(ctx, id, &d, &lag));
    }
    body
}

fn empty(d: &GroupDescription) -> bool {
    matches!(d.state.as_str(), "Empty" | "Dead") || d.members.is_empty() && d.state != "Stable"
}

fn reset_form(ctx: &Ctx, id: &str, d: &GroupDescription, lag: &Lag) -> String {
    let mut out =
        String::from("<section aria-labelledby=\"reset\"><h2 id=\"reset\">Reset offsets</h2>");
    if !empty(d) {
        let _ = write!(
            out,
            "<p class=\"muted\">Offsets can be reset only while the group has no members (it is {}): stop its consumers first.</p></section>",
            esc(&d.state)
        );
        return out;
    }
    let topics: BTreeSet<&str> = lag.rows.iter().map(|(tp, ..)| tp.topic.as_str()).collect();
    let options: String = topics
        .iter()
        .map(|t| format!("<option value=\"{}\">{}</option>", esc(t), esc(t)))
        .collect();
    let _ = write!(
        out,
        "<form method=\"post\" action=\"/groups/{}/reset\" class=\"stack\">{}\
<label>Topic <select name=\"topic\"><option value=\"\">every topic it has offsets for</option>{options}</select></label>\
<label>Or another topic (all its partitions) <input name=\"other_topic\"></label>\
<fieldset><legend>Reset to</legend>\
<label><input type=\"radio\" name=\"to\" value=\"earliest\" checked> earliest</label>\
<label><input type=\"radio\" name=\"to\" value=\"latest\"> latest</label>\
<label><input type=\"radio\" name=\"to\" value=\"timestamp\"> time</label>\
<label><input type=\"radio\" name=\"to\" value=\"offset\"> offset</label></fieldset>\
<label>Time (UTC) or offset <input name=\"value\" placeholder=\"2026-12-01T09:30 or 42\"></label>\
<div class=\"buttons\"><button type=\"submit\" name=\"action\" value=\"preview\">Preview</button>\
<button type=\"submit\" name=\"action\" value=\"execute\" class=\"danger\">Reset offsets</button></div></form></section>",
        encode(id),
        ctx.csrf_field()
    );
    out
}

/// The new offset of each partition (what the reset would commit).
async fn plan(
    ctx: &Ctx,
    id: &str,
    form: &Fields,
) -> Result<Vec<(TopicPartition, Option<i64>, i64)>, String> {
    let admin = ctx.admin();
    let current: BTreeMap<TopicPartition, i64> = admin
        .list_group_offsets(id, None)
        .await
        .map_err(|e| failure(&e))?
        .into_iter()
        .filter_map(|(tp, c)| Some((tp, c?.offset)))
        .collect();
    let topic = [form.get("other_topic"), form.get("topic")]
        .into_iter()
        .find(|t| !t.is_empty());
    let tps: Vec<TopicPartition> = match topic {
        Some(t) => {
            let info = admin.describe_topics(&[t]).await.map_err(|e| failure(&e))?;
            info.iter()
                .flat_map(|i| {
                    i.partitions
                        .iter()
                        .map(|p| TopicPartition::new(i.name.clone(), p.partition))
                })
                .collect()
        }
        None => current.keys().cloned().collect(),
    };
    if tps.is_empty() {
        return Err("Nothing to reset: the group has no offsets; choose a topic.".into());
    }
    let value = form.get("value");
    let spec = match form.get("to") {
        "earliest" => OffsetSpec::Earliest,
        "latest" => OffsetSpec::Latest,
        "timestamp" => OffsetSpec::Timestamp(html::parse_time_ms(value).ok_or_else(|| {
            format!("'{value}' is not a time: write 2026-12-01T09:30 (UTC) or milliseconds")
        })?),
        "offset" => {
            value
                .parse::<i64>()
                .map_err(|_| format!("'{value}' is not an offset"))?;
            OffsetSpec::Earliest
        }
        other => return Err(format!("'{other}' is not a way to reset")),
    };
    let (starts, ends) = super::topics::offsets(admin, &tps).await;
    let found: BTreeMap<TopicPartition, i64> = if let OffsetSpec::Timestamp(_) = spec {
        let wanted: Vec<_> = tps.iter().map(|tp| (tp.clone(), spec)).collect();
        admin
            .list_offsets(&wanted)
            .await
            .map_err(|e| failure(&e))?
            .into_iter()
            .filter_map(|(tp, r)| {
                let o = r.ok()?.offset;
                // No record at or after the time: the log end, as Kafka's tool does.
                let o = if o < 0 { *ends.get(&tp)? } else { o };
                Some((tp, o))
            })
            .collect()
    } else {
        BTreeMap::new()
    };
    let mut out = Vec::new();
    for tp in tps {
        let (Some(&s), Some(&e)) = (starts.get(&tp), ends.get(&tp)) else {
            return Err(format!("{tp}: its leader does not answer"));
        };
        let new = match form.get("to") {
            "earliest" => s,
            "latest" => e,
            "offset" => value.parse::<i64>().unwrap_or(s).clamp(s, e),
            _ => *found
                .get(&tp)
                .ok_or_else(|| format!("{tp}: no offset for that time"))?,
        };
        out.push((tp.clone(), current.get(&tp).copied(), new));
    }
    Ok(out)
}

pub(crate) async fn reset(Path(id): Path<String>, Change(ctx, form): Change) -> Response {
    let execute = form.get("action") == "execute";
    let back = format!("/groups/{}", encode(&id));
    let title = format!("Group {id}");
    let planned = match plan(&ctx, &id, &form).await {
        Ok(p) => p,
        Err(e) => return html::redirect_with(&back, "err", &e),
    };
    if !execute {
        let mut p = String::from("<section aria-labelledby=\"prev\"><h2 id=\"prev\">Preview of the reset</h2><p>Nothing has changed yet. These offsets would be committed:</p><table id=\"preview\"><thead><tr><th scope=\"col\">Topic</th><th scope=\"col\">Partition</th><th scope=\"col\">Committed now</th><th scope=\"col\">New offset</th></tr></thead><tbody>");
        for (tp, cur, new) in &planned {
            let _ = write!(
                p,
                "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                esc(&tp.topic),
                tp.partition,
                cur.map(html::count).unwrap_or_else(|| "–".into()),
                html::count(*new)
            );
        }
        p.push_str("</tbody></table></section>");
        let body = group_body(&ctx, &id, String::new(), Some(p)).await;
        return html::page(&ctx.frame(), "/groups", &title, &body);
    }
    let offsets: Vec<(TopicPartition, i64)> =
        planned.iter().map(|(tp, _, n)| (tp.clone(), *n)).collect();
    match ctx.admin().describe_groups(&[id.as_str()]).await {
        Ok(d) if d.first().is_some_and(|d| !empty(d)) => {
            let state = d.first().map(|d| d.state.clone()).unwrap_or_default();
            return html::redirect_with(
                &back,
                "err",
                &format!("Assignments can only be reset if the group '{id}' is inactive, but the current state is {state}."),
            );
        }
        Err(e) => return html::redirect_with(&back, "err", &failure(&e)),
        Ok(_) => {}
    }
    match ctx.admin().alter_group_offsets(&id, &offsets).await {
        Ok(results) => {
            let failed: Vec<String> = results
                .iter()
                .filter_map(|(tp, r)| r.as_ref().err().map(|e| format!("{tp}: {}", failure(e))))
                .collect();
            if failed.is_empty() {
                html::redirect_with(
                    &back,
                    "msg",
                    &format!("Offsets of {} partition(s) reset.", offsets.len()),
                )
            } else {
                html::redirect_with(&back, "err", &failed.join("; "))
            }
        }
        Err(e) => html::redirect_with(&back, "err", &failure(&e)),
    }
}
