//! The authorizer, API by API: a principal without the ACL gets Kafka's authorization error,
//! with it the request goes through; prefixed and deny rules; super users; and the
//! `sluice acls` tool. Principals come from a SASL/PLAIN listener, one user per case so the
//! ACLs granted for one case cannot make another pass.

mod common;
#[path = "common/wire.rs"]
mod wire;

use bytes::Bytes;
use common::*;
use kafka_protocol::messages::add_partitions_to_txn_request::{
    AddPartitionsToTxnTopic, AddPartitionsToTxnTransaction,
};
use kafka_protocol::messages::alter_configs_request::{
    AlterConfigsResource, AlterableConfig as LegacyConfig,
};
use kafka_protocol::messages::alter_partition_reassignments_request::ReassignableTopic;
use kafka_protocol::messages::create_acls_request::AclCreation;
use kafka_protocol::messages::create_partitions_request::CreatePartitionsTopic;
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::delete_records_request::{
    DeleteRecordsPartition, DeleteRecordsTopic,
};
use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::describe_producers_request::TopicRequest;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::incremental_alter_configs_request::{
    AlterConfigsResource as IncResource, AlterableConfig,
};
use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::offset_delete_request::{
    OffsetDeleteRequestPartition, OffsetDeleteRequestTopic,
};
use kafka_protocol::messages::offset_for_leader_epoch_request::{
    OffsetForLeaderPartition, OffsetForLeaderTopic,
};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::txn_offset_commit_request::{
    TxnOffsetCommitRequestPartition, TxnOffsetCommitRequestTopic,
};
use kafka_protocol::messages::write_txn_markers_request::{
    WritableTxnMarker, WritableTxnMarkerTopic,
};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use sluice_protocol::acl::{op, pattern, permission, resource, AclBinding, CLUSTER_NAME};
use sluice_protocol::batch::BatchBuilder;
use sluice_protocol::compression::Compression;
use sluice_protocol::ErrorCode;
use wire::Wire;

const USERS: usize = 48;

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.into())
}

fn topic(v: &str) -> TopicName {
    TopicName(s(v))
}

/// A node with a SASL/PLAIN listener for users u0..u47 and `admin`, ACLs enforced; the
/// PLAINTEXT listener (brokers' own traffic, and the tests' setup) is a super user.
fn start_secured() -> (TestServer, String) {
    start_secured_with(&[])
}

fn start_secured_with(extra: &[&str]) -> (TestServer, String) {
    let mut users: String = (0..USERS).map(|i| format!(" user_u{i}=\"pw\"")).collect();
    users.push_str(" user_admin=\"pw\"");
    let jaas = format!(
        "listener.name.sasl_plaintext.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required{users};"
    );
    let mut overrides = vec![
        "listeners=PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
        "sasl.enabled.mechanisms=PLAIN",
        &jaas,
        "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users=User:admin;User:ANONYMOUS",
    ];
    overrides.extend_from_slice(extra);
    let server = start(&overrides);
    let sasl = server.listener("SASL_PLAINTEXT").expect("SASL listener");
    (server, sasl)
}

/// The topics Metadata shows this connection's principal, sorted.
fn listed(w: &mut Wire) -> Vec<String> {
    let resp: MetadataResponse = w.call(
        ApiKey::Metadata,
        12,
        &MetadataRequest::default().with_topics(None),
    );
    let mut names: Vec<String> = resp
        .topics
        .iter()
        .filter_map(|t| t.name.as_ref().map(|n| n.to_string()))
        .collect();
    names.sort();
    names
}

fn login(addr: &str, user: &str) -> Wire {
    let mut w = Wire::connect(addr);
    let hs: SaslHandshakeResponse = w.call(
        ApiKey::SaslHandshake,
        1,
        &SaslHandshakeRequest::default().with_mechanism(s("PLAIN")),
    );
    assert_eq!(hs.error_code, 0);
    let token = format!("\0{user}\0pw").into_bytes();
    let auth: SaslAuthenticateResponse = w.call(
        ApiKey::SaslAuthenticate,
        2,
        &SaslAuthenticateRequest::default().with_auth_bytes(token.into()),
    );
    assert_eq!(auth.error_code, 0, "{user} logs in");
    w
}

fn grant(w: &mut Wire, acls: &[AclBinding]) {
    let req = CreateAclsRequest::default().with_creations(
        acls.iter()
            .map(|b| {
                AclCreation::default()
                    .with_resource_type(b.resource_type)
                    .with_resource_name(s(&b.resource_name))
                    .with_resource_pattern_type(b.pattern_type)
                    .with_principal(s(&b.principal))
                    .with_host(s(&b.host))
                    .with_operation(b.operation)
                    .with_permission_type(b.permission)
            })
            .collect(),
    );
    let resp: CreateAclsResponse = w.call(ApiKey::CreateAcls, 3, &req);
    for r in resp.results {
        assert_eq!(r.error_code, 0, "{:?}", r.error_message);
    }
}

fn allow(user: &str, rt: i8, name: &str, operation: i8) -> AclBinding {
    AclBinding {
        resource_type: rt,
        resource_name: name.into(),
        pattern_type: pattern::LITERAL,
        principal: format!("User:{user}"),
        host: "*".into(),
        operation,
        permission: permission::ALLOW,
    }
}

fn records() -> Bytes {
    let mut b = BatchBuilder::new(Compression::None);
    b.append(0, Some(b"k"), Some(b"v"), &[]);
    Bytes::from(b.build(0).unwrap())
}

fn create_topic_as(w: &mut Wire, name: &str, partitions: i32) -> i16 {
    let req = CreateTopicsRequest::default()
        .with_timeout_ms(10_000)
        .with_topics(vec![CreatableTopic::default()
            .with_name(topic(name))
            .with_num_partitions(partitions)
            .with_replication_factor(1)]);
    let resp: CreateTopicsResponse = w.call(ApiKey::CreateTopics, 5, &req);
    resp.topics[0].error_code
}

/// One request and the error code that tells whether it was authorized.
type Probe = Box<dyn Fn(&mut Wire) -> i16>;

struct Case {
    api: &'static str,
    probe: Probe,
    /// The error without the ACLs.
    denied: ErrorCode,
    /// What to grant (the user's name is filled in).
    grants: Vec<(i8, &'static str, i8)>,
    /// With the ACLs: None = any code but `denied`; Some(code) exactly.
    then: Option<i16>,
}

fn case(
    api: &'static str,
    denied: ErrorCode,
    grants: Vec<(i8, &'static str, i8)>,
    then: Option<i16>,
    probe: impl Fn(&mut Wire) -> i16 + 'static,
) -> Case {
    Case {
        api,
        probe: Box::new(probe),
        denied,
        grants,
        then,
    }
}

fn cases() -> Vec<Case> {
    use resource::{CLUSTER, GROUP, TOPIC, TRANSACTIONAL_ID as TXN};
    use ErrorCode::*;
    let c = CLUSTER_NAME;
    vec![
        case(
            "Metadata",
            TopicAuthorizationFailed,
            vec![(TOPIC, "t", op::DESCRIBE)],
            Some(0),
            |w| {
                let req = MetadataRequest::default().with_topics(Some(vec![
                    MetadataRequestTopic::default().with_name(Some(topic("t"))),
                ]));
                let resp: MetadataResponse = w.call(ApiKey::Metadata, 12, &req);
                resp.topics[0].error_code
            },
        ),
        case(
            "Produce",
            TopicAuthorizationFailed,
            vec![(TOPIC, "t", op::WRITE)],
            Some(0),
            |w| {
                let req = ProduceRequest::default()
                    .with_acks(1)
                    .with_timeout_ms(5000)
                    .with_topic_data(vec![TopicProduceData::default()
                        .with_name(topic("t"))
                        .with_partition_data(vec![PartitionProduceData::default()
                            .with_index(0)
                            .with_records(Some(records()))])]);
                let resp: ProduceResponse = w.call(ApiKey::Produce, 9, &req);
                resp.responses[0].partition_responses[0].error_code
            },
        ),
        case(
            "Fetch",
            TopicAuthorizationFailed,
            vec![(TOPIC, "t", op::READ)],
            Some(0),
            |w| {
                let resp: FetchResponse = w.call(ApiKey::Fetch, 12, &fetch(-1));
                resp.responses[0].partitions[0].error_code
            },
        ),
        case(
            "Fetch (follower)",
            TopicAuthorizationFailed,
            vec![(CLUSTER, c, op::CLUSTER_ACTION)],
            None,
            |w| {
                let resp: FetchResponse = w.call(ApiKey::Fetch, 12, &fetch(7));
                resp.responses[0].partitions[0].error_code
            },
        ),
        case(
            "ListOffsets",
            TopicAuthorizationFailed,
            vec![(TOPIC, "t", op::DESCRIBE)],
            Some(0),
            |w| {
                let req = ListOffsetsRequest::default()
                    .with_replica_id(BrokerId(-1))
                    .with_topics(vec![ListOffsetsTopic::default()
                        .with_name(topic("t"))
                        .with_partitions(vec![ListOffsetsPartition::default()
                            .with_partition_index(0)
                            .with_timestamp(-1)])]);
                let resp: ListOffsetsResponse = w.call(ApiKey::ListOffsets, 7, &req);
                resp.topics[0].partitions[0].error_code
            },
        ),
        case(
            "OffsetForLeaderEpoch",
            TopicAuthorizationFailed,
            vec![(TOPIC, "t", op::DESCRIBE)],
            Some(0),
            |w| {
                let req = OffsetForLeaderEpochRequest::default()
                    .with_replica_id(BrokerId(-1))
                    .with_topics(vec![OffsetForLeaderTopic::default()
                        .with_topic(topic("t"))
                        .with_partitions(vec![OffsetForLeaderPartition::default()
                            .with_partition(0)
                            .with_leader_epoch(0)
                            .with_current_leader_epoch(-1)])]);
                let resp: OffsetForLeaderEpochResponse =
                    w.call(ApiKey::OffsetForLeaderEpoch, 4, &req);
                resp.topics[0].partitions[0].error_code
            },
        ),
        case(
            "DescribeProducers",
            TopicAuthorizationFailed,
            vec![(TOPIC, "t", op::READ)],
            Some(0),
            |w| {
                let req =
                    DescribeProducersRequest::default().with_topics(vec![TopicRequest::default()
                        .with_name(topic("t"))
                        .with_partition_indexes(vec![0])]);
                let resp: DescribeProducersResponse = w.call(ApiKey::DescribeProducers, 0, &req);
                resp.topics[0].partitions[0].error_code
            },
        ),
        case(
            "DeleteRecords",
            TopicAuthorizationFailed,
            vec![(TOPIC, "t", op::DELETE)],
            Some(0),
            |w| {
                let req = DeleteRecordsRequest::default()
                    .with_timeout_ms(5000)
                    .with_topics(vec![DeleteRecordsTopic::default()
                        .with_name(topic("t"))
                        .with_partitions(vec![DeleteRecordsPartition::default()
                            .with_partition_index(0)
                            .with_offset(0)])]);
                let resp: DeleteRecordsResponse = w.call(ApiKey::DeleteRecords, 2, &req);
                resp.topics[0].partitions[0].error_code
            },
        ),
        // A prefixed rule: CREATE on every topic starting "new-".
        case(
            "CreateTopics",
            TopicAuthorizationFailed,
            vec![(TOPIC, "new-", op::CREATE)],
            Some(0),
            |w| create_topic_as(w, &format!("new-{}", uuid_like(w)), 1),
        ),
        case(
            "CreatePartitions",
            TopicAuthorizationFailed,
            vec![(TOPIC, "grow", op::ALTER)],
            Some(0),
            |w| {
                let req = CreatePartitionsRequest::default()
                    .with_timeout_ms(5000)
                    .with_topics(vec![CreatePartitionsTopic::default()
                        .with_name(topic("grow"))
                        .with_count(2)
                        .with_assignments(None)]);
                let resp: CreatePartitionsResponse = w.call(ApiKey::CreatePartitions, 3, &req);
                resp.results[0].error_code
            },
        ),
        case(
            "DeleteTopics",
            TopicAuthorizationFailed,
            vec![(TOPIC, "doomed", op::DELETE)],
            Some(0),
            |w| {
                let req = DeleteTopicsRequest::default()
                    .with_timeout_ms(5000)
                    .with_topic_names(vec![topic("doomed")]);
                let resp: DeleteTopicsResponse = w.call(ApiKey::DeleteTopics, 5, &req);
                resp.responses[0].error_code
            },
        ),
        case(
            "DescribeConfigs (topic)",
            TopicAuthorizationFailed,
            vec![(TOPIC, "t", op::DESCRIBE_CONFIGS)],
            Some(0),
            |w| describe_configs(w, 2, "t"),
        ),
        case(
            "DescribeConfigs (broker)",
            ClusterAuthorizationFailed,
            vec![(CLUSTER, c, op::DESCRIBE_CONFIGS)],
            Some(0),
            |w| describe_configs(w, 4, "0"),
        ),
        case(
            "DescribeConfigs (client metrics)",
            ClusterAuthorizationFailed,
            vec![(CLUSTER, c, op::DESCRIBE_CONFIGS)],
            Some(0),
            |w| describe_configs(w, 16, "subscription"),
        ),
        case(
            "IncrementalAlterConfigs (client metrics)",
            ClusterAuthorizationFailed,
            vec![(CLUSTER, c, op::ALTER_CONFIGS)],
            Some(0),
            |w| {
                let req = IncrementalAlterConfigsRequest::default().with_resources(vec![
                    IncResource::default()
                        .with_resource_type(16)
                        .with_resource_name(s("subscription"))
                        .with_configs(vec![AlterableConfig::default()
                            .with_name(s("metrics"))
                            .with_config_operation(0)
                            .with_value(Some(s("org.apache.kafka.producer.")))]),
                ]);
                let resp: IncrementalAlterConfigsResponse =
                    w.call(ApiKey::IncrementalAlterConfigs, 1, &req);
                resp.responses[0].error_code
            },
        ),
        case(
            "AlterConfigs",
            TopicAuthorizationFailed,
            vec![(TOPIC, "t", op::ALTER_CONFIGS)],
            Some(0),
            |w| {
                let req = AlterConfigsRequest::default().with_resources(vec![
                    AlterConfigsResource::default()
                        .with_resource_type(2)
                        .with_resource_name(s("t"))
                        .with_configs(vec![LegacyConfig::default()
                            .with_name(s("retention.ms"))
                            .with_value(Some(s("86400000")))]),
                ]);
                let resp: AlterConfigsResponse = w.call(ApiKey::AlterConfigs, 2, &req);
                resp.responses[0].error_code
            },
        ),
        case(
            "IncrementalAlterConfigs",
            TopicAuthorizationFailed,
            vec![(TOPIC, "t", op::ALTER_CONFIGS)],
            Some(0),
            |w| {
                let req = IncrementalAlterConfigsRequest::default().with_resources(vec![
                    IncResource::default()
                        .with_resource_type(2)
                        .with_resource_name(s("t"))
                        .with_configs(vec![AlterableConfig::default()
                            .with_name(s("retention.ms"))
                            .with_config_operation(0)
                            .with_value(Some(s("86400000")))]),
                ]);
                let resp: IncrementalAlterConfigsResponse =
                    w.call(ApiKey::IncrementalAlterConfigs, 1, &req);
                resp.responses[0].error_code
            },
        ),
        case(
            "FindCoordinator (group)",
            GroupAuthorizationFailed,
            vec![(GROUP, "g", op::DESCRIBE)],
            None,
            |w| find_coordinator(w, 0, "g"),
        ),
        case(
            "FindCoordinator (transaction)",
            TransactionalIdAuthorizationFailed,
            vec![(TXN, "tx", op::DESCRIBE)],
            None,
            |w| find_coordinator(w, 1, "tx"),
        ),
        case(
            "JoinGroup",
            GroupAuthorizationFailed,
            vec![(GROUP, "g", op::READ)],
            None,
            |w| {
                let req = JoinGroupRequest::default()
                    .with_group_id(GroupId(s("g")))
                    .with_session_timeout_ms(10_000)
                    .with_rebalance_timeout_ms(10_000)
                    .with_member_id(s(""))
                    .with_protocol_type(s("consumer"))
                    .with_protocols(vec![JoinGroupRequestProtocol::default()
                        .with_name(s("range"))
                        .with_metadata(Bytes::new())]);
                let resp: JoinGroupResponse = w.call(ApiKey::JoinGroup, 7, &req);
                resp.error_code
            },
        ),
        case(
            "SyncGroup",
            GroupAuthorizationFailed,
            vec![(GROUP, "g", op::READ)],
            None,
            |w| {
                let req = SyncGroupRequest::default()
                    .with_group_id(GroupId(s("g")))
                    .with_generation_id(1)
                    .with_member_id(s("nobody"));
                let resp: SyncGroupResponse = w.call(ApiKey::SyncGroup, 5, &req);
                resp.error_code
            },
        ),
        case(
            "Heartbeat",
            GroupAuthorizationFailed,
            vec![(GROUP, "g", op::READ)],
            None,
            |w| {
                let req = HeartbeatRequest::default()
                    .with_group_id(GroupId(s("g")))
                    .with_generation_id(1)
                    .with_member_id(s("nobody"));
                let resp: HeartbeatResponse = w.call(ApiKey::Heartbeat, 4, &req);
                resp.error_code
            },
        ),
        case(
            "LeaveGroup",
            GroupAuthorizationFailed,
            vec![(GROUP, "g", op::READ)],
            None,
            |w| {
                let req = LeaveGroupRequest::default()
                    .with_group_id(GroupId(s("g")))
                    .with_member_id(s("nobody"));
                let resp: LeaveGroupResponse = w.call(ApiKey::LeaveGroup, 2, &req);
                resp.error_code
            },
        ),
        // Both the group and the topic: READ on each.
        case(
            "OffsetCommit",
            GroupAuthorizationFailed,
            vec![(GROUP, "gc", op::READ), (TOPIC, "t", op::READ)],
            Some(0),
            |w| {
                let req = OffsetCommitRequest::default()
                    .with_group_id(GroupId(s("gc")))
                    .with_generation_id_or_member_epoch(-1)
                    .with_member_id(s(""))
                    .with_topics(vec![OffsetCommitRequestTopic::default()
                        .with_name(topic("t"))
                        .with_partitions(vec![OffsetCommitRequestPartition::default()
                            .with_partition_index(0)
                            .with_committed_offset(0)])]);
                let resp: OffsetCommitResponse = w.call(ApiKey::OffsetCommit, 8, &req);
                resp.topics[0].partitions[0].error_code
            },
        ),
        case(
            "OffsetFetch",
            GroupAuthorizationFailed,
            vec![(GROUP, "g", op::DESCRIBE)],
            Some(0),
            |w| {
                let req = OffsetFetchRequest::default()
                    .with_group_id(GroupId(s("g")))
                    .with_topics(None);
                let resp: OffsetFetchResponse = w.call(ApiKey::OffsetFetch, 7, &req);
                resp.error_code
            },
        ),
        case(
            "DescribeGroups",
            GroupAuthorizationFailed,
            vec![(GROUP, "g", op::DESCRIBE)],
            Some(0),
            |w| {
                let req = DescribeGroupsRequest::default().with_groups(vec![GroupId(s("g"))]);
                let resp: DescribeGroupsResponse = w.call(ApiKey::DescribeGroups, 5, &req);
                resp.groups[0].error_code
            },
        ),
        case(
            "DeleteGroups",
            GroupAuthorizationFailed,
            vec![(GROUP, "g-gone", op::DELETE)],
            None,
            |w| {
                let req =
                    DeleteGroupsRequest::default().with_groups_names(vec![GroupId(s("g-gone"))]);
                let resp: DeleteGroupsResponse = w.call(ApiKey::DeleteGroups, 2, &req);
                resp.results[0].error_code
            },
        ),
        case(
            "OffsetDelete",
            GroupAuthorizationFailed,
            vec![(GROUP, "g", op::DELETE), (TOPIC, "t", op::READ)],
            None,
            |w| {
                let req = OffsetDeleteRequest::default()
                    .with_group_id(GroupId(s("g")))
                    .with_topics(vec![OffsetDeleteRequestTopic::default()
                        .with_name(topic("t"))
                        .with_partitions(vec![
                            OffsetDeleteRequestPartition::default().with_partition_index(0)
                        ])]);
                let resp: OffsetDeleteResponse = w.call(ApiKey::OffsetDelete, 0, &req);
                resp.error_code
            },
        ),
        case(
            "InitProducerId (transactional)",
            TransactionalIdAuthorizationFailed,
            vec![(TXN, "tx", op::WRITE)],
            None,
            |w| init_producer_id(w, Some("tx")),
        ),
        // An idempotent producer: WRITE on some topic is enough (or IDEMPOTENT_WRITE).
        case(
            "InitProducerId (idempotent)",
            ClusterAuthorizationFailed,
            vec![(TOPIC, "t", op::WRITE)],
            Some(0),
            |w| init_producer_id(w, None),
        ),
        case(
            "AddPartitionsToTxn",
            TransactionalIdAuthorizationFailed,
            vec![(TXN, "tx2", op::WRITE), (TOPIC, "t", op::WRITE)],
            None,
            |w| {
                let req = AddPartitionsToTxnRequest::default()
                    .with_v3_and_below_transactional_id(TransactionalId(s("tx2")))
                    .with_v3_and_below_producer_id(ProducerId(1))
                    .with_v3_and_below_producer_epoch(0)
                    .with_v3_and_below_topics(vec![AddPartitionsToTxnTopic::default()
                        .with_name(topic("t"))
                        .with_partitions(vec![0])]);
                let resp: AddPartitionsToTxnResponse = w.call(ApiKey::AddPartitionsToTxn, 3, &req);
                resp.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code
            },
        ),
        // From a broker acting for a v2 producer: CLUSTER_ACTION alone, as Kafka (the
        // producer's own rights were checked by the broker it wrote to).
        case(
            "AddPartitionsToTxn (broker, v4)",
            ClusterAuthorizationFailed,
            vec![(CLUSTER, c, op::CLUSTER_ACTION)],
            Some(0),
            |w| {
                let req = AddPartitionsToTxnRequest::default().with_transactions(vec![
                    AddPartitionsToTxnTransaction::default()
                        .with_transactional_id(TransactionalId(s("tx4")))
                        .with_producer_id(ProducerId(1))
                        .with_producer_epoch(0)
                        .with_topics(vec![AddPartitionsToTxnTopic::default()
                            .with_name(topic("t"))
                            .with_partitions(vec![0])]),
                ]);
                let resp: AddPartitionsToTxnResponse = w.call(ApiKey::AddPartitionsToTxn, 4, &req);
                if resp.error_code != 0 {
                    return resp.error_code;
                }
                // Past authorization the id is unknown; only an authorization error counts.
                let code = resp.results_by_transaction[0].topic_results[0].results_by_partition[0]
                    .partition_error_code;
                let authz = [
                    TransactionalIdAuthorizationFailed.code(),
                    TopicAuthorizationFailed.code(),
                ];
                if authz.contains(&code) {
                    code
                } else {
                    0
                }
            },
        ),
        case(
            "AddOffsetsToTxn",
            TransactionalIdAuthorizationFailed,
            vec![(TXN, "tx2", op::WRITE), (GROUP, "g", op::READ)],
            None,
            |w| {
                let req = AddOffsetsToTxnRequest::default()
                    .with_transactional_id(TransactionalId(s("tx2")))
                    .with_producer_id(ProducerId(1))
                    .with_producer_epoch(0)
                    .with_group_id(GroupId(s("g")));
                let resp: AddOffsetsToTxnResponse = w.call(ApiKey::AddOffsetsToTxn, 3, &req);
                resp.error_code
            },
        ),
        case(
            "EndTxn",
            TransactionalIdAuthorizationFailed,
            vec![(TXN, "tx2", op::WRITE)],
            None,
            |w| {
                let req = EndTxnRequest::default()
                    .with_transactional_id(TransactionalId(s("tx2")))
                    .with_producer_id(ProducerId(1))
                    .with_producer_epoch(0)
                    .with_committed(true);
                let resp: EndTxnResponse = w.call(ApiKey::EndTxn, 3, &req);
                resp.error_code
            },
        ),
        case(
            "TxnOffsetCommit",
            TransactionalIdAuthorizationFailed,
            vec![
                (TXN, "tx2", op::WRITE),
                (GROUP, "g", op::READ),
                (TOPIC, "t", op::READ),
            ],
            None,
            |w| {
                let req = TxnOffsetCommitRequest::default()
                    .with_transactional_id(TransactionalId(s("tx2")))
                    .with_group_id(GroupId(s("g")))
                    .with_producer_id(ProducerId(1))
                    .with_producer_epoch(0)
                    .with_topics(vec![TxnOffsetCommitRequestTopic::default()
                        .with_name(topic("t"))
                        .with_partitions(vec![TxnOffsetCommitRequestPartition::default()
                            .with_partition_index(0)
                            .with_committed_offset(0)])]);
                let resp: TxnOffsetCommitResponse = w.call(ApiKey::TxnOffsetCommit, 3, &req);
                resp.topics[0].partitions[0].error_code
            },
        ),
        case(
            "DescribeTransactions",
            TransactionalIdAuthorizationFailed,
            vec![(TXN, "tx", op::DESCRIBE)],
            None,
            |w| {
                let req = DescribeTransactionsRequest::default()
                    .with_transactional_ids(vec![TransactionalId(s("tx"))]);
                let resp: DescribeTransactionsResponse =
                    w.call(ApiKey::DescribeTransactions, 0, &req);
                resp.transaction_states[0].error_code
            },
        ),
        case(
            "WriteTxnMarkers",
            ClusterAuthorizationFailed,
            vec![(CLUSTER, c, op::CLUSTER_ACTION)],
            None,
            |w| {
                let req = WriteTxnMarkersRequest::default().with_markers(vec![
                    WritableTxnMarker::default()
                        .with_producer_id(ProducerId(1))
                        .with_producer_epoch(0)
                        .with_transaction_result(false)
                        .with_coordinator_epoch(0)
                        .with_topics(vec![WritableTxnMarkerTopic::default()
                            .with_name(topic("nowhere"))
                            .with_partition_indexes(vec![0])]),
                ]);
                let resp: WriteTxnMarkersResponse = w.call(ApiKey::WriteTxnMarkers, 1, &req);
                resp.markers[0].topics[0].partitions[0].error_code
            },
        ),
        case(
            "ElectLeaders",
            ClusterAuthorizationFailed,
            vec![(CLUSTER, c, op::ALTER)],
            Some(0),
            |w| {
                let req = ElectLeadersRequest::default()
                    .with_timeout_ms(5000)
                    .with_topic_partitions(Some(vec![]));
                let resp: ElectLeadersResponse = w.call(ApiKey::ElectLeaders, 2, &req);
                resp.error_code
            },
        ),
        case(
            "AlterPartitionReassignments",
            ClusterAuthorizationFailed,
            vec![(CLUSTER, c, op::ALTER)],
            Some(0),
            |w| {
                let req = AlterPartitionReassignmentsRequest::default()
                    .with_timeout_ms(5000)
                    .with_topics(Vec::<ReassignableTopic>::new());
                let resp: AlterPartitionReassignmentsResponse =
                    w.call(ApiKey::AlterPartitionReassignments, 0, &req);
                resp.error_code
            },
        ),
        case(
            "ListPartitionReassignments",
            ClusterAuthorizationFailed,
            vec![(CLUSTER, c, op::DESCRIBE)],
            Some(0),
            |w| {
                let req = ListPartitionReassignmentsRequest::default().with_timeout_ms(5000);
                let resp: ListPartitionReassignmentsResponse =
                    w.call(ApiKey::ListPartitionReassignments, 0, &req);
                resp.error_code
            },
        ),
        case(
            "DescribeLogDirs",
            ClusterAuthorizationFailed,
            vec![(CLUSTER, c, op::DESCRIBE)],
            Some(0),
            |w| {
                let resp: DescribeLogDirsResponse = w.call(
                    ApiKey::DescribeLogDirs,
                    4,
                    &DescribeLogDirsRequest::default(),
                );
                resp.error_code
            },
        ),
        case(
            "AlterReplicaLogDirs",
            ClusterAuthorizationFailed,
            vec![(CLUSTER, c, op::ALTER)],
            // Allowed: a directory the node does not have.
            Some(ErrorCode::LogDirNotFound.code()),
            |w| {
                use kafka_protocol::messages::alter_replica_log_dirs_request::{
                    AlterReplicaLogDir, AlterReplicaLogDirTopic,
                };
                use kafka_protocol::messages::{
                    AlterReplicaLogDirsRequest, AlterReplicaLogDirsResponse,
                };
                let req = AlterReplicaLogDirsRequest::default().with_dirs(vec![
                    AlterReplicaLogDir::default()
                        .with_path(s("/nowhere"))
                        .with_topics(vec![AlterReplicaLogDirTopic::default()
                            .with_name(topic("t"))
                            .with_partitions(vec![0])]),
                ]);
                let resp: AlterReplicaLogDirsResponse =
                    w.call(ApiKey::AlterReplicaLogDirs, 2, &req);
                resp.results[0].partitions[0].error_code
            },
        ),
        case(
            "DescribeAcls",
            ClusterAuthorizationFailed,
            vec![(CLUSTER, c, op::DESCRIBE)],
            Some(0),
            |w| {
                let req = DescribeAclsRequest::default()
                    .with_resource_type_filter(resource::ANY)
                    .with_pattern_type_filter(pattern::ANY)
                    .with_operation(op::ANY)
                    .with_permission_type(permission::ANY);
                let resp: DescribeAclsResponse = w.call(ApiKey::DescribeAcls, 3, &req);
                resp.error_code
            },
        ),
        case(
            "CreateAcls",
            ClusterAuthorizationFailed,
            vec![(CLUSTER, c, op::ALTER)],
            Some(0),
            |w| {
                let req = CreateAclsRequest::default().with_creations(vec![AclCreation::default()
                    .with_resource_type(resource::TOPIC)
                    .with_resource_name(s("elsewhere"))
                    .with_resource_pattern_type(pattern::LITERAL)
                    .with_principal(s("User:x"))
                    .with_host(s("*"))
                    .with_operation(op::READ)
                    .with_permission_type(permission::ALLOW)]);
                let resp: CreateAclsResponse = w.call(ApiKey::CreateAcls, 3, &req);
                resp.results[0].error_code
            },
        ),
        case(
            "DescribeClientQuotas",
            ClusterAuthorizationFailed,
            vec![(CLUSTER, c, op::DESCRIBE_CONFIGS)],
            Some(0),
            |w| {
                let req = DescribeClientQuotasRequest::default();
                let resp: DescribeClientQuotasResponse =
                    w.call(ApiKey::DescribeClientQuotas, 1, &req);
                resp.error_code
            },
        ),
        case(
            "AlterClientQuotas",
            ClusterAuthorizationFailed,
            vec![(CLUSTER, c, op::ALTER_CONFIGS)],
            Some(0),
            |w| {
                use kafka_protocol::messages::alter_client_quotas_request::{
                    EntityData, EntryData, OpData,
                };
                let req =
                    AlterClientQuotasRequest::default().with_entries(vec![EntryData::default()
                        .with_entity(vec![EntityData::default()
                            .with_entity_type(s("client-id"))
                            .with_entity_name(Some(s("quota-test")))])
                        .with_ops(vec![OpData::default()
                            .with_key(s("producer_byte_rate"))
                            .with_value(1e9)])]);
                let resp: AlterClientQuotasResponse = w.call(ApiKey::AlterClientQuotas, 1, &req);
                resp.entries[0].error_code
            },
        ),
        case(
            "DescribeUserScramCredentials",
            ClusterAuthorizationFailed,
            vec![(CLUSTER, c, op::DESCRIBE)],
            Some(0),
            |w| {
                let resp: DescribeUserScramCredentialsResponse = w.call(
                    ApiKey::DescribeUserScramCredentials,
                    0,
                    &DescribeUserScramCredentialsRequest::default().with_users(None),
                );
                resp.error_code
            },
        ),
        // A token for another owner needs CREATE_TOKENS on that user; with it, the request
        // reaches the controller, which has no secret key here.
        case(
            "CreateDelegationToken (for another owner)",
            DelegationTokenAuthorizationFailed,
            vec![(resource::USER, "User:bob", op::CREATE_TOKENS)],
            Some(DelegationTokenAuthDisabled.code()),
            |w| {
                let req = CreateDelegationTokenRequest::default()
                    .with_owner_principal_type(Some(s("User")))
                    .with_owner_principal_name(Some(s("bob")))
                    .with_max_lifetime_ms(-1);
                let resp: CreateDelegationTokenResponse =
                    w.call(ApiKey::CreateDelegationToken, 3, &req);
                resp.error_code
            },
        ),
    ]
}

/// A per-connection distinct suffix (the local port), so repeated creations differ.
fn uuid_like(w: &Wire) -> String {
    w.stream
        .local_addr()
        .map(|a| a.port())
        .unwrap_or(0)
        .to_string()
}

fn fetch(replica_id: i32) -> FetchRequest {
    FetchRequest::default()
        .with_replica_id(BrokerId(replica_id))
        .with_max_wait_ms(0)
        .with_min_bytes(0)
        .with_max_bytes(1 << 20)
        .with_topics(vec![FetchTopic::default()
            .with_topic(topic("t"))
            .with_partitions(vec![FetchPartition::default()
                .with_partition(0)
                .with_fetch_offset(0)
                .with_partition_max_bytes(1 << 20)])])
}

fn describe_configs(w: &mut Wire, resource_type: i8, name: &str) -> i16 {
    let req =
        DescribeConfigsRequest::default().with_resources(vec![DescribeConfigsResource::default()
            .with_resource_type(resource_type)
            .with_resource_name(s(name))
            .with_configuration_keys(None)]);
    let resp: DescribeConfigsResponse = w.call(ApiKey::DescribeConfigs, 4, &req);
    resp.results[0].error_code
}

fn find_coordinator(w: &mut Wire, key_type: i8, key: &str) -> i16 {
    let req = FindCoordinatorRequest::default()
        .with_key(s(key))
        .with_key_type(key_type);
    let resp: FindCoordinatorResponse = w.call(ApiKey::FindCoordinator, 3, &req);
    resp.error_code
}

fn init_producer_id(w: &mut Wire, transactional_id: Option<&str>) -> i16 {
    let req = InitProducerIdRequest::default()
        .with_transactional_id(transactional_id.map(|t| TransactionalId(s(t))))
        .with_transaction_timeout_ms(60_000)
        .with_producer_id(ProducerId(-1))
        .with_producer_epoch(-1);
    let resp: InitProducerIdResponse = w.call(ApiKey::InitProducerId, 4, &req);
    resp.error_code
}

#[test]
fn every_api_is_authorized_with_kafkas_operation_and_error() {
    let (server, sasl) = start_secured();
    let mut admin = Wire::connect(&server.bootstrap);
    for (name, partitions) in [("t", 1), ("grow", 1), ("doomed", 1)] {
        assert_eq!(create_topic_as(&mut admin, name, partitions), 0);
    }
    let cases = cases();
    assert!(cases.len() <= USERS);
    for (i, c) in cases.iter().enumerate() {
        let user = format!("u{i}");
        let mut w = login(&sasl, &user);
        let code = (c.probe)(&mut w);
        assert_eq!(code, c.denied.code(), "{} without ACLs (as {user})", c.api);
        let acls: Vec<AclBinding> = c
            .grants
            .iter()
            .map(|(rt, name, o)| {
                let mut b = allow(&user, *rt, name, *o);
                if *name == "new-" {
                    b.pattern_type = pattern::PREFIXED;
                }
                b
            })
            .collect();
        grant(&mut admin, &acls);
        let mut w = login(&sasl, &user);
        let code = (c.probe)(&mut w);
        match c.then {
            Some(expected) => assert_eq!(code, expected, "{} with {acls:?}", c.api),
            None => assert_ne!(code, c.denied.code(), "{} with {acls:?}", c.api),
        }
    }
}

#[test]
fn allow_everyone_if_no_acl_found_opens_only_resources_without_acls() {
    let (_server, sasl) = start_secured_with(&["allow.everyone.if.no.acl.found=true"]);
    let mut admin = login(&sasl, "admin");
    for name in ["open", "guarded"] {
        assert_eq!(create_topic_as(&mut admin, name, 1), 0);
    }
    // No ACL names either topic: everyone may use both (and create topics: the cluster has
    // no ACL either).
    assert_eq!(listed(&mut login(&sasl, "u0")), ["guarded", "open"]);
    assert_eq!(create_topic_as(&mut login(&sasl, "u0"), "by-anyone", 1), 0);
    // Once an ACL names `guarded`, only what it allows is allowed there; `open` stays open.
    grant(
        &mut admin,
        &[allow("u1", resource::TOPIC, "guarded", op::DESCRIBE)],
    );
    assert_eq!(listed(&mut login(&sasl, "u0")), ["by-anyone", "open"]);
    assert_eq!(
        listed(&mut login(&sasl, "u1")),
        ["by-anyone", "guarded", "open"]
    );
}

#[test]
fn metadata_hides_topics_and_deny_wins_and_super_users_pass() {
    let (server, sasl) = start_secured();
    let mut admin = login(&sasl, "admin");
    for name in ["open", "secret", "pay-in", "pay-out"] {
        assert_eq!(
            create_topic_as(&mut admin, name, 1),
            0,
            "a super user creates {name}"
        );
    }
    assert_eq!(listed(&mut admin), ["open", "pay-in", "pay-out", "secret"]);
    let mut u = login(&sasl, "u0");
    assert!(listed(&mut u).is_empty(), "nothing is visible without ACLs");
    let mut prefixed = allow("u0", resource::TOPIC, "pay-", op::READ);
    prefixed.pattern_type = pattern::PREFIXED;
    let mut deny = allow("u0", resource::TOPIC, "pay-out", op::DESCRIBE);
    deny.permission = permission::DENY;
    grant(
        &mut admin,
        &[
            allow("*", resource::TOPIC, "open", op::DESCRIBE),
            prefixed,
            deny,
        ],
    );
    // READ implies DESCRIBE (pay-in via the prefix); the DENY hides pay-out; `open` is
    // open to everyone (User:*).
    assert_eq!(listed(&mut u), ["open", "pay-in"]);
    assert_eq!(listed(&mut login(&sasl, "u1")), ["open"]);

    // The sluice acls tool lists and removes them (over the PLAINTEXT listener, a super user).
    let acls = |args: &[&str]| sluice_tool("acls", &server.bootstrap, args);
    let all = acls(&["--list"]);
    assert!(all.contains("name=pay-, patternType=PREFIXED"), "{all}");
    assert!(
        all.contains("(principal=User:u0, host=*, operation=DESCRIBE, permissionType=DENY)"),
        "{all}"
    );
    acls(&[
        "--add",
        "--allow-principal",
        "User:u1",
        "--consumer",
        "--topic",
        "secret",
        "--group",
        "readers",
    ]);
    assert_eq!(listed(&mut login(&sasl, "u1")), ["open", "secret"]);
    let secret = acls(&["--list", "--topic", "secret"]);
    assert!(
        secret.contains("operation=READ") && secret.contains("operation=DESCRIBE"),
        "{secret}"
    );
    acls(&[
        "--remove",
        "--allow-principal",
        "User:u1",
        "--consumer",
        "--topic",
        "secret",
        "--group",
        "readers",
    ]);
    assert_eq!(listed(&mut login(&sasl, "u1")), ["open"]);
    let groups = acls(&["--list", "--group", "readers"]);
    assert!(!groups.contains("principal="), "{groups}");
}

#[test]
fn acl_apis_answer_security_disabled_without_an_authorizer() {
    let server = start(&[]);
    let mut w = Wire::connect(&server.bootstrap);
    let req = DescribeAclsRequest::default()
        .with_resource_type_filter(resource::ANY)
        .with_pattern_type_filter(pattern::ANY)
        .with_operation(op::ANY)
        .with_permission_type(permission::ANY);
    let resp: DescribeAclsResponse = w.call(ApiKey::DescribeAcls, 3, &req);
    assert_eq!(resp.error_code, ErrorCode::SecurityDisabled.code());
    // And nothing is refused: a topic anyone may create and write.
    assert_eq!(create_topic_as(&mut w, "free", 1), 0);
}

/// librdkafka as an unmodified client: refused with TOPIC_AUTHORIZATION_FAILED /
/// GROUP_AUTHORIZATION_FAILED without the ACLs, working once `sluice acls` grants them.
#[test]
fn librdkafka_producer_and_group_consumer_follow_the_acls() {
    use rdkafka::consumer::Consumer;
    use rdkafka::producer::{BaseRecord, Producer};
    use rdkafka::Message;
    use std::time::{Duration, Instant};

    let (server, sasl) = start_secured();
    let mut admin = Wire::connect(&server.bootstrap);
    assert_eq!(create_topic_as(&mut admin, "orders", 1), 0);
    let auth = |user: &'static str| {
        [
            ("security.protocol", "SASL_PLAINTEXT"),
            ("sasl.mechanism", "PLAIN"),
            ("sasl.username", user),
            ("sasl.password", "pw"),
        ]
    };
    let send_one = |user: &'static str| -> Option<String> {
        let mut extra = auth(user).to_vec();
        extra.extend([
            ("message.timeout.ms", "10000"),
            ("enable.idempotence", "false"),
        ]);
        let p = producer(&sasl, &extra);
        p.send(BaseRecord::to("orders").key("k").payload("v"))
            .expect("queued");
        let _ = p.flush(Duration::from_secs(20));
        let last = p.context().last_error.lock().unwrap().clone();
        last
    };
    let err = send_one("u0").expect("a producer without WRITE fails");
    assert!(
        err.contains("TopicAuthorization") || err.contains("authoriz"),
        "{err}"
    );

    let acls = |args: &[&str]| {
        sluice_tool("acls", &server.bootstrap, args);
    };
    acls(&[
        "--add",
        "--allow-principal",
        "User:u0",
        "--producer",
        "--topic",
        "orders",
    ]);
    assert_eq!(
        send_one("u0"),
        None,
        "with the producer ACLs the record is delivered"
    );

    // A group consumer needs READ on the topic and on its group.
    let consume = |user: &'static str| -> Result<usize, String> {
        let mut extra = auth(user).to_vec();
        extra.extend([("group.id", "billing"), ("auto.offset.reset", "earliest")]);
        let c = consumer(&sasl, &extra);
        c.subscribe(&["orders"]).unwrap();
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            match c.poll(Duration::from_millis(200)) {
                Some(Ok(m)) => return Ok(m.payload().map_or(0, <[u8]>::len)),
                Some(Err(e)) => return Err(e.to_string()),
                None => {}
            }
        }
        Err("nothing consumed".into())
    };
    let err = consume("u1").expect_err("a consumer without ACLs");
    assert!(err.contains("uthoriz"), "{err}");
    acls(&[
        "--add",
        "--allow-principal",
        "User:u1",
        "--consumer",
        "--topic",
        "orders",
        "--group",
        "billing",
    ]);
    assert_eq!(consume("u1"), Ok(1));
}

fn tls_fixture(name: &str) -> String {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/tls")
        .join(name)
        .display()
        .to_string()
}

/// Three nodes whose only client and inter-broker listener is SASL_SSL, with ACLs on:
/// replication and transaction markers authenticate as `User:broker` (PLAIN, from the
/// listener's JAAS entry) over TLS, so no anonymous super user is needed. The tools reach
/// the cluster with `--command-config` files as Kafka's do: an admin over PLAIN creates the
/// topic, a SCRAM user and its ACLs; that user produces and consumes over SCRAM-SHA-512; the
/// records are on every replica (the leader is killed and the rest still serve them); a
/// wrong password fails in one line.
#[test]
fn a_cluster_secured_end_to_end_replicates_over_sasl_ssl_and_tools_use_command_configs() {
    use std::time::{Duration, Instant};
    let dir = tempfile::tempdir().unwrap();
    let ids = [1, 2, 3];
    let ports: Vec<(u16, u16)> = ids.iter().map(|_| (free_port(), free_port())).collect();
    let voters: Vec<String> = ids
        .iter()
        .zip(&ports)
        .map(|(id, (_, c))| format!("{id}@127.0.0.1:{c}"))
        .collect();
    let jaas = "org.apache.kafka.common.security.plain.PlainLoginModule required username=\"broker\" password=\"broker-secret\" user_broker=\"broker-secret\" user_admin=\"admin-secret\";";
    let configs: Vec<Vec<String>> = ids
        .iter()
        .zip(&ports)
        .map(|(id, (p, c))| {
            vec![
                "process.roles=broker,controller".to_string(),
                format!("node.id={id}"),
                format!("listeners=INTERNAL://127.0.0.1:{p},CONTROLLER://127.0.0.1:{c}"),
                "listener.security.protocol.map=INTERNAL:SASL_SSL,CONTROLLER:PLAINTEXT".into(),
                "inter.broker.listener.name=INTERNAL".into(),
                "controller.listener.names=CONTROLLER".into(),
                format!("controller.quorum.voters={}", voters.join(",")),
                format!("ssl.keystore.location={}", tls_fixture("server.pem")),
                format!("ssl.truststore.location={}", tls_fixture("ca.pem")),
                "sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-512".into(),
                "sasl.mechanism.inter.broker.protocol=PLAIN".into(),
                format!("listener.name.internal.plain.sasl.jaas.config={jaas}"),
                "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer"
                    .into(),
                "super.users=User:broker;User:admin".into(),
                "replica.lag.time.max.ms=2000".into(),
                "broker.session.timeout.ms=3000".into(),
                "broker.heartbeat.interval.ms=250".into(),
                "controller.quorum.election.timeout.ms=500".into(),
            ]
        })
        .collect();
    let mut nodes = TestServer::start_all(sluice_bin(), &configs);
    let bootstrap: String = nodes
        .iter()
        .map(|n| n.bootstrap.clone())
        .collect::<Vec<_>>()
        .join(",");
    let properties = |name: &str, lines: &[String]| {
        let path = dir.path().join(name);
        std::fs::write(&path, lines.join("\n")).unwrap();
        path.display().to_string()
    };
    let tls = [
        "security.protocol=SASL_SSL".to_string(),
        format!("ssl.truststore.location={}", tls_fixture("ca.pem")),
    ];
    let admin_conf = properties(
        "admin.properties",
        &[
            tls[0].clone(),
            tls[1].clone(),
            "sasl.mechanism=PLAIN".into(),
            "# Kafka's format, continued on a second line".into(),
            "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required \\"
                .into(),
            "    username=\"admin\" password=\"admin-secret\";".into(),
        ],
    );
    let scram = |password: &str| {
        vec![
            tls[0].clone(),
            tls[1].clone(),
            "sasl.mechanism=SCRAM-SHA-512".into(),
            format!("sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username=\"alice\" password=\"{password}\";"),
        ]
    };
    let alice_conf = properties("alice.properties", &scram("alice-secret"));
    let wrong_conf = properties("wrong.properties", &scram("not-her-password"));
    let as_admin = |tool: &str, args: &[&str]| {
        let mut a = args.to_vec();
        a.extend(["--command-config", &admin_conf]);
        sluice_tool(tool, &bootstrap, &a)
    };
    as_admin(
        "topics",
        &[
            "--create",
            "--topic",
            "secure",
            "--partitions",
            "1",
            "--replication-factor",
            "3",
        ],
    );
    as_admin("users", &["--add", "alice", "--password", "alice-secret"]);
    for role in [
        vec!["--producer", "--topic", "secure"],
        vec![
            "--consumer",
            "--topic",
            "secure",
            "--group",
            "secure-readers",
        ],
    ] {
        let mut a = vec!["--add", "--allow-principal", "User:alice"];
        a.extend(role);
        as_admin("acls", &a);
    }
    // Followers fetch over SASL_SSL as User:broker: the ISR fills up.
    let leader = {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let out = as_admin("topics", &["--describe", "--topic", "secure"]);
            let line = out
                .lines()
                .find(|l| l.contains("Partition: 0"))
                .unwrap_or("");
            let field = |name: &str| {
                line.split('\t')
                    .find_map(|f| f.trim().strip_prefix(name))
                    .unwrap_or("")
                    .trim()
                    .to_string()
            };
            let isr = field("Isr:");
            if isr.split(',').count() == 3 {
                break field("Leader:").parse::<i32>().unwrap();
            }
            assert!(Instant::now() < deadline, "the ISR never filled: {out}");
            std::thread::sleep(Duration::from_millis(200));
        }
    };
    let input = dir.path().join("records.txt");
    let values: Vec<String> = (0..20).map(|i| format!("secret-{i}")).collect();
    std::fs::write(&input, values.join("\n") + "\n").unwrap();
    sluice_tool(
        "produce",
        &bootstrap,
        &[
            "--topic",
            "secure",
            "--file",
            &input.display().to_string(),
            "--producer.config",
            &alice_conf,
        ],
    );
    // Every replica has the records: with the leader gone the others serve all of them.
    nodes[(leader - 1) as usize].kill();
    let rest: String = nodes
        .iter()
        .enumerate()
        .filter(|(i, _)| *i as i32 != leader - 1)
        .map(|(_, n)| n.bootstrap.clone())
        .collect::<Vec<_>>()
        .join(",");
    let out = sluice_tool(
        "consume",
        &rest,
        &[
            "--topic",
            "secure",
            "--group",
            "secure-readers",
            "--from-beginning",
            "--max-messages",
            "20",
            "--timeout-ms",
            "30000",
            "--consumer.config",
            &alice_conf,
        ],
    );
    assert_eq!(out.lines().collect::<Vec<_>>(), values);
    // A wrong password: one line, exit 1, and nothing else is tried.
    let out = std::process::Command::new(sluice_bin())
        .args(["topics", "--list", "--bootstrap-server", &rest])
        .args(["--command-config", &wrong_conf])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.contains("authentication failed"), "{err}");
    // Without security settings the SASL_SSL port does not answer as Kafka: a clear error.
    let out = std::process::Command::new(sluice_bin())
        .args([
            "topics",
            "--list",
            "--timeout",
            "3000",
            "--bootstrap-server",
            &rest,
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
}

/// SCRAM-SHA-512 with a delegation token (`tokenauth=true`): the connection, or the
/// SaslAuthenticate error code when the broker refuses the token.
fn login_with_token(addr: &str, token_id: &str, hmac: &[u8]) -> Result<Wire, i16> {
    use sluice_protocol::scram::{ClientFirst, Mechanism};
    let mut w = Wire::connect(addr);
    let hs: SaslHandshakeResponse = w.call(
        ApiKey::SaslHandshake,
        1,
        &SaslHandshakeRequest::default().with_mechanism(s("SCRAM-SHA-512")),
    );
    assert_eq!(hs.error_code, 0);
    let password = sluice_protocol::base64::encode_padded(hmac);
    let (client, first) = ClientFirst::for_token(Mechanism::Sha512, token_id, &password);
    let mut step = |token: Vec<u8>| -> SaslAuthenticateResponse {
        w.call(
            ApiKey::SaslAuthenticate,
            2,
            &SaslAuthenticateRequest::default().with_auth_bytes(token.into()),
        )
    };
    let server_first = step(first);
    if server_first.error_code != 0 {
        return Err(server_first.error_code);
    }
    let (client, proof) = client.respond(&server_first.auth_bytes).unwrap();
    let server_final = step(proof);
    if server_final.error_code != 0 {
        return Err(server_final.error_code);
    }
    client.verify(&server_final.auth_bytes).unwrap();
    // A token's session ends when the token expires (a day from now here).
    assert!(
        server_final.session_lifetime_ms > 3_600_000,
        "{server_final:?}"
    );
    Ok(w)
}

fn create_token(
    w: &mut Wire,
    owner: Option<&str>,
    renewers: &[&str],
) -> CreateDelegationTokenResponse {
    let req = CreateDelegationTokenRequest::default()
        .with_owner_principal_type(owner.map(|_| s("User")))
        .with_owner_principal_name(owner.map(s))
        .with_renewers(
            renewers
                .iter()
                .map(|r| {
                    let (ty, name) = r.split_once(':').unwrap();
                    create_delegation_token_request::CreatableRenewers::default()
                        .with_principal_type(s(ty))
                        .with_principal_name(s(name))
                })
                .collect(),
        )
        .with_max_lifetime_ms(-1);
    w.call(ApiKey::CreateDelegationToken, 3, &req)
}

fn describe_tokens(w: &mut Wire, owners: Option<&[&str]>) -> DescribeDelegationTokenResponse {
    let owners = owners.map(|o| {
        o.iter()
            .map(|p| {
                let (ty, name) = p.split_once(':').unwrap();
                describe_delegation_token_request::DescribeDelegationTokenOwner::default()
                    .with_principal_type(s(ty))
                    .with_principal_name(s(name))
            })
            .collect()
    });
    w.call(
        ApiKey::DescribeDelegationToken,
        3,
        &DescribeDelegationTokenRequest::default().with_owners(owners),
    )
}

fn renew_token(w: &mut Wire, hmac: &Bytes, period: i64) -> RenewDelegationTokenResponse {
    let req = RenewDelegationTokenRequest::default()
        .with_hmac(hmac.clone())
        .with_renew_period_ms(period);
    w.call(ApiKey::RenewDelegationToken, 2, &req)
}

fn expire_token(w: &mut Wire, hmac: &Bytes, period: i64) -> ExpireDelegationTokenResponse {
    let req = ExpireDelegationTokenRequest::default()
        .with_hmac(hmac.clone())
        .with_expiry_time_period_ms(period);
    w.call(ApiKey::ExpireDelegationToken, 2, &req)
}

/// Delegation tokens as Kafka 4.4: created over SASL only (not on PLAINTEXT, not by a
/// token-authenticated connection), for oneself or, with CREATE_TOKENS on the user, for
/// another; a token authenticates over SCRAM as its owner (its ACLs apply); only the owner
/// or a renewer renews or expires it; describe shows each caller the tokens it is involved
/// in; an expired token is removed by the controller's sweep and authenticates no more.
#[test]
fn delegation_tokens_authenticate_as_their_owner_until_expired() {
    use ErrorCode::*;
    let (server, sasl) = start_secured_with(&[
        "sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-512",
        "delegation.token.secret.key=s3cret-key",
        "delegation.token.expiry.check.interval.ms=200",
    ]);
    let mut admin = login(&sasl, "admin");
    assert_eq!(create_topic_as(&mut admin, "t", 1), 0);
    // u0 may write t; u1 may create tokens for u0.
    grant(
        &mut admin,
        &[
            allow("u0", resource::TOPIC, "t", op::WRITE),
            allow("u1", resource::USER, "User:u0", op::CREATE_TOKENS),
        ],
    );
    // Not on PLAINTEXT.
    let mut plain = Wire::connect(&server.bootstrap);
    assert_eq!(
        create_token(&mut plain, None, &[]).error_code,
        DelegationTokenRequestNotAllowed.code()
    );
    assert_eq!(
        describe_tokens(&mut plain, None).error_code,
        DelegationTokenRequestNotAllowed.code()
    );
    let mut u0 = login(&sasl, "u0");
    let mut u1 = login(&sasl, "u1");
    let mut u2 = login(&sasl, "u2");
    assert_eq!(
        create_token(&mut u0, None, &["Group:g"]).error_code,
        InvalidPrincipalType.code()
    );
    assert_eq!(
        create_token(&mut u2, Some("u0"), &[]).error_code,
        DelegationTokenAuthorizationFailed.code()
    );
    // u1 creates a token owned by u0, renewable by u2.
    let created = create_token(&mut u1, Some("u0"), &["User:u2"]);
    assert_eq!(created.error_code, 0, "{created:?}");
    assert_eq!(
        (
            created.principal_type.as_str(),
            created.principal_name.as_str()
        ),
        ("User", "u0")
    );
    assert_eq!(created.token_requester_principal_name.as_str(), "u1");
    assert_eq!(created.token_id.len(), 22, "{created:?}");
    assert_eq!(created.hmac.len(), 64);
    assert_eq!(
        created.max_timestamp_ms - created.issue_timestamp_ms,
        7 * 86_400_000
    );
    assert_eq!(
        created.expiry_timestamp_ms - created.issue_timestamp_ms,
        86_400_000
    );
    let (id, hmac) = (created.token_id.to_string(), created.hmac.clone());

    // Describe: each caller sees the tokens it owns, asked for or renews.
    for (w, who) in [(&mut u0, "u0"), (&mut u1, "u1"), (&mut u2, "u2")] {
        let d = describe_tokens(w, None);
        assert_eq!(d.error_code, 0);
        assert_eq!(d.tokens.len(), 1, "{who}");
        assert_eq!(d.tokens[0].token_id.as_str(), id);
        assert_eq!(d.tokens[0].hmac, hmac);
        assert_eq!(d.tokens[0].renewers[0].principal_name.as_str(), "u2");
    }
    let mut u3 = login(&sasl, "u3");
    assert!(describe_tokens(&mut u3, None).tokens.is_empty());
    assert_eq!(describe_tokens(&mut u0, Some(&["User:u2"])).tokens.len(), 1);
    assert!(describe_tokens(&mut u0, Some(&["User:u3"]))
        .tokens
        .is_empty());
    assert!(describe_tokens(&mut u0, Some(&[])).tokens.is_empty());

    // The token authenticates as u0: it may write t, as u0 may.
    let mut with_token = login_with_token(&sasl, &id, &hmac).expect("token login");
    let produce = |w: &mut Wire| -> i16 {
        let req = ProduceRequest::default()
            .with_acks(1)
            .with_timeout_ms(5000)
            .with_topic_data(vec![TopicProduceData::default()
                .with_name(topic("t"))
                .with_partition_data(vec![PartitionProduceData::default()
                    .with_index(0)
                    .with_records(Some(records()))])]);
        let resp: ProduceResponse = w.call(ApiKey::Produce, 9, &req);
        resp.responses[0].partition_responses[0].error_code
    };
    assert_eq!(produce(&mut with_token), 0);
    assert_eq!(produce(&mut u3), TopicAuthorizationFailed.code());
    // So do the `sluice` tools, with Kafka's `tokenauth="true"` option: as u0 they see t.
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("token.properties");
    std::fs::write(
        &config,
        format!(
            "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-512\n\
             sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required \
             username=\"{id}\" password=\"{}\" tokenauth=\"true\";\n",
            sluice_protocol::base64::encode_padded(&hmac)
        ),
    )
    .unwrap();
    let listed = sluice_tool(
        "topics",
        &sasl,
        &["--list", "--command-config", &config.display().to_string()],
    );
    assert_eq!(listed.trim(), "t", "{listed}");
    // A token-authenticated connection may not handle tokens.
    assert_eq!(
        create_token(&mut with_token, None, &[]).error_code,
        DelegationTokenRequestNotAllowed.code()
    );
    assert_eq!(
        renew_token(&mut with_token, &hmac, -1).error_code,
        DelegationTokenRequestNotAllowed.code()
    );
    assert_eq!(
        describe_tokens(&mut with_token, None).error_code,
        DelegationTokenRequestNotAllowed.code()
    );
    // A wrong HMAC, or a token id the broker does not know, authenticates nothing.
    assert_eq!(
        login_with_token(&sasl, &id, &[0; 64]).err(),
        Some(SaslAuthenticationFailed.code())
    );
    assert_eq!(
        login_with_token(&sasl, "no-such-token", &hmac).err(),
        Some(SaslAuthenticationFailed.code())
    );

    // Renew: only the owner or a renewer (not the requester); never past the maximum.
    assert_eq!(
        renew_token(&mut u1, &hmac, 60_000).error_code,
        DelegationTokenOwnerMismatch.code()
    );
    assert_eq!(
        renew_token(&mut u0, &Bytes::from_static(b"nope"), 60_000).error_code,
        DelegationTokenNotFound.code()
    );
    let renewed = renew_token(&mut u2, &hmac, 60_000);
    assert_eq!(renewed.error_code, 0);
    let d = describe_tokens(&mut u0, None);
    assert_eq!(d.tokens[0].expiry_timestamp, renewed.expiry_timestamp_ms);
    assert!(renewed.expiry_timestamp_ms < created.expiry_timestamp_ms);

    // Expire now (-1): removed at once; the token no longer authenticates.
    assert_eq!(
        expire_token(&mut u3, &hmac, -1).error_code,
        DelegationTokenOwnerMismatch.code()
    );
    assert_eq!(expire_token(&mut u0, &hmac, -1).error_code, 0);
    assert!(describe_tokens(&mut u0, None).tokens.is_empty());
    assert_eq!(
        login_with_token(&sasl, &id, &hmac).err(),
        Some(SaslAuthenticationFailed.code())
    );
    assert_eq!(
        renew_token(&mut u0, &hmac, 1000).error_code,
        DelegationTokenNotFound.code()
    );

    // A token expired with period 0 stays until the controller's sweep removes it.
    let second = create_token(&mut u0, None, &[]);
    assert_eq!(second.error_code, 0);
    let expired = expire_token(&mut u0, &second.hmac, 0);
    assert_eq!(expired.error_code, 0);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while !describe_tokens(&mut u0, None).tokens.is_empty() {
        assert!(
            std::time::Instant::now() < deadline,
            "the sweep never removed the expired token"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert_eq!(
        login_with_token(&sasl, &second.token_id, &second.hmac).err(),
        Some(SaslAuthenticationFailed.code())
    );
}
