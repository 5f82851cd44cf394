//! DescribeLogDirs: what each broker holds on disk, partition by partition (what
//! `kafka-log-dirs.sh --describe` shows).

use std::collections::BTreeMap;

use kafka_protocol::messages::describe_log_dirs_request::DescribableLogDirTopic;
use kafka_protocol::messages::{DescribeLogDirsRequest, DescribeLogDirsResponse};

use super::{name, Admin};
use crate::error::{check, Result};

/// One log directory of a broker.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogDirDescription {
    pub path: String,
    /// The directory's own error (a failed disk: KAFKA_STORAGE_ERROR), as a Kafka code.
    pub error_code: i16,
    /// The volume's size and free bytes (-1 when the broker does not say).
    pub total_bytes: i64,
    pub usable_bytes: i64,
    /// (topic, partition) -> bytes of that replica in this directory.
    pub partitions: BTreeMap<(String, i32), i64>,
}

impl Admin {
    /// The log directories of broker `node`: every partition it holds (`topics` None), or
    /// only those of the given topics (every partition of each).
    pub async fn describe_log_dirs(
        &self,
        node: i32,
        topics: Option<&[(String, Vec<i32>)]>,
    ) -> Result<Vec<LogDirDescription>> {
        let conn = self.core.connection_to_node(node).await?;
        let req = DescribeLogDirsRequest::default().with_topics(topics.map(|ts| {
            ts.iter()
                .map(|(t, ps)| {
                    DescribableLogDirTopic::default()
                        .with_topic(name(t))
                        .with_partitions(ps.clone())
                })
                .collect()
        }));
        let resp: DescribeLogDirsResponse = conn.call(&req).await?;
        check(resp.error_code, None)?;
        Ok(resp
            .results
            .into_iter()
            .map(|d| LogDirDescription {
                path: d.log_dir.to_string(),
                error_code: d.error_code,
                total_bytes: d.total_bytes,
                usable_bytes: d.usable_bytes,
                partitions: d
                    .topics
                    .into_iter()
                    .flat_map(|t| {
                        let topic = t.name.0.to_string();
                        t.partitions
                            .into_iter()
                            .filter(|p| !p.is_future_key)
                            .map(move |p| ((topic.clone(), p.partition_index), p.partition_size))
                    })
                    .collect(),
            })
            .collect())
    }
}
