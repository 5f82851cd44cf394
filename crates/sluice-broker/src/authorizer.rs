//! The authorizer: with `authorizer.class.name` set (Kafka's StandardAuthorizer), every
//! request is checked against the ACLs in cluster metadata for the principal of its
//! connection (`User:ANONYMOUS`, the TLS certificate subject, or the SASL user); super users
//! pass every check. Without it, everything is allowed and the ACL APIs answer
//! SECURITY_DISABLED, as in Kafka.
//!
//! Handlers ask through [`Check`] (one per request, holding the metadata image it decides
//! against) with Kafka's operation for the API.

use std::sync::Arc;

use sluice_metadata::acl::{self, op, resource, Action};
use sluice_metadata::config::BrokerConfig;
use sluice_metadata::MetadataImage;
use sluice_protocol::ErrorCode;

use crate::metadata_cache::MetadataCache;
use crate::request::RequestContext;

/// The authorizer as handlers reach it: the decision rules and the metadata holding the ACLs.
pub struct Access {
    authorizer: Authorizer,
    metadata: Arc<MetadataCache>,
}

impl Access {
    pub fn new(authorizer: Authorizer, metadata: Arc<MetadataCache>) -> Self {
        Self {
            authorizer,
            metadata,
        }
    }

    /// The ACL checks of one request.
    pub fn check<'a>(&'a self, ctx: &'a RequestContext) -> Check<'a> {
        self.authorizer.check(&self.metadata, ctx)
    }

    /// The ACL checks of `principal` connecting from `host` outside the Kafka protocol (the
    /// schema registry's HTTP requests).
    pub fn check_principal<'a>(&'a self, principal: &'a str, host: std::net::IpAddr) -> Check<'a> {
        self.authorizer
            .check_principal(&self.metadata, principal, host)
    }

    pub fn is_enabled(&self) -> bool {
        self.authorizer.is_enabled()
    }
}

#[derive(Clone, Debug, Default)]
pub struct Authorizer {
    enabled: bool,
    super_users: Vec<String>,
    allow_if_no_acl: bool,
}

impl Authorizer {
    pub fn from_config(config: &BrokerConfig) -> Self {
        Self {
            enabled: config.authorizer_enabled(),
            super_users: config.super_users(),
            allow_if_no_acl: config.allow_everyone_if_no_acl_found(),
        }
    }

    /// Everything allowed (no `authorizer.class.name`).
    pub fn disabled() -> Self {
        Self::default()
    }

    pub fn is_enabled(&self) -> bool {
        self.enabled
    }

    /// A checker for one request.
    pub fn check<'a>(&'a self, metadata: &MetadataCache, ctx: &'a RequestContext) -> Check<'a> {
        self.check_principal(metadata, &ctx.principal, ctx.peer.ip())
    }

    /// A checker for `principal` connecting from `host`.
    pub fn check_principal<'a>(
        &'a self,
        metadata: &MetadataCache,
        principal: &'a str,
        host: std::net::IpAddr,
    ) -> Check<'a> {
        let open = !self.enabled || self.super_users.iter().any(|s| **s == *principal);
        Check {
            authorizer: self,
            image: (!open).then(|| metadata.current()),
            principal,
            host: if open {
                String::new()
            } else {
                host.to_string()
            },
        }
    }
}

/// The authorization decisions of one request.
pub struct Check<'a> {
    authorizer: &'a Authorizer,
    /// None: every check passes (no authorizer, or a super user).
    image: Option<Arc<MetadataImage>>,
    principal: &'a str,
    host: String,
}

impl Check<'_> {
    pub fn allows(&self, operation: i8, resource_type: i8, name: &str) -> bool {
        let Some(image) = &self.image else {
            return true;
        };
        let action = Action {
            principal: self.principal,
            host: &self.host,
            operation,
            resource_type,
            resource_name: name,
        };
        acl::decide(
            image.acls.values(),
            &action,
            self.authorizer.allow_if_no_acl,
        )
    }

    /// `operation` on some resource of `resource_type` (Kafka's authorizeByResourceType).
    pub fn any_of_type(&self, operation: i8, resource_type: i8) -> bool {
        let Some(image) = &self.image else {
            return true;
        };
        acl::decide_any(
            image.acls.values(),
            self.principal,
            &self.host,
            operation,
            resource_type,
            self.authorizer.allow_if_no_acl,
        )
    }

    pub fn topic(&self, operation: i8, name: &str) -> bool {
        self.allows(operation, resource::TOPIC, name)
    }

    pub fn group(&self, operation: i8, name: &str) -> bool {
        self.allows(operation, resource::GROUP, name)
    }

    pub fn cluster(&self, operation: i8) -> bool {
        self.allows(operation, resource::CLUSTER, acl::CLUSTER_NAME)
    }

    pub fn transactional_id(&self, operation: i8, id: &str) -> bool {
        self.allows(operation, resource::TRANSACTIONAL_ID, id)
    }

    /// DescribeConfigs / AlterConfigs on a config resource (2 topic, 4 broker, 8 broker
    /// logger): `operation` on the topic, or on the cluster for broker resources.
    pub fn config_resource(
        &self,
        operation: i8,
        resource_type: i8,
        name: &str,
    ) -> Result<(), (ErrorCode, String)> {
        match resource_type {
            2 if !self.topic(operation, name) => Err((
                ErrorCode::TopicAuthorizationFailed,
                "Topic authorization failed.".into(),
            )),
            32 if !self.group(operation, name) => Err((
                ErrorCode::GroupAuthorizationFailed,
                "Group authorization failed.".into(),
            )),
            4 | 8 | 16 | 64 if !self.cluster(operation) => Err((
                ErrorCode::ClusterAuthorizationFailed,
                "Cluster authorization failed.".into(),
            )),
            _ => Ok(()),
        }
    }

    /// Kafka's "authorized operations" bit field for a resource: bit `op` set for each
    /// operation of `ops` this principal may perform.
    pub fn authorized_operations(&self, resource_type: i8, name: &str) -> i32 {
        let ops: &[i8] = match resource_type {
            resource::TOPIC => &[
                op::READ,
                op::WRITE,
                op::CREATE,
                op::DELETE,
                op::ALTER,
                op::DESCRIBE,
                op::DESCRIBE_CONFIGS,
                op::ALTER_CONFIGS,
            ],
            resource::GROUP => &[op::READ, op::DELETE, op::DESCRIBE],
            resource::CLUSTER => &[
                op::CREATE,
                op::ALTER,
                op::DESCRIBE,
                op::CLUSTER_ACTION,
                op::DESCRIBE_CONFIGS,
                op::ALTER_CONFIGS,
                op::IDEMPOTENT_WRITE,
                op::CREATE_TOKENS,
                op::DESCRIBE_TOKENS,
            ],
            _ => &[],
        };
        ops.iter()
            .filter(|o| self.allows(**o, resource_type, name))
            .fold(0, |bits, o| bits | (1 << *o))
    }
}
