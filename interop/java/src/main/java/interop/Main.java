package interop;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.*;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.stream.Collectors;

import org.apache.kafka.clients.admin.*;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerGroupMetadata;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndTimestamp;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.*;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.errors.InvalidPartitionsException;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;
import org.apache.kafka.common.utils.Utils;

/**
 * Interop smoke test of the Apache Kafka Java client against a Kafka-compatible broker.
 * Usage: java -cp ... interop.Main BOOTSTRAP [recordsPerCodec]
 */
public class Main {
    interface Step { void run() throws Exception; }

    static final List<String> results = new ArrayList<>();
    static int failures = 0;

    static void step(String name, Step s) {
        long t0 = System.nanoTime();
        System.out.println("=== " + name);
        try {
            s.run();
            long ms = (System.nanoTime() - t0) / 1_000_000;
            results.add("PASS  " + name + " (" + ms + " ms)");
            System.out.println("--- PASS " + name + " (" + ms + " ms)");
        } catch (Throwable e) {
            failures++;
            long ms = (System.nanoTime() - t0) / 1_000_000;
            String desc = describe(e);
            results.add("FAIL  " + name + " (" + ms + " ms): " + desc);
            System.out.println("--- FAIL " + name + ": " + desc);
            e.printStackTrace(System.out);
        }
    }

    static String describe(Throwable e) {
        StringBuilder sb = new StringBuilder();
        Throwable t = e;
        int depth = 0;
        while (t != null && depth < 6) {
            if (depth > 0) sb.append("  <- caused by ");
            sb.append(t.getClass().getName()).append(": ").append(t.getMessage());
            if (t.getCause() == t) break;
            t = t.getCause();
            depth++;
        }
        return sb.toString();
    }

    static void check(boolean cond, String msg) {
        if (!cond) throw new AssertionError(msg);
    }

    static String bootstrap;
    static String topic;
    static String topic2;
    static int recordsPerCodec;
    static Uuid createdTopicId;
    static int numPartitionsAtProduce = -1;
    static final String[] CODECS = {"none", "gzip", "snappy", "lz4", "zstd"};
    // key -> partition reported by RecordMetadata
    static final Map<String, Integer> producedPartition = new HashMap<>();
    static int totalProduced = 0;
    // consumed data: partition -> list of (offset, timestamp)
    static final Map<Integer, List<long[]>> consumed = new TreeMap<>();
    static int totalConsumed = 0;

    public static void main(String[] args) throws Exception {
        bootstrap = args.length > 0 ? args[0] : "127.0.0.1:9092";
        recordsPerCodec = args.length > 1 ? Integer.parseInt(args[1]) : 10_000;
        String ver = appInfo("getVersion");
        String suffix = ver.replaceAll("[^0-9a-zA-Z]", "_") + "-" + (System.currentTimeMillis() % 1_000_000);
        topic = "interop-" + suffix;
        topic2 = "interop-del-" + suffix;
        System.out.println("kafka-clients version " + ver + " (commit " + appInfo("getCommitId") + "), bootstrap "
                + bootstrap + ", topic " + topic);

        Properties ap = new Properties();
        ap.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        ap.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, 15000);
        ap.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, 30000);
        try (Admin admin = Admin.create(ap)) {
            adminSteps(admin);
        }
        producerSteps();
        consumerSteps();
        transactionSteps();
        GroupSteps.run(bootstrap, topic, totalProduced);

        System.out.println();
        System.out.println("================ SUMMARY (kafka-clients " + ver + ") ================");
        results.forEach(System.out::println);
        System.out.println((results.size() - failures) + " passed, " + failures + " failed");
        System.exit(failures == 0 ? 0 : 1);
    }

    /** AppInfoParser moved to ...utils.internals in kafka-clients 4.4; look it up reflectively. */
    static String appInfo(String method) {
        for (String cn : new String[]{"org.apache.kafka.common.utils.AppInfoParser",
                "org.apache.kafka.common.utils.internals.AppInfoParser"}) {
            try {
                return (String) Class.forName(cn).getMethod(method).invoke(null);
            } catch (ReflectiveOperationException ignored) {
            }
        }
        return "unknown";
    }

    // ------------------------------------------------------------------ admin
    static void adminSteps(Admin admin) {
        step("admin.createTopics(3 partitions, retention.ms=3600000) + second topic", () -> {
            NewTopic t1 = new NewTopic(topic, 3, (short) 1).configs(Map.of("retention.ms", "3600000"));
            NewTopic t2 = new NewTopic(topic2, 1, (short) 1);
            CreateTopicsResult r = admin.createTopics(List.of(t1, t2));
            r.all().get();
            int np = r.numPartitions(topic).get();
            int rf = r.replicationFactor(topic).get();
            createdTopicId = r.topicId(topic).get();
            Config cfg = r.config(topic).get();
            ConfigEntry ret = cfg.get("retention.ms");
            System.out.println("  created numPartitions=" + np + " rf=" + rf + " topicId=" + createdTopicId
                    + " retention.ms=" + (ret == null ? null : ret.value() + " source=" + ret.source()));
            check(np == 3, "numPartitions from CreateTopics response = " + np);
            check(rf == 1, "replicationFactor = " + rf);
            check(createdTopicId != null && !createdTopicId.equals(Uuid.ZERO_UUID), "topicId = " + createdTopicId);
            check(ret != null && "3600000".equals(ret.value()), "retention.ms in CreateTopics response config = " + ret);
        });

        step("admin.createTopics duplicate -> TopicExistsException", () -> {
            try {
                admin.createTopics(List.of(new NewTopic(topic, 3, (short) 1))).all().get();
                throw new AssertionError("duplicate create succeeded");
            } catch (ExecutionException e) {
                check(e.getCause() instanceof org.apache.kafka.common.errors.TopicExistsException,
                        "expected TopicExistsException, got " + describe(e.getCause()));
                System.out.println("  got expected " + describe(e.getCause()));
            }
        });

        step("admin.listTopics", () -> {
            Set<String> names = admin.listTopics().names().get();
            System.out.println("  topics: " + names);
            check(names.contains(topic) && names.contains(topic2), "created topics missing from listTopics: " + names);
            Map<String, TopicListing> internal = admin.listTopics(new ListTopicsOptions().listInternal(true)).namesToListings().get();
            TopicListing l = internal.get(topic);
            System.out.println("  listing: " + l);
            check(l.topicId() != null && l.topicId().equals(createdTopicId), "listing topicId " + l.topicId() + " != " + createdTopicId);
        });

        step("admin.describeTopics (by name)", () -> {
            TopicDescription d = admin.describeTopics(List.of(topic)).allTopicNames().get().get(topic);
            System.out.println("  " + d);
            check(d.partitions().size() == 3, "partitions = " + d.partitions().size());
            check(!d.isInternal(), "isInternal");
            check(createdTopicId.equals(d.topicId()), "topicId " + d.topicId() + " != created " + createdTopicId);
            for (int i = 0; i < d.partitions().size(); i++) {
                TopicPartitionInfo p = d.partitions().get(i);
                check(p.partition() == i, "partition index " + p.partition() + " at " + i);
                check(p.leader() != null && p.leader().id() == 0, "leader of p" + i + " = " + p.leader());
                check(p.replicas().size() == 1 && p.replicas().get(0).id() == 0, "replicas of p" + i + " = " + p.replicas());
                check(p.isr().size() == 1 && p.isr().get(0).id() == 0, "isr of p" + i + " = " + p.isr());
                check(p.leader().host() != null && p.leader().port() > 0, "leader node endpoint " + p.leader());
            }
        });

        step("admin.describeTopics (by topic id, TopicCollection.ofTopicIds)", () -> {
            Map<Uuid, TopicDescription> m = admin.describeTopics(TopicCollection.ofTopicIds(List.of(createdTopicId)))
                    .allTopicIds().get();
            TopicDescription d = m.get(createdTopicId);
            System.out.println("  " + d);
            check(d != null && d.name().equals(topic), "name by id = " + (d == null ? null : d.name()));
            check(d.partitions().size() == 3, "partitions = " + d.partitions().size());
        });

        step("admin.describeTopics (nonexistent) -> UnknownTopicOrPartitionException", () -> {
            try {
                admin.describeTopics(List.of("no-such-topic-xyz")).allTopicNames().get();
                throw new AssertionError("describe of nonexistent topic succeeded");
            } catch (ExecutionException e) {
                check(e.getCause() instanceof org.apache.kafka.common.errors.UnknownTopicOrPartitionException,
                        "expected UnknownTopicOrPartitionException, got " + describe(e.getCause()));
                System.out.println("  got expected " + describe(e.getCause()));
            }
        });

        step("admin.describeTopics one partition per response (DescribeTopicPartitions cursor)", () -> {
            TopicDescription d = admin.describeTopics(List.of(topic, topic2),
                    new DescribeTopicsOptions().partitionSizeLimitPerResponse(1)).allTopicNames().get().get(topic);
            System.out.println("  " + d);
            check(d.partitions().size() == 3, "partitions = " + d.partitions().size());
            for (int i = 0; i < 3; i++) {
                check(d.partitions().get(i).partition() == i, "partition " + i + " = " + d.partitions().get(i));
            }
        });

        step("admin.listConfigResources (4.4: ListConfigResources v1; 3.9: ListClientMetricsResources)", () -> {
            Class<?> opts;
            try {
                opts = Class.forName("org.apache.kafka.clients.admin.ListConfigResourcesOptions");
            } catch (ClassNotFoundException e) {
                Object r = Admin.class.getMethod("listClientMetricsResources").invoke(admin);
                Collection<?> none = (Collection<?>) ((KafkaFuture<?>) r.getClass().getMethod("all").invoke(r)).get();
                System.out.println("  client metrics resources: " + none);
                check(none.isEmpty(), "client metrics resources " + none);
                return;
            }
            Object r = Admin.class.getMethod("listConfigResources", Set.class, opts).invoke(admin,
                    Set.of(ConfigResource.Type.TOPIC, ConfigResource.Type.BROKER), opts.getConstructor().newInstance());
            Collection<?> all = (Collection<?>) ((KafkaFuture<?>) r.getClass().getMethod("all").invoke(r)).get();
            System.out.println("  " + all);
            check(all.contains(new ConfigResource(ConfigResource.Type.TOPIC, topic)), "topic missing: " + all);
            check(all.contains(new ConfigResource(ConfigResource.Type.BROKER, "0")), "broker 0 missing: " + all);
        });

        step("admin.describeConfigs(topic)", () -> {
            ConfigResource res = new ConfigResource(ConfigResource.Type.TOPIC, topic);
            Config cfg = admin.describeConfigs(List.of(res), new DescribeConfigsOptions().includeSynonyms(true)
                    .includeDocumentation(true)).all().get().get(res);
            System.out.println("  " + cfg.entries().size() + " entries");
            ConfigEntry ret = cfg.get("retention.ms");
            System.out.println("  retention.ms: " + ret);
            check(ret != null && "3600000".equals(ret.value()), "retention.ms = " + ret);
            check(ret.source() == ConfigEntry.ConfigSource.DYNAMIC_TOPIC_CONFIG, "retention.ms source = " + ret.source());
            ConfigEntry cleanup = cfg.get("cleanup.policy");
            System.out.println("  cleanup.policy: " + cleanup);
            check(cleanup != null, "cleanup.policy missing");
            ConfigEntry segBytes = cfg.get("segment.bytes");
            System.out.println("  segment.bytes: " + segBytes);
        });

        step("admin.describeConfigs(broker \"0\")", () -> {
            ConfigResource res = new ConfigResource(ConfigResource.Type.BROKER, "0");
            Config cfg = admin.describeConfigs(List.of(res)).all().get().get(res);
            System.out.println("  " + cfg.entries().size() + " entries; sample: "
                    + cfg.entries().stream().limit(5).map(e -> e.name() + "=" + e.value()).collect(Collectors.joining(", ")));
            check(!cfg.entries().isEmpty(), "no broker config entries");
            // Every config Kafka 4.4 describes (350), flagged as Kafka flags it.
            check(cfg.entries().size() >= 350, "broker configs: " + cfg.entries().size());
            check(cfg.get("log.retention.hours").isReadOnly(), "log.retention.hours is not read-only");
            check(!cfg.get("log.retention.ms").isReadOnly(), "log.retention.ms is read-only");
            ConfigEntry relogin = cfg.get("sasl.kerberos.min.time.before.relogin");
            check(relogin != null && "60000".equals(relogin.value()) && !relogin.isReadOnly(),
                    "sasl.kerberos.min.time.before.relogin: " + relogin);
        });

        step("admin.incrementalAlterConfigs: Kafka 4.4 configs Sluice accepts without acting on them", () -> {
            ConfigResource b = new ConfigResource(ConfigResource.Type.BROKER, "0");
            String key = "listener.name.plaintext.sasl.kerberos.min.time.before.relogin";
            admin.incrementalAlterConfigs(Map.of(b, List.of(new AlterConfigOp(
                    new ConfigEntry(key, "30000"), AlterConfigOp.OpType.SET)))).all().get();
            Config bc = admin.describeConfigs(List.of(b)).all().get().get(b);
            check(bc.get(key) != null && "30000".equals(bc.get(key).value()), key + " = " + bc.get(key));
            ConfigResource t = new ConfigResource(ConfigResource.Type.TOPIC, topic);
            admin.incrementalAlterConfigs(Map.of(t, List.of(new AlterConfigOp(
                    new ConfigEntry("errors.deadletterqueue.group.enable", "true"), AlterConfigOp.OpType.SET)))).all().get();
            Config tc = admin.describeConfigs(List.of(t)).all().get().get(t);
            ConfigEntry dlq = tc.get("errors.deadletterqueue.group.enable");
            check(dlq != null && "true".equals(dlq.value()), "errors.deadletterqueue.group.enable = " + dlq);
            try {
                admin.incrementalAlterConfigs(Map.of(b, List.of(new AlterConfigOp(
                        new ConfigEntry("log.retention.hours", "1"), AlterConfigOp.OpType.SET)))).all().get();
                throw new AssertionError("log.retention.hours was changed at runtime");
            } catch (ExecutionException e) {
                System.out.println("  log.retention.hours refused: " + describe(e.getCause()));
            }
        });

        step("admin.describeCluster", () -> {
            DescribeClusterResult r = admin.describeCluster();
            String cid = r.clusterId().get();
            Collection<Node> nodes = r.nodes().get();
            Node controller = r.controller().get();
            System.out.println("  clusterId=" + cid + " nodes=" + nodes + " controller=" + controller);
            check(cid != null && !cid.isEmpty(), "clusterId empty");
            check(nodes.size() == 1 && nodes.iterator().next().id() == 0, "nodes = " + nodes);
            check(controller != null, "controller null");
        });

        step("admin.describeMetadataQuorum", () -> {
            QuorumInfo q = admin.describeMetadataQuorum().quorumInfo().get();
            System.out.println("  leader=" + q.leaderId() + " epoch=" + q.leaderEpoch()
                + " hw=" + q.highWatermark() + " voters=" + q.voters() + " observers=" + q.observers());
            check(q.leaderId() == 0, "leader = " + q.leaderId());
            check(q.leaderEpoch() > 0, "leader epoch = " + q.leaderEpoch());
            check(q.highWatermark() > 0, "high watermark = " + q.highWatermark());
            check(q.voters().size() == 1 && q.voters().get(0).replicaId() == 0, "voters = " + q.voters());
            check(q.voters().get(0).logEndOffset() >= q.highWatermark(), "voter log end = " + q.voters());
            check(q.voters().get(0).lastCaughtUpTimestamp().isPresent(), "no caught-up time: " + q.voters());
            check(q.observers().isEmpty(), "observers = " + q.observers());
        });

        step("admin.describeFeatures + updateFeatures (metadata.version)", () -> {
            FeatureMetadata f = admin.describeFeatures().featureMetadata().get();
            System.out.println("  finalized=" + f.finalizedFeatures() + " supported=" + f.supportedFeatures()
                + " epoch=" + f.finalizedFeaturesEpoch());
            FinalizedVersionRange mv = f.finalizedFeatures().get("metadata.version");
            // A new cluster starts at Kafka 4.4's latest, 4.4-IV2.
            check(mv != null && mv.maxVersionLevel() == 33, "finalized metadata.version = " + mv);
            SupportedVersionRange smv = f.supportedFeatures().get("metadata.version");
            check(smv != null && smv.minVersion() == 7 && smv.maxVersion() == 33, "supported = " + smv);
            admin.updateFeatures(Map.of("metadata.version",
                    new FeatureUpdate((short) 33, FeatureUpdate.UpgradeType.UPGRADE)),
                new UpdateFeaturesOptions().validateOnly(true)).all().get();
            try {
                admin.updateFeatures(Map.of("metadata.version",
                        new FeatureUpdate((short) 32, FeatureUpdate.UpgradeType.SAFE_DOWNGRADE)),
                    new UpdateFeaturesOptions()).all().get();
                check(false, "a metadata.version downgrade was accepted");
            } catch (ExecutionException e) {
                check(e.getCause() instanceof org.apache.kafka.common.errors.InvalidUpdateVersionException,
                    "downgrade refused with " + e.getCause());
            }
        });

        step("admin.addRaftVoter / removeRaftVoter on a static quorum: UnsupportedVersionException", () -> {
            Uuid dir = Uuid.randomUuid();
            try {
                admin.addRaftVoter(7, dir, Set.of(new RaftVoterEndpoint("CONTROLLER", "127.0.0.1", 9093)))
                    .all().get();
                check(false, "a voter was added to a static quorum");
            } catch (ExecutionException e) {
                check(e.getCause() instanceof org.apache.kafka.common.errors.UnsupportedVersionException
                        && e.getCause().getMessage().contains("kraft.version"),
                    "addRaftVoter refused with " + e.getCause());
            }
            try {
                admin.removeRaftVoter(0, dir).all().get();
                check(false, "a voter was removed from a static quorum");
            } catch (ExecutionException e) {
                check(e.getCause() instanceof org.apache.kafka.common.errors.UnsupportedVersionException,
                    "removeRaftVoter refused with " + e.getCause());
            }
        });

        step("admin.createPartitions(topic -> 5)", () -> {
            admin.createPartitions(Map.of(topic, NewPartitions.increaseTo(5))).all().get();
            TopicDescription d = admin.describeTopics(List.of(topic)).allTopicNames().get().get(topic);
            System.out.println("  now " + d.partitions().size() + " partitions");
            check(d.partitions().size() == 5, "partitions after increase = " + d.partitions().size());
            for (TopicPartitionInfo p : d.partitions()) {
                check(p.leader() != null && p.leader().id() == 0, "leader of p" + p.partition() + " = " + p.leader());
            }
        });

        step("admin.createPartitions(topic -> 4) must fail with InvalidPartitionsException", () -> {
            try {
                admin.createPartitions(Map.of(topic, NewPartitions.increaseTo(4))).all().get();
                throw new AssertionError("decrease to 4 partitions succeeded");
            } catch (ExecutionException e) {
                System.out.println("  got " + describe(e.getCause()));
                check(e.getCause() instanceof InvalidPartitionsException,
                        "expected InvalidPartitionsException, got " + describe(e.getCause()));
            }
        });

        step("admin.createPartitions validateOnly(topic -> 6)", () -> {
            admin.createPartitions(Map.of(topic, NewPartitions.increaseTo(6)),
                    new CreatePartitionsOptions().validateOnly(true)).all().get();
            TopicDescription d = admin.describeTopics(List.of(topic)).allTopicNames().get().get(topic);
            check(d.partitions().size() == 5, "validateOnly changed partition count to " + d.partitions().size());
        });

        step("admin.deleteTopics(second topic)", () -> {
            admin.deleteTopics(List.of(topic2)).all().get();
            Set<String> names = Set.of();
            for (int i = 0; i < 20; i++) {
                names = admin.listTopics().names().get();
                if (!names.contains(topic2)) break;
                Thread.sleep(250);
            }
            System.out.println("  topics after delete: " + names);
            check(!names.contains(topic2), "deleted topic still listed");
            check(names.contains(topic), "main topic disappeared");
        });

        step("admin.describeTopics (unknown topic id) -> UnknownTopicIdException", () -> {
            Uuid rnd = Uuid.randomUuid();
            try {
                admin.describeTopics(TopicCollection.ofTopicIds(List.of(rnd))).allTopicIds().get();
                throw new AssertionError("describe of unknown topic id succeeded");
            } catch (ExecutionException e) {
                System.out.println("  got " + describe(e.getCause()));
                check(e.getCause() instanceof org.apache.kafka.common.errors.UnknownTopicIdException,
                        "expected UnknownTopicIdException, got " + describe(e.getCause()));
            }
        });

        step("admin.deleteTopics(by topic id, TopicCollection.ofTopicIds)", () -> {
            String t3 = topic2 + "-byid";
            Uuid id = admin.createTopics(List.of(new NewTopic(t3, 1, (short) 1))).topicId(t3).get();
            admin.deleteTopics(TopicCollection.ofTopicIds(List.of(id))).all().get();
            Set<String> names = admin.listTopics().names().get();
            check(!names.contains(t3), "topic deleted by id still listed");
        });

        step("admin.deleteTopics(nonexistent) -> UnknownTopicOrPartitionException", () -> {
            try {
                admin.deleteTopics(List.of("no-such-topic-xyz")).all().get();
                throw new AssertionError("delete of nonexistent topic succeeded");
            } catch (ExecutionException e) {
                System.out.println("  got " + describe(e.getCause()));
                check(e.getCause() instanceof org.apache.kafka.common.errors.UnknownTopicOrPartitionException,
                        "expected UnknownTopicOrPartitionException, got " + describe(e.getCause()));
            }
        });
    }

    // ------------------------------------------------------------------ producer
    static int expectedPartition(String key, int numPartitions) {
        byte[] kb = key.getBytes(StandardCharsets.UTF_8);
        return Utils.toPositive(Utils.murmur2(kb)) % numPartitions;
    }

    static void producerSteps() {
        for (String codec : CODECS) {
            step("producer (defaults" + (codec.equals("none") ? "" : ", compression.type=" + codec) + "): send "
                    + recordsPerCodec + " keyed records + flush", () -> produce(codec));
        }
    }

    static void produce(String codec) throws Exception {
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        if (!codec.equals("none")) p.put(ProducerConfig.COMPRESSION_TYPE_CONFIG, codec);
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(p)) {
            int np = producer.partitionsFor(topic).size();
            numPartitionsAtProduce = np;
            System.out.println("  partitionsFor -> " + np);
            check(np == 5, "producer sees " + np + " partitions, expected 5");
            ConcurrentLinkedQueue<String> errors = new ConcurrentLinkedQueue<>();
            AtomicInteger acked = new AtomicInteger();
            Map<String, Integer> partOf = Collections.synchronizedMap(new HashMap<>());
            for (int i = 0; i < recordsPerCodec; i++) {
                String key = "key-" + i;
                String value = codec + "-value-" + i + "-" + "x".repeat(i % 50);
                ProducerRecord<String, String> rec = new ProducerRecord<>(topic, key, value);
                if (i < 5) {
                    RecordMetadata md = producer.send(rec).get();
                    System.out.println("  sync send " + key + " -> " + md.topic() + "-" + md.partition() + "@" + md.offset()
                            + " ts=" + md.timestamp() + " keySize=" + md.serializedKeySize() + " valueSize=" + md.serializedValueSize());
                    check(md.topic().equals(topic), "md.topic " + md.topic());
                    check(md.hasOffset() && md.offset() >= 0, "md.offset " + md.offset());
                    check(md.partition() == expectedPartition(key, np), "md.partition " + md.partition() + " != murmur2 " + expectedPartition(key, np));
                    check(md.timestamp() > 0, "md.timestamp " + md.timestamp());
                    check(md.serializedKeySize() == key.length(), "serializedKeySize " + md.serializedKeySize());
                    partOf.put(key, md.partition());
                    acked.incrementAndGet();
                } else {
                    producer.send(rec, (md, ex) -> {
                        if (ex != null) {
                            if (errors.size() < 20) errors.add(key + ": " + describe(ex));
                        } else {
                            acked.incrementAndGet();
                            partOf.put(key, md.partition());
                        }
                    });
                }
            }
            producer.flush();
            System.out.println("  acked " + acked.get() + "/" + recordsPerCodec + ", errors " + errors.size());
            errors.forEach(e -> System.out.println("  error: " + e));
            check(errors.isEmpty(), "send errors, first: " + errors.peek());
            check(acked.get() == recordsPerCodec, "acked " + acked.get());
            int mismatched = 0;
            for (Map.Entry<String, Integer> e : partOf.entrySet()) {
                if (e.getValue() != expectedPartition(e.getKey(), np)) mismatched++;
            }
            check(mismatched == 0, mismatched + " records landed on a partition different from murmur2");
            totalProduced += acked.get();
            synchronized (partOf) { producedPartition.putAll(partOf); }
        }
    }

    // ------------------------------------------------------------------ consumer
    static Properties consumerProps() {
        Properties c = new Properties();
        c.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        c.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        c.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        c.put(ConsumerConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, 30000);
        c.put(ConsumerConfig.REQUEST_TIMEOUT_MS_CONFIG, 15000);
        return c;
    }

    static void consumerSteps() {
        Properties c = consumerProps();
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(c)) {
            List<TopicPartition> tps = new ArrayList<>();
            step("consumer (no group.id): partitionsFor + assign + seekToBeginning + poll all", () -> {
                for (PartitionInfo pi : consumer.partitionsFor(topic)) tps.add(new TopicPartition(topic, pi.partition()));
                tps.sort(Comparator.comparingInt(TopicPartition::partition));
                System.out.println("  partitions: " + tps);
                check(tps.size() == 5, "partitionsFor -> " + tps.size());
                consumer.assign(tps);
                consumer.seekToBeginning(tps);
                Map<String, Integer> codecCount = new TreeMap<>();
                Set<String> seen = new HashSet<>();
                int dups = 0, partMismatch = 0, valueMismatch = 0;
                long deadline = System.currentTimeMillis() + 90_000;
                int emptyPolls = 0;
                while (totalConsumed < totalProduced && System.currentTimeMillis() < deadline) {
                    ConsumerRecords<String, String> recs = consumer.poll(Duration.ofMillis(1000));
                    if (recs.isEmpty()) emptyPolls++;
                    for (ConsumerRecord<String, String> r : recs) {
                        totalConsumed++;
                        String codec = r.value().substring(0, r.value().indexOf('-'));
                        codecCount.merge(codec, 1, Integer::sum);
                        if (!seen.add(codec + "/" + r.key())) dups++;
                        if (r.partition() != expectedPartition(r.key(), numPartitionsAtProduce)) partMismatch++;
                        int idx = Integer.parseInt(r.key().substring(4));
                        if (!r.value().equals(codec + "-value-" + idx + "-" + "x".repeat(idx % 50))) valueMismatch++;
                        consumed.computeIfAbsent(r.partition(), k -> new ArrayList<>()).add(new long[]{r.offset(), r.timestamp()});
                    }
                }
                System.out.println("  consumed " + totalConsumed + "/" + totalProduced + " (empty polls " + emptyPolls + ") per codec "
                        + codecCount + " dups=" + dups + " partitionMismatch=" + partMismatch + " valueMismatch=" + valueMismatch);
                Map<Integer, Integer> perPart = new TreeMap<>();
                consumed.forEach((k, v) -> perPart.put(k, v.size()));
                System.out.println("  per partition: " + perPart);
                // offsets contiguous from 0 in each partition
                for (Map.Entry<Integer, List<long[]>> e : consumed.entrySet()) {
                    List<long[]> l = e.getValue();
                    for (int i = 0; i < l.size(); i++) {
                        check(l.get(i)[0] == i, "partition " + e.getKey() + " offset gap/disorder at index " + i + ": offset " + l.get(i)[0]);
                    }
                }
                check(totalConsumed == totalProduced, "consumed " + totalConsumed + " != produced " + totalProduced);
                check(dups == 0, dups + " duplicates");
                check(partMismatch == 0, partMismatch + " records whose partition != murmur2(key) % " + numPartitionsAtProduce);
                check(valueMismatch == 0, valueMismatch + " value mismatches");
                // position now equals end
                for (TopicPartition tp : tps) {
                    long pos = consumer.position(tp);
                    int n = consumed.getOrDefault(tp.partition(), List.of()).size();
                    check(pos == n, "position(" + tp + ")=" + pos + " expected " + n);
                }
            });

            step("consumer.beginningOffsets", () -> {
                Map<TopicPartition, Long> b = consumer.beginningOffsets(tps);
                System.out.println("  " + b);
                for (TopicPartition tp : tps) check(b.get(tp) == 0L, "beginning " + tp + " = " + b.get(tp));
            });

            step("consumer.endOffsets", () -> {
                Map<TopicPartition, Long> e = consumer.endOffsets(tps);
                System.out.println("  " + e);
                long sum = 0;
                for (TopicPartition tp : tps) {
                    long exp = consumed.getOrDefault(tp.partition(), List.of()).size();
                    check(e.get(tp) == exp, "end " + tp + " = " + e.get(tp) + " expected " + exp);
                    sum += e.get(tp);
                }
                check(sum == totalProduced, "sum endOffsets " + sum);
            });

            step("consumer.offsetsForTimes (middle record ts, 0, future)", () -> {
                Map<TopicPartition, Long> query = new HashMap<>();
                Map<TopicPartition, Long> expected = new HashMap<>();
                for (TopicPartition tp : tps) {
                    List<long[]> l = consumed.get(tp.partition());
                    if (l == null || l.isEmpty()) continue;
                    long ts = l.get(l.size() / 2)[1];
                    query.put(tp, ts);
                    long exp = -1;
                    for (long[] r : l) if (r[1] >= ts) { exp = r[0]; break; }
                    expected.put(tp, exp);
                }
                Map<TopicPartition, OffsetAndTimestamp> res = consumer.offsetsForTimes(query);
                System.out.println("  query " + query);
                System.out.println("  result " + res);
                for (TopicPartition tp : query.keySet()) {
                    OffsetAndTimestamp oat = res.get(tp);
                    check(oat != null, "null result for " + tp);
                    check(oat.offset() == expected.get(tp), tp + " offset " + oat.offset() + " expected " + expected.get(tp));
                    check(oat.timestamp() >= query.get(tp), tp + " ts " + oat.timestamp() + " < query " + query.get(tp));
                }
                Map<TopicPartition, Long> zero = new HashMap<>();
                Map<TopicPartition, Long> future = new HashMap<>();
                for (TopicPartition tp : tps) { zero.put(tp, 0L); future.put(tp, System.currentTimeMillis() + 3_600_000L); }
                Map<TopicPartition, OffsetAndTimestamp> r0 = consumer.offsetsForTimes(zero);
                System.out.println("  ts=0 -> " + r0);
                for (TopicPartition tp : tps) {
                    check(r0.get(tp) != null && r0.get(tp).offset() == 0, "ts=0 " + tp + " -> " + r0.get(tp));
                }
                Map<TopicPartition, OffsetAndTimestamp> rf = consumer.offsetsForTimes(future);
                System.out.println("  ts=future -> " + rf);
                for (TopicPartition tp : tps) check(rf.get(tp) == null, "future ts " + tp + " -> " + rf.get(tp));
            });

            step("consumer seek to middle offset + poll", () -> {
                TopicPartition tp = tps.get(0);
                long n = consumed.get(tp.partition()).size();
                long mid = n / 2;
                consumer.assign(List.of(tp));
                consumer.seek(tp, mid);
                ConsumerRecords<String, String> recs = ConsumerRecords.empty();
                long deadline = System.currentTimeMillis() + 10_000;
                while (recs.isEmpty() && System.currentTimeMillis() < deadline) recs = consumer.poll(Duration.ofMillis(500));
                check(!recs.isEmpty(), "no records after seek");
                long first = recs.iterator().next().offset();
                System.out.println("  seek " + mid + " -> first record offset " + first + ", " + recs.count() + " records");
                check(first == mid, "first offset after seek = " + first);
            });
        }

        step("consumer isolation.level=read_committed: endOffsets + poll", () -> {
            Properties c2 = consumerProps();
            c2.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
            try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(c2)) {
                List<TopicPartition> tps = new ArrayList<>();
                for (PartitionInfo pi : consumer.partitionsFor(topic)) tps.add(new TopicPartition(topic, pi.partition()));
                Map<TopicPartition, Long> e = consumer.endOffsets(tps);
                System.out.println("  LSO endOffsets " + e);
                for (TopicPartition tp : tps) {
                    long exp = consumed.getOrDefault(tp.partition(), List.of()).size();
                    check(e.get(tp) == exp, "LSO " + tp + " = " + e.get(tp) + " expected " + exp);
                }
                consumer.assign(tps);
                consumer.seekToBeginning(tps);
                int n = 0;
                long deadline = System.currentTimeMillis() + 60_000;
                while (n < totalProduced && System.currentTimeMillis() < deadline) n += consumer.poll(Duration.ofMillis(1000)).count();
                System.out.println("  read_committed consumed " + n);
                check(n == totalProduced, "read_committed consumed " + n + " != " + totalProduced);
            }
        });

        step("admin.listOffsets (earliest, latest, maxTimestamp)", () -> {
            Properties ap = new Properties();
            ap.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
            ap.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, 30000);
            try (Admin admin = Admin.create(ap)) {
                TopicPartition tp = new TopicPartition(topic, 0);
                List<long[]> l = consumed.get(0);
                long e = admin.listOffsets(Map.of(tp, OffsetSpec.earliest())).partitionResult(tp).get().offset();
                long la = admin.listOffsets(Map.of(tp, OffsetSpec.latest())).partitionResult(tp).get().offset();
                ListOffsetsResult.ListOffsetsResultInfo mx = admin.listOffsets(Map.of(tp, OffsetSpec.maxTimestamp())).partitionResult(tp).get();
                long maxTs = Long.MIN_VALUE, maxOff = -1;
                for (long[] r : l) if (r[1] > maxTs) { maxTs = r[1]; maxOff = r[0]; }
                System.out.println("  earliest=" + e + " latest=" + la + " maxTimestamp=" + mx + " (expected offset " + maxOff + " ts " + maxTs + ")");
                check(e == 0, "earliest " + e);
                check(la == l.size(), "latest " + la);
                check(mx.timestamp() == maxTs, "maxTimestamp ts " + mx.timestamp() + " expected " + maxTs);
                check(mx.offset() == maxOff, "maxTimestamp offset " + mx.offset() + " expected " + maxOff);
            }
        });
    }

    // ------------------------------------------------------------------ transactions

    /**
     * A transactional producer: a commit (with offsets sent to the transaction) and an abort;
     * read_committed sees the commit only. With transaction.version 2 finalized (a new
     * cluster's level, here turned off and upgraded again), a 4.x client speaks transactions v2 (KIP-890): no
     * AddPartitionsToTxn, and every commit or abort bumps the producer epoch, which
     * DescribeTransactions shows.
     */
    static void transactionSteps() {
        step("transactional producer: commit with sendOffsetsToTransaction, abort; read_committed; epochs", () -> {
            String txTopic = topic + "-txn";
            String txId = "interop-txn-" + topic;
            String group = "interop-txn-group-" + topic;
            Properties ap = new Properties();
            ap.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
            ap.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, 30000);
            try (Admin admin = Admin.create(ap)) {
                admin.createTopics(List.of(new NewTopic(txTopic, 3, (short) 1))).all().get();
                // A new cluster finalizes it (as a new Kafka 4.x does); one upgraded from 3.x has
                // it off until upgraded: turned off here, then upgraded.
                FinalizedVersionRange tv = admin.describeFeatures().featureMetadata().get()
                    .finalizedFeatures().get("transaction.version");
                check(tv != null && tv.maxVersionLevel() == 2, "a new cluster's transaction.version = " + tv);
                admin.updateFeatures(Map.of("transaction.version",
                        new FeatureUpdate((short) 0, FeatureUpdate.UpgradeType.SAFE_DOWNGRADE)),
                    new UpdateFeaturesOptions()).all().get();
                long off = System.currentTimeMillis() + 10_000;
                while (tv != null && System.currentTimeMillis() < off) {
                    tv = admin.describeFeatures().featureMetadata().get().finalizedFeatures().get("transaction.version");
                    if (tv != null) Thread.sleep(50);
                }
                check(tv == null, "transaction.version after the downgrade = " + tv);
                admin.updateFeatures(Map.of("transaction.version",
                        new FeatureUpdate((short) 2, FeatureUpdate.UpgradeType.UPGRADE)),
                    new UpdateFeaturesOptions()).all().get();
                long until = System.currentTimeMillis() + 10_000;
                while ((tv == null || tv.maxVersionLevel() != 2) && System.currentTimeMillis() < until) {
                    tv = admin.describeFeatures().featureMetadata().get().finalizedFeatures().get("transaction.version");
                    if (tv == null || tv.maxVersionLevel() != 2) Thread.sleep(50);
                }
                System.out.println("  finalized transaction.version " + tv);
                check(tv != null && tv.maxVersionLevel() == 2, "transaction.version = " + tv);
                Properties pp = new Properties();
                pp.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
                pp.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, txId);
                pp.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
                pp.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
                int firstEpoch;
                try (KafkaProducer<String, String> p = new KafkaProducer<>(pp)) {
                    p.initTransactions();
                    firstEpoch = admin.describeTransactions(List.of(txId)).description(txId).get().producerEpoch();
                    p.beginTransaction();
                    for (int i = 0; i < 30; i++) p.send(new ProducerRecord<>(txTopic, "k" + i, "committed-" + i));
                    p.sendOffsetsToTransaction(Map.of(new TopicPartition(topic, 0), new OffsetAndMetadata(5)),
                        new ConsumerGroupMetadata(group));
                    p.commitTransaction();
                    p.beginTransaction();
                    for (int i = 0; i < 10; i++) p.send(new ProducerRecord<>(txTopic, "k" + i, "aborted-" + i));
                    p.flush();
                    p.abortTransaction();
                    p.beginTransaction();
                    for (int i = 30; i < 40; i++) p.send(new ProducerRecord<>(txTopic, "k" + i, "committed-" + i));
                    p.commitTransaction();
                }
                TransactionDescription d = admin.describeTransactions(List.of(txId)).description(txId).get();
                int bumps = d.producerEpoch() - firstEpoch;
                boolean v2 = !appInfo("getVersion").startsWith("3.");
                System.out.println("  epoch " + firstEpoch + " -> " + d.producerEpoch() + " (" + d.state() + ")");
                check(bumps == (v2 ? 3 : 0), "epoch bumps " + bumps + " (transactions v2: " + v2 + ")");
                long committed = admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get()
                    .get(new TopicPartition(topic, 0)).offset();
                check(committed == 5, "committed offset " + committed);
            }
            Properties c = consumerProps();
            c.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
            try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(c)) {
                List<TopicPartition> tps = new ArrayList<>();
                for (int i = 0; i < 3; i++) tps.add(new TopicPartition(txTopic, i));
                consumer.assign(tps);
                consumer.seekToBeginning(tps);
                Set<String> seen = new TreeSet<>();
                long deadline = System.currentTimeMillis() + 30_000;
                while (seen.size() < 40 && System.currentTimeMillis() < deadline) {
                    for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(500))) {
                        check(r.value().startsWith("committed-"), "read_committed read " + r.value());
                        seen.add(r.value());
                    }
                }
                // Anything past the 40 (an aborted record) would show in one more poll.
                for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(500))) {
                    check(r.value().startsWith("committed-"), "read_committed read " + r.value());
                    seen.add(r.value());
                }
                check(seen.size() == 40, "read_committed saw " + seen.size() + " of 40");
            }
        });
    }
}
