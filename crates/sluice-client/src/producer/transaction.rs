//! The transactional producer (`transactional.id`): `init_transactions` registers with the
//! transaction coordinator (fencing older instances), `begin_transaction`, `send` (each new
//! partition is added to the transaction before its first batch), `send_offsets_to_transaction`
//! (a consumer group's offsets committed with the output), `commit_transaction` /
//! `abort_transaction`. A batch that fails inside a transaction makes the commit fail: the
//! application aborts and retries the transaction. PRODUCER_FENCED is fatal: another
//! instance took over.

use std::collections::HashSet;
use std::time::Duration;

use tokio::time::Instant;

use kafka_protocol::messages::add_partitions_to_txn_request::AddPartitionsToTxnTopic;
use kafka_protocol::messages::txn_offset_commit_request::{
    TxnOffsetCommitRequestPartition, TxnOffsetCommitRequestTopic,
};
use kafka_protocol::messages::{
    AddOffsetsToTxnRequest, AddPartitionsToTxnRequest, ApiKey, EndTxnRequest, GroupId,
    InitProducerIdRequest, ProducerId, TopicName, TransactionalId, TxnOffsetCommitRequest,
};
use kafka_protocol::protocol::StrBytes;
use sluice_protocol::types::TopicPartition;
use sluice_protocol::ErrorCode;

use super::{Idempotence, Producer, Shared};
use crate::error::{check, Error, Result};
use crate::group::coordinator::{find_coordinator, KEY_TYPE_GROUP};

const KEY_TYPE_TRANSACTION: i8 = 1;

/// A transactional producer's transaction.
#[derive(Default)]
pub(crate) struct Txn {
    pub id: String,
    pub open: bool,
    /// Partitions already added to the open transaction.
    pub added: HashSet<TopicPartition>,
    /// Set once the producer is fenced: every later call fails with it.
    pub fatal: Option<Error>,
}

/// A consumer group member's identity for `send_offsets_to_transaction` (the consumer's
/// group metadata): the coordinator checks it, so a zombie consumer cannot commit.
#[derive(Clone, Debug)]
pub struct GroupMetadata {
    pub group_id: String,
    pub generation: i32,
    pub member_id: String,
    pub instance_id: Option<String>,
}

impl GroupMetadata {
    /// Only the group id (no membership check; for tools and `assign()` consumers).
    pub fn group(group_id: impl Into<String>) -> Self {
        Self {
            group_id: group_id.into(),
            generation: -1,
            member_id: String::new(),
            instance_id: None,
        }
    }
}

fn str_bytes(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_string())
}

/// Errors after which the call is repeated (on a freshly found coordinator when it moved).
fn retry_txn_call(e: &Error) -> bool {
    matches!(
        e.code(),
        Some(ErrorCode::ConcurrentTransactions | ErrorCode::UnstableOffsetCommit)
    ) || e.is_retriable()
        || crate::group::coordinator::is_coordinator_error(e)
}

fn fenced(e: &Error) -> bool {
    matches!(
        e.code(),
        Some(
            ErrorCode::ProducerFenced
                | ErrorCode::InvalidProducerEpoch
                | ErrorCode::TransactionalIdAuthorizationFailed
        )
    )
}

/// Run `call` against the coordinator of `key` until it succeeds, fails for good, or
/// `request.timeout.ms` passes.
async fn with_txn_coordinator<T, F, Fut>(
    shared: &Shared,
    key: &str,
    key_type: i8,
    call: F,
) -> Result<T>
where
    F: Fn(std::sync::Arc<crate::connection::Connection>) -> Fut,
    Fut: std::future::Future<Output = Result<T>>,
{
    let core = &shared.core;
    let deadline = Instant::now() + core.config.request_timeout.max(Duration::from_secs(1));
    let mut backoff = Duration::from_millis(10);
    loop {
        let attempt = async {
            let (_, addr) = find_coordinator(core, key, key_type).await?;
            let conn = core.connection_to(&addr).await?;
            call(conn).await
        }
        .await;
        match attempt {
            Err(e) if retry_txn_call(&e) && Instant::now() < deadline => {
                tokio::time::sleep(backoff).await;
                backoff =
                    (backoff * 2).min(core.config.retry_backoff.max(Duration::from_millis(20)));
            }
            other => return other,
        }
    }
}

impl Producer {
    fn txn_id(&self) -> Result<String> {
        self.shared
            .config
            .transactional_id
            .clone()
            .ok_or_else(|| Error::Unsupported("the producer has no transactional.id".into()))
    }

    fn idempotence(&self) -> Result<&tokio::sync::Mutex<Idempotence>> {
        self.shared
            .idempotence
            .as_ref()
            .ok_or_else(|| Error::Unsupported("a transactional producer is idempotent".into()))
    }

    /// Register this producer's `transactional.id` with its coordinator: it gets the id's
    /// producer id and a new epoch, which fences any older instance, whose unfinished
    /// transaction the coordinator aborts.
    pub async fn init_transactions(&self) -> Result<()> {
        let id = self.txn_id()?;
        let timeout_ms = self
            .shared
            .config
            .transaction_timeout
            .as_millis()
            .min(i32::MAX as u128) as i32;
        let req = InitProducerIdRequest::default()
            .with_transactional_id(Some(TransactionalId(str_bytes(&id))))
            .with_transaction_timeout_ms(timeout_ms)
            .with_producer_id(ProducerId(-1))
            .with_producer_epoch(-1);
        let resp = with_txn_coordinator(&self.shared, &id, KEY_TYPE_TRANSACTION, |conn| {
            let req = req.clone();
            async move {
                let resp = conn.call(&req).await?;
                check(resp.error_code, None)?;
                Ok(resp)
            }
        })
        .await?;
        let mut state = self.idempotence()?.lock().await;
        state.producer = Some((resp.producer_id.0, resp.producer_epoch));
        state.next_sequence.clear();
        state.txn = Some(Txn {
            id,
            ..Txn::default()
        });
        tracing::debug!(
            producer_id = resp.producer_id.0,
            epoch = resp.producer_epoch,
            "transactional producer registered"
        );
        Ok(())
    }

    /// Start a transaction: what is sent until commit or abort belongs to it.
    pub async fn begin_transaction(&self) -> Result<()> {
        let mut state = self.idempotence()?.lock().await;
        let txn = state
            .txn
            .as_mut()
            .ok_or_else(|| Error::Unsupported("init_transactions() first".into()))?;
        if let Some(e) = &txn.fatal {
            return Err(e.clone());
        }
        if txn.open {
            return Err(Error::Unsupported("a transaction is already open".into()));
        }
        txn.open = true;
        txn.added.clear();
        *self
            .shared
            .txn_failure
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = None;
        Ok(())
    }

    /// Commit `offsets` (topic, partition, next offset to read) of a consumer group inside
    /// the open transaction: they count only if the transaction commits.
    pub async fn send_offsets_to_transaction(
        &self,
        offsets: &[(String, i32, i64)],
        group: &GroupMetadata,
    ) -> Result<()> {
        let id = self.txn_id()?;
        let (producer_id, epoch) = self.open_transaction().await?;
        let add = AddOffsetsToTxnRequest::default()
            .with_transactional_id(TransactionalId(str_bytes(&id)))
            .with_producer_id(ProducerId(producer_id))
            .with_producer_epoch(epoch)
            .with_group_id(GroupId(str_bytes(&group.group_id)));
        let added = with_txn_coordinator(&self.shared, &id, KEY_TYPE_TRANSACTION, |conn| {
            let add = add.clone();
            async move { check(conn.call(&add).await?.error_code, None) }
        })
        .await;
        self.fatal_if_fenced(added).await?;
        let mut topics: Vec<TxnOffsetCommitRequestTopic> = Vec::new();
        for (topic, partition, offset) in offsets {
            let p = TxnOffsetCommitRequestPartition::default()
                .with_partition_index(*partition)
                .with_committed_offset(*offset)
                .with_committed_leader_epoch(-1);
            match topics.iter_mut().find(|t| t.name.as_str() == topic) {
                Some(t) => t.partitions.push(p),
                None => topics.push(
                    TxnOffsetCommitRequestTopic::default()
                        .with_name(TopicName(str_bytes(topic)))
                        .with_partitions(vec![p]),
                ),
            }
        }
        let commit = TxnOffsetCommitRequest::default()
            .with_transactional_id(TransactionalId(str_bytes(&id)))
            .with_group_id(GroupId(str_bytes(&group.group_id)))
            .with_producer_id(ProducerId(producer_id))
            .with_producer_epoch(epoch)
            .with_generation_id(group.generation)
            .with_member_id(str_bytes(&group.member_id))
            .with_group_instance_id(group.instance_id.as_deref().map(str_bytes))
            .with_topics(topics);
        let committed =
            with_txn_coordinator(&self.shared, &group.group_id, KEY_TYPE_GROUP, |conn| {
                let commit = commit.clone();
                async move {
                    let resp = conn.call(&commit).await?;
                    for t in &resp.topics {
                        for p in &t.partitions {
                            check(
                                p.error_code,
                                Some(format!("{}-{}", t.name.as_str(), p.partition_index)),
                            )?;
                        }
                    }
                    Ok(())
                }
            })
            .await;
        self.fatal_if_fenced(committed).await
    }

    /// Send everything buffered, then commit the open transaction. Fails (and the
    /// transaction must be aborted) if any record of it could not be written.
    pub async fn commit_transaction(&self) -> Result<()> {
        self.end_transaction(true).await
    }

    /// Abort the open transaction: read_committed consumers never see its records.
    pub async fn abort_transaction(&self) -> Result<()> {
        self.end_transaction(false).await
    }

    async fn end_transaction(&self, commit: bool) -> Result<()> {
        let id = self.txn_id()?;
        let (producer_id, epoch) = self.open_transaction().await?;
        self.flush().await;
        if commit {
            let failure = self
                .shared
                .txn_failure
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .clone();
            if let Some(e) = failure {
                return Err(Error::Unsupported(format!(
                    "a record of the transaction was not written ({e}): abort it"
                )));
            }
        }
        let req = EndTxnRequest::default()
            .with_transactional_id(TransactionalId(str_bytes(&id)))
            .with_producer_id(ProducerId(producer_id))
            .with_producer_epoch(epoch)
            .with_committed(commit);
        let ended = with_txn_coordinator(&self.shared, &id, KEY_TYPE_TRANSACTION, |conn| {
            let req = req.clone();
            async move { check(conn.call(&req).await?.error_code, None) }
        })
        .await;
        self.fatal_if_fenced(ended).await?;
        let mut state = self.idempotence()?.lock().await;
        if let Some(txn) = state.txn.as_mut() {
            txn.open = false;
            txn.added.clear();
        }
        Ok(())
    }

    /// The producer id and epoch of the open transaction, or why there is none.
    async fn open_transaction(&self) -> Result<(i64, i16)> {
        let state = self.idempotence()?.lock().await;
        let txn = state
            .txn
            .as_ref()
            .ok_or_else(|| Error::Unsupported("init_transactions() first".into()))?;
        if let Some(e) = &txn.fatal {
            return Err(e.clone());
        }
        if !txn.open {
            return Err(Error::Unsupported("no transaction is open".into()));
        }
        state
            .producer
            .ok_or_else(|| Error::Unsupported("init_transactions() first".into()))
    }

    async fn fatal_if_fenced(&self, r: Result<()>) -> Result<()> {
        if let Err(e) = &r {
            if fenced(e) {
                if let Ok(idem) = self.idempotence() {
                    if let Some(txn) = idem.lock().await.txn.as_mut() {
                        txn.fatal = Some(e.clone());
                    }
                }
            }
        }
        r
    }
}

/// Sender side: before the first batch to `tp` in the open transaction, add the partition
/// to it. Called with the producer's state locked.
pub(crate) async fn add_partition(
    shared: &Shared,
    state: &mut Idempotence,
    tp: &TopicPartition,
) -> Result<()> {
    let (producer_id, epoch) = state
        .producer
        .ok_or_else(|| Error::Unsupported("init_transactions() first".into()))?;
    let Some(txn) = state.txn.as_mut() else {
        return Err(Error::Unsupported("init_transactions() first".into()));
    };
    if let Some(e) = &txn.fatal {
        return Err(e.clone());
    }
    if !txn.open {
        return Err(Error::Unsupported(
            "a transactional producer sends only inside a transaction (begin_transaction())".into(),
        ));
    }
    if txn.added.contains(tp) {
        return Ok(());
    }
    let req = AddPartitionsToTxnRequest::default()
        .with_v3_and_below_transactional_id(TransactionalId(str_bytes(&txn.id)))
        .with_v3_and_below_producer_id(ProducerId(producer_id))
        .with_v3_and_below_producer_epoch(epoch)
        .with_v3_and_below_topics(vec![AddPartitionsToTxnTopic::default()
            .with_name(TopicName(str_bytes(&tp.topic)))
            .with_partitions(vec![tp.partition.0])]);
    let id = txn.id.clone();
    let added = with_txn_coordinator(shared, &id, KEY_TYPE_TRANSACTION, |conn| {
        let req = req.clone();
        async move {
            // v4+ is the brokers' batched form; clients send one transaction (v3 and below).
            let version = conn.version_for(ApiKey::AddPartitionsToTxn)?.min(3);
            let resp = conn.call_at(&req, version).await?;
            for t in &resp.results_by_topic_v3_and_below {
                for p in &t.results_by_partition {
                    check(p.partition_error_code, None)?;
                }
            }
            Ok(())
        }
    })
    .await;
    if let Err(e) = &added {
        if fenced(e) {
            txn.fatal = Some(e.clone());
        }
        return added;
    }
    txn.added.insert(tp.clone());
    Ok(())
}
