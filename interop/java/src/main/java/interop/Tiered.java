package interop;

import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Properties;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.ListOffsetsResult;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

/**
 * Tiered storage with the Java client (4.x): the Admin client's earliest-local and
 * latest-tiered offsets (KIP-1005: ListOffsets -4 and -5), then a consumer assigned at offset
 * 0 reads COUNT records of partition 0, which must come in order with no gap. Prints
 * "EARLIEST <o> EARLIEST_LOCAL <o> LATEST_TIERED <o> LATEST <o>" and "READ <count> <bytes>".
 * Usage: java -cp ... interop.Tiered BOOTSTRAP TOPIC COUNT
 */
public class Tiered {
    public static void main(String[] args) throws Exception {
        String bootstrap = args[0];
        TopicPartition tp = new TopicPartition(args[1], 0);
        int count = Integer.parseInt(args[2]);
        Properties ap = new Properties();
        ap.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        try (Admin admin = Admin.create(ap)) {
            StringBuilder line = new StringBuilder();
            for (Map.Entry<String, OffsetSpec> e : List.of(
                    Map.entry("EARLIEST", OffsetSpec.earliest()),
                    Map.entry("EARLIEST_LOCAL", OffsetSpec.earliestLocal()),
                    Map.entry("LATEST_TIERED", OffsetSpec.latestTiered()),
                    Map.entry("LATEST", OffsetSpec.latest()))) {
                ListOffsetsResult.ListOffsetsResultInfo info =
                        admin.listOffsets(Map.of(tp, e.getValue())).partitionResult(tp).get();
                line.append(e.getKey()).append(' ').append(info.offset()).append(' ');
            }
            System.out.println(line.toString().trim());
        }
        Properties cp = new Properties();
        cp.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        cp.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        cp.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        cp.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(cp)) {
            consumer.assign(List.of(tp));
            consumer.seek(tp, 0);
            long next = 0;
            long bytes = 0;
            long deadline = System.currentTimeMillis() + 120_000;
            while (next < count) {
                if (System.currentTimeMillis() > deadline) {
                    throw new IllegalStateException("read only " + next + " of " + count);
                }
                for (ConsumerRecord<byte[], byte[]> r : consumer.poll(Duration.ofMillis(500))) {
                    if (r.offset() != next) {
                        throw new IllegalStateException("offset " + r.offset() + " where " + next + " was due");
                    }
                    next++;
                    bytes += r.value() == null ? 0 : r.value().length;
                }
            }
            System.out.println("READ " + next + " " + bytes);
        }
    }
}
