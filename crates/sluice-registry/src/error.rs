//! [`RegistryError`]: what a request to the registry can fail with, as Confluent's REST API
//! answers it: an HTTP status and a body `{"error_code": <code>, "message": <text>}`.

/// An error answered to a registry client. `code` is Confluent's `error_code`
/// (`io.confluent.kafka.schemaregistry.rest.exceptions.Errors`), `status` the HTTP status
/// it goes with.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{message} (error code {code})")]
pub struct RegistryError {
    pub status: u16,
    pub code: i32,
    pub message: String,
}

impl RegistryError {
    fn new(status: u16, code: i32, message: impl Into<String>) -> Self {
        Self {
            status,
            code,
            message: message.into(),
        }
    }

    pub fn subject_not_found(subject: &str) -> Self {
        Self::new(404, 40401, format!("Subject '{subject}' not found."))
    }

    pub fn version_not_found(version: impl std::fmt::Display) -> Self {
        Self::new(404, 40402, format!("Version {version} not found."))
    }

    pub fn schema_not_found() -> Self {
        Self::new(404, 40403, "Schema not found")
    }

    pub fn schema_id_not_found(id: i32) -> Self {
        Self::new(404, 40403, format!("Schema {id} not found"))
    }

    pub fn subject_soft_deleted(subject: &str) -> Self {
        Self::new(
            404,
            40404,
            format!(
                "Subject '{subject}' was soft deleted.Set permanent=true to delete permanently"
            ),
        )
    }

    pub fn subject_not_soft_deleted(subject: &str) -> Self {
        Self::new(
            404,
            40405,
            format!("Subject '{subject}' was not deleted first before being permanently deleted"),
        )
    }

    pub fn version_soft_deleted(subject: &str, version: i32) -> Self {
        Self::new(
            404,
            40406,
            format!(
                "Subject '{subject}' Version {version} was soft deleted.Set permanent=true to delete permanently"
            ),
        )
    }

    pub fn version_not_soft_deleted(subject: &str, version: i32) -> Self {
        Self::new(
            404,
            40407,
            format!(
                "Subject '{subject}' Version {version} was not deleted first before being permanently deleted"
            ),
        )
    }

    pub fn subject_config_not_found(subject: &str) -> Self {
        Self::new(
            404,
            40408,
            format!("Subject '{subject}' does not have subject-level compatibility configured"),
        )
    }

    pub fn subject_mode_not_found(subject: &str) -> Self {
        Self::new(
            404,
            40409,
            format!("Subject '{subject}' does not have subject-level mode configured"),
        )
    }

    /// A schema that breaks the subject's compatibility rule: HTTP 409 with `error_code`
    /// 409, as Confluent's server sent until 2025 and Karapace still does (clients look at
    /// the status).
    pub fn incompatible(subject: &str, details: &[String]) -> Self {
        Self::new(
            409,
            409,
            format!(
                "Schema being registered is incompatible with an earlier schema for subject \"{subject}\", details: [{}]",
                details.join(", ")
            ),
        )
    }

    pub fn invalid_schema(detail: impl std::fmt::Display) -> Self {
        Self::new(422, 42201, format!("Invalid schema: {detail}"))
    }

    pub fn invalid_version(version: &str) -> Self {
        Self::new(
            422,
            42202,
            format!(
                "The specified version '{version}' is not a valid version id. Allowed values are between [1, 2^31-1] and the string \"latest\""
            ),
        )
    }

    pub fn invalid_compatibility_level(level: &str) -> Self {
        Self::new(
            422,
            42203,
            format!(
                "Invalid compatibility level '{level}'. Valid values are none, backward, forward, full, backward_transitive, forward_transitive, and full_transitive"
            ),
        )
    }

    pub fn invalid_mode(mode: &str) -> Self {
        Self::new(
            422,
            42204,
            format!("Invalid mode '{mode}'. Valid values are READWRITE, READONLY, READONLY_OVERRIDE and IMPORT"),
        )
    }

    pub fn not_permitted(detail: impl Into<String>) -> Self {
        Self::new(422, 42205, detail)
    }

    pub fn referenced(subject: &str, version: i32) -> Self {
        Self::new(
            422,
            42206,
            format!("One or more references exist to the schema {{subject={subject},version={version}}}."),
        )
    }

    pub fn invalid_subject(subject: &str) -> Self {
        Self::new(
            422,
            42208,
            format!("The specified subject '{subject}' is not a valid."),
        )
    }

    pub fn schema_too_large(limit: usize) -> Self {
        Self::new(
            422,
            42209,
            format!("Schema too large: more than {limit} bytes"),
        )
    }

    /// A request the caller's permissions do not allow (Confluent's RBAC answer).
    pub fn forbidden(detail: impl Into<String>) -> Self {
        Self::new(403, 40301, detail)
    }

    /// A request body that is not the JSON the endpoint takes (Jersey answers 400 or 422;
    /// the body carries the HTTP status as the code, as Confluent's error handler does).
    pub fn bad_request(detail: impl Into<String>) -> Self {
        Self::new(400, 400, detail)
    }

    pub fn unprocessable(detail: impl Into<String>) -> Self {
        Self::new(422, 422, detail)
    }

    pub fn not_found(detail: impl Into<String>) -> Self {
        Self::new(404, 404, detail)
    }

    pub fn store(detail: impl Into<String>) -> Self {
        Self::new(500, 50001, detail)
    }

    pub fn timeout(detail: impl Into<String>) -> Self {
        Self::new(500, 50002, detail)
    }

    pub fn forwarding(detail: impl Into<String>) -> Self {
        Self::new(500, 50003, detail)
    }

    pub fn unknown_leader(detail: impl Into<String>) -> Self {
        Self::new(500, 50004, detail)
    }

    /// The body Confluent's clients parse.
    pub fn body(&self) -> serde_json::Value {
        serde_json::json!({"error_code": self.code, "message": self.message})
    }
}
