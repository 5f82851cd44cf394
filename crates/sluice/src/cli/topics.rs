//! `sluice topics` — like `kafka-topics.sh`.

use clap::{ArgGroup, Args};
use sluice_client::admin::{ConfigResource, NewTopic, OffsetSpec};
use sluice_client::{Admin, TopicPartition};

use super::{key_value, usage, CliError, CliResult, ConnArgs};

#[derive(Args, Debug)]
#[command(
    group(ArgGroup::new("action").required(true).args(["create", "list", "describe", "delete", "alter"])),
    after_help = "Examples:\n  sluice topics --bootstrap-server 127.0.0.1:9092 --create --topic orders --partitions 6 --config retention.ms=86400000\n  sluice topics --list\n  sluice topics --describe --topic orders\n  sluice topics --alter --topic orders --partitions 12\n  sluice topics --delete --topic orders"
)]
pub struct TopicsArgs {
    #[command(flatten)]
    pub conn: ConnArgs,
    /// Create a topic.
    #[arg(long)]
    pub create: bool,
    /// List topic names.
    #[arg(long)]
    pub list: bool,
    /// Show partitions, leaders, replicas, ISR and offsets.
    #[arg(long)]
    pub describe: bool,
    /// Delete a topic.
    #[arg(long)]
    pub delete: bool,
    /// Add partitions to a topic.
    #[arg(long)]
    pub alter: bool,
    /// The topic.
    #[arg(long)]
    pub topic: Option<String>,
    /// Partition count (create; new count for --alter).
    #[arg(long)]
    pub partitions: Option<i32>,
    /// Replication factor (create).
    #[arg(long = "replication-factor")]
    pub replication_factor: Option<i16>,
    /// A topic config override, key=value (repeatable).
    #[arg(long = "config", value_name = "KEY=VALUE")]
    pub configs: Vec<String>,
    /// With --create: do nothing if the topic exists.
    #[arg(long = "if-not-exists")]
    pub if_not_exists: bool,
    /// With --list/--describe: include internal topics.
    #[arg(long = "exclude-internal", default_value_t = false)]
    pub exclude_internal: bool,
}

fn topic(args: &TopicsArgs) -> Result<&str, CliError> {
    args.topic
        .as_deref()
        .ok_or_else(|| usage("this action needs --topic"))
}

pub async fn run(args: TopicsArgs) -> CliResult {
    let admin = Admin::new(args.conn.client_config())?;
    if args.create {
        let name = topic(&args)?;
        let mut t = NewTopic::new(
            name,
            args.partitions.unwrap_or(-1),
            args.replication_factor.unwrap_or(-1),
        );
        for c in &args.configs {
            let (k, v) = key_value(c, "--config")?;
            t = t.config(&k, &v);
        }
        let result = admin.create_topics(&[t], false).await?;
        match result.into_iter().next() {
            Some((_, Ok(()))) => println!("Created topic {name}."),
            Some((_, Err(e)))
                if args.if_not_exists
                    && e.code() == Some(sluice_client::ErrorCode::TopicAlreadyExists) => {}
            Some((_, Err(e))) => {
                return Err(CliError::Failed(format!("cannot create topic {name}: {e}")))
            }
            None => return Err(CliError::Failed("empty answer from the broker".into())),
        }
    } else if args.list {
        for name in admin.list_topics(!args.exclude_internal).await? {
            println!("{name}");
        }
    } else if args.describe {
        describe(&admin, args.topic.as_deref()).await?;
    } else if args.delete {
        let name = topic(&args)?;
        match admin.delete_topics(&[name]).await?.into_iter().next() {
            Some((_, Ok(()))) => println!("Deleted topic {name}."),
            Some((_, Err(e))) => {
                return Err(CliError::Failed(format!("cannot delete topic {name}: {e}")))
            }
            None => return Err(CliError::Failed("empty answer from the broker".into())),
        }
    } else if args.alter {
        let name = topic(&args)?;
        let count = args
            .partitions
            .ok_or_else(|| usage("--alter needs --partitions"))?;
        admin
            .create_partitions(name, count, false)
            .await
            .map_err(|e| CliError::Failed(format!("cannot alter topic {name}: {e}")))?;
        println!("Topic {name} now has {count} partitions.");
    }
    Ok(())
}

async fn offsets_map(
    admin: &Admin,
    tps: &[TopicPartition],
    spec: OffsetSpec,
) -> std::collections::HashMap<i32, i64> {
    let wanted: Vec<(TopicPartition, OffsetSpec)> =
        tps.iter().map(|tp| (tp.clone(), spec)).collect();
    admin
        .list_offsets(&wanted)
        .await
        .unwrap_or_default()
        .into_iter()
        .filter_map(|(tp, r)| r.ok().map(|o| (tp.partition.0, o.offset)))
        .collect()
}

fn ids(v: &[i32]) -> String {
    v.iter().map(i32::to_string).collect::<Vec<_>>().join(",")
}

async fn describe(admin: &Admin, topic: Option<&str>) -> CliResult {
    let wanted: Vec<&str> = topic.into_iter().collect();
    let topics = admin.describe_topics(&wanted).await?;
    for t in topics {
        let configs = admin
            .describe_configs(&[ConfigResource::Topic(t.name.clone())])
            .await?;
        let overrides: Vec<String> = configs
            .into_iter()
            .next()
            .and_then(Result::ok)
            .unwrap_or_default()
            .into_iter()
            .filter(|c| c.source == 1)
            .map(|c| format!("{}={}", c.name, c.value.unwrap_or_default()))
            .collect();
        let rf = t.partitions.first().map_or(0, |p| p.replicas.len());
        println!(
            "Topic: {}\tTopicId: {}\tPartitionCount: {}\tReplicationFactor: {}\tConfigs: {}",
            t.name,
            sluice_protocol::base64::encode(&t.id),
            t.partitions.len(),
            rf,
            overrides.join(",")
        );
        let tps: Vec<TopicPartition> = t
            .partitions
            .iter()
            .map(|p| TopicPartition::new(t.name.clone(), p.partition))
            .collect();
        let earliest = offsets_map(admin, &tps, OffsetSpec::Earliest).await;
        let latest = offsets_map(admin, &tps, OffsetSpec::Latest).await;
        for p in &t.partitions {
            let show = |m: &std::collections::HashMap<i32, i64>| {
                m.get(&p.partition).map_or("?".to_string(), i64::to_string)
            };
            println!(
                "\tTopic: {}\tPartition: {}\tLeader: {}\tReplicas: {}\tIsr: {}\tLogStartOffset: {}\tLogEndOffset: {}",
                t.name,
                p.partition,
                p.leader,
                ids(&p.replicas),
                ids(&p.isr),
                show(&earliest),
                show(&latest)
            );
        }
    }
    Ok(())
}
