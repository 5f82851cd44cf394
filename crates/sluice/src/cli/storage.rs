//! `sluice storage format | random-uuid` — as `kafka-storage.sh`: prepare a node's
//! directories before its first start. Only a controller of a dynamic quorum
//! (`controller.quorum.bootstrap.servers` without `controller.quorum.voters`) needs it;
//! other nodes write their identity on their first start.

use clap::{ArgGroup, Args, Subcommand};
use sluice_server::storage::{self, QuorumStart};

use super::{CliError, CliResult};

#[derive(Args, Debug)]
#[command(
    after_help = "Examples:\n  sluice storage random-uuid\n  sluice storage format --config controller.properties --cluster-id $ID --standalone\n  sluice storage format --config server.properties --cluster-id $ID --release-version 3.9 --feature transaction.version=2\n  sluice storage format --config controller.properties --cluster-id $ID --no-initial-controllers\n  sluice storage format --config controller.properties --cluster-id $ID --initial-controllers 1@host1:9093:DIRID1,2@host2:9093:DIRID2"
)]
pub struct StorageArgs {
    #[command(subcommand)]
    pub command: StorageCommand,
}

#[derive(Subcommand, Debug)]
pub enum StorageCommand {
    /// Print a new random cluster or directory id.
    #[command(name = "random-uuid")]
    RandomUuid,
    /// Write meta.properties (cluster id, node id, directory id) into the node's log and
    /// metadata directories and, for a dynamic quorum's controller, the quorum it starts
    /// from.
    #[command(group(ArgGroup::new("quorum").args(["standalone", "initial_controllers", "no_initial_controllers"])))]
    Format {
        /// The node's server.properties.
        #[arg(long, short = 'c', value_name = "FILE")]
        config: Option<std::path::PathBuf>,
        /// Set one property, as `sluice server --override` does (repeatable).
        #[arg(long = "override", value_name = "KEY=VALUE")]
        overrides: Vec<String>,
        /// The cluster id (`sluice storage random-uuid` makes one).
        #[arg(long = "cluster-id", short = 't', value_name = "ID")]
        cluster_id: String,
        /// This controller alone is the quorum's first voter.
        #[arg(long, short = 's')]
        standalone: bool,
        /// The quorum's first voters: id@host:port:directory-id,...
        #[arg(long = "initial-controllers", short = 'I', value_name = "LIST")]
        initial_controllers: Option<String>,
        /// This controller joins a running quorum (added later with
        /// `sluice metadata-quorum add-controller`).
        #[arg(long = "no-initial-controllers", short = 'N')]
        no_initial_controllers: bool,
        /// Leave already formatted directories as they are.
        #[arg(long = "ignore-formatted", short = 'g')]
        ignore_formatted: bool,
        /// The metadata.version the cluster starts at: a release (3.9) or a level name
        /// (3.7-IV2).
        #[arg(long = "release-version", short = 'r', value_name = "VERSION")]
        release_version: Option<String>,
        /// A feature level the cluster starts with, NAME=LEVEL (repeatable), e.g.
        /// transaction.version=2.
        #[arg(long = "feature", short = 'f', value_name = "NAME=LEVEL")]
        features: Vec<String>,
    },
}

pub fn run(args: StorageArgs) -> CliResult {
    match args.command {
        StorageCommand::RandomUuid => println!("{}", storage::random_uuid()),
        StorageCommand::Format {
            config,
            overrides,
            cluster_id,
            standalone,
            initial_controllers,
            no_initial_controllers,
            ignore_formatted,
            release_version,
            features,
        } => {
            let (config, _) =
                sluice_server::settings::load(config.as_deref(), std::env::vars(), &overrides)
                    .map_err(|e| CliError::Usage(format!("invalid configuration: {e}")))?;
            let start = match (standalone, initial_controllers, no_initial_controllers) {
                (true, ..) => QuorumStart::Standalone,
                (_, Some(list), _) => QuorumStart::InitialControllers(list),
                (_, _, true) => QuorumStart::NoInitialControllers,
                _ => QuorumStart::Unset,
            };
            let features = storage::bootstrap_features(release_version.as_deref(), &features)
                .map_err(CliError::Usage)?;
            let done = storage::format(&config, &cluster_id, &start, ignore_formatted, &features)
                .map_err(CliError::Failed)?;
            for line in done {
                println!("{line}");
            }
        }
    }
    Ok(())
}
