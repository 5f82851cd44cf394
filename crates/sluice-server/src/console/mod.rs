//! # Layout
//!
//! The web console, served at `/` by the admin HTTP listener: server-rendered HTML pages
//! (no JavaScript needed) over the node's own Kafka listener.
//!
//! - `mod.rs` — the router, sessions (a cookie; who signed in; the CSRF token), and the
//!   Kafka clients a request uses.
//! - `form.rs` — query strings and form bodies.
//! - `html.rs` — escaping, the page frame, formatting of bytes, counts and times.
//! - `overview.rs`, `topics.rs`, `messages.rs`, `groups.rs`, `schemas.rs`, `security.rs` —
//!   the pages (`schemas.rs` reads the node's schema registry over its REST API).
//!
//! The console is a Kafka client of the node that serves it (`admin.http.console.listener`,
//! by default the first SASL_PLAINTEXT listener, else the first PLAINTEXT one): every page is made of Kafka
//! requests, so any node shows the whole cluster, the broker's own validation messages are
//! what the page shows, and on a SASL listener the console signs in as the user who signed
//! in to it: ACLs apply to what they see and do, and a topic or group they may not describe
//! is not listed (Metadata and ListGroups leave it out, as for any client).
//!
//! Mutations are POST forms carrying the session's CSRF token (and refused when the
//! browser says the request comes from another origin); with
//! `admin.http.console.read.only=true` no form that changes the cluster is shown and every
//! such POST is refused.

mod form;
mod groups;
mod html;
mod messages;
mod overview;
mod schemas;
mod security;
mod topics;

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::extract::{FromRequest, FromRequestParts, Request, State};
use axum::http::request::Parts;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode, Uri};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use sluice_client::{Admin, ClientConfig, Producer};

pub(crate) use overview::SAMPLE_EVERY;

use form::Fields;
use html::{esc, Frame};

/// How the console reaches the cluster (from the node's config).
#[derive(Clone, Debug)]
pub struct ConsoleConfig {
    /// The listener's address, as a client connects to it.
    pub bootstrap: String,
    /// Whether that listener authenticates with SASL (then the console asks who signs in).
    pub sasl: bool,
    /// The SASL mechanisms the sign-in form offers (those of the listener it can speak).
    pub sasl_mechanisms: Vec<String>,
    /// `admin.http.console.read.only`
    pub read_only: bool,
    /// Why the console cannot work on this node (shown instead of every page).
    pub problem: Option<String>,
    /// The node's schema registry (its URL, and a client that trusts its TLS), if it runs
    /// one.
    pub registry: Option<(String, reqwest::Client)>,
}

/// Sessions idle this long are forgotten (the user signs in again).
const SESSION_IDLE: Duration = Duration::from_secs(30 * 60);
/// Sessions kept at most: the oldest go first.
const SESSIONS_MAX: usize = 1024;
/// How long a page waits for the cluster before it shows an error.
const REQUEST_TIMEOUT_MS: &str = "10000";
const COOKIE: &str = "sluice_console";

/// Who a session acts as.
struct Auth {
    /// `User:alice`, or `User:ANONYMOUS` on a listener without SASL.
    principal: String,
    /// The SASL settings its clients use (None: no SASL).
    sasl: Option<Credentials>,
    admin: Admin,
    /// Made at the first test message, then kept for the session's next ones.
    producer: Mutex<Option<Arc<Producer>>>,
}

#[derive(Clone)]
struct Credentials {
    mechanism: String,
    username: String,
    password: String,
}

struct Session {
    csrf: String,
    auth: Option<Arc<Auth>>,
    last_used: Instant,
}

/// The console's state, shared by every request (owned by the admin HTTP listener's task).
pub(crate) struct Console {
    config: ConsoleConfig,
    node_id: i32,
    sessions: Mutex<HashMap<String, Session>>,
    /// On a listener without SASL every session acts as ANONYMOUS through one client.
    anonymous: Mutex<Option<Arc<Auth>>>,
    /// This node's traffic, sampled from its own metrics (see `overview`).
    pub(crate) traffic: Mutex<VecDeque<overview::Sample>>,
}

/// What a page handler gets: who acts, and how to render the frame.
pub(crate) struct Ctx {
    auth: Arc<Auth>,
    csrf: String,
    read_only: bool,
    show_principal: bool,
    console: Arc<Console>,
}

impl Ctx {
    pub fn admin(&self) -> &Admin {
        &self.auth.admin
    }

    pub fn frame(&self) -> Frame<'_> {
        Frame {
            principal: self.show_principal.then_some(self.auth.principal.as_str()),
            csrf: &self.csrf,
            read_only: self.read_only,
        }
    }

    pub fn csrf_field(&self) -> String {
        html::csrf_field(&self.csrf)
    }

    /// Whether forms that change the cluster are shown.
    pub fn can_change(&self) -> bool {
        !self.read_only
    }

    /// A client config acting as this session's user (for producers and consumers).
    pub fn client_config(&self) -> Result<ClientConfig, String> {
        self.console.client_config(self.auth.sasl.as_ref())
    }

    /// The session's producer (acks=all, idempotent): made once, kept for its later
    /// test messages.
    pub fn producer(&self) -> Result<Arc<Producer>, String> {
        let mut slot = self
            .auth
            .producer
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(p) = slot.as_ref() {
            return Ok(Arc::clone(p));
        }
        let config = [
            ("acks", "all"),
            ("delivery.timeout.ms", "10000"),
            ("linger.ms", "0"),
        ]
        .into_iter()
        .try_fold(self.client_config()?, |c, (k, v)| c.set(k, v))
        .map_err(|e| e.to_string())?;
        let p = Arc::new(Producer::new(config).map_err(|e| e.to_string())?);
        *slot = Some(Arc::clone(&p));
        Ok(p)
    }

    pub fn node_id(&self) -> i32 {
        self.console.node_id
    }

    pub fn console(&self) -> &Console {
        &self.console
    }
}

impl Console {
    /// The node's schema registry URL and a client for it.
    pub(crate) fn registry(&self) -> Option<(&str, &reqwest::Client)> {
        self.config
            .registry
            .as_ref()
            .map(|(url, client)| (url.as_str(), client))
    }
}

/// The session id in the request's cookie, set by the middleware.
#[derive(Clone)]
struct SessionId(String);

fn new_token() -> String {
    format!(
        "{}{}",
        uuid::Uuid::new_v4().simple(),
        uuid::Uuid::new_v4().simple()
    )
}

impl Console {
    fn new(config: ConsoleConfig, node_id: i32) -> Console {
        Console {
            config,
            node_id,
            sessions: Mutex::new(HashMap::new()),
            anonymous: Mutex::new(None),
            traffic: Mutex::new(VecDeque::new()),
        }
    }

    fn client_config(&self, sasl: Option<&Credentials>) -> Result<ClientConfig, String> {
        let mut c = ClientConfig::new(&self.config.bootstrap)
            .set("client.id", "sluice-console")
            .and_then(|c| c.set("request.timeout.ms", REQUEST_TIMEOUT_MS))
            .and_then(|c| c.set("socket.connection.setup.timeout.ms", "5000"))
            .map_err(|e| e.to_string())?;
        if let Some(s) = sasl {
            c = c
                .set("security.protocol", "SASL_PLAINTEXT")
                .and_then(|c| c.set("sasl.mechanism", &s.mechanism))
                .and_then(|c| c.set("sasl.username", &s.username))
                .and_then(|c| c.set("sasl.password", &s.password))
                .map_err(|e| e.to_string())?;
        }
        Ok(c)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Session>> {
        self.sessions
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// A new session (not signed in). Idle sessions make room, then the oldest of those
    /// nobody signed in to (so a flood of cookieless requests cannot sign users out), then
    /// the oldest.
    fn create_session(&self) -> String {
        let id = new_token();
        let mut sessions = self.lock();
        let now = Instant::now();
        sessions.retain(|_, s| now.duration_since(s.last_used) < SESSION_IDLE);
        while sessions.len() >= SESSIONS_MAX {
            let oldest = sessions
                .iter()
                .min_by_key(|(_, s)| (s.auth.is_some(), s.last_used))
                .map(|(k, _)| k.clone());
            match oldest {
                Some(k) => sessions.remove(&k),
                None => break,
            };
        }
        sessions.insert(
            id.clone(),
            Session {
                csrf: new_token(),
                auth: None,
                last_used: now,
            },
        );
        id
    }

    /// The session's CSRF token and who it acts as; None when the session is unknown.
    fn touch(&self, id: &str) -> Option<(String, Option<Arc<Auth>>)> {
        let mut sessions = self.lock();
        let s = sessions.get_mut(id)?;
        if s.last_used.elapsed() >= SESSION_IDLE {
            sessions.remove(id);
            return None;
        }
        s.last_used = Instant::now();
        Some((s.csrf.clone(), s.auth.clone()))
    }

    fn anonymous(&self) -> Result<Arc<Auth>, String> {
        let mut slot = self
            .anonymous
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(a) = slot.as_ref() {
            return Ok(Arc::clone(a));
        }
        let admin = Admin::new(self.client_config(None)?).map_err(|e| e.to_string())?;
        let auth = Arc::new(Auth {
            principal: "User:ANONYMOUS".into(),
            sasl: None,
            admin,
            producer: Mutex::new(None),
        });
        *slot = Some(Arc::clone(&auth));
        Ok(auth)
    }

    /// The context of a page request, or the response to give instead (sign in first; the
    /// console cannot work here).
    fn ctx(self: &Arc<Self>, sid: &SessionId) -> Result<Ctx, Box<Response>> {
        if let Some(problem) = &self.config.problem {
            return Err(Box::new(html::bare_page(
                StatusCode::SERVICE_UNAVAILABLE,
                "The console is not available",
                &format!("<p class=\"error\" role=\"alert\">{}</p>", esc(problem)),
            )));
        }
        let Some((csrf, auth)) = self.touch(&sid.0) else {
            return Err(Box::new(html::redirect("/login")));
        };
        let auth = match auth {
            Some(a) => a,
            None if self.config.sasl => return Err(Box::new(html::redirect("/login"))),
            None => self.anonymous().map_err(|e| {
                Box::new(html::bare_page(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "The console is not available",
                    &html::error_box("Cannot make a client", &e),
                ))
            })?,
        };
        Ok(Ctx {
            auth,
            csrf,
            read_only: self.config.read_only,
            show_principal: self.config.sasl,
            console: Arc::clone(self),
        })
    }

    /// The context of a form that changes the cluster: as [`Console::ctx`]; refused in
    /// read-only mode, and the form must carry the session's CSRF token and not come
    /// from another site.
    fn post_ctx(
        self: &Arc<Self>,
        sid: &SessionId,
        headers: &HeaderMap,
        form: &Fields,
    ) -> Result<Ctx, Box<Response>> {
        let ctx = self.ctx(sid)?;
        if ctx.read_only {
            return Err(Box::new(html::page_with_status(
                StatusCode::FORBIDDEN,
                &ctx.frame(),
                "",
                "Read-only console",
                "<p class=\"error\" role=\"alert\">This console is read-only (admin.http.console.read.only=true): it changes nothing.</p>",
            )));
        }
        if !same_origin(headers) || !constant_time_eq(form.get("csrf"), &ctx.csrf) {
            return Err(Box::new(html::page_with_status(
                StatusCode::FORBIDDEN,
                &ctx.frame(),
                "",
                "Request refused",
                "<p class=\"error\" role=\"alert\">This form is out of date or came from another site. Go back, reload the page and try again.</p>",
            )));
        }
        Ok(ctx)
    }
}

/// Browsers say where a form comes from; one from another origin is refused (the CSRF token
/// is the main defence, this the second).
fn same_origin(headers: &HeaderMap) -> bool {
    if let Some(site) = headers.get("sec-fetch-site").and_then(|v| v.to_str().ok()) {
        if !matches!(site, "same-origin" | "none") {
            return false;
        }
    }
    let Some(origin) = headers.get(header::ORIGIN).and_then(|v| v.to_str().ok()) else {
        return true;
    };
    let host = headers
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    origin
        .strip_prefix("http://")
        .or_else(|| origin.strip_prefix("https://"))
        .is_some_and(|o| o == host)
}

fn constant_time_eq(a: &str, b: &str) -> bool {
    a.len() == b.len()
        && a.bytes()
            .zip(b.bytes())
            .fold(0u8, |acc, (x, y)| acc | (x ^ y))
            == 0
}

fn cookie_session(headers: &HeaderMap) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|c| c.trim().split_once('='))
        .find(|(k, _)| *k == COOKIE)
        .map(|(_, v)| v.to_string())
}

fn set_cookie(resp: &mut Response, id: &str) {
    let cookie = format!("{COOKIE}={id}; Path=/; HttpOnly; SameSite=Strict");
    if let Ok(v) = HeaderValue::from_str(&cookie) {
        resp.headers_mut().append(header::SET_COOKIE, v);
    }
}

/// Every console request has a session: one is made (and its cookie set) when the browser
/// brings none or an unknown one.
async fn with_session(State(c): State<Arc<Console>>, mut req: Request, next: Next) -> Response {
    let known = cookie_session(req.headers()).filter(|id| c.touch(id).is_some());
    let (id, fresh) = match known {
        Some(id) => (id, false),
        None => (c.create_session(), true),
    };
    req.extensions_mut().insert(SessionId(id.clone()));
    let mut resp = next.run(req).await;
    if fresh {
        set_cookie(&mut resp, &id);
    }
    resp
}

/// The console's routes (merged into the admin HTTP listener's).
pub(crate) fn router(config: ConsoleConfig, node_id: i32) -> (Router, Arc<Console>) {
    let console = Arc::new(Console::new(config, node_id));
    let pages = Router::new()
        .route("/", get(overview::page))
        .route("/login", get(login_page).post(login))
        .route("/logout", post(logout))
        .route("/topics", get(topics::list).post(topics::create))
        .route("/topics/{name}", get(topics::show))
        .route("/topics/{name}/delete", post(topics::delete))
        .route("/topics/{name}/partitions", post(topics::add_partitions))
        .route("/topics/{name}/configs", post(topics::alter_config))
        .route("/topics/{name}/produce", post(topics::produce))
        .route("/topics/{name}/messages", get(messages::page))
        .route("/groups", get(groups::list))
        .route("/groups/{id}", get(groups::show))
        .route("/groups/{id}/reset", post(groups::reset))
        .route("/schemas", get(schemas::list))
        .route("/schemas/{subject}", get(schemas::show))
        .route("/security", get(security::page))
        .route("/security/acls", post(security::add_acl))
        .route("/security/acls/delete", post(security::delete_acl))
        .route("/security/users", post(security::upsert_user))
        .route("/security/users/delete", post(security::delete_user))
        .route("/security/quotas", post(security::set_quota))
        .route("/security/quotas/delete", post(security::remove_quota))
        .route("/brokers", get(overview::brokers))
        .route("/brokers/{id}", get(overview::broker))
        .layer(middleware::from_fn_with_state(
            Arc::clone(&console),
            with_session,
        ))
        .route("/console.css", get(stylesheet))
        .route("/api/traffic", get(overview::traffic_json))
        .with_state(Arc::clone(&console));
    (pages, console)
}

async fn stylesheet() -> Response {
    (
        [
            (header::CONTENT_TYPE, "text/css; charset=utf-8"),
            (header::CACHE_CONTROL, "max-age=3600"),
        ],
        include_str!("assets/console.css"),
    )
        .into_response()
}

type Sid = axum::Extension<SessionId>;

async fn login_page(
    State(c): State<Arc<Console>>,
    axum::Extension(sid): Sid,
    uri: Uri,
) -> Response {
    if !c.config.sasl {
        return html::redirect("/");
    }
    let q = Fields::from_query(uri.query());
    let csrf = c.touch(&sid.0).map(|(t, _)| t).unwrap_or_default();
    login_form(&c, &csrf, q.get("err"), StatusCode::OK)
}

fn login_form(c: &Console, csrf: &str, err: &str, status: StatusCode) -> Response {
    let options: String = c
        .config
        .sasl_mechanisms
        .iter()
        .map(|m| format!("<option value=\"{m}\">{m}</option>", m = esc(m)))
        .collect();
    let body = format!(
        "{notice}<p>This cluster authenticates its clients: sign in with your Kafka user. The console then acts as you, and your ACLs apply.</p>\
<form method=\"post\" action=\"/login\" class=\"stack\">{csrf}\
<label>User name <input name=\"username\" autocomplete=\"username\" required autofocus></label>\
<label>Password <input name=\"password\" type=\"password\" autocomplete=\"current-password\" required></label>\
<label>Mechanism <select name=\"mechanism\">{options}</select></label>\
<button type=\"submit\">Sign in</button></form>",
        notice = html::notice("", err),
        csrf = html::csrf_field(csrf),
    );
    html::bare_page(status, "Sign in", &body)
}

async fn login(
    State(c): State<Arc<Console>>,
    axum::Extension(sid): Sid,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let form = Fields::from_body(&body);
    let Some((csrf, _)) = c.touch(&sid.0) else {
        return html::redirect("/login");
    };
    if !c.config.sasl {
        return html::redirect("/");
    }
    if !same_origin(&headers) || !constant_time_eq(form.get("csrf"), &csrf) {
        return login_form(
            &c,
            &csrf,
            "This form is out of date: try again.",
            StatusCode::FORBIDDEN,
        );
    }
    let mechanism = form.get("mechanism").to_string();
    if !c.config.sasl_mechanisms.contains(&mechanism) {
        return login_form(
            &c,
            &csrf,
            "Choose one of the mechanisms offered.",
            StatusCode::BAD_REQUEST,
        );
    }
    let creds = Credentials {
        mechanism,
        username: form.get("username").to_string(),
        password: form.raw("password").unwrap_or("").to_string(),
    };
    let admin = match c
        .client_config(Some(&creds))
        .and_then(|cfg| Admin::new(cfg).map_err(|e| e.to_string()))
    {
        Ok(a) => a,
        Err(e) => return login_form(&c, &csrf, &e, StatusCode::BAD_REQUEST),
    };
    // A request every authenticated client may make proves the credentials.
    if let Err(e) = admin.list_topics(false).await {
        let text = match e {
            sluice_client::Error::Authentication(_) => {
                "Sign-in failed: wrong user name or password.".to_string()
            }
            other => format!("Sign-in failed: {other}"),
        };
        return login_form(&c, &csrf, &text, StatusCode::UNAUTHORIZED);
    }
    let auth = Arc::new(Auth {
        principal: format!("User:{}", creds.username),
        sasl: Some(creds),
        admin,
        producer: Mutex::new(None),
    });
    // A new session id at sign-in: one planted before cannot be ridden afterwards.
    let id = c.create_session();
    {
        let mut sessions = c.lock();
        sessions.remove(&sid.0);
        if let Some(s) = sessions.get_mut(&id) {
            s.auth = Some(auth);
        }
    }
    let mut resp = html::redirect("/");
    set_cookie(&mut resp, &id);
    resp
}

async fn logout(
    State(c): State<Arc<Console>>,
    axum::Extension(sid): Sid,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let form = Fields::from_body(&body);
    if let Some((csrf, _)) = c.touch(&sid.0) {
        if same_origin(&headers) && constant_time_eq(form.get("csrf"), &csrf) {
            c.lock().remove(&sid.0);
        }
    }
    html::redirect(if c.config.sasl { "/login" } else { "/" })
}

/// Why a Kafka call failed, for a page: the broker's message when it gave one.
pub(crate) fn failure(e: &sluice_client::Error) -> String {
    use sluice_client::Error as E;
    use sluice_protocol::ErrorCode as C;
    match e {
        E::Kafka { code, message } => {
            let what = match code {
                C::TopicAuthorizationFailed
                | C::GroupAuthorizationFailed
                | C::ClusterAuthorizationFailed
                | C::TransactionalIdAuthorizationFailed => {
                    "You are not allowed to do this (an ACL denies it)".to_string()
                }
                other => format!("{other:?}"),
            };
            match message.as_deref().filter(|m| !m.is_empty()) {
                Some(m) => format!("{what}: {m}"),
                None => what,
            }
        }
        E::Connection { .. } | E::Timeout(_) => format!("The cluster does not answer ({e})"),
        other => other.to_string(),
    }
}

/// Form bodies above this are refused (a test message's value is the largest field).
const FORM_MAX_BYTES: usize = 4 * 1024 * 1024;

/// The session the middleware put on the request; without one, sign in.
fn session_of(parts: &Parts) -> Result<SessionId, Box<Response>> {
    parts
        .extensions
        .get::<SessionId>()
        .cloned()
        .ok_or_else(|| Box::new(html::redirect("/login")))
}

/// A page request: who acts (signed in, or sent to sign in first).
impl FromRequestParts<Arc<Console>> for Ctx {
    type Rejection = Response;

    async fn from_request_parts(
        parts: &mut Parts,
        console: &Arc<Console>,
    ) -> Result<Self, Self::Rejection> {
        let sid = session_of(parts).map_err(|r| *r)?;
        console.ctx(&sid).map_err(|r| *r)
    }
}

/// A form that changes the cluster: who acts, and the form's fields (refused in read-only
/// mode, without the session's CSRF token, or from another site).
pub(crate) struct Change(pub Ctx, pub Fields);

impl FromRequest<Arc<Console>> for Change {
    type Rejection = Response;

    async fn from_request(req: Request, console: &Arc<Console>) -> Result<Self, Self::Rejection> {
        let (parts, body) = req.into_parts();
        let sid = session_of(&parts).map_err(|r| *r)?;
        let Ok(bytes) = axum::body::to_bytes(body, FORM_MAX_BYTES).await else {
            return Err((
                StatusCode::PAYLOAD_TOO_LARGE,
                format!("a form of at most {FORM_MAX_BYTES} bytes\n"),
            )
                .into_response());
        };
        let form = Fields::from_body(&bytes);
        let ctx = console
            .post_ctx(&sid, &parts.headers, &form)
            .map_err(|r| *r)?;
        Ok(Change(ctx, form))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn console() -> Console {
        Console::new(
            ConsoleConfig {
                bootstrap: "127.0.0.1:1".into(),
                sasl: true,
                sasl_mechanisms: vec!["PLAIN".into()],
                read_only: false,
                problem: None,
                registry: None,
            },
            0,
        )
    }

    #[tokio::test]
    async fn sessions_are_bounded_and_signed_in_ones_outlive_a_flood() {
        let c = console();
        let signed = c.create_session();
        let admin = Admin::new(c.client_config(None).unwrap()).unwrap();
        c.lock().get_mut(&signed).unwrap().auth = Some(Arc::new(Auth {
            principal: "User:alice".into(),
            sasl: None,
            admin,
            producer: Mutex::new(None),
        }));
        let first_anonymous = c.create_session();
        for _ in 0..SESSIONS_MAX * 2 {
            c.create_session();
        }
        assert_eq!(c.lock().len(), SESSIONS_MAX);
        assert!(c.touch(&signed).is_some_and(|(_, auth)| auth.is_some()));
        assert!(c.touch(&first_anonymous).is_none());
        assert!(c.touch("not-a-session").is_none());
        let (csrf, _) = c.touch(&signed).unwrap();
        assert_eq!(csrf.len(), 64);
        assert_ne!(csrf, signed);
    }

    #[test]
    fn forms_from_another_origin_are_refused() {
        let headers = |pairs: &[(&'static str, &'static str)]| {
            let mut h = HeaderMap::new();
            for (k, v) in pairs {
                h.insert(*k, HeaderValue::from_static(v));
            }
            h
        };
        assert!(same_origin(&headers(&[("host", "127.0.0.1:9644")])));
        assert!(same_origin(&headers(&[
            ("host", "127.0.0.1:9644"),
            ("origin", "http://127.0.0.1:9644"),
            ("sec-fetch-site", "same-origin"),
        ])));
        assert!(!same_origin(&headers(&[
            ("host", "127.0.0.1:9644"),
            ("origin", "http://evil.example"),
        ])));
        assert!(!same_origin(&headers(&[
            ("host", "127.0.0.1:9644"),
            ("sec-fetch-site", "cross-site"),
        ])));
        assert!(!same_origin(&headers(&[
            ("host", "127.0.0.1:9644"),
            ("origin", "null"),
        ])));
        assert!(constant_time_eq("abc", "abc"));
        assert!(!constant_time_eq("abc", "abd"));
        assert!(!constant_time_eq("abc", "ab"));
    }
}
