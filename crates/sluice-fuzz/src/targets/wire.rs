//! Kafka frames from clients and from other brokers: a request's header and body for every
//! API and version the broker serves, and a response's for every API and version the
//! `kafka-protocol` crate knows (the native client and the broker's own calls to other
//! brokers decode those).

use std::sync::OnceLock;

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::ProducerId;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use sluice_protocol::batch::BatchBuilder;
use sluice_protocol::compression::Compression;
use sluice_protocol::frame;
use uuid::Uuid;

/// Every API key with its request and response types.
macro_rules! with_every_api {
    ($m:ident) => {
        $m! {
            Produce ProduceRequest ProduceResponse,
            Fetch FetchRequest FetchResponse,
            ListOffsets ListOffsetsRequest ListOffsetsResponse,
            Metadata MetadataRequest MetadataResponse,
            OffsetCommit OffsetCommitRequest OffsetCommitResponse,
            OffsetFetch OffsetFetchRequest OffsetFetchResponse,
            FindCoordinator FindCoordinatorRequest FindCoordinatorResponse,
            JoinGroup JoinGroupRequest JoinGroupResponse,
            Heartbeat HeartbeatRequest HeartbeatResponse,
            LeaveGroup LeaveGroupRequest LeaveGroupResponse,
            SyncGroup SyncGroupRequest SyncGroupResponse,
            DescribeGroups DescribeGroupsRequest DescribeGroupsResponse,
            ListGroups ListGroupsRequest ListGroupsResponse,
            SaslHandshake SaslHandshakeRequest SaslHandshakeResponse,
            ApiVersions ApiVersionsRequest ApiVersionsResponse,
            CreateTopics CreateTopicsRequest CreateTopicsResponse,
            DeleteTopics DeleteTopicsRequest DeleteTopicsResponse,
            DeleteRecords DeleteRecordsRequest DeleteRecordsResponse,
            InitProducerId InitProducerIdRequest InitProducerIdResponse,
            OffsetForLeaderEpoch OffsetForLeaderEpochRequest OffsetForLeaderEpochResponse,
            AddPartitionsToTxn AddPartitionsToTxnRequest AddPartitionsToTxnResponse,
            AddOffsetsToTxn AddOffsetsToTxnRequest AddOffsetsToTxnResponse,
            EndTxn EndTxnRequest EndTxnResponse,
            WriteTxnMarkers WriteTxnMarkersRequest WriteTxnMarkersResponse,
            TxnOffsetCommit TxnOffsetCommitRequest TxnOffsetCommitResponse,
            DescribeAcls DescribeAclsRequest DescribeAclsResponse,
            CreateAcls CreateAclsRequest CreateAclsResponse,
            DeleteAcls DeleteAclsRequest DeleteAclsResponse,
            DescribeConfigs DescribeConfigsRequest DescribeConfigsResponse,
            AlterConfigs AlterConfigsRequest AlterConfigsResponse,
            AlterReplicaLogDirs AlterReplicaLogDirsRequest AlterReplicaLogDirsResponse,
            DescribeLogDirs DescribeLogDirsRequest DescribeLogDirsResponse,
            SaslAuthenticate SaslAuthenticateRequest SaslAuthenticateResponse,
            CreatePartitions CreatePartitionsRequest CreatePartitionsResponse,
            CreateDelegationToken CreateDelegationTokenRequest CreateDelegationTokenResponse,
            RenewDelegationToken RenewDelegationTokenRequest RenewDelegationTokenResponse,
            ExpireDelegationToken ExpireDelegationTokenRequest ExpireDelegationTokenResponse,
            DescribeDelegationToken DescribeDelegationTokenRequest DescribeDelegationTokenResponse,
            DeleteGroups DeleteGroupsRequest DeleteGroupsResponse,
            ElectLeaders ElectLeadersRequest ElectLeadersResponse,
            IncrementalAlterConfigs IncrementalAlterConfigsRequest IncrementalAlterConfigsResponse,
            AlterPartitionReassignments AlterPartitionReassignmentsRequest AlterPartitionReassignmentsResponse,
            ListPartitionReassignments ListPartitionReassignmentsRequest ListPartitionReassignmentsResponse,
            OffsetDelete OffsetDeleteRequest OffsetDeleteResponse,
            DescribeClientQuotas DescribeClientQuotasRequest DescribeClientQuotasResponse,
            AlterClientQuotas AlterClientQuotasRequest AlterClientQuotasResponse,
            DescribeUserScramCredentials DescribeUserScramCredentialsRequest DescribeUserScramCredentialsResponse,
            AlterUserScramCredentials AlterUserScramCredentialsRequest AlterUserScramCredentialsResponse,
            Vote VoteRequest VoteResponse,
            BeginQuorumEpoch BeginQuorumEpochRequest BeginQuorumEpochResponse,
            EndQuorumEpoch EndQuorumEpochRequest EndQuorumEpochResponse,
            DescribeQuorum DescribeQuorumRequest DescribeQuorumResponse,
            AlterPartition AlterPartitionRequest AlterPartitionResponse,
            UpdateFeatures UpdateFeaturesRequest UpdateFeaturesResponse,
            Envelope EnvelopeRequest EnvelopeResponse,
            FetchSnapshot FetchSnapshotRequest FetchSnapshotResponse,
            DescribeCluster DescribeClusterRequest DescribeClusterResponse,
            DescribeProducers DescribeProducersRequest DescribeProducersResponse,
            BrokerRegistration BrokerRegistrationRequest BrokerRegistrationResponse,
            BrokerHeartbeat BrokerHeartbeatRequest BrokerHeartbeatResponse,
            UnregisterBroker UnregisterBrokerRequest UnregisterBrokerResponse,
            DescribeTransactions DescribeTransactionsRequest DescribeTransactionsResponse,
            ListTransactions ListTransactionsRequest ListTransactionsResponse,
            AllocateProducerIds AllocateProducerIdsRequest AllocateProducerIdsResponse,
            ConsumerGroupHeartbeat ConsumerGroupHeartbeatRequest ConsumerGroupHeartbeatResponse,
            ConsumerGroupDescribe ConsumerGroupDescribeRequest ConsumerGroupDescribeResponse,
            ControllerRegistration ControllerRegistrationRequest ControllerRegistrationResponse,
            GetTelemetrySubscriptions GetTelemetrySubscriptionsRequest GetTelemetrySubscriptionsResponse,
            PushTelemetry PushTelemetryRequest PushTelemetryResponse,
            AssignReplicasToDirs AssignReplicasToDirsRequest AssignReplicasToDirsResponse,
            ListConfigResources ListConfigResourcesRequest ListConfigResourcesResponse,
            DescribeTopicPartitions DescribeTopicPartitionsRequest DescribeTopicPartitionsResponse,
            ShareGroupHeartbeat ShareGroupHeartbeatRequest ShareGroupHeartbeatResponse,
            ShareGroupDescribe ShareGroupDescribeRequest ShareGroupDescribeResponse,
            ShareFetch ShareFetchRequest ShareFetchResponse,
            ShareAcknowledge ShareAcknowledgeRequest ShareAcknowledgeResponse,
            AddRaftVoter AddRaftVoterRequest AddRaftVoterResponse,
            RemoveRaftVoter RemoveRaftVoterRequest RemoveRaftVoterResponse,
            UpdateRaftVoter UpdateRaftVoterRequest UpdateRaftVoterResponse,
            InitializeShareGroupState InitializeShareGroupStateRequest InitializeShareGroupStateResponse,
            ReadShareGroupState ReadShareGroupStateRequest ReadShareGroupStateResponse,
            WriteShareGroupState WriteShareGroupStateRequest WriteShareGroupStateResponse,
            DeleteShareGroupState DeleteShareGroupStateRequest DeleteShareGroupStateResponse,
            ReadShareGroupStateSummary ReadShareGroupStateSummaryRequest ReadShareGroupStateSummaryResponse,
            DescribeShareGroupOffsets DescribeShareGroupOffsetsRequest DescribeShareGroupOffsetsResponse,
            AlterShareGroupOffsets AlterShareGroupOffsetsRequest AlterShareGroupOffsetsResponse,
            DeleteShareGroupOffsets DeleteShareGroupOffsetsRequest DeleteShareGroupOffsetsResponse,
        }
    };
}

macro_rules! dispatch {
    ($($key:ident $req:ident $resp:ident,)*) => {
        /// Decode a request body of `key` at `version` (the concrete type the handler decodes).
        fn decode_request(key: ApiKey, body: &mut Bytes, version: i16) {
            match key {
                $(ApiKey::$key => drop($req::decode(body, version)),)*
                #[allow(unreachable_patterns)]
                _ => {}
            }
        }

        /// Decode a response body of `key` at `version`.
        fn decode_response(key: ApiKey, body: &mut Bytes, version: i16) {
            match key {
                $(ApiKey::$key => drop($resp::decode(body, version)),)*
                #[allow(unreachable_patterns)]
                _ => {}
            }
        }

        /// The default body of `key` at `version` encoded (found by decoding zeros: every
        /// field zero, empty or null), where zeros decode; requests if `request`, else
        /// responses.
        fn zero_body(key: ApiKey, version: i16, request: bool, out: &mut BytesMut) -> bool {
            let zeros = || Bytes::from(vec![0u8; 64]);
            match key {
                $(ApiKey::$key => if request {
                    $req::decode(&mut zeros(), version)
                        .is_ok_and(|m| m.encode(out, version).is_ok())
                } else {
                    $resp::decode(&mut zeros(), version)
                        .is_ok_and(|m| m.encode(out, version).is_ok())
                },)*
                #[allow(unreachable_patterns)]
                _ => false,
            }
        }
    };
}

with_every_api!(dispatch);

/// (api key, min version, max version) of every API the broker serves.
fn served() -> &'static [(ApiKey, i16, i16)] {
    static SERVED: OnceLock<Vec<(ApiKey, i16, i16)>> = OnceLock::new();
    SERVED.get_or_init(|| {
        sluice_broker::handlers::specs()
            .iter()
            .map(|s| (s.api_key, s.min_version, s.max_version))
            .collect()
    })
}

fn serves(key: ApiKey, version: i16) -> bool {
    served()
        .iter()
        .any(|&(k, lo, hi)| k == key && (lo..=hi).contains(&version))
}

/// A request frame (without its size prefix) as the broker's connection task gets it. The
/// broker answers unknown keys and versions it does not serve before decoding anything.
pub fn request(data: &[u8]) {
    let mut frame = Bytes::copy_from_slice(data);
    let Ok(peek) = frame::peek_request(&frame) else {
        return;
    };
    let Ok(key) = ApiKey::try_from(peek.api_key) else {
        return;
    };
    if !serves(key, peek.api_version) {
        return;
    }
    let header_version = key.request_header_version(peek.api_version);
    // Decoded without the broker's catch_unwind, so a panic in a decoder shows here.
    if RequestHeader::decode(&mut frame, header_version).is_err() {
        return;
    }
    decode_request(key, &mut frame, peek.api_version);
}

/// A response frame: `[api key i16][version i16]` (what the caller knows it asked), then
/// the response header and body as a broker sends them.
pub fn response(data: &[u8]) {
    if data.len() < 4 {
        return;
    }
    let Ok(key) = ApiKey::try_from(i16::from_be_bytes([data[0], data[1]])) else {
        return;
    };
    let version = i16::from_be_bytes([data[2], data[3]]);
    let range = key.valid_versions();
    if version < range.min || version > range.max {
        return;
    }
    let mut frame = Bytes::copy_from_slice(&data[4..]);
    if ResponseHeader::decode(&mut frame, key.response_header_version(version)).is_err() {
        return;
    }
    decode_response(key, &mut frame, version);
}

fn header(key: ApiKey, version: i16, out: &mut BytesMut) -> bool {
    RequestHeader::default()
        .with_request_api_key(key as i16)
        .with_request_api_version(version)
        .with_correlation_id(7)
        .with_client_id(Some(StrBytes::from_static_str("fuzz")))
        .encode(out, key.request_header_version(version))
        .is_ok()
}

fn s(text: &'static str) -> StrBytes {
    StrBytes::from_static_str(text)
}

fn records() -> Bytes {
    let mut b = BatchBuilder::new(Compression::None);
    b.append(1_700_000_000_000, Some(b"k"), Some(b"v"), &[]);
    Bytes::from(b.build(0).unwrap_or_default())
}

/// A request body that encodes itself at any version (or fails to, at versions that cannot
/// carry one of its fields).
type Sample = (ApiKey, Box<dyn Fn(&mut BytesMut, i16) -> bool>);

fn sample<T: Encodable + 'static>(key: ApiKey, body: T) -> Sample {
    (key, Box::new(move |out, v| body.encode(out, v).is_ok()))
}

/// Requests with their arrays filled, for the APIs clients send most, so mutations start
/// from nested structures rather than empty ones. Topic names and ids both appear (older
/// versions encode one, newer the other).
fn samples() -> Vec<Sample> {
    let topic = TopicName(s("orders"));
    let id = Uuid::from_u128(0x1234);
    vec![
        sample(
            ApiKey::Produce,
            ProduceRequest::default()
                .with_acks(-1)
                .with_timeout_ms(1000)
                .with_topic_data(vec![produce_request::TopicProduceData::default()
                    .with_name(topic.clone())
                    .with_partition_data(vec![
                        produce_request::PartitionProduceData::default()
                            .with_index(0)
                            .with_records(Some(records())),
                    ])]),
        ),
        sample(
            ApiKey::Fetch,
            FetchRequest::default()
                .with_max_wait_ms(500)
                .with_min_bytes(1)
                .with_max_bytes(1 << 20)
                .with_session_epoch(-1)
                .with_topics(vec![fetch_request::FetchTopic::default()
                    .with_topic(topic.clone())
                    .with_partitions(vec![fetch_request::FetchPartition::default()
                        .with_partition(0)
                        .with_fetch_offset(5)
                        .with_partition_max_bytes(1 << 20)])])
                .with_forgotten_topics_data(vec![fetch_request::ForgottenTopic::default()
                    .with_topic(topic.clone())
                    .with_partitions(vec![1, 2])]),
        ),
        sample(
            ApiKey::Fetch,
            FetchRequest::default()
                .with_session_id(3)
                .with_session_epoch(2)
                .with_topics(vec![fetch_request::FetchTopic::default()
                    .with_topic_id(id)
                    .with_partitions(vec![fetch_request::FetchPartition::default()
                        .with_partition(0)
                        .with_current_leader_epoch(4)
                        .with_fetch_offset(5)])]),
        ),
        sample(
            ApiKey::Metadata,
            MetadataRequest::default().with_topics(Some(vec![
                metadata_request::MetadataRequestTopic::default().with_name(Some(topic.clone())),
            ])),
        ),
        sample(
            ApiKey::ListOffsets,
            ListOffsetsRequest::default().with_topics(vec![
                list_offsets_request::ListOffsetsTopic::default()
                    .with_name(topic.clone())
                    .with_partitions(vec![list_offsets_request::ListOffsetsPartition::default()
                        .with_partition_index(0)
                        .with_timestamp(-1)]),
            ]),
        ),
        sample(
            ApiKey::OffsetCommit,
            OffsetCommitRequest::default()
                .with_group_id(GroupId(s("g")))
                .with_generation_id_or_member_epoch(1)
                .with_member_id(s("m-1"))
                .with_topics(vec![
                    offset_commit_request::OffsetCommitRequestTopic::default()
                        .with_name(topic.clone())
                        .with_partitions(vec![
                            offset_commit_request::OffsetCommitRequestPartition::default()
                                .with_partition_index(0)
                                .with_committed_offset(10)
                                .with_committed_metadata(Some(s("meta"))),
                        ]),
                ]),
        ),
        sample(
            ApiKey::JoinGroup,
            JoinGroupRequest::default()
                .with_group_id(GroupId(s("g")))
                .with_session_timeout_ms(10_000)
                .with_rebalance_timeout_ms(10_000)
                .with_protocol_type(s("consumer"))
                .with_protocols(vec![join_group_request::JoinGroupRequestProtocol::default(
                )
                .with_name(s("range"))
                .with_metadata(Bytes::from_static(&[0, 1, 0, 0, 0, 1, 0, 6, b'o']))]),
        ),
        sample(
            ApiKey::SyncGroup,
            SyncGroupRequest::default()
                .with_group_id(GroupId(s("g")))
                .with_generation_id(1)
                .with_member_id(s("m-1"))
                .with_assignments(vec![
                    sync_group_request::SyncGroupRequestAssignment::default()
                        .with_member_id(s("m-1"))
                        .with_assignment(Bytes::from_static(&[0, 1, 0, 0, 0, 0])),
                ]),
        ),
        sample(
            ApiKey::CreateTopics,
            CreateTopicsRequest::default()
                .with_timeout_ms(1000)
                .with_topics(vec![create_topics_request::CreatableTopic::default()
                    .with_name(topic.clone())
                    .with_num_partitions(3)
                    .with_replication_factor(1)
                    .with_configs(vec![
                        create_topics_request::CreatableTopicConfig::default()
                            .with_name(s("cleanup.policy"))
                            .with_value(Some(s("compact"))),
                    ])]),
        ),
        sample(
            ApiKey::IncrementalAlterConfigs,
            IncrementalAlterConfigsRequest::default().with_resources(vec![
                incremental_alter_configs_request::AlterConfigsResource::default()
                    .with_resource_type(2)
                    .with_resource_name(s("orders"))
                    .with_configs(vec![
                        incremental_alter_configs_request::AlterableConfig::default()
                            .with_name(s("retention.ms"))
                            .with_value(Some(s("1000"))),
                    ]),
            ]),
        ),
        sample(
            ApiKey::DescribeConfigs,
            DescribeConfigsRequest::default().with_resources(vec![
                describe_configs_request::DescribeConfigsResource::default()
                    .with_resource_type(4)
                    .with_resource_name(s("0"))
                    .with_configuration_keys(Some(vec![s("log.retention.ms")])),
            ]),
        ),
        sample(
            ApiKey::SaslAuthenticate,
            SaslAuthenticateRequest::default().with_auth_bytes(Bytes::from_static(b"\0u\0p")),
        ),
        sample(
            ApiKey::SaslHandshake,
            SaslHandshakeRequest::default().with_mechanism(s("PLAIN")),
        ),
        sample(
            ApiKey::ApiVersions,
            ApiVersionsRequest::default()
                .with_client_software_name(s("fuzz"))
                .with_client_software_version(s("1.0")),
        ),
        sample(
            ApiKey::WriteTxnMarkers,
            WriteTxnMarkersRequest::default().with_markers(vec![
                write_txn_markers_request::WritableTxnMarker::default()
                    .with_producer_id(ProducerId(9))
                    .with_transaction_result(true)
                    .with_topics(vec![
                        write_txn_markers_request::WritableTxnMarkerTopic::default()
                            .with_name(topic.clone())
                            .with_partition_indexes(vec![0, 1]),
                    ]),
            ]),
        ),
        sample(
            ApiKey::CreateAcls,
            CreateAclsRequest::default().with_creations(vec![
                create_acls_request::AclCreation::default()
                    .with_resource_type(2)
                    .with_resource_name(s("orders"))
                    .with_resource_pattern_type(3)
                    .with_principal(s("User:alice"))
                    .with_host(s("*"))
                    .with_operation(3)
                    .with_permission_type(3),
            ]),
        ),
    ]
}

/// Every served API at every served version: its default message, plus the samples.
pub fn request_seeds() -> Vec<Vec<u8>> {
    let mut seeds = Vec::new();
    let mut push = |key: ApiKey, v: i16, body: &dyn Fn(&mut BytesMut) -> bool| {
        let mut out = BytesMut::new();
        if header(key, v, &mut out) && body(&mut out) {
            seeds.push(out.to_vec());
        }
    };
    for &(key, lo, hi) in served() {
        for v in lo..=hi {
            push(key, v, &|out| zero_body(key, v, true, out));
        }
    }
    for (key, encode) in samples() {
        for &(k, lo, hi) in served() {
            if k == key {
                for v in lo..=hi {
                    push(key, v, &|out| encode(out, v));
                }
            }
        }
    }
    seeds
}

/// Every API and version the crate knows, each response at its default (zeros) value.
pub fn response_seeds() -> Vec<Vec<u8>> {
    let mut seeds = Vec::new();
    for key in ApiKey::iter() {
        let range = key.valid_versions();
        for v in range.min..=range.max {
            let mut out = BytesMut::new();
            out.extend_from_slice(&(key as i16).to_be_bytes());
            out.extend_from_slice(&v.to_be_bytes());
            let header = ResponseHeader::default().with_correlation_id(7);
            if header
                .encode(&mut out, key.response_header_version(v))
                .is_ok()
                && zero_body(key, v, false, &mut out)
            {
                seeds.push(out.to_vec());
            }
        }
    }
    seeds
}
