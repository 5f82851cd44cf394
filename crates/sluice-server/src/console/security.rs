//! Security: ACLs, SCRAM users (names and mechanisms only: no secret is ever shown) and
//! client quotas, each listed with forms to add and remove.

use axum::http::Uri;
use axum::response::Response;
use sluice_client::acl::{op, pattern, permission, resource, AclBinding, AclFilter};
use sluice_client::admin::QuotaEntity;
use sluice_client::{ScramAlteration, ScramMechanism};
use std::fmt::Write;

use super::form::Fields;
use super::html::{self, esc};
use super::{failure, Change, Ctx};

const BACK: &str = "/security";
const RESOURCES: [i8; 5] = [
    resource::TOPIC,
    resource::GROUP,
    resource::CLUSTER,
    resource::TRANSACTIONAL_ID,
    resource::USER,
];
const QUOTA_KEYS: [&str; 4] = [
    "producer_byte_rate",
    "consumer_byte_rate",
    "request_percentage",
    "controller_mutation_rate",
];

pub(crate) async fn page(ctx: Ctx, uri: Uri) -> Response {
    let q = Fields::from_query(uri.query());
    let mut body = html::notice(q.get("msg"), q.get("err"));
    body.push_str(&acls(&ctx).await);
    body.push_str(&users(&ctx).await);
    body.push_str(&quotas(&ctx).await);
    html::page(&ctx.frame(), "/security", "Security", &body)
}

/// Words a screen reader says and the page does not show (what a "Remove" removes).
fn unseen(text: &str) -> String {
    format!("<span class=\"visually-hidden\">{}</span>", esc(text))
}

fn hidden(name: &str, value: &str) -> String {
    format!(
        "<input type=\"hidden\" name=\"{name}\" value=\"{}\">",
        esc(value)
    )
}

async fn acls(ctx: &Ctx) -> String {
    let mut out = String::from("<section aria-labelledby=\"acls\"><h2 id=\"acls\">ACLs</h2>");
    match ctx.admin().describe_acls(&AclFilter::any()).await {
        Ok(mut list) if !list.is_empty() => {
            list.sort_by(|a, b| {
                (&a.principal, a.resource_type, &a.resource_name).cmp(&(
                    &b.principal,
                    b.resource_type,
                    &b.resource_name,
                ))
            });
            out.push_str("<table><thead><tr><th scope=\"col\">Principal</th><th scope=\"col\">Host</th><th scope=\"col\">Permission</th><th scope=\"col\">Operation</th><th scope=\"col\">Resource</th><th scope=\"col\">Name</th><th scope=\"col\">Pattern</th>");
            if ctx.can_change() {
                out.push_str(
                    "<th scope=\"col\"><span class=\"visually-hidden\">Action</span></th>",
                );
            }
            out.push_str("</tr></thead><tbody>");
            for b in list {
                let _ = write!(
                    out,
                    "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>",
                    esc(&b.principal),
                    esc(&b.host),
                    permission::name(b.permission),
                    op::name(b.operation),
                    resource::name(b.resource_type),
                    esc(&b.resource_name),
                    pattern::name(b.pattern_type),
                );
                if ctx.can_change() {
                    let _ = write!(
                        out,
                        "<td><form method=\"post\" action=\"/security/acls/delete\">{}{}{}{}{}{}{}{}<button type=\"submit\" class=\"link\">Remove{}</button></form></td>",
                        ctx.csrf_field(),
                        hidden("resource_type", &b.resource_type.to_string()),
                        hidden("resource_name", &b.resource_name),
                        hidden("pattern_type", &b.pattern_type.to_string()),
                        hidden("principal", &b.principal),
                        hidden("host", &b.host),
                        hidden("operation", &b.operation.to_string()),
                        hidden("permission", &b.permission.to_string()),
                        unseen(&format!(" the ACL of {} on {}", b.principal, b.resource_name)),
                    );
                }
                out.push_str("</tr>");
            }
            out.push_str("</tbody></table>");
        }
        Ok(_) => out.push_str("<p class=\"empty\">No ACLs.</p>"),
        Err(e) => out.push_str(&html::error_box("Cannot list the ACLs", &failure(&e))),
    }
    if ctx.can_change() {
        let resources: String = RESOURCES
            .iter()
            .map(|r| format!("<option value=\"{r}\">{}</option>", resource::name(*r)))
            .collect();
        let ops: String = [
            op::READ,
            op::WRITE,
            op::CREATE,
            op::DELETE,
            op::ALTER,
            op::DESCRIBE,
            op::DESCRIBE_CONFIGS,
            op::ALTER_CONFIGS,
            op::IDEMPOTENT_WRITE,
            op::CLUSTER_ACTION,
            op::ALL,
        ]
        .iter()
        .map(|o| format!("<option value=\"{o}\">{}</option>", op::name(*o)))
        .collect();
        let _ = write!(
            out,
            "<h3>Add an ACL</h3><form method=\"post\" action=\"/security/acls\" class=\"inline\">{}\
<label>Principal <input name=\"principal\" placeholder=\"User:alice\" required></label>\
<label>Host <input name=\"host\" value=\"*\" required></label>\
<label>Permission <select name=\"permission\"><option value=\"{}\">ALLOW</option><option value=\"{}\">DENY</option></select></label>\
<label>Operation <select name=\"operation\">{ops}</select></label>\
<label>Resource <select name=\"resource_type\">{resources}</select></label>\
<label>Name <input name=\"resource_name\" placeholder=\"orders, or * for all\" required></label>\
<label>Pattern <select name=\"pattern_type\"><option value=\"{}\">LITERAL</option><option value=\"{}\">PREFIXED</option></select></label>\
<button type=\"submit\">Add ACL</button></form>",
            ctx.csrf_field(),
            permission::ALLOW,
            permission::DENY,
            pattern::LITERAL,
            pattern::PREFIXED,
        );
    }
    out.push_str("</section>");
    out
}

fn binding(form: &Fields) -> Result<AclBinding, String> {
    let code = |k: &str| {
        form.get(k)
            .parse::<i8>()
            .map_err(|_| format!("{k} is not one of the choices"))
    };
    let resource_type = code("resource_type")?;
    let resource_name = if resource_type == resource::CLUSTER {
        sluice_client::acl::CLUSTER_NAME.to_string()
    } else {
        form.get("resource_name").to_string()
    };
    Ok(AclBinding {
        resource_type,
        resource_name,
        pattern_type: code("pattern_type")?,
        principal: form.get("principal").to_string(),
        host: form.get("host").to_string(),
        operation: code("operation")?,
        permission: code("permission")?,
    })
}

pub(crate) async fn add_acl(Change(ctx, form): Change) -> Response {
    let b = match binding(&form) {
        Ok(b) => b,
        Err(e) => return html::redirect_with(BACK, "err", &e),
    };
    match ctx.admin().create_acls(std::slice::from_ref(&b)).await {
        Ok(r) => match r.into_iter().next() {
            Some(Ok(())) | None => {
                html::redirect_with(BACK, "msg", &format!("ACL added for {}.", b.principal))
            }
            Some(Err(e)) => html::redirect_with(BACK, "err", &failure(&e)),
        },
        Err(e) => html::redirect_with(BACK, "err", &failure(&e)),
    }
}

pub(crate) async fn delete_acl(Change(ctx, form): Change) -> Response {
    let b = match binding(&form) {
        Ok(b) => b,
        Err(e) => return html::redirect_with(BACK, "err", &e),
    };
    match ctx.admin().delete_acls(&[AclFilter::exact(&b)]).await {
        Ok(r) => match r.into_iter().next() {
            Some(Ok(removed)) => html::redirect_with(
                BACK,
                "msg",
                &format!("{} ACL(s) of {} removed.", removed.len(), b.principal),
            ),
            Some(Err(e)) => html::redirect_with(BACK, "err", &failure(&e)),
            None => html::redirect_with(BACK, "err", "The broker did not answer."),
        },
        Err(e) => html::redirect_with(BACK, "err", &failure(&e)),
    }
}

async fn users(ctx: &Ctx) -> String {
    let mut out =
        String::from("<section aria-labelledby=\"users\"><h2 id=\"users\">SCRAM users</h2>");
    match ctx.admin().describe_user_scram_credentials(&[]).await {
        Ok(list) if !list.is_empty() => {
            out.push_str("<table><thead><tr><th scope=\"col\">User</th><th scope=\"col\">Mechanism</th><th scope=\"col\">Iterations</th>");
            if ctx.can_change() {
                out.push_str(
                    "<th scope=\"col\"><span class=\"visually-hidden\">Action</span></th>",
                );
            }
            out.push_str("</tr></thead><tbody>");
            for (user, creds) in list {
                let Ok(creds) = creds else { continue };
                for (mechanism, iterations) in creds {
                    let _ = write!(
                        out,
                        "<tr><td>{}</td><td>{}</td><td>{iterations}</td>",
                        esc(&user),
                        mechanism.name()
                    );
                    if ctx.can_change() {
                        let _ = write!(
                            out,
                            "<td><form method=\"post\" action=\"/security/users/delete\">{}{}{}<button type=\"submit\" class=\"link\">Remove{}</button></form></td>",
                            ctx.csrf_field(),
                            hidden("user", &user),
                            hidden("mechanism", mechanism.name()),
                            unseen(&format!(" {} of {user}", mechanism.name())),
                        );
                    }
                    out.push_str("</tr>");
                }
            }
            out.push_str("</tbody></table>");
        }
        Ok(_) => out.push_str("<p class=\"empty\">No SCRAM users.</p>"),
        Err(e) => out.push_str(&html::error_box(
            "Cannot list the SCRAM users",
            &failure(&e),
        )),
    }
    if ctx.can_change() {
        let _ = write!(
            out,
            "<h3>Add a user or change a password</h3><form method=\"post\" action=\"/security/users\" class=\"inline\">{}\
<label>User <input name=\"user\" required autocomplete=\"off\"></label>\
<label>Mechanism <select name=\"mechanism\"><option value=\"SCRAM-SHA-256\">SCRAM-SHA-256</option><option value=\"SCRAM-SHA-512\">SCRAM-SHA-512</option></select></label>\
<label>Password <input name=\"password\" type=\"password\" required autocomplete=\"new-password\"></label>\
<label>Iterations <input name=\"iterations\" type=\"number\" min=\"4096\" value=\"8192\"></label>\
<button type=\"submit\">Save user</button></form>",
            ctx.csrf_field()
        );
    }
    out.push_str("</section>");
    out
}

fn mechanism(form: &Fields) -> Result<ScramMechanism, String> {
    ScramMechanism::from_name(form.get("mechanism"))
        .ok_or_else(|| "the mechanism must be SCRAM-SHA-256 or SCRAM-SHA-512".to_string())
}

async fn alter_users(ctx: &Ctx, change: ScramAlteration, done: String) -> Response {
    match ctx.admin().alter_user_scram_credentials(&[change]).await {
        Ok(r) => match r.into_iter().next() {
            Some((_, Ok(()))) | None => html::redirect_with(BACK, "msg", &done),
            Some((_, Err(e))) => html::redirect_with(BACK, "err", &failure(&e)),
        },
        Err(e) => html::redirect_with(BACK, "err", &failure(&e)),
    }
}

pub(crate) async fn upsert_user(Change(ctx, form): Change) -> Response {
    let change = (|| {
        Ok::<_, String>(ScramAlteration::Upsert {
            user: form.get("user").to_string(),
            mechanism: mechanism(&form)?,
            password: form.raw("password").unwrap_or("").to_string(),
            iterations: form.number("iterations", 8192)?,
        })
    })();
    match change {
        Ok(c) => {
            let done = format!("User {} saved.", form.get("user"));
            alter_users(&ctx, c, done).await
        }
        Err(e) => html::redirect_with(BACK, "err", &e),
    }
}

pub(crate) async fn delete_user(Change(ctx, form): Change) -> Response {
    match mechanism(&form) {
        Ok(m) => {
            let user = form.get("user").to_string();
            let done = format!("{} credential of {user} removed.", m.name());
            alter_users(&ctx, ScramAlteration::Delete { user, mechanism: m }, done).await
        }
        Err(e) => html::redirect_with(BACK, "err", &e),
    }
}

fn entity_fields(e: &QuotaEntity) -> String {
    let part = |name: &str, v: &Option<Option<String>>| match v {
        None => String::new(),
        Some(None) => hidden(name, "<default>"),
        Some(Some(n)) => hidden(name, n),
    };
    part("user", &e.user) + &part("client_id", &e.client_id)
}

async fn quotas(ctx: &Ctx) -> String {
    let mut out =
        String::from("<section aria-labelledby=\"quotas\"><h2 id=\"quotas\">Client quotas</h2>");
    match ctx.admin().describe_client_quotas(&[], false).await {
        Ok(list) if !list.is_empty() => {
            out.push_str("<table><thead><tr><th scope=\"col\">Entity</th><th scope=\"col\">Quota</th><th scope=\"col\">Value</th>");
            if ctx.can_change() {
                out.push_str(
                    "<th scope=\"col\"><span class=\"visually-hidden\">Action</span></th>",
                );
            }
            out.push_str("</tr></thead><tbody>");
            for (entity, values) in list {
                for (key, value) in values {
                    let _ = write!(
                        out,
                        "<tr><td>{}</td><td><code>{}</code></td><td>{value}</td>",
                        esc(&entity.describe()),
                        esc(&key)
                    );
                    if ctx.can_change() {
                        let _ = write!(
                            out,
                            "<td><form method=\"post\" action=\"/security/quotas/delete\">{}{}{}<button type=\"submit\" class=\"link\">Remove{}</button></form></td>",
                            ctx.csrf_field(),
                            entity_fields(&entity),
                            hidden("key", &key),
                            unseen(&format!(" {key} of {}", entity.describe())),
                        );
                    }
                    out.push_str("</tr>");
                }
            }
            out.push_str("</tbody></table>");
        }
        Ok(_) => out.push_str("<p class=\"empty\">No client quotas.</p>"),
        Err(e) => out.push_str(&html::error_box("Cannot list the quotas", &failure(&e))),
    }
    if ctx.can_change() {
        let keys: String = QUOTA_KEYS
            .iter()
            .map(|k| format!("<option value=\"{k}\">{k}</option>"))
            .collect();
        let _ = write!(
            out,
            "<h3>Set a quota</h3><form method=\"post\" action=\"/security/quotas\" class=\"inline\">{}\
<label>User <input name=\"user\" placeholder=\"alice, &lt;default&gt;, or empty\"></label>\
<label>Client id <input name=\"client_id\" placeholder=\"app-1, &lt;default&gt;, or empty\"></label>\
<label>Quota <select name=\"key\">{keys}</select></label>\
<label>Value <input name=\"value\" required inputmode=\"decimal\"></label>\
<button type=\"submit\">Set quota</button></form>",
            ctx.csrf_field()
        );
    }
    out.push_str("</section>");
    out
}

/// The entity a quota form names: empty fields are left out, `<default>` is the default.
fn entity(form: &Fields) -> Result<QuotaEntity, String> {
    let part = |k: &str| match form.get(k) {
        "" => None,
        "<default>" => Some(None),
        n => Some(Some(n.to_string())),
    };
    let e = QuotaEntity {
        user: part("user"),
        client_id: part("client_id"),
    };
    if e.user.is_none() && e.client_id.is_none() {
        return Err("Name a user, a client id, or both.".into());
    }
    Ok(e)
}

async fn alter_quota(ctx: &Ctx, form: &Fields, value: Option<f64>) -> Response {
    let e = match entity(form) {
        Ok(e) => e,
        Err(e) => return html::redirect_with(BACK, "err", &e),
    };
    let key = form.get("key").to_string();
    match ctx
        .admin()
        .alter_client_quotas(&e, &[(key.clone(), value)])
        .await
    {
        Ok(()) => html::redirect_with(
            BACK,
            "msg",
            &match value {
                Some(v) => format!("{key} of {} set to {v}.", e.describe()),
                None => format!("{key} of {} removed.", e.describe()),
            },
        ),
        Err(err) => html::redirect_with(BACK, "err", &failure(&err)),
    }
}

pub(crate) async fn set_quota(Change(ctx, form): Change) -> Response {
    match form.get("value").parse::<f64>() {
        Ok(v) if v.is_finite() => alter_quota(&ctx, &form, Some(v)).await,
        _ => html::redirect_with(
            BACK,
            "err",
            &format!("'{}' is not a number", form.get("value")),
        ),
    }
}

pub(crate) async fn remove_quota(Change(ctx, form): Change) -> Response {
    alter_quota(&ctx, &form, None).await
}
