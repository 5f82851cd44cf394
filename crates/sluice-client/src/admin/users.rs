//! SCRAM users (what `kafka-configs.sh --entity-type users` does with `SCRAM-SHA-*`
//! configs): create, replace and delete credentials, and list who has which mechanism.
//! The password never leaves the client: it is salted and hashed here (PBKDF2) and the
//! broker receives only the salted form.

use kafka_protocol::messages::alter_user_scram_credentials_request::{
    ScramCredentialDeletion, ScramCredentialUpsertion,
};
use kafka_protocol::messages::describe_user_scram_credentials_request::UserName;
use kafka_protocol::messages::{
    AlterUserScramCredentialsRequest, AlterUserScramCredentialsResponse,
    DescribeUserScramCredentialsRequest, DescribeUserScramCredentialsResponse,
};
use sluice_protocol::scram::{self, Mechanism};

use super::{s, Admin};
use crate::error::{check, Result};

/// One change of a user's SCRAM credentials.
#[derive(Clone, Debug)]
pub enum ScramAlteration {
    /// Create or replace `user`'s credential for `mechanism`.
    Upsert {
        user: String,
        mechanism: Mechanism,
        password: String,
        iterations: i32,
    },
    /// Delete `user`'s credential for `mechanism`.
    Delete { user: String, mechanism: Mechanism },
}

/// A user's SCRAM credentials: (mechanism, iterations) each.
pub type UserScramCredentials = Vec<(Mechanism, i32)>;

impl Admin {
    /// Apply `changes`; one outcome per user (a user may appear only once per call).
    pub async fn alter_user_scram_credentials(
        &self,
        changes: &[ScramAlteration],
    ) -> Result<Vec<(String, Result<()>)>> {
        let mut req = AlterUserScramCredentialsRequest::default();
        for c in changes {
            match c {
                ScramAlteration::Upsert {
                    user,
                    mechanism,
                    password,
                    iterations,
                } => {
                    let salt = scram::random_bytes(32);
                    let salted = scram::salted_password(
                        *mechanism,
                        password.as_bytes(),
                        &salt,
                        (*iterations).max(1) as u32,
                    );
                    req.upsertions.push(
                        ScramCredentialUpsertion::default()
                            .with_name(s(user))
                            .with_mechanism(mechanism.code())
                            .with_iterations(*iterations)
                            .with_salt(salt.into())
                            .with_salted_password(salted.into()),
                    );
                }
                ScramAlteration::Delete { user, mechanism } => req.deletions.push(
                    ScramCredentialDeletion::default()
                        .with_name(s(user))
                        .with_mechanism(mechanism.code()),
                ),
            }
        }
        let conn = self.core.any_connection().await?;
        let resp: AlterUserScramCredentialsResponse = conn.call(&req).await?;
        Ok(resp
            .results
            .into_iter()
            .map(|r| {
                let outcome = check(r.error_code, r.error_message.map(|m| m.to_string()));
                (r.user.to_string(), outcome)
            })
            .collect())
    }

    /// The SCRAM credentials of `users` (empty: every user that has one).
    pub async fn describe_user_scram_credentials(
        &self,
        users: &[&str],
    ) -> Result<Vec<(String, Result<UserScramCredentials>)>> {
        let req = DescribeUserScramCredentialsRequest::default().with_users(
            (!users.is_empty()).then(|| {
                users
                    .iter()
                    .map(|u| UserName::default().with_name(s(u)))
                    .collect()
            }),
        );
        let conn = self.core.any_connection().await?;
        let resp: DescribeUserScramCredentialsResponse = conn.call(&req).await?;
        check(resp.error_code, resp.error_message.map(|m| m.to_string()))?;
        Ok(resp
            .results
            .into_iter()
            .map(|r| {
                let outcome =
                    check(r.error_code, r.error_message.map(|m| m.to_string())).map(|()| {
                        r.credential_infos
                            .iter()
                            .filter_map(|c| {
                                Some((Mechanism::from_code(c.mechanism)?, c.iterations))
                            })
                            .collect()
                    });
                (r.user.to_string(), outcome)
            })
            .collect())
    }
}
