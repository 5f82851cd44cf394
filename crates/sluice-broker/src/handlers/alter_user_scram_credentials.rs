//! AlterUserScramCredentials (key 51): create, replace or delete users' SCRAM credentials,
//! stored in cluster metadata. The client sends the salted password (never the password);
//! the broker turns it into the stored form (StoredKey, ServerKey) before forwarding to the
//! controller. As in Kafka, a user may be altered only once per request
//! (DUPLICATE_RESOURCE), must be named (UNACCEPTABLE_CREDENTIAL), with a known mechanism
//! (UNSUPPORTED_SASL_MECHANISM) and 4096..=16384 iterations (UNACCEPTABLE_CREDENTIAL).

use bytes::Bytes;
use kafka_protocol::messages::alter_user_scram_credentials_response::AlterUserScramCredentialsResult;
use kafka_protocol::messages::{
    AlterUserScramCredentialsRequest, AlterUserScramCredentialsResponse, ApiKey,
};
use sluice_metadata::acl::op;
use sluice_metadata::controller_types::{ApiError, ScramChange};
use sluice_metadata::image::ScramEntry;
use sluice_protocol::scram::{self, Mechanism};
use sluice_protocol::ErrorCode;

use crate::request::{str_bytes, HandlerError, RequestContext, Response};

handler!(
    ApiKey::AlterUserScramCredentials,
    0,
    0,
    AlterUserScramCredentials {
        controller: crate::services::controller::ControllerClient,
        access: crate::authorizer::Access
    }
);

/// Why a user's change is refused before it reaches the controller.
fn check(user: &str, mechanism: i8, iterations: Option<i32>) -> Result<Mechanism, ApiError> {
    if user.is_empty() {
        return Err(ApiError::new(
            ErrorCode::UnacceptableCredential,
            "Username must not be empty",
        ));
    }
    let mech = Mechanism::from_code(mechanism).ok_or_else(|| {
        ApiError::new(
            ErrorCode::UnsupportedSaslMechanism,
            "Unknown SCRAM mechanism",
        )
    })?;
    match iterations {
        Some(i) if i < scram::MIN_ITERATIONS => Err(ApiError::new(
            ErrorCode::UnacceptableCredential,
            "Too few iterations",
        )),
        Some(i) if i > scram::MAX_ITERATIONS => Err(ApiError::new(
            ErrorCode::UnacceptableCredential,
            "Too many iterations",
        )),
        _ => Ok(mech),
    }
}

async fn handle(
    h: &AlterUserScramCredentials,
    ctx: &RequestContext,
    body: Bytes,
) -> Result<Response, HandlerError> {
    let req: AlterUserScramCredentialsRequest = ctx.decode(body)?;
    let cluster_denied = !h.access.check(ctx).cluster(op::ALTER);
    // Users in request order, each with its change or why it is refused.
    let mut users: Vec<(String, Result<ScramChange, ApiError>)> = Vec::new();
    let deletions = req
        .deletions
        .iter()
        .map(|d| (d.name.to_string(), d.mechanism, None));
    let upsertions = req.upsertions.iter().map(|u| {
        (
            u.name.to_string(),
            u.mechanism,
            Some((u.iterations, &u.salt, &u.salted_password)),
        )
    });
    for (user, mechanism, upsert) in deletions.chain(upsertions) {
        if cluster_denied {
            if !users.iter().any(|(u, _)| *u == user) {
                let e = ApiError::new(
                    ErrorCode::ClusterAuthorizationFailed,
                    "Cluster authorization failed.",
                );
                users.push((user, Err(e)));
            }
            continue;
        }
        if let Some((_, outcome)) = users.iter_mut().find(|(u, _)| *u == user) {
            *outcome = Err(ApiError::new(
                ErrorCode::DuplicateResource,
                "A user credential cannot be altered twice in the same request",
            ));
            continue;
        }
        let outcome = check(&user, mechanism, upsert.map(|(i, _, _)| i)).map(|mech| {
            let entry = upsert.map(|(iterations, salt, salted)| {
                let c = scram::credential_from_salted(mech, salt, salted, iterations);
                ScramEntry {
                    salt: c.salt,
                    stored_key: c.stored_key,
                    server_key: c.server_key,
                    iterations: c.iterations,
                }
            });
            (user.clone(), mechanism, entry)
        });
        users.push((user, outcome));
    }
    let changes: Vec<ScramChange> = users
        .iter()
        .filter_map(|(_, o)| o.as_ref().ok().cloned())
        .collect();
    let mut stored = if changes.is_empty() {
        Ok(Vec::new())
    } else {
        h.controller.api().alter_scram_credentials(&changes).await
    };
    let mut resp = AlterUserScramCredentialsResponse::default();
    for (user, outcome) in users {
        let result = match (outcome, &mut stored) {
            (Err(e), _) => Err(e),
            (Ok(_), Ok(done)) => done.iter().find(|(u, _)| *u == user).map_or_else(
                || {
                    Err(ApiError::new(
                        ErrorCode::UnknownServerError,
                        "the controller did not answer for this user",
                    ))
                },
                |(_, r)| r.clone(),
            ),
            (Ok(_), Err(e)) => Err(ApiError::new(ErrorCode::UnknownServerError, e.clone())),
        };
        let mut r = AlterUserScramCredentialsResult::default();
        r.user = str_bytes(user);
        if let Err(e) = result {
            r.error_code = e.code.code();
            r.error_message = Some(str_bytes(e.message));
        }
        resp.results.push(r);
    }
    ctx.respond(&resp)
}
