// A tiny Java client for ksgate's tests: Kafka's own producer and consumer (kafka-clients 3.x or 4.x),
// compiled at test time by tests/apache_kafka/java_clients.py.  Only classes both majors have.
//
//   produce    PROPS BOOTSTRAP TOPIC COUNT              idempotent acks=all, values "record-<i>"
//   spread     PROPS BOOTSTRAP TOPICS COUNT             idempotent acks=all, COUNT records to each of the
//                                                       comma-separated TOPICS, interleaved and sent without
//                                                       waiting (batches of several topics share a request),
//                                                       values "<topic>-<i>"
//   transact   PROPS BOOTSTRAP TOPIC TXID PLAN          PLAN "commit:3,abort:2,commit:3": one transaction per
//                                                       step, values "<step>-<kind>-<i>"
//   consume    PROPS BOOTSTRAP TOPIC GROUP PROTOCOL ISOLATION COUNT TIMEOUT_MS
//                                                       subscribe as GROUP (group.protocol PROTOCOL), print each
//                                                       value on its own line until COUNT arrived, commit, exit 0;
//                                                       exit 3 if fewer arrived before TIMEOUT_MS
import java.io.FileInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.Future;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

public final class KsgateJavaClient {
    private KsgateJavaClient() {}

    public static void main(String[] args) throws Exception {
        Properties props = load(args[1]);
        props.put("bootstrap.servers", args[2]);
        switch (args[0]) {
            case "produce" -> produce(props, args[3], Integer.parseInt(args[4]));
            case "spread" -> spread(props, args[3].split(","), Integer.parseInt(args[4]));
            case "transact" -> transact(props, args[3], args[4], args[5]);
            case "consume" -> System.exit(consume(props, args[3], args[4], args[5], args[6],
                    Integer.parseInt(args[7]), Long.parseLong(args[8])));
            default -> throw new IllegalArgumentException("unknown command " + args[0]);
        }
    }

    private static Properties load(String path) throws IOException {
        Properties props = new Properties();
        try (InputStream in = new FileInputStream(path)) {
            props.load(in);
        }
        return props;
    }

    private static KafkaProducer<String, String> producer(Properties props) {
        props.put("acks", "all");
        props.put("enable.idempotence", "true");
        return new KafkaProducer<>(props, new StringSerializer(), new StringSerializer());
    }

    private static void produce(Properties props, String topic, int count) throws Exception {
        try (KafkaProducer<String, String> producer = producer(props)) {
            for (int i = 0; i < count; i++) {
                producer.send(new ProducerRecord<>(topic, "record-" + i)).get();  // each acknowledged
            }
        }
    }

    private static void spread(Properties props, String[] topics, int count) throws Exception {
        props.put("linger.ms", "100");  // long enough that every topic's batch is ready for the same request
        List<Future<RecordMetadata>> sent = new ArrayList<>();
        try (KafkaProducer<String, String> producer = producer(props)) {
            for (int i = 0; i < count; i++) {
                for (String topic : topics) {
                    sent.add(producer.send(new ProducerRecord<>(topic, topic + "-" + i)));
                }
            }
            for (Future<RecordMetadata> each : sent) {
                each.get();  // a failed send fails the command
            }
        }
    }

    private static void transact(Properties props, String topic, String txid, String plan) throws Exception {
        props.put("transactional.id", txid);
        try (KafkaProducer<String, String> producer = producer(props)) {
            producer.initTransactions();
            String[] steps = plan.split(",");
            for (int step = 0; step < steps.length; step++) {
                String[] kindAndCount = steps[step].split(":");
                producer.beginTransaction();
                for (int i = 0; i < Integer.parseInt(kindAndCount[1]); i++) {
                    producer.send(new ProducerRecord<>(topic, step + "-" + kindAndCount[0] + "-" + i));
                }
                producer.flush();
                if (kindAndCount[0].equals("commit")) {
                    producer.commitTransaction();
                } else {
                    producer.abortTransaction();
                }
            }
        }
    }

    private static int consume(Properties props, String topic, String group, String protocol, String isolation,
                               int count, long timeoutMs) {
        props.put("group.id", group);
        props.put("group.protocol", protocol);
        props.put("isolation.level", isolation);
        props.put("auto.offset.reset", "earliest");
        props.put("enable.auto.commit", "false");
        int seen = 0;
        long deadline = System.currentTimeMillis() + timeoutMs;
        try (KafkaConsumer<String, String> consumer =
                     new KafkaConsumer<>(props, new StringDeserializer(), new StringDeserializer())) {
            consumer.subscribe(Collections.singletonList(topic));
            while (seen < count && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<String, String> record : consumer.poll(Duration.ofMillis(500))) {
                    System.out.println(record.value());
                    seen++;
                }
            }
            consumer.commitSync();
        }
        System.out.flush();
        return seen >= count ? 0 : 3;
    }
}
