//! Transaction administration (what `kafka-transactions.sh list` and `describe` do): the
//! transactions every broker coordinates, and one transactional id's state at its
//! coordinator.

use kafka_protocol::messages::{
    DescribeTransactionsRequest, DescribeTransactionsResponse, ListTransactionsRequest,
    ListTransactionsResponse, TransactionalId,
};

use super::{s, Admin};
use crate::error::{check, Result};
use crate::group::coordinator::find_coordinator;

const KEY_TYPE_TRANSACTION: i8 = 1;

/// A transaction as ListTransactions reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TransactionListing {
    pub transactional_id: String,
    pub producer_id: i64,
    /// Kafka's state name: `Empty`, `Ongoing`, `PrepareCommit`, `CompleteCommit`, ...
    pub state: String,
    /// The broker coordinating it.
    pub coordinator: i32,
}

/// A transactional id at its coordinator.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TransactionDescription {
    pub transactional_id: String,
    pub coordinator: i32,
    pub state: String,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub timeout_ms: i32,
    /// When the open transaction started (-1: none open).
    pub start_time_ms: i64,
    /// (topic, partition) of the open transaction.
    pub partitions: Vec<(String, i32)>,
}

impl Admin {
    /// Every transaction the cluster's coordinators know, optionally only in these states.
    pub async fn list_transactions(&self, states: &[&str]) -> Result<Vec<TransactionListing>> {
        self.list_transactions_matching(states, None).await
    }

    /// As [`Admin::list_transactions`], and with `pattern` only the transactional ids that
    /// regular expression matches whole (ListTransactions v2, KIP-1152).
    pub async fn list_transactions_matching(
        &self,
        states: &[&str],
        pattern: Option<&str>,
    ) -> Result<Vec<TransactionListing>> {
        let cluster = self.core.refresh(&[]).await?;
        let mut brokers: Vec<i32> = cluster.brokers.keys().copied().collect();
        brokers.sort_unstable();
        let mut out = Vec::new();
        for node in brokers {
            let conn = self.core.connection_to_node(node).await?;
            let req = ListTransactionsRequest::default()
                .with_state_filters(states.iter().map(|st| s(st)).collect())
                .with_duration_filter(-1)
                .with_transactional_id_pattern(pattern.map(s));
            let resp: ListTransactionsResponse = conn.call(&req).await?;
            check(resp.error_code, None)?;
            out.extend(
                resp.transaction_states
                    .into_iter()
                    .map(|t| TransactionListing {
                        transactional_id: t.transactional_id.to_string(),
                        producer_id: t.producer_id.0,
                        state: t.transaction_state.to_string(),
                        coordinator: node,
                    }),
            );
        }
        out.sort_by(|a, b| a.transactional_id.cmp(&b.transactional_id));
        Ok(out)
    }

    /// One transactional id's state at its coordinator (TRANSACTIONAL_ID_NOT_FOUND if none).
    pub async fn describe_transaction(&self, id: &str) -> Result<TransactionDescription> {
        let (node, addr) = find_coordinator(&self.core, id, KEY_TYPE_TRANSACTION).await?;
        let conn = self.core.connection_to(&addr).await?;
        let req = DescribeTransactionsRequest::default()
            .with_transactional_ids(vec![TransactionalId(s(id))]);
        let resp: DescribeTransactionsResponse = conn.call(&req).await?;
        let t = resp.transaction_states.into_iter().next().ok_or_else(|| {
            crate::error::Error::Protocol("DescribeTransactions answered nothing".into())
        })?;
        check(t.error_code, Some(id.to_string()))?;
        Ok(TransactionDescription {
            transactional_id: id.to_string(),
            coordinator: node,
            state: t.transaction_state.to_string(),
            producer_id: t.producer_id.0,
            producer_epoch: t.producer_epoch,
            timeout_ms: t.transaction_timeout_ms,
            start_time_ms: t.transaction_start_time_ms,
            partitions: t
                .topics
                .into_iter()
                .flat_map(|topic| {
                    let name = topic.topic.to_string();
                    topic.partitions.into_iter().map(move |p| (name.clone(), p))
                })
                .collect(),
        })
    }
}
