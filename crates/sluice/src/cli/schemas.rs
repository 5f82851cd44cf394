//! `sluice schemas` — the built-in schema registry from the command line (what Confluent's
//! users do with `curl` against its REST API): list subjects, show a version or an id,
//! register a schema from a file, check one for compatibility, delete, set a compatibility
//! level. It speaks Confluent's REST API, so it works with any such registry.

use clap::{ArgGroup, Args};
use serde_json::{json, Value};

use sluice_server::schema_http::encode_segment;

use super::{usage, CliError, CliResult};

#[derive(Args, Debug)]
#[command(
    group(ArgGroup::new("action").required(true).args(["list", "describe", "register", "check", "delete", "compatibility"])),
    after_help = "Examples:\n  sluice schemas --list\n  sluice schemas --register --subject orders-value --file order.avsc\n  sluice schemas --register --subject orders-value --file order.proto --type PROTOBUF\n  sluice schemas --check --subject orders-value --file order-v2.avsc\n  sluice schemas --describe --subject orders-value --version 2\n  sluice schemas --describe --id 7\n  sluice schemas --compatibility FULL --subject orders-value\n  sluice schemas --delete --subject orders-value [--permanent]"
)]
pub struct SchemasArgs {
    /// The registry's URL (a node's schema.registry.listener).
    #[arg(
        long,
        env = "SLUICE_SCHEMA_REGISTRY",
        default_value = "http://127.0.0.1:8081"
    )]
    pub registry: String,
    /// HTTP basic auth, USER:PASSWORD (when the registry asks for it).
    #[arg(
        long,
        env = "SLUICE_SCHEMA_REGISTRY_USER",
        hide_env_values = true,
        value_name = "USER:PASSWORD"
    )]
    pub user: Option<String>,
    /// List subjects (with --deleted, soft-deleted ones too).
    #[arg(long)]
    pub list: bool,
    /// Show a subject's version (--subject, --version; latest by default) or a schema by --id.
    #[arg(long)]
    pub describe: bool,
    /// Register the schema in --file under --subject.
    #[arg(long)]
    pub register: bool,
    /// Check the schema in --file against --subject's versions (or --version) under its
    /// compatibility level.
    #[arg(long)]
    pub check: bool,
    /// Delete --subject (or one --version of it); soft unless --permanent.
    #[arg(long)]
    pub delete: bool,
    /// Set the compatibility level (NONE, BACKWARD, BACKWARD_TRANSITIVE, FORWARD,
    /// FORWARD_TRANSITIVE, FULL, FULL_TRANSITIVE) of --subject, or the global one.
    #[arg(long, value_name = "LEVEL")]
    pub compatibility: Option<String>,
    #[arg(long)]
    pub subject: Option<String>,
    /// A version number or `latest`.
    #[arg(long)]
    pub version: Option<String>,
    #[arg(long)]
    pub id: Option<i64>,
    /// The schema file (.avsc, .json, .proto).
    #[arg(long, value_name = "FILE")]
    pub file: Option<std::path::PathBuf>,
    /// AVRO, JSON or PROTOBUF (default: from the file's extension, else AVRO).
    #[arg(long = "type", value_name = "TYPE")]
    pub schema_type: Option<String>,
    /// A reference NAME=SUBJECT:VERSION (repeatable).
    #[arg(long = "reference", value_name = "NAME=SUBJECT:VERSION")]
    pub references: Vec<String>,
    /// With --list: soft-deleted subjects too.
    #[arg(long)]
    pub deleted: bool,
    /// With --delete: delete for good (after a soft delete).
    #[arg(long)]
    pub permanent: bool,
}

struct Registry {
    base: String,
    user: Option<(String, String)>,
    http: reqwest::Client,
}

impl Registry {
    async fn call(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<Value>,
    ) -> Result<Value, CliError> {
        let url = format!("{}{path}", self.base.trim_end_matches('/'));
        let mut req = self
            .http
            .request(method, &url)
            .header("Accept", "application/vnd.schemaregistry.v1+json");
        if let Some((u, p)) = &self.user {
            req = req.basic_auth(u, Some(p));
        }
        if let Some(b) = body {
            req = req
                .header("Content-Type", "application/vnd.schemaregistry.v1+json")
                .body(b.to_string());
        }
        let resp = req.send().await.map_err(|e| {
            CliError::Failed(format!(
                "cannot reach the schema registry at {}: {e}",
                self.base
            ))
        })?;
        let status = resp.status();
        let text = resp
            .text()
            .await
            .map_err(|e| CliError::Failed(format!("the schema registry did not answer: {e}")))?;
        let v: Value = serde_json::from_str(&text).unwrap_or(Value::String(text));
        if !status.is_success() {
            let message = v["message"]
                .as_str()
                .map_or_else(|| v.to_string(), str::to_string);
            return Err(CliError::Failed(match v["error_code"].as_i64() {
                Some(code) => format!("{message} (error code {code})"),
                None => format!("HTTP {status}: {message}"),
            }));
        }
        Ok(v)
    }
}

fn subject(args: &SchemasArgs) -> Result<String, CliError> {
    args.subject
        .clone()
        .ok_or_else(|| usage("this action needs --subject"))
}

/// The request body for --register and --check: the file's schema, its type, references.
fn schema_body(args: &SchemasArgs) -> Result<Value, CliError> {
    let file = args
        .file
        .as_ref()
        .ok_or_else(|| usage("this action needs --file"))?;
    let text = std::fs::read_to_string(file)
        .map_err(|e| CliError::Failed(format!("cannot read {}: {e}", file.display())))?;
    let ty = match &args.schema_type {
        Some(t) => t.to_ascii_uppercase(),
        None => match file.extension().and_then(|e| e.to_str()) {
            Some("proto") => "PROTOBUF".into(),
            Some("json")
                if !text.contains("\"type\":\"record\"") && !text.contains("\"fields\"") =>
            {
                "JSON".into()
            }
            _ => "AVRO".into(),
        },
    };
    if !["AVRO", "JSON", "PROTOBUF"].contains(&ty.as_str()) {
        return Err(usage(format!(
            "--type {ty}: expected AVRO, JSON or PROTOBUF"
        )));
    }
    let references = args
        .references
        .iter()
        .map(|r| {
            let (name, rest) = r
                .split_once('=')
                .ok_or_else(|| usage(format!("--reference {r}: expected NAME=SUBJECT:VERSION")))?;
            let (subject, version) = rest
                .rsplit_once(':')
                .ok_or_else(|| usage(format!("--reference {r}: expected NAME=SUBJECT:VERSION")))?;
            let version: i64 = version
                .parse()
                .map_err(|_| usage(format!("--reference {r}: the version is not a number")))?;
            Ok(json!({"name": name, "subject": subject, "version": version}))
        })
        .collect::<Result<Vec<_>, CliError>>()?;
    Ok(json!({"schema": text, "schemaType": ty, "references": references}))
}

fn print_version(v: &Value) {
    println!(
        "Subject: {}\tVersion: {}\tId: {}\tType: {}",
        v["subject"].as_str().unwrap_or("-"),
        v["version"],
        v["id"],
        v["schemaType"].as_str().unwrap_or("AVRO")
    );
    if let Some(refs) = v["references"].as_array() {
        for r in refs {
            println!(
                "Reference: {} = {} version {}",
                r["name"].as_str().unwrap_or(""),
                r["subject"].as_str().unwrap_or(""),
                r["version"]
            );
        }
    }
    print_schema(v["schema"].as_str().unwrap_or(""));
}

fn print_schema(text: &str) {
    match serde_json::from_str::<Value>(text) {
        Ok(v) => println!(
            "{}",
            serde_json::to_string_pretty(&v).unwrap_or_else(|_| text.to_string())
        ),
        Err(_) => println!("{text}"),
    }
}

pub async fn run(args: SchemasArgs) -> CliResult {
    let user = match &args.user {
        None => None,
        Some(u) => {
            let (name, password) = u
                .split_once(':')
                .ok_or_else(|| usage("--user: expected USER:PASSWORD"))?;
            Some((name.to_string(), password.to_string()))
        }
    };
    let reg = Registry {
        base: args.registry.clone(),
        user,
        http: reqwest::Client::new(),
    };
    use reqwest::Method;
    if args.list {
        let subjects = reg
            .call(
                Method::GET,
                &format!("/subjects?deleted={}", args.deleted),
                None,
            )
            .await?;
        for s in subjects.as_array().into_iter().flatten() {
            println!("{}", s.as_str().unwrap_or_default());
        }
    } else if args.describe {
        if let Some(id) = args.id {
            let v = reg
                .call(Method::GET, &format!("/schemas/ids/{id}"), None)
                .await?;
            let uses = reg
                .call(Method::GET, &format!("/schemas/ids/{id}/versions"), None)
                .await?;
            println!(
                "Id: {id}\tType: {}",
                v["schemaType"].as_str().unwrap_or("AVRO")
            );
            for u in uses.as_array().into_iter().flatten() {
                println!(
                    "Used by: {} version {}",
                    u["subject"].as_str().unwrap_or(""),
                    u["version"]
                );
            }
            print_schema(v["schema"].as_str().unwrap_or(""));
        } else {
            let s = subject(&args)?;
            let version = args.version.as_deref().unwrap_or("latest");
            let v = reg
                .call(
                    Method::GET,
                    &format!(
                        "/subjects/{}/versions/{}",
                        encode_segment(&s),
                        encode_segment(version)
                    ),
                    None,
                )
                .await?;
            print_version(&v);
        }
    } else if args.register {
        let s = subject(&args)?;
        let body = schema_body(&args)?;
        let v = reg
            .call(
                Method::POST,
                &format!("/subjects/{}/versions", encode_segment(&s)),
                Some(body),
            )
            .await?;
        println!(
            "Registered {s} version {} with id {}",
            v["version"], v["id"]
        );
    } else if args.check {
        let s = subject(&args)?;
        let body = schema_body(&args)?;
        let path = match &args.version {
            Some(v) => format!(
                "/compatibility/subjects/{}/versions/{}?verbose=true",
                encode_segment(&s),
                encode_segment(v)
            ),
            None => format!(
                "/compatibility/subjects/{}/versions?verbose=true",
                encode_segment(&s)
            ),
        };
        let v = reg.call(Method::POST, &path, Some(body)).await?;
        if v["is_compatible"].as_bool() == Some(true) {
            println!("Compatible with {s}");
        } else {
            let messages: Vec<String> = v["messages"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|m| m.as_str().map_or_else(|| m.to_string(), str::to_string))
                .collect();
            return Err(CliError::Failed(format!(
                "incompatible with {s}: {}",
                messages.join("; ")
            )));
        }
    } else if args.delete {
        let s = subject(&args)?;
        let path = match &args.version {
            Some(v) => format!(
                "/subjects/{}/versions/{}?permanent={}",
                encode_segment(&s),
                encode_segment(v),
                args.permanent
            ),
            None => format!(
                "/subjects/{}?permanent={}",
                encode_segment(&s),
                args.permanent
            ),
        };
        let v = reg.call(Method::DELETE, &path, None).await?;
        let how = if args.permanent {
            "permanently"
        } else {
            "soft"
        };
        println!("Deleted ({how}) {s} version(s) {v}");
    } else if let Some(level) = &args.compatibility {
        let path = match &args.subject {
            Some(s) => format!("/config/{}", encode_segment(s)),
            None => "/config".to_string(),
        };
        let v = reg
            .call(
                Method::PUT,
                &path,
                Some(json!({"compatibility": level.to_ascii_uppercase()})),
            )
            .await?;
        println!(
            "Compatibility of {} is now {}",
            args.subject.as_deref().unwrap_or("the registry"),
            v["compatibility"].as_str().unwrap_or_default()
        );
    }
    Ok(())
}
