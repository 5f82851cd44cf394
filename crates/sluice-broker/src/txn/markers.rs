//! The transaction coordinator's marker writer: sends WriteTxnMarkers for one transaction to
//! the leader of each of its partitions (this broker included, over the same path), and
//! retries each partition until its leader has taken the marker, leadership of the
//! coordinator ends, or the partition is gone.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::messages::write_txn_markers_request::{
    WritableTxnMarker, WritableTxnMarkerTopic,
};
use kafka_protocol::messages::{
    ApiKey, ProducerId, TopicName, WriteTxnMarkersRequest, WriteTxnMarkersResponse,
};
use sluice_protocol::ErrorCode;
use tokio::sync::Mutex;
use tracing::{debug, warn};

use crate::broker_conn::{broker_address, BrokerConn, InterBroker};
use crate::metadata_cache::MetadataCache;
use crate::request::str_bytes;

const WRITE_TXN_MARKERS_VERSION: i16 = 1;
const MAX_BACKOFF: Duration = Duration::from_secs(1);

/// The markers of one transaction.
#[derive(Clone, Debug)]
pub struct MarkerJob {
    pub producer_id: i64,
    pub epoch: i16,
    pub commit: bool,
    pub coordinator_epoch: i32,
    pub partitions: Vec<(String, i32)>,
}

pub struct MarkerWriter {
    node_id: i32,
    metadata: Arc<MetadataCache>,
    inter: InterBroker,
    /// Idle connections by broker.
    idle: Mutex<HashMap<i32, Vec<BrokerConn>>>,
}

/// What a partition's answer means for its marker.
fn settled(code: Option<ErrorCode>, partition: &(String, i32)) -> bool {
    let Some(code) = code else {
        return true;
    };
    match code {
        // The partition has a newer producer epoch or coordinator than this marker: a later
        // marker superseded it. Nothing more to write there.
        ErrorCode::InvalidProducerEpoch
        | ErrorCode::ProducerFenced
        | ErrorCode::TransactionCoordinatorFenced
        | ErrorCode::UnsupportedForMessageFormat => {
            warn!(
                topic = partition.0,
                partition = partition.1,
                ?code,
                "marker not written"
            );
            true
        }
        _ => false,
    }
}

impl MarkerWriter {
    pub fn new(node_id: i32, metadata: Arc<MetadataCache>, inter: InterBroker) -> Arc<Self> {
        Arc::new(Self {
            node_id,
            metadata,
            inter,
            idle: Mutex::new(HashMap::new()),
        })
    }

    /// Write every marker of `job`. True when done; false when `cancelled` (this broker
    /// stopped coordinating the transaction) ended it first.
    pub async fn write(&self, job: MarkerJob, cancelled: &AtomicBool) -> bool {
        let mut pending: BTreeSet<(String, i32)> = job.partitions.iter().cloned().collect();
        let mut backoff = Duration::from_millis(20);
        let mut images = self.metadata.subscribe();
        loop {
            if cancelled.load(Ordering::SeqCst) {
                return false;
            }
            let image = self.metadata.current();
            let mut by_leader: BTreeMap<i32, Vec<(String, i32)>> = BTreeMap::new();
            pending.retain(|(topic, partition)| {
                match image.topic(topic).and_then(|t| t.partitions.get(partition)) {
                    // Deleted: no marker needed.
                    None => false,
                    Some(reg) => {
                        if reg.leader >= 0 {
                            by_leader
                                .entry(reg.leader)
                                .or_default()
                                .push((topic.clone(), *partition));
                        }
                        true
                    }
                }
            });
            for (leader, partitions) in by_leader {
                match self.send(leader, &job, &partitions).await {
                    Ok(results) => {
                        for (tp, code) in results {
                            if settled(code, &tp) {
                                pending.remove(&tp);
                            }
                        }
                    }
                    Err(e) => debug!(leader, error = %e, "WriteTxnMarkers failed; retrying"),
                }
            }
            if pending.is_empty() {
                return true;
            }
            // Most refusals end with a metadata change (a new leader, the ISR back): retry on
            // the next image, or after the backoff for those that do not (a slow ISR).
            let _ = tokio::time::timeout(backoff, images.changed()).await;
            backoff = (backoff * 2).min(MAX_BACKOFF);
        }
    }

    async fn send(
        &self,
        leader: i32,
        job: &MarkerJob,
        partitions: &[(String, i32)],
    ) -> std::io::Result<Vec<((String, i32), Option<ErrorCode>)>> {
        let pooled = self.idle.lock().await.get_mut(&leader).and_then(Vec::pop);
        let mut conn = match pooled {
            Some(c) => c,
            None => {
                let addr = broker_address(
                    &self.metadata.current(),
                    leader,
                    self.inter.listener.as_deref(),
                )
                .ok_or_else(|| std::io::Error::other(format!("broker {leader} unknown")))?;
                BrokerConn::connect(
                    &addr,
                    &format!("sluice-txn-markers-{}", self.node_id),
                    &self.inter,
                )
                .await?
            }
        };
        let mut marker = WritableTxnMarker::default();
        marker.producer_id = ProducerId(job.producer_id);
        marker.producer_epoch = job.epoch;
        marker.transaction_result = job.commit;
        marker.coordinator_epoch = job.coordinator_epoch;
        for (topic, ps) in crate::request::by_topic(
            partitions
                .iter()
                .map(|(t, p)| (t.clone(), *p, ()))
                .collect(),
        ) {
            let mut t = WritableTxnMarkerTopic::default();
            t.name = TopicName(str_bytes(topic));
            t.partition_indexes = ps.into_iter().map(|(p, ())| p).collect();
            marker.topics.push(t);
        }
        let mut req = WriteTxnMarkersRequest::default();
        req.markers.push(marker);
        let resp: WriteTxnMarkersResponse = tokio::time::timeout(
            Duration::from_secs(60),
            conn.call(ApiKey::WriteTxnMarkers, WRITE_TXN_MARKERS_VERSION, &req),
        )
        .await
        .map_err(|_| std::io::Error::other("WriteTxnMarkers timed out"))??;
        self.idle.lock().await.entry(leader).or_default().push(conn);
        let mut out = Vec::new();
        for m in resp.markers {
            for t in m.topics {
                for p in t.partitions {
                    out.push((
                        (t.name.to_string(), p.partition_index),
                        ErrorCode::try_from_code(p.error_code),
                    ));
                }
            }
        }
        Ok(out)
    }
}
