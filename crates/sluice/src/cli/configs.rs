//! `sluice configs` — like `kafka-configs.sh`.

use clap::{ArgGroup, Args};
use sluice_client::admin::{AlterOp, ConfigResource};
use sluice_client::Admin;

use super::{key_value, usage, CliError, CliResult, ConnArgs};

#[derive(Args, Debug)]
#[command(
    group(ArgGroup::new("action").required(true).args(["describe", "alter"])),
    after_help = "Examples:\n  sluice configs --describe --entity-type topics --entity-name orders\n  sluice configs --describe --entity-type brokers --entity-name 0 --all\n  sluice configs --alter --entity-type topics --entity-name orders --add-config retention.ms=3600000,cleanup.policy=delete\n  sluice configs --alter --entity-type topics --entity-name orders --delete-config retention.ms"
)]
pub struct ConfigsArgs {
    #[command(flatten)]
    pub conn: ConnArgs,
    /// Show configs.
    #[arg(long)]
    pub describe: bool,
    /// Change configs.
    #[arg(long)]
    pub alter: bool,
    /// topics or brokers.
    #[arg(long = "entity-type")]
    pub entity_type: Option<String>,
    /// The topic name or broker id.
    #[arg(long = "entity-name")]
    pub entity_name: Option<String>,
    /// Shorthand for --entity-type topics --entity-name <TOPIC>.
    #[arg(long)]
    pub topic: Option<String>,
    /// With --describe: every config, not only overrides.
    #[arg(long)]
    pub all: bool,
    /// key=value[,key=value...] to set.
    #[arg(long = "add-config")]
    pub add_config: Option<String>,
    /// key[,key...] to reset to the default.
    #[arg(long = "delete-config")]
    pub delete_config: Option<String>,
}

fn source_name(s: i8) -> &'static str {
    match s {
        1 => "DYNAMIC_TOPIC_CONFIG",
        2 => "DYNAMIC_BROKER_CONFIG",
        3 => "DYNAMIC_DEFAULT_BROKER_CONFIG",
        4 => "STATIC_BROKER_CONFIG",
        5 => "DEFAULT_CONFIG",
        _ => "UNKNOWN",
    }
}

pub async fn run(args: ConfigsArgs) -> CliResult {
    let resource = match (&args.topic, args.entity_type.as_deref(), &args.entity_name) {
        (Some(t), None, None) => ConfigResource::Topic(t.clone()),
        (None, Some("topics" | "topic"), Some(n)) => ConfigResource::Topic(n.clone()),
        (None, Some("brokers" | "broker"), Some(n)) => {
            ConfigResource::Broker(n.parse().map_err(|_| {
                usage(format!(
                    "--entity-name for brokers is a broker id, not '{n}'"
                ))
            })?)
        }
        (None, Some(other), _) if other != "topics" && other != "brokers" => {
            return Err(usage(format!(
                "--entity-type must be topics or brokers, not '{other}'"
            )))
        }
        _ => return Err(usage(
            "name the entity: --entity-type topics|brokers --entity-name NAME (or --topic NAME)",
        )),
    };
    let admin = Admin::new(args.conn.client_config())?;
    if args.describe {
        let entries = admin
            .describe_configs(std::slice::from_ref(&resource))
            .await?
            .into_iter()
            .next()
            .ok_or_else(|| CliError::Failed("empty answer from the broker".into()))??;
        let (what, name) = match &resource {
            ConfigResource::Topic(t) => ("topic", t.clone()),
            ConfigResource::Broker(b) => ("broker", b.to_string()),
        };
        println!(
            "{} configs for {what} {name} are:",
            if args.all { "All" } else { "Dynamic" }
        );
        for e in entries
            .iter()
            .filter(|e| args.all || e.source == 1 || e.source == 2)
        {
            println!(
                "  {}={} sensitive={} source={}",
                e.name,
                if e.sensitive {
                    "null".to_string()
                } else {
                    e.value.clone().unwrap_or_else(|| "null".into())
                },
                e.sensitive,
                source_name(e.source)
            );
        }
        return Ok(());
    }
    let mut ops = Vec::new();
    if let Some(add) = &args.add_config {
        for item in add.split(',').filter(|s| !s.trim().is_empty()) {
            let (k, v) = key_value(item, "--add-config")?;
            ops.push(AlterOp::Set(k, v));
        }
    }
    if let Some(del) = &args.delete_config {
        for k in del.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            ops.push(AlterOp::Delete(k.to_string()));
        }
    }
    if ops.is_empty() {
        return Err(usage("--alter needs --add-config and/or --delete-config"));
    }
    admin.alter_configs(&resource, &ops, false).await?;
    println!("Completed updating config.");
    Ok(())
}
