//! `sluice`: the server and (later) the command-line tools, in one binary.

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
    },
}

fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stdout());
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_target(false)
        .with_ansi(ansi)
        .init();
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Server { config, overrides } => run_server(config, overrides),
    }
}

fn run_server(config_file: Option<PathBuf>, overrides: Vec<String>) -> ExitCode {
    init_logging();
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
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("sluice: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    runtime.block_on(async move {
        let node = match Node::start(config).await {
            Ok(n) => n,
            Err(e) => {
                error!("startup failed: {e}");
                eprintln!("sluice: startup failed: {e}");
                return ExitCode::FAILURE;
            }
        };
        wait_for_signal().await;
        match node.shutdown().await {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("sluice: shutdown failed: {e}");
                ExitCode::FAILURE
            }
        }
    })
}

async fn wait_for_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = match signal(SignalKind::terminate()) {
        Ok(s) => s,
        Err(_) => {
            let _ = tokio::signal::ctrl_c().await;
            return;
        }
    };
    tokio::select! {
        _ = term.recv() => {}
        _ = tokio::signal::ctrl_c() => {}
    }
}
