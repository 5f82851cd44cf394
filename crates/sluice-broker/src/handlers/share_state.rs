//! The share-state APIs (keys 83-87, KIP-932), from share-partition leaders and group
//! coordinators to the share coordinator of a share partition (the leader of its
//! `__share_group_state` partition): Initialize, Read, Write, Delete and
//! ReadSummaryShareGroupState. Brokers only: CLUSTER_ACTION on the cluster. A share
//! partition with no state reads as start offset -1 (Kafka's "uninitialized").

use kafka_protocol::protocol::StrBytes;
use sluice_metadata::acl::op;
use sluice_protocol::ErrorCode;

use crate::request::{str_bytes, RequestContext};

/// (error code, message) of a partition's result.
fn outcome(r: Result<(), ErrorCode>) -> (i16, Option<StrBytes>) {
    match r {
        Ok(()) => (0, None),
        Err(code) => (code.code(), Some(str_bytes(format!("{code:?}")))),
    }
}

fn allowed(access: &crate::authorizer::Access, ctx: &RequestContext) -> Result<(), ErrorCode> {
    if access.check(ctx).cluster(op::CLUSTER_ACTION) {
        Ok(())
    } else {
        Err(ErrorCode::ClusterAuthorizationFailed)
    }
}

pub mod initialize {
    use bytes::Bytes;
    use kafka_protocol::messages::initialize_share_group_state_response::{
        InitializeStateResult, PartitionResult,
    };
    use kafka_protocol::messages::{
        ApiKey, InitializeShareGroupStateRequest, InitializeShareGroupStateResponse,
    };

    use super::{allowed, outcome};
    use crate::request::{HandlerError, RequestContext, Response};

    handler!(
        ApiKey::InitializeShareGroupState,
        0,
        0,
        InitializeShareGroupState {
            access: crate::authorizer::Access,
            share_state: crate::share::coordinator::ShareCoordinator
        }
    );

    async fn handle(
        h: &InitializeShareGroupState,
        ctx: &RequestContext,
        body: Bytes,
    ) -> Result<Response, HandlerError> {
        let req: InitializeShareGroupStateRequest = ctx.decode(body)?;
        let group = req.group_id.to_string();
        let ok = allowed(&h.access, ctx);
        let mut resp = InitializeShareGroupStateResponse::default();
        for t in req.topics {
            let mut tr = InitializeStateResult::default();
            tr.topic_id = t.topic_id;
            for p in t.partitions {
                let r = match ok {
                    Err(code) => Err(code),
                    Ok(()) => {
                        h.share_state
                            .initialize(
                                &group,
                                t.topic_id,
                                p.partition,
                                p.state_epoch,
                                p.start_offset,
                            )
                            .await
                    }
                };
                let mut pr = PartitionResult::default();
                pr.partition = p.partition;
                (pr.error_code, pr.error_message) = outcome(r);
                tr.partitions.push(pr);
            }
            resp.results.push(tr);
        }
        ctx.respond(&resp)
    }
}

pub mod read {
    use bytes::Bytes;
    use kafka_protocol::messages::read_share_group_state_response::{
        PartitionResult, ReadStateResult, StateBatch,
    };
    use kafka_protocol::messages::{
        ApiKey, ReadShareGroupStateRequest, ReadShareGroupStateResponse,
    };

    use super::{allowed, outcome};
    use crate::request::{HandlerError, RequestContext, Response};

    handler!(
        ApiKey::ReadShareGroupState,
        0,
        0,
        ReadShareGroupState {
            access: crate::authorizer::Access,
            share_state: crate::share::coordinator::ShareCoordinator
        }
    );

    async fn handle(
        h: &ReadShareGroupState,
        ctx: &RequestContext,
        body: Bytes,
    ) -> Result<Response, HandlerError> {
        let req: ReadShareGroupStateRequest = ctx.decode(body)?;
        let group = req.group_id.to_string();
        let ok = allowed(&h.access, ctx);
        let mut resp = ReadShareGroupStateResponse::default();
        for t in req.topics {
            let mut tr = ReadStateResult::default();
            tr.topic_id = t.topic_id;
            for p in t.partitions {
                let mut pr = PartitionResult::default();
                pr.partition = p.partition;
                pr.start_offset = -1;
                let r = match ok {
                    Err(code) => Err(code),
                    Ok(()) => {
                        h.share_state
                            .read(&group, t.topic_id, p.partition, p.leader_epoch)
                            .await
                    }
                };
                let r = r.map(|state| {
                    if let Some(s) = state {
                        pr.state_epoch = s.state_epoch;
                        pr.start_offset = s.start_offset;
                        pr.state_batches = s
                            .batches
                            .iter()
                            .map(|b| {
                                let mut sb = StateBatch::default();
                                sb.first_offset = b.first_offset;
                                sb.last_offset = b.last_offset;
                                sb.delivery_state = b.delivery_state;
                                sb.delivery_count = b.delivery_count;
                                sb
                            })
                            .collect();
                    }
                });
                (pr.error_code, pr.error_message) = outcome(r);
                tr.partitions.push(pr);
            }
            resp.results.push(tr);
        }
        ctx.respond(&resp)
    }
}

pub mod write {
    use bytes::Bytes;
    use kafka_protocol::messages::write_share_group_state_response::{
        PartitionResult, WriteStateResult,
    };
    use kafka_protocol::messages::{
        ApiKey, WriteShareGroupStateRequest, WriteShareGroupStateResponse,
    };

    use super::{allowed, outcome};
    use crate::request::{HandlerError, RequestContext, Response};
    use crate::share::coordinator::StateWrite;
    use crate::share::state_records::PersistedBatch;

    handler!(
        ApiKey::WriteShareGroupState,
        0,
        0,
        WriteShareGroupState {
            access: crate::authorizer::Access,
            share_state: crate::share::coordinator::ShareCoordinator
        }
    );

    async fn handle(
        h: &WriteShareGroupState,
        ctx: &RequestContext,
        body: Bytes,
    ) -> Result<Response, HandlerError> {
        let req: WriteShareGroupStateRequest = ctx.decode(body)?;
        let group = req.group_id.to_string();
        let ok = allowed(&h.access, ctx);
        let mut resp = WriteShareGroupStateResponse::default();
        for t in req.topics {
            let mut tr = WriteStateResult::default();
            tr.topic_id = t.topic_id;
            for p in t.partitions {
                let w = StateWrite {
                    state_epoch: p.state_epoch,
                    leader_epoch: p.leader_epoch,
                    start_offset: p.start_offset,
                    batches: p
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
                };
                let r = match ok {
                    Err(code) => Err(code),
                    Ok(()) => {
                        h.share_state
                            .write(&group, t.topic_id, p.partition, w)
                            .await
                    }
                };
                let mut pr = PartitionResult::default();
                pr.partition = p.partition;
                (pr.error_code, pr.error_message) = outcome(r);
                tr.partitions.push(pr);
            }
            resp.results.push(tr);
        }
        ctx.respond(&resp)
    }
}

pub mod delete {
    use bytes::Bytes;
    use kafka_protocol::messages::delete_share_group_state_response::{
        DeleteStateResult, PartitionResult,
    };
    use kafka_protocol::messages::{
        ApiKey, DeleteShareGroupStateRequest, DeleteShareGroupStateResponse,
    };

    use super::{allowed, outcome};
    use crate::request::{HandlerError, RequestContext, Response};

    handler!(
        ApiKey::DeleteShareGroupState,
        0,
        0,
        DeleteShareGroupState {
            access: crate::authorizer::Access,
            share_state: crate::share::coordinator::ShareCoordinator
        }
    );

    async fn handle(
        h: &DeleteShareGroupState,
        ctx: &RequestContext,
        body: Bytes,
    ) -> Result<Response, HandlerError> {
        let req: DeleteShareGroupStateRequest = ctx.decode(body)?;
        let group = req.group_id.to_string();
        let ok = allowed(&h.access, ctx);
        let mut resp = DeleteShareGroupStateResponse::default();
        for t in req.topics {
            let mut tr = DeleteStateResult::default();
            tr.topic_id = t.topic_id;
            for p in t.partitions {
                let r = match ok {
                    Err(code) => Err(code),
                    Ok(()) => h.share_state.delete(&group, t.topic_id, p.partition).await,
                };
                let mut pr = PartitionResult::default();
                pr.partition = p.partition;
                (pr.error_code, pr.error_message) = outcome(r);
                tr.partitions.push(pr);
            }
            resp.results.push(tr);
        }
        ctx.respond(&resp)
    }
}

pub mod summary {
    use bytes::Bytes;
    use kafka_protocol::messages::read_share_group_state_summary_response::{
        PartitionResult, ReadStateSummaryResult,
    };
    use kafka_protocol::messages::{
        ApiKey, ReadShareGroupStateSummaryRequest, ReadShareGroupStateSummaryResponse,
    };

    use super::{allowed, outcome};
    use crate::request::{HandlerError, RequestContext, Response};

    handler!(
        ApiKey::ReadShareGroupStateSummary,
        0,
        0,
        ReadShareGroupStateSummary {
            access: crate::authorizer::Access,
            share_state: crate::share::coordinator::ShareCoordinator
        }
    );

    async fn handle(
        h: &ReadShareGroupStateSummary,
        ctx: &RequestContext,
        body: Bytes,
    ) -> Result<Response, HandlerError> {
        let req: ReadShareGroupStateSummaryRequest = ctx.decode(body)?;
        let group = req.group_id.to_string();
        let ok = allowed(&h.access, ctx);
        let mut resp = ReadShareGroupStateSummaryResponse::default();
        for t in req.topics {
            let mut tr = ReadStateSummaryResult::default();
            tr.topic_id = t.topic_id;
            for p in t.partitions {
                let mut pr = PartitionResult::default();
                pr.partition = p.partition;
                pr.start_offset = -1;
                pr.leader_epoch = -1;
                let r = match ok {
                    Err(code) => Err(code),
                    Ok(()) => h.share_state.summary(&group, t.topic_id, p.partition).await,
                };
                let r = r.map(|state| {
                    if let Some(s) = state {
                        pr.state_epoch = s.state_epoch;
                        pr.leader_epoch = s.leader_epoch;
                        pr.start_offset = s.start_offset;
                    }
                });
                (pr.error_code, pr.error_message) = outcome(r);
                tr.partitions.push(pr);
            }
            resp.results.push(tr);
        }
        ctx.respond(&resp)
    }
}
