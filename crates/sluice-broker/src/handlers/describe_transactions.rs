//! DescribeTransactions (key 65): the coordinator's view of transactional ids it owns
//! (state, producer id/epoch, timeout, start time, partitions), as
//! `kafka-transactions.sh describe` and `sluice transactions --describe` show it. Ids this
//! broker does not coordinate get NOT_COORDINATOR; unknown ids TRANSACTIONAL_ID_NOT_FOUND.

use bytes::Bytes;
use kafka_protocol::messages::describe_transactions_response::{TopicData, TransactionState};
use kafka_protocol::messages::{
    ApiKey, DescribeTransactionsRequest, DescribeTransactionsResponse, ProducerId, TopicName,
};
use sluice_metadata::acl::op;
use sluice_protocol::ErrorCode;

use crate::request::{str_bytes, HandlerError, RequestContext, Response};

handler!(
    ApiKey::DescribeTransactions,
    0,
    0,
    DescribeTransactions {
        access: crate::authorizer::Access,
        txns: crate::txn::coordinator::TxnCoordinator
    }
);

async fn handle(
    h: &DescribeTransactions,
    ctx: &RequestContext,
    body: Bytes,
) -> Result<Response, HandlerError> {
    let req: DescribeTransactionsRequest = ctx.decode(body)?;
    let ids: Vec<String> = req
        .transactional_ids
        .iter()
        .map(|i| i.to_string())
        .collect();
    let results = h.txns.describe(ids).await;
    let acl = h.access.check(ctx);
    let mut resp = DescribeTransactionsResponse::default();
    for (id, result) in req.transactional_ids.into_iter().zip(results) {
        let mut s = TransactionState::default();
        let allowed = acl.transactional_id(op::DESCRIBE, &id);
        s.transactional_id = id;
        s.producer_id = ProducerId(-1);
        s.producer_epoch = -1;
        s.transaction_start_time_ms = -1;
        let result = if allowed {
            result
        } else {
            Err(ErrorCode::TransactionalIdAuthorizationFailed)
        };
        match result {
            Ok(m) => {
                s.transaction_state = str_bytes(m.state.name());
                s.transaction_timeout_ms = m.timeout_ms.clamp(0, i64::from(i32::MAX)) as i32;
                s.transaction_start_time_ms = m.txn_start_ms;
                s.producer_id = ProducerId(m.producer_id);
                s.producer_epoch = m.producer_epoch;
                for (topic, partitions) in crate::request::by_topic(
                    m.partitions.into_iter().map(|(t, p)| (t, p, ())).collect(),
                ) {
                    let mut t = TopicData::default();
                    t.topic = TopicName(str_bytes(topic));
                    t.partitions = partitions.into_iter().map(|(p, ())| p).collect();
                    s.topics.push(t);
                }
            }
            Err(code) => s.error_code = code.code(),
        }
        resp.transaction_states.push(s);
    }
    ctx.respond(&resp)
}
