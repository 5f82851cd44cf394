//! `sluice transactions` — like `kafka-transactions.sh list` / `describe`: the transactions
//! the cluster's coordinators know, and one transactional id's state.

use clap::{ArgGroup, Args};
use sluice_client::Admin;

use super::{usage, CliResult, ConnArgs};

#[derive(Args, Debug)]
#[command(
    group(ArgGroup::new("action").required(true).args(["list", "describe"])),
    after_help = "Examples:\n  sluice transactions --list\n  sluice transactions --list --state Ongoing\n  sluice transactions --list --transactional-id-pattern 'payments-.*'\n  sluice transactions --describe --transactional-id payments-1"
)]
pub struct TransactionsArgs {
    #[command(flatten)]
    pub conn: ConnArgs,
    /// List transactional ids: id, coordinator, producer id, state.
    #[arg(long)]
    pub list: bool,
    /// Describe one transactional id at its coordinator.
    #[arg(long)]
    pub describe: bool,
    /// The transactional id (for --describe).
    #[arg(long = "transactional-id")]
    pub transactional_id: Option<String>,
    /// With --list: only these states (repeatable): Empty, Ongoing, PrepareCommit,
    /// PrepareAbort, CompleteCommit, CompleteAbort, Dead, PrepareEpochFence.
    #[arg(long)]
    pub state: Vec<String>,
    /// With --list: only transactional ids this regular expression matches whole.
    #[arg(long = "transactional-id-pattern")]
    pub transactional_id_pattern: Option<String>,
}

pub async fn run(args: TransactionsArgs) -> CliResult {
    let admin = Admin::new(args.conn.client_config()?)?;
    if args.list {
        let states: Vec<&str> = args.state.iter().map(String::as_str).collect();
        let txns = admin
            .list_transactions_matching(&states, args.transactional_id_pattern.as_deref())
            .await?;
        println!("TransactionalId\tCoordinator\tProducerId\tTransactionState");
        for t in txns {
            println!(
                "{}\t{}\t{}\t{}",
                t.transactional_id, t.coordinator, t.producer_id, t.state
            );
        }
        return Ok(());
    }
    let id = args
        .transactional_id
        .as_deref()
        .ok_or_else(|| usage("--describe needs --transactional-id"))?;
    let t = admin.describe_transaction(id).await?;
    let partitions: Vec<String> = t
        .partitions
        .iter()
        .map(|(topic, p)| format!("{topic}-{p}"))
        .collect();
    println!("CoordinatorId\tTransactionalId\tProducerId\tProducerEpoch\tTransactionState\tTransactionTimeoutMs\tCurrentTransactionStartTimeMs\tTopicPartitions");
    println!(
        "{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}",
        t.coordinator,
        t.transactional_id,
        t.producer_id,
        t.producer_epoch,
        t.state,
        t.timeout_ms,
        t.start_time_ms,
        partitions.join(",")
    );
    Ok(())
}
