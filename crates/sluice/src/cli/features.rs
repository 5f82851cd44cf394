//! `sluice features describe | upgrade | downgrade | disable` — feature flags as
//! `kafka-features.sh` shows and changes them.

use clap::{Args, Subcommand};
use sluice_client::admin::{FeatureMetadata, FeatureUpgrade};
use sluice_client::Admin;
use sluice_metadata::features::{
    bootstrap_levels, metadata_version_name, parse_metadata_version, METADATA_VERSION,
};

use super::{usage, CliError, CliResult, ConnArgs};

#[derive(Args, Debug)]
#[command(
    after_help = "Examples:\n  sluice features describe\n  sluice features upgrade --release-version 4.4\n  sluice features upgrade --metadata 3.9\n  sluice features upgrade --feature metadata.version=21 --dry-run\n  sluice features downgrade --metadata 3.8 --unsafe"
)]
pub struct FeaturesArgs {
    #[command(flatten)]
    pub conn: ConnArgs,
    #[command(subcommand)]
    pub command: FeaturesCommand,
}

#[derive(Args, Debug)]
pub struct Change {
    /// The metadata.version to go to: a release (3.9), a level name (3.7-IV2) or a number.
    #[arg(long, conflicts_with = "release_version")]
    metadata: Option<String>,
    /// A release (4.4): its latest metadata.version and the other features at the levels a
    /// new cluster of that release starts with.
    #[arg(long = "release-version")]
    release_version: Option<String>,
    /// A feature and its level, NAME=LEVEL (repeatable).
    #[arg(long = "feature", value_name = "NAME=LEVEL")]
    features: Vec<String>,
    /// Check the change without making it.
    #[arg(long = "dry-run")]
    dry_run: bool,
}

#[derive(Subcommand, Debug)]
pub enum FeaturesCommand {
    /// Each feature: the versions the brokers support and the level finalized.
    Describe,
    /// Raise feature levels.
    Upgrade(Change),
    /// Lower feature levels.
    Downgrade {
        #[command(flatten)]
        change: Change,
        /// Allow a downgrade that may lose metadata.
        #[arg(long)]
        r#unsafe: bool,
    },
    /// Set features to level 0.
    Disable {
        /// A feature to disable (repeatable).
        #[arg(long = "feature", value_name = "NAME", required = true)]
        features: Vec<String>,
        #[arg(long)]
        r#unsafe: bool,
        #[arg(long = "dry-run")]
        dry_run: bool,
    },
}

fn level_text(name: &str, level: i16) -> String {
    if name == METADATA_VERSION {
        metadata_version_name(level)
    } else {
        level.to_string()
    }
}

fn describe_text(m: &FeatureMetadata) -> String {
    m.features
        .iter()
        .map(|f| {
            format!(
                "Feature: {}\tSupportedMinVersion: {}\tSupportedMaxVersion: {}\tFinalizedVersionLevel: {}\tEpoch: {}\n",
                f.name,
                level_text(&f.name, f.supported_min),
                level_text(&f.name, f.supported_max),
                level_text(&f.name, f.finalized_level),
                m.finalized_epoch
            )
        })
        .collect()
}

/// The (feature, level) pairs of `--metadata` and `--feature`.
fn parse_change(c: &Change) -> Result<Vec<(String, i16)>, CliError> {
    let mut out = Vec::new();
    if let Some(r) = &c.release_version {
        let level = parse_metadata_version(r)
            .filter(|l| metadata_version_name(*l) != l.to_string())
            .ok_or_else(|| usage(format!("unknown release version {r}")))?;
        out = bootstrap_levels(&[(METADATA_VERSION.to_string(), level)]).map_err(usage)?;
    }
    if let Some(m) = &c.metadata {
        let level = parse_metadata_version(m)
            .ok_or_else(|| usage(format!("unknown metadata.version {m}")))?;
        out.push((METADATA_VERSION.to_string(), level));
    }
    for f in &c.features {
        let (name, level) = f
            .split_once('=')
            .ok_or_else(|| usage(format!("--feature takes NAME=LEVEL, not {f}")))?;
        let level = if name == METADATA_VERSION {
            parse_metadata_version(level)
        } else {
            level.parse().ok()
        }
        .ok_or_else(|| usage(format!("bad level {level} for {name}")))?;
        // A --feature overrides what --release-version gave it.
        out.retain(|(n, _)| n != name);
        out.push((name.to_string(), level));
    }
    if out.is_empty() {
        return Err(usage(
            "give --release-version, --metadata or --feature NAME=LEVEL",
        ));
    }
    Ok(out)
}

pub async fn run(args: FeaturesArgs) -> CliResult {
    let admin = Admin::new(args.conn.client_config()?)?;
    let (changes, how, dry_run, verb) = match args.command {
        FeaturesCommand::Describe => {
            print!("{}", describe_text(&admin.describe_features().await?));
            return Ok(());
        }
        FeaturesCommand::Upgrade(c) => (
            parse_change(&c)?,
            FeatureUpgrade::Upgrade,
            c.dry_run,
            "upgraded",
        ),
        FeaturesCommand::Downgrade { change, r#unsafe } => (
            parse_change(&change)?,
            if r#unsafe {
                FeatureUpgrade::UnsafeDowngrade
            } else {
                FeatureUpgrade::SafeDowngrade
            },
            change.dry_run,
            "downgraded",
        ),
        FeaturesCommand::Disable {
            features,
            r#unsafe,
            dry_run,
        } => (
            features.into_iter().map(|f| (f, 0)).collect(),
            if r#unsafe {
                FeatureUpgrade::UnsafeDowngrade
            } else {
                FeatureUpgrade::SafeDowngrade
            },
            dry_run,
            "disabled",
        ),
    };
    let updates: Vec<(String, i16, FeatureUpgrade)> =
        changes.iter().map(|(n, l)| (n.clone(), *l, how)).collect();
    // Kafka's tool says the levels as numbers here.
    let what: Vec<String> = changes.iter().map(|(n, l)| format!("{n} to {l}")).collect();
    match admin.update_features(&updates, dry_run).await {
        Ok(()) => {
            for (n, l) in &changes {
                if dry_run {
                    println!("{n} can be {verb} to {l}.");
                } else {
                    println!("{n} was {verb} to {l}.");
                }
            }
            Ok(())
        }
        Err(e) => Err(CliError::Failed(format!(
            "Could not update {}: {e}",
            what.join(", ")
        ))),
    }
}
