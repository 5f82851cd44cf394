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

use crate::broker::Broker;
use crate::request::{HandlerError, RequestContext, Response};

handler!(ApiKey::DescribeProducers, 0, 0, sync handle);

fn handle(broker: &Broker, ctx: &RequestContext, body: Bytes) -> Result<Response, HandlerError> {
    let req: DescribeProducersRequest = ctx.decode(body)?;
    let image = broker.metadata.current();
    let acl = broker.acl(ctx);
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
            match broker.replicas.get(&tp).filter(|p| p.is_leader()) {
                Some(partition) => {
                    let mut producers: Vec<ProducerState> = partition
                        .producers()
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
                    producers.sort_by_key(|s| s.producer_id.0);
                    p.active_producers = producers;
                }
                None => {
                    let known = image
                        .topic(&t.name)
                        .is_some_and(|topic| topic.partitions.contains_key(&index));
                    p.error_code = if known {
                        ErrorCode::NotLeaderOrFollower
                    } else {
                        ErrorCode::UnknownTopicOrPartition
                    }
                    .code();
                }
            }
            out.partitions.push(p);
        }
        resp.topics.push(out);
    }
    ctx.respond(&resp)
}
