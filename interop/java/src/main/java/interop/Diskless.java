package interop;

import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.Future;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * A diskless topic (diskless.enable=true) with the Java client (4.x): the Admin client creates
 * it, an idempotent producer (acks=all) sends COUNT records, a consumer group reads every one
 * back at the offset its acknowledgement named, once; then a transactional producer commits
 * and aborts, and a read_committed consumer sees only the committed records. Prints
 * "PRODUCED <n>", "GROUP READ <n>" and "READ_COMMITTED <n>".
 * Usage: java -cp ... interop.Diskless BOOTSTRAP TOPIC COUNT
 */
public class Diskless {
    public static void main(String[] args) throws Exception {
        String bootstrap = args[0];
        String topic = args[1];
        int count = Integer.parseInt(args[2]);
        Properties ap = new Properties();
        ap.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        try (Admin admin = Admin.create(ap)) {
            admin.createTopics(List.of(new NewTopic(topic, 3, (short) 1)
                    .configs(Map.of("diskless.enable", "true")))).all().get();
        }
        Map<String, String> acked = new HashMap<>();
        Properties pp = new Properties();
        pp.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        pp.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        pp.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        pp.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "true");
        pp.put(ProducerConfig.ACKS_CONFIG, "all");
        pp.put(ProducerConfig.LINGER_MS_CONFIG, "5");
        try (KafkaProducer<String, String> p = new KafkaProducer<>(pp)) {
            List<Future<RecordMetadata>> sent = new ArrayList<>();
            for (int i = 0; i < count; i++) {
                sent.add(p.send(new ProducerRecord<>(topic, "k" + i, "v" + i)));
            }
            for (int i = 0; i < count; i++) {
                RecordMetadata m = sent.get(i).get();
                acked.put(m.partition() + "/" + m.offset(), "k" + i);
            }
        }
        System.out.println("PRODUCED " + acked.size());
        Properties cp = new Properties();
        cp.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        cp.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        cp.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        cp.put(ConsumerConfig.GROUP_ID_CONFIG, "diskless-java");
        cp.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        int read = 0;
        try (KafkaConsumer<String, String> c = new KafkaConsumer<>(cp)) {
            c.subscribe(List.of(topic));
            long deadline = System.currentTimeMillis() + 120_000;
            while (read < count) {
                if (System.currentTimeMillis() > deadline) {
                    throw new IllegalStateException("read only " + read + " of " + count);
                }
                for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(500))) {
                    String want = acked.remove(r.partition() + "/" + r.offset());
                    if (!r.key().equals(want)) {
                        throw new IllegalStateException("at " + r.partition() + "/" + r.offset()
                                + " read " + r.key() + " where " + want + " was acknowledged");
                    }
                    read++;
                }
            }
            c.commitSync();
        }
        System.out.println("GROUP READ " + read);
        Properties tp = new Properties();
        tp.putAll(pp);
        tp.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, "diskless-java-tx");
        try (KafkaProducer<String, String> p = new KafkaProducer<>(tp)) {
            p.initTransactions();
            for (boolean commit : new boolean[] {true, false}) {
                p.beginTransaction();
                for (int i = 0; i < 100; i++) {
                    p.send(new ProducerRecord<>(topic, "t" + i, commit ? "committed" : "aborted"));
                }
                // Sent before the end: an abort must have something to abort.
                p.flush();
                if (commit) {
                    p.commitTransaction();
                } else {
                    p.abortTransaction();
                }
            }
        }
        cp.put(ConsumerConfig.GROUP_ID_CONFIG, "diskless-java-rc");
        cp.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
        int committed = 0;
        try (KafkaConsumer<String, String> c = new KafkaConsumer<>(cp)) {
            c.subscribe(List.of(topic));
            long quiet = System.currentTimeMillis() + 3_000;
            long deadline = System.currentTimeMillis() + 120_000;
            while (System.currentTimeMillis() < quiet || committed + count < count + 100) {
                if (System.currentTimeMillis() > deadline) {
                    throw new IllegalStateException("read_committed read " + committed);
                }
                for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(300))) {
                    if ("aborted".equals(r.value())) {
                        throw new IllegalStateException("read an aborted record at " + r.offset());
                    }
                    if ("committed".equals(r.value())) {
                        committed++;
                    }
                }
            }
        }
        System.out.println("READ_COMMITTED " + committed);
    }
}
