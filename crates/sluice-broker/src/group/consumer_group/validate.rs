//! Kafka's checks of a ConsumerGroupHeartbeat request before the group sees it
//! (`GroupCoordinatorService.throwIfConsumerGroupHeartbeatRequestIsInvalid`), with its codes
//! and messages, the first failure winning.

use kafka_protocol::messages::ConsumerGroupHeartbeatRequest;
use sluice_protocol::ErrorCode;

use super::Refusal;
use crate::group::assignor::ServerAssignor;

fn blank(s: Option<&str>) -> bool {
    s.is_some_and(|s| s.trim().is_empty())
}

fn invalid(message: &str) -> Refusal {
    (ErrorCode::InvalidRequest, message.to_string())
}

/// Check `req` (sent at `version`) against Kafka's rules; `assignors` are the ones the broker
/// offers (`group.consumer.assignors`).
pub fn check_heartbeat(
    req: &ConsumerGroupHeartbeatRequest,
    version: i16,
    assignors: &[ServerAssignor],
) -> Result<(), Refusal> {
    let epoch = req.member_epoch;
    if (version >= 1 || epoch > 0 || epoch == -1) && req.member_id.trim().is_empty() {
        return Err(invalid("MemberId can't be empty."));
    }
    if req.group_id.0.trim().is_empty() {
        return Err(invalid("GroupId can't be empty."));
    }
    if blank(req.instance_id.as_deref()) {
        return Err(invalid("InstanceId can't be empty."));
    }
    if blank(req.rack_id.as_deref()) {
        return Err(invalid("RackId can't be empty."));
    }
    if epoch == 0 {
        if req.rebalance_timeout_ms == -1 {
            return Err(invalid(
                "RebalanceTimeoutMs must be provided in first request.",
            ));
        }
        if req.topic_partitions.as_ref().is_none_or(|t| !t.is_empty()) {
            return Err(invalid("TopicPartitions must be empty when (re-)joining."));
        }
        if req.subscribed_topic_names.is_none() && req.subscribed_topic_regex.is_none() {
            return Err(invalid(
                "Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when (re-)joining.",
            ));
        }
    } else if epoch == -2 && req.instance_id.is_none() {
        return Err(invalid("InstanceId can't be null."));
    } else if epoch < -2 {
        return Err(invalid("MemberEpoch is invalid."));
    }
    if let Some(name) = req.server_assignor.as_deref() {
        if !ServerAssignor::from_name(name).is_some_and(|a| assignors.contains(&a)) {
            let names: Vec<&str> = assignors.iter().map(|a| a.name()).collect();
            return Err((
                ErrorCode::UnsupportedAssignor,
                format!(
                    "ServerAssignor {name} is not supported. Supported assignors: {}.",
                    names.join(", ")
                ),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::messages::GroupId;
    use kafka_protocol::protocol::StrBytes;

    fn s(v: &str) -> StrBytes {
        StrBytes::from_string(v.to_string())
    }

    fn joining() -> ConsumerGroupHeartbeatRequest {
        let mut r = ConsumerGroupHeartbeatRequest::default();
        r.group_id = GroupId(s("g"));
        r.member_id = s("m");
        r.member_epoch = 0;
        r.rebalance_timeout_ms = 30_000;
        r.subscribed_topic_names = Some(Vec::new());
        r.topic_partitions = Some(Vec::new());
        r
    }

    type Change = Box<dyn Fn(&mut ConsumerGroupHeartbeatRequest)>;

    #[test]
    fn requests_are_refused_with_kafkas_messages_in_kafkas_order() {
        let all = [ServerAssignor::Uniform, ServerAssignor::Range];
        assert_eq!(check_heartbeat(&joining(), 1, &all), Ok(()));
        let cases: Vec<(Change, i16, &str)> = vec![
            (Box::new(|r| r.member_id = s(" ")), 1, "MemberId can't be empty."),
            (Box::new(|r| r.group_id = GroupId(s(""))), 1, "GroupId can't be empty."),
            (Box::new(|r| r.instance_id = Some(s(""))), 1, "InstanceId can't be empty."),
            (Box::new(|r| r.rack_id = Some(s(" "))), 1, "RackId can't be empty."),
            (Box::new(|r| r.rebalance_timeout_ms = -1), 1, "RebalanceTimeoutMs must be provided in first request."),
            (Box::new(|r| r.topic_partitions = None), 1, "TopicPartitions must be empty when (re-)joining."),
            (Box::new(|r| r.subscribed_topic_names = None), 1, "Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when (re-)joining."),
            (Box::new(|r| r.member_epoch = -2), 1, "InstanceId can't be null."),
            (Box::new(|r| r.member_epoch = -3), 1, "MemberEpoch is invalid."),
        ];
        for (change, version, message) in cases {
            let mut r = joining();
            change(&mut r);
            assert_eq!(
                check_heartbeat(&r, version, &all),
                Err((ErrorCode::InvalidRequest, message.to_string()))
            );
        }
        // v0 lets a joining member leave its id to the coordinator.
        let mut r = joining();
        r.member_id = s("");
        assert_eq!(check_heartbeat(&r, 0, &all), Ok(()));
        let mut r = joining();
        r.server_assignor = Some(s("sticky"));
        assert_eq!(
            check_heartbeat(&r, 1, &all),
            Err((
                ErrorCode::UnsupportedAssignor,
                "ServerAssignor sticky is not supported. Supported assignors: uniform, range."
                    .into()
            ))
        );
    }
}
