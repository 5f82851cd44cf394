//! DescribeUserScramCredentials (key 50): which SCRAM mechanisms (and iteration counts)
//! each user has, from cluster metadata. No users named means every user with a credential;
//! a named user without one is RESOURCE_NOT_FOUND, one named twice DUPLICATE_RESOURCE.

use std::collections::BTreeMap;

use bytes::Bytes;
use kafka_protocol::messages::describe_user_scram_credentials_response::{
    CredentialInfo, DescribeUserScramCredentialsResult,
};
use kafka_protocol::messages::{
    ApiKey, DescribeUserScramCredentialsRequest, DescribeUserScramCredentialsResponse,
};
use sluice_metadata::acl::op;
use sluice_protocol::ErrorCode;

use crate::request::{str_bytes, HandlerError, RequestContext, Response};

handler!(
    ApiKey::DescribeUserScramCredentials,
    0,
    0,
    DescribeUserScramCredentials {
        metadata: crate::metadata_cache::MetadataCache,
        access: crate::authorizer::Access
    },
    sync
);

fn handle(
    h: &DescribeUserScramCredentials,
    ctx: &RequestContext,
    body: Bytes,
) -> Result<Response, HandlerError> {
    let req: DescribeUserScramCredentialsRequest = ctx.decode(body)?;
    if !h.access.check(ctx).cluster(op::DESCRIBE) {
        let mut resp = DescribeUserScramCredentialsResponse::default();
        resp.error_code = ErrorCode::ClusterAuthorizationFailed.code();
        resp.error_message = Some(str_bytes("Cluster authorization failed."));
        return ctx.respond(&resp);
    }
    let image = h.metadata.current();
    let mut by_user: BTreeMap<&str, Vec<CredentialInfo>> = BTreeMap::new();
    for ((user, mechanism), c) in &image.scram {
        let mut info = CredentialInfo::default();
        info.mechanism = *mechanism;
        info.iterations = c.iterations;
        by_user.entry(user.as_str()).or_default().push(info);
    }
    let mut resp = DescribeUserScramCredentialsResponse::default();
    let result = |user: &str, infos: Option<&Vec<CredentialInfo>>, duplicate: bool| {
        let mut r = DescribeUserScramCredentialsResult::default();
        r.user = str_bytes(user);
        match infos {
            _ if duplicate => {
                r.error_code = ErrorCode::DuplicateResource.code();
                r.error_message = Some(str_bytes(format!(
                    "Cannot describe SCRAM credentials for the same user twice in a single request: {user}"
                )));
            }
            Some(infos) => r.credential_infos = infos.clone(),
            None => {
                r.error_code = ErrorCode::ResourceNotFound.code();
                r.error_message = Some(str_bytes(format!(
                    "Attempt to describe a user credential that does not exist: {user}"
                )));
            }
        }
        r
    };
    match req.users.filter(|u| !u.is_empty()) {
        None => {
            for (user, infos) in &by_user {
                resp.results.push(result(user, Some(infos), false));
            }
        }
        Some(users) => {
            let names: Vec<String> = users.iter().map(|u| u.name.to_string()).collect();
            for (i, name) in names.iter().enumerate() {
                if names[..i].contains(name) {
                    continue;
                }
                let duplicate = names[i + 1..].contains(name);
                resp.results
                    .push(result(name, by_user.get(name.as_str()), duplicate));
            }
        }
    }
    ctx.respond(&resp)
}
