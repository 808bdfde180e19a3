package eosbench.spark;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.ExecutionException;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.Path;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.ListOffsetsOptions;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.common.IsolationLevel;
import org.apache.kafka.common.TopicPartition;
import org.apache.spark.SparkEnv;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.connector.read.InputPartition;
import org.apache.spark.sql.connector.read.PartitionReader;
import org.apache.spark.sql.connector.read.PartitionReaderFactory;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.connector.read.streaming.MicroBatchStream;
import org.apache.spark.sql.connector.read.streaming.Offset;
import org.apache.spark.sql.connector.read.streaming.ReadAllAvailable;
import org.apache.spark.sql.connector.read.streaming.ReadLimit;
import org.apache.spark.sql.connector.read.streaming.ReadMaxRows;
import org.apache.spark.sql.connector.read.streaming.SupportsAdmissionControl;
import org.apache.spark.sql.connector.read.streaming.SupportsTriggerAvailableNow;
import org.apache.spark.sql.execution.streaming.checkpointing.CheckpointFileManager;
import org.apache.spark.storage.BlockManager;
import org.apache.spark.storage.BlockManagerId;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import scala.jdk.javaapi.CollectionConverters;

/**
 * The driver side of the grouped source: offsets from one Admin (read_committed end offsets, that
 * is the last stable offset), the rate limit, data loss, and the plan of G slot partitions.
 */
final class GroupedKafkaMicroBatchStream implements MicroBatchStream, SupportsAdmissionControl,
        SupportsTriggerAvailableNow {
    private static final Logger LOG = LoggerFactory.getLogger(GroupedKafkaMicroBatchStream.class);
    private static final long DEFAULT_POLL_TIMEOUT_MS = 120_000L;

    private final String topic;
    private final int slots;
    private final Map<String, Object> params;
    private final boolean failOnDataLoss;
    private final Long maxOffsetsPerTrigger;
    private final long pollTimeoutMs;
    private final String startingOffsets;
    private final String metadataPath;
    private Admin admin;
    private GroupedKafkaOffset initial;
    private GroupedKafkaOffset availableNowTarget;

    GroupedKafkaMicroBatchStream(Map<String, String> options, String metadataPath) {
        Map<String, String> lower = GroupedKafkaProvider.lowerCase(options);
        this.topic = lower.get("subscribe").trim();
        this.params = GroupedKafkaProvider.clientParams(options);
        this.slots = lower.containsKey("slots") ? (int) GroupedKafkaProvider.parsePositive(lower.get("slots"), "slots")
            : SparkSession.active().sparkContext().defaultParallelism();
        this.failOnDataLoss = Boolean.parseBoolean(lower.getOrDefault("failondataloss", "true").trim());
        String cap = lower.get("maxoffsetspertrigger");
        this.maxOffsetsPerTrigger = cap == null ? null : GroupedKafkaProvider.parsePositive(cap, "maxOffsetsPerTrigger");
        String timeout = lower.get("kafkaconsumer.polltimeoutms");
        this.pollTimeoutMs = timeout == null ? DEFAULT_POLL_TIMEOUT_MS
            : GroupedKafkaProvider.parsePositive(timeout, "kafkaConsumer.pollTimeoutMs");
        this.startingOffsets = lower.getOrDefault("startingoffsets", "latest").trim();
        this.metadataPath = metadataPath;
    }

    private synchronized Admin admin() {
        if (admin == null) {
            Map<String, Object> conf = new HashMap<>();
            params.forEach((k, v) -> {
                if (AdminClientConfig.configNames().contains(k)) {
                    conf.put(k, v);
                }
            });
            admin = Admin.create(conf);
        }
        return admin;
    }

    private static <T> T await(org.apache.kafka.common.KafkaFuture<T> future, String what) {
        try {
            return future.get();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException(what + " was interrupted", e);
        } catch (ExecutionException e) {
            throw new IllegalStateException(what + " failed: " + e.getCause(), e.getCause());
        }
    }

    /** The topic's partitions now. */
    private Set<Integer> partitions() {
        Set<Integer> result = new HashSet<>();
        await(admin().describeTopics(List.of(topic)).allTopicNames(), "describing " + topic).get(topic).partitions()
            .forEach(p -> result.add(p.partition()));
        return result;
    }

    /** Offsets of these partitions; read_committed, so latest is the last stable offset, never inside an open transaction. */
    private Map<Integer, Long> listOffsets(Collection<Integer> partitions, OffsetSpec spec) {
        Map<TopicPartition, OffsetSpec> ask = new HashMap<>();
        partitions.forEach(p -> ask.put(new TopicPartition(topic, p), spec));
        Map<Integer, Long> result = new TreeMap<>();
        if (ask.isEmpty()) {
            return result;
        }
        await(admin().listOffsets(ask, new ListOffsetsOptions(IsolationLevel.READ_COMMITTED)).all(),
            "listing offsets of " + topic).forEach((tp, info) -> result.put(tp.partition(), info.offset()));
        return result;
    }

    /**
     * The query's first offsets, kept in &lt;checkpoint&gt;/sources/0/0 as Spark's
     * KafkaSourceInitialOffsetWriter keeps them (a NUL byte, "v1", a newline, the JSON): a query
     * restarted before its first batch starts where it meant to, and streaming/checkpoint.py reads them.
     */
    @Override
    public synchronized Offset initialOffset() {
        if (initial == null) {
            Path file = new Path(metadataPath, "0");
            Configuration conf = SparkSession.active().sessionState().newHadoopConf();
            CheckpointFileManager files = CheckpointFileManager.create(new Path(metadataPath), conf);
            try {
                if (files.exists(file)) {
                    initial = readInitial(files, file);
                } else {
                    initial = resolveStartingOffsets();
                    files.mkdirs(new Path(metadataPath));
                    try (var out = files.createAtomic(file, false)) {
                        out.write(0);  // Spark writes it for Spark 2.1.0's reader (SPARK-19517); its reader skips it
                        out.write(("v1\n" + initial.json()).getBytes(StandardCharsets.UTF_8));
                    }
                    LOG.info("grouped source: initial offsets {} written to {}", initial.json(), file);
                }
            } catch (IOException e) {
                throw new IllegalStateException("cannot read or write the initial offsets " + file, e);
            }
        }
        return initial;
    }

    private GroupedKafkaOffset readInitial(CheckpointFileManager files, Path file) throws IOException {
        ByteArrayOutputStream bytes = new ByteArrayOutputStream();
        try (InputStream in = files.open(file)) {
            in.transferTo(bytes);
        }
        String text = bytes.toString(StandardCharsets.UTF_8);
        if (text.startsWith("\0")) {
            text = text.substring(1);
        }
        int newline = text.indexOf('\n');
        String version = newline < 0 ? "" : text.substring(0, newline).trim();
        if (!version.equals("v1")) {
            throw new IllegalStateException(file + " has version " + version + " (v1 expected): written by a newer"
                + " Spark or not a Kafka source's initial offsets");
        }
        return GroupedKafkaOffset.parse(text.substring(newline + 1).trim(), topic);
    }

    /** startingOffsets resolved: earliest, latest, or JSON naming every partition, whose -2/-1 mean earliest/latest. */
    private GroupedKafkaOffset resolveStartingOffsets() {
        Set<Integer> now = partitions();
        if (startingOffsets.equalsIgnoreCase("earliest")) {
            return new GroupedKafkaOffset(topic, listOffsets(now, OffsetSpec.earliest()));
        }
        if (startingOffsets.equalsIgnoreCase("latest")) {
            return new GroupedKafkaOffset(topic, listOffsets(now, OffsetSpec.latest()));
        }
        GroupedKafkaOffset given = GroupedKafkaOffset.parse(startingOffsets, topic);
        Map<Integer, Long> earliest = listOffsets(now, OffsetSpec.earliest());
        Map<Integer, Long> latest = listOffsets(now, OffsetSpec.latest());
        if (!given.offsets().keySet().equals(now)) {
            throw new IllegalArgumentException("startingOffsets " + startingOffsets + " must name every partition of "
                + topic + ", which has " + new TreeMap<>(latest).keySet() + " (as Spark's Kafka source asks)");
        }
        Map<Integer, Long> start = new TreeMap<>();
        for (Integer p : now) {
            long o = given.offsets().get(p);
            start.put(p, o == -2L ? earliest.get(p) : o == -1L ? latest.get(p) : o);
        }
        return new GroupedKafkaOffset(topic, start);
    }

    @Override
    public Offset deserializeOffset(String json) {
        return GroupedKafkaOffset.parse(json, topic);
    }

    @Override
    public ReadLimit getDefaultReadLimit() {
        return maxOffsetsPerTrigger == null ? ReadLimit.allAvailable() : ReadLimit.maxRows(maxOffsetsPerTrigger);
    }

    @Override
    public void prepareForTriggerAvailableNow() {
        availableNowTarget = new GroupedKafkaOffset(topic, listOffsets(partitions(), OffsetSpec.latest()));
    }

    @Override
    public Offset latestOffset() {
        throw new UnsupportedOperationException("latestOffset(Offset, ReadLimit) is the one Spark calls");
    }

    @Override
    public Offset latestOffset(Offset startOffset, ReadLimit limit) {
        Map<Integer, Long> start = ((GroupedKafkaOffset) startOffset).offsets();
        Map<Integer, Long> latest = availableNowTarget != null ? availableNowTarget.offsets()
            : listOffsets(partitions(), OffsetSpec.latest());
        if (limit instanceof ReadMaxRows) {
            Set<Integer> added = new HashSet<>(latest.keySet());
            added.removeAll(start.keySet());
            Map<Integer, Long> from = new TreeMap<>(start);
            from.putAll(listOffsets(added, OffsetSpec.earliest()));  // a new partition is read from its start
            return new GroupedKafkaOffset(topic, rateLimit(((ReadMaxRows) limit).maxRows(), from, latest));
        }
        if (!(limit instanceof ReadAllAvailable)) {
            throw new UnsupportedOperationException(GroupedKafkaProvider.SHORT_NAME + " has no read limit " + limit);
        }
        return new GroupedKafkaOffset(topic, latest);
    }

    /**
     * Spark's KafkaMicroBatchStream.rateLimit: each partition with a backlog gets limit × its share
     * of the total backlog, rounded down (up below 1, so that a small partition is not starved), and
     * never past its end; a partition with no start or no backlog keeps its end.
     */
    static Map<Integer, Long> rateLimit(long limit, Map<Integer, Long> from, Map<Integer, Long> until) {
        Map<Integer, Long> sizes = new HashMap<>();
        until.forEach((p, end) -> {
            Long begin = from.get(p);
            if (begin != null && end - begin > 0) {
                sizes.put(p, end - begin);
            }
        });
        double total = 0;
        for (long size : sizes.values()) {
            total += size;
        }
        if (total < 1) {
            return new TreeMap<>(until);
        }
        Map<Integer, Long> result = new TreeMap<>();
        for (Map.Entry<Integer, Long> e : until.entrySet()) {
            Long size = sizes.get(e.getKey());
            if (size == null) {
                result.put(e.getKey(), e.getValue());
                continue;
            }
            long begin = from.get(e.getKey());
            double prorate = limit * (size / total);
            long prorateLong = (long) (prorate < 1 ? Math.ceil(prorate) : Math.floor(prorate));
            long off = prorateLong > Long.MAX_VALUE - begin ? Long.MAX_VALUE : begin + prorateLong;
            result.put(e.getKey(), Math.min(e.getValue(), off));
        }
        return result;
    }

    private void reportDataLoss(String message) {
        String full = message + ". Some data may have been lost because they are not available in Kafka any more;"
            + " either the data was aged out by Kafka or the topic may have been deleted before all the data in the"
            + " topic was processed. If you don't want your streaming query to fail on such cases, set the source"
            + " option failOnDataLoss to false.";
        if (failOnDataLoss) {
            throw new IllegalStateException(full);
        }
        LOG.warn(full);
    }

    /** The executors as Spark's Kafka source sorts them; empty in local mode, where the driver is the only one. */
    private static List<String> executors() {
        BlockManager bm = SparkEnv.get().blockManager();
        List<String[]> peers = new ArrayList<>();
        for (BlockManagerId id : CollectionConverters.asJava(bm.master().getPeers(bm.blockManagerId()))) {
            peers.add(new String[] {id.host(), id.executorId()});
        }
        return SlotMap.sparkOrder(peers);
    }

    /** G input partitions, partition k = slot k (empty where the slot has nothing new), so the sink's slot is the task's index. */
    @Override
    public InputPartition[] planInputPartitions(Offset startOffset, Offset endOffset) {
        Map<Integer, Long> start = ((GroupedKafkaOffset) startOffset).offsets();
        Map<Integer, Long> end = ((GroupedKafkaOffset) endOffset).offsets();
        Set<Integer> added = new HashSet<>(end.keySet());
        added.removeAll(start.keySet());
        Map<Integer, Long> addedFrom = listOffsets(added, OffsetSpec.earliest());
        if (!addedFrom.keySet().equals(added)) {
            Set<Integer> gone = new HashSet<>(added);
            gone.removeAll(addedFrom.keySet());
            reportDataLoss("Cannot find earliest offsets of " + topic + " partitions " + gone);
        }
        addedFrom.forEach((p, earliest) -> {
            if (earliest != 0L) {  // records written to it while the query was stopped are gone
                reportDataLoss("Added partition " + topic + "-" + p + " starts from " + earliest + " instead of 0");
            }
        });
        Set<Integer> deleted = new HashSet<>(start.keySet());
        deleted.removeAll(end.keySet());
        if (!deleted.isEmpty()) {
            reportDataLoss("Partitions " + deleted.stream().sorted().map(p -> topic + "-" + p + " (read up to " + start.get(p)
                + ")").toList() + " have been deleted");
        }
        List<Integer> withRecords = new ArrayList<>();
        Map<Integer, Long> from = new TreeMap<>();
        for (Map.Entry<Integer, Long> e : end.entrySet()) {
            Long begin = start.containsKey(e.getKey()) ? start.get(e.getKey()) : addedFrom.get(e.getKey());
            if (begin == null) {
                continue;
            }
            if (e.getValue() < begin) {
                reportDataLoss("Partition " + topic + "-" + e.getKey() + " offset was changed from " + begin + " to "
                    + e.getValue() + " (the topic was deleted and created again?)");
            }
            if (e.getValue() > begin) {
                withRecords.add(e.getKey());
                from.put(e.getKey(), begin);
            }
        }
        // Each partition's location as Spark's source would prefer it, then the sink's map over them.
        List<String> executors = executors();
        int[] partitions = withRecords.stream().mapToInt(Integer::intValue).toArray();
        String[] locations = new String[partitions.length];
        for (int i = 0; i < partitions.length; i++) {
            locations[i] = SlotMap.sparkLocation(topic, partitions[i], executors);
        }
        int[] slotOf = SlotMap.slotOf(partitions, locations, slots);
        String[] slotLocations = SlotMap.slotLocations(locations, slots);
        List<List<Integer>> members = new ArrayList<>();
        for (int k = 0; k < slots; k++) {
            members.add(new ArrayList<>());
        }
        for (int i = 0; i < partitions.length; i++) {
            members.get(slotOf[i]).add(partitions[i]);
        }
        InputPartition[] planned = new InputPartition[slots];
        for (int k = 0; k < slots; k++) {
            List<Integer> mine = members.get(k);
            int[] ps = mine.stream().mapToInt(Integer::intValue).sorted().toArray();
            long[] f = new long[ps.length];
            long[] u = new long[ps.length];
            for (int i = 0; i < ps.length; i++) {
                f[i] = from.get(ps[i]);
                u[i] = end.get(ps[i]);
            }
            planned[k] = new SlotInputPartition(k, slots, topic, ps, f, u, params, slotLocations[k], failOnDataLoss,
                pollTimeoutMs);
        }
        return planned;
    }

    @Override
    public PartitionReaderFactory createReaderFactory() {
        return new ReaderFactory();
    }

    /** Makes each slot's reader on its executor; an empty slot reads nothing and borrows no consumer. */
    static final class ReaderFactory implements PartitionReaderFactory {
        private static final long serialVersionUID = 1L;

        @Override
        public PartitionReader<InternalRow> createReader(InputPartition partition) {
            SlotInputPartition slot = (SlotInputPartition) partition;
            if (slot.size() == 0) {
                return new PartitionReader<InternalRow>() {
                    @Override
                    public boolean next() {
                        return false;
                    }

                    @Override
                    public InternalRow get() {
                        throw new IllegalStateException("an empty slot has no rows");
                    }

                    @Override
                    public void close() {
                    }
                };
            }
            return new SlotPartitionReader(slot);
        }
    }

    @Override
    public void commit(Offset end) {
    }

    @Override
    public synchronized void stop() {
        if (admin != null) {
            admin.close(Duration.ofSeconds(5));
            admin = null;
        }
    }

    @Override
    public String toString() {
        return GroupedKafkaProvider.SHORT_NAME + "[" + topic + ", " + slots + " slots]";
    }
}
