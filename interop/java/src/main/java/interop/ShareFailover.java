package interop;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.SharePartitionOffsetInfo;
import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicIdPartition;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.serialization.StringDeserializer;

/**
 * Share-group failover (KIP-932): CONSUMERS explicit-mode KafkaShareConsumers accept the
 * records of a one-partition topic while the test kills brokers. Each consumer accepts every
 * record it gets and commits synchronously; an offset whose commit succeeded is printed as
 * "ACCEPTED offset" (at once, so the test can time its kills by progress). After "finish" on
 * standard input the consumers keep going until nothing has arrived for IDLE_MS, then close,
 * and the program prints "RECEIVED n" (distinct offsets delivered), "TWICE offsets..." (offsets
 * accepted successfully more than once) and "START offset" (the group's share-partition start
 * offset as listShareGroupOffsets reports it).
 * Usage: java -cp ... interop.ShareFailover BOOTSTRAP TOPIC GROUP CONSUMERS
 */
public class ShareFailover {
    static final long IDLE_MS = 12_000;

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0];
        String topic = args[1];
        String group = args[2];
        int consumers = Integer.parseInt(args[3]);
        Properties ap = new Properties();
        ap.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        try (Admin admin = Admin.create(ap)) {
            ConfigResource r = new ConfigResource(ConfigResource.Type.GROUP, group);
            Collection<AlterConfigOp> ops = List.of(new AlterConfigOp(
                    new ConfigEntry("share.auto.offset.reset", "earliest"), AlterConfigOp.OpType.SET));
            admin.incrementalAlterConfigs(Map.of(r, ops)).all().get();
            System.out.println("TOPIC_ID " + admin.describeTopics(List.of(topic)).allTopicNames()
                    .get().get(topic).topicId());
            System.out.flush();
        }
        Map<Long, Integer> accepted = new ConcurrentHashMap<>();
        Set<Long> received = ConcurrentHashMap.newKeySet();
        AtomicBoolean finishing = new AtomicBoolean(false);
        AtomicLong lastRecord = new AtomicLong(System.currentTimeMillis());
        Thread stdin = new Thread(() -> {
            try (BufferedReader in = new BufferedReader(new InputStreamReader(System.in))) {
                String line;
                while ((line = in.readLine()) != null) {
                    if (line.trim().equals("finish")) {
                        lastRecord.set(System.currentTimeMillis());
                        finishing.set(true);
                    }
                }
            } catch (Exception e) {
                // stdin closed: the test went away
            }
        });
        stdin.setDaemon(true);
        stdin.start();
        List<Thread> threads = new ArrayList<>();
        for (int i = 0; i < consumers; i++) {
            Thread t = new Thread(() -> {
                Properties p = new Properties();
                p.put("bootstrap.servers", bootstrap);
                p.put("group.id", group);
                p.put("key.deserializer", StringDeserializer.class.getName());
                p.put("value.deserializer", StringDeserializer.class.getName());
                p.put("share.acknowledgement.mode", "explicit");
                p.put("max.poll.records", "50");
                try (KafkaShareConsumer<String, String> c = new KafkaShareConsumer<>(p)) {
                    c.subscribe(List.of(topic));
                    while (!(finishing.get()
                            && System.currentTimeMillis() - lastRecord.get() > IDLE_MS)) {
                        List<Long> batch = new ArrayList<>();
                        try {
                            for (ConsumerRecord<String, String> rec : c.poll(Duration.ofMillis(200))) {
                                received.add(rec.offset());
                                batch.add(rec.offset());
                                c.acknowledge(rec, AcknowledgeType.ACCEPT);
                            }
                            if (batch.isEmpty()) {
                                continue;
                            }
                            lastRecord.set(System.currentTimeMillis());
                            Thread.sleep(batch.size() * 5L);
                            Map<TopicIdPartition, Optional<KafkaException>> result = c.commitSync();
                            boolean ok = !result.isEmpty()
                                    && result.values().stream().allMatch(Optional::isEmpty);
                            if (ok) {
                                StringBuilder sb = new StringBuilder();
                                for (long o : batch) {
                                    accepted.merge(o, 1, Integer::sum);
                                    sb.append("ACCEPTED ").append(o).append('\n');
                                }
                                synchronized (System.out) {
                                    System.out.print(sb);
                                    System.out.flush();
                                }
                            } else {
                                synchronized (System.out) {
                                    System.out.println("COMMIT_FAILED " + batch.size() + " " + result);
                                    System.out.flush();
                                }
                            }
                        } catch (KafkaException e) {
                            synchronized (System.out) {
                                System.out.println("ERROR " + e);
                                System.out.flush();
                            }
                        }
                    }
                } catch (Exception e) {
                    System.out.println("CONSUMER_FAILED " + e);
                }
            });
            t.start();
            threads.add(t);
        }
        for (Thread t : threads) {
            t.join();
        }
        StringBuilder twice = new StringBuilder();
        accepted.forEach((o, n) -> {
            if (n > 1) {
                twice.append(' ').append(o);
            }
        });
        System.out.println("RECEIVED " + received.size());
        System.out.println("TWICE" + twice);
        try (Admin admin = Admin.create(ap)) {
            TopicPartition tp = new TopicPartition(topic, 0);
            Map<TopicPartition, SharePartitionOffsetInfo> offsets = admin
                    .listShareGroupOffsets(Map.of(group,
                            new org.apache.kafka.clients.admin.ListShareGroupOffsetsSpec()))
                    .partitionsToOffsetInfo(group).get();
            SharePartitionOffsetInfo info = offsets.get(tp);
            System.out.println("START " + (info == null ? "none" : info.startOffset()));
        }
        System.out.flush();
    }
}
