//! Share-group offsets (KIP-932), at the group's coordinator: each share partition's start
//! offset (DescribeShareGroupOffsets), reset (AlterShareGroupOffsets) and delete
//! (DeleteShareGroupOffsets), as `kafka-share-groups.sh` does them.

use kafka_protocol::messages::alter_share_group_offsets_request::{
    AlterShareGroupOffsetsRequestPartition, AlterShareGroupOffsetsRequestTopic,
};
use kafka_protocol::messages::delete_share_group_offsets_request::DeleteShareGroupOffsetsRequestTopic;
use kafka_protocol::messages::describe_share_group_offsets_request::{
    DescribeShareGroupOffsetsRequestGroup, DescribeShareGroupOffsetsRequestTopic,
};
use kafka_protocol::messages::{
    AlterShareGroupOffsetsRequest, AlterShareGroupOffsetsResponse, DeleteShareGroupOffsetsRequest,
    DeleteShareGroupOffsetsResponse, DescribeShareGroupOffsetsRequest,
    DescribeShareGroupOffsetsResponse,
};
use sluice_protocol::types::TopicPartition;

use super::{name, Admin};
use crate::error::{check, Result};
use crate::group::coordinator::{group_id, with_coordinator};

/// Per partition: its result.
pub type PartitionResults = Vec<(TopicPartition, Result<()>)>;

impl Admin {
    /// A share group's start offset on each partition (`topics` None: every topic the group
    /// has read); None where the group has no state on a partition yet.
    pub async fn list_share_group_offsets(
        &self,
        group: &str,
        topics: Option<&[(String, Vec<i32>)]>,
    ) -> Result<Vec<(TopicPartition, Option<i64>)>> {
        let resp: DescribeShareGroupOffsetsResponse =
            with_coordinator(&self.core, group, None, |conn| async move {
                let mut g = DescribeShareGroupOffsetsRequestGroup::default();
                g.group_id = group_id(group);
                g.topics = topics.map(|ts| {
                    ts.iter()
                        .map(|(t, ps)| {
                            let mut rt = DescribeShareGroupOffsetsRequestTopic::default();
                            rt.topic_name = name(t);
                            rt.partitions = ps.clone();
                            rt
                        })
                        .collect()
                });
                let req = DescribeShareGroupOffsetsRequest::default().with_groups(vec![g]);
                let resp: DescribeShareGroupOffsetsResponse = conn.call(&req).await?;
                if let Some(g) = resp.groups.first() {
                    check(
                        g.error_code,
                        g.error_message.as_ref().map(|m| m.to_string()),
                    )?;
                }
                Ok(resp)
            })
            .await?;
        let mut out = Vec::new();
        for g in resp.groups {
            for t in g.topics {
                for p in t.partitions {
                    let tp = TopicPartition::new(t.topic_name.to_string(), p.partition_index);
                    check(
                        p.error_code,
                        Some(format!("{}-{}", t.topic_name.as_str(), p.partition_index)),
                    )?;
                    out.push((tp, (p.start_offset >= 0).then_some(p.start_offset)));
                }
            }
        }
        out.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(out)
    }

    /// Set a share group's start offsets (the group must have no members).
    pub async fn alter_share_group_offsets(
        &self,
        group: &str,
        offsets: &[(TopicPartition, i64)],
    ) -> Result<PartitionResults> {
        let resp: AlterShareGroupOffsetsResponse =
            with_coordinator(&self.core, group, None, |conn| async move {
                let mut topics: Vec<AlterShareGroupOffsetsRequestTopic> = Vec::new();
                for (tp, offset) in offsets {
                    let mut p = AlterShareGroupOffsetsRequestPartition::default();
                    p.partition_index = tp.partition.0;
                    p.start_offset = *offset;
                    match topics
                        .iter_mut()
                        .find(|t| t.topic_name.as_str() == tp.topic.as_str())
                    {
                        Some(t) => t.partitions.push(p),
                        None => {
                            let mut t = AlterShareGroupOffsetsRequestTopic::default();
                            t.topic_name = name(&tp.topic);
                            t.partitions.push(p);
                            topics.push(t);
                        }
                    }
                }
                let mut req = AlterShareGroupOffsetsRequest::default();
                req.group_id = group_id(group);
                req.topics = topics;
                let resp: AlterShareGroupOffsetsResponse = conn.call(&req).await?;
                check(
                    resp.error_code,
                    resp.error_message.as_ref().map(|m| m.to_string()),
                )?;
                Ok(resp)
            })
            .await?;
        Ok(resp
            .responses
            .into_iter()
            .flat_map(|t| {
                let topic = t.topic_name.to_string();
                t.partitions.into_iter().map(move |p| {
                    let tp = TopicPartition::new(topic.clone(), p.partition_index);
                    let r = check(p.error_code, p.error_message.map(|m| m.to_string()));
                    (tp, r)
                })
            })
            .collect())
    }

    /// Forget a share group's state on `topics` (the group must have no members).
    pub async fn delete_share_group_offsets(
        &self,
        group: &str,
        topics: &[&str],
    ) -> Result<Vec<(String, Result<()>)>> {
        let resp: DeleteShareGroupOffsetsResponse =
            with_coordinator(&self.core, group, None, |conn| async move {
                let mut req = DeleteShareGroupOffsetsRequest::default();
                req.group_id = group_id(group);
                req.topics = topics
                    .iter()
                    .map(|t| {
                        let mut rt = DeleteShareGroupOffsetsRequestTopic::default();
                        rt.topic_name = name(t);
                        rt
                    })
                    .collect();
                let resp: DeleteShareGroupOffsetsResponse = conn.call(&req).await?;
                check(
                    resp.error_code,
                    resp.error_message.as_ref().map(|m| m.to_string()),
                )?;
                Ok(resp)
            })
            .await?;
        Ok(resp
            .responses
            .into_iter()
            .map(|t| {
                let r = check(t.error_code, t.error_message.map(|m| m.to_string()));
                (t.topic_name.to_string(), r)
            })
            .collect())
    }
}
