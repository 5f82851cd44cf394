//! ACL administration (what `kafka-acls.sh` does): create ACL bindings, list those a filter
//! matches, delete them. The codes are Kafka's (`sluice_protocol::acl`).

use kafka_protocol::messages::create_acls_request::AclCreation;
use kafka_protocol::messages::delete_acls_request::DeleteAclsFilter;
use kafka_protocol::messages::{
    CreateAclsRequest, CreateAclsResponse, DeleteAclsRequest, DeleteAclsResponse,
    DescribeAclsRequest, DescribeAclsResponse,
};
use sluice_protocol::acl::{AclBinding, AclFilter};

use super::{s, Admin};
use crate::error::{check, Error, Result};

fn opt(v: &Option<String>) -> Option<kafka_protocol::protocol::StrBytes> {
    v.as_deref().map(s)
}

impl Admin {
    /// Create `bindings`; one outcome each.
    pub async fn create_acls(&self, bindings: &[AclBinding]) -> Result<Vec<Result<()>>> {
        let req = CreateAclsRequest::default().with_creations(
            bindings
                .iter()
                .map(|b| {
                    AclCreation::default()
                        .with_resource_type(b.resource_type)
                        .with_resource_name(s(&b.resource_name))
                        .with_resource_pattern_type(b.pattern_type)
                        .with_principal(s(&b.principal))
                        .with_host(s(&b.host))
                        .with_operation(b.operation)
                        .with_permission_type(b.permission)
                })
                .collect(),
        );
        let conn = self.core.any_connection().await?;
        let resp: CreateAclsResponse = conn.call(&req).await?;
        if resp.results.len() != bindings.len() {
            return Err(Error::Protocol(
                "CreateAcls answered a different count".into(),
            ));
        }
        Ok(resp
            .results
            .into_iter()
            .map(|r| check(r.error_code, r.error_message.map(|m| m.to_string())))
            .collect())
    }

    /// Every ACL `filter` matches.
    pub async fn describe_acls(&self, filter: &AclFilter) -> Result<Vec<AclBinding>> {
        let req = DescribeAclsRequest::default()
            .with_resource_type_filter(filter.resource_type)
            .with_resource_name_filter(opt(&filter.resource_name))
            .with_pattern_type_filter(filter.pattern_type)
            .with_principal_filter(opt(&filter.principal))
            .with_host_filter(opt(&filter.host))
            .with_operation(filter.operation)
            .with_permission_type(filter.permission);
        let conn = self.core.any_connection().await?;
        let resp: DescribeAclsResponse = conn.call(&req).await?;
        check(resp.error_code, resp.error_message.map(|m| m.to_string()))?;
        Ok(resp
            .resources
            .into_iter()
            .flat_map(|r| {
                let (rt, name, pt) = (r.resource_type, r.resource_name.to_string(), r.pattern_type);
                r.acls.into_iter().map(move |a| AclBinding {
                    resource_type: rt,
                    resource_name: name.clone(),
                    pattern_type: pt,
                    principal: a.principal.to_string(),
                    host: a.host.to_string(),
                    operation: a.operation,
                    permission: a.permission_type,
                })
            })
            .collect())
    }

    /// Delete every ACL each filter matches; per filter the ACLs deleted.
    pub async fn delete_acls(&self, filters: &[AclFilter]) -> Result<Vec<Result<Vec<AclBinding>>>> {
        let req = DeleteAclsRequest::default().with_filters(
            filters
                .iter()
                .map(|f| {
                    DeleteAclsFilter::default()
                        .with_resource_type_filter(f.resource_type)
                        .with_resource_name_filter(opt(&f.resource_name))
                        .with_pattern_type_filter(f.pattern_type)
                        .with_principal_filter(opt(&f.principal))
                        .with_host_filter(opt(&f.host))
                        .with_operation(f.operation)
                        .with_permission_type(f.permission)
                })
                .collect(),
        );
        let conn = self.core.any_connection().await?;
        let resp: DeleteAclsResponse = conn.call(&req).await?;
        Ok(resp
            .filter_results
            .into_iter()
            .map(|r| {
                check(r.error_code, r.error_message.map(|m| m.to_string())).map(|()| {
                    r.matching_acls
                        .into_iter()
                        .map(|m| AclBinding {
                            resource_type: m.resource_type,
                            resource_name: m.resource_name.to_string(),
                            pattern_type: m.pattern_type,
                            principal: m.principal.to_string(),
                            host: m.host.to_string(),
                            operation: m.operation,
                            permission: m.permission_type,
                        })
                        .collect()
                })
            })
            .collect())
    }
}
