//! DescribeCluster (key 60): cluster id, controller and brokers (or controllers, v1+); v2
//! lists fenced brokers too when asked (`include_fenced_brokers`, marked `is_fenced`), as
//! `kafka-cluster.sh list-endpoints --include-fenced-brokers` asks.

use bytes::Bytes;
use kafka_protocol::messages::describe_cluster_response::DescribeClusterBroker;
use kafka_protocol::messages::{ApiKey, BrokerId, DescribeClusterRequest, DescribeClusterResponse};
use sluice_metadata::acl::{self, resource};
use sluice_protocol::ErrorCode;

use crate::metadata_cache::listener_endpoint;
use crate::request::{
    str_bytes, HandlerError, RequestContext, Response, AUTHORIZED_OPERATIONS_OMITTED,
};

handler!(
    ApiKey::DescribeCluster,
    0,
    2,
    DescribeCluster {
        identity: crate::services::Identity,
        metadata: crate::metadata_cache::MetadataCache,
        controller: crate::services::controller::ControllerClient,
        access: crate::authorizer::Access
    },
    sync
);

const ENDPOINT_BROKERS: i8 = 1;
const ENDPOINT_CONTROLLERS: i8 = 2;

fn handle(
    h: &DescribeCluster,
    ctx: &RequestContext,
    body: Bytes,
) -> Result<Response, HandlerError> {
    let req: DescribeClusterRequest = ctx.decode(body)?;
    let image = h.metadata.current();
    let mut resp = DescribeClusterResponse::default();
    resp.endpoint_type = if ctx.api_version >= 1 {
        req.endpoint_type
    } else {
        ENDPOINT_BROKERS
    };
    if resp.endpoint_type != ENDPOINT_BROKERS && resp.endpoint_type != ENDPOINT_CONTROLLERS {
        resp.error_code = ErrorCode::UnsupportedEndpointType.code();
        resp.error_message = Some(str_bytes(format!(
            "Unsupported endpoint type {}",
            req.endpoint_type
        )));
        return ctx.respond(&resp);
    }
    resp.cluster_id = str_bytes(h.identity.cluster_id.clone());
    resp.controller_id = BrokerId(h.controller.controller_id(&image));
    resp.cluster_authorized_operations = if req.include_cluster_authorized_operations {
        h.access
            .check(ctx)
            .authorized_operations(resource::CLUSTER, acl::CLUSTER_NAME)
    } else {
        AUTHORIZED_OPERATIONS_OMITTED
    };
    let include_fenced = ctx.api_version >= 2 && req.include_fenced_brokers;
    resp.brokers = image
        .brokers
        .values()
        .filter(|b| include_fenced || !b.fenced)
        .filter_map(|reg| {
            let e = listener_endpoint(reg, &ctx.listener)?;
            let mut b = DescribeClusterBroker::default();
            b.broker_id = BrokerId(reg.node_id);
            b.host = str_bytes(e.host.clone());
            b.port = i32::from(e.port);
            b.rack = reg.rack.clone().map(str_bytes);
            b.is_fenced = reg.fenced;
            Some(b)
        })
        .collect();
    ctx.respond(&resp)
}
