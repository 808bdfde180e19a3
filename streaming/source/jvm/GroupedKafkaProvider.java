package eosbench.spark;

import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;

import org.apache.spark.sql.connector.catalog.SupportsRead;
import org.apache.spark.sql.connector.catalog.Table;
import org.apache.spark.sql.connector.catalog.TableCapability;
import org.apache.spark.sql.connector.catalog.TableProvider;
import org.apache.spark.sql.connector.expressions.Transform;
import org.apache.spark.sql.connector.metric.CustomMetric;
import org.apache.spark.sql.connector.metric.CustomSumMetric;
import org.apache.spark.sql.connector.read.Scan;
import org.apache.spark.sql.connector.read.ScanBuilder;
import org.apache.spark.sql.connector.read.streaming.MicroBatchStream;
import org.apache.spark.sql.sources.DataSourceRegister;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;

/**
 * The grouped Kafka source, {@code format("eosbench-kafka-grouped")}: micro-batches whose Spark
 * partition k is slot k of G, the whole ranges of a set of Kafka partitions read by one
 * read_committed consumer that the owner executor keeps across batches (docs/design.md).
 *
 * <p>Options: {@code subscribe} (one topic), {@code slots} (G; default the default parallelism),
 * {@code startingOffsets} (earliest, latest or Spark's JSON with -2/-1), {@code startingTimestamp},
 * {@code startingOffsetsByTimestamp} and {@code startingOffsetsByTimestampStrategy},
 * {@code maxOffsetsPerTrigger}, {@code minOffsetsPerTrigger} with {@code maxTriggerDelay},
 * {@code fetchOffset.numRetries} and {@code fetchOffset.retryIntervalMs}, {@code failOnDataLoss}
 * (default true), {@code kafkaConsumer.pollTimeoutMs} (default 120000), {@code includeHeaders} (true
 * only: the schema always has them) and every {@code kafka.*} client setting, each as Spark's Kafka
 * source reads it. Spark's other options are refused rather than ignored: several topics,
 * {@code subscribePattern} and {@code assign} (eosbench's job reads one input topic, whose
 * partitions are the sink's), and the options of batch queries and real-time mode.
 */
public final class GroupedKafkaProvider implements TableProvider, DataSourceRegister {
    /** The short name that format() resolves through META-INF/services. */
    public static final String SHORT_NAME = "eosbench-kafka-grouped";

    /** Spark's Kafka source schema with includeHeaders. */
    static final StructType SCHEMA = new StructType(new StructField[] {
        DataTypes.createStructField("key", DataTypes.BinaryType, true),
        DataTypes.createStructField("value", DataTypes.BinaryType, true),
        DataTypes.createStructField("topic", DataTypes.StringType, true),
        DataTypes.createStructField("partition", DataTypes.IntegerType, true),
        DataTypes.createStructField("offset", DataTypes.LongType, true),
        DataTypes.createStructField("timestamp", DataTypes.TimestampType, true),
        DataTypes.createStructField("timestampType", DataTypes.IntegerType, true),
        DataTypes.createStructField("headers", DataTypes.createArrayType(new StructType(new StructField[] {
            DataTypes.createStructField("key", DataTypes.StringType, true),
            DataTypes.createStructField("value", DataTypes.BinaryType, true)}), true), true)});

    private static final Set<String> OPTIONS = Set.of("subscribe", "slots", "startingoffsets", "startingtimestamp",
        "startingoffsetsbytimestamp", "startingoffsetsbytimestampstrategy", "maxoffsetspertrigger",
        "minoffsetspertrigger", "maxtriggerdelay", "fetchoffset.numretries", "fetchoffset.retryintervalms",
        "failondataloss", "kafkaconsumer.polltimeoutms", "includeheaders");
    // The client settings the source owns: a group would join and commit, and the others would
    // change what a record is or where a read starts.
    private static final Set<String> OWNED_CLIENT_SETTINGS = Set.of("kafka.group.id", "kafka.auto.offset.reset",
        "kafka.enable.auto.commit", "kafka.key.deserializer", "kafka.value.deserializer",
        "kafka.interceptor.classes");

    /**
     * Consumers the grouped source created in this JVM since it started: in local mode the driver's
     * and the executor's are one JVM, so a test reads it over py4j; on a cluster each executor logs its own.
     */
    public static long consumersCreated() {
        return SlotConsumers.CREATED.get();
    }

    @Override
    public String shortName() {
        return SHORT_NAME;
    }

    @Override
    public StructType inferSchema(CaseInsensitiveStringMap options) {
        validate(options);
        return SCHEMA;
    }

    @Override
    public Table getTable(StructType schema, Transform[] partitioning, Map<String, String> properties) {
        return new GroupedTable();
    }

    /** Refuse, in one line, what this source does not do, naming Spark's source as the one that does. */
    static void validate(Map<String, String> options) {
        Map<String, String> lower = lowerCase(options);
        String topic = lower.get("subscribe");
        if (topic == null || topic.isEmpty() || topic.contains(",")) {
            throw new IllegalArgumentException(SHORT_NAME + " reads one topic: set the option subscribe to it"
                + (topic != null && topic.contains(",") ? " (got several: " + topic + ")" : ""));
        }
        for (String name : lower.keySet()) {
            if (OWNED_CLIENT_SETTINGS.contains(name)) {
                throw new IllegalArgumentException(SHORT_NAME + " does not take " + name + ": it reads with assign(),"
                    + " no group, read_committed, bytes, and offsets it keeps in the checkpoint");
            }
            if (!name.startsWith("kafka.") && !OPTIONS.contains(name)) {
                throw new IllegalArgumentException(SHORT_NAME + " does not support the option " + name
                    + " (it takes subscribe, slots, startingOffsets, startingTimestamp, startingOffsetsByTimestamp[Strategy],"
                    + " maxOffsetsPerTrigger, minOffsetsPerTrigger, maxTriggerDelay, fetchOffset.numRetries,"
                    + " fetchOffset.retryIntervalMs, failOnDataLoss, kafkaConsumer.pollTimeoutMs, includeHeaders and"
                    + " kafka.*); use Spark's kafka source for it");
            }
        }
        String isolation = lower.getOrDefault("kafka.isolation.level", "read_committed");
        if (!isolation.equalsIgnoreCase("read_committed")) {
            throw new IllegalArgumentException(SHORT_NAME + " reads read_committed only, got kafka.isolation.level="
                + isolation);
        }
        if (!lower.getOrDefault("includeheaders", "true").equalsIgnoreCase("true")) {
            throw new IllegalArgumentException(SHORT_NAME + " always gives the headers column: includeHeaders=true only");
        }
        String strategy = lower.getOrDefault("startingoffsetsbytimestampstrategy", "error");
        if (!strategy.equalsIgnoreCase("error") && !strategy.equalsIgnoreCase("latest")) {
            throw new IllegalArgumentException(SHORT_NAME + ": startingOffsetsByTimestampStrategy is error or latest, got "
                + strategy);
        }
        for (String number : List.of("slots", "maxoffsetspertrigger", "minoffsetspertrigger", "fetchoffset.numretries",
                                     "kafkaconsumer.polltimeoutms")) {
            if (lower.containsKey(number) && parsePositive(lower.get(number), number) <= 0) {
                throw new IllegalArgumentException(SHORT_NAME + ": " + number + " must be positive");
            }
        }
    }

    /** A number option's value (the caller checks its sign), refused in one line when it is none. */
    static long parsePositive(String text, String name) {
        try {
            return Long.parseLong(text.trim());
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException(SHORT_NAME + ": " + name + " must be a number, got " + text);
        }
    }

    /** The options with lower-case names, as Spark reads source option names case-blind. */
    static Map<String, String> lowerCase(Map<String, String> options) {
        Map<String, String> lower = new HashMap<>();
        options.forEach((k, v) -> lower.put(k.toLowerCase(Locale.ROOT), v));
        return lower;
    }

    /** The kafka.* options without their prefix, names as given (Kafka's names are case-sensitive). */
    static Map<String, Object> clientParams(Map<String, String> options) {
        Map<String, Object> params = new HashMap<>();
        options.forEach((k, v) -> {
            if (k.toLowerCase(Locale.ROOT).startsWith("kafka.")) {
                params.put(k.substring("kafka.".length()), v);
            }
        });
        return params;
    }

    /** The source as a table that can only be read as a micro-batch stream. */
    static final class GroupedTable implements Table, SupportsRead {
        @Override
        public String name() {
            return SHORT_NAME;
        }

        @Override
        public StructType schema() {
            return SCHEMA;
        }

        @Override
        public Set<TableCapability> capabilities() {
            return Collections.singleton(TableCapability.MICRO_BATCH_READ);
        }

        @Override
        public ScanBuilder newScanBuilder(CaseInsensitiveStringMap options) {
            validate(options);
            Map<String, String> given = options.asCaseSensitiveMap();
            return () -> new GroupedScan(given);
        }
    }

    /** The scan: its stream, and the consumer counter as a metric Spark sums over the batch's tasks. */
    static final class GroupedScan implements Scan {
        private final Map<String, String> options;

        GroupedScan(Map<String, String> options) {
            this.options = options;
        }

        @Override
        public StructType readSchema() {
            return SCHEMA;
        }

        @Override
        public MicroBatchStream toMicroBatchStream(String checkpointLocation) {
            return new GroupedKafkaMicroBatchStream(options, checkpointLocation);
        }

        @Override
        public CustomMetric[] supportedCustomMetrics() {
            return new CustomMetric[] {new ConsumersCreated()};
        }
    }

    /** Consumers the batch's tasks created (0 when every slot found its consumer kept). */
    public static final class ConsumersCreated extends CustomSumMetric {
        @Override
        public String name() {
            return SlotPartitionReader.CONSUMERS_CREATED;
        }

        @Override
        public String description() {
            return "grouped source consumers created";
        }
    }
}
