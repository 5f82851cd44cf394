//! `sluice share-groups` — like `kafka-share-groups.sh`: list share groups (KIP-932),
//! describe their start offsets and lag, members or state, reset or delete their offsets,
//! delete them.

use std::collections::HashMap;

use clap::{ArgGroup, Args};
use sluice_client::admin::OffsetSpec;
use sluice_client::{Admin, ErrorCode, TopicPartition};

use super::groups::{compact_partitions, offsets, parse_datetime, table, topic_partitions};
use super::{usage, CliError, CliResult, ConnArgs};

#[derive(Args, Debug)]
#[command(
    group(ArgGroup::new("action").required(true).args(["list", "describe", "delete", "reset_offsets", "delete_offsets"])),
    group(ArgGroup::new("reset_to").args(["to_earliest", "to_latest", "to_offset", "to_datetime"])),
    after_help = "Examples:\n  sluice share-groups --list\n  sluice share-groups --describe --group workers\n  sluice share-groups --describe --group workers --members\n  sluice share-groups --reset-offsets --group workers --topic jobs --to-earliest --execute\n  sluice share-groups --delete-offsets --group workers --topic jobs\n  sluice share-groups --delete --group workers"
)]
pub struct ShareGroupsArgs {
    #[command(flatten)]
    pub conn: ConnArgs,
    /// List the share groups.
    #[arg(long)]
    pub list: bool,
    /// Describe share groups: start offset and lag per partition.
    #[arg(long)]
    pub describe: bool,
    /// Delete share groups (they must have no members).
    #[arg(long)]
    pub delete: bool,
    /// Reset a share group's start offsets (the group must have no members).
    #[arg(long = "reset-offsets")]
    pub reset_offsets: bool,
    /// Delete a share group's offsets (its delivery state) for --topic.
    #[arg(long = "delete-offsets")]
    pub delete_offsets: bool,
    /// The group (repeatable for --describe and --delete).
    #[arg(long)]
    pub group: Vec<String>,
    /// With --describe or --delete: every share group.
    #[arg(long = "all-groups")]
    pub all_groups: bool,
    /// With --describe: the members instead of the offsets.
    #[arg(long)]
    pub members: bool,
    /// With --describe: the group's state. With --list: show states.
    #[arg(long)]
    pub state: bool,
    /// A topic, optionally with partitions: `jobs` or `jobs:0,2` (repeatable).
    #[arg(long)]
    pub topic: Vec<String>,
    /// With --reset-offsets: every topic the group has offsets for.
    #[arg(long = "all-topics")]
    pub all_topics: bool,
    /// Reset to the earliest offset.
    #[arg(long = "to-earliest")]
    pub to_earliest: bool,
    /// Reset to the log-end offset.
    #[arg(long = "to-latest")]
    pub to_latest: bool,
    /// Reset to this offset (clamped to the partition's range).
    #[arg(long = "to-offset", allow_hyphen_values = true)]
    pub to_offset: Option<i64>,
    /// Reset to the first offset at or after this time: YYYY-MM-DDTHH:mm:SS[.sss], UTC
    /// unless followed by Z or ±HH:MM.
    #[arg(long = "to-datetime")]
    pub to_datetime: Option<String>,
    /// Show what --reset-offsets would do (the default).
    #[arg(long = "dry-run")]
    pub dry_run: bool,
    /// Apply --reset-offsets.
    #[arg(long)]
    pub execute: bool,
}

pub async fn run(args: ShareGroupsArgs) -> CliResult {
    let admin = Admin::new(args.conn.client_config()?)?;
    if args.list {
        return list(&admin, args.state).await;
    }
    if args.reset_offsets {
        return reset(&admin, &args).await;
    }
    if args.delete_offsets {
        return delete_offsets(&admin, &args).await;
    }
    let groups: Vec<String> = if args.all_groups {
        share_groups(&admin)
            .await?
            .into_iter()
            .map(|g| g.0)
            .collect()
    } else if args.group.is_empty() {
        return Err(usage("this action needs --group (or --all-groups)"));
    } else {
        args.group.clone()
    };
    if args.delete {
        return delete(&admin, &groups).await;
    }
    for g in &groups {
        describe(&admin, &args, g).await?;
    }
    Ok(())
}

/// The share groups: (id, state).
async fn share_groups(admin: &Admin) -> Result<Vec<(String, String)>, CliError> {
    Ok(admin
        .list_groups(&[])
        .await?
        .into_iter()
        .filter(|g| g.protocol_type == "share")
        .map(|g| (g.group_id, g.state))
        .collect())
}

async fn list(admin: &Admin, states: bool) -> CliResult {
    let groups = share_groups(admin).await?;
    if states {
        let rows: Vec<Vec<String>> = groups.into_iter().map(|(g, s)| vec![g, s]).collect();
        table(&["GROUP", "STATE"], &rows, 25);
    } else {
        for (g, _) in groups {
            println!("{g}");
        }
    }
    Ok(())
}

fn single_group(args: &ShareGroupsArgs) -> Result<&str, CliError> {
    match args.group.as_slice() {
        [g] => Ok(g),
        [] => Err(usage("this action needs --group")),
        _ => Err(usage("this action takes exactly one --group")),
    }
}

fn no_group(group: &str) -> CliError {
    CliError::Failed(format!("Share group '{group}' does not exist."))
}

async fn describe(admin: &Admin, args: &ShareGroupsArgs, group: &str) -> CliResult {
    let d = admin
        .describe_share_group(group)
        .await?
        .ok_or_else(|| no_group(group))?;
    if args.state {
        let rows = vec![vec![
            group.to_string(),
            d.protocol.clone(),
            d.group_epoch.map_or("-".into(), |e| e.to_string()),
            d.assignment_epoch.map_or("-".into(), |e| e.to_string()),
            d.state.clone(),
            d.members.len().to_string(),
        ]];
        table(
            &[
                "GROUP",
                "ASSIGNOR",
                "GROUP-EPOCH",
                "ASSIGNMENT-EPOCH",
                "STATE",
                "#MEMBERS",
            ],
            &rows,
            0,
        );
        return Ok(());
    }
    if args.members {
        let rows: Vec<Vec<String>> = d
            .members
            .iter()
            .map(|m| {
                vec![
                    group.to_string(),
                    m.member_id.clone(),
                    m.host.clone(),
                    m.client_id.clone(),
                    m.member_epoch.map_or("-".into(), |e| e.to_string()),
                    compact_partitions(&m.assignment),
                ]
            })
            .collect();
        if rows.is_empty() {
            println!("Share group '{group}' has no active members.");
            return Ok(());
        }
        table(
            &[
                "GROUP",
                "MEMBER-ID",
                "HOST",
                "CLIENT-ID",
                "MEMBER-EPOCH",
                "ASSIGNMENT",
            ],
            &rows,
            0,
        );
        return Ok(());
    }
    let starts = admin.list_share_group_offsets(group, None).await?;
    if starts.is_empty() {
        println!("Share group '{group}' has no offsets.");
        return Ok(());
    }
    let tps: Vec<TopicPartition> = starts.iter().map(|(tp, _)| tp.clone()).collect();
    let ends = offsets(admin, tps, OffsetSpec::Latest).await?;
    let rows: Vec<Vec<String>> = starts
        .iter()
        .map(|(tp, start)| {
            // Records from the start offset to the log end: in flight or not yet delivered.
            let lag = match (start, ends.get(tp)) {
                (Some(s), Some(e)) => (e - s).max(0).to_string(),
                _ => "-".into(),
            };
            vec![
                group.to_string(),
                tp.topic.to_string(),
                tp.partition.0.to_string(),
                start.map_or("-".into(), |s| s.to_string()),
                lag,
            ]
        })
        .collect();
    table(
        &["GROUP", "TOPIC", "PARTITION", "START-OFFSET", "LAG"],
        &rows,
        0,
    );
    Ok(())
}

async fn reset(admin: &Admin, args: &ShareGroupsArgs) -> CliResult {
    let group = single_group(args)?;
    if args.dry_run && args.execute {
        return Err(usage("--dry-run and --execute exclude each other"));
    }
    if !(args.to_earliest || args.to_latest || args.to_offset.is_some())
        && args.to_datetime.is_none()
    {
        return Err(usage(
            "--reset-offsets needs one of --to-earliest, --to-latest, --to-offset, --to-datetime",
        ));
    }
    if args.all_topics != args.topic.is_empty() {
        return Err(usage(
            "--reset-offsets needs --topic or --all-topics (one of them)",
        ));
    }
    let timestamp = args
        .to_datetime
        .as_deref()
        .map(parse_datetime)
        .transpose()?;
    let partitions: Vec<TopicPartition> = if args.all_topics {
        admin
            .list_share_group_offsets(group, None)
            .await?
            .into_iter()
            .map(|(tp, _)| tp)
            .collect()
    } else {
        topic_partitions(admin, &args.topic).await?
    };
    let earliest = offsets(admin, partitions.clone(), OffsetSpec::Earliest).await?;
    let latest = offsets(admin, partitions.clone(), OffsetSpec::Latest).await?;
    let at_time = match timestamp {
        Some(t) => offsets(admin, partitions.clone(), OffsetSpec::Timestamp(t)).await?,
        None => HashMap::new(),
    };
    let mut plan: Vec<(TopicPartition, i64)> = Vec::new();
    for tp in &partitions {
        let (Some(&lo), Some(&hi)) = (earliest.get(tp), latest.get(tp)) else {
            return Err(CliError::Failed(format!("partition {tp} does not exist")));
        };
        let target = if args.to_earliest {
            lo
        } else if args.to_latest {
            hi
        } else if let Some(o) = args.to_offset {
            o
        } else {
            at_time.get(tp).copied().filter(|o| *o >= 0).unwrap_or(hi)
        };
        plan.push((tp.clone(), target.clamp(lo, hi)));
    }
    let rows: Vec<Vec<String>> = plan
        .iter()
        .map(|(tp, o)| {
            vec![
                group.to_string(),
                tp.topic.to_string(),
                tp.partition.0.to_string(),
                o.to_string(),
            ]
        })
        .collect();
    if args.execute {
        let results = admin.alter_share_group_offsets(group, &plan).await.map_err(|e| {
            match e.code() {
                Some(ErrorCode::NonEmptyGroup) => CliError::Failed(format!(
                    "Share group '{group}' has active members: stop them before resetting its offsets."
                )),
                _ => e.into(),
            }
        })?;
        let failed: Vec<String> = results
            .iter()
            .filter_map(|(tp, r)| r.as_ref().err().map(|e| format!("{tp}: {e}")))
            .collect();
        if !failed.is_empty() {
            return Err(CliError::Failed(format!(
                "some offsets were not reset: {}",
                failed.join("; ")
            )));
        }
    }
    table(
        &["GROUP", "TOPIC", "PARTITION", "NEW-START-OFFSET"],
        &rows,
        0,
    );
    if !args.execute {
        println!("(dry run: add --execute to apply)");
    }
    Ok(())
}

async fn delete_offsets(admin: &Admin, args: &ShareGroupsArgs) -> CliResult {
    let group = single_group(args)?;
    if args.topic.is_empty() {
        return Err(usage("--delete-offsets needs --topic"));
    }
    let topics: Vec<&str> = args
        .topic
        .iter()
        .map(|t| t.split_once(':').map_or(t.as_str(), |(t, _)| t))
        .collect();
    let results = admin
        .delete_share_group_offsets(group, &topics)
        .await
        .map_err(|e| match e.code() {
            Some(ErrorCode::NonEmptyGroup) => CliError::Failed(format!(
                "Share group '{group}' has active members: stop them before deleting its offsets."
            )),
            Some(ErrorCode::GroupIdNotFound) => no_group(group),
            _ => e.into(),
        })?;
    let mut failed = Vec::new();
    for (topic, r) in results {
        match r {
            Ok(()) => println!("Deleted the offsets of share group '{group}' on topic '{topic}'."),
            Err(e) => failed.push(format!("{topic}: {e}")),
        }
    }
    if failed.is_empty() {
        Ok(())
    } else {
        Err(CliError::Failed(format!(
            "some offsets were not deleted: {}",
            failed.join("; ")
        )))
    }
}

async fn delete(admin: &Admin, groups: &[String]) -> CliResult {
    let refs: Vec<&str> = groups.iter().map(String::as_str).collect();
    let mut failed = Vec::new();
    for (g, r) in admin.delete_groups(&refs).await? {
        match r {
            Ok(()) => println!("Share group '{g}' deleted."),
            Err(e) => failed.push(match e.code() {
                Some(ErrorCode::NonEmptyGroup) => format!("'{g}': the group is not empty"),
                Some(ErrorCode::GroupIdNotFound) => format!("'{g}': the group does not exist"),
                _ => format!("'{g}': {e}"),
            }),
        }
    }
    if failed.is_empty() {
        Ok(())
    } else {
        Err(CliError::Failed(format!(
            "some share groups were not deleted: {}",
            failed.join("; ")
        )))
    }
}
