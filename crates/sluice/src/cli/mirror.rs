//! `sluice mirror` — cluster links and mirror topics (Sluice's offset-preserving mirroring;
//! the flags follow Confluent's `kafka-cluster-links` / `kafka-mirrors`). Run against the
//! destination cluster.

use std::time::Duration;

use clap::{ArgGroup, Args};
use sluice_client::Admin;

use super::{config_items, properties_file, usage, CliError, CliResult, ConnArgs};

#[derive(Args, Debug)]
#[command(
    group(ArgGroup::new("action").required(true).args([
        "create", "delete", "add", "remove", "describe", "list", "pause", "resume", "promote",
        "failover", "alter"
    ])),
    after_help = "Examples:\n  sluice mirror --create --link dr --source-bootstrap-server src:9092 --consumer-groups '*'\n  sluice mirror --add --link dr --topic orders\n  sluice mirror --add --link dr --topic-pattern 'orders.*'\n  sluice mirror --describe --link dr\n  sluice mirror --promote --topic orders\n  sluice mirror --failover --topic orders\n  sluice mirror --delete --link dr"
)]
pub struct MirrorArgs {
    #[command(flatten)]
    pub conn: ConnArgs,
    /// Create a cluster link (--link, --source-bootstrap-server).
    #[arg(long)]
    pub create: bool,
    /// Delete a cluster link (its mirror topics must be promoted or deleted first).
    #[arg(long)]
    pub delete: bool,
    /// Change a link's settings (--link, --link-config).
    #[arg(long)]
    pub alter: bool,
    /// Add a mirror topic on a link (--link, --topic, optionally --source-topic), or a
    /// pattern of source topics to mirror as they appear (--link, --topic-pattern).
    #[arg(long)]
    pub add: bool,
    /// Remove a topic pattern from a link (--link, --topic-pattern; the mirror topics it
    /// made stay), or delete a mirror topic that is not promoted (--topic).
    #[arg(long)]
    pub remove: bool,
    /// Show links, their mirror topics and each partition's lag.
    #[arg(long)]
    pub describe: bool,
    /// List the links.
    #[arg(long)]
    pub list: bool,
    /// Stop copying to a mirror topic for now (it stays read-only).
    #[arg(long)]
    pub pause: bool,
    /// Copy again to a paused mirror topic.
    #[arg(long)]
    pub resume: bool,
    /// Make a mirror topic writable once it has everything the source has and a last copy
    /// of the link's group offsets is made (waits up to --wait-ms; until then the topic is
    /// `promoting`, still read-only).
    #[arg(long)]
    pub promote: bool,
    /// Make a mirror topic writable now, whatever its lag (the source may be gone).
    #[arg(long)]
    pub failover: bool,
    /// The cluster link.
    #[arg(long, value_name = "NAME")]
    pub link: Option<String>,
    /// The source cluster (with --create).
    #[arg(long = "source-bootstrap-server", value_name = "HOST:PORT")]
    pub source_bootstrap_server: Option<String>,
    /// Client settings that reach the source (security.protocol, sasl.*, ssl.*).
    #[arg(long = "source-command-config", value_name = "FILE")]
    pub source_command_config: Option<std::path::PathBuf>,
    /// Copy these groups' committed offsets from the source: names, or '*' for all.
    #[arg(long = "consumer-groups", value_name = "G1,G2|*")]
    pub consumer_groups: Option<String>,
    /// Link settings, k=v[,k=v] (e.g. mirror.start.offset.spec=latest).
    #[arg(long = "link-config", value_name = "K=V,...")]
    pub link_config: Option<String>,
    /// The mirror topic (comma-separated for --pause, --resume, --promote, --failover;
    /// without it, those act on every mirror topic of --link).
    #[arg(long, value_name = "TOPIC")]
    pub topic: Option<String>,
    /// A regular expression: every source topic whose whole name matches is mirrored under
    /// the same name, now and as the source creates more.
    #[arg(long = "topic-pattern", value_name = "REGEX")]
    pub topic_pattern: Option<String>,
    /// The topic on the source (default: the same name as the mirror topic).
    #[arg(long = "source-topic", value_name = "TOPIC")]
    pub source_topic: Option<String>,
    /// Replication factor of a new mirror topic (default: the broker's).
    #[arg(long = "replication-factor", default_value_t = -1)]
    pub replication_factor: i16,
    /// How long --promote waits for the lag to reach zero and the last copy of group offsets.
    #[arg(long = "wait-ms", default_value_t = 30_000)]
    pub wait_ms: u64,
}

fn need<'a>(v: &'a Option<String>, flag: &str, action: &str) -> Result<&'a str, CliError> {
    v.as_deref()
        .filter(|s| !s.is_empty())
        .ok_or_else(|| usage(format!("{action} needs {flag}")))
}

pub async fn run(args: MirrorArgs) -> CliResult {
    let admin = Admin::new(args.conn.client_config()?)?;
    if args.create {
        let link = need(&args.link, "--link", "--create")?;
        let bootstrap = need(
            &args.source_bootstrap_server,
            "--source-bootstrap-server",
            "--create",
        )?;
        let mut configs = vec![("bootstrap.servers".to_string(), bootstrap.to_string())];
        if let Some(path) = &args.source_command_config {
            let text = std::fs::read_to_string(path)
                .map_err(|e| usage(format!("--source-command-config {}: {e}", path.display())))?;
            configs.extend(properties_file(&text));
        }
        if let Some(groups) = &args.consumer_groups {
            configs.push(("consumer.offset.sync.enable".into(), "true".into()));
            configs.push(("consumer.offset.group.filters".into(), groups.clone()));
        }
        if let Some(items) = &args.link_config {
            configs.extend(config_items(items, "--link-config")?);
        }
        admin.create_link(link, &configs).await?;
        println!("Cluster link '{link}' created.");
    } else if args.alter {
        let link = need(&args.link, "--link", "--alter")?;
        let items = need(&args.link_config, "--link-config", "--alter")?;
        admin
            .alter_link(link, &config_items(items, "--link-config")?, &[])
            .await?;
        println!("Cluster link '{link}' altered.");
    } else if args.delete {
        let link = need(&args.link, "--link", "--delete")?;
        admin.delete_link(link).await?;
        println!("Cluster link '{link}' deleted.");
    } else if args.add && args.topic_pattern.is_some() {
        let link = need(&args.link, "--link", "--add")?;
        let pattern = need(&args.topic_pattern, "--topic-pattern", "--add")?;
        admin.add_mirror_topic_pattern(link, pattern).await?;
        println!("Link '{link}' now mirrors every source topic matching '{pattern}'.");
    } else if args.remove {
        if let Some(pattern) = args.topic_pattern.as_deref() {
            let link = need(&args.link, "--link", "--remove --topic-pattern")?;
            admin.remove_mirror_topic_pattern(link, pattern).await?;
            println!("Link '{link}' no longer mirrors new topics matching '{pattern}'.");
        } else {
            let topic = need(&args.topic, "--topic or --topic-pattern", "--remove")?;
            remove_mirror_topic(&admin, topic).await?;
            println!("Mirror topic {topic} deleted.");
        }
    } else if args.add {
        let link = need(&args.link, "--link", "--add")?;
        let topic = need(&args.topic, "--topic or --topic-pattern", "--add")?;
        admin
            .create_mirror_topic(
                topic,
                link,
                args.source_topic.as_deref(),
                args.replication_factor,
            )
            .await?;
        println!("Created mirror topic {topic} on link '{link}'.");
    } else if args.list {
        for (name, bootstrap) in admin.list_links().await? {
            println!("Link name: '{name}', source: '{bootstrap}'");
        }
    } else if args.describe {
        describe(&admin, args.link.as_deref()).await?;
    } else {
        let topics: Vec<String> = match (&args.topic, &args.link) {
            (Some(t), _) => t
                .split(',')
                .map(str::trim)
                .filter(|t| !t.is_empty())
                .map(str::to_owned)
                .collect(),
            (None, Some(link)) => admin
                .describe_link(link)
                .await?
                .topics
                .into_iter()
                .filter(|t| t.state != "stopped")
                .map(|t| t.topic)
                .collect(),
            (None, None) => return Err(usage("this action needs --topic or --link")),
        };
        if args.promote {
            admin
                .promote_mirror_topics(&topics, Duration::from_millis(args.wait_ms))
                .await
                .map_err(|e| match e {
                    sluice_client::Error::Timeout(m) => CliError::Failed(format!(
                        "{m} (it stays read-only; use --failover to promote it anyway)"
                    )),
                    other => other.into(),
                })?;
            for topic in &topics {
                println!("Mirror topic {topic} promoted: it is now writable.");
            }
            return Ok(());
        }
        for topic in &topics {
            let (state, done) = if args.pause {
                ("paused", "paused")
            } else if args.resume {
                ("active", "resumed")
            } else {
                ("stopped", "promoted: it is now writable")
            };
            admin.set_mirror_state(topic, state).await?;
            println!("Mirror topic {topic} {done}.");
        }
    }
    Ok(())
}

/// Delete `topic`, which must be a mirror topic not yet promoted (a promoted one is an
/// ordinary topic: `sluice topics --delete`).
async fn remove_mirror_topic(admin: &Admin, topic: &str) -> CliResult {
    for (name, _) in admin.list_links().await? {
        let d = admin.describe_link(&name).await?;
        if d.topics
            .iter()
            .any(|t| t.topic == topic && t.state != "stopped")
        {
            for (_, r) in admin.delete_topics(&[topic]).await? {
                r?;
            }
            return Ok(());
        }
    }
    Err(CliError::Failed(format!(
        "{topic} is not a mirror topic (a promoted one is deleted with sluice topics --delete)"
    )))
}

async fn describe(admin: &Admin, link: Option<&str>) -> CliResult {
    let links: Vec<String> = match link {
        Some(l) => vec![l.to_string()],
        None => admin
            .list_links()
            .await?
            .into_iter()
            .map(|(n, _)| n)
            .collect(),
    };
    for name in links {
        let d = admin.describe_link(&name).await?;
        let source = d
            .configs
            .iter()
            .find(|(k, _)| k == "bootstrap.servers")
            .and_then(|(_, v)| v.clone())
            .unwrap_or_default();
        println!("Link name: '{name}'  Source: '{source}'");
        let patterns = d
            .configs
            .iter()
            .find(|(k, _)| k == "auto.create.mirror.topics.patterns")
            .and_then(|(_, v)| v.clone())
            .filter(|v| !v.is_empty());
        if let Some(p) = patterns {
            println!("TopicPatterns: {p}");
        }
        for t in &d.topics {
            println!(
                "Topic: {}\tLinkName: {name}\tSourceTopic: {}\tState: {}",
                t.topic,
                t.source_topic,
                t.state.to_ascii_uppercase()
            );
            for p in d.partitions.iter().filter(|p| p.topic == t.topic) {
                println!(
                    "\tPartition: {}\tBroker: {}\tLocalLogEndOffset: {}\tLastFetchSourceHighWatermark: {}\tLag: {}\tLagMs: {}{}",
                    p.partition,
                    p.broker,
                    p.log_end_offset,
                    p.source_high_watermark,
                    p.lag_records,
                    p.lag_ms,
                    p.error.as_ref().map_or(String::new(), |e| format!("\tError: {e}"))
                );
            }
        }
    }
    Ok(())
}
