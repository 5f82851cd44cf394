//! Adding partitions to a transaction on a producer's behalf (transactions v2, KIP-890 part
//! 2), as Kafka's `AddPartitionsToTxnManager`: a v2 client (Produce v12+, TxnOffsetCommit v5+)
//! sends no AddPartitionsToTxn of its own; the leader of a partition it writes in a
//! transaction asks the transactional id's coordinator to add the partition first, directly
//! when this broker is the coordinator, else with AddPartitionsToTxn v4 (VerifyOnly false).

use std::collections::HashMap;
use std::time::Duration;

use kafka_protocol::messages::add_partitions_to_txn_request::{
    AddPartitionsToTxnTopic, AddPartitionsToTxnTransaction,
};
use kafka_protocol::messages::{
    AddPartitionsToTxnRequest, AddPartitionsToTxnResponse, ApiKey, ProducerId, TopicName,
    TransactionalId,
};
use sluice_protocol::types::TopicPartition;
use sluice_protocol::ErrorCode;
use tokio::sync::Mutex;
use tracing::debug;

use super::coordinator::{TxnCoordinator, TXN_TOPIC};
use crate::broker_conn::{broker_address, BrokerConn};
use crate::request::str_bytes;

/// The broker-to-coordinator version (batched, with VerifyOnly).
const ADD_PARTITIONS_VERSION: i16 = 4;
/// Kafka's `add.partitions.to.txn.retry.backoff.ms` and `...backoff.max.ms` defaults: how a
/// produce waits out CONCURRENT_TRANSACTIONS (the previous transaction's markers) before
/// answering it.
const CONCURRENT_BACKOFF: Duration = Duration::from_millis(20);
const CONCURRENT_WAIT: Duration = Duration::from_millis(100);

/// Idle connections to other brokers' coordinators.
#[derive(Default)]
pub struct AdderConns(Mutex<HashMap<i32, Vec<BrokerConn>>>);

impl TxnCoordinator {
    /// Add `partitions` to the open transaction of `id` (opening one) for its producer
    /// `producer_id` at `epoch`. With `wait_concurrent`, CONCURRENT_TRANSACTIONS is retried
    /// for up to 100 ms first (Produce does, TxnOffsetCommit does not, as in Kafka).
    pub async fn add_for_producer(
        &self,
        id: &str,
        producer_id: i64,
        epoch: i16,
        partitions: Vec<(String, i32)>,
        wait_concurrent: bool,
    ) -> Result<(), ErrorCode> {
        let deadline = tokio::time::Instant::now() + CONCURRENT_WAIT;
        loop {
            let r = self
                .add_once(id, producer_id, epoch, partitions.clone())
                .await;
            match r {
                Err(ErrorCode::ConcurrentTransactions)
                    if wait_concurrent
                        && tokio::time::Instant::now() + CONCURRENT_BACKOFF <= deadline =>
                {
                    tokio::time::sleep(CONCURRENT_BACKOFF).await;
                }
                r => return r,
            }
        }
    }

    async fn add_once(
        &self,
        id: &str,
        producer_id: i64,
        epoch: i16,
        partitions: Vec<(String, i32)>,
    ) -> Result<(), ErrorCode> {
        let image = self.metadata.current();
        let state = TopicPartition::new(TXN_TOPIC, self.partition_for(id));
        let leader = image
            .topic(&state.topic)
            .and_then(|t| t.partitions.get(&state.partition.0))
            .map(|p| p.leader)
            .filter(|l| *l >= 0)
            .ok_or(ErrorCode::CoordinatorNotAvailable)?;
        if leader == self.config.node_id {
            return self
                .add_partitions(id.to_string(), producer_id, epoch, partitions, false)
                .await;
        }
        let pooled = self
            .adder_conns
            .0
            .lock()
            .await
            .get_mut(&leader)
            .and_then(Vec::pop);
        let mut conn = match pooled {
            Some(c) => c,
            None => {
                let addr = broker_address(&image, leader, self.config.inter.listener.as_deref())
                    .ok_or(ErrorCode::CoordinatorNotAvailable)?;
                BrokerConn::connect(
                    &addr,
                    &format!("sluice-txn-adder-{}", self.config.node_id),
                    &self.config.inter,
                )
                .await
                .map_err(|e| {
                    debug!(leader, error = %e, "no connection to the transaction coordinator");
                    ErrorCode::CoordinatorNotAvailable
                })?
            }
        };
        let mut txn = AddPartitionsToTxnTransaction::default();
        txn.transactional_id = TransactionalId(str_bytes(id.to_string()));
        txn.producer_id = ProducerId(producer_id);
        txn.producer_epoch = epoch;
        txn.verify_only = false;
        for (topic, ps) in crate::request::by_topic(
            partitions
                .iter()
                .map(|(t, p)| (t.clone(), *p, ()))
                .collect(),
        ) {
            let mut t = AddPartitionsToTxnTopic::default();
            t.name = TopicName(str_bytes(topic));
            t.partitions = ps.into_iter().map(|(p, ())| p).collect();
            txn.topics.push(t);
        }
        let mut req = AddPartitionsToTxnRequest::default();
        req.transactions.push(txn);
        let resp: AddPartitionsToTxnResponse = tokio::time::timeout(
            self.config.inter.timeout,
            conn.call(ApiKey::AddPartitionsToTxn, ADD_PARTITIONS_VERSION, &req),
        )
        .await
        .map_err(|_| ErrorCode::RequestTimedOut)?
        .map_err(|e| {
            debug!(leader, error = %e, "AddPartitionsToTxn failed");
            ErrorCode::NetworkException
        })?;
        self.adder_conns
            .0
            .lock()
            .await
            .entry(leader)
            .or_default()
            .push(conn);
        if let Some(code) = ErrorCode::try_from_code(resp.error_code) {
            // The coordinator does not take this broker's requests.
            return Err(if code == ErrorCode::ClusterAuthorizationFailed {
                ErrorCode::InvalidTxnState
            } else {
                code
            });
        }
        let worst = resp
            .results_by_transaction
            .iter()
            .flat_map(|t| &t.topic_results)
            .flat_map(|t| &t.results_by_partition)
            .filter_map(|p| ErrorCode::try_from_code(p.partition_error_code))
            .find(|c| *c != ErrorCode::OperationNotAttempted);
        match worst {
            Some(code) => Err(code),
            None => Ok(()),
        }
    }
}
