package interop;

import java.io.InputStream;
import java.time.Duration;
import java.util.Properties;
import java.util.concurrent.atomic.AtomicBoolean;

import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * Client telemetry (KIP-714) with the Java client: a producer with client.id CLIENT_ID (and
 * enable.metrics.push at its default, true) prints the client instance id the broker gave it
 * ("INSTANCE <id>"), then produces a record every 20 ms to TOPIC until its standard input
 * closes; then it closes (its last push is a terminating one) and prints "TELEMETRY DONE".
 * Usage: java -cp ... interop.Telemetry BOOTSTRAP TOPIC CLIENT_ID
 */
public class Telemetry {
    public static void main(String[] args) throws Exception {
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        p.put(ProducerConfig.CLIENT_ID_CONFIG, args[2]);
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        AtomicBoolean stop = new AtomicBoolean(false);
        Thread stdin = new Thread(() -> {
            try {
                InputStream in = System.in;
                while (in.read() >= 0) {
                    // Wait for end of input.
                }
            } catch (Exception e) {
                // Closed: stop all the same.
            }
            stop.set(true);
        });
        stdin.setDaemon(true);
        stdin.start();
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(p)) {
            producer.send(new ProducerRecord<>(args[1], "k", "first")).get();
            Uuid id = producer.clientInstanceId(Duration.ofSeconds(30));
            System.out.println("INSTANCE " + id);
            System.out.flush();
            int n = 0;
            while (!stop.get()) {
                producer.send(new ProducerRecord<>(args[1], "k", "v" + n++));
                Thread.sleep(20);
            }
            producer.flush();
        }
        System.out.println("TELEMETRY DONE");
    }
}
