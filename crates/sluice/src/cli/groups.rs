//! `sluice groups` — like `kafka-consumer-groups.sh`: list, describe (offsets and lag,
//! members, state), delete groups, reset or delete their committed offsets.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use clap::{ArgGroup, Args};
use sluice_client::admin::{GroupDescription, OffsetSpec};
use sluice_client::{Admin, ErrorCode, TopicPartition};

use super::{usage, CliError, CliResult, ConnArgs};

#[derive(Args, Debug)]
#[command(
    group(ArgGroup::new("action").required(true).args(["list", "describe", "delete", "reset_offsets", "delete_offsets"])),
    group(ArgGroup::new("reset_to").args(["to_earliest", "to_latest", "to_offset", "shift_by", "to_datetime", "to_current"])),
    after_help = "Examples:\n  sluice groups --list\n  sluice groups --describe --group orders-app\n  sluice groups --describe --group orders-app --members\n  sluice groups --delete --group old-app\n  sluice groups --reset-offsets --group orders-app --topic orders --to-earliest --execute\n  sluice groups --reset-offsets --group orders-app --topic orders:0,1 --shift-by -100 --dry-run\n  sluice groups --reset-offsets --group orders-app --all-topics --to-datetime 2026-11-01T00:00:00.000 --execute"
)]
pub struct GroupsArgs {
    #[command(flatten)]
    pub conn: ConnArgs,
    /// List the groups.
    #[arg(long)]
    pub list: bool,
    /// Describe groups: committed offsets, log-end offsets, lag and owners per partition.
    #[arg(long)]
    pub describe: bool,
    /// Delete groups (they must have no active members).
    #[arg(long)]
    pub delete: bool,
    /// Reset a group's committed offsets (the group must have no active members).
    #[arg(long = "reset-offsets")]
    pub reset_offsets: bool,
    /// Delete a group's committed offsets for --topic.
    #[arg(long = "delete-offsets")]
    pub delete_offsets: bool,
    /// The group (repeatable for --describe and --delete).
    #[arg(long)]
    pub group: Vec<String>,
    /// With --describe or --delete: every group.
    #[arg(long = "all-groups")]
    pub all_groups: bool,
    /// With --describe: the members instead of the offsets.
    #[arg(long)]
    pub members: bool,
    /// With --describe --members: each member's partitions too.
    #[arg(long)]
    pub verbose: bool,
    /// With --describe: the group's state. With --list: show states, or only groups in
    /// these (comma-separated) states.
    #[arg(long, num_args = 0..=1, default_missing_value = "")]
    pub state: Option<String>,
    /// A topic, optionally with partitions: `orders` or `orders:0,2` (repeatable).
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
    /// Move the committed offset by this many records (negative: back).
    #[arg(long = "shift-by", allow_hyphen_values = true)]
    pub shift_by: Option<i64>,
    /// Reset to the first offset at or after this time: YYYY-MM-DDTHH:mm:SS[.sss], UTC
    /// unless followed by Z or ±HH:MM.
    #[arg(long = "to-datetime")]
    pub to_datetime: Option<String>,
    /// Reset to the current committed offsets (rewrite them unchanged).
    #[arg(long = "to-current")]
    pub to_current: bool,
    /// Show what --reset-offsets would do (the default).
    #[arg(long = "dry-run")]
    pub dry_run: bool,
    /// Apply --reset-offsets.
    #[arg(long)]
    pub execute: bool,
}

/// Print rows as left-aligned columns at least `min` wide, separated by a space.
pub(super) fn table(header: &[&str], rows: &[Vec<String>], min: usize) {
    let mut widths: Vec<usize> = header.iter().map(|h| h.len().max(min)).collect();
    for r in rows {
        for (w, cell) in widths.iter_mut().zip(r) {
            *w = (*w).max(cell.len());
        }
    }
    let line = |cells: Vec<&str>| {
        let last = cells.len() - 1;
        let mut out = String::new();
        for (i, (c, w)) in cells.iter().zip(&widths).enumerate() {
            if i == last {
                out.push_str(c);
            } else {
                out.push_str(&format!("{c:<w$} "));
            }
        }
        println!("{}", out.trim_end());
    };
    line(header.to_vec());
    for r in rows {
        line(r.iter().map(String::as_str).collect());
    }
}

fn dash(v: Option<impl ToString>) -> String {
    v.map_or_else(|| "-".to_string(), |v| v.to_string())
}

pub async fn run(args: GroupsArgs) -> CliResult {
    let admin = Admin::new(args.conn.client_config()?)?;
    if args.list {
        return list(&admin, &args).await;
    }
    if args.reset_offsets {
        return reset(&admin, &args).await;
    }
    if args.delete_offsets {
        return delete_offsets(&admin, &args).await;
    }
    let groups: Vec<String> = if args.all_groups {
        admin
            .list_groups(&[])
            .await?
            .into_iter()
            .map(|g| g.group_id)
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

async fn list(admin: &Admin, args: &GroupsArgs) -> CliResult {
    let filter: Vec<String> = args
        .state
        .as_deref()
        .unwrap_or("")
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(canonical_state)
        .collect::<Result<_, _>>()?;
    let refs: Vec<&str> = filter.iter().map(String::as_str).collect();
    let groups = admin.list_groups(&refs).await?;
    if args.state.is_some() {
        let rows: Vec<Vec<String>> = groups
            .into_iter()
            .map(|g| vec![g.group_id, g.state])
            .collect();
        table(&["GROUP", "STATE"], &rows, 25);
    } else {
        for g in groups {
            println!("{}", g.group_id);
        }
    }
    Ok(())
}

/// Group states as Kafka spells them, accepted in any case.
fn canonical_state(s: &str) -> Result<String, CliError> {
    const STATES: [&str; 6] = [
        "PreparingRebalance",
        "CompletingRebalance",
        "Stable",
        "Dead",
        "Empty",
        "Assigning",
    ];
    STATES
        .iter()
        .find(|k| k.eq_ignore_ascii_case(s))
        .map(|k| k.to_string())
        .ok_or_else(|| {
            usage(format!(
                "unknown group state '{s}' (one of {})",
                STATES.join(", ")
            ))
        })
}

async fn describe_one(admin: &Admin, group: &str) -> Result<GroupDescription, CliError> {
    let d = admin
        .describe_groups(&[group])
        .await?
        .into_iter()
        .next()
        .ok_or_else(|| CliError::Failed(format!("no description of group '{group}'")))?;
    if d.state == "Dead" {
        return Err(CliError::Failed(format!(
            "Consumer group '{group}' does not exist."
        )));
    }
    Ok(d)
}

async fn describe(admin: &Admin, args: &GroupsArgs, group: &str) -> CliResult {
    let d = describe_one(admin, group).await?;
    if d.members.is_empty() {
        println!("\nConsumer group '{group}' has no active members.\n");
    } else {
        println!();
    }
    if args.state.is_some() {
        let coordinator = admin.describe_cluster().await.ok().and_then(|c| {
            c.brokers
                .first()
                .map(|(id, host, port, _)| format!("{host}:{port}  ({id})"))
        });
        let strategy = if d.protocol.is_empty() {
            "-".to_string()
        } else {
            d.protocol.clone()
        };
        let mut header = vec!["GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE"];
        let mut row = vec![
            group.to_string(),
            dash(coordinator),
            strategy,
            d.state.clone(),
        ];
        // A consumer group's epochs (verbose, as kafka-consumer-groups.sh shows them).
        if let (true, Some(epoch), Some(target)) = (args.verbose, d.group_epoch, d.assignment_epoch)
        {
            header.extend(["GROUP-EPOCH", "TARGET-ASSIGNMENT-EPOCH"]);
            row.extend([epoch.to_string(), target.to_string()]);
        }
        header.push("#MEMBERS");
        row.push(d.members.len().to_string());
        table(&header, &[row], 15);
        return Ok(());
    }
    if args.members {
        let mut header = vec!["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS"];
        let consumer_group = d.group_type != "classic";
        if args.verbose && consumer_group {
            header.extend([
                "CURRENT-EPOCH",
                "CURRENT-ASSIGNMENT",
                "TARGET-EPOCH",
                "TARGET-ASSIGNMENT",
            ]);
        } else if args.verbose {
            header.push("ASSIGNMENT");
        }
        let rows: Vec<Vec<String>> = d
            .members
            .iter()
            .map(|m| {
                let mut row = vec![
                    group.to_string(),
                    m.member_id.clone(),
                    m.host.clone(),
                    m.client_id.clone(),
                    m.assignment.len().to_string(),
                ];
                if args.verbose && consumer_group {
                    row.extend([
                        dash(m.member_epoch),
                        compact_partitions(&m.assignment),
                        dash(d.assignment_epoch),
                        compact_partitions(m.target_assignment.as_deref().unwrap_or_default()),
                    ]);
                } else if args.verbose {
                    row.push(compact_partitions(&m.assignment));
                }
                row
            })
            .collect();
        table(&header, &rows, 15);
        return Ok(());
    }
    // Offsets: every partition with a committed offset or an owner.
    let committed = admin.list_group_offsets(group, None).await?;
    let mut owners: HashMap<TopicPartition, (String, String, String)> = HashMap::new();
    for m in &d.members {
        for tp in &m.assignment {
            owners.insert(
                tp.clone(),
                (m.member_id.clone(), m.host.clone(), m.client_id.clone()),
            );
        }
    }
    let mut current: BTreeMap<TopicPartition, Option<i64>> = BTreeMap::new();
    for (tp, c) in committed {
        current.insert(tp, c.map(|c| c.offset));
    }
    for tp in owners.keys() {
        current.entry(tp.clone()).or_insert(None);
    }
    let ends = log_end_offsets(admin, current.keys().cloned().collect()).await?;
    let rows: Vec<Vec<String>> = current
        .iter()
        .map(|(tp, cur)| {
            let end = ends.get(tp).copied();
            let lag = match (cur, end) {
                (Some(c), Some(e)) => Some((e - c).max(0)),
                _ => None,
            };
            let owner = owners.get(tp);
            vec![
                group.to_string(),
                tp.topic.clone(),
                tp.partition.0.to_string(),
                dash(*cur),
                dash(end),
                dash(lag),
                dash(owner.map(|o| o.0.clone())),
                dash(owner.map(|o| o.1.clone())),
                dash(owner.map(|o| o.2.clone())),
            ]
        })
        .collect();
    table(
        &[
            "GROUP",
            "TOPIC",
            "PARTITION",
            "CURRENT-OFFSET",
            "LOG-END-OFFSET",
            "LAG",
            "CONSUMER-ID",
            "HOST",
            "CLIENT-ID",
        ],
        &rows,
        15,
    );
    Ok(())
}

/// `topic:0,1,2;other:3`
pub(super) fn compact_partitions(parts: &[TopicPartition]) -> String {
    let mut by_topic: BTreeMap<&str, Vec<i32>> = BTreeMap::new();
    for tp in parts {
        by_topic.entry(&tp.topic).or_default().push(tp.partition.0);
    }
    if by_topic.is_empty() {
        return "-".into();
    }
    by_topic
        .into_iter()
        .map(|(t, ps)| {
            let ps: Vec<String> = ps.iter().map(i32::to_string).collect();
            format!("{t}:{}", ps.join(","))
        })
        .collect::<Vec<_>>()
        .join(";")
}

async fn log_end_offsets(
    admin: &Admin,
    partitions: Vec<TopicPartition>,
) -> Result<HashMap<TopicPartition, i64>, CliError> {
    offsets(admin, partitions, OffsetSpec::Latest).await
}

pub(super) async fn offsets(
    admin: &Admin,
    partitions: Vec<TopicPartition>,
    spec: OffsetSpec,
) -> Result<HashMap<TopicPartition, i64>, CliError> {
    if partitions.is_empty() {
        return Ok(HashMap::new());
    }
    let wanted: Vec<(TopicPartition, OffsetSpec)> =
        partitions.into_iter().map(|tp| (tp, spec)).collect();
    let mut out = HashMap::new();
    for (tp, r) in admin.list_offsets(&wanted).await? {
        match r {
            Ok(o) => {
                out.insert(tp, o.offset);
            }
            // A deleted topic's offsets still show, without a log-end offset.
            Err(e) if e.code() == Some(ErrorCode::UnknownTopicOrPartition) => {}
            Err(e) => return Err(CliError::Failed(format!("{tp}: {e}"))),
        }
    }
    Ok(out)
}

async fn delete(admin: &Admin, groups: &[String]) -> CliResult {
    let refs: Vec<&str> = groups.iter().map(String::as_str).collect();
    let results = admin.delete_groups(&refs).await?;
    let failed: Vec<String> = results
        .iter()
        .filter_map(|(g, r)| {
            r.as_ref().err().map(|e| {
                let why = match e.code() {
                    Some(ErrorCode::NonEmptyGroup) => "the group is not empty".to_string(),
                    Some(ErrorCode::GroupIdNotFound) => "the group does not exist".to_string(),
                    _ => e.to_string(),
                };
                format!("* Group '{g}' could not be deleted due to: {why}")
            })
        })
        .collect();
    let ok: Vec<String> = results
        .iter()
        .filter(|(_, r)| r.is_ok())
        .map(|(g, _)| format!("'{g}'"))
        .collect();
    if !ok.is_empty() {
        println!(
            "Deletion of requested consumer groups ({}) was successful.",
            ok.join(", ")
        );
    }
    if failed.is_empty() {
        Ok(())
    } else {
        Err(CliError::Failed(format!(
            "Deletion of some consumer groups failed: {}",
            failed.join(" ")
        )))
    }
}

fn single_group(args: &GroupsArgs) -> Result<&str, CliError> {
    match args.group.as_slice() {
        [g] => Ok(g),
        [] => Err(usage("this action needs --group")),
        _ => Err(usage("this action takes exactly one --group")),
    }
}

/// The partitions `--topic` names (all of a topic's when none are listed).
pub(super) async fn topic_partitions(
    admin: &Admin,
    specs: &[String],
) -> Result<Vec<TopicPartition>, CliError> {
    let mut out = BTreeSet::new();
    for spec in specs {
        let (topic, parts) = match spec.split_once(':') {
            Some((t, p)) => (t, Some(p)),
            None => (spec.as_str(), None),
        };
        if topic.is_empty() {
            return Err(usage(format!("bad --topic '{spec}'")));
        }
        match parts {
            Some(list) => {
                for p in list.split(',') {
                    let p: i32 = p
                        .trim()
                        .parse()
                        .map_err(|_| usage(format!("bad partition '{p}' in --topic {spec}")))?;
                    out.insert(TopicPartition::new(topic, p));
                }
            }
            None => {
                let info = admin.describe_topics(&[topic]).await?;
                for p in &info[0].partitions {
                    out.insert(TopicPartition::new(topic, p.partition));
                }
            }
        }
    }
    Ok(out.into_iter().collect())
}

async fn reset(admin: &Admin, args: &GroupsArgs) -> CliResult {
    let group = single_group(args)?;
    if args.dry_run && args.execute {
        return Err(usage("--dry-run and --execute exclude each other"));
    }
    let strategies = [
        args.to_earliest,
        args.to_latest,
        args.to_offset.is_some(),
        args.shift_by.is_some(),
        args.to_datetime.is_some(),
        args.to_current,
    ];
    if !strategies.iter().any(|s| *s) {
        return Err(usage(
            "--reset-offsets needs one of --to-earliest, --to-latest, --to-offset, --shift-by, --to-datetime, --to-current",
        ));
    }
    if args.topic.is_empty() != args.all_topics {
        return Err(usage(
            "--reset-offsets needs --topic or --all-topics (not both)",
        ));
    }
    let timestamp = args
        .to_datetime
        .as_deref()
        .map(parse_datetime)
        .transpose()?;
    if !args.dry_run && !args.execute {
        eprintln!("WARN: No action will be performed as the --execute option is missing. Add --dry-run to keep this behaviour explicitly, or --execute to apply the reset.");
    }
    let d = admin.describe_groups(&[group]).await?;
    if let Some(d) = d
        .first()
        .filter(|d| d.state != "Empty" && d.state != "Dead")
    {
        return Err(CliError::Failed(format!(
            "Assignments can only be reset if the group '{group}' is inactive, but the current state is {}.",
            d.state
        )));
    }
    let committed: HashMap<TopicPartition, i64> = admin
        .list_group_offsets(group, None)
        .await?
        .into_iter()
        .filter_map(|(tp, c)| c.map(|c| (tp, c.offset)))
        .collect();
    let partitions: Vec<TopicPartition> = if args.all_topics {
        let mut all: Vec<TopicPartition> = committed.keys().cloned().collect();
        all.sort();
        all
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
        let current = committed.get(tp).copied();
        let target = if args.to_earliest {
            lo
        } else if args.to_latest {
            hi
        } else if let Some(o) = args.to_offset {
            o
        } else if let Some(n) = args.shift_by {
            let c = current.ok_or_else(|| {
                CliError::Failed(format!(
                    "cannot shift the offset of {tp}: the group has no committed offset for it"
                ))
            })?;
            c.saturating_add(n)
        } else if timestamp.is_some() {
            // No record at or after the time: the end of the log.
            at_time.get(tp).copied().filter(|o| *o >= 0).unwrap_or(hi)
        } else {
            current.ok_or_else(|| {
                CliError::Failed(format!("the group has no committed offset for {tp}"))
            })?
        };
        plan.push((tp.clone(), target.clamp(lo, hi)));
    }
    let rows: Vec<Vec<String>> = plan
        .iter()
        .map(|(tp, o)| {
            vec![
                group.to_string(),
                tp.topic.clone(),
                tp.partition.0.to_string(),
                o.to_string(),
            ]
        })
        .collect();
    println!();
    table(&["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"], &rows, 15);
    if args.execute {
        let failed: Vec<String> = admin
            .alter_group_offsets(group, &plan)
            .await?
            .into_iter()
            .filter_map(|(tp, r)| r.err().map(|e| format!("{tp}: {e}")))
            .collect();
        if !failed.is_empty() {
            return Err(CliError::Failed(format!(
                "resetting offsets failed: {}",
                failed.join("; ")
            )));
        }
    }
    Ok(())
}

async fn delete_offsets(admin: &Admin, args: &GroupsArgs) -> CliResult {
    let group = single_group(args)?;
    if args.topic.is_empty() {
        return Err(usage("--delete-offsets needs --topic"));
    }
    let partitions = topic_partitions(admin, &args.topic).await?;
    let results = admin.delete_group_offsets(group, &partitions).await?;
    let rows: Vec<Vec<String>> = results
        .iter()
        .map(|(tp, r)| {
            vec![
                tp.topic.clone(),
                tp.partition.0.to_string(),
                match r {
                    Ok(()) => "Successful".to_string(),
                    Err(e) => format!("Error: {e}"),
                },
            ]
        })
        .collect();
    println!();
    table(&["TOPIC", "PARTITION", "STATUS"], &rows, 15);
    if results.iter().any(|(_, r)| r.is_err()) {
        return Err(CliError::Failed("some offsets were not deleted".into()));
    }
    Ok(())
}

/// `YYYY-MM-DDTHH:mm:SS[.sss][Z|±HH:MM]` to milliseconds since the epoch (UTC when no zone
/// is given).
pub(super) fn parse_datetime(s: &str) -> Result<i64, CliError> {
    let bad = || {
        usage(format!(
            "--to-datetime must look like 2026-11-29T13:45:00.000 (optionally with Z or +01:00), not '{s}'"
        ))
    };
    let (date, rest) = s.split_once('T').ok_or_else(bad)?;
    let (time, offset_minutes) = if let Some(t) = rest.strip_suffix('Z') {
        (t, 0)
    } else if let Some(i) = rest.rfind(['+', '-']) {
        let (t, zone) = rest.split_at(i);
        let sign = if zone.starts_with('-') { -1 } else { 1 };
        let (h, m) = zone[1..].split_once(':').ok_or_else(bad)?;
        let h: i64 = h.parse().map_err(|_| bad())?;
        let m: i64 = m.parse().map_err(|_| bad())?;
        (t, sign * (h * 60 + m))
    } else {
        (rest, 0)
    };
    let num = |v: &str| v.parse::<i64>().map_err(|_| bad());
    let d: Vec<&str> = date.split('-').collect();
    let [y, mo, da] = d[..] else {
        return Err(bad());
    };
    let (y, mo, da) = (num(y)?, num(mo)?, num(da)?);
    let (hms, millis) = match time.split_once('.') {
        Some((hms, frac)) => {
            let frac = format!("{frac:0<3}");
            (hms, num(&frac[..3])?)
        }
        None => (time, 0),
    };
    let t: Vec<&str> = hms.split(':').collect();
    let [h, mi, se] = t[..] else {
        return Err(bad());
    };
    let (h, mi, se) = (num(h)?, num(mi)?, num(se)?);
    if !(1..=12).contains(&mo) || !(1..=31).contains(&da) || h > 23 || mi > 59 || se > 60 {
        return Err(bad());
    }
    let days = days_from_civil(y, mo, da);
    Ok(((days * 24 + h) * 60 + mi - offset_minutes) * 60_000 + se * 1000 + millis)
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn datetimes_parse_to_epoch_millis() {
        assert_eq!(parse_datetime("1970-01-01T00:00:00").unwrap(), 0);
        assert_eq!(
            parse_datetime("2026-11-29T13:45:00.250Z").unwrap(),
            1_795_959_900_250
        );
        assert_eq!(
            parse_datetime("2026-11-29T14:45:00.250+01:00").unwrap(),
            1_795_959_900_250
        );
        assert_eq!(
            parse_datetime("2000-02-29T00:00:00.5").unwrap(),
            951_782_400_500
        );
        assert!(parse_datetime("2026-13-01T00:00:00").is_err());
        assert!(parse_datetime("yesterday").is_err());
        assert!(parse_datetime("2026-11-29 13:45:00").is_err());
    }

    #[test]
    fn assignments_print_compactly() {
        let parts = [
            TopicPartition::new("b", 1),
            TopicPartition::new("a", 0),
            TopicPartition::new("a", 2),
        ];
        assert_eq!(compact_partitions(&parts), "a:0,2;b:1");
        assert_eq!(compact_partitions(&[]), "-");
    }
}
