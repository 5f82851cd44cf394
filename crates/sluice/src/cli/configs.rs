//! `sluice configs` — like `kafka-configs.sh`: topic and broker configs, and client quotas
//! of users and client ids (`producer_byte_rate`, `consumer_byte_rate`,
//! `request_percentage`).

use clap::{ArgGroup, Args};
use sluice_client::admin::{AlterOp, ConfigResource, QuotaEntity, QuotaMatch};
use sluice_client::Admin;

use super::{config_items, usage, CliError, CliResult, ConnArgs};

#[derive(Args, Debug)]
#[command(
    group(ArgGroup::new("action").required(true).args(["describe", "alter"])),
    after_help = "Examples:\n  sluice configs --describe --entity-type topics --entity-name orders\n  sluice configs --describe --entity-type brokers --entity-name 0 --all\n  sluice configs --alter --entity-type topics --entity-name orders --add-config retention.ms=3600000,cleanup.policy=delete\n  sluice configs --alter --entity-type topics --entity-name orders --delete-config retention.ms\n  sluice configs --alter --entity-type topics --entity-name orders --add-config 'leader.replication.throttled.replicas=[0:1,1:2]'\n  sluice configs --alter --entity-type users --entity-name alice --add-config producer_byte_rate=1048576,consumer_byte_rate=2097152\n  sluice configs --alter --entity-type clients --entity-default --add-config request_percentage=50\n  sluice configs --alter --user alice --client app --add-config producer_byte_rate=65536\n  sluice configs --describe --entity-type users [--entity-name alice]\n  sluice configs --alter --entity-type broker-loggers --entity-name 1 --add-config sluice_broker::replica::fetcher=DEBUG\n  sluice configs --describe --entity-type broker-loggers --entity-name 1\n  sluice configs --alter --entity-type groups --entity-name orders-app --add-config consumer.session.timeout.ms=50000\n  sluice configs --alter --entity-type client-metrics --entity-name producers --add-config 'metrics=[org.apache.kafka.producer.],interval.ms=10000,match=[client_software_name=apache-kafka-java]'"
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
    /// topics, brokers, users or clients.
    #[arg(long = "entity-type")]
    pub entity_type: Option<String>,
    /// With --entity-type users|clients: the default entity (`<default>`).
    #[arg(long = "entity-default")]
    pub entity_default: bool,
    /// Quotas of this user (with --client: of this user and client id).
    #[arg(long)]
    pub user: Option<String>,
    /// Quotas of this client id.
    #[arg(long)]
    pub client: Option<String>,
    /// Quotas of the default user.
    #[arg(long = "user-defaults")]
    pub user_defaults: bool,
    /// Quotas of the default client id.
    #[arg(long = "client-defaults")]
    pub client_defaults: bool,
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
        6 => "DYNAMIC_BROKER_LOGGER_CONFIG",
        7 => "CLIENT_METRICS_CONFIG",
        8 => "DYNAMIC_GROUP_CONFIG",
        _ => "UNKNOWN",
    }
}

/// The quota entity the flags name, if they name one; each part is (given, name or default).
fn quota_target(args: &ConfigsArgs) -> Result<Option<QuotaTarget>, CliError> {
    let named_or_default = |name: &Option<String>, default: bool| match (name, default) {
        (Some(n), _) => Some(Some(n.clone())),
        (None, true) => Some(None),
        (None, false) => None,
    };
    let mut user = named_or_default(&args.user, args.user_defaults);
    let mut client = named_or_default(&args.client, args.client_defaults);
    match args.entity_type.as_deref() {
        Some("users" | "user") => {
            user = user.or(named_or_default(&args.entity_name, args.entity_default));
            if user.is_none() {
                return Ok(Some(QuotaTarget::AllOf("user", client)));
            }
        }
        Some("clients" | "client") => {
            client = client.or(named_or_default(&args.entity_name, args.entity_default));
            if client.is_none() {
                return Ok(Some(QuotaTarget::AllOf("client-id", user)));
            }
        }
        _ if user.is_none() && client.is_none() => return Ok(None),
        Some(other) => {
            return Err(usage(format!(
                "--entity-type {other} cannot be combined with --user/--client"
            )))
        }
        None => {}
    }
    Ok(Some(QuotaTarget::One(QuotaEntity {
        user,
        client_id: client,
    })))
}

enum QuotaTarget {
    /// One entity (to alter or describe).
    One(QuotaEntity),
    /// Every entity of this type (describe only), within the other part if given.
    AllOf(&'static str, Option<Option<String>>),
}

fn quota_value(k: &str, v: &str) -> Result<f64, CliError> {
    v.parse::<f64>()
        .map_err(|_| usage(format!("--add-config {k}={v}: the value must be a number")))
}

async fn run_quotas(args: &ConfigsArgs, target: QuotaTarget) -> CliResult {
    let admin = Admin::new(args.conn.client_config()?)?;
    if args.describe {
        let part = |t: &'static str, p: &Option<Option<String>>| {
            p.as_ref()
                .map(|n| (t, n.clone().map_or(QuotaMatch::Default, QuotaMatch::Exact)))
        };
        let (components, strict) = match &target {
            QuotaTarget::One(e) => (
                [part("user", &e.user), part("client-id", &e.client_id)]
                    .into_iter()
                    .flatten()
                    .collect::<Vec<_>>(),
                true,
            ),
            QuotaTarget::AllOf(t, other) => {
                let other_type = if *t == "user" { "client-id" } else { "user" };
                let mut c = vec![(*t, QuotaMatch::Any)];
                c.extend(part(other_type, other));
                (c, other.is_some())
            }
        };
        for (entity, values) in admin.describe_client_quotas(&components, strict).await? {
            let list: Vec<String> = values.iter().map(|(k, v)| format!("{k}={v}")).collect();
            println!(
                "Quota configs for {} are {}",
                entity.describe(),
                list.join(", ")
            );
        }
        return Ok(());
    }
    let QuotaTarget::One(entity) = target else {
        return Err(usage(
            "--alter needs one entity: --entity-name NAME or --entity-default (or --user/--client)",
        ));
    };
    let mut ops = Vec::new();
    if let Some(add) = &args.add_config {
        for (k, v) in config_items(add, "--add-config")? {
            let value = quota_value(&k, &v)?;
            ops.push((k, Some(value)));
        }
    }
    if let Some(del) = &args.delete_config {
        for k in del.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            ops.push((k.to_string(), None));
        }
    }
    if ops.is_empty() {
        return Err(usage("--alter needs --add-config and/or --delete-config"));
    }
    admin.alter_client_quotas(&entity, &ops).await?;
    println!("Completed updating config for {}.", entity.describe());
    Ok(())
}

pub async fn run(args: ConfigsArgs) -> CliResult {
    if let Some(target) = quota_target(&args)? {
        return run_quotas(&args, target).await;
    }
    let resource = match (&args.topic, args.entity_type.as_deref(), &args.entity_name) {
        (Some(t), None, None) => ConfigResource::Topic(t.clone()),
        (None, Some("topics" | "topic"), Some(n)) => ConfigResource::Topic(n.clone()),
        (None, Some("brokers" | "broker"), None) if args.entity_default => {
            ConfigResource::BrokerDefault
        }
        (None, Some("brokers" | "broker"), Some(n)) if n.is_empty() => {
            ConfigResource::BrokerDefault
        }
        (None, Some("brokers" | "broker"), Some(n)) => {
            ConfigResource::Broker(n.parse().map_err(|_| {
                usage(format!(
                    "--entity-name for brokers is a broker id, not '{n}'"
                ))
            })?)
        }
        (None, Some("broker-loggers" | "broker-logger"), Some(n)) => {
            ConfigResource::BrokerLogger(n.parse().map_err(|_| {
                usage(format!(
                    "--entity-name for broker-loggers is a broker id, not '{n}'"
                ))
            })?)
        }
        (None, Some("client-metrics"), Some(n)) => ConfigResource::ClientMetrics(n.clone()),
        (None, Some("groups" | "group"), Some(n)) => ConfigResource::Group(n.clone()),
        (None, Some(other), _)
            if !["topics", "brokers", "broker-loggers", "client-metrics", "groups"]
                .contains(&other) =>
        {
            return Err(usage(format!(
                "--entity-type must be topics, brokers, broker-loggers, client-metrics, groups, users or clients, not '{other}'"
            )))
        }
        _ => return Err(usage(
            "name the entity: --entity-type topics|brokers --entity-name NAME (or --topic NAME)",
        )),
    };
    let admin = Admin::new(args.conn.client_config()?)?;
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
            ConfigResource::BrokerDefault => ("the cluster-wide broker", "default".to_string()),
            ConfigResource::BrokerLogger(b) => ("broker-logger", b.to_string()),
            ConfigResource::ClientMetrics(n) => ("client-metrics", n.clone()),
            ConfigResource::Group(g) => ("group", g.clone()),
            ConfigResource::ClusterLink(l) | ConfigResource::ClusterLinkOn(l, _) => {
                ("cluster-link", l.clone())
            }
        };
        println!(
            "{} configs for {what} {name} are:",
            if args.all { "All" } else { "Dynamic" }
        );
        for e in entries
            .iter()
            .filter(|e| args.all || (1..=3).contains(&e.source) || (6..=8).contains(&e.source))
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
        for (k, v) in config_items(add, "--add-config")? {
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
