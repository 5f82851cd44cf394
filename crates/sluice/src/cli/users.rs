//! `sluice users` — SCRAM users, like `kafka-configs.sh --entity-type users` with
//! `SCRAM-SHA-256`/`SCRAM-SHA-512` configs: create or replace a user's credential, delete it,
//! and list who has which mechanism. Credentials live in cluster metadata; SASL_PLAINTEXT and
//! SASL_SSL listeners check them. The password is salted and hashed here; the broker never
//! sees it.

use clap::{ArgGroup, Args};
use sluice_client::{Admin, ScramAlteration, ScramMechanism};

use super::{usage, CliError, CliResult, ConnArgs};

#[derive(Args, Debug)]
#[command(
    group(ArgGroup::new("action").required(true).args(["add", "delete", "describe"])),
    after_help = "Examples:\n  sluice users --add alice --password alice-secret\n  sluice users --add alice --password alice-secret --mechanism SCRAM-SHA-256 --iterations 8192\n  sluice users --delete alice --mechanism SCRAM-SHA-512\n  sluice users --describe\n  sluice users --describe --user alice"
)]
pub struct UsersArgs {
    #[command(flatten)]
    pub conn: ConnArgs,
    /// Create or replace this user's credential (for each --mechanism).
    #[arg(long, value_name = "USER")]
    pub add: Option<String>,
    /// Delete this user's credential (for each --mechanism).
    #[arg(long, value_name = "USER")]
    pub delete: Option<String>,
    /// List users and their mechanisms (all, or those given with --user).
    #[arg(long)]
    pub describe: bool,
    /// With --describe: only these users (repeatable).
    #[arg(long, value_name = "USER")]
    pub user: Vec<String>,
    /// The password (for --add).
    #[arg(long, env = "SLUICE_USER_PASSWORD", hide_env_values = true)]
    pub password: Option<String>,
    /// SCRAM-SHA-256 or SCRAM-SHA-512 (repeatable; default SCRAM-SHA-512).
    #[arg(long, value_name = "MECHANISM")]
    pub mechanism: Vec<String>,
    /// PBKDF2 iterations for --add (4096..=16384).
    #[arg(long, default_value_t = 4096)]
    pub iterations: i32,
}

fn mechanisms(names: &[String]) -> Result<Vec<ScramMechanism>, CliError> {
    if names.is_empty() {
        return Ok(vec![ScramMechanism::Sha512]);
    }
    names
        .iter()
        .map(|n| {
            ScramMechanism::from_name(n).ok_or_else(|| {
                usage(format!(
                    "--mechanism {n}: expected SCRAM-SHA-256 or SCRAM-SHA-512"
                ))
            })
        })
        .collect()
}

pub async fn run(args: UsersArgs) -> CliResult {
    let admin = Admin::new(args.conn.client_config()?)?;
    if args.describe {
        let users: Vec<&str> = args.user.iter().map(String::as_str).collect();
        let found = admin.describe_user_scram_credentials(&users).await?;
        let mut failed = None;
        for (user, outcome) in found {
            match outcome {
                Ok(creds) => {
                    let list: Vec<String> = creds
                        .iter()
                        .map(|(m, i)| format!("{}=iterations={i}", m.name()))
                        .collect();
                    println!(
                        "SCRAM credential configs for user-principal '{user}' are {}",
                        list.join(", ")
                    );
                }
                Err(e) => failed = Some(format!("{user}: {e}")),
            }
        }
        return failed.map_or(Ok(()), |e| Err(CliError::Failed(e)));
    }
    let mechs = mechanisms(&args.mechanism)?;
    let changes: Vec<ScramAlteration> = if let Some(user) = &args.add {
        let password = args
            .password
            .clone()
            .filter(|p| !p.is_empty())
            .ok_or_else(|| usage("--add needs --password (or SLUICE_USER_PASSWORD)"))?;
        mechs
            .iter()
            .map(|m| ScramAlteration::Upsert {
                user: user.clone(),
                mechanism: *m,
                password: password.clone(),
                iterations: args.iterations,
            })
            .collect()
    } else {
        let user = args.delete.clone().unwrap_or_default();
        mechs
            .iter()
            .map(|m| ScramAlteration::Delete {
                user: user.clone(),
                mechanism: *m,
            })
            .collect()
    };
    if changes.len() > 1 {
        // Kafka takes one change per user per request.
        for c in &changes {
            apply(&admin, std::slice::from_ref(c)).await?;
        }
        return Ok(());
    }
    apply(&admin, &changes).await
}

async fn apply(admin: &Admin, changes: &[ScramAlteration]) -> CliResult {
    for (user, outcome) in admin.alter_user_scram_credentials(changes).await? {
        outcome.map_err(|e| CliError::Failed(format!("user {user}: {e}")))?;
        let (verb, mech) = match &changes[0] {
            ScramAlteration::Upsert { mechanism, .. } => ("Completed updating", mechanism),
            ScramAlteration::Delete { mechanism, .. } => ("Completed deleting", mechanism),
        };
        println!(
            "{verb} {} credential for user-principal '{user}'.",
            mech.name()
        );
    }
    Ok(())
}
