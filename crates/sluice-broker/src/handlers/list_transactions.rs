//! ListTransactions (key 66): the transactions this broker coordinates, filtered by state
//! names, producer ids, (v1) how long they have been running and (v2, KIP-1152) a regular
//! expression the whole transactional id matches. Admin clients ask every broker and merge.
//! Unknown state names are echoed back in `unknown_state_filters`; a pattern that does not
//! compile is INVALID_REGULAR_EXPRESSION, as Kafka answers.

use bytes::Bytes;
use kafka_protocol::messages::list_transactions_response::TransactionState;
use kafka_protocol::messages::{
    ApiKey, ListTransactionsRequest, ListTransactionsResponse, ProducerId, TransactionalId,
};
use sluice_metadata::acl::op;
use sluice_metadata::config::FullMatch;
use sluice_protocol::ErrorCode;

use crate::request::{str_bytes, HandlerError, RequestContext, Response};
use crate::txn::state::TxnState;

handler!(
    ApiKey::ListTransactions,
    0,
    2,
    ListTransactions {
        access: crate::authorizer::Access,
        txns: crate::txn::coordinator::TxnCoordinator
    }
);

async fn handle(
    h: &ListTransactions,
    ctx: &RequestContext,
    body: Bytes,
) -> Result<Response, HandlerError> {
    let req: ListTransactionsRequest = ctx.decode(body)?;
    let mut resp = ListTransactionsResponse::default();
    let mut states = Vec::new();
    for f in &req.state_filters {
        match TxnState::ALL.iter().find(|s| s.name() == f.as_str()) {
            Some(s) => states.push(*s),
            None => resp.unknown_state_filters.push(f.clone()),
        }
    }
    let pattern = match req.transactional_id_pattern.as_deref() {
        Some(p) if ctx.api_version >= 2 && !p.is_empty() => match FullMatch::new(p) {
            Ok(re) => Some(re),
            Err(_) => {
                resp.error_code = ErrorCode::InvalidRegularExpression.code();
                return ctx.respond(&resp);
            }
        },
        _ => None,
    };
    let now = crate::now_ms();
    // Only transactional ids this principal may DESCRIBE.
    let acl = h.access.check(ctx);
    for m in h.txns.list().await {
        if !acl.transactional_id(op::DESCRIBE, &m.transactional_id) {
            continue;
        }
        if pattern
            .as_ref()
            .is_some_and(|re| !re.is_match(&m.transactional_id))
        {
            continue;
        }
        if !states.is_empty() && !states.contains(&m.state) {
            continue;
        }
        if !req.producer_id_filters.is_empty()
            && !req.producer_id_filters.iter().any(|p| p.0 == m.producer_id)
        {
            continue;
        }
        // v1: only transactions running longer than the filter (open ones).
        if req.duration_filter >= 0
            && ctx.api_version >= 1
            && (m.state != TxnState::Ongoing || now - m.txn_start_ms < req.duration_filter)
        {
            continue;
        }
        let mut s = TransactionState::default();
        s.transactional_id = TransactionalId(str_bytes(m.transactional_id));
        s.producer_id = ProducerId(m.producer_id);
        s.transaction_state = str_bytes(m.state.name());
        resp.transaction_states.push(s);
    }
    resp.transaction_states
        .sort_by(|a, b| a.transactional_id.cmp(&b.transactional_id));
    ctx.respond(&resp)
}
