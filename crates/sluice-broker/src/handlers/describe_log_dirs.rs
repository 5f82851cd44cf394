//! DescribeLogDirs (key 35): this broker's log directories (`log.dirs`, in order), the
//! replicas each holds with their sizes, and each directory's filesystem capacity (v4). Null
//! topics = every replica.
//! Reassignment tools read it to learn where replicas live.

use bytes::Bytes;
use kafka_protocol::messages::describe_log_dirs_response::{
    DescribeLogDirsPartition, DescribeLogDirsResult, DescribeLogDirsTopic,
};
use kafka_protocol::messages::{
    ApiKey, DescribeLogDirsRequest, DescribeLogDirsResponse, TopicName,
};
use sluice_metadata::acl::op;
use sluice_protocol::ErrorCode;

use crate::request::by_topic;
use crate::request::{str_bytes, HandlerError, RequestContext, Response};

handler!(
    ApiKey::DescribeLogDirs,
    1,
    4,
    DescribeLogDirs {
        replicas: crate::replica::ReplicaManager,
        access: crate::authorizer::Access
    },
    sync
);

fn handle(
    h: &DescribeLogDirs,
    ctx: &RequestContext,
    body: Bytes,
) -> Result<Response, HandlerError> {
    let req: DescribeLogDirsRequest = ctx.decode(body)?;
    if !h.access.check(ctx).cluster(op::DESCRIBE) {
        let mut resp = DescribeLogDirsResponse::default();
        resp.error_code = ErrorCode::ClusterAuthorizationFailed.code();
        return ctx.respond(&resp);
    }
    let wanted = |topic: &str, partition: i32| match &req.topics {
        None => true,
        Some(ts) => ts
            .iter()
            .any(|t| *t.topic.0 == *topic && t.partitions.contains(&partition)),
    };
    let hosted = h.replicas.hosted_replicas();
    let mut resp = DescribeLogDirsResponse::default();
    for (index, dir) in h.replicas.log_dirs().into_iter().enumerate() {
        if h.replicas.log_manager().is_offline(index) {
            // A failed directory: named, with Kafka's error and nothing else.
            let mut result = DescribeLogDirsResult::default();
            result.log_dir = str_bytes(dir.display().to_string());
            result.error_code = ErrorCode::KafkaStorageError.code();
            result.total_bytes = -1;
            result.usable_bytes = -1;
            resp.results.push(result);
            continue;
        }
        let here: Vec<(String, i32, DescribeLogDirsPartition)> = hosted
            .iter()
            .filter(|r| r.dir == dir && wanted(&r.tp.topic, r.tp.partition.0))
            .map(|r| {
                let mut d = DescribeLogDirsPartition::default();
                d.partition_index = r.tp.partition.0;
                d.partition_size = r.size_bytes as i64;
                d.offset_lag = r.offset_lag;
                d.is_future_key = r.is_future;
                (r.tp.topic.clone(), r.tp.partition.0, d)
            })
            .collect();
        let mut result = DescribeLogDirsResult::default();
        result.log_dir = str_bytes(dir.display().to_string());
        match rustix::fs::statvfs(dir) {
            Ok(s) => {
                let block = s.f_frsize as i64;
                result.total_bytes = (s.f_blocks as i64).saturating_mul(block);
                result.usable_bytes = (s.f_bavail as i64).saturating_mul(block);
            }
            Err(e) => {
                tracing::warn!(dir = %dir.display(), error = %e, "cannot stat the log directory");
                result.error_code = ErrorCode::KafkaStorageError.code();
                result.total_bytes = -1;
                result.usable_bytes = -1;
            }
        }
        for (topic, partitions) in by_topic(here) {
            let mut t = DescribeLogDirsTopic::default();
            t.name = TopicName(str_bytes(topic));
            t.partitions = partitions.into_iter().map(|(_, d)| d).collect();
            result.topics.push(t);
        }
        resp.results.push(result);
    }
    ctx.respond(&resp)
}
