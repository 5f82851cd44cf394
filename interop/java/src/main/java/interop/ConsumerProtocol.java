package interop;

import java.time.Duration;
import java.util.*;

import org.apache.kafka.clients.admin.*;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringSerializer;

import static interop.Main.check;
import static interop.Main.step;

/**
 * The consumer group protocol (KIP-848) with the Java client (`group.protocol=consumer`): three
 * members, one joining late and one leaving, read every record exactly once; the admin client
 * describes the group as a consumer group. Usage: java -cp ... interop.ConsumerProtocol BOOTSTRAP
 */
public final class ConsumerProtocol {
    private ConsumerProtocol() {}

    static KafkaConsumer<String, String> member(String group) {
        Properties c = Main.consumerProps();
        c.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        c.put("group.protocol", "consumer");
        c.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        c.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "true");
        c.put(ConsumerConfig.AUTO_COMMIT_INTERVAL_MS_CONFIG, "100");
        return new KafkaConsumer<>(c);
    }

    static void produce(String topic, int from, int to) throws Exception {
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, Main.bootstrap);
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(p)) {
            for (int i = from; i < to; i++) producer.send(new ProducerRecord<>(topic, "k" + i, "v" + i));
            producer.flush();
        }
    }

    /** Poll `members` until `seen` holds `count` records and `done` holds. */
    static int consume(List<KafkaConsumer<String, String>> members, Set<String> seen, int count,
                       java.util.function.BooleanSupplier done, String what) {
        int dups = 0;
        long deadline = System.currentTimeMillis() + 90_000;
        while (seen.size() < count || !done.getAsBoolean()) {
            check(System.currentTimeMillis() < deadline, what + ": consumed " + seen.size() + " of " + count);
            for (KafkaConsumer<String, String> c : members) {
                for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(50))) {
                    if (!seen.add(r.value())) dups++;
                }
            }
        }
        return dups;
    }

    public static void main(String[] args) throws Exception {
        Main.bootstrap = args.length > 0 ? args[0] : "127.0.0.1:9092";
        String suffix = Long.toString(System.currentTimeMillis() % 1_000_000);
        String topic = "cp-" + suffix;
        String group = "cp-group-" + suffix;
        Properties ap = new Properties();
        ap.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, Main.bootstrap);
        ap.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, 30000);
        try (Admin admin = Admin.create(ap)) {
            admin.createTopics(List.of(new NewTopic(topic, 6, (short) 1))).all().get();
            produce(topic, 0, 3000);
            Set<String> seen = new HashSet<>();
            KafkaConsumer<String, String> a = member(group);
            KafkaConsumer<String, String> b = member(group);
            KafkaConsumer<String, String> c = member(group);
            a.subscribe(List.of(topic));
            b.subscribe(List.of(topic));
            step("consumer protocol: two members split the topic", () -> {
                int dups = consume(List.of(a, b), seen, 3000,
                        () -> !a.assignment().isEmpty() && !b.assignment().isEmpty(), "two members");
                System.out.println("  a=" + a.assignment() + " b=" + b.assignment());
                check(dups == 0, dups + " records read twice");
            });
            step("consumer protocol: a late member is given partitions, none has two owners", () -> {
                c.subscribe(List.of(topic));
                produce(topic, 3000, 6000);
                // Until the reconciliation is over: the uniform assignor gives each two.
                int dups = consume(List.of(a, b, c), seen, 6000,
                        () -> a.assignment().size() == 2 && b.assignment().size() == 2
                                && c.assignment().size() == 2,
                        "late member");
                System.out.println("  a=" + a.assignment() + " b=" + b.assignment() + " c=" + c.assignment());
                check(dups == 0, dups + " records read twice");
                Set<TopicPartition> union = new HashSet<>(a.assignment());
                union.addAll(b.assignment());
                union.addAll(c.assignment());
                check(union.size() == 6, "a partition has two owners: " + union);
            });
            step("admin.describeConsumerGroups: a consumer group, Stable, three members", () -> {
                // The members' last acknowledgements may still be on their way: poll until the
                // coordinator has them all.
                ConsumerGroupDescription d =
                        admin.describeConsumerGroups(List.of(group)).describedGroups().get(group).get();
                long until = System.currentTimeMillis() + 30_000;
                while (!d.toString().contains("groupState=Stable") && System.currentTimeMillis() < until) {
                    for (KafkaConsumer<String, String> m : List.of(a, b, c)) m.poll(Duration.ofMillis(50));
                    d = admin.describeConsumerGroups(List.of(group)).describedGroups().get(group).get();
                }
                System.out.println("  " + d);
                check(d.type().toString().equalsIgnoreCase("consumer"), "type " + d.type());
                check(d.toString().contains("groupState=Stable"), "not Stable");
                check(d.members().size() == 3, "members " + d.members().size());
                check(d.partitionAssignor().equals("uniform"), "assignor " + d.partitionAssignor());
                int described = d.members().stream()
                        .mapToInt(m -> m.assignment().topicPartitions().size()).sum();
                check(described == 6, "described assignments cover " + described);
            });
            step("consumer protocol: a member leaves, the others take its partitions", () -> {
                b.close();
                produce(topic, 6000, 9000);
                int dups = consume(List.of(a, c), seen, 9000,
                        () -> a.assignment().size() + c.assignment().size() == 6, "after a leave");
                check(dups == 0, dups + " records read twice");
                check(seen.size() == 9000, "consumed " + seen.size());
            });
            a.close();
            c.close();
            step("admin.listGroups shows the consumer group; deleteConsumerGroups once it is empty", () -> {
                String listed = admin.listConsumerGroups().all().get().toString();
                System.out.println("  " + listed);
                check(listed.contains(group), "not listed: " + listed);
                admin.deleteConsumerGroups(List.of(group)).all().get();
            });
        }
        System.out.println();
        Main.results.forEach(System.out::println);
        System.out.println((Main.results.size() - Main.failures) + " passed, " + Main.failures + " failed");
        System.exit(Main.failures == 0 ? 0 : 1);
    }
}
