//! `sluice cluster cluster-id | list-endpoints | unregister --id N` — as `kafka-cluster.sh`:
//! print the cluster id, the brokers' endpoints (fenced ones too when asked), or remove the
//! registration of a broker that is gone for good.

use clap::{Args, Subcommand};
use sluice_client::Admin;

use super::{CliResult, ConnArgs};

#[derive(Args, Debug)]
#[command(
    after_help = "Examples:\n  sluice cluster --bootstrap-server localhost:9092 cluster-id\n  sluice cluster --bootstrap-server localhost:9092 list-endpoints --include-fenced-brokers\n  sluice cluster --bootstrap-server localhost:9092 unregister --id 3"
)]
pub struct ClusterArgs {
    #[command(flatten)]
    pub conn: ConnArgs,
    #[command(subcommand)]
    pub command: ClusterCommand,
}

#[derive(Subcommand, Debug)]
pub enum ClusterCommand {
    /// Print the cluster id.
    #[command(name = "cluster-id")]
    ClusterId,
    /// List the brokers' endpoints.
    #[command(name = "list-endpoints")]
    ListEndpoints {
        /// Fenced brokers too.
        #[arg(long = "include-fenced-brokers")]
        include_fenced_brokers: bool,
    },
    /// Remove a broker's registration: it leaves every ISR and leads nothing. For a broker
    /// that is gone for good; one still running registers again.
    Unregister {
        /// The broker id.
        #[arg(long)]
        id: i32,
    },
}

pub async fn run(args: ClusterArgs) -> CliResult {
    let admin = Admin::new(args.conn.client_config()?)?;
    match args.command {
        ClusterCommand::ClusterId => {
            let cluster = admin.describe_cluster().await?;
            println!("Cluster ID: {}", cluster.cluster_id);
        }
        ClusterCommand::ListEndpoints {
            include_fenced_brokers,
        } => {
            let brokers = admin.list_endpoints(include_fenced_brokers).await?;
            print!("{}", endpoints_table(&brokers));
        }
        ClusterCommand::Unregister { id } => {
            admin.unregister_broker(id).await?;
            println!("Broker {id} is no longer registered.");
        }
    }
    Ok(())
}

/// Kafka's `list-endpoints` table: the host column as wide as the longest host.
fn endpoints_table(brokers: &[(i32, String, i32, Option<String>, bool)]) -> String {
    let width = brokers
        .iter()
        .map(|b| b.1.len())
        .chain(["HOST".len()])
        .max()
        .unwrap_or(4);
    let row = |cells: [&str; 6]| {
        format!(
            "{:<10} {:<width$} {:<10} {:<10} {:<10} {:<15}\n",
            cells[0], cells[1], cells[2], cells[3], cells[4], cells[5]
        )
    };
    let mut out = row(["ID", "HOST", "PORT", "RACK", "STATE", "ENDPOINT_TYPE"]);
    for (id, host, port, rack, fenced) in brokers {
        out += &row([
            &id.to_string(),
            host,
            &port.to_string(),
            rack.as_deref().unwrap_or("null"),
            if *fenced { "fenced" } else { "unfenced" },
            "broker",
        ]);
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn endpoints_table_matches_kafka_cluster_sh() {
        // What kafka-cluster.sh list-endpoints printed against Kafka 4.4 (trailing blanks kept).
        let expected = "ID         HOST      PORT       RACK       STATE      ENDPOINT_TYPE  \n\
                        1          127.0.0.1 19092      null       unfenced   broker         \n";
        let rows = [(1, "127.0.0.1".to_string(), 19092, None, false)];
        assert_eq!(super::endpoints_table(&rows), expected);
    }
}
