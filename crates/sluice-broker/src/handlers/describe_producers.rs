//! DescribeProducers (key 61): the idempotent and transactional producers a partition's
//! leader knows — id, epoch, last sequence, last timestamp, the coordinator epoch of its last
//! marker and where its open transaction starts — as `kafka-transactions.sh describe-producers`
//! and `sluice producers --describe` show them. Only the leader answers.

use bytes::Bytes;
use kafka_protocol::messages::describe_producers_response::{
    PartitionResponse, ProducerState, TopicResponse,
};
use kafka_protocol::messages::{
    ApiKey, DescribeProducersRequest, DescribeProducersResponse, ProducerId,
};
use sluice_metadata::acl::op;
use sluice_protocol::types::TopicPartition;
use sluice_protocol::ErrorCode;

use crate::request::{HandlerError, RequestContext, Response};

handler!(
    ApiKey::DescribeProducers,
    0,
    0,
    DescribeProducers {
        replicas: crate::replica::ReplicaManager,
        access: crate::authorizer::Access
    },
    sync
);

fn handle(
    h: &DescribeProducers,
    ctx: &RequestContext,
    body: Bytes,
) -> Result<Response, HandlerError> {
    let req: DescribeProducersRequest = ctx.decode(body)?;
    let acl = h.access.check(ctx);
    let mut resp = DescribeProducersResponse::default();
    for t in req.topics {
        let mut out = TopicResponse::default();
        out.name = t.name.clone();
        let allowed = acl.topic(op::READ, &t.name);
        for index in t.partition_indexes {
            let mut p = PartitionResponse::default();
            p.partition_index = index;
            let tp = TopicPartition::new(t.name.to_string(), index);
            if !allowed {
                p.error_code = ErrorCode::TopicAuthorizationFailed.code();
                out.partitions.push(p);
                continue;
            }
            match h.replicas.producers(&tp) {
                Ok(producers) => {
                    p.active_producers = producers
                        .into_iter()
                        .map(|(id, e)| {
                            let mut s = ProducerState::default();
                            s.producer_id = ProducerId(id);
                            s.producer_epoch = i32::from(e.epoch);
                            s.last_sequence = e.batches.back().map_or(-1, |b| b.last_seq);
                            s.last_timestamp = e.last_timestamp;
                            s.coordinator_epoch = e.coordinator_epoch;
                            s.current_txn_start_offset = e.txn_first_offset.unwrap_or(-1);
                            s
                        })
                        .collect();
                }
                Err(code) => p.error_code = code.code(),
            }
            out.partitions.push(p);
        }
        resp.topics.push(out);
    }
    ctx.respond(&resp)
}
