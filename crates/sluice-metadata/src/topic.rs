//! Topic name rules (Kafka's `Topic.validate`).

pub const MAX_NAME_LENGTH: usize = 249;
pub const CONSUMER_OFFSETS: &str = "__consumer_offsets";
pub const TRANSACTION_STATE: &str = "__transaction_state";
pub const CLUSTER_METADATA: &str = "__cluster_metadata";

/// Why a topic name is invalid, or Ok.
pub fn validate_name(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("Topic name is illegal, it can't be empty".into());
    }
    if name == "." || name == ".." {
        return Err("Topic name cannot be \".\" or \"..\"".into());
    }
    if name.len() > MAX_NAME_LENGTH {
        return Err(format!(
            "Topic name is illegal, it can't be longer than {MAX_NAME_LENGTH} characters, topic name: {name}"
        ));
    }
    if !name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'_' || b == b'-')
    {
        return Err(format!(
            "Topic name \"{name}\" is illegal, it contains a character other than ASCII alphanumerics, '.', '_' and '-'"
        ));
    }
    Ok(())
}

pub fn is_internal(name: &str) -> bool {
    name == CONSUMER_OFFSETS || name == TRANSACTION_STATE || name == "__share_group_state"
}

/// Names that collide once '.' and '_' are unified (they would clash in metric names).
pub fn unify_collision_chars(name: &str) -> String {
    name.replace('.', "_")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kafka_name_rules() {
        assert!(validate_name("orders.v1_x-9").is_ok());
        for bad in ["", ".", "..", "a b", "a/b", "ü", &"x".repeat(250)] {
            assert!(validate_name(bad).is_err(), "{bad:?}");
        }
        assert!(validate_name(&"x".repeat(249)).is_ok());
        assert_eq!(unify_collision_chars("a.b_c"), "a_b_c");
    }
}
