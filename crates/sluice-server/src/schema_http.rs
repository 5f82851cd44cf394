//! The schema registry's HTTP listener (`schema.registry.listener`, default
//! `127.0.0.1:8081`; `none` for none): Confluent Schema Registry's REST API over the node's
//! [`SchemaRegistry`]. Requests are routed here by hand, path segment by segment, so a
//! subject holding an encoded `/` (Protobuf imports such as `a%2Fb.proto`) stays one
//! segment, and so a request this node cannot answer (it does not lead `_schemas`-0) is
//! forwarded as it came to the node that does, found by the `SCHEMA_REGISTRY` endpoint of
//! its broker registration.
//!
//! Bodies are JSON in and out; errors are Confluent's `{"error_code", "message"}` with its
//! codes (`sluice_registry::error`).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::extract::{ConnectInfo, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::Router;
use serde_json::{json, Value};
use sluice_broker::authorizer::Check;
use sluice_broker::registry::{SchemaRegistry, Unserved};
use sluice_broker::services::Services;
use sluice_metadata::acl::op;
use sluice_registry::schema::{Compatibility, Reference, SchemaType};
use sluice_registry::state::{Mode, RegistryState, VersionSpec};
use sluice_registry::RegistryError;
use std::time::Duration;

use axum::serve::ListenerExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch};
use tokio_rustls::server::TlsStream;
use tokio_rustls::TlsAcceptor;
use tracing::{debug, warn};

/// The name of the broker registration endpoint that carries a node's registry listener.
pub const REGISTRY_ENDPOINT: &str = "SCHEMA_REGISTRY";

/// The largest request body taken (a schema is at most
/// [`sluice_registry::schema::SCHEMA_MAX_BYTES`], escaped in JSON).
const BODY_MAX_BYTES: usize = 2 * sluice_registry::schema::SCHEMA_MAX_BYTES + 4096;

/// Set on a forwarded request: the node it reaches answers or fails, never forwards again.
const FORWARDED_HEADER: &str = "x-sluice-forwarded";

const CONTENT_TYPE: &str = "application/vnd.schemaregistry.v1+json";

#[derive(Clone)]
struct RegistryHttp {
    services: Arc<Services>,
    /// Forwards requests to the registry's leader, over TLS when this listener is TLS (all
    /// nodes' registry listeners are configured alike).
    client: reqwest::Client,
    scheme: &'static str,
}

/// A client of registry listeners (forwarding to other nodes, the console): with TLS,
/// trusting `listener.name.schema_registry.ssl.truststore.location` (else
/// `ssl.truststore.location`, else the system's roots).
pub fn forwarding_client(config: &sluice_metadata::BrokerConfig, tls: bool) -> reqwest::Client {
    let mut builder = reqwest::Client::builder();
    if tls {
        let truststore = config.listener_value(REGISTRY_ENDPOINT, "ssl.truststore.location");
        let roots = truststore
            .and_then(|path| std::fs::read(&path).ok())
            .and_then(|pem| reqwest::Certificate::from_pem_bundle(&pem).ok())
            .unwrap_or_default();
        for root in roots {
            builder = builder.add_root_certificate(root);
        }
    }
    builder.build().unwrap_or_else(|e| {
        warn!(error = %e, "cannot build the schema registry's forwarding client");
        reqwest::Client::new()
    })
}

/// Serve until `shutdown` flips; over TLS with `tls` (an `https://` listener).
pub async fn serve(
    listener: TcpListener,
    tls: Option<TlsAcceptor>,
    services: Arc<Services>,
    mut shutdown: watch::Receiver<bool>,
) {
    let state = RegistryHttp {
        client: forwarding_client(&services.config, tls.is_some()),
        scheme: if tls.is_some() { "https" } else { "http" },
        services,
    };
    let app = Router::new()
        .fallback(handle)
        .with_state(state)
        .into_make_service_with_connect_info::<SocketAddr>();
    let stop = async move {
        let _ = shutdown.wait_for(|s| *s).await;
    };
    let served = match tls {
        None => {
            axum::serve(listener, app)
                .with_graceful_shutdown(stop)
                .await
        }
        Some(acceptor) => {
            let (tls, handshakes) = TlsListener::start(listener, acceptor);
            let served = axum::serve(tls.tap_io(|_| ()), app)
                .with_graceful_shutdown(stop)
                .await;
            handshakes.abort();
            let _ = handshakes.await;
            served
        }
    };
    if let Err(e) = served {
        warn!(error = %e, "schema registry HTTP listener failed");
    }
}

/// How long a client has to finish its TLS handshake.
const TLS_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Connections whose TLS handshake is done, as axum takes them. Handshakes run in their
/// own tasks (a slow client holds up no one), started by the accept task
/// [`TlsListener::start`] returns, which the caller stops.
struct TlsListener {
    done: mpsc::Receiver<(TlsStream<TcpStream>, SocketAddr)>,
    local: SocketAddr,
}

impl TlsListener {
    fn start(listener: TcpListener, acceptor: TlsAcceptor) -> (Self, tokio::task::JoinHandle<()>) {
        let local = listener
            .local_addr()
            .unwrap_or_else(|_| SocketAddr::from(([0, 0, 0, 0], 0)));
        let (tx, done) = mpsc::channel(64);
        let task = tokio::spawn(async move {
            loop {
                let Ok((tcp, peer)) = listener.accept().await else {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                };
                let (acceptor, tx) = (acceptor.clone(), tx.clone());
                tokio::spawn(async move {
                    let shake = tokio::time::timeout(TLS_HANDSHAKE_TIMEOUT, acceptor.accept(tcp));
                    match shake.await {
                        Ok(Ok(stream)) => {
                            let _ = tx.send((stream, peer)).await;
                        }
                        Ok(Err(e)) => {
                            debug!(%peer, error = %e, "schema registry TLS handshake failed")
                        }
                        Err(_) => debug!(%peer, "schema registry TLS handshake timed out"),
                    }
                });
            }
        });
        (TlsListener { done, local }, task)
    }
}

impl axum::serve::Listener for TlsListener {
    type Io = TlsStream<TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        match self.done.recv().await {
            Some(conn) => conn,
            None => std::future::pending().await,
        }
    }

    fn local_addr(&self) -> std::io::Result<SocketAddr> {
        Ok(self.local)
    }
}

/// One request, parsed enough to route it.
struct Req {
    method: Method,
    path: Vec<String>,
    query: HashMap<String, String>,
    body: Bytes,
}

impl Req {
    /// A boolean query flag: `true` in any case (Python clients send `True`/`False`).
    fn flag(&self, name: &str) -> bool {
        self.query
            .get(name)
            .is_some_and(|v| v.eq_ignore_ascii_case("true"))
    }

    fn json(&self) -> Result<Value, RegistryError> {
        serde_json::from_slice(&self.body)
            .map_err(|e| RegistryError::bad_request(format!("Invalid JSON body: {e}")))
    }
}

async fn handle(
    State(http): State<RegistryHttp>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let body = match axum::body::to_bytes(body, BODY_MAX_BYTES).await {
        Ok(b) => b,
        Err(_) => {
            return error(&RegistryError::schema_too_large(
                sluice_registry::schema::SCHEMA_MAX_BYTES,
            ))
        }
    };
    let req = Req {
        method: method.clone(),
        path: uri
            .path()
            .split('/')
            .filter(|s| !s.is_empty())
            .map(percent_decode)
            .collect(),
        query: parse_query(uri.query().unwrap_or("")),
        body: body.clone(),
    };
    let Some(principal) = authenticate(&http.services.schemas, &headers) else {
        return unauthorized();
    };
    let who = http.services.access.check_principal(&principal, peer.ip());
    match route(&http.services.schemas, &who, &req).await {
        Ok((status, v)) => reply(status, v),
        Err(Unserved::Error(e)) => error(&e),
        Err(Unserved::Leader(node)) => {
            if headers.contains_key(FORWARDED_HEADER) {
                return error(&RegistryError::forwarding(
                    "forwarded to a node that does not lead the registry",
                ));
            }
            forward(&http, node, method, &uri, &headers, body).await
        }
    }
}

type Answer = Result<(StatusCode, Value), Unserved>;

fn ok(v: Value) -> Answer {
    Ok((StatusCode::OK, v))
}

/// The principal of a request: `User:ANONYMOUS` when the cluster has no SASL listener, else
/// the SASL user its HTTP basic credentials name (None without valid ones).
fn authenticate(reg: &SchemaRegistry, headers: &HeaderMap) -> Option<String> {
    if !reg.authentication_required() {
        return Some(sluice_broker::tls::ANONYMOUS.to_string());
    }
    let credentials = headers
        .get(axum::http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| {
            v.strip_prefix("Basic ")
                .or_else(|| v.strip_prefix("basic "))
        })
        .and_then(|b| sluice_protocol::base64::decode_padded(b.trim()))
        .and_then(|b| String::from_utf8(b).ok());
    credentials.as_deref().and_then(|c| {
        let (user, password) = c.split_once(':')?;
        reg.authenticate(user, password)
    })
}

fn unauthorized() -> Response {
    let mut resp = reply(
        StatusCode::UNAUTHORIZED,
        json!({"error_code": 401, "message": "Unauthorized: HTTP basic credentials of a SASL user are required"}),
    );
    resp.headers_mut().insert(
        axum::http::header::WWW_AUTHENTICATE,
        HeaderValue::from_static("Basic realm=\"Sluice schema registry\""),
    );
    resp
}

/// The topic whose ACLs govern a subject: `<topic>-key` and `<topic>-value` (Confluent's
/// default TopicNameStrategy) are their topic's; any other subject is governed by the ACLs
/// of a topic of its own name (prefixed ACLs cover families of them).
fn governing_topic(subject: &str) -> &str {
    subject
        .strip_suffix("-value")
        .or_else(|| subject.strip_suffix("-key"))
        .unwrap_or(subject)
}

/// Reading a subject needs DESCRIBE on its topic (READ, WRITE and ALTER imply it).
fn may_read(who: &Check<'_>, subject: &str) -> bool {
    who.topic(op::DESCRIBE, governing_topic(subject))
}

/// Registering needs WRITE on the subject's topic (what a producer that registers its
/// schemas already has); deleting and changing a subject's settings need ALTER on it, the
/// global settings ALTER on the cluster; reading needs DESCRIBE.
fn require(who: &Check<'_>, operation: i8, subject: Option<&str>) -> Result<(), Unserved> {
    let allowed = match subject {
        Some(s) => who.topic(operation, governing_topic(s)),
        None => who.cluster(operation),
    };
    if allowed {
        return Ok(());
    }
    let name = match operation {
        op::WRITE => "Write",
        op::ALTER => "Alter",
        _ => "Read",
    };
    let on = subject.map_or_else(
        || "the registry's global settings".to_string(),
        |s| format!("subject: {s}"),
    );
    Err(RegistryError::forbidden(format!("User is denied operation {name} on {on}")).into())
}

async fn route(reg: &SchemaRegistry, who: &Check<'_>, req: &Req) -> Answer {
    let p: Vec<&str> = req.path.iter().map(String::as_str).collect();
    let m = &req.method;
    // Subject-level permissions first, so the node a client reaches enforces them (with the
    // client's own address) before it forwards anything.
    match (m, p.as_slice()) {
        (&Method::POST, ["subjects", s, "versions"]) => require(who, op::WRITE, Some(s))?,
        (&Method::DELETE, ["subjects", s, ..]) => require(who, op::ALTER, Some(s))?,
        (_, ["subjects", s, ..]) | (_, ["compatibility", "subjects", s, ..]) => {
            require(who, op::DESCRIBE, Some(s))?
        }
        (&Method::GET, ["config" | "mode", s]) => require(who, op::DESCRIBE, Some(s))?,
        (_, ["config" | "mode", s]) => require(who, op::ALTER, Some(s))?,
        (&Method::GET, ["config" | "mode"]) => {}
        (_, ["config" | "mode"]) => require(who, op::ALTER, None)?,
        _ => {}
    }
    match (m, p.as_slice()) {
        (&Method::GET, []) => ok(json!({})),
        (&Method::GET, ["subjects"]) => {
            let prefix = req.query.get("subjectPrefix").cloned().unwrap_or_default();
            let (deleted, only) = (req.flag("deleted"), req.flag("deletedOnly"));
            let mut subjects = reg.read(|s| s.subjects(&prefix, deleted, only)).await?;
            subjects.retain(|s| may_read(who, s));
            ok(json!(subjects))
        }
        (&Method::POST, ["subjects", subject]) => lookup(reg, req, subject).await,
        (&Method::DELETE, ["subjects", subject]) => {
            let permanent = req.flag("permanent");
            let versions = reg
                .write(|s| s.plan_delete_subject(subject, permanent))
                .await?;
            ok(json!(versions))
        }
        (&Method::GET, ["subjects", subject, "versions"]) => {
            let (deleted, only) = (req.flag("deleted"), req.flag("deletedOnly"));
            let versions = reg.read(|s| s.versions(subject, deleted, only)).await??;
            ok(json!(versions))
        }
        (&Method::POST, ["subjects", subject, "versions"]) => register(reg, req, subject).await,
        (&Method::GET, ["subjects", subject, "versions", v, rest @ ..]) => {
            let spec = VersionSpec::parse(v)?;
            let deleted = req.flag("deleted");
            let found = reg.read(|s| s.version(subject, spec, deleted)).await??;
            match rest {
                [] => ok(found.to_json()),
                ["schema"] => raw_schema(&found.schema.text),
                ["referencedby"] => {
                    let ids = reg
                        .read(|s| s.referenced_by(subject, found.version))
                        .await?;
                    ok(json!(ids))
                }
                _ => Err(not_found(req)),
            }
        }
        (&Method::DELETE, ["subjects", subject, "versions", v]) => {
            let spec = VersionSpec::parse(v)?;
            let permanent = req.flag("permanent");
            let version = reg
                .write(|s| s.plan_delete_version(subject, spec, permanent))
                .await?;
            ok(json!(version))
        }
        (&Method::GET, ["schemas"]) => {
            let prefix = req.query.get("subjectPrefix").cloned().unwrap_or_default();
            let (deleted, latest_only) = (req.flag("deleted"), req.flag("latestOnly"));
            let all = reg.read(|s| s.all_versions(&prefix, deleted)).await?;
            let mut out: Vec<Value> = Vec::new();
            for (i, v) in all.iter().enumerate() {
                let last_of_subject = all.get(i + 1).is_none_or(|n| n.subject != v.subject);
                if (!latest_only || last_of_subject) && may_read(who, &v.subject) {
                    out.push(v.to_json());
                }
            }
            ok(Value::Array(out))
        }
        (&Method::GET, ["schemas", "types"]) => {
            let types: Vec<&str> = SchemaType::supported().iter().map(|t| t.name()).collect();
            ok(json!(types))
        }
        (&Method::GET, ["schemas", "ids", id, rest @ ..]) => by_id(reg, who, req, id, rest).await,
        (_, ["config", rest @ ..]) if rest.len() <= 1 => {
            config(reg, req, rest.first().copied()).await
        }
        (_, ["mode", rest @ ..]) if rest.len() <= 1 => mode(reg, req, rest.first().copied()).await,
        (&Method::POST, ["compatibility", "subjects", subject, "versions", rest @ ..])
            if rest.len() <= 1 =>
        {
            compatibility(reg, req, subject, rest.first().copied()).await
        }
        (&Method::GET, ["contexts"]) => ok(json!(["."])),
        // Clients from confluent-kafka 2.14 ask for a topic's associations first; none.
        (&Method::GET, ["associations", ..]) => ok(json!([])),
        _ => Err(not_found(req)),
    }
}

fn not_found(req: &Req) -> Unserved {
    Unserved::Error(RegistryError::not_found(format!(
        "HTTP 404 Not Found: {} /{}",
        req.method,
        req.path.join("/")
    )))
}

fn raw_schema(text: &str) -> Answer {
    serde_json::from_str(text)
        .map(|v| (StatusCode::OK, v))
        .or_else(|_| Ok((StatusCode::OK, Value::String(text.to_string()))))
}

/// A schema in a request body: `schema`, `schemaType` (AVRO when absent), `references`.
struct SchemaRequest {
    schema_type: SchemaType,
    text: String,
    references: Vec<Reference>,
    id: Option<i32>,
    version: Option<i32>,
}

fn schema_request(req: &Req) -> Result<SchemaRequest, RegistryError> {
    let body = req.json()?;
    if !body.is_object() {
        return Err(RegistryError::unprocessable(
            "the body must be a JSON object",
        ));
    }
    let text = match body.get("schema") {
        Some(Value::String(s)) if !s.trim().is_empty() => s.clone(),
        _ => return Err(RegistryError::invalid_schema("Empty schema")),
    };
    let schema_type = match body.get("schemaType") {
        None | Some(Value::Null) => SchemaType::Avro,
        Some(Value::String(t)) => SchemaType::parse(&t.to_ascii_uppercase())
            .ok_or_else(|| RegistryError::invalid_schema(format!("unknown schema type {t}")))?,
        Some(other) => {
            return Err(RegistryError::invalid_schema(format!(
                "unknown schema type {other}"
            )))
        }
    };
    let references = match body.get("references") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(refs)) => refs
            .iter()
            .map(|r| {
                Reference::from_json(r)
                    .ok_or_else(|| RegistryError::unprocessable(format!("invalid reference {r}")))
            })
            .collect::<Result<_, _>>()?,
        Some(_) => return Err(RegistryError::unprocessable("references must be an array")),
    };
    let int = |k: &str| {
        body.get(k)
            .and_then(Value::as_i64)
            .and_then(|v| i32::try_from(v).ok())
            .filter(|v| *v > 0)
    };
    Ok(SchemaRequest {
        schema_type,
        text,
        references,
        id: int("id"),
        version: int("version"),
    })
}

async fn register(reg: &SchemaRegistry, req: &Req, subject: &str) -> Answer {
    let r = schema_request(req)?;
    let registered = reg
        .write(|s| {
            let parsed = s.parse(r.schema_type, &r.text, r.references.clone())?;
            s.plan_register(subject, &parsed, r.id, r.version)
        })
        .await?;
    ok(json!({"id": registered.id, "version": registered.version}))
}

async fn lookup(reg: &SchemaRegistry, req: &Req, subject: &str) -> Answer {
    let r = schema_request(req)?;
    let deleted = req.flag("deleted");
    let found = reg
        .read(|s| {
            let parsed = s.parse(r.schema_type, &r.text, r.references.clone())?;
            s.lookup(subject, &parsed, deleted)
        })
        .await??;
    ok(found.to_json())
}

/// A schema by id: readable by whoever may read a subject that uses it.
async fn by_id(
    reg: &SchemaRegistry,
    who: &Check<'_>,
    req: &Req,
    id: &str,
    rest: &[&str],
) -> Answer {
    let id: i32 = id.parse().map_err(|_| RegistryError::schema_not_found())?;
    let deleted = req.flag("deleted");
    let users = reg.read(|s| s.versions_by_id(id, true)).await??;
    if !users.iter().any(|(s, _)| may_read(who, s)) {
        return Err(RegistryError::schema_id_not_found(id).into());
    }
    match rest {
        [] => {
            let schema = reg.read(|s| s.schema_by_id(id).cloned()).await??;
            let mut v = json!({"schema": schema.text, "schemaType": schema.schema_type.name()});
            if !schema.references.is_empty() {
                v["references"] = schema.references.iter().map(Reference::to_json).collect();
            }
            ok(v)
        }
        ["schema"] => {
            let schema = reg.read(|s| s.schema_by_id(id).cloned()).await??;
            raw_schema(&schema.text)
        }
        ["subjects"] => {
            let uses = reg.read(|s| s.versions_by_id(id, deleted)).await??;
            let mut subjects: Vec<String> = uses
                .into_iter()
                .map(|(s, _)| s)
                .filter(|s| may_read(who, s))
                .collect();
            subjects.dedup();
            ok(json!(subjects))
        }
        ["versions"] => {
            let uses = reg.read(|s| s.versions_by_id(id, deleted)).await??;
            ok(Value::Array(
                uses.into_iter()
                    .filter(|(s, _)| may_read(who, s))
                    .map(|(s, v)| json!({"subject": s, "version": v}))
                    .collect(),
            ))
        }
        _ => Err(not_found(req)),
    }
}

async fn config(reg: &SchemaRegistry, req: &Req, subject: Option<&str>) -> Answer {
    match req.method {
        Method::GET => {
            let global = req.flag("defaultToGlobal");
            let level = match subject {
                None => reg.read(|s| s.compatibility(None)).await?,
                Some(sub) => reg.read(|s| s.subject_compatibility(sub, global)).await??,
            };
            ok(json!({"compatibilityLevel": level.name()}))
        }
        Method::PUT => {
            let body = req.json()?;
            let name = body
                .get("compatibility")
                .or_else(|| body.get("compatibilityLevel"))
                .and_then(Value::as_str)
                .unwrap_or("");
            let level = Compatibility::parse(name)
                .ok_or_else(|| RegistryError::invalid_compatibility_level(name))?;
            let set = reg
                .write(|s| s.plan_set_compatibility(subject, level))
                .await?;
            ok(json!({"compatibility": set.name()}))
        }
        Method::DELETE => {
            let removed = reg.write(|s| s.plan_delete_compatibility(subject)).await?;
            ok(json!({"compatibilityLevel": removed.name()}))
        }
        _ => Err(not_found(req)),
    }
}

async fn mode(reg: &SchemaRegistry, req: &Req, subject: Option<&str>) -> Answer {
    match req.method {
        Method::GET => {
            let global = req.flag("defaultToGlobal");
            let mode = match subject {
                None => reg.read(|s| s.mode(None)).await?,
                Some(sub) => reg.read(|s| s.subject_mode(sub, global)).await??,
            };
            ok(json!({"mode": mode.name()}))
        }
        Method::PUT => {
            let body = req.json()?;
            let name = body.get("mode").and_then(Value::as_str).unwrap_or("");
            let mode = Mode::parse(name).ok_or_else(|| RegistryError::invalid_mode(name))?;
            let force = req.flag("force");
            let set = reg.write(|s| s.plan_set_mode(subject, mode, force)).await?;
            ok(json!({"mode": set.name()}))
        }
        Method::DELETE => {
            let removed = reg.write(|s| s.plan_delete_mode(subject)).await?;
            ok(json!({"mode": removed.name()}))
        }
        _ => Err(not_found(req)),
    }
}

async fn compatibility(
    reg: &SchemaRegistry,
    req: &Req,
    subject: &str,
    version: Option<&str>,
) -> Answer {
    let spec = version.map(VersionSpec::parse).transpose()?;
    let r = schema_request(req)?;
    let verbose = req.flag("verbose");
    let checked = reg
        .read(|s: &RegistryState| {
            let parsed = s.parse(r.schema_type, &r.text, r.references.clone())?;
            s.check_compatibility(subject, &parsed, spec)
        })
        .await?;
    let problems = match checked {
        Ok(p) => p,
        Err(e) if verbose && e.code == 42201 => vec![e.message],
        Err(e) => return Err(e.into()),
    };
    let mut v = json!({"is_compatible": problems.is_empty()});
    if verbose {
        v["messages"] = json!(problems);
    }
    ok(v)
}

fn reply(status: StatusCode, v: Value) -> Response {
    let mut resp = (status, v.to_string()).into_response();
    resp.headers_mut().insert(
        axum::http::header::CONTENT_TYPE,
        HeaderValue::from_static(CONTENT_TYPE),
    );
    resp
}

fn error(e: &RegistryError) -> Response {
    let status = StatusCode::from_u16(e.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    reply(status, e.body())
}

/// Send the request as it came to `node`'s registry listener and relay its answer.
async fn forward(
    http: &RegistryHttp,
    node: i32,
    method: Method,
    uri: &Uri,
    headers: &HeaderMap,
    body: Bytes,
) -> Response {
    let path = uri.path_and_query().map_or("/", |p| p.as_str());
    let url = match node_url(&http.services.metadata, http.scheme, node, path) {
        Ok(url) => url,
        Err(e) => return error(&e),
    };
    let Ok(method) = reqwest::Method::from_bytes(method.as_str().as_bytes()) else {
        return error(&RegistryError::forwarding("unsupported method"));
    };
    let mut out = http.client.request(method, &url).body(body);
    for name in ["authorization", "content-type", "accept"] {
        if let Some(v) = headers.get(name).and_then(|v| v.to_str().ok()) {
            out = out.header(name, v);
        }
    }
    out = out.header(FORWARDED_HEADER, "1");
    let answer = match out.send().await {
        Ok(a) => a,
        Err(e) => {
            return error(&RegistryError::forwarding(format!(
                "cannot forward to the registry's leader, node {node}: {e}"
            )))
        }
    };
    let status =
        StatusCode::from_u16(answer.status().as_u16()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    match answer.bytes().await {
        Ok(bytes) => {
            let mut resp = (status, bytes.to_vec()).into_response();
            resp.headers_mut().insert(
                axum::http::header::CONTENT_TYPE,
                HeaderValue::from_static(CONTENT_TYPE),
            );
            resp
        }
        Err(e) => error(&RegistryError::forwarding(format!(
            "the registry's leader, node {node}, did not answer: {e}"
        ))),
    }
}

/// How this node asks the registry's leader which subject versions use an id, for produce
/// validation: `GET /schemas/ids/{id}/versions?deleted=true` on its listener, signed in as
/// this broker (its inter-broker SASL credentials, when it has some).
pub struct HttpRemote {
    metadata: Arc<sluice_broker::metadata_cache::MetadataCache>,
    client: reqwest::Client,
    scheme: &'static str,
    credentials: Option<(String, String)>,
}

impl HttpRemote {
    pub fn new(
        config: &sluice_metadata::BrokerConfig,
        metadata: Arc<sluice_broker::metadata_cache::MetadataCache>,
        tls: bool,
    ) -> Self {
        let credentials = config
            .inter_broker_client()
            .ok()
            .and_then(|c| c.sasl)
            .map(|(_, user, password)| (user, password));
        Self {
            metadata,
            client: forwarding_client(config, tls),
            scheme: if tls { "https" } else { "http" },
            credentials,
        }
    }

    async fn fetch(&self, leader: i32, id: i32) -> Result<Vec<(String, i32)>, RegistryError> {
        let path = format!("/schemas/ids/{id}/versions?deleted=true");
        let url = node_url(&self.metadata, self.scheme, leader, &path)?;
        let mut req = self.client.get(&url).header(FORWARDED_HEADER, "1");
        if let Some((user, password)) = &self.credentials {
            req = req.basic_auth(user, Some(password));
        }
        let resp = req
            .send()
            .await
            .map_err(|e| RegistryError::forwarding(format!("node {leader}: {e}")))?;
        let status = resp.status().as_u16();
        let text = resp
            .text()
            .await
            .map_err(|e| RegistryError::forwarding(format!("node {leader}: {e}")))?;
        let v: Value = serde_json::from_str(&text)
            .map_err(|_| RegistryError::forwarding(format!("node {leader} answered {status}")))?;
        if status == 404 && v["error_code"].as_i64() == Some(40403) {
            return Err(RegistryError::schema_id_not_found(id));
        }
        if status != 200 {
            return Err(RegistryError::forwarding(format!(
                "node {leader} answered {status}: {}",
                v["message"].as_str().unwrap_or_default()
            )));
        }
        Ok(v.as_array()
            .into_iter()
            .flatten()
            .filter_map(|u| {
                Some((
                    u["subject"].as_str()?.to_string(),
                    i32::try_from(u["version"].as_i64()?).ok()?,
                ))
            })
            .collect())
    }
}

impl sluice_broker::registry::RemoteRegistry for HttpRemote {
    fn versions_by_id(&self, leader: i32, id: i32) -> sluice_broker::registry::RemoteAnswer<'_> {
        Box::pin(self.fetch(leader, id))
    }
}

/// `path` on `node`'s registry listener (the `SCHEMA_REGISTRY` endpoint it registered).
fn node_url(
    metadata: &sluice_broker::metadata_cache::MetadataCache,
    scheme: &str,
    node: i32,
    path: &str,
) -> Result<String, RegistryError> {
    let image = metadata.current();
    let endpoint = image
        .brokers
        .get(&node)
        .and_then(|b| b.endpoints.iter().find(|e| e.name == REGISTRY_ENDPOINT))
        .ok_or_else(|| {
            RegistryError::unknown_leader(format!(
                "the registry's leader, node {node}, has no schema registry listener"
            ))
        })?;
    Ok(format!(
        "{scheme}://{}:{}{path}",
        endpoint.host, endpoint.port
    ))
}

/// `s` as one URL path segment: everything but unreserved characters percent-encoded
/// (a subject such as `a/b.proto` stays one segment).
pub fn encode_segment(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

fn parse_query(q: &str) -> HashMap<String, String> {
    q.split('&')
        .filter(|kv| !kv.is_empty())
        .map(|kv| {
            let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
            (percent_decode(k), percent_decode(&v.replace('+', " ")))
        })
        .collect()
}

/// Decode `%XX` escapes (invalid ones are kept as they are).
fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' && i + 2 < bytes.len() {
            let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).ok();
            if let Some(b) = hex.and_then(|h| u8::from_str_radix(h, 16).ok()) {
                out.push(b);
                i += 3;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queries_and_paths_are_percent_decoded() {
        assert_eq!(percent_decode("a%2Fb.proto"), "a/b.proto");
        assert_eq!(
            percent_decode(&encode_segment("a/b c%.proto")),
            "a/b c%.proto"
        );
        assert_eq!(encode_segment("t-value"), "t-value");
        assert_eq!(percent_decode("100%"), "100%");
        assert_eq!(percent_decode("%zz%4"), "%zz%4");
        let q = parse_query("deleted=True&subjectPrefix=a%20b&x");
        assert_eq!(q.get("deleted").map(String::as_str), Some("True"));
        assert_eq!(q.get("subjectPrefix").map(String::as_str), Some("a b"));
        assert_eq!(q.get("x").map(String::as_str), Some(""));
    }
}
