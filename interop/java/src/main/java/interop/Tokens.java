package interop;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.*;
import java.util.concurrent.ExecutionException;

import org.apache.kafka.clients.admin.*;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.SaslAuthenticationException;
import org.apache.kafka.common.errors.UnsupportedByAuthenticationException;
import org.apache.kafka.common.security.auth.KafkaPrincipal;
import org.apache.kafka.common.security.token.delegation.DelegationToken;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * Delegation tokens with the Java client: an admin authenticated over SASL/PLAIN as alice
 * creates a token (renewable by bob), describes it, a producer and a consumer authenticate
 * with it over SCRAM-SHA-512 (tokenauth=true), a token-authenticated admin may not create
 * tokens, the token is renewed and expired, and afterwards no longer authenticates.
 * Usage: java -cp ... interop.Tokens SASL_BOOTSTRAP TOPIC
 * Prints "TOKENS OK" at the end; any failure throws.
 */
public class Tokens {
    static void check(boolean cond, String msg) {
        if (!cond) throw new AssertionError(msg);
    }

    static Properties plain(String bootstrap, String user) {
        Properties p = new Properties();
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put("security.protocol", "SASL_PLAINTEXT");
        p.put("sasl.mechanism", "PLAIN");
        p.put("sasl.jaas.config", "org.apache.kafka.common.security.plain.PlainLoginModule required username=\""
            + user + "\" password=\"pw\";");
        return p;
    }

    static Properties withToken(String bootstrap, DelegationToken token) {
        Properties p = new Properties();
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put("security.protocol", "SASL_PLAINTEXT");
        p.put("sasl.mechanism", "SCRAM-SHA-512");
        p.put("sasl.jaas.config", "org.apache.kafka.common.security.scram.ScramLoginModule required username=\""
            + token.tokenInfo().tokenId() + "\" password=\"" + token.hmacAsBase64String() + "\" tokenauth=\"true\";");
        return p;
    }

    static Throwable cause(ExecutionException e) {
        return e.getCause();
    }

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0];
        String topic = args[1];
        try (Admin alice = Admin.create(plain(bootstrap, "alice"))) {
            DelegationToken token = alice.createDelegationToken(new CreateDelegationTokenOptions()
                .renewers(List.of(new KafkaPrincipal("User", "bob")))).delegationToken().get();
            System.out.println("created " + token.tokenInfo());
            check(token.tokenInfo().owner().equals(new KafkaPrincipal("User", "alice")), "owner");
            check(token.tokenInfo().tokenRequester().equals(new KafkaPrincipal("User", "alice")), "requester");
            check(token.hmac().length == 64, "hmac length");
            List<DelegationToken> described = alice.describeDelegationToken().delegationTokens().get();
            check(described.size() == 1 && described.get(0).equals(token), "described: " + described);

            // Produce and consume as the token (alice).
            Properties pp = withToken(bootstrap, token);
            pp.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
            pp.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
            try (KafkaProducer<String, String> producer = new KafkaProducer<>(pp)) {
                for (int i = 0; i < 10; i++) {
                    producer.send(new ProducerRecord<>(topic, "k" + i, "v" + i)).get();
                }
            }
            Properties cp = withToken(bootstrap, token);
            cp.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
            cp.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
            int read = 0;
            try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(cp)) {
                TopicPartition tp = new TopicPartition(topic, 0);
                consumer.assign(List.of(tp));
                consumer.seekToBeginning(List.of(tp));
                long deadline = System.currentTimeMillis() + 30_000;
                while (read < 10 && System.currentTimeMillis() < deadline) {
                    for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(500))) {
                        check(r.value().equals("v" + read), "record " + read + ": " + r.value());
                        read++;
                    }
                }
            }
            check(read == 10, "read " + read + " records with the token");

            // A token-authenticated connection may not create tokens.
            try (Admin viaToken = Admin.create(withToken(bootstrap, token))) {
                try {
                    viaToken.createDelegationToken().delegationToken().get();
                    throw new AssertionError("a token-authenticated admin created a token");
                } catch (ExecutionException e) {
                    check(cause(e) instanceof UnsupportedByAuthenticationException, "not allowed: " + cause(e));
                }
            }

            // Bob (a renewer) renews; alice expires it now.
            try (Admin bob = Admin.create(plain(bootstrap, "bob"))) {
                long expiry = bob.renewDelegationToken(token.hmac(),
                    new RenewDelegationTokenOptions().renewTimePeriodMs(60_000)).expiryTimestamp().get();
                check(expiry <= System.currentTimeMillis() + 61_000, "renewed expiry " + expiry);
            }
            alice.expireDelegationToken(token.hmac(),
                new ExpireDelegationTokenOptions().expiryTimePeriodMs(-1)).expiryTimestamp().get();
            check(alice.describeDelegationToken().delegationTokens().get().isEmpty(), "expired token still described");
            try (Admin viaToken = Admin.create(withToken(bootstrap, token))) {
                try {
                    viaToken.describeCluster().nodes().get();
                    throw new AssertionError("an expired token authenticated");
                } catch (ExecutionException e) {
                    check(cause(e) instanceof SaslAuthenticationException, "expired token: " + cause(e));
                }
            }
        }
        System.out.println("TOKENS OK");
    }
}
