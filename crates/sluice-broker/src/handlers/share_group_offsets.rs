//! A share group's offsets (KIP-932), at its group coordinator: DescribeShareGroupOffsets
//! (key 90; each share partition's start offset, as the Java admin's `listShareGroupOffsets`
//! and `kafka-share-groups.sh --describe` show it), AlterShareGroupOffsets (key 91, `--reset-
//! offsets`) and DeleteShareGroupOffsets (key 92, `--delete-offsets`). The start offsets live
//! with the share coordinators, reached through the [`Persister`].
//!
//! Altering restarts a share partition's state at the new offset with a higher state epoch,
//! which fences the partition leader's cached state (its next write is refused and it loads
//! again). Both alter and delete need the group empty, as in Kafka.
//!
//! [`Persister`]: crate::share::persister::Persister

use kafka_protocol::protocol::StrBytes;
use sluice_protocol::ErrorCode;

use crate::authorizer::Access;
use crate::group::coordinator::GroupCoordinator;
use crate::group::share_group::ShareGroup;
use crate::request::{str_bytes, RequestContext};

fn message(code: ErrorCode) -> Option<StrBytes> {
    Some(str_bytes(format!("{code:?}")))
}

/// The share group `group` (None: no share group of that id), or why it cannot be asked.
async fn share_group(
    groups: &GroupCoordinator,
    access: &Access,
    ctx: &RequestContext,
    group: &str,
    operation: i8,
) -> Result<Option<ShareGroup>, (ErrorCode, String)> {
    if !access.check(ctx).group(operation, group) {
        return Err((ErrorCode::GroupAuthorizationFailed, String::new()));
    }
    match groups.share_describe(vec![group.to_string()]).await.pop() {
        Some(Ok(g)) => Ok(Some(g)),
        Some(Err((ErrorCode::GroupIdNotFound, _))) => Ok(None),
        Some(Err(e)) => Err(e),
        None => Err((ErrorCode::CoordinatorNotAvailable, String::new())),
    }
}

pub mod describe {
    use bytes::Bytes;
    use kafka_protocol::messages::describe_share_group_offsets_response::{
        DescribeShareGroupOffsetsResponseGroup, DescribeShareGroupOffsetsResponsePartition,
        DescribeShareGroupOffsetsResponseTopic,
    };
    use kafka_protocol::messages::{
        ApiKey, DescribeShareGroupOffsetsRequest, DescribeShareGroupOffsetsResponse, TopicName,
    };
    use sluice_metadata::acl::op;
    use sluice_protocol::ErrorCode;

    use super::{message, share_group};
    use crate::request::{str_bytes, HandlerError, RequestContext, Response};

    handler!(
        ApiKey::DescribeShareGroupOffsets,
        0,
        0,
        DescribeShareGroupOffsets {
            access: crate::authorizer::Access,
            metadata: crate::metadata_cache::MetadataCache,
            groups: crate::group::coordinator::GroupCoordinator,
            persister: crate::share::persister::Persister
        }
    );

    async fn handle(
        h: &DescribeShareGroupOffsets,
        ctx: &RequestContext,
        body: Bytes,
    ) -> Result<Response, HandlerError> {
        let req: DescribeShareGroupOffsetsRequest = ctx.decode(body)?;
        let mut resp = DescribeShareGroupOffsetsResponse::default();
        let image = h.metadata.current();
        for g in req.groups {
            let group = g.group_id.to_string();
            let mut out = DescribeShareGroupOffsetsResponseGroup::default();
            out.group_id = g.group_id.clone();
            let found = share_group(&h.groups, &h.access, ctx, &group, op::DESCRIBE).await;
            let described = match found {
                Err((code, _)) => {
                    out.error_code = code.code();
                    out.error_message = message(code);
                    resp.groups.push(out);
                    continue;
                }
                Ok(g) => g,
            };
            // Null topics: every topic the group has subscribed to.
            let asked: Vec<(String, Option<Vec<i32>>)> = match g.topics {
                Some(topics) => topics
                    .into_iter()
                    .map(|t| (t.topic_name.to_string(), Some(t.partitions)))
                    .collect(),
                None => described
                    .iter()
                    .flat_map(|d| d.state_topics().iter().cloned())
                    .map(|t| (t, None))
                    .collect(),
            };
            let acl = h.access.check(ctx);
            for (topic, partitions) in asked {
                let mut t = DescribeShareGroupOffsetsResponseTopic::default();
                t.topic_name = TopicName(str_bytes(topic.clone()));
                let known = image
                    .topic(&topic)
                    .filter(|_| acl.topic(op::DESCRIBE, &topic));
                let partitions: Vec<i32> = match (&partitions, known) {
                    (Some(ps), _) => ps.clone(),
                    (None, Some(ti)) => ti.partitions.keys().copied().collect(),
                    (None, None) => continue,
                };
                if let Some(ti) = known {
                    t.topic_id = ti.id;
                }
                for p in partitions {
                    let mut po = DescribeShareGroupOffsetsResponsePartition::default();
                    po.partition_index = p;
                    po.start_offset = -1;
                    po.leader_epoch = -1;
                    let r = match known {
                        None if !acl.topic(op::DESCRIBE, &topic) => {
                            Err(ErrorCode::TopicAuthorizationFailed)
                        }
                        None => Err(ErrorCode::UnknownTopicOrPartition),
                        Some(ti) if !ti.partitions.contains_key(&p) => {
                            Err(ErrorCode::UnknownTopicOrPartition)
                        }
                        Some(ti) => h.persister.summary(&group, ti.id, p).await,
                    };
                    match r {
                        Ok(Some(s)) => {
                            po.start_offset = s.start_offset;
                            po.leader_epoch = s.leader_epoch;
                        }
                        Ok(None) => {}
                        Err(code) => {
                            po.error_code = code.code();
                            po.error_message = message(code);
                        }
                    }
                    t.partitions.push(po);
                }
                out.topics.push(t);
            }
            resp.groups.push(out);
        }
        ctx.respond(&resp)
    }
}

pub mod alter {
    use bytes::Bytes;
    use kafka_protocol::messages::alter_share_group_offsets_response::{
        AlterShareGroupOffsetsResponsePartition, AlterShareGroupOffsetsResponseTopic,
    };
    use kafka_protocol::messages::{
        AlterShareGroupOffsetsRequest, AlterShareGroupOffsetsResponse, ApiKey,
    };
    use sluice_metadata::acl::op;
    use sluice_protocol::ErrorCode;

    use super::{message, share_group};
    use crate::request::{str_bytes, HandlerError, RequestContext, Response};

    handler!(
        ApiKey::AlterShareGroupOffsets,
        0,
        0,
        AlterShareGroupOffsets {
            access: crate::authorizer::Access,
            metadata: crate::metadata_cache::MetadataCache,
            groups: crate::group::coordinator::GroupCoordinator,
            persister: crate::share::persister::Persister
        }
    );

    async fn handle(
        h: &AlterShareGroupOffsets,
        ctx: &RequestContext,
        body: Bytes,
    ) -> Result<Response, HandlerError> {
        let req: AlterShareGroupOffsetsRequest = ctx.decode(body)?;
        let group = req.group_id.to_string();
        let mut resp = AlterShareGroupOffsetsResponse::default();
        match share_group(&h.groups, &h.access, ctx, &group, op::READ).await {
            Err((code, msg)) => {
                resp.error_code = code.code();
                resp.error_message = Some(str_bytes(msg));
                return ctx.respond(&resp);
            }
            Ok(Some(g)) if !g.members.is_empty() => {
                resp.error_code = ErrorCode::NonEmptyGroup.code();
                resp.error_message = Some(str_bytes(format!(
                    "The group {group} has active members: its offsets can be reset only while it is empty."
                )));
                return ctx.respond(&resp);
            }
            Ok(_) => {}
        }
        let image = h.metadata.current();
        let acl = h.access.check(ctx);
        for t in req.topics {
            let topic = t.topic_name.to_string();
            let mut out = AlterShareGroupOffsetsResponseTopic::default();
            out.topic_name = t.topic_name.clone();
            let known = image.topic(&topic).filter(|_| acl.topic(op::READ, &topic));
            if let Some(ti) = known {
                out.topic_id = ti.id;
            }
            for p in t.partitions {
                let mut po = AlterShareGroupOffsetsResponsePartition::default();
                po.partition_index = p.partition_index;
                let r = match known {
                    None if !acl.topic(op::READ, &topic) => {
                        Err(ErrorCode::TopicAuthorizationFailed)
                    }
                    None => Err(ErrorCode::UnknownTopicOrPartition),
                    Some(ti) if !ti.partitions.contains_key(&p.partition_index) => {
                        Err(ErrorCode::UnknownTopicOrPartition)
                    }
                    Some(_) if p.start_offset < 0 => Err(ErrorCode::InvalidRequest),
                    Some(ti) => {
                        let persister = &h.persister;
                        let current = persister.summary(&group, ti.id, p.partition_index).await;
                        match current {
                            Err(code) => Err(code),
                            Ok(state) => {
                                let epoch = state.map_or(0, |s| s.state_epoch + 1);
                                persister
                                    .initialize(
                                        &group,
                                        ti.id,
                                        p.partition_index,
                                        epoch,
                                        p.start_offset,
                                    )
                                    .await
                            }
                        }
                    }
                };
                if let Err(code) = r {
                    po.error_code = code.code();
                    po.error_message = message(code);
                }
                out.partitions.push(po);
            }
            resp.responses.push(out);
        }
        ctx.respond(&resp)
    }
}

pub mod delete {
    use bytes::Bytes;
    use kafka_protocol::messages::delete_share_group_offsets_response::DeleteShareGroupOffsetsResponseTopic;
    use kafka_protocol::messages::{
        ApiKey, DeleteShareGroupOffsetsRequest, DeleteShareGroupOffsetsResponse,
    };
    use sluice_metadata::acl::op;
    use sluice_protocol::ErrorCode;

    use super::{message, share_group};
    use crate::request::{str_bytes, HandlerError, RequestContext, Response};

    handler!(
        ApiKey::DeleteShareGroupOffsets,
        0,
        0,
        DeleteShareGroupOffsets {
            access: crate::authorizer::Access,
            metadata: crate::metadata_cache::MetadataCache,
            groups: crate::group::coordinator::GroupCoordinator,
            persister: crate::share::persister::Persister
        }
    );

    async fn handle(
        h: &DeleteShareGroupOffsets,
        ctx: &RequestContext,
        body: Bytes,
    ) -> Result<Response, HandlerError> {
        let req: DeleteShareGroupOffsetsRequest = ctx.decode(body)?;
        let group = req.group_id.to_string();
        let mut resp = DeleteShareGroupOffsetsResponse::default();
        match share_group(&h.groups, &h.access, ctx, &group, op::DELETE).await {
            Err((code, msg)) => {
                resp.error_code = code.code();
                resp.error_message = Some(str_bytes(msg));
                return ctx.respond(&resp);
            }
            Ok(None) => {
                resp.error_code = ErrorCode::GroupIdNotFound.code();
                resp.error_message = Some(str_bytes(format!("Group {group} not found.")));
                return ctx.respond(&resp);
            }
            Ok(Some(g)) if !g.members.is_empty() => {
                resp.error_code = ErrorCode::NonEmptyGroup.code();
                resp.error_message = Some(str_bytes(format!(
                    "The group {group} has active members: its offsets can be deleted only while it is empty."
                )));
                return ctx.respond(&resp);
            }
            Ok(Some(_)) => {}
        }
        let image = h.metadata.current();
        let acl = h.access.check(ctx);
        for t in req.topics {
            let topic = t.topic_name.to_string();
            let mut out = DeleteShareGroupOffsetsResponseTopic::default();
            out.topic_name = t.topic_name.clone();
            let r = match image.topic(&topic) {
                _ if !acl.topic(op::READ, &topic) => Err(ErrorCode::TopicAuthorizationFailed),
                None => Err(ErrorCode::UnknownTopicOrPartition),
                Some(ti) => {
                    out.topic_id = ti.id;
                    let mut r = Ok(());
                    for p in ti.partitions.keys() {
                        if let Err(code) = h.persister.delete(&group, ti.id, *p).await {
                            r = Err(code);
                            break;
                        }
                    }
                    r
                }
            };
            if let Err(code) = r {
                out.error_code = code.code();
                out.error_message = message(code);
            }
            resp.responses.push(out);
        }
        ctx.respond(&resp)
    }
}
