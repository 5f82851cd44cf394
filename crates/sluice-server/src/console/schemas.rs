//! The schema registry: subjects with their latest version (id, type), and a subject's page
//! (its versions, compatibility level, and a version's schema). The console reads the
//! node's registry listener over its REST API, signed in as the session's user (HTTP basic
//! with the SASL credentials it signed in with), so the registry's permissions apply.

use std::fmt::Write;

use axum::extract::Path;
use axum::http::Uri;
use axum::response::Response;
use serde_json::Value;

use super::form::{encode, Fields};
use super::html::{self, esc};
use super::Ctx;
use crate::schema_http::encode_segment;

const PER_PAGE: usize = 50;

/// GET `path` on the node's registry as the session's user.
async fn get(ctx: &Ctx, path: &str) -> Result<Value, String> {
    let Some((base, client)) = ctx.console().registry() else {
        return Err("this node runs no schema registry (schema.registry.listener=none)".into());
    };
    let mut req = client.get(format!("{base}{path}"));
    if let Some(c) = ctx.auth.sasl.as_ref() {
        req = req.basic_auth(&c.username, Some(&c.password));
    }
    let resp = req
        .send()
        .await
        .map_err(|e| format!("cannot reach the schema registry: {e}"))?;
    let ok = resp.status().is_success();
    let text = resp
        .text()
        .await
        .map_err(|e| format!("the schema registry did not answer: {e}"))?;
    let v: Value = serde_json::from_str(&text).unwrap_or(Value::String(text));
    if ok {
        Ok(v)
    } else {
        Err(v["message"]
            .as_str()
            .map_or_else(|| v.to_string(), str::to_string))
    }
}

pub(crate) async fn list(ctx: Ctx, uri: Uri) -> Response {
    let q = Fields::from_query(uri.query());
    let search = q.get("q").to_string();
    let page: usize = q.number("page", 1).unwrap_or(1).max(1);
    let mut body = String::new();
    let _ = write!(
        body,
        "<form method=\"get\" action=\"/schemas\" class=\"inline\" role=\"search\"><label>Search <input type=\"search\" name=\"q\" value=\"{}\"></label><button type=\"submit\">Search</button></form>",
        esc(&search)
    );
    let latest = match get(&ctx, "/schemas?latestOnly=true").await {
        Ok(v) => v,
        Err(e) => {
            body.push_str(&html::error_box("Cannot list the schemas", &e));
            return html::page(&ctx.frame(), "/schemas", "Schemas", &body);
        }
    };
    let level = get(&ctx, "/config")
        .await
        .ok()
        .and_then(|v| v["compatibilityLevel"].as_str().map(str::to_string))
        .unwrap_or_default();
    let rows: Vec<&Value> = latest
        .as_array()
        .into_iter()
        .flatten()
        .filter(|v| {
            v["subject"]
                .as_str()
                .is_some_and(|s| s.contains(search.as_str()))
        })
        .collect();
    let _ = write!(
        body,
        "<p>{} subjects; the registry's compatibility level is <strong>{}</strong>.</p>",
        rows.len(),
        esc(&level)
    );
    body.push_str("<table><thead><tr><th scope=\"col\">Subject</th><th scope=\"col\">Latest version</th><th scope=\"col\">Id</th><th scope=\"col\">Type</th></tr></thead><tbody>");
    for v in rows.iter().skip((page - 1) * PER_PAGE).take(PER_PAGE) {
        let subject = v["subject"].as_str().unwrap_or_default();
        let _ = write!(
            body,
            "<tr><td><a href=\"/schemas/{}\">{}</a></td><td>{}</td><td>{}</td><td>{}</td></tr>",
            encode(subject),
            esc(subject),
            v["version"],
            v["id"],
            esc(v["schemaType"].as_str().unwrap_or("AVRO"))
        );
    }
    body.push_str("</tbody></table>");
    body.push_str(&html::pager(
        &format!("/schemas?q={}", encode(&search)),
        page,
        PER_PAGE,
        rows.len(),
    ));
    html::page(&ctx.frame(), "/schemas", "Schemas", &body)
}

pub(crate) async fn show(ctx: Ctx, Path(subject): Path<String>, uri: Uri) -> Response {
    let q = Fields::from_query(uri.query());
    let title = format!("Subject {subject}");
    let s = encode_segment(&subject);
    let versions = match get(&ctx, &format!("/subjects/{s}/versions")).await {
        Ok(v) => v,
        Err(e) => {
            let body = html::error_box("Cannot read the subject", &e);
            return html::page(&ctx.frame(), "/schemas", &title, &body);
        }
    };
    let numbers: Vec<i64> = versions
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_i64)
        .collect();
    let chosen = q
        .get("version")
        .parse::<i64>()
        .ok()
        .filter(|v| numbers.contains(v))
        .or_else(|| numbers.last().copied())
        .unwrap_or(-1);
    let level = get(&ctx, &format!("/config/{s}?defaultToGlobal=true"))
        .await
        .ok()
        .and_then(|v| v["compatibilityLevel"].as_str().map(str::to_string))
        .unwrap_or_default();
    let mut body = format!(
        "<p>Compatibility level: <strong>{}</strong>. Versions: ",
        esc(&level)
    );
    for n in &numbers {
        if *n == chosen {
            let _ = write!(body, "<strong aria-current=\"true\">{n}</strong> ");
        } else {
            let _ = write!(
                body,
                "<a href=\"/schemas/{}?version={n}\">{n}</a> ",
                encode(&subject)
            );
        }
    }
    body.push_str("</p>");
    match get(&ctx, &format!("/subjects/{s}/versions/{chosen}")).await {
        Ok(v) => {
            let text = v["schema"].as_str().unwrap_or_default();
            let shown = serde_json::from_str::<Value>(text)
                .ok()
                .and_then(|j| serde_json::to_string_pretty(&j).ok())
                .unwrap_or_else(|| text.to_string());
            let _ = write!(
                body,
                "<dl><dt>Version</dt><dd>{}</dd><dt>Id</dt><dd>{}</dd><dt>Type</dt><dd>{}</dd></dl><pre>{}</pre>",
                v["version"],
                v["id"],
                esc(v["schemaType"].as_str().unwrap_or("AVRO")),
                esc(&shown)
            );
            if let Some(refs) = v["references"].as_array() {
                body.push_str("<h2>References</h2><ul>");
                for r in refs {
                    let _ = write!(
                        body,
                        "<li>{} → <a href=\"/schemas/{}?version={}\">{}</a> version {}</li>",
                        esc(r["name"].as_str().unwrap_or_default()),
                        encode(r["subject"].as_str().unwrap_or_default()),
                        r["version"],
                        esc(r["subject"].as_str().unwrap_or_default()),
                        r["version"]
                    );
                }
                body.push_str("</ul>");
            }
        }
        Err(e) => body.push_str(&html::error_box("Cannot read the version", &e)),
    }
    html::page(&ctx.frame(), "/schemas", &title, &body)
}
