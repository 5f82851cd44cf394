//! Access control lists as Kafka defines them: a binding allows or denies one principal, from
//! one host, one operation on resources matched by a (type, name, pattern). Pure data and the
//! decision function; the broker's authorizer applies it to every request.
//!
//! The decision is Kafka's StandardAuthorizer's: super users may do anything; otherwise any
//! matching DENY wins, then any matching ALLOW (READ, WRITE, DELETE and ALTER imply DESCRIBE;
//! ALTER_CONFIGS implies DESCRIBE_CONFIGS; ALL implies everything); a resource no ACL matches at
//! all is allowed only with `allow.everyone.if.no.acl.found`.

/// Resource types (Kafka's `ResourceType` codes).
pub mod resource {
    pub const ANY: i8 = 1;
    pub const TOPIC: i8 = 2;
    pub const GROUP: i8 = 3;
    pub const CLUSTER: i8 = 4;
    pub const TRANSACTIONAL_ID: i8 = 5;
    pub const DELEGATION_TOKEN: i8 = 6;
    pub const USER: i8 = 7;

    /// Kafka's upper-case name of a resource type.
    pub fn name(t: i8) -> &'static str {
        match t {
            ANY => "ANY",
            TOPIC => "TOPIC",
            GROUP => "GROUP",
            CLUSTER => "CLUSTER",
            TRANSACTIONAL_ID => "TRANSACTIONAL_ID",
            DELEGATION_TOKEN => "DELEGATION_TOKEN",
            USER => "USER",
            _ => "UNKNOWN",
        }
    }
}

/// Pattern types (Kafka's `PatternType` codes).
pub mod pattern {
    pub const ANY: i8 = 1;
    /// Filters only: every binding that would apply to the named resource.
    pub const MATCH: i8 = 2;
    pub const LITERAL: i8 = 3;
    pub const PREFIXED: i8 = 4;

    pub fn name(p: i8) -> &'static str {
        match p {
            ANY => "ANY",
            MATCH => "MATCH",
            LITERAL => "LITERAL",
            PREFIXED => "PREFIXED",
            _ => "UNKNOWN",
        }
    }
}

/// Operations (Kafka's `AclOperation` codes).
pub mod op {
    pub const ANY: i8 = 1;
    pub const ALL: i8 = 2;
    pub const READ: i8 = 3;
    pub const WRITE: i8 = 4;
    pub const CREATE: i8 = 5;
    pub const DELETE: i8 = 6;
    pub const ALTER: i8 = 7;
    pub const DESCRIBE: i8 = 8;
    pub const CLUSTER_ACTION: i8 = 9;
    pub const DESCRIBE_CONFIGS: i8 = 10;
    pub const ALTER_CONFIGS: i8 = 11;
    pub const IDEMPOTENT_WRITE: i8 = 12;
    pub const CREATE_TOKENS: i8 = 13;
    pub const DESCRIBE_TOKENS: i8 = 14;

    const NAMES: [(i8, &str); 14] = [
        (ANY, "ANY"),
        (ALL, "ALL"),
        (READ, "READ"),
        (WRITE, "WRITE"),
        (CREATE, "CREATE"),
        (DELETE, "DELETE"),
        (ALTER, "ALTER"),
        (DESCRIBE, "DESCRIBE"),
        (CLUSTER_ACTION, "CLUSTER_ACTION"),
        (DESCRIBE_CONFIGS, "DESCRIBE_CONFIGS"),
        (ALTER_CONFIGS, "ALTER_CONFIGS"),
        (IDEMPOTENT_WRITE, "IDEMPOTENT_WRITE"),
        (CREATE_TOKENS, "CREATE_TOKENS"),
        (DESCRIBE_TOKENS, "DESCRIBE_TOKENS"),
    ];

    pub fn name(o: i8) -> &'static str {
        NAMES
            .iter()
            .find(|(c, _)| *c == o)
            .map_or("UNKNOWN", |(_, n)| n)
    }

    /// Parse Kafka's name (`Read`, `READ`, `DescribeConfigs`, `describe_configs`, ...).
    pub fn parse(s: &str) -> Option<i8> {
        let norm: String = s
            .chars()
            .filter(|c| *c != '_' && *c != '-')
            .collect::<String>()
            .to_uppercase();
        NAMES
            .iter()
            .find(|(_, n)| n.replace('_', "") == norm)
            .map(|(c, _)| *c)
    }

    /// The operations that imply `o` when allowed (besides `o` and ALL).
    fn implied_by(o: i8) -> &'static [i8] {
        match o {
            DESCRIBE => &[READ, WRITE, DELETE, ALTER],
            DESCRIBE_CONFIGS => &[ALTER_CONFIGS],
            _ => &[],
        }
    }

    /// Whether an ALLOW of `granted` allows `wanted`.
    pub fn allow_covers(granted: i8, wanted: i8) -> bool {
        granted == wanted || granted == ALL || implied_by(wanted).contains(&granted)
    }
}

/// Permission types (Kafka's `AclPermissionType` codes).
pub mod permission {
    pub const ANY: i8 = 1;
    pub const DENY: i8 = 2;
    pub const ALLOW: i8 = 3;

    pub fn name(p: i8) -> &'static str {
        match p {
            ANY => "ANY",
            DENY => "DENY",
            ALLOW => "ALLOW",
            _ => "UNKNOWN",
        }
    }
}

/// The resource name of the cluster.
pub const CLUSTER_NAME: &str = "kafka-cluster";
/// A literal resource name (or principal name, host) that matches every one.
pub const WILDCARD: &str = "*";

/// One ACL.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct AclBinding {
    pub resource_type: i8,
    pub resource_name: String,
    pub pattern_type: i8,
    /// `User:alice`, or `User:*` for everyone.
    pub principal: String,
    /// An IP address, or `*`.
    pub host: String,
    pub operation: i8,
    pub permission: i8,
}

/// What CreateAcls refuses (Kafka answers INVALID_REQUEST with this message).
pub fn validate(b: &AclBinding) -> Result<(), String> {
    if !(resource::TOPIC..=resource::USER).contains(&b.resource_type) {
        return Err(format!("Invalid resourceType {}", b.resource_type));
    }
    if b.pattern_type != pattern::LITERAL && b.pattern_type != pattern::PREFIXED {
        return Err(format!(
            "Invalid patternType {}",
            pattern::name(b.pattern_type)
        ));
    }
    if !(op::ALL..=op::DESCRIBE_TOKENS).contains(&b.operation) {
        return Err(format!("Invalid operation {}", op::name(b.operation)));
    }
    if b.permission != permission::ALLOW && b.permission != permission::DENY {
        return Err(format!(
            "Invalid permissionType {}",
            permission::name(b.permission)
        ));
    }
    if b.resource_name.is_empty() {
        return Err("Resource name should not be empty".into());
    }
    if b.resource_type == resource::CLUSTER && b.resource_name != CLUSTER_NAME {
        return Err(format!(
            "The only valid name for the CLUSTER resource is {CLUSTER_NAME}"
        ));
    }
    match b.principal.split_once(':') {
        Some((t, n)) if !t.is_empty() && !n.is_empty() => {}
        _ => {
            return Err(format!(
                "Could not parse principal from `{}` (no colon is present separating the principal type from the principal name)",
                b.principal
            ))
        }
    }
    if b.host.is_empty() {
        return Err("Invalid host: it must be an address or *".into());
    }
    Ok(())
}

/// A DescribeAcls / DeleteAcls filter: each field a value or "any".
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AclFilter {
    /// `resource::ANY` for any.
    pub resource_type: i8,
    /// None for any.
    pub resource_name: Option<String>,
    /// `pattern::ANY`, `pattern::MATCH`, or an exact pattern type.
    pub pattern_type: i8,
    pub principal: Option<String>,
    pub host: Option<String>,
    /// `op::ANY` for any.
    pub operation: i8,
    /// `permission::ANY` for any.
    pub permission: i8,
}

impl AclFilter {
    /// The filter every binding matches.
    pub fn any() -> Self {
        AclFilter {
            resource_type: resource::ANY,
            resource_name: None,
            pattern_type: pattern::ANY,
            principal: None,
            host: None,
            operation: op::ANY,
            permission: permission::ANY,
        }
    }

    /// The filter that matches `b` alone.
    pub fn exact(b: &AclBinding) -> Self {
        AclFilter {
            resource_type: b.resource_type,
            resource_name: Some(b.resource_name.clone()),
            pattern_type: b.pattern_type,
            principal: Some(b.principal.clone()),
            host: Some(b.host.clone()),
            operation: b.operation,
            permission: b.permission,
        }
    }

    /// What DeleteAcls refuses in a filter.
    pub fn validate(&self) -> Result<(), String> {
        if self.resource_type <= 0 || self.resource_type > resource::USER {
            return Err(format!("Invalid resourceType {}", self.resource_type));
        }
        if !(pattern::ANY..=pattern::PREFIXED).contains(&self.pattern_type) {
            return Err(format!("Invalid patternType {}", self.pattern_type));
        }
        if self.operation <= 0 || self.operation > op::DESCRIBE_TOKENS {
            return Err(format!("Invalid operation {}", self.operation));
        }
        if !(permission::ANY..=permission::ALLOW).contains(&self.permission) {
            return Err(format!("Invalid permissionType {}", self.permission));
        }
        Ok(())
    }

    pub fn matches(&self, b: &AclBinding) -> bool {
        let resource_ok =
            self.resource_type == resource::ANY || self.resource_type == b.resource_type;
        let name_ok = match (&self.resource_name, self.pattern_type) {
            (None, p) => p == pattern::ANY || p == pattern::MATCH || p == b.pattern_type,
            (Some(n), pattern::MATCH) => match b.pattern_type {
                pattern::LITERAL => b.resource_name == *n || b.resource_name == WILDCARD,
                pattern::PREFIXED => n.starts_with(&b.resource_name),
                _ => false,
            },
            (Some(n), p) => (p == pattern::ANY || p == b.pattern_type) && b.resource_name == *n,
        };
        let principal_ok = self.principal.as_ref().is_none_or(|p| *p == b.principal);
        let host_ok = self.host.as_ref().is_none_or(|h| *h == b.host);
        let op_ok = self.operation == op::ANY || self.operation == b.operation;
        let perm_ok = self.permission == permission::ANY || self.permission == b.permission;
        resource_ok && name_ok && principal_ok && host_ok && op_ok && perm_ok
    }
}

/// Whether a binding's resource pattern covers resource `(resource_type, name)`.
fn covers(b: &AclBinding, resource_type: i8, name: &str) -> bool {
    b.resource_type == resource_type
        && match b.pattern_type {
            pattern::LITERAL => b.resource_name == name || b.resource_name == WILDCARD,
            pattern::PREFIXED => name.starts_with(&b.resource_name),
            _ => false,
        }
}

/// The request being decided.
#[derive(Clone, Copy, Debug)]
pub struct Action<'a> {
    pub principal: &'a str,
    pub host: &'a str,
    pub operation: i8,
    pub resource_type: i8,
    pub resource_name: &'a str,
}

/// Decide `action` against `acls` (super users are the caller's business).
pub fn decide<'a>(
    acls: impl IntoIterator<Item = &'a AclBinding>,
    action: &Action<'_>,
    allow_if_no_acl: bool,
) -> bool {
    let principal_type = action.principal.split_once(':').map_or("User", |(t, _)| t);
    let wildcard_principal = format!("{principal_type}:*");
    let mut any_acl = false;
    let mut allowed = false;
    for b in acls {
        if !covers(b, action.resource_type, action.resource_name) {
            continue;
        }
        any_acl = true;
        let who = b.principal == action.principal || b.principal == wildcard_principal;
        let from = b.host == WILDCARD || b.host == action.host;
        if !(who && from) {
            continue;
        }
        match b.permission {
            permission::DENY if b.operation == action.operation || b.operation == op::ALL => {
                return false
            }
            permission::ALLOW if op::allow_covers(b.operation, action.operation) => allowed = true,
            _ => {}
        }
    }
    allowed || (!any_acl && allow_if_no_acl)
}

/// Whether `principal` may perform `operation` on some resource of `resource_type` (Kafka's
/// authorizeByResourceType, used by InitProducerId without a transactional id): an ALLOW
/// that covers it on any resource of the type, unless a DENY covers every such resource
/// (a literal `*` or an empty prefix).
pub fn decide_any<'a>(
    acls: impl IntoIterator<Item = &'a AclBinding>,
    principal: &str,
    host: &str,
    operation: i8,
    resource_type: i8,
    allow_if_no_acl: bool,
) -> bool {
    let principal_type = principal.split_once(':').map_or("User", |(t, _)| t);
    let wildcard_principal = format!("{principal_type}:*");
    let mut any_acl = false;
    let mut allowed = false;
    for b in acls {
        if b.resource_type != resource_type {
            continue;
        }
        any_acl = true;
        let who = b.principal == principal || b.principal == wildcard_principal;
        let from = b.host == WILDCARD || b.host == host;
        if !(who && from) {
            continue;
        }
        let everything = (b.pattern_type == pattern::LITERAL && b.resource_name == WILDCARD)
            || (b.pattern_type == pattern::PREFIXED && b.resource_name.is_empty());
        match b.permission {
            permission::DENY
                if everything && (b.operation == operation || b.operation == op::ALL) =>
            {
                return false
            }
            permission::ALLOW if op::allow_covers(b.operation, operation) => allowed = true,
            _ => {}
        }
    }
    allowed || (!any_acl && allow_if_no_acl)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn acl(rt: i8, name: &str, pt: i8, who: &str, o: i8, perm: i8) -> AclBinding {
        AclBinding {
            resource_type: rt,
            resource_name: name.into(),
            pattern_type: pt,
            principal: who.into(),
            host: "*".into(),
            operation: o,
            permission: perm,
        }
    }

    fn can(acls: &[AclBinding], who: &str, o: i8, rt: i8, name: &str) -> bool {
        let action = Action {
            principal: who,
            host: "10.0.0.1",
            operation: o,
            resource_type: rt,
            resource_name: name,
        };
        decide(acls, &action, false)
    }

    #[test]
    fn literal_prefixed_wildcard_deny_and_implication() {
        use permission::{ALLOW, DENY};
        use resource::{GROUP, TOPIC};
        let acls = vec![
            acl(
                TOPIC,
                "orders",
                pattern::LITERAL,
                "User:alice",
                op::WRITE,
                ALLOW,
            ),
            acl(
                TOPIC,
                "pay-",
                pattern::PREFIXED,
                "User:bob",
                op::READ,
                ALLOW,
            ),
            acl(
                TOPIC,
                "pay-secret",
                pattern::LITERAL,
                "User:bob",
                op::READ,
                DENY,
            ),
            acl(TOPIC, "*", pattern::LITERAL, "User:*", op::DESCRIBE, ALLOW),
            acl(GROUP, "app", pattern::LITERAL, "User:bob", op::ALL, ALLOW),
        ];
        assert!(can(&acls, "User:alice", op::WRITE, TOPIC, "orders"));
        assert!(!can(&acls, "User:alice", op::READ, TOPIC, "orders"));
        assert!(!can(&acls, "User:alice", op::WRITE, TOPIC, "orders2"));
        // WRITE implies DESCRIBE; so does the wildcard.
        assert!(can(&acls, "User:carol", op::DESCRIBE, TOPIC, "anything"));
        assert!(can(&acls, "User:bob", op::READ, TOPIC, "pay-in"));
        assert!(
            !can(&acls, "User:bob", op::READ, TOPIC, "pay-secret"),
            "deny wins"
        );
        assert!(!can(&acls, "User:bob", op::READ, TOPIC, "pa"));
        assert!(can(&acls, "User:bob", op::DELETE, GROUP, "app"), "ALL");
        assert!(!can(&acls, "User:alice", op::READ, GROUP, "app"));
        // DESCRIBE_CONFIGS follows from ALTER_CONFIGS, not the other way round.
        let cfg = vec![acl(
            TOPIC,
            "t",
            pattern::LITERAL,
            "User:a",
            op::ALTER_CONFIGS,
            ALLOW,
        )];
        assert!(can(&cfg, "User:a", op::DESCRIBE_CONFIGS, TOPIC, "t"));
        let cfg = vec![acl(
            TOPIC,
            "t",
            pattern::LITERAL,
            "User:a",
            op::DESCRIBE_CONFIGS,
            ALLOW,
        )];
        assert!(!can(&cfg, "User:a", op::ALTER_CONFIGS, TOPIC, "t"));
        // Hosts.
        let mut h = acl(TOPIC, "t", pattern::LITERAL, "User:a", op::READ, ALLOW);
        h.host = "10.0.0.2".into();
        assert!(!can(&[h.clone()], "User:a", op::READ, TOPIC, "t"));
        h.host = "10.0.0.1".into();
        assert!(can(&[h], "User:a", op::READ, TOPIC, "t"));
    }

    #[test]
    fn no_acl_found_is_denied_unless_configured() {
        let action = Action {
            principal: "User:x",
            host: "h",
            operation: op::READ,
            resource_type: resource::TOPIC,
            resource_name: "free",
        };
        assert!(!decide(&[], &action, false));
        assert!(decide(&[], &action, true));
        // An ACL for someone else on the resource means it is no longer "no ACL found".
        let other = acl(
            resource::TOPIC,
            "free",
            pattern::LITERAL,
            "User:y",
            op::READ,
            permission::ALLOW,
        );
        assert!(!decide(&[other], &action, true));
    }

    #[test]
    fn filters_match_like_kafka() {
        let lit = acl(
            resource::TOPIC,
            "orders",
            pattern::LITERAL,
            "User:a",
            op::READ,
            permission::ALLOW,
        );
        let pre = acl(
            resource::TOPIC,
            "ord",
            pattern::PREFIXED,
            "User:a",
            op::READ,
            permission::ALLOW,
        );
        let star = acl(
            resource::TOPIC,
            "*",
            pattern::LITERAL,
            "User:b",
            op::WRITE,
            permission::DENY,
        );
        let f = |name: Option<&str>, pt: i8| AclFilter {
            resource_type: resource::ANY,
            resource_name: name.map(Into::into),
            pattern_type: pt,
            principal: None,
            host: None,
            operation: op::ANY,
            permission: permission::ANY,
        };
        let hits = |filter: AclFilter| {
            [&lit, &pre, &star]
                .iter()
                .filter(|b| filter.matches(b))
                .count()
        };
        assert_eq!(hits(f(None, pattern::ANY)), 3);
        assert_eq!(hits(f(None, pattern::PREFIXED)), 1);
        assert_eq!(hits(f(Some("orders"), pattern::MATCH)), 3);
        assert_eq!(hits(f(Some("orders"), pattern::ANY)), 1);
        assert_eq!(hits(f(Some("ord"), pattern::PREFIXED)), 1);
        let mut by_principal = f(None, pattern::ANY);
        by_principal.principal = Some("User:b".into());
        assert_eq!(hits(by_principal), 1);
    }

    #[test]
    fn invalid_bindings_are_refused() {
        let good = acl(
            resource::TOPIC,
            "t",
            pattern::LITERAL,
            "User:a",
            op::READ,
            permission::ALLOW,
        );
        assert!(validate(&good).is_ok());
        let mut cases = Vec::new();
        let mut b = good.clone();
        b.resource_type = resource::ANY;
        cases.push(b);
        let mut b = good.clone();
        b.pattern_type = pattern::MATCH;
        cases.push(b);
        let mut b = good.clone();
        b.operation = op::ANY;
        cases.push(b);
        let mut b = good.clone();
        b.permission = permission::ANY;
        cases.push(b);
        let mut b = good.clone();
        b.principal = "alice".into();
        cases.push(b);
        let mut b = good.clone();
        b.resource_type = resource::CLUSTER;
        cases.push(b);
        let mut b = good;
        b.resource_name = String::new();
        cases.push(b);
        for b in cases {
            assert!(validate(&b).is_err(), "{b:?}");
        }
        assert_eq!(op::parse("DescribeConfigs"), Some(op::DESCRIBE_CONFIGS));
        assert_eq!(op::parse("read"), Some(op::READ));
        assert_eq!(op::parse("IDEMPOTENT_WRITE"), Some(op::IDEMPOTENT_WRITE));
        assert_eq!(op::parse("fly"), None);
    }
}
