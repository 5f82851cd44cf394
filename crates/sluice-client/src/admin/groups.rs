//! Consumer-group administration: list, describe, delete groups; read, reset and delete
//! their committed offsets (what `kafka-consumer-groups.sh` does).

use std::collections::BTreeMap;

use kafka_protocol::messages::offset_delete_request::{
    OffsetDeleteRequestPartition, OffsetDeleteRequestTopic,
};
use kafka_protocol::messages::{
    consumer_group_describe_response, share_group_describe_response,
    streams_group_describe_response,
};
use kafka_protocol::messages::{
    ApiKey, ConsumerGroupDescribeRequest, ConsumerGroupDescribeResponse, DeleteGroupsRequest,
    DeleteGroupsResponse, DescribeGroupsRequest, DescribeGroupsResponse, ListGroupsRequest,
    ListGroupsResponse, OffsetDeleteRequest, OffsetDeleteResponse, ShareGroupDescribeRequest,
    ShareGroupDescribeResponse, StreamsGroupDescribeRequest, StreamsGroupDescribeResponse,
};
use sluice_protocol::types::TopicPartition;
use sluice_protocol::ErrorCode;

use super::{name, s, Admin};
use crate::error::{check, Error, Result};
use crate::group::coordinator::{
    self, group_id, with_coordinator, CommitIdentity, CommittedOffset, OffsetAndMetadata,
};
use crate::group::protocol::{decode_assignment, PROTOCOL_TYPE};

/// A group as ListGroups reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupListing {
    pub group_id: String,
    /// `consumer` for consumer groups (empty for a group that only has offsets).
    pub protocol_type: String,
    /// `Empty`, `PreparingRebalance`, `CompletingRebalance`, `Stable` or `Dead`.
    pub state: String,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupMemberDescription {
    pub member_id: String,
    pub instance_id: Option<String>,
    pub client_id: String,
    pub host: String,
    /// The member's partitions (decoded when the group is a consumer group).
    pub assignment: Vec<TopicPartition>,
    /// Consumer groups (KIP-848): the member's epoch, the partitions the group's target
    /// assignment gives it, and whether it still speaks the classic protocol.
    pub member_epoch: Option<i32>,
    pub target_assignment: Option<Vec<TopicPartition>>,
    pub classic: bool,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupDescription {
    pub group_id: String,
    pub state: String,
    pub protocol_type: String,
    /// The assignor the group chose.
    pub protocol: String,
    pub members: Vec<GroupMemberDescription>,
    /// `classic`, `consumer` for a group of the consumer group protocol (KIP-848), or
    /// `streams` for a streams group (KIP-1071), whose members' partitions are those their
    /// active tasks read.
    pub group_type: String,
    /// Consumer groups: the group epoch and the epoch of its target assignment.
    pub group_epoch: Option<i32>,
    pub assignment_epoch: Option<i32>,
}

impl Admin {
    /// Every group on every broker, optionally only those in the given states (ListGroups
    /// goes to each broker: each lists the groups it coordinates).
    pub async fn list_groups(&self, states: &[&str]) -> Result<Vec<GroupListing>> {
        let cluster = self.core.refresh(&[]).await?;
        let mut brokers: Vec<i32> = cluster.brokers.keys().copied().collect();
        brokers.sort_unstable();
        let mut out = Vec::new();
        for node in brokers {
            let conn = self.core.connection_to_node(node).await?;
            let version = conn.version_for(ApiKey::ListGroups)?;
            if !states.is_empty() && version < 4 {
                return Err(Error::UnsupportedVersion(
                    "ListGroups with a state filter (v4+)".into(),
                ));
            }
            let req = ListGroupsRequest::default()
                .with_states_filter(states.iter().map(|st| s(st)).collect());
            let resp: ListGroupsResponse = conn.call_at(&req, version).await?;
            check(resp.error_code, None)?;
            out.extend(resp.groups.into_iter().map(|g| GroupListing {
                group_id: g.group_id.to_string(),
                protocol_type: g.protocol_type.to_string(),
                state: g.group_state.to_string(),
            }));
        }
        out.sort_by(|a, b| a.group_id.cmp(&b.group_id));
        Ok(out)
    }

    /// Describe groups (state, chosen assignor, members and their partitions). A group
    /// that does not exist is described as `Dead` with no members, as Kafka does. A
    /// consumer group (KIP-848) is described by ConsumerGroupDescribe, with its epochs and
    /// each member's target assignment; other groups by DescribeGroups (as Kafka's admin
    /// client: the first, then the second for a group that is not a consumer group).
    pub async fn describe_groups(&self, groups: &[&str]) -> Result<Vec<GroupDescription>> {
        let mut out = Vec::new();
        for g in groups {
            if let Some(d) = self.describe_consumer_group(g).await? {
                out.push(d);
                continue;
            }
            if let Some(d) = self.describe_streams_group(g).await? {
                out.push(d);
                continue;
            }
            if let Some(d) = self.describe_share_group(g).await? {
                out.push(d);
                continue;
            }
            let resp: DescribeGroupsResponse =
                with_coordinator(&self.core, g, None, |conn| async move {
                    let req = DescribeGroupsRequest::default().with_groups(vec![group_id(g)]);
                    let resp: DescribeGroupsResponse = conn.call(&req).await?;
                    // A coordinator error is retried elsewhere.
                    if let Some(d) = resp.groups.first() {
                        check(
                            d.error_code,
                            d.error_message.as_ref().map(|m| m.to_string()),
                        )?;
                    }
                    Ok(resp)
                })
                .await?;
            let d = resp.groups.into_iter().next().ok_or_else(|| {
                Error::Protocol(format!("DescribeGroups answered without group {g}"))
            })?;
            let consumer = d.protocol_type.as_str() == PROTOCOL_TYPE;
            out.push(GroupDescription {
                group_type: "classic".into(),
                group_epoch: None,
                assignment_epoch: None,
                group_id: d.group_id.to_string(),
                state: d.group_state.to_string(),
                protocol_type: d.protocol_type.to_string(),
                protocol: d.protocol_data.to_string(),
                members: d
                    .members
                    .into_iter()
                    .map(|m| GroupMemberDescription {
                        member_id: m.member_id.to_string(),
                        instance_id: m.group_instance_id.map(|i| i.to_string()),
                        client_id: m.client_id.to_string(),
                        host: m.client_host.to_string(),
                        assignment: if consumer {
                            decode_assignment(&m.member_assignment).unwrap_or_default()
                        } else {
                            Vec::new()
                        },
                        member_epoch: None,
                        target_assignment: None,
                        classic: true,
                    })
                    .collect(),
            });
        }
        Ok(out)
    }

    /// A consumer group (KIP-848) by ConsumerGroupDescribe; None when the group is not one
    /// (or the broker does not have the API).
    async fn describe_consumer_group(&self, g: &str) -> Result<Option<GroupDescription>> {
        let resp = with_coordinator(&self.core, g, None, |conn| async move {
            let Ok(version) = conn.version_for(ApiKey::ConsumerGroupDescribe) else {
                return Ok(None);
            };
            let req = ConsumerGroupDescribeRequest::default().with_group_ids(vec![group_id(g)]);
            let resp: ConsumerGroupDescribeResponse = conn.call_at(&req, version).await?;
            if let Some(d) = resp.groups.first() {
                if d.error_code == ErrorCode::GroupIdNotFound.code() {
                    return Ok(None);
                }
                check(
                    d.error_code,
                    d.error_message.as_ref().map(|m| m.to_string()),
                )?;
            }
            Ok(Some(resp))
        })
        .await?;
        let Some(d) = resp.and_then(|r| r.groups.into_iter().next()) else {
            return Ok(None);
        };
        let partitions = |a: &consumer_group_describe_response::Assignment| -> Vec<TopicPartition> {
            a.topic_partitions
                .iter()
                .flat_map(|t| {
                    t.partitions
                        .iter()
                        .map(|p| TopicPartition::new(t.topic_name.to_string(), *p))
                })
                .collect()
        };
        Ok(Some(GroupDescription {
            group_id: d.group_id.to_string(),
            state: d.group_state.to_string(),
            protocol_type: PROTOCOL_TYPE.to_string(),
            protocol: d.assignor_name.to_string(),
            group_type: "consumer".into(),
            group_epoch: Some(d.group_epoch),
            assignment_epoch: Some(d.assignment_epoch),
            members: d
                .members
                .iter()
                .map(|m| GroupMemberDescription {
                    member_id: m.member_id.to_string(),
                    instance_id: m.instance_id.as_ref().map(|i| i.to_string()),
                    client_id: m.client_id.to_string(),
                    host: m.client_host.to_string(),
                    assignment: partitions(&m.assignment),
                    member_epoch: Some(m.member_epoch),
                    target_assignment: Some(partitions(&m.target_assignment)),
                    classic: m.member_type == 0,
                })
                .collect(),
        }))
    }

    /// A streams group (KIP-1071) by StreamsGroupDescribe; None when the group is not one
    /// (or the broker does not have the API). A task (subtopology, partition) reads that
    /// partition of each of its subtopology's source and repartition source topics: those
    /// are the member's partitions here.
    async fn describe_streams_group(&self, g: &str) -> Result<Option<GroupDescription>> {
        let resp = with_coordinator(&self.core, g, None, |conn| async move {
            let Ok(version) = conn.version_for(ApiKey::StreamsGroupDescribe) else {
                return Ok(None);
            };
            let req = StreamsGroupDescribeRequest::default().with_group_ids(vec![group_id(g)]);
            let resp: StreamsGroupDescribeResponse = conn.call_at(&req, version).await?;
            if let Some(d) = resp.groups.first() {
                if d.error_code == ErrorCode::GroupIdNotFound.code() {
                    return Ok(None);
                }
                check(
                    d.error_code,
                    d.error_message.as_ref().map(|m| m.to_string()),
                )?;
            }
            Ok(Some(resp))
        })
        .await?;
        let Some(d) = resp.and_then(|r| r.groups.into_iter().next()) else {
            return Ok(None);
        };
        let mut inputs: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for sub in d
            .topology
            .iter()
            .flat_map(|t| t.subtopologies.iter().flatten())
        {
            let topics = sub
                .source_topics
                .iter()
                .map(|t| t.to_string())
                .chain(
                    sub.repartition_source_topics
                        .iter()
                        .map(|t| t.name.to_string()),
                )
                .collect();
            inputs.insert(sub.subtopology_id.to_string(), topics);
        }
        let partitions = |a: &streams_group_describe_response::Assignment| {
            let mut out: Vec<TopicPartition> = a
                .active_tasks
                .iter()
                .flat_map(|t| {
                    let topics = inputs.get(t.subtopology_id.as_str());
                    topics.into_iter().flatten().flat_map(|topic| {
                        t.partitions
                            .iter()
                            .map(move |p| TopicPartition::new(topic.clone(), *p))
                    })
                })
                .collect();
            out.sort();
            out
        };
        Ok(Some(GroupDescription {
            group_id: d.group_id.to_string(),
            state: d.group_state.to_string(),
            protocol_type: "streams".to_string(),
            protocol: d
                .assignor_name
                .as_ref()
                .map_or_else(String::new, |a| a.to_string()),
            group_type: "streams".into(),
            group_epoch: Some(d.group_epoch),
            assignment_epoch: Some(d.assignment_epoch),
            members: d
                .members
                .iter()
                .map(|m| GroupMemberDescription {
                    member_id: m.member_id.to_string(),
                    instance_id: m.instance_id.as_ref().map(|i| i.to_string()),
                    client_id: m.client_id.to_string(),
                    host: m.client_host.to_string(),
                    assignment: partitions(&m.assignment),
                    member_epoch: Some(m.member_epoch),
                    target_assignment: Some(partitions(&m.target_assignment)),
                    classic: m.is_classic,
                })
                .collect(),
        }))
    }

    /// A share group (KIP-932) by ShareGroupDescribe; None when the group is not one (or the
    /// broker does not have the API). Its members' partitions are those they fetch from
    /// (members of a share group may share a partition).
    pub async fn describe_share_group(&self, g: &str) -> Result<Option<GroupDescription>> {
        let resp = with_coordinator(&self.core, g, None, |conn| async move {
            let Ok(version) = conn.version_for(ApiKey::ShareGroupDescribe) else {
                return Ok(None);
            };
            let req = ShareGroupDescribeRequest::default().with_group_ids(vec![group_id(g)]);
            let resp: ShareGroupDescribeResponse = conn.call_at(&req, version).await?;
            if let Some(d) = resp.groups.first() {
                if d.error_code == ErrorCode::GroupIdNotFound.code()
                    || d.error_code == ErrorCode::UnsupportedVersion.code()
                {
                    return Ok(None);
                }
                check(
                    d.error_code,
                    d.error_message.as_ref().map(|m| m.to_string()),
                )?;
            }
            Ok(Some(resp))
        })
        .await?;
        let Some(d) = resp.and_then(|r| r.groups.into_iter().next()) else {
            return Ok(None);
        };
        let partitions = |a: &share_group_describe_response::Assignment| {
            let mut out: Vec<TopicPartition> = a
                .topic_partitions
                .iter()
                .flat_map(|t| {
                    t.partitions
                        .iter()
                        .map(|p| TopicPartition::new(t.topic_name.to_string(), *p))
                })
                .collect();
            out.sort();
            out
        };
        Ok(Some(GroupDescription {
            group_id: d.group_id.to_string(),
            state: d.group_state.to_string(),
            protocol_type: "share".to_string(),
            protocol: d.assignor_name.to_string(),
            group_type: "share".into(),
            group_epoch: Some(d.group_epoch),
            assignment_epoch: Some(d.assignment_epoch),
            members: d
                .members
                .iter()
                .map(|m| GroupMemberDescription {
                    member_id: m.member_id.to_string(),
                    instance_id: None,
                    client_id: m.client_id.to_string(),
                    host: m.client_host.to_string(),
                    assignment: partitions(&m.assignment),
                    member_epoch: Some(m.member_epoch),
                    target_assignment: None,
                    classic: false,
                })
                .collect(),
        }))
    }

    /// Delete groups (each must have no members: GROUP_NOT_EMPTY otherwise) and their
    /// committed offsets.
    pub async fn delete_groups(&self, groups: &[&str]) -> Result<Vec<(String, Result<()>)>> {
        let mut out = Vec::new();
        for g in groups {
            let result = with_coordinator(&self.core, g, None, |conn| async move {
                let req = DeleteGroupsRequest::default().with_groups_names(vec![group_id(g)]);
                let resp: DeleteGroupsResponse = conn.call(&req).await?;
                let r = resp.results.into_iter().next().ok_or_else(|| {
                    Error::Protocol(format!("DeleteGroups answered without group {g}"))
                })?;
                check(r.error_code, Some(format!("group {g}")))
            })
            .await;
            out.push((g.to_string(), result));
        }
        Ok(out)
    }

    /// The group's committed offsets (all of them when `partitions` is None); None where
    /// nothing is committed.
    pub async fn list_group_offsets(
        &self,
        group: &str,
        partitions: Option<&[TopicPartition]>,
    ) -> Result<Vec<(TopicPartition, Option<CommittedOffset>)>> {
        let rows = with_coordinator(&self.core, group, None, |conn| async move {
            coordinator::fetch(&conn, group, partitions, false).await
        })
        .await?;
        rows.into_iter()
            .map(|(tp, r)| r.map(|c| (tp, (c.offset >= 0).then_some(c))))
            .collect()
    }

    /// Commit offsets for a group from outside it (generation -1): the coordinator accepts
    /// this only while the group has no members.
    pub async fn alter_group_offsets(
        &self,
        group: &str,
        offsets: &[(TopicPartition, i64)],
    ) -> Result<Vec<(TopicPartition, Result<()>)>> {
        let offsets: Vec<(TopicPartition, OffsetAndMetadata)> = offsets
            .iter()
            .map(|(tp, o)| (tp.clone(), OffsetAndMetadata::from(*o)))
            .collect();
        let who = CommitIdentity::standalone();
        with_coordinator(&self.core, group, None, |conn| {
            let (who, offsets) = (&who, &offsets);
            async move { coordinator::commit(&conn, group, who, offsets).await }
        })
        .await
    }

    /// Delete a group's committed offsets for these partitions (OffsetDelete; refused with
    /// GROUP_SUBSCRIBED_TO_TOPIC for topics the group's members consume).
    pub async fn delete_group_offsets(
        &self,
        group: &str,
        partitions: &[TopicPartition],
    ) -> Result<Vec<(TopicPartition, Result<()>)>> {
        let mut by_topic: BTreeMap<&str, Vec<i32>> = BTreeMap::new();
        for tp in partitions {
            by_topic.entry(&tp.topic).or_default().push(tp.partition.0);
        }
        let req = OffsetDeleteRequest::default()
            .with_group_id(group_id(group))
            .with_topics(
                by_topic
                    .into_iter()
                    .map(|(t, ps)| {
                        OffsetDeleteRequestTopic::default()
                            .with_name(name(t))
                            .with_partitions(
                                ps.into_iter()
                                    .map(|p| {
                                        OffsetDeleteRequestPartition::default()
                                            .with_partition_index(p)
                                    })
                                    .collect(),
                            )
                    })
                    .collect(),
            );
        let resp: OffsetDeleteResponse = with_coordinator(&self.core, group, None, |conn| {
            let req = &req;
            async move {
                let resp: OffsetDeleteResponse = conn.call(req).await?;
                check(resp.error_code, Some(format!("group {group}")))?;
                Ok(resp)
            }
        })
        .await?;
        let mut out = Vec::new();
        for t in resp.topics {
            for p in t.partitions {
                let tp = TopicPartition::new(t.name.to_string(), p.partition_index);
                let r = check(p.error_code, Some(tp.to_string()));
                out.push((tp, r));
            }
        }
        Ok(out)
    }
}
