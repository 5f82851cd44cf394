//! AlterReplicaLogDirs (key 34): move replicas this broker holds to another of its log
//! directories (JBOD), as `kafka-reassign-partitions` does with `log_dirs` in its plan. Each
//! move runs in the background (see [`crate::replica::ReplicaManager::alter_log_dir`]); the
//! answer says only whether it was started. It takes ALTER on the cluster, as in Kafka.

use bytes::Bytes;
use kafka_protocol::messages::alter_replica_log_dirs_response::{
    AlterReplicaLogDirPartitionResult, AlterReplicaLogDirTopicResult,
};
use kafka_protocol::messages::{AlterReplicaLogDirsRequest, AlterReplicaLogDirsResponse, ApiKey};
use sluice_metadata::acl::op;
use sluice_protocol::types::TopicPartition;
use sluice_protocol::ErrorCode;

use crate::request::{HandlerError, RequestContext, Response};

handler!(
    ApiKey::AlterReplicaLogDirs,
    1,
    2,
    AlterReplicaLogDirs {
        replicas: crate::replica::ReplicaManager,
        access: crate::authorizer::Access
    },
    sync
);

fn handle(
    h: &AlterReplicaLogDirs,
    ctx: &RequestContext,
    body: Bytes,
) -> Result<Response, HandlerError> {
    let req: AlterReplicaLogDirsRequest = ctx.decode(body)?;
    let allowed = h.access.check(ctx).cluster(op::ALTER);
    let mut resp = AlterReplicaLogDirsResponse::default();
    for dir in &req.dirs {
        for topic in &dir.topics {
            let mut out = AlterReplicaLogDirTopicResult::default();
            out.topic_name = topic.name.clone();
            for &partition in &topic.partitions {
                let result = if !allowed {
                    Err(ErrorCode::ClusterAuthorizationFailed)
                } else {
                    let tp = TopicPartition::new(topic.name.0.to_string(), partition);
                    h.replicas.alter_log_dir(&tp, &dir.path)
                };
                let mut p = AlterReplicaLogDirPartitionResult::default();
                p.partition_index = partition;
                p.error_code = result.err().map_or(0, |c| c.code());
                out.partitions.push(p);
            }
            resp.results.push(out);
        }
    }
    ctx.respond(&resp)
}
