//! DeleteTopics (key 20): by name (v1-v5) or by name or topic id (v6+).

use bytes::Bytes;
use kafka_protocol::messages::delete_topics_response::DeletableTopicResult;
use kafka_protocol::messages::{ApiKey, DeleteTopicsRequest, DeleteTopicsResponse, TopicName};
use sluice_metadata::controller_types::TopicRef;
use sluice_metadata::Uuid;
use sluice_protocol::ErrorCode;

use crate::broker::Broker;
use crate::request::{str_bytes, HandlerError, RequestContext, Response};

handler!(ApiKey::DeleteTopics, 1, 6, handle);

async fn handle(
    broker: &Broker,
    ctx: &RequestContext,
    body: Bytes,
) -> Result<Response, HandlerError> {
    let req: DeleteTopicsRequest = ctx.decode(body)?;
    let targets: Vec<TopicRef> = if ctx.api_version >= 6 {
        req.topics
            .iter()
            .map(|t| match &t.name {
                Some(n) => TopicRef::Name(n.to_string()),
                None => TopicRef::Id(t.topic_id),
            })
            .collect()
    } else {
        req.topic_names
            .iter()
            .map(|n| TopicRef::Name(n.to_string()))
            .collect()
    };
    let call_targets = targets.clone();
    let outcomes = broker
        .call_controller(move |c| c.delete_topics(&call_targets))
        .await;
    let mut resp = DeleteTopicsResponse::default();
    for (i, target) in targets.iter().enumerate() {
        let mut r = DeletableTopicResult::default();
        match target {
            TopicRef::Name(n) => r.name = Some(TopicName(str_bytes(n.clone()))),
            TopicRef::Id(id) => r.topic_id = *id,
        }
        match outcomes.as_ref().map(|o| o.get(i)) {
            Ok(Some(Ok((name, id)))) => {
                r.name = Some(TopicName(str_bytes(name.clone())));
                r.topic_id = *id;
            }
            Ok(Some(Err(e))) => {
                r.error_code = e.code.code();
                r.error_message = Some(str_bytes(e.message.clone()));
                if r.topic_id != Uuid::nil() {
                    r.name = None;
                }
            }
            Ok(None) | Err(_) => r.error_code = ErrorCode::UnknownServerError.code(),
        }
        resp.responses.push(r);
    }
    ctx.respond(&resp)
}
