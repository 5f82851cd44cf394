package interop;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.ShareGroupDescription;
import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * Share groups (KIP-932) with the Java 4.4 KafkaShareConsumer. Each check prints PASS or FAIL
 * and the last line is "<n> passed, <m> failed". The broker is expected to run with a short
 * record lock (group.share.record.lock.duration.ms=2000, its min at 1000) and
 * group.share.delivery.count.limit=3.
 * Usage: java -cp ... interop.ShareGroups BOOTSTRAP
 */
public class ShareGroups {
    static String bootstrap;
    static int passed = 0;
    static int failed = 0;

    static void check(String name, boolean ok, String detail) {
        if (ok) {
            passed++;
            System.out.println("PASS " + name);
        } else {
            failed++;
            System.out.println("FAIL " + name + ": " + detail);
        }
    }

    static Admin admin() {
        Properties p = new Properties();
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        return Admin.create(p);
    }

    /** A topic of one partition holding COUNT records "0".."COUNT-1", and a share group that
     * reads it from the earliest offset. */
    static void setUp(Admin admin, String topic, String group, int count) throws Exception {
        admin.createTopics(List.of(new NewTopic(topic, 1, (short) 1))).all().get();
        ConfigResource r = new ConfigResource(ConfigResource.Type.GROUP, group);
        Collection<AlterConfigOp> ops = List.of(new AlterConfigOp(
                new ConfigEntry("share.auto.offset.reset", "earliest"), AlterConfigOp.OpType.SET));
        admin.incrementalAlterConfigs(Map.of(r, ops)).all().get();
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(p)) {
            for (int i = 0; i < count; i++) {
                producer.send(new ProducerRecord<>(topic, Integer.toString(i)));
            }
            producer.flush();
        }
    }

    static KafkaShareConsumer<String, String> consumer(String group, String topic, boolean explicit) {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("group.id", group);
        p.put("key.deserializer", StringDeserializer.class.getName());
        p.put("value.deserializer", StringDeserializer.class.getName());
        p.put("share.acknowledgement.mode", explicit ? "explicit" : "implicit");
        KafkaShareConsumer<String, String> c = new KafkaShareConsumer<>(p);
        c.subscribe(List.of(topic));
        return c;
    }

    static List<ConsumerRecord<String, String>> pollFor(
            KafkaShareConsumer<String, String> c, int want, long ms) {
        List<ConsumerRecord<String, String>> out = new ArrayList<>();
        long deadline = System.currentTimeMillis() + ms;
        while (out.size() < want && System.currentTimeMillis() < deadline) {
            for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(200))) {
                out.add(r);
            }
        }
        return out;
    }

    static short deliveries(ConsumerRecord<String, String> r) {
        return r.deliveryCount().orElse((short) -1);
    }

    /** Three consumers in implicit mode share one partition: every record once, none twice. */
    static void threeConsumersShareOnePartition(Admin admin) throws Exception {
        int count = 600;
        setUp(admin, "share-three", "g-three", count);
        Map<Long, Integer> seen = new ConcurrentHashMap<>();
        AtomicInteger total = new AtomicInteger();
        List<Thread> threads = new ArrayList<>();
        List<KafkaShareConsumer<String, String>> consumers = new ArrayList<>();
        for (int i = 0; i < 3; i++) {
            consumers.add(consumer("g-three", "share-three", false));
        }
        for (KafkaShareConsumer<String, String> c : consumers) {
            Thread t = new Thread(() -> {
                long deadline = System.currentTimeMillis() + 60_000;
                while (total.get() < count && System.currentTimeMillis() < deadline) {
                    for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(200))) {
                        seen.merge(r.offset(), 1, Integer::sum);
                        total.incrementAndGet();
                    }
                }
                // Implicit mode accepts what the last poll gave at the next poll or commit:
                // without this, closing releases it to the consumers still running.
                c.commitSync();
            });
            t.start();
            threads.add(t);
        }
        // While they read: the group as the admin client describes it.
        Thread.sleep(1_000);
        ShareGroupDescription d = admin.describeShareGroups(List.of("g-three"))
                .describedGroups().get("g-three").get();
        check("describeShareGroups lists the three members",
                d.members().size() == 3 && d.groupState().toString().equals("Stable"),
                d.toString());
        for (Thread t : threads) {
            t.join();
        }
        for (KafkaShareConsumer<String, String> c : consumers) {
            c.close();
        }
        long twice = seen.values().stream().filter(n -> n > 1).count();
        check("three consumers read every record of one partition once",
                seen.size() == count && twice == 0 && total.get() == count,
                "distinct " + seen.size() + " total " + total.get() + " twice " + twice);
    }

    /** Explicit mode: RELEASE delivers again with delivery count 2, REJECT never again. */
    static void releaseAndReject(Admin admin) throws Exception {
        setUp(admin, "share-acks", "g-acks", 3);
        try (KafkaShareConsumer<String, String> c = consumer("g-acks", "share-acks", true)) {
            List<ConsumerRecord<String, String>> first = pollFor(c, 3, 30_000);
            check("explicit mode gets three records on their first delivery",
                    first.size() == 3 && first.stream().allMatch(r -> deliveries(r) == 1),
                    first.toString());
            if (first.size() != 3) {
                return;
            }
            c.acknowledge(first.get(0), AcknowledgeType.ACCEPT);
            c.acknowledge(first.get(1), AcknowledgeType.RELEASE);
            c.acknowledge(first.get(2), AcknowledgeType.REJECT);
            c.commitSync();
            List<ConsumerRecord<String, String>> again = pollFor(c, 1, 10_000);
            check("a released record comes again with delivery count 2",
                    again.size() == 1 && again.get(0).offset() == 1 && deliveries(again.get(0)) == 2,
                    again.toString());
            for (ConsumerRecord<String, String> r : again) {
                c.acknowledge(r, AcknowledgeType.ACCEPT);
            }
            c.commitSync();
            List<ConsumerRecord<String, String>> more = pollFor(c, 1, 4_000);
            check("accepted and rejected records never come again", more.isEmpty(), more.toString());
        }
    }

    /** A consumer that stops acknowledging: its records go to another after the lock. */
    static void lockExpiry(Admin admin) throws Exception {
        setUp(admin, "share-lock", "g-lock", 5);
        try (KafkaShareConsumer<String, String> stalled = consumer("g-lock", "share-lock", true);
             KafkaShareConsumer<String, String> other = consumer("g-lock", "share-lock", true)) {
            List<ConsumerRecord<String, String>> held = pollFor(stalled, 5, 30_000);
            long start = System.currentTimeMillis();
            List<ConsumerRecord<String, String>> taken = pollFor(other, 5, 30_000);
            long waited = System.currentTimeMillis() - start;
            boolean redelivered = taken.size() == 5 && taken.stream().allMatch(r -> deliveries(r) == 2);
            check("records of a consumer that stops acknowledging are redelivered after the lock",
                    held.size() == 5 && redelivered && waited >= 1_000,
                    "held " + held.size() + " taken " + taken + " after " + waited + " ms");
            for (ConsumerRecord<String, String> r : taken) {
                other.acknowledge(r, AcknowledgeType.ACCEPT);
            }
            other.commitSync();
        }
    }

    /** RELEASE at every delivery: after the limit (3) the record is archived. */
    static void deliveryLimit(Admin admin) throws Exception {
        setUp(admin, "share-limit", "g-limit", 1);
        try (KafkaShareConsumer<String, String> c = consumer("g-limit", "share-limit", true)) {
            int delivered = 0;
            short last = 0;
            long deadline = System.currentTimeMillis() + 30_000;
            while (System.currentTimeMillis() < deadline) {
                List<ConsumerRecord<String, String>> got = pollFor(c, 1, 3_000);
                if (got.isEmpty()) {
                    break;
                }
                for (ConsumerRecord<String, String> r : got) {
                    delivered++;
                    last = deliveries(r);
                    c.acknowledge(r, AcknowledgeType.RELEASE);
                }
                c.commitSync();
            }
            check("a record released at every delivery is archived after the delivery limit",
                    delivered == 3 && last == 3, "delivered " + delivered + " last count " + last);
        }
    }

    public static void main(String[] args) throws Exception {
        bootstrap = args[0];
        try (Admin admin = admin()) {
            threeConsumersShareOnePartition(admin);
            releaseAndReject(admin);
            lockExpiry(admin);
            deliveryLimit(admin);
        }
        System.out.println(passed + " passed, " + failed + " failed");
    }
}
