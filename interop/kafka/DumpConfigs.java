// Print what a broker's DescribeConfigs says about every config of one resource, one per line:
//   NAME TYPE SENSITIVE(yes|no) MODE(read-only|dynamic) DEFAULT
// tab-separated; DEFAULT is the DEFAULT_CONFIG synonym's value, <null> when Kafka's default
// is null, <none> when there is no default. Run with Kafka 4.4's jars (interop/kafka/lib):
//   java -cp "interop/kafka/lib/*" interop/kafka/DumpConfigs.java HOST:PORT BROKER 1
//   java -cp "interop/kafka/lib/*" interop/kafka/DumpConfigs.java HOST:PORT TOPIC some-topic
// (a TOPIC resource is created with one partition when missing). Sluice's catalogue of Kafka
// 4.4's configs, crates/sluice-metadata/src/config/kafka-4.4-{broker,topic}-configs.tsv, is
// this program's output against a default Apache Kafka 4.4 node (interop/kafka/kafka.sh).
import java.util.*;
import org.apache.kafka.clients.admin.*;
import org.apache.kafka.common.config.ConfigResource;

public class DumpConfigs {
    public static void main(String[] args) throws Exception {
        Properties p = new Properties();
        p.put("bootstrap.servers", args[0]);
        try (Admin admin = Admin.create(p)) {
            ConfigResource.Type type = ConfigResource.Type.valueOf(args[1]);
            if (type == ConfigResource.Type.TOPIC) {
                try {
                    admin.createTopics(List.of(new NewTopic(args[2], 1, (short) 1))).all().get();
                } catch (Exception exists) {
                }
            }
            ConfigResource r = new ConfigResource(type, args[2]);
            Config c = admin.describeConfigs(List.of(r), new DescribeConfigsOptions().includeSynonyms(true))
                    .all().get().get(r);
            List<ConfigEntry> entries = new ArrayList<>(c.entries());
            entries.sort(Comparator.comparing(ConfigEntry::name));
            for (ConfigEntry e : entries) {
                String def = "<none>";
                for (ConfigEntry.ConfigSynonym s : e.synonyms()) {
                    if (s.source() == ConfigEntry.ConfigSource.DEFAULT_CONFIG) {
                        def = s.value() == null ? "<null>" : s.value();
                    }
                }
                if (e.source() == ConfigEntry.ConfigSource.DEFAULT_CONFIG) {
                    def = e.value() == null ? "<null>" : e.value();
                }
                System.out.println(String.join("\t", e.name(), e.type().toString(),
                        e.isSensitive() ? "yes" : "no", e.isReadOnly() ? "read-only" : "dynamic", def));
            }
        }
    }
}
