package eosbench.peers;

import eosbench.spark.RecordProcess;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.Comparator;
import java.util.Optional;
import java.util.Properties;
import java.util.stream.Stream;
import org.apache.flink.api.common.eventtime.WatermarkStrategy;
import org.apache.flink.api.common.functions.MapFunction;
import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.connector.base.DeliveryGuarantee;
import org.apache.flink.connector.kafka.sink.KafkaRecordSerializationSchema;
import org.apache.flink.connector.kafka.sink.KafkaSink;
import org.apache.flink.connector.kafka.source.KafkaSource;
import org.apache.flink.connector.kafka.source.enumerator.initializer.OffsetsInitializer;
import org.apache.flink.connector.kafka.source.reader.deserializer.KafkaRecordDeserializationSchema;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.util.Collector;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.OffsetResetStrategy;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.header.internals.RecordHeaders;

/**
 * The streaming job's processing as a Flink job on a local MiniCluster: KafkaSource read_committed,
 * a map that transforms each record as streaming/process.py does, and KafkaSink, each output record
 * in its input record's partition with the {@code eos.src} and {@code eos.in_ts} headers the verifier
 * judges, poison to the dead-letter topic. Exactly-once is Flink's: the source's offsets live in the
 * checkpoint, and the sink commits its transactions when a checkpoint completes. A launch resumes from
 * the newest checkpoint under {@code checkpoint.dir}, as a restarted Flink job is resumed from its
 * retained checkpoint; without one it starts from the group's committed offsets (earliest without).
 * Arguments are {@code key=value} pairs; every {@code flink.*} one is a Flink setting without the
 * prefix, every other one a Kafka client setting of both source and sink, after those of
 * {@code command.config}.
 */
public final class FlinkPeer {
    private FlinkPeer() {
    }

    /** An input record with where it came from. */
    public static final class In {
        public byte[] key;
        public byte[] value;
        public String topic;
        public int partition;
        public long offset;
        public long timestamp;

        public In() {
        }
    }

    /** An output record: its topic, partition, headers' values, key and transformed value. */
    public static final class Out {
        public String topic;
        public int partition;
        public byte[] key;
        public byte[] value;
        public byte[] source;
        public byte[] inputTimestamp;

        public Out() {
        }
    }

    /** Reads each record with its position; nothing else is done in the source. */
    static final class Positions implements KafkaRecordDeserializationSchema<In> {
        @Override
        public void deserialize(ConsumerRecord<byte[], byte[]> record, Collector<In> out) {
            In in = new In();
            in.key = record.key();
            in.value = record.value();
            in.topic = record.topic();
            in.partition = record.partition();
            in.offset = record.offset();
            in.timestamp = record.timestamp();
            out.collect(in);
        }

        @Override
        public TypeInformation<In> getProducedType() {
            return TypeInformation.of(In.class);
        }
    }

    /** streaming/process.py's processing, and the Spark sink's routing. */
    static final class Process implements MapFunction<In, Out> {
        private final String process;
        private final String outputTopic;
        private final String deadLetterTopic;

        Process(String process, String outputTopic, String deadLetterTopic) {
            this.process = process;
            this.outputTopic = outputTopic;
            this.deadLetterTopic = deadLetterTopic;
        }

        @Override
        public Out map(In in) {
            Out out = new Out();
            boolean poison = RecordProcess.isPoison(in.value);
            out.topic = poison ? deadLetterTopic : outputTopic;
            out.partition = in.partition;
            out.key = in.key;
            out.value = poison ? in.value : RecordProcess.transform(process, in.key, in.value);
            out.source = (in.topic + ":" + in.partition + ":" + in.offset).getBytes(StandardCharsets.US_ASCII);
            out.inputTimestamp = Long.toString(in.timestamp).getBytes(StandardCharsets.US_ASCII);
            return out;
        }
    }

    /** The output record, with the headers, in the input record's partition. */
    static final class Records implements KafkaRecordSerializationSchema<Out> {
        @Override
        public ProducerRecord<byte[], byte[]> serialize(Out out, KafkaSinkContext context, Long timestamp) {
            RecordHeaders headers = new RecordHeaders();
            headers.add("eos.src", out.source);
            headers.add("eos.in_ts", out.inputTimestamp);
            return new ProducerRecord<>(out.topic, out.partition, null, out.key, out.value, headers);
        }
    }

    /** Runs until killed; a SIGTERM ends the MiniCluster's job with it. */
    public static void main(String[] args) throws Exception {
        Properties settings = PeerArguments.parse(args);
        String inputTopic = PeerArguments.take(settings, "input.topic");
        String outputTopic = PeerArguments.take(settings, "output.topic");
        String deadLetterTopic = PeerArguments.take(settings, "dead.letter.topic");
        String process = PeerArguments.take(settings, "process");
        String appId = PeerArguments.take(settings, "application.id");
        String guarantee = PeerArguments.take(settings, "delivery.guarantee");
        Path checkpoints = Paths.get(PeerArguments.take(settings, "checkpoint.dir")).toAbsolutePath();
        Properties client = PeerArguments.commandConfig(settings);
        Configuration flink = new Configuration();
        for (String name : settings.stringPropertyNames()) {
            if (name.startsWith("flink.")) {
                flink.setString(name.substring("flink.".length()), settings.getProperty(name));
            } else {
                client.setProperty(name, settings.getProperty(name));
            }
        }
        flink.setString("execution.checkpointing.dir", checkpoints.toUri().toString());
        flink.setString("execution.checkpointing.externalized-checkpoint-retention", "RETAIN_ON_CANCELLATION");
        Optional<Path> newest = newestCheckpoint(checkpoints);
        newest.ifPresent(found -> flink.setString("execution.state-recovery.path", found.toUri().toString()));
        System.out.println("resuming from " + newest.map(Path::toString).orElse("the group's committed offsets"));

        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment(flink);
        String bootstrap = client.getProperty("bootstrap.servers");
        Properties consumer = new Properties();
        consumer.putAll(client);
        consumer.setProperty("isolation.level", "read_committed");
        KafkaSource<In> source = KafkaSource.<In>builder()
                .setBootstrapServers(bootstrap)
                .setTopics(inputTopic)
                .setGroupId(appId)
                .setStartingOffsets(OffsetsInitializer.committedOffsets(OffsetResetStrategy.EARLIEST))
                .setDeserializer(new Positions())
                .setProperties(consumer)
                .build();
        KafkaSink<Out> sink = KafkaSink.<Out>builder()
                .setBootstrapServers(bootstrap)
                .setKafkaProducerConfig(client)
                .setRecordSerializer(new Records())
                .setDeliveryGuarantee(DeliveryGuarantee.valueOf(guarantee))
                .setTransactionalIdPrefix(appId)
                .build();
        env.fromSource(source, WatermarkStrategy.noWatermarks(), "input")
                .map(new Process(process, outputTopic, deadLetterTopic)).name("process")
                .sinkTo(sink).name("output");
        env.execute(appId);
    }

    /** The newest completed checkpoint (a chk-N folder with its _metadata) of any earlier launch. */
    static Optional<Path> newestCheckpoint(Path checkpoints) throws IOException {
        if (!Files.isDirectory(checkpoints)) {
            return Optional.empty();
        }
        try (Stream<Path> found = Files.find(checkpoints, 3,
                (path, attributes) -> path.getFileName().toString().equals("_metadata"))) {
            return found.max(Comparator.comparingLong(FlinkPeer::modified)).map(Path::getParent);
        }
    }

    private static long modified(Path path) {
        try {
            return Files.getLastModifiedTime(path).toMillis();
        } catch (IOException gone) {
            return Long.MIN_VALUE;
        }
    }

}
