//! `sluice acls` — like `kafka-acls.sh`: add, list and remove ACLs. A binding is a principal
//! (`--allow-principal` / `--deny-principal`, from hosts `--allow-host` / `--deny-host`,
//! default `*`), operations (`--operation`, repeatable) and a resource (`--topic`, `--group`,
//! `--cluster`, `--transactional-id`) with `--resource-pattern-type` (literal, prefixed; for
//! --list and --remove also any, match). `--producer` and `--consumer` add the usual sets.
//! ACLs take effect on brokers with `authorizer.class.name` set.

use clap::{ArgGroup, Args};
use sluice_client::acl::{self, op, pattern, permission, resource, AclBinding, AclFilter};
use sluice_client::Admin;

use super::{usage, CliError, CliResult, ConnArgs};

#[derive(Args, Debug)]
#[command(
    group(ArgGroup::new("action").required(true).args(["add", "remove", "list"])),
    after_help = "Examples:\n  sluice acls --add --allow-principal User:alice --operation Read --operation Describe --topic orders\n  sluice acls --add --allow-principal User:bob --producer --topic pay- --resource-pattern-type prefixed\n  sluice acls --add --allow-principal User:carol --consumer --topic orders --group app\n  sluice acls --add --deny-principal User:mallory --operation All --topic '*'\n  sluice acls --list [--topic orders] [--principal User:alice]\n  sluice acls --remove --allow-principal User:alice --operation Read --topic orders"
)]
pub struct AclsArgs {
    #[command(flatten)]
    pub conn: ConnArgs,
    /// Add the ACLs described by the other flags.
    #[arg(long)]
    pub add: bool,
    /// Remove the ACLs matching the other flags.
    #[arg(long)]
    pub remove: bool,
    /// List ACLs (all, or those of the given resource and/or --principal).
    #[arg(long)]
    pub list: bool,
    /// Principal to allow, e.g. User:alice (repeatable; User:* for everyone).
    #[arg(long = "allow-principal", value_name = "PRINCIPAL")]
    pub allow_principal: Vec<String>,
    /// Principal to deny (repeatable).
    #[arg(long = "deny-principal", value_name = "PRINCIPAL")]
    pub deny_principal: Vec<String>,
    /// Hosts the allow rules apply to (default *).
    #[arg(long = "allow-host", value_name = "HOST")]
    pub allow_host: Vec<String>,
    /// Hosts the deny rules apply to (default *).
    #[arg(long = "deny-host", value_name = "HOST")]
    pub deny_host: Vec<String>,
    /// Operation: Read, Write, Create, Delete, Alter, Describe, ClusterAction,
    /// DescribeConfigs, AlterConfigs, IdempotentWrite, All (repeatable).
    #[arg(long, value_name = "OPERATION")]
    pub operation: Vec<String>,
    /// With --list: only ACLs of this principal.
    #[arg(long, value_name = "PRINCIPAL")]
    pub principal: Option<String>,
    /// Topic resource (repeatable; * for all topics).
    #[arg(long, value_name = "TOPIC")]
    pub topic: Vec<String>,
    /// Consumer group resource (repeatable).
    #[arg(long, value_name = "GROUP")]
    pub group: Vec<String>,
    /// The cluster resource.
    #[arg(long)]
    pub cluster: bool,
    /// Transactional id resource (repeatable).
    #[arg(long = "transactional-id", value_name = "ID")]
    pub transactional_id: Vec<String>,
    /// literal (default), prefixed; for --list/--remove also any, match.
    #[arg(long = "resource-pattern-type", value_name = "TYPE")]
    pub resource_pattern_type: Option<String>,
    /// Producer ACLs: Write, Describe, Create on topics (and Write, Describe on
    /// --transactional-id; IdempotentWrite on the cluster with --idempotent).
    #[arg(long)]
    pub producer: bool,
    /// With --producer: IdempotentWrite on the cluster.
    #[arg(long)]
    pub idempotent: bool,
    /// Consumer ACLs: Read, Describe on topics and Read on --group.
    #[arg(long)]
    pub consumer: bool,
}

fn parse_pattern(s: Option<&str>, for_filter: bool) -> Result<i8, CliError> {
    let p = match s.map(str::to_ascii_lowercase).as_deref() {
        None | Some("literal") => pattern::LITERAL,
        Some("prefixed") => pattern::PREFIXED,
        Some("any") if for_filter => pattern::ANY,
        Some("match") if for_filter => pattern::MATCH,
        Some(other) => {
            return Err(usage(format!(
                "--resource-pattern-type {other}: expected literal or prefixed{}",
                if for_filter { " (or any, match)" } else { "" }
            )))
        }
    };
    Ok(p)
}

/// The resources the flags name: (type, name).
fn resources(a: &AclsArgs) -> Vec<(i8, String)> {
    let mut out: Vec<(i8, String)> = Vec::new();
    out.extend(a.topic.iter().map(|t| (resource::TOPIC, t.clone())));
    out.extend(a.group.iter().map(|g| (resource::GROUP, g.clone())));
    out.extend(
        a.transactional_id
            .iter()
            .map(|t| (resource::TRANSACTIONAL_ID, t.clone())),
    );
    if a.cluster || (a.producer && a.idempotent) {
        out.push((resource::CLUSTER, acl::CLUSTER_NAME.to_string()));
    }
    out
}

/// The operations for one resource type: --operation, or the --producer/--consumer sets.
fn operations(a: &AclsArgs, resource_type: i8) -> Result<Vec<i8>, CliError> {
    let mut ops = a
        .operation
        .iter()
        .map(|o| op::parse(o).ok_or_else(|| usage(format!("--operation {o}: unknown operation"))))
        .collect::<Result<Vec<i8>, CliError>>()?;
    if a.producer {
        ops.extend(match resource_type {
            resource::TOPIC => &[op::WRITE, op::DESCRIBE, op::CREATE][..],
            resource::TRANSACTIONAL_ID => &[op::WRITE, op::DESCRIBE][..],
            resource::CLUSTER => &[op::IDEMPOTENT_WRITE][..],
            _ => &[][..],
        });
    }
    if a.consumer {
        ops.extend(match resource_type {
            resource::TOPIC => &[op::READ, op::DESCRIBE][..],
            resource::GROUP => &[op::READ][..],
            _ => &[][..],
        });
    }
    ops.sort_unstable();
    ops.dedup();
    Ok(ops)
}

/// (principal, host, permission) of every allow and deny rule.
fn rules(a: &AclsArgs) -> Vec<(String, String, i8)> {
    let hosts = |h: &[String]| -> Vec<String> {
        if h.is_empty() {
            vec![acl::WILDCARD.to_string()]
        } else {
            h.to_vec()
        }
    };
    let mut out = Vec::new();
    for p in &a.allow_principal {
        for h in hosts(&a.allow_host) {
            out.push((p.clone(), h, permission::ALLOW));
        }
    }
    for p in &a.deny_principal {
        for h in hosts(&a.deny_host) {
            out.push((p.clone(), h, permission::DENY));
        }
    }
    out
}

fn show(b: &AclBinding) -> String {
    format!(
        "(principal={}, host={}, operation={}, permissionType={})",
        b.principal,
        b.host,
        op::name(b.operation),
        permission::name(b.permission)
    )
}

fn resource_line(b: &AclBinding) -> String {
    format!(
        "ResourcePattern(resourceType={}, name={}, patternType={})",
        resource::name(b.resource_type),
        b.resource_name,
        pattern::name(b.pattern_type)
    )
}

fn print_grouped(bindings: &[AclBinding]) {
    let mut sorted = bindings.to_vec();
    sorted.sort();
    let mut current = None;
    for b in &sorted {
        let r = resource_line(b);
        if current.as_ref() != Some(&r) {
            println!("Current ACLs for resource `{r}`: ");
            current = Some(r);
        }
        println!(" \t{} ", show(b));
    }
}

pub async fn run(args: AclsArgs) -> CliResult {
    let admin = Admin::new(args.conn.client_config()?)?;
    let res = resources(&args);
    if args.list {
        let pattern_type = parse_pattern(args.resource_pattern_type.as_deref(), true)?;
        let filters: Vec<AclFilter> = if res.is_empty() {
            vec![AclFilter {
                resource_type: resource::ANY,
                resource_name: None,
                pattern_type: pattern::ANY,
                principal: args.principal.clone(),
                host: None,
                operation: op::ANY,
                permission: permission::ANY,
            }]
        } else {
            res.iter()
                .map(|(t, n)| AclFilter {
                    resource_type: *t,
                    resource_name: Some(n.clone()),
                    pattern_type: if args.resource_pattern_type.is_none() {
                        pattern::ANY
                    } else {
                        pattern_type
                    },
                    principal: args.principal.clone(),
                    host: None,
                    operation: op::ANY,
                    permission: permission::ANY,
                })
                .collect()
        };
        let mut all = Vec::new();
        for f in &filters {
            all.extend(admin.describe_acls(f).await?);
        }
        print_grouped(&all);
        return Ok(());
    }
    if res.is_empty() {
        return Err(usage(
            "name a resource: --topic, --group, --cluster or --transactional-id",
        ));
    }
    let rules = rules(&args);
    if rules.is_empty() {
        return Err(usage(
            "name a principal: --allow-principal or --deny-principal",
        ));
    }
    if args.add {
        let pattern_type = parse_pattern(args.resource_pattern_type.as_deref(), false)?;
        let mut bindings = Vec::new();
        for (t, name) in &res {
            let ops = operations(&args, *t)?;
            if ops.is_empty() && !args.producer && !args.consumer {
                return Err(usage(
                    "name an --operation (or use --producer / --consumer)",
                ));
            }
            for o in ops {
                for (principal, host, perm) in &rules {
                    bindings.push(AclBinding {
                        resource_type: *t,
                        resource_name: name.clone(),
                        pattern_type: if *t == resource::CLUSTER {
                            pattern::LITERAL
                        } else {
                            pattern_type
                        },
                        principal: principal.clone(),
                        host: host.clone(),
                        operation: o,
                        permission: *perm,
                    });
                }
            }
        }
        let outcomes = admin.create_acls(&bindings).await?;
        for (b, outcome) in bindings.iter().zip(outcomes) {
            outcome.map_err(|e| CliError::Failed(format!("{}: {e}", show(b))))?;
        }
        println!("Adding ACLs:");
        print_grouped(&bindings);
        return Ok(());
    }
    let pattern_type = parse_pattern(args.resource_pattern_type.as_deref(), true)?;
    let mut filters = Vec::new();
    for (t, name) in &res {
        let ops = operations(&args, *t)?;
        let ops = if ops.is_empty() { vec![op::ANY] } else { ops };
        for o in ops {
            for (principal, host, perm) in &rules {
                filters.push(AclFilter {
                    resource_type: *t,
                    resource_name: Some(name.clone()),
                    pattern_type,
                    principal: Some(principal.clone()),
                    host: Some(host.clone()),
                    operation: o,
                    permission: *perm,
                });
            }
        }
    }
    let mut removed = Vec::new();
    for outcome in admin.delete_acls(&filters).await? {
        removed.extend(outcome?);
    }
    println!("Removed ACLs:");
    print_grouped(&removed);
    Ok(())
}
