package eosbench.peers;

import eosbench.spark.RecordProcess;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.Optional;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.CountDownLatch;
import org.apache.kafka.common.header.internals.RecordHeaders;
import org.apache.kafka.common.serialization.Serde;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.serialization.Serializer;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.processor.StreamPartitioner;
import org.apache.kafka.streams.processor.api.FixedKeyProcessor;
import org.apache.kafka.streams.processor.api.FixedKeyProcessorContext;
import org.apache.kafka.streams.processor.api.FixedKeyRecord;
import org.apache.kafka.streams.processor.api.RecordMetadata;

/**
 * The streaming job's processing as a Kafka Streams application: each input record transformed as
 * streaming/process.py does, poison to the dead-letter topic, each output record in its input
 * record's partition with the {@code eos.src} and {@code eos.in_ts} headers the verifier judges.
 * Arguments are {@code key=value} pairs; every other {@code key=value} is a StreamsConfig setting
 * ({@code processing.guarantee=exactly_once_v2}, {@code num.stream.threads}, ...), and
 * {@code command.config} names a client properties file (TLS, SASL) read first.
 */
public final class KafkaStreamsPeer {
    private KafkaStreamsPeer() {
    }

    /** An output value with the input partition it must be written to: the Spark sink's placement. */
    record Routed(byte[] value, int partition, boolean poison) {
    }

    /** Writes a routed value's bytes, without its partition. */
    static final class RoutedSerializer implements Serializer<Routed> {
        @Override
        public byte[] serialize(String topic, Routed routed) {
            return routed == null ? null : routed.value();
        }
    }

    /** Adds the headers and transforms the value; the key is kept. */
    static final class Stamp implements FixedKeyProcessor<byte[], byte[], Routed> {
        private final String process;
        private FixedKeyProcessorContext<byte[], Routed> context;

        Stamp(String process) {
            this.process = process;
        }

        @Override
        public void init(FixedKeyProcessorContext<byte[], Routed> context) {
            this.context = context;
        }

        @Override
        public void process(FixedKeyRecord<byte[], byte[]> record) {
            RecordMetadata source = context.recordMetadata().orElseThrow();
            RecordHeaders headers = new RecordHeaders();
            headers.add("eos.src", (source.topic() + ":" + source.partition() + ":" + source.offset())
                    .getBytes(StandardCharsets.US_ASCII));
            headers.add("eos.in_ts", Long.toString(record.timestamp()).getBytes(StandardCharsets.US_ASCII));
            boolean poison = RecordProcess.isPoison(record.value());
            byte[] value = poison ? record.value() : RecordProcess.transform(process, record.key(), record.value());
            context.forward(record.withValue(new Routed(value, source.partition(), poison)).withHeaders(headers));
        }
    }

    /** Runs until SIGTERM; prints {@code running} once every thread has its partitions. */
    public static void main(String[] args) throws IOException, InterruptedException {
        Properties settings = PeerArguments.parse(args);
        String inputTopic = PeerArguments.take(settings, "input.topic");
        String outputTopic = PeerArguments.take(settings, "output.topic");
        String deadLetterTopic = PeerArguments.take(settings, "dead.letter.topic");
        String process = PeerArguments.take(settings, "process");
        Properties config = PeerArguments.commandConfig(settings);
        config.putAll(settings);

        Serde<byte[]> bytes = Serdes.ByteArray();
        StreamPartitioner<byte[], Routed> samePartition =
                (topic, key, routed, partitions) -> Optional.of(Set.of(routed.partition() % partitions));
        StreamsBuilder builder = new StreamsBuilder();
        builder.stream(inputTopic, Consumed.with(bytes, bytes))
                .processValues(() -> new Stamp(process))
                .to((key, routed, context) -> routed.poison() ? deadLetterTopic : outputTopic,
                        Produced.with(bytes, Serdes.serdeFrom(new RoutedSerializer(), (topic, data) -> null))
                                .withStreamPartitioner(samePartition));

        KafkaStreams streams = new KafkaStreams(builder.build(), new StreamsConfig(config));
        CountDownLatch stopped = new CountDownLatch(1);
        streams.setStateListener((now, before) -> {
            if (now == KafkaStreams.State.RUNNING) {
                System.out.println("running");
            } else if (now == KafkaStreams.State.ERROR || now == KafkaStreams.State.NOT_RUNNING) {
                stopped.countDown();
            }
        });
        // A SIGTERM closes the application (its transactions end); a SIGKILL is the fault under test.
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            streams.close();
            stopped.countDown();
        }));
        streams.start();
        stopped.await();
        if (streams.state() == KafkaStreams.State.ERROR) {
            System.exit(3);
        }
    }

}
