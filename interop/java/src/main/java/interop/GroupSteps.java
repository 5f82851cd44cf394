package interop;

import java.time.Duration;
import java.util.*;
import java.util.stream.Collectors;

import org.apache.kafka.clients.admin.*;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;

import static interop.Main.check;
import static interop.Main.step;

/** Consumer groups with the Java client: membership, rebalances, commits, group admin. */
final class GroupSteps {
    private GroupSteps() {}

    static KafkaConsumer<String, String> member(String group, String assignor) {
        Properties c = Main.consumerProps();
        c.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        c.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        c.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "true");
        c.put(ConsumerConfig.AUTO_COMMIT_INTERVAL_MS_CONFIG, "100");
        c.put(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, "10000");
        c.put(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG, "500");
        if (assignor != null) c.put(ConsumerConfig.PARTITION_ASSIGNMENT_STRATEGY_CONFIG, assignor);
        return new KafkaConsumer<>(c);
    }

    /** Two members share the topic; every record is read exactly once; both get partitions. */
    static void twoMembers(String group, String assignor, String topic, int total) {
        try (KafkaConsumer<String, String> a = member(group, assignor);
             KafkaConsumer<String, String> b = member(group, assignor)) {
            a.subscribe(List.of(topic));
            b.subscribe(List.of(topic));
            Set<String> seen = new HashSet<>();
            int dups = 0;
            long deadline = System.currentTimeMillis() + 90_000;
            while ((seen.size() < total || a.assignment().isEmpty() || b.assignment().isEmpty())
                    && System.currentTimeMillis() < deadline) {
                for (KafkaConsumer<String, String> c : List.of(a, b)) {
                    for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(100))) {
                        if (!seen.add(r.partition() + "/" + r.offset())) dups++;
                    }
                }
            }
            System.out.println("  " + assignor + ": a=" + a.assignment() + " b=" + b.assignment()
                    + " consumed " + seen.size() + " dups " + dups);
            check(seen.size() == total, "consumed " + seen.size() + " of " + total);
            check(dups == 0, dups + " records read twice");
            check(!a.assignment().isEmpty() && !b.assignment().isEmpty(), "both members got partitions");
            Set<TopicPartition> union = new HashSet<>(a.assignment());
            union.addAll(b.assignment());
            check(union.size() == a.assignment().size() + b.assignment().size(), "a partition has two owners");
        }
    }

    static void run(String bootstrap, String topic, int total) {
        String group = "java-group-" + (System.currentTimeMillis() % 1_000_000);
        step("group (range): two members split the topic, each record read once, offsets committed on close",
                () -> twoMembers(group, "org.apache.kafka.clients.consumer.RangeAssignor", topic, total));
        step("group (cooperative-sticky): two members split the topic, each record read once",
                () -> twoMembers(group + "-coop", "org.apache.kafka.clients.consumer.CooperativeStickyAssignor",
                        topic, total));

        Properties ap = new Properties();
        ap.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        ap.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, 30000);
        try (Admin admin = Admin.create(ap)) {
            step("admin.listConsumerGroupOffsets: the group's commits cover the topic", () -> {
                Map<TopicPartition, OffsetAndMetadata> offsets =
                        admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get();
                long sum = offsets.values().stream().mapToLong(OffsetAndMetadata::offset).sum();
                System.out.println("  committed " + offsets);
                check(sum == total, "committed offsets sum to " + sum + ", expected " + total);
            });
            try (KafkaConsumer<String, String> c = member(group, null)) {
                step("group: a new member resumes at the committed offsets (nothing left to read)", () -> {
                    c.subscribe(List.of(topic));
                    int n = 0;
                    long until = System.currentTimeMillis() + 3_000;
                    while (System.currentTimeMillis() < until || c.assignment().isEmpty()) {
                        n += c.poll(Duration.ofMillis(200)).count();
                        check(System.currentTimeMillis() < until + 30_000, "no assignment");
                    }
                    check(n == 0, "re-read " + n + " records");
                });
                step("admin.describeConsumerGroups / listConsumerGroups while a member is active", () -> {
                    ConsumerGroupDescription d =
                            admin.describeConsumerGroups(List.of(group)).describedGroups().get(group).get();
                    System.out.println("  " + d);
                    check(d.state().toString().equals("Stable"), "state " + d.state());
                    check(d.members().size() == 1, "members " + d.members().size());
                    int parts = d.members().iterator().next().assignment().topicPartitions().size();
                    check(parts == c.assignment().size(), "described assignment " + parts);
                    check(d.partitionAssignor().equals("range"), "assignor " + d.partitionAssignor());
                    Set<String> ids = admin.listConsumerGroups().all().get().stream()
                            .map(ConsumerGroupListing::groupId).collect(Collectors.toSet());
                    check(ids.contains(group), "listed " + ids);
                });
                step("admin.deleteConsumerGroups refuses a group with members", () -> {
                    try {
                        admin.deleteConsumerGroups(List.of(group)).all().get();
                        check(false, "deleted a group with an active member");
                    } catch (java.util.concurrent.ExecutionException e) {
                        check(e.getCause() instanceof org.apache.kafka.common.errors.GroupNotEmptyException,
                                "error " + e.getCause());
                    }
                });
            }
            step("admin.deleteConsumerGroups after the last member left", () -> {
                admin.deleteConsumerGroups(List.of(group)).all().get();
                Set<String> ids = admin.listConsumerGroups().all().get().stream()
                        .map(ConsumerGroupListing::groupId).collect(Collectors.toSet());
                check(!ids.contains(group), "still listed: " + ids);
            });
        }
    }
}
