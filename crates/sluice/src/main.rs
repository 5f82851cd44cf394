//! `sluice`: the server and the command-line tools, in one binary.

mod cli;
mod logging;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use sluice_server::{settings, Node};
use tracing::{error, warn};

#[global_allocator]
static ALLOC: sluice_protocol::alloc::WireSafeAlloc = sluice_protocol::alloc::WireSafeAlloc;

#[derive(Parser)]
#[command(
    name = "sluice",
    version,
    about = "A Kafka-compatible event streaming platform"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run a node (broker and controller). With no flags: data in ./sluice-data, Kafka
    /// listener on 127.0.0.1:9092.
    #[command(
        after_help = "Examples:\n  sluice server\n  sluice server --config server.properties\n  sluice server --override listeners=PLAINTEXT://0.0.0.0:9092 --override num.partitions=6\n  SLUICE_LOG_RETENTION_HOURS=24 sluice server\n\nConfiguration uses Kafka's property names; precedence: --override > SLUICE_* env > --config file > defaults."
    )]
    Server {
        /// A Kafka-style server.properties file.
        #[arg(long, value_name = "FILE")]
        config: Option<PathBuf>,
        /// Set one property, e.g. --override log.segment.bytes=104857600 (repeatable).
        #[arg(long = "override", value_name = "KEY=VALUE")]
        overrides: Vec<String>,
        /// Log lines as text or as one JSON object per line (`RUST_LOG` filters either).
        #[arg(long = "log-format", value_name = "FORMAT", default_value = "text", value_parser = ["text", "json"])]
        log_format: String,
    },
    /// Create, list, describe, alter and delete topics (kafka-topics.sh).
    Topics(cli::topics::TopicsArgs),
    /// Write lines from stdin or a file as records (kafka-console-producer.sh).
    Produce(cli::produce::ProduceArgs),
    /// Print records (kafka-console-consumer.sh).
    Consume(cli::consume::ConsumeArgs),
    /// Print records as a share group member, acknowledging each
    /// (kafka-console-share-consumer.sh).
    #[command(name = "share-consume")]
    ShareConsume(cli::share_consume::ShareConsumeArgs),
    /// Describe and alter topic and broker configs (kafka-configs.sh).
    Configs(cli::configs::ConfigsArgs),
    /// List, describe and delete consumer groups; reset their offsets
    /// (kafka-consumer-groups.sh).
    Groups(cli::groups::GroupsArgs),
    /// List and describe share groups, reset or delete their offsets
    /// (kafka-share-groups.sh).
    #[command(name = "share-groups")]
    ShareGroups(cli::share_groups::ShareGroupsArgs),
    /// Show the idempotent and transactional producers partition leaders know
    /// (kafka-transactions.sh describe-producers).
    Producers(cli::producers::ProducersArgs),
    /// List transactions or describe one (kafka-transactions.sh list/describe).
    Transactions(cli::transactions::TransactionsArgs),
    /// Create, delete and list SCRAM users (kafka-configs.sh --entity-type users).
    Users(cli::users::UsersArgs),
    /// List, show, register, check and delete schemas in the schema registry.
    Schemas(cli::schemas::SchemasArgs),
    /// Add, list and remove ACLs (kafka-acls.sh).
    Acls(cli::acls::AclsArgs),
    /// Cluster links and offset-preserving mirror topics (kafka-cluster-links and
    /// kafka-mirrors).
    Mirror(cli::mirror::MirrorArgs),
    /// Describe the metadata quorum (kafka-metadata-quorum.sh describe).
    #[command(name = "metadata-quorum")]
    MetadataQuorum(cli::metadata_quorum::MetadataQuorumArgs),
    /// Describe and change feature levels (kafka-features.sh).
    Features(cli::features::FeaturesArgs),
    /// Print the cluster id or unregister a broker (kafka-cluster.sh).
    Cluster(cli::cluster::ClusterArgs),
    /// Print partition offsets (kafka-get-offsets.sh).
    Offsets(cli::offsets::OffsetsArgs),
    /// Format a node's directories before its first start; make ids (kafka-storage.sh).
    Storage(cli::storage::StorageArgs),
    /// Print the contents of log segment and index files (kafka-dump-log.sh).
    #[command(name = "dump-log")]
    DumpLog(cli::dump_log::DumpLogArgs),
    /// Measure throughput and latency (kafka-producer-perf-test.sh and friends).
    #[command(subcommand)]
    Perf(cli::perf::PerfCommand),
}

/// Parse arguments; a mistake is reported on one line (exit 2), help and version as usual.
fn parse_args() -> Result<Cli, ExitCode> {
    match Cli::try_parse() {
        Ok(cli) => Ok(cli),
        Err(e) if !e.use_stderr() => {
            let _ = e.print();
            Err(ExitCode::SUCCESS)
        }
        Err(e) => {
            let rendered = e.render().to_string();
            let message: Vec<&str> = rendered
                .lines()
                .take_while(|l| !l.starts_with("Usage:"))
                .map(str::trim)
                .filter(|l| {
                    !l.is_empty()
                        && !l.starts_with("tip:")
                        && !l.starts_with("For more information")
                })
                .collect();
            let message = message.join(" ");
            let message = message.strip_prefix("error: ").unwrap_or(&message);
            eprintln!("sluice: {message} (see --help)");
            Err(ExitCode::from(2))
        }
    }
}

fn main() -> ExitCode {
    let cli = match parse_args() {
        Ok(cli) => cli,
        Err(code) => return code,
    };
    match cli.command {
        Command::Server {
            config,
            overrides,
            log_format,
        } => run_server(config, overrides, log_format == "json"),
        Command::DumpLog(args) => finish(cli::dump_log::run(args)),
        Command::Storage(args) => finish(cli::storage::run(args)),
        tool => run_tool(tool),
    }
}

/// Exit code and one-line message for a tool's result.
fn finish(result: cli::CliResult) -> ExitCode {
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(cli::CliError::Usage(m)) => {
            eprintln!("sluice: {m}");
            ExitCode::from(2)
        }
        Err(cli::CliError::Failed(m)) => {
            eprintln!("sluice: {m}");
            ExitCode::FAILURE
        }
    }
}

fn runtime() -> Result<tokio::runtime::Runtime, ExitCode> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| {
            eprintln!("sluice: cannot start the runtime: {e}");
            ExitCode::FAILURE
        })
}

fn run_tool(command: Command) -> ExitCode {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_target(false)
        .init();
    let runtime = match runtime() {
        Ok(rt) => rt,
        Err(code) => return code,
    };
    let result = runtime.block_on(async move {
        match command {
            Command::Topics(a) => cli::topics::run(a).await,
            Command::Produce(a) => cli::produce::run(a).await,
            Command::Consume(a) => cli::consume::run(a).await,
            Command::ShareConsume(a) => cli::share_consume::run(a).await,
            Command::Configs(a) => cli::configs::run(a).await,
            Command::Offsets(a) => cli::offsets::run(a).await,
            Command::Producers(a) => cli::producers::run(a).await,
            Command::Transactions(a) => cli::transactions::run(a).await,
            Command::Users(a) => cli::users::run(a).await,
            Command::Acls(a) => cli::acls::run(a).await,
            Command::Schemas(a) => cli::schemas::run(a).await,
            Command::Groups(a) => cli::groups::run(a).await,
            Command::ShareGroups(a) => cli::share_groups::run(a).await,
            Command::Mirror(a) => cli::mirror::run(a).await,
            Command::MetadataQuorum(a) => cli::metadata_quorum::run(a).await,
            Command::Features(a) => cli::features::run(a).await,
            Command::Cluster(a) => cli::cluster::run(a).await,
            Command::Perf(a) => cli::perf::run(a).await,
            Command::Server { .. } | Command::DumpLog(_) | Command::Storage(_) => Ok(()),
        }
    });
    // Do not wait for background tasks (a consumer's parked fetch) once the answer is in.
    runtime.shutdown_timeout(std::time::Duration::from_millis(100));
    finish(result)
}

fn run_server(config_file: Option<PathBuf>, overrides: Vec<String>, json_logs: bool) -> ExitCode {
    logging::init(json_logs);
    let (config, warnings) =
        match settings::load(config_file.as_deref(), std::env::vars(), &overrides) {
            Ok(c) => c,
            Err(e) => {
                eprintln!("sluice: invalid configuration: {e}");
                return ExitCode::FAILURE;
            }
        };
    for w in warnings {
        warn!("{w}");
    }
    let runtime = match runtime() {
        Ok(rt) => rt,
        Err(code) => return code,
    };
    runtime.block_on(async move {
        let signalled = wait_for_signal();
        let node = match Node::start(config).await {
            Ok(n) => n,
            Err(e) => {
                error!("startup failed: {e}");
                eprintln!("sluice: startup failed: {e}");
                return ExitCode::FAILURE;
            }
        };
        tokio::select! {
            () = signalled => {}
            e = node.fatal() => {
                error!("fatal error, exiting: {e}");
                eprintln!("sluice: fatal error, exiting: {e}");
                return ExitCode::FAILURE;
            }
        }
        match node.shutdown().await {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("sluice: shutdown failed: {e}");
                ExitCode::FAILURE
            }
        }
    })
}

/// Until SIGTERM or SIGINT (Ctrl-C). The handlers are installed when this is called, not
/// when the future is first polled: a signal that arrives in between (a supervisor stopping the
/// server right after it said it listens) must not find the default action, which kills the
/// process without a clean shutdown.
pub(crate) fn wait_for_signal() -> impl std::future::Future<Output = ()> {
    use tokio::signal::unix::{signal, SignalKind};
    let term = signal(SignalKind::terminate()).ok();
    let int = signal(SignalKind::interrupt()).ok();
    async move {
        let first = |s: Option<tokio::signal::unix::Signal>| async move {
            match s {
                Some(mut s) => {
                    s.recv().await;
                }
                None => std::future::pending::<()>().await,
            }
        };
        tokio::select! {
            () = first(term) => {}
            () = first(int) => {}
        }
    }
}
