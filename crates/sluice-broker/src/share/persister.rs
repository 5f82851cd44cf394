//! [`Persister`]: how a share-partition leader (and the group coordinator) reaches the share
//! coordinator of a share partition: directly when this broker leads the partition of
//! `__share_group_state` it lives in, else with the share-state APIs (v0) over a
//! broker-to-broker connection. `__share_group_state` is created on first use.
//!
//! Calls are retried while the coordinator moves or loads (NOT_COORDINATOR,
//! COORDINATOR_NOT_AVAILABLE, COORDINATOR_LOAD_IN_PROGRESS, a lost connection), for up to
//! [`RETRY_FOR`], as Kafka's persister does: a failover of the coordinator delays a share
//! acknowledgement instead of failing it.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::messages::{
    delete_share_group_state_request as delete_req,
    initialize_share_group_state_request as init_req, read_share_group_state_request as read_req,
    read_share_group_state_summary_request as summary_req,
    write_share_group_state_request as write_req, ApiKey, DeleteShareGroupStateRequest,
    DeleteShareGroupStateResponse, InitializeShareGroupStateRequest,
    InitializeShareGroupStateResponse, ReadShareGroupStateRequest, ReadShareGroupStateResponse,
    ReadShareGroupStateSummaryRequest, ReadShareGroupStateSummaryResponse,
    WriteShareGroupStateRequest, WriteShareGroupStateResponse,
};
use sluice_metadata::Uuid;
use sluice_protocol::ErrorCode;
use tokio::sync::Mutex;

use super::coordinator::{PersistedState, ShareCoordinator, StateWrite, STATE_TOPIC};
use super::state_records::PersistedBatch;
use crate::broker_conn::{broker_address, BrokerConn, InterBroker};
use crate::metadata_cache::MetadataCache;
use crate::request::str_bytes;
use crate::services::topics::TopicCreator;

/// How long a call keeps retrying a coordinator that moves or loads.
pub const RETRY_FOR: Duration = Duration::from_secs(10);
const BACKOFF: Duration = Duration::from_millis(50);
const BACKOFF_MAX: Duration = Duration::from_millis(500);

/// One share-state call.
#[derive(Clone, Debug)]
enum Call {
    Read { leader_epoch: i32 },
    Summary,
    Write(StateWrite),
    Initialize { state_epoch: i32, start_offset: i64 },
    Delete,
}

/// What a call answered.
enum Answer {
    State(Option<PersistedState>),
    Done,
}

/// The share coordinators of the cluster, as seen from this broker.
pub struct Persister {
    node_id: i32,
    coordinator: Arc<ShareCoordinator>,
    metadata: Arc<MetadataCache>,
    topics: Arc<TopicCreator>,
    inter: InterBroker,
    conns: Mutex<HashMap<i32, Vec<BrokerConn>>>,
}

fn retriable(code: ErrorCode) -> bool {
    matches!(
        code,
        ErrorCode::NotCoordinator
            | ErrorCode::CoordinatorNotAvailable
            | ErrorCode::CoordinatorLoadInProgress
            | ErrorCode::RequestTimedOut
            | ErrorCode::NetworkException
            | ErrorCode::NotEnoughReplicas
    )
}

impl Persister {
    pub fn new(
        node_id: i32,
        coordinator: Arc<ShareCoordinator>,
        metadata: Arc<MetadataCache>,
        topics: Arc<TopicCreator>,
        inter: InterBroker,
    ) -> Self {
        Persister {
            node_id,
            coordinator,
            metadata,
            topics,
            inter,
            conns: Mutex::new(HashMap::new()),
        }
    }

    pub fn coordinator(&self) -> &Arc<ShareCoordinator> {
        &self.coordinator
    }

    /// The state of a share partition (None: never written), as its leader at `leader_epoch`
    /// reads it (fencing earlier leaders).
    pub async fn read(
        &self,
        group: &str,
        topic_id: Uuid,
        partition: i32,
        leader_epoch: i32,
    ) -> Result<Option<PersistedState>, ErrorCode> {
        match self
            .call(group, topic_id, partition, Call::Read { leader_epoch })
            .await?
        {
            Answer::State(s) => Ok(s),
            Answer::Done => Ok(None),
        }
    }

    /// The state of a share partition without fencing anyone (offsets, lag).
    pub async fn summary(
        &self,
        group: &str,
        topic_id: Uuid,
        partition: i32,
    ) -> Result<Option<PersistedState>, ErrorCode> {
        match self.call(group, topic_id, partition, Call::Summary).await? {
            Answer::State(s) => Ok(s),
            Answer::Done => Ok(None),
        }
    }

    pub async fn write(
        &self,
        group: &str,
        topic_id: Uuid,
        partition: i32,
        w: StateWrite,
    ) -> Result<(), ErrorCode> {
        self.call(group, topic_id, partition, Call::Write(w))
            .await
            .map(drop)
    }

    pub async fn initialize(
        &self,
        group: &str,
        topic_id: Uuid,
        partition: i32,
        state_epoch: i32,
        start_offset: i64,
    ) -> Result<(), ErrorCode> {
        let call = Call::Initialize {
            state_epoch,
            start_offset,
        };
        self.call(group, topic_id, partition, call).await.map(drop)
    }

    pub async fn delete(
        &self,
        group: &str,
        topic_id: Uuid,
        partition: i32,
    ) -> Result<(), ErrorCode> {
        self.call(group, topic_id, partition, Call::Delete)
            .await
            .map(drop)
    }

    async fn call(
        &self,
        group: &str,
        topic_id: Uuid,
        partition: i32,
        call: Call,
    ) -> Result<Answer, ErrorCode> {
        self.topics.ensure_share_state_topic().await?;
        let deadline = tokio::time::Instant::now() + RETRY_FOR;
        let mut backoff = BACKOFF;
        loop {
            let r = self.call_once(group, topic_id, partition, &call).await;
            match r {
                Err(code)
                    if retriable(code) && tokio::time::Instant::now() + backoff < deadline =>
                {
                    tracing::debug!(group, %topic_id, partition, ?code, "share coordinator call retried");
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(BACKOFF_MAX);
                }
                r => return r,
            }
        }
    }

    async fn call_once(
        &self,
        group: &str,
        topic_id: Uuid,
        partition: i32,
        call: &Call,
    ) -> Result<Answer, ErrorCode> {
        let p = self.coordinator.partition_of(group, &topic_id, partition);
        let image = self.metadata.current();
        let leader = image
            .topic(STATE_TOPIC)
            .and_then(|t| t.partitions.get(&p))
            .map(|p| p.leader)
            .filter(|l| *l >= 0)
            .ok_or(ErrorCode::CoordinatorNotAvailable)?;
        if leader == self.node_id {
            let c = &self.coordinator;
            return match call.clone() {
                Call::Read { leader_epoch } => c
                    .read(group, topic_id, partition, leader_epoch)
                    .await
                    .map(Answer::State),
                Call::Summary => c
                    .summary(group, topic_id, partition)
                    .await
                    .map(Answer::State),
                Call::Write(w) => c
                    .write(group, topic_id, partition, w)
                    .await
                    .map(|_| Answer::Done),
                Call::Initialize {
                    state_epoch,
                    start_offset,
                } => c
                    .initialize(group, topic_id, partition, state_epoch, start_offset)
                    .await
                    .map(|_| Answer::Done),
                Call::Delete => c
                    .delete(group, topic_id, partition)
                    .await
                    .map(|_| Answer::Done),
            };
        }
        let addr = broker_address(&image, leader, self.inter.listener.as_deref())
            .ok_or(ErrorCode::CoordinatorNotAvailable)?;
        let idle = self.conns.lock().await.get_mut(&leader).and_then(Vec::pop);
        let mut conn = match idle {
            Some(c) => c,
            None => BrokerConn::connect(&addr, "sluice-share-persister", &self.inter)
                .await
                .map_err(|_| ErrorCode::CoordinatorNotAvailable)?,
        };
        let answer = tokio::time::timeout(
            self.inter.timeout.max(Duration::from_secs(1)),
            remote(&mut conn, group, topic_id, partition, call),
        )
        .await
        .map_err(|_| ErrorCode::RequestTimedOut)?;
        match answer {
            Err(RemoteError::Io) => Err(ErrorCode::CoordinatorNotAvailable),
            Err(RemoteError::Code(code)) => {
                self.conns
                    .lock()
                    .await
                    .entry(leader)
                    .or_default()
                    .push(conn);
                Err(code)
            }
            Ok(a) => {
                self.conns
                    .lock()
                    .await
                    .entry(leader)
                    .or_default()
                    .push(conn);
                Ok(a)
            }
        }
    }
}

enum RemoteError {
    /// The connection failed: dropped.
    Io,
    Code(ErrorCode),
}

fn code(c: i16) -> Result<(), RemoteError> {
    match ErrorCode::try_from_code(c) {
        None => Ok(()),
        Some(code) => Err(RemoteError::Code(code)),
    }
}

/// One call over a broker-to-broker connection (v0 of each API).
async fn remote(
    conn: &mut BrokerConn,
    group: &str,
    topic_id: Uuid,
    partition: i32,
    call: &Call,
) -> Result<Answer, RemoteError> {
    let io = |_| RemoteError::Io;
    let group_id = str_bytes(group.to_string());
    match call {
        Call::Read { leader_epoch } => {
            let mut p = read_req::PartitionData::default();
            p.partition = partition;
            p.leader_epoch = *leader_epoch;
            let mut t = read_req::ReadStateData::default();
            t.topic_id = topic_id;
            t.partitions = vec![p];
            let mut req = ReadShareGroupStateRequest::default();
            req.group_id = group_id;
            req.topics = vec![t];
            let resp: ReadShareGroupStateResponse = conn
                .call(ApiKey::ReadShareGroupState, 0, &req)
                .await
                .map_err(io)?;
            let r = resp
                .results
                .into_iter()
                .flat_map(|t| t.partitions)
                .next()
                .ok_or(RemoteError::Code(ErrorCode::UnknownServerError))?;
            code(r.error_code)?;
            if r.start_offset < 0 {
                return Ok(Answer::State(None));
            }
            Ok(Answer::State(Some(PersistedState {
                state_epoch: r.state_epoch,
                leader_epoch: *leader_epoch,
                start_offset: r.start_offset,
                batches: r
                    .state_batches
                    .iter()
                    .map(|b| PersistedBatch {
                        first_offset: b.first_offset,
                        last_offset: b.last_offset,
                        delivery_state: b.delivery_state,
                        delivery_count: b.delivery_count,
                    })
                    .collect(),
                delivery_complete_count: -1,
            })))
        }
        Call::Summary => {
            let mut p = summary_req::PartitionData::default();
            p.partition = partition;
            p.leader_epoch = -1;
            let mut t = summary_req::ReadStateSummaryData::default();
            t.topic_id = topic_id;
            t.partitions = vec![p];
            let mut req = ReadShareGroupStateSummaryRequest::default();
            req.group_id = group_id;
            req.topics = vec![t];
            let resp: ReadShareGroupStateSummaryResponse = conn
                .call(ApiKey::ReadShareGroupStateSummary, 0, &req)
                .await
                .map_err(io)?;
            let r = resp
                .results
                .into_iter()
                .flat_map(|t| t.partitions)
                .next()
                .ok_or(RemoteError::Code(ErrorCode::UnknownServerError))?;
            code(r.error_code)?;
            if r.start_offset < 0 {
                return Ok(Answer::State(None));
            }
            Ok(Answer::State(Some(PersistedState {
                state_epoch: r.state_epoch,
                leader_epoch: r.leader_epoch,
                start_offset: r.start_offset,
                batches: Vec::new(),
                delivery_complete_count: -1,
            })))
        }
        Call::Write(w) => {
            let mut p = write_req::PartitionData::default();
            p.partition = partition;
            p.state_epoch = w.state_epoch;
            p.leader_epoch = w.leader_epoch;
            p.start_offset = w.start_offset;
            p.state_batches = w
                .batches
                .iter()
                .map(|b| {
                    let mut s = write_req::StateBatch::default();
                    s.first_offset = b.first_offset;
                    s.last_offset = b.last_offset;
                    s.delivery_state = b.delivery_state;
                    s.delivery_count = b.delivery_count;
                    s
                })
                .collect();
            let mut t = write_req::WriteStateData::default();
            t.topic_id = topic_id;
            t.partitions = vec![p];
            let mut req = WriteShareGroupStateRequest::default();
            req.group_id = group_id;
            req.topics = vec![t];
            let resp: WriteShareGroupStateResponse = conn
                .call(ApiKey::WriteShareGroupState, 0, &req)
                .await
                .map_err(io)?;
            let r = resp.results.into_iter().flat_map(|t| t.partitions).next();
            code(r.map_or(ErrorCode::UnknownServerError.code(), |r| r.error_code))?;
            Ok(Answer::Done)
        }
        Call::Initialize {
            state_epoch,
            start_offset,
        } => {
            let mut p = init_req::PartitionData::default();
            p.partition = partition;
            p.state_epoch = *state_epoch;
            p.start_offset = *start_offset;
            let mut t = init_req::InitializeStateData::default();
            t.topic_id = topic_id;
            t.partitions = vec![p];
            let mut req = InitializeShareGroupStateRequest::default();
            req.group_id = group_id;
            req.topics = vec![t];
            let resp: InitializeShareGroupStateResponse = conn
                .call(ApiKey::InitializeShareGroupState, 0, &req)
                .await
                .map_err(io)?;
            let r = resp.results.into_iter().flat_map(|t| t.partitions).next();
            code(r.map_or(ErrorCode::UnknownServerError.code(), |r| r.error_code))?;
            Ok(Answer::Done)
        }
        Call::Delete => {
            let mut p = delete_req::PartitionData::default();
            p.partition = partition;
            let mut t = delete_req::DeleteStateData::default();
            t.topic_id = topic_id;
            t.partitions = vec![p];
            let mut req = DeleteShareGroupStateRequest::default();
            req.group_id = group_id;
            req.topics = vec![t];
            let resp: DeleteShareGroupStateResponse = conn
                .call(ApiKey::DeleteShareGroupState, 0, &req)
                .await
                .map_err(io)?;
            let r = resp.results.into_iter().flat_map(|t| t.partitions).next();
            code(r.map_or(ErrorCode::UnknownServerError.code(), |r| r.error_code))?;
            Ok(Answer::Done)
        }
    }
}
