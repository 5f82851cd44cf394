//! `sluice metadata-quorum describe --status | --replication` — the metadata quorum as
//! `kafka-metadata-quorum.sh describe` shows it (Kafka 4's layout) — and
//! `add-controller` / `remove-controller`, which change the voters of a dynamic quorum
//! (KIP-853).

use clap::{ArgGroup, Args, Subcommand};
use sluice_client::admin::{QuorumDescription, QuorumReplica};
use sluice_client::Admin;

use super::{usage, CliError, CliResult, ConnArgs};

#[derive(Args, Debug)]
#[command(
    after_help = "Examples:\n  sluice metadata-quorum --bootstrap-server localhost:9092 describe --status\n  sluice metadata-quorum --bootstrap-server localhost:9092 describe --replication --human-readable"
)]
pub struct MetadataQuorumArgs {
    #[command(flatten)]
    pub conn: ConnArgs,
    #[command(subcommand)]
    pub command: QuorumCommand,
}

#[derive(Subcommand, Debug)]
pub enum QuorumCommand {
    /// Describe the metadata quorum.
    #[command(group(ArgGroup::new("what").required(true).args(["status", "replication"])))]
    Describe {
        /// The leader, epoch, high watermark, followers' lag, voters and observers.
        #[arg(long)]
        status: bool,
        /// Each replica of the metadata log: log end offset, lag, last fetch and catch-up.
        #[arg(long)]
        replication: bool,
        /// With --replication: times as "N ms ago" instead of timestamps.
        #[arg(long = "human-readable")]
        human_readable: bool,
    },
    /// Make the controller whose server.properties is --command-config a voter (it must be
    /// running, formatted with --no-initial-controllers, and is caught up first). The file's
    /// ssl.*/sasl.*/security.protocol settings also serve the connection.
    #[command(name = "add-controller")]
    AddController,
    /// Remove a voter: it keeps following the metadata log as an observer.
    #[command(name = "remove-controller")]
    RemoveController {
        /// The voter's node id.
        #[arg(long = "controller-id", value_name = "ID")]
        controller_id: i32,
        /// Its metadata log directory id (`describe --replication` shows it).
        #[arg(long = "controller-directory-id", value_name = "ID")]
        controller_directory_id: String,
    },
}

/// Kafka's text for an all-zero directory id (static voters and brokers have none).
const NO_DIRECTORY: &str = "AAAAAAAAAAAAAAAAAAAAAA";

pub async fn run(args: MetadataQuorumArgs) -> CliResult {
    let (status, human_readable) = match args.command {
        QuorumCommand::Describe {
            status,
            human_readable,
            ..
        } => (status, human_readable),
        QuorumCommand::AddController => return add_controller(&args.conn).await,
        QuorumCommand::RemoveController {
            controller_id,
            controller_directory_id,
        } => {
            let directory = sluice_server::storage::parse_uuid(&controller_directory_id)
                .ok_or_else(|| {
                    usage(format!(
                        "--controller-directory-id {controller_directory_id} is not a directory id"
                    ))
                })?;
            let admin = Admin::new(args.conn.client_config()?)?;
            admin.remove_raft_voter(controller_id, directory).await?;
            println!(
                "Removed KRaft controller {controller_id} with directory id {controller_directory_id}"
            );
            return Ok(());
        }
    };
    let admin = Admin::new(args.conn.client_config()?)?;
    let q = admin.describe_metadata_quorum().await?;
    if status {
        let cluster = admin.describe_cluster().await?;
        print!("{}", status_text(&cluster.cluster_id, &q));
    } else {
        print!("{}", replication_text(&q, human_readable.then(wall_ms)));
    }
    Ok(())
}

/// `add-controller --command-config controller.properties`: the new voter's id, controller
/// listeners and metadata directory id come from its own config and meta.properties.
async fn add_controller(conn: &ConnArgs) -> CliResult {
    let path = conn.command_config.as_ref().ok_or_else(|| {
        usage("add-controller needs --command-config: the new controller's server.properties")
    })?;
    let (config, _) = sluice_server::settings::load(Some(path), std::iter::empty(), &[])
        .map_err(|e| usage(format!("--command-config {}: {e}", path.display())))?;
    let id = config.node_id();
    let names = config.controller_listener_names();
    let endpoints: Vec<(String, String, u16)> = config
        .listeners()
        .into_iter()
        .filter(|l| names.contains(&l.name))
        .map(|l| {
            let host = if l.host.is_empty() || l.host == "0.0.0.0" {
                "localhost".to_string()
            } else {
                l.host
            };
            (l.name, host, l.port)
        })
        .collect();
    if endpoints.is_empty() || endpoints.iter().any(|(.., port)| *port == 0) {
        return Err(usage(format!(
            "--command-config {}: node {id} has no controller listener on a fixed port (controller.listener.names, listeners)",
            path.display()
        )));
    }
    let (_, metadata_dir) = sluice_server::storage::directories(&config);
    let directory =
        sluice_server::storage::directory_id(&metadata_dir).map_err(CliError::Failed)?;
    let shown = sluice_protocol::base64::encode(directory.as_bytes());
    // Only the connection's own settings from the controller's config.
    let mut client = ConnArgs {
        command_config: None,
        ..conn.clone()
    }
    .client_config()?;
    for (k, v) in config.explicit_keys() {
        if k == "security.protocol" || k.starts_with("ssl.") || k.starts_with("sasl.") {
            client = client
                .set(k, v)
                .map_err(|e| usage(format!("--command-config {}: {e}", path.display())))?;
        }
    }
    let admin = Admin::new(client)?;
    admin.add_raft_voter(id, directory, &endpoints).await?;
    println!(
        "Added controller {id} with directory id {shown} and endpoints: {}",
        endpoints
            .iter()
            .map(|(n, h, p)| format!("{n}://{h}:{p}"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    Ok(())
}

fn wall_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

fn leader_of(q: &QuorumDescription) -> Option<&QuorumReplica> {
    q.voters.iter().find(|v| v.id == q.leader_id)
}

/// `"id": N` and, when it has one, `"directoryId": "..."`.
fn replica_key(r: &QuorumReplica) -> String {
    if r.directory_id == NO_DIRECTORY || r.directory_id.is_empty() {
        format!("\"id\": {}", r.id)
    } else {
        format!("\"id\": {}, \"directoryId\": \"{}\"", r.id, r.directory_id)
    }
}

/// `describe --status`.
fn status_text(cluster_id: &str, q: &QuorumDescription) -> String {
    let leader = leader_of(q);
    let leader_end = leader.map_or(q.high_watermark, |l| l.log_end_offset);
    let followers: Vec<&QuorumReplica> = q.voters.iter().filter(|v| v.id != q.leader_id).collect();
    let max_lag = followers
        .iter()
        .map(|f| (leader_end - f.log_end_offset).max(0))
        .max()
        .unwrap_or(0);
    let max_lag_ms = match (
        leader.map(|l| l.last_caught_up_ms),
        followers.iter().map(|f| f.last_caught_up_ms).min(),
    ) {
        (Some(l), Some(f)) if l >= 0 && f >= 0 => (l - f).max(0),
        _ => -1,
    };
    let voters: Vec<String> = q
        .voters
        .iter()
        .map(|v| {
            let endpoints: Vec<String> = q
                .voter_endpoints
                .iter()
                .filter(|(id, ..)| *id == v.id)
                .map(|(_, listener, host, port)| format!("\"{listener}://{host}:{port}\""))
                .collect();
            let mut text = replica_key(v);
            if !endpoints.is_empty() {
                text.push_str(&format!(", \"endpoints\": [{}]", endpoints.join(", ")));
            }
            format!("{{{text}}}")
        })
        .collect();
    let observers: Vec<String> = q
        .observers
        .iter()
        .map(|o| format!("{{{}}}", replica_key(o)))
        .collect();
    format!(
        "ClusterId:              {cluster_id}\n\
         LeaderId:               {}\n\
         LeaderEpoch:            {}\n\
         HighWatermark:          {}\n\
         MaxFollowerLag:         {max_lag}\n\
         MaxFollowerLagTimeMs:   {max_lag_ms}\n\
         CurrentVoters:          [{}]\n\
         CurrentObservers:       [{}]\n",
        q.leader_id,
        q.leader_epoch,
        q.high_watermark,
        voters.join(", "),
        observers.join(", ")
    )
}

/// `describe --replication`: the leader, then the other voters, then the observers;
/// `now` (wall ms) prints times as "N ms ago".
fn replication_text(q: &QuorumDescription, now: Option<i64>) -> String {
    let leader_end = leader_of(q).map_or(q.high_watermark, |l| l.log_end_offset);
    let time = |t: i64| match (now, t) {
        (_, t) if t < 0 => "-1".to_string(),
        (Some(now), t) => format!("{} ms ago", (now - t).max(0)),
        (None, t) => t.to_string(),
    };
    let mut rows: Vec<(&QuorumReplica, &str)> = Vec::new();
    rows.extend(leader_of(q).map(|l| (l, "Leader")));
    rows.extend(
        q.voters
            .iter()
            .filter(|v| v.id != q.leader_id)
            .map(|v| (v, "Follower")),
    );
    rows.extend(q.observers.iter().map(|o| (o, "Observer")));
    let mut out = String::from(
        "NodeId\tDirectoryId           \tLogEndOffset\tLag\tLastFetchTimestamp\tLastCaughtUpTimestamp\tStatus\n",
    );
    for (r, status) in rows {
        out.push_str(&format!(
            "{}\t{}\t{}\t{}\t{}\t{}\t{status}\n",
            r.id,
            if r.directory_id.is_empty() {
                NO_DIRECTORY
            } else {
                &r.directory_id
            },
            r.log_end_offset,
            (leader_end - r.log_end_offset).max(0),
            time(r.last_fetch_ms),
            time(r.last_caught_up_ms),
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn replica(id: i32, end: i64, caught_up: i64) -> QuorumReplica {
        QuorumReplica {
            id,
            directory_id: if id == 2 {
                "AAAAAAAAAAAAAAAAAAAAAg".into()
            } else {
                NO_DIRECTORY.into()
            },
            log_end_offset: end,
            last_fetch_ms: caught_up,
            last_caught_up_ms: caught_up,
        }
    }

    #[test]
    fn status_and_replication_read_as_kafkas() {
        let q = QuorumDescription {
            leader_id: 2,
            leader_epoch: 7,
            high_watermark: 40,
            voters: vec![
                replica(1, 38, 900),
                replica(2, 41, 1000),
                replica(3, 41, 1000),
            ],
            observers: vec![replica(4, 40, 950)],
            voter_endpoints: vec![
                (1, "CONTROLLER".into(), "h1".into(), 9093),
                (2, "CONTROLLER".into(), "h2".into(), 9093),
            ],
        };
        let status = status_text("abc", &q);
        assert!(status.contains("LeaderId:               2\n"), "{status}");
        assert!(status.contains("MaxFollowerLag:         3\n"), "{status}");
        assert!(status.contains("MaxFollowerLagTimeMs:   100\n"), "{status}");
        assert!(
            status.contains(r#"CurrentVoters:          [{"id": 1, "endpoints": ["CONTROLLER://h1:9093"]}, {"id": 2, "directoryId": "AAAAAAAAAAAAAAAAAAAAAg", "endpoints": ["CONTROLLER://h2:9093"]}, {"id": 3}]"#),
            "{status}"
        );
        assert!(
            status.contains(r#"CurrentObservers:       [{"id": 4}]"#),
            "{status}"
        );
        let text = replication_text(&q, Some(1010));
        let rows: Vec<&str> = text.lines().skip(1).collect();
        assert_eq!(rows.len(), 4);
        assert!(
            rows[0].starts_with("2\tAAAAAAAAAAAAAAAAAAAAAg\t") && rows[0].ends_with("\tLeader")
        );
        assert!(rows[1].starts_with("1\t") && rows[1].contains("\t38\t3\t110 ms ago\t"));
        assert!(rows[3].starts_with("4\t") && rows[3].ends_with("\tObserver"));
    }
}
