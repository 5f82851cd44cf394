//! CreateAcls (key 30), DescribeAcls (key 29) and DeleteAcls (key 31): ACLs live in cluster
//! metadata (creation and deletion are forwarded to the controller). Without an authorizer
//! configured they answer SECURITY_DISABLED; they need ALTER (create, delete) or DESCRIBE
//! (describe) on the cluster, else CLUSTER_AUTHORIZATION_FAILED, as in Kafka.

use std::collections::BTreeMap;

use bytes::Bytes;
use kafka_protocol::messages::create_acls_response::AclCreationResult;
use kafka_protocol::messages::delete_acls_response::{
    DeleteAclsFilterResult, DeleteAclsMatchingAcl,
};
use kafka_protocol::messages::describe_acls_response::{AclDescription, DescribeAclsResource};
use kafka_protocol::messages::{
    ApiKey, CreateAclsRequest, CreateAclsResponse, DeleteAclsRequest, DeleteAclsResponse,
    DescribeAclsRequest, DescribeAclsResponse,
};
use kafka_protocol::protocol::StrBytes;
use sluice_metadata::acl::{op, AclBinding, AclFilter};
use sluice_metadata::controller_types::ApiError;
use sluice_protocol::ErrorCode;

use crate::authorizer::Access;
use crate::request::{str_bytes, HandlerError, RequestContext, Response};

const NO_AUTHORIZER: &str = "No Authorizer is configured.";

/// Why the request as a whole is refused, if it is.
fn refused(access: &Access, ctx: &RequestContext, operation: i8) -> Option<ApiError> {
    if !access.is_enabled() {
        return Some(ApiError::new(ErrorCode::SecurityDisabled, NO_AUTHORIZER));
    }
    (!access.check(ctx).cluster(operation)).then(|| {
        ApiError::new(
            ErrorCode::ClusterAuthorizationFailed,
            "Cluster authorization failed.",
        )
    })
}

fn filter(
    resource_type: i8,
    name: Option<&StrBytes>,
    pattern_type: i8,
    principal: Option<&StrBytes>,
    host: Option<&StrBytes>,
    operation: i8,
    permission: i8,
) -> AclFilter {
    AclFilter {
        resource_type,
        resource_name: name.map(ToString::to_string),
        pattern_type,
        principal: principal.map(ToString::to_string),
        host: host.map(ToString::to_string),
        operation,
        permission,
    }
}

pub mod create {
    use super::*;
    handler!(
        ApiKey::CreateAcls,
        1,
        3,
        CreateAcls {
            access: Access,
            controller: crate::services::controller::ControllerClient
        }
    );

    async fn handle(
        h: &CreateAcls,
        ctx: &RequestContext,
        body: Bytes,
    ) -> Result<Response, HandlerError> {
        let req: CreateAclsRequest = ctx.decode(body)?;
        let bindings: Vec<AclBinding> = req
            .creations
            .iter()
            .map(|c| AclBinding {
                resource_type: c.resource_type,
                resource_name: c.resource_name.to_string(),
                pattern_type: c.resource_pattern_type,
                principal: c.principal.to_string(),
                host: c.host.to_string(),
                operation: c.operation,
                permission: c.permission_type,
            })
            .collect();
        let n = bindings.len();
        let outcomes: Vec<Result<(), ApiError>> = match refused(&h.access, ctx, op::ALTER) {
            Some(e) => vec![Err(e); n],
            None => match h.controller.api().create_acls(&bindings).await {
                Ok(v) if v.len() == n => v,
                Ok(_) => vec![Err(ApiError::new(ErrorCode::UnknownServerError, "bad answer")); n],
                Err(e) => vec![Err(ApiError::new(ErrorCode::UnknownServerError, e)); n],
            },
        };
        let mut resp = CreateAclsResponse::default();
        for o in outcomes {
            let mut r = AclCreationResult::default();
            if let Err(e) = o {
                r.error_code = e.code.code();
                r.error_message = Some(str_bytes(e.message));
            }
            resp.results.push(r);
        }
        ctx.respond(&resp)
    }
}

pub mod describe {
    use super::*;
    handler!(
        ApiKey::DescribeAcls,
        1,
        3,
        DescribeAcls {
            access: Access,
            metadata: crate::metadata_cache::MetadataCache
        },
        sync
    );

    fn handle(
        h: &DescribeAcls,
        ctx: &RequestContext,
        body: Bytes,
    ) -> Result<Response, HandlerError> {
        let req: DescribeAclsRequest = ctx.decode(body)?;
        let mut resp = DescribeAclsResponse::default();
        let f = filter(
            req.resource_type_filter,
            req.resource_name_filter.as_ref(),
            req.pattern_type_filter,
            req.principal_filter.as_ref(),
            req.host_filter.as_ref(),
            req.operation,
            req.permission_type,
        );
        let error = refused(&h.access, ctx, op::DESCRIBE).or_else(|| {
            f.validate()
                .err()
                .map(|m| ApiError::new(ErrorCode::InvalidRequest, m))
        });
        if let Some(e) = error {
            resp.error_code = e.code.code();
            resp.error_message = Some(str_bytes(e.message));
            return ctx.respond(&resp);
        }
        let image = h.metadata.current();
        let mut grouped: BTreeMap<(i8, &str, i8), Vec<AclDescription>> = BTreeMap::new();
        for b in image.acls.values().filter(|b| f.matches(b)) {
            let mut d = AclDescription::default();
            d.principal = str_bytes(&b.principal);
            d.host = str_bytes(&b.host);
            d.operation = b.operation;
            d.permission_type = b.permission;
            grouped
                .entry((b.resource_type, &b.resource_name, b.pattern_type))
                .or_default()
                .push(d);
        }
        for ((resource_type, name, pattern_type), acls) in grouped {
            let mut r = DescribeAclsResource::default();
            r.resource_type = resource_type;
            r.resource_name = str_bytes(name);
            r.pattern_type = pattern_type;
            r.acls = acls;
            resp.resources.push(r);
        }
        ctx.respond(&resp)
    }
}

pub mod delete {
    use super::*;
    handler!(
        ApiKey::DeleteAcls,
        1,
        3,
        DeleteAcls {
            access: Access,
            controller: crate::services::controller::ControllerClient
        }
    );

    async fn handle(
        h: &DeleteAcls,
        ctx: &RequestContext,
        body: Bytes,
    ) -> Result<Response, HandlerError> {
        let req: DeleteAclsRequest = ctx.decode(body)?;
        let filters: Vec<AclFilter> = req
            .filters
            .iter()
            .map(|f| {
                filter(
                    f.resource_type_filter,
                    f.resource_name_filter.as_ref(),
                    f.pattern_type_filter,
                    f.principal_filter.as_ref(),
                    f.host_filter.as_ref(),
                    f.operation,
                    f.permission_type,
                )
            })
            .collect();
        let n = filters.len();
        let outcomes: Vec<Result<Vec<AclBinding>, ApiError>> =
            match refused(&h.access, ctx, op::ALTER) {
                Some(e) => vec![Err(e); n],
                None => match h.controller.api().delete_acls(&filters).await {
                    Ok(v) if v.len() == n => v,
                    Ok(_) => {
                        vec![Err(ApiError::new(ErrorCode::UnknownServerError, "bad answer")); n]
                    }
                    Err(e) => vec![Err(ApiError::new(ErrorCode::UnknownServerError, e)); n],
                },
            };
        let mut resp = DeleteAclsResponse::default();
        for o in outcomes {
            let mut r = DeleteAclsFilterResult::default();
            match o {
                Ok(bindings) => {
                    for b in bindings {
                        let mut m = DeleteAclsMatchingAcl::default();
                        m.resource_type = b.resource_type;
                        m.resource_name = str_bytes(b.resource_name);
                        m.pattern_type = b.pattern_type;
                        m.principal = str_bytes(b.principal);
                        m.host = str_bytes(b.host);
                        m.operation = b.operation;
                        m.permission_type = b.permission;
                        r.matching_acls.push(m);
                    }
                }
                Err(e) => {
                    r.error_code = e.code.code();
                    r.error_message = Some(str_bytes(e.message));
                }
            }
            resp.filter_results.push(r);
        }
        ctx.respond(&resp)
    }
}
