//! `sluice perf groups`: how long a consumer group takes to rebalance when a member joins
//! or leaves, and how many OffsetCommit requests the coordinator answers per second.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use clap::Args;
use hdrhistogram::Histogram;
use sluice_client::{Admin, Consumer, TopicPartition};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use super::{all_partitions, histogram};
use crate::cli::{properties, usage, CliError, CliResult, ConnArgs};

#[derive(Args, Debug)]
pub struct GroupsArgs {
    #[command(flatten)]
    pub conn: ConnArgs,
    /// An existing topic the members subscribe to.
    #[arg(long)]
    pub topic: String,
    /// Members in the group when another joins.
    #[arg(long, default_value_t = 2)]
    pub members: usize,
    /// Joins (and leaves) to time.
    #[arg(long, default_value_t = 5)]
    pub rounds: usize,
    /// OffsetCommit requests to send (0: skip).
    #[arg(long, default_value_t = 50_000)]
    pub commits: u64,
    /// OffsetCommit requests in flight at once.
    #[arg(long, default_value_t = 16)]
    pub concurrency: usize,
    /// Member configs: key=value ... (e.g. heartbeat.interval.ms=3000)
    #[arg(long = "consumer-props", num_args = 1.., value_name = "KEY=VALUE")]
    pub consumer_props: Vec<String>,
}

/// A member polling on its own task; reports its generation (once stable) and assignment size.
struct Member {
    status: Arc<Mutex<(Option<i32>, usize)>>,
    stop: oneshot::Sender<()>,
    task: JoinHandle<Result<(), sluice_client::Error>>,
}

fn spawn_member(config: sluice_client::ClientConfig, topic: String) -> Member {
    let status = Arc::new(Mutex::new((None, 0)));
    let (stop, mut stopped) = oneshot::channel();
    let report = Arc::clone(&status);
    let task = tokio::spawn(async move {
        let mut c = Consumer::new(config)?;
        c.subscribe(&[topic.as_str()]).await?;
        loop {
            tokio::select! {
                _ = &mut stopped => break,
                r = c.poll(Duration::from_millis(20)) => { r?; }
            }
            let now = (c.group_generation().map(|g| g.1), c.assignment().len());
            *report
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner) = now;
        }
        c.close().await
    });
    Member { status, stop, task }
}

impl Member {
    async fn stop(self) -> Result<(), CliError> {
        let _ = self.stop.send(());
        self.task
            .await
            .map_err(|e| CliError::Failed(format!("member task: {e}")))??;
        Ok(())
    }
}

/// Wait until every member is stable in one generation newer than `after`, with all
/// partitions handed out; returns that generation.
async fn settled(members: &mut [Member], partitions: usize, after: i32) -> Result<i32, CliError> {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        for m in members.iter_mut() {
            if m.task.is_finished() {
                (&mut m.task)
                    .await
                    .map_err(|e| CliError::Failed(format!("member task: {e}")))??;
                return Err(CliError::Failed("a member stopped polling".into()));
            }
        }
        let states: Vec<(Option<i32>, usize)> = members
            .iter()
            .map(|m| {
                *m.status
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
            })
            .collect();
        let generation = states[0].0;
        if let Some(g) = generation.filter(|g| *g > after) {
            if states.iter().all(|s| s.0 == Some(g))
                && states.iter().map(|s| s.1).sum::<usize>() == partitions
            {
                return Ok(g);
            }
        }
        if Instant::now() > deadline {
            return Err(CliError::Failed(format!(
                "the group did not settle within 120 s: {states:?}"
            )));
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn summary(name: &str, times: &[Duration]) {
    let mut sorted = times.to_vec();
    sorted.sort();
    if sorted.is_empty() {
        return;
    }
    println!(
        "{name}: {} rebalances, {:.1} ms min, {:.1} ms median, {:.1} ms max",
        sorted.len(),
        ms(sorted[0]),
        ms(sorted[sorted.len() / 2]),
        ms(sorted[sorted.len() - 1])
    );
}

pub async fn run(args: GroupsArgs) -> CliResult {
    if args.members == 0 || args.concurrency == 0 {
        return Err(usage("--members and --concurrency must be at least 1"));
    }
    let partitions = all_partitions(&args.conn, &args.topic).await?;
    let mut config = args.conn.client_config()?;
    config.group_id = Some(format!("perf-rebalance-{}", std::process::id()));
    config.fetch_max_wait = Duration::from_millis(100);
    for (k, v) in properties(&args.consumer_props, "--consumer-props")? {
        config = config.set(&k, &v).map_err(|e| usage(e.to_string()))?;
    }
    println!(
        "{} members on {} partitions of {}, heartbeat.interval.ms={}",
        args.members,
        partitions.len(),
        args.topic,
        config.heartbeat_interval.as_millis()
    );
    let mut members: Vec<Member> = (0..args.members)
        .map(|_| spawn_member(config.clone(), args.topic.clone()))
        .collect();
    let mut generation = settled(&mut members, partitions.len(), -1).await?;
    let (mut joins, mut leaves) = (Vec::new(), Vec::new());
    for _ in 0..args.rounds {
        let started = Instant::now();
        members.push(spawn_member(config.clone(), args.topic.clone()));
        generation = settled(&mut members, partitions.len(), generation).await?;
        joins.push(started.elapsed());
        let started = Instant::now();
        if let Some(m) = members.pop() {
            m.stop().await?;
        }
        generation = settled(&mut members, partitions.len(), generation).await?;
        leaves.push(started.elapsed());
    }
    summary("join", &joins);
    summary("leave", &leaves);
    for m in members {
        m.stop().await?;
    }
    if args.commits > 0 {
        commits(&args, &partitions).await?;
    }
    Ok(())
}

/// OffsetCommit throughput: `concurrency` committers, each waiting for its answer.
async fn commits(args: &GroupsArgs, partitions: &[TopicPartition]) -> CliResult {
    let admin = Admin::new(args.conn.client_config()?)?;
    let group = format!("perf-commits-{}", std::process::id());
    // Warm up: coordinator lookup, connection.
    admin
        .alter_group_offsets(&group, &[(partitions[0].clone(), 0)])
        .await?;
    let sent = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let mut tasks = Vec::new();
    for i in 0..args.concurrency {
        let (admin, group, sent) = (admin.clone(), group.clone(), Arc::clone(&sent));
        let tp = partitions[i % partitions.len()].clone();
        let total = args.commits;
        tasks.push(tokio::spawn(async move {
            let mut h = histogram();
            loop {
                let n = sent.fetch_add(1, Ordering::Relaxed);
                if n >= total {
                    return Ok::<Histogram<u64>, sluice_client::Error>(h);
                }
                let t = Instant::now();
                for (_, r) in admin
                    .alter_group_offsets(&group, &[(tp.clone(), n as i64)])
                    .await?
                {
                    r?;
                }
                let _ = h.record(t.elapsed().as_micros().max(1) as u64);
            }
        }));
    }
    let mut all = histogram();
    for t in tasks {
        let h = t
            .await
            .map_err(|e| CliError::Failed(format!("committer task: {e}")))??;
        let _ = all.add(&h);
    }
    let secs = started.elapsed().as_secs_f64();
    println!(
        "commits: {} OffsetCommit requests, {:.0} requests/sec, {:.2} ms p50, {:.2} ms p99, {:.2} ms max latency ({} in flight)",
        args.commits,
        args.commits as f64 / secs,
        all.value_at_quantile(0.5) as f64 / 1000.0,
        all.value_at_quantile(0.99) as f64 / 1000.0,
        all.max() as f64 / 1000.0,
        args.concurrency
    );
    Ok(())
}
