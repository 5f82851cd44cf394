//! `sluice topics` — like `kafka-topics.sh`.

use clap::{ArgGroup, Args};
use sluice_client::admin::{ConfigResource, NewTopic, OffsetSpec};
use sluice_client::{Admin, TopicPartition};

use super::{key_value, usage, CliError, CliResult, ConnArgs};

#[derive(Args, Debug)]
#[command(
    group(ArgGroup::new("action").required(true).args(["create", "list", "describe", "delete", "alter", "reassign", "cancel_reassignment", "list_reassignments"])),
    after_help = "Examples:\n  sluice topics --bootstrap-server 127.0.0.1:9092 --create --topic orders --partitions 6 --config retention.ms=86400000\n  sluice topics --list\n  sluice topics --describe --topic orders\n  sluice topics --alter --topic orders --partitions 12\n  sluice topics --delete --topic orders\n  sluice topics --reassign --topic orders --replica-assignment 2:3,3:1 --wait\n  sluice topics --reassign --topic orders --partition 1 --replica-assignment 3:1\n  sluice topics --list-reassignments\n  sluice topics --cancel-reassignment --topic orders --partition 1"
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
    /// Move partitions to the replicas of --replica-assignment (partition reassignment).
    #[arg(long)]
    pub reassign: bool,
    /// Cancel the reassignments in progress of --topic (or of its --partition).
    #[arg(long = "cancel-reassignment")]
    pub cancel_reassignment: bool,
    /// Show the reassignments in progress (of --topic, or all).
    #[arg(long = "list-reassignments")]
    pub list_reassignments: bool,
    /// The topic.
    #[arg(long)]
    pub topic: Option<String>,
    /// One partition (with --reassign / --cancel-reassignment).
    #[arg(long)]
    pub partition: Option<i32>,
    /// Replica lists, Kafka's format: partitions separated by ',', the brokers of each by
    /// ':' ("2:3,3:1" = partition 0 on 2 and 3, partition 1 on 3 and 1). With
    /// --partition, one list for that partition.
    #[arg(long = "replica-assignment")]
    pub replica_assignment: Option<String>,
    /// With --reassign: wait until the reassignment completes.
    #[arg(long)]
    pub wait: bool,
    /// With --wait: give up (exit 1, naming what is still moving) after this many ms.
    #[arg(long = "wait-timeout-ms", default_value_t = 600_000, value_name = "MS")]
    pub wait_timeout_ms: u64,
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
    /// With --describe: only partitions with no live leader (kafka-topics.sh's option).
    #[arg(long = "unavailable-partitions")]
    pub unavailable_partitions: bool,
    /// With --describe: only partitions whose ISR is smaller than their replica set.
    #[arg(long = "under-replicated-partitions")]
    pub under_replicated_partitions: bool,
    /// With --list/--describe: include internal topics.
    #[arg(long = "exclude-internal", default_value_t = false)]
    pub exclude_internal: bool,
    /// With --describe: the admin API (a broker's `admin.http.listener`) that tells diskless
    /// topics' object counts and upload/commit times, HOST:PORT. Default: the first
    /// bootstrap server's host, port 9644.
    #[arg(long = "admin-api", value_name = "HOST:PORT")]
    pub admin_api: Option<String>,
}

/// `GET path` of the admin API at `addr`: the JSON body of a 200 answer.
async fn admin_api_get(addr: &str, path: &str) -> Result<serde_json::Value, String> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let io = async {
        let mut s = tokio::net::TcpStream::connect(addr).await?;
        s.write_all(format!("GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").as_bytes())
            .await?;
        let mut out = Vec::new();
        s.take(64 << 20).read_to_end(&mut out).await?;
        Ok::<_, std::io::Error>(out)
    };
    let raw = tokio::time::timeout(std::time::Duration::from_secs(10), io)
        .await
        .map_err(|_| "no answer in 10 s".to_string())?
        .map_err(|e| e.to_string())?;
    let text = String::from_utf8_lossy(&raw);
    let (head, body) = text.split_once("\r\n\r\n").ok_or("not an HTTP answer")?;
    let status = head.lines().next().unwrap_or_default();
    if !status.contains(" 200 ") {
        return Err(format!("{path}: {status}"));
    }
    serde_json::from_str(body).map_err(|e| format!("{path}: {e}"))
}

/// What the admin API tells of diskless topics: `/api/topics` and `/api/diskless`.
struct DisklessView {
    topics: serde_json::Value,
    node: serde_json::Value,
}

impl DisklessView {
    async fn fetch(addr: &str) -> Result<Self, String> {
        Ok(Self {
            topics: admin_api_get(addr, "/api/topics").await?,
            node: admin_api_get(addr, "/api/diskless").await?,
        })
    }

    /// The columns of one partition: its segments and what is still in WAL objects.
    fn partition(&self, topic: &str, partition: i32) -> String {
        let d = self
            .topics
            .as_array()
            .and_then(|ts| ts.iter().find(|t| t["name"] == topic))
            .and_then(|t| t["partitions"].as_array())
            .and_then(|ps| ps.iter().find(|p| p["partition"] == partition))
            .map(|p| &p["diskless"]);
        match d {
            Some(d) if d.is_object() => format!(
                "\tSegments: {}\tSegmentBytes: {}\tWalBatches: {}\tWalObjects: {}\tWalBytes: {}",
                d["segments"],
                d["segment_bytes"],
                d["wal_batches"],
                d["wal_objects"],
                d["wal_bytes"]
            ),
            _ => "\tSegments: ?".into(),
        }
    }

    /// The node's upload and commit times.
    fn times(&self) -> String {
        let t = |v: &serde_json::Value| match v.get("p50") {
            Some(p50) => format!(
                "p50 {:.1} ms, p99 {:.1} ms (last {})",
                p50.as_f64().unwrap_or_default(),
                v["p99"].as_f64().unwrap_or_default(),
                v["count"]
            ),
            None => "none yet".into(),
        };
        format!(
            "Diskless (broker {}): upload {}; commit {}",
            self.node["node"],
            t(&self.node["upload_ms"]),
            t(&self.node["commit_ms"])
        )
    }
}

fn topic(args: &TopicsArgs) -> Result<&str, CliError> {
    args.topic
        .as_deref()
        .ok_or_else(|| usage("this action needs --topic"))
}

pub async fn run(args: TopicsArgs) -> CliResult {
    let admin = Admin::new(args.conn.client_config()?)?;
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
        let only = match (
            args.unavailable_partitions,
            args.under_replicated_partitions,
        ) {
            (true, _) => Only::Unavailable,
            (_, true) => Only::UnderReplicated,
            _ => Only::All,
        };
        let admin_api = args.admin_api.clone().unwrap_or_else(|| {
            let first = args
                .conn
                .bootstrap_server
                .split(',')
                .next()
                .unwrap_or_default();
            let host = first.rsplit_once(':').map_or(first, |(h, _)| h);
            format!("{host}:9644")
        });
        describe(&admin, args.topic.as_deref(), only, &admin_api).await?;
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
    } else if args.reassign {
        reassign(&admin, &args).await?;
    } else if args.cancel_reassignment {
        let name = topic(&args)?;
        let partitions: Vec<i32> = match args.partition {
            Some(p) => vec![p],
            None => admin
                .list_partition_reassignments(Some(name))
                .await?
                .into_iter()
                .map(|r| r.partition.partition.0)
                .collect(),
        };
        if partitions.is_empty() {
            println!("No reassignment of {name} is in progress.");
        }
        let targets: Vec<(TopicPartition, Option<Vec<i32>>)> = partitions
            .into_iter()
            .map(|p| (TopicPartition::new(name, p), None))
            .collect();
        report(
            admin.alter_partition_reassignments(&targets).await?,
            "Cancelled",
        )?;
    } else if args.list_reassignments {
        let ongoing = admin
            .list_partition_reassignments(args.topic.as_deref())
            .await?;
        if ongoing.is_empty() {
            println!("No partition reassignments in progress.");
        }
        for r in ongoing {
            println!(
                "Topic: {}\tPartition: {}\tReplicas: {}\tAdding: {}\tRemoving: {}",
                r.partition.topic,
                r.partition.partition.0,
                ids(&r.replicas),
                ids(&r.adding),
                ids(&r.removing)
            );
        }
    }
    Ok(())
}

/// Parse Kafka's replica-assignment format: "1:2,2:3" = [[1, 2], [2, 3]].
fn parse_assignment(spec: &str) -> Result<Vec<Vec<i32>>, CliError> {
    spec.split(',')
        .map(|part| {
            part.split(':')
                .map(|b| {
                    b.trim().parse::<i32>().map_err(|_| {
                        usage(format!(
                            "--replica-assignment: {b:?} is not a broker id (expected e.g. 1:2,2:3)"
                        ))
                    })
                })
                .collect()
        })
        .collect()
}

/// Print one line per partition; fail if any partition failed.
fn report(
    results: Vec<(TopicPartition, Result<(), sluice_client::Error>)>,
    done: &str,
) -> CliResult {
    let mut failed = 0;
    for (tp, r) in results {
        match r {
            Ok(()) => println!("{done} reassignment of {tp}."),
            Err(e) => {
                failed += 1;
                eprintln!("Cannot change the reassignment of {tp}: {e}");
            }
        }
    }
    if failed > 0 {
        return Err(CliError::Failed(format!("{failed} partition(s) failed")));
    }
    Ok(())
}

async fn reassign(admin: &Admin, args: &TopicsArgs) -> CliResult {
    let name = topic(args)?;
    let spec = args
        .replica_assignment
        .as_deref()
        .ok_or_else(|| usage("--reassign needs --replica-assignment"))?;
    let lists = parse_assignment(spec)?;
    let targets: Vec<(TopicPartition, Option<Vec<i32>>)> = match args.partition {
        Some(p) if lists.len() == 1 => {
            vec![(TopicPartition::new(name, p), lists.into_iter().next())]
        }
        Some(_) => {
            return Err(usage(
                "with --partition, --replica-assignment holds one replica list",
            ))
        }
        None => lists
            .into_iter()
            .enumerate()
            .map(|(i, r)| (TopicPartition::new(name, i as i32), Some(r)))
            .collect(),
    };
    let wanted: Vec<TopicPartition> = targets.iter().map(|(tp, _)| tp.clone()).collect();
    report(
        admin.alter_partition_reassignments(&targets).await?,
        "Started",
    )?;
    if args.wait {
        let deadline =
            tokio::time::Instant::now() + std::time::Duration::from_millis(args.wait_timeout_ms);
        loop {
            let pending: Vec<String> = admin
                .list_partition_reassignments(Some(name))
                .await?
                .into_iter()
                .filter(|r| wanted.contains(&r.partition))
                .map(|r| format!("{} (adding {})", r.partition, ids(&r.adding)))
                .collect();
            if pending.is_empty() {
                break;
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(CliError::Failed(format!(
                    "still reassigning after {} ms: {}",
                    args.wait_timeout_ms,
                    pending.join(", ")
                )));
            }
            // Progress happens on other brokers (new replicas catching up) and Kafka's API
            // has no notification for it: poll, as kafka-reassign-partitions --verify does.
            tokio::time::sleep(std::time::Duration::from_millis(500)).await;
        }
        println!("Reassignment of {name} complete.");
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

/// A partition's leader as kafka-topics.sh shows it ("none": offline).
fn leader_text(leader: i32) -> String {
    if leader < 0 {
        "none".into()
    } else {
        leader.to_string()
    }
}

fn ids(v: &[i32]) -> String {
    v.iter().map(i32::to_string).collect::<Vec<_>>().join(",")
}

/// Which partitions `--describe` shows (kafka-topics.sh's report options).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Only {
    All,
    /// No live leader: offline.
    Unavailable,
    UnderReplicated,
}

/// Broker ids as kafka-topics.sh lists them ("N/A" where the broker does not say).
fn elr_ids(v: Option<&Vec<i32>>) -> String {
    v.map_or_else(|| "N/A".to_string(), |v| ids(v))
}

/// A partition as kafka-topics.sh describes it: leader ("none": offline), replicas, ISR and
/// eligible leader replicas.
fn partition_line(
    topic: &str,
    p: &sluice_client::cluster::PartitionInfo,
    elr: &std::collections::HashMap<(String, i32), sluice_client::admin::Elr>,
) -> String {
    let e = elr
        .get(&(topic.to_string(), p.partition))
        .cloned()
        .unwrap_or_default();
    format!(
        "\tTopic: {topic}\tPartition: {}\tLeader: {}\tReplicas: {}\tIsr: {}\tElr: {}\tLastKnownElr: {}",
        p.partition,
        leader_text(p.leader),
        ids(&p.replicas),
        ids(&p.isr),
        elr_ids(e.eligible.as_ref()),
        elr_ids(e.last_known.as_ref())
    )
}

async fn describe(admin: &Admin, topic: Option<&str>, only: Only, admin_api: &str) -> CliResult {
    let mut diskless: Option<Result<DisklessView, String>> = None;
    let wanted: Vec<&str> = topic.into_iter().collect();
    let topics = admin.describe_topics(&wanted).await?;
    // Eligible leader replicas (KIP-966), from DescribeTopicPartitions: "N/A" from a broker
    // without it.
    let elr = admin.describe_elr(&wanted).await.unwrap_or_default();
    let live: std::collections::HashSet<i32> = match only {
        Only::Unavailable => admin
            .describe_cluster()
            .await?
            .brokers
            .iter()
            .map(|b| b.0)
            .collect(),
        _ => Default::default(),
    };
    for t in topics {
        let shown: Vec<_> = t
            .partitions
            .iter()
            .filter(|p| match only {
                Only::All => true,
                Only::Unavailable => p.leader < 0 || !live.contains(&p.leader),
                Only::UnderReplicated => p.isr.len() < p.replicas.len(),
            })
            .collect();
        if only != Only::All {
            // As kafka-topics.sh: the matching partitions only, no topic line.
            for p in shown {
                println!("{}", partition_line(&t.name, p, &elr));
            }
            continue;
        }
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
        // Tiered storage: where local disk starts, how far the remote tier reaches, and what
        // is not copied yet (the upload lag, in records).
        let tiered = overrides.iter().any(|o| o == "remote.storage.enable=true");
        // Diskless: what the store holds, from the admin API (no Kafka API carries it).
        let is_diskless = overrides.iter().any(|o| o == "diskless.enable=true");
        if is_diskless && diskless.is_none() {
            diskless = Some(DisklessView::fetch(admin_api).await);
        }
        let view = diskless.as_ref().filter(|_| is_diskless);
        let (local, remote) = if tiered {
            (
                offsets_map(admin, &tps, OffsetSpec::EarliestLocal).await,
                offsets_map(admin, &tps, OffsetSpec::LatestTiered).await,
            )
        } else {
            Default::default()
        };
        for p in &t.partitions {
            let show = |m: &std::collections::HashMap<i32, i64>| {
                m.get(&p.partition).map_or("?".to_string(), i64::to_string)
            };
            let tier = if tiered {
                let lag = match (remote.get(&p.partition), latest.get(&p.partition)) {
                    (Some(r), Some(l)) => (l - r - 1).max(0).to_string(),
                    _ => "?".into(),
                };
                format!(
                    "\tLocalLogStartOffset: {}\tTieredOffset: {}\tUploadLag: {lag}",
                    show(&local),
                    show(&remote)
                )
            } else {
                String::new()
            };
            let objects = match view {
                Some(Ok(v)) => v.partition(&t.name, p.partition),
                _ => String::new(),
            };
            println!(
                "{}\tLogStartOffset: {}\tLogEndOffset: {}{tier}{objects}",
                partition_line(&t.name, p, &elr),
                show(&earliest),
                show(&latest)
            );
        }
        match view {
            Some(Ok(v)) => println!("{}", v.times()),
            Some(Err(e)) => println!(
                "Diskless: object counts not shown: the admin API at {admin_api} did not answer ({e}; see --admin-api)"
            ),
            None => {}
        }
    }
    Ok(())
}
