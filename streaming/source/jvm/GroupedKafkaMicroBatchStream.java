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
import java.util.Optional;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.ExecutionException;
import java.util.function.Supplier;

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
import org.apache.spark.sql.connector.read.streaming.CompositeReadLimit;
import org.apache.spark.sql.connector.read.streaming.MicroBatchStream;
import org.apache.spark.sql.connector.read.streaming.Offset;
import org.apache.spark.sql.connector.read.streaming.ReadAllAvailable;
import org.apache.spark.sql.connector.read.streaming.ReadLimit;
import org.apache.spark.sql.connector.read.streaming.ReadMaxRows;
import org.apache.spark.sql.connector.read.streaming.ReadMinRows;
import org.apache.spark.sql.connector.read.streaming.ReportsSourceMetrics;
import org.apache.spark.sql.connector.read.streaming.SupportsAdmissionControl;
import org.apache.spark.sql.connector.read.streaming.SupportsTriggerAvailableNow;
import org.apache.spark.sql.execution.streaming.checkpointing.CheckpointFileManager;
import org.apache.spark.storage.BlockManager;
import org.apache.spark.network.util.JavaUtils;
import org.apache.spark.storage.BlockManagerId;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import scala.jdk.javaapi.CollectionConverters;

/**
 * The driver side of the grouped source: offsets from one Admin (read_committed end offsets, that
 * is the last stable offset), the read limits, data loss, the lag metrics, and the plan of G slot
 * partitions. Where Spark's KafkaMicroBatchStream has the same option, this behaves as it does.
 */
final class GroupedKafkaMicroBatchStream implements MicroBatchStream, SupportsAdmissionControl,
        SupportsTriggerAvailableNow, ReportsSourceMetrics {
    private static final Logger LOG = LoggerFactory.getLogger(GroupedKafkaMicroBatchStream.class);
    private static final long DEFAULT_POLL_TIMEOUT_MS = 120_000L;
    private static final String DEFAULT_MAX_TRIGGER_DELAY = "15m";  // Spark's

    private final String topic;
    private final int slots;
    private final Map<String, Object> params;
    private final boolean failOnDataLoss;
    private final Long maxOffsetsPerTrigger;
    private final Long minOffsetsPerTrigger;
    private final long maxTriggerDelayMs;
    private final long pollTimeoutMs;
    private final String startingOffsets;
    private final String startingTimestamp;
    private final String startingOffsetsByTimestamp;
    private final boolean timestampNotFoundIsLatest;
    private final int offsetFetchAttempts;
    private final long offsetFetchRetryIntervalMs;
    private final String metadataPath;
    private Admin admin;
    private GroupedKafkaOffset initial;
    private GroupedKafkaOffset availableNowTarget;
    private Map<Integer, Long> latestAvailable;  // at the last latestOffset, for the lag metrics
    private long lastTriggerMillis = 0L;

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
        String floor = lower.get("minoffsetspertrigger");
        this.minOffsetsPerTrigger = floor == null ? null : GroupedKafkaProvider.parsePositive(floor, "minOffsetsPerTrigger");
        this.maxTriggerDelayMs = JavaUtils.timeStringAsMs(lower.getOrDefault("maxtriggerdelay", DEFAULT_MAX_TRIGGER_DELAY));
        this.startingOffsets = lower.getOrDefault("startingoffsets", "latest").trim();
        this.startingTimestamp = lower.get("startingtimestamp");
        this.startingOffsetsByTimestamp = lower.get("startingoffsetsbytimestamp");
        this.timestampNotFoundIsLatest = lower.getOrDefault("startingoffsetsbytimestampstrategy", "error").trim()
            .equalsIgnoreCase("latest");
        this.offsetFetchAttempts = (int) GroupedKafkaProvider.parsePositive(
            lower.getOrDefault("fetchoffset.numretries", "3"), "fetchOffset.numRetries");
        this.offsetFetchRetryIntervalMs = GroupedKafkaProvider.parsePositive(
            lower.getOrDefault("fetchoffset.retryintervalms", "1000"), "fetchOffset.retryIntervalMs");
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

    /**
     * A look-up of the cluster, tried fetchOffset.numRetries times fetchOffset.retryIntervalMs apart
     * with a new Admin each time, as Spark's KafkaOffsetReaderAdmin tries its own: a broker restarting
     * fails one look-up, not the query.
     */
    private synchronized <T> T withRetries(Supplier<T> lookUp) {
        RuntimeException last = null;
        for (int attempt = 1; attempt <= offsetFetchAttempts && !Thread.currentThread().isInterrupted(); attempt++) {
            try {
                return lookUp.get();
            } catch (RuntimeException e) {
                last = e;
                LOG.warn("grouped source: attempt {} of {} to look offsets of {} up failed: {}", attempt,
                    offsetFetchAttempts, topic, e.getMessage());
                if (attempt < offsetFetchAttempts) {
                    try {
                        Thread.sleep(offsetFetchRetryIntervalMs);
                    } catch (InterruptedException interrupted) {
                        Thread.currentThread().interrupt();
                    }
                }
                resetAdmin();
            }
        }
        throw last != null ? last : new IllegalStateException("looking offsets of " + topic + " up was interrupted");
    }

    private synchronized void resetAdmin() {
        if (admin != null) {
            admin.close(Duration.ofSeconds(5));
            admin = null;
        }
    }

    /** The topic's partitions now. */
    private Set<Integer> partitions() {
        return withRetries(() -> {
            Set<Integer> result = new HashSet<>();
            await(admin().describeTopics(List.of(topic)).allTopicNames(), "describing " + topic).get(topic).partitions()
                .forEach(p -> result.add(p.partition()));
            return result;
        });
    }

    /** Offsets of these partitions; read_committed, so latest is the last stable offset, never inside an open transaction. */
    private Map<Integer, Long> listOffsets(Collection<Integer> partitions, OffsetSpec spec) {
        Map<TopicPartition, OffsetSpec> ask = new HashMap<>();
        partitions.forEach(p -> ask.put(new TopicPartition(topic, p), spec));
        if (ask.isEmpty()) {
            return new TreeMap<>();
        }
        return withRetries(() -> {
            Map<Integer, Long> result = new TreeMap<>();
            await(admin().listOffsets(ask, new ListOffsetsOptions(IsolationLevel.READ_COMMITTED)).all(),
                "listing offsets of " + topic).forEach((tp, info) -> result.put(tp.partition(), info.offset()));
            return result;
        });
    }

    /**
     * The query's first offsets, kept in &lt;checkpoint&gt;/sources/0/0 as Spark's
     * KafkaSourceInitialOffsetWriter keeps them (a NUL byte, "v1", a newline, the JSON): a query
     * restarted before its first batch starts where it meant to, and streaming/source/checkpoint.py reads them.
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

    /**
     * startingOffsets resolved: earliest, latest, or JSON naming every partition, whose -2/-1 mean
     * earliest/latest. startingTimestamp, then startingOffsetsByTimestamp, go before it, as on Spark's source.
     */
    private GroupedKafkaOffset resolveStartingOffsets() {
        Set<Integer> now = partitions();
        if (startingTimestamp != null) {
            long at = GroupedKafkaProvider.parsePositive(startingTimestamp, "startingTimestamp");
            Map<Integer, Long> each = new TreeMap<>();
            now.forEach(p -> each.put(p, at));
            return new GroupedKafkaOffset(topic, offsetsAtTimestamps(each));
        }
        if (startingOffsetsByTimestamp != null) {
            Map<Integer, Long> given = GroupedKafkaOffset.parse(startingOffsetsByTimestamp, topic).offsets();
            if (!given.keySet().equals(now)) {
                throw new IllegalArgumentException("startingOffsetsByTimestamp " + startingOffsetsByTimestamp
                    + " must name every partition of " + topic + ", which has " + new java.util.TreeSet<>(now)
                    + " (as Spark's Kafka source asks)");
            }
            return new GroupedKafkaOffset(topic, offsetsAtTimestamps(given));
        }
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

    /**
     * Each partition's first offset whose record's timestamp is at or after the given one; where no
     * record is, the latest offset with startingOffsetsByTimestampStrategy=latest, else an error (Spark's rule).
     */
    private Map<Integer, Long> offsetsAtTimestamps(Map<Integer, Long> timestamps) {
        Map<Integer, Long> latest = listOffsets(timestamps.keySet(), OffsetSpec.latest());
        Map<Integer, Long> result = new TreeMap<>();
        for (Map.Entry<Integer, Long> e : timestamps.entrySet()) {
            long found = listOffsets(List.of(e.getKey()), OffsetSpec.forTimestamp(e.getValue())).getOrDefault(e.getKey(), -1L);
            if (found < 0 && !timestampNotFoundIsLatest) {
                throw new IllegalArgumentException("No offset matched from request of topic-partition " + topic + "-"
                    + e.getKey() + " and timestamp " + e.getValue() + "; set startingOffsetsByTimestampStrategy=latest"
                    + " to start such a partition at its latest offset");
            }
            result.put(e.getKey(), found < 0 ? latest.get(e.getKey()) : found);
        }
        return result;
    }

    @Override
    public Offset deserializeOffset(String json) {
        return GroupedKafkaOffset.parse(json, topic);
    }

    @Override
    public ReadLimit getDefaultReadLimit() {
        if (minOffsetsPerTrigger != null && maxOffsetsPerTrigger != null) {
            return ReadLimit.compositeLimit(new ReadLimit[] {ReadLimit.minRows(minOffsetsPerTrigger, maxTriggerDelayMs),
                ReadLimit.maxRows(maxOffsetsPerTrigger)});
        }
        if (minOffsetsPerTrigger != null) {
            return ReadLimit.minRows(minOffsetsPerTrigger, maxTriggerDelayMs);
        }
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

    /** Spark's order: read all if any limit says so; else no batch below minOffsetsPerTrigger until maxTriggerDelay; else the cap. */
    @Override
    public Offset latestOffset(Offset startOffset, ReadLimit limit) {
        Map<Integer, Long> start = ((GroupedKafkaOffset) startOffset).offsets();
        Map<Integer, Long> latest = availableNowTarget != null ? availableNowTarget.offsets()
            : listOffsets(partitions(), OffsetSpec.latest());
        latestAvailable = latest;
        List<ReadLimit> limits = limit instanceof CompositeReadLimit
            ? List.of(((CompositeReadLimit) limit).getReadLimits()) : List.of(limit);
        if (limits.stream().anyMatch(l -> l instanceof ReadAllAvailable)) {
            return new GroupedKafkaOffset(topic, latest);
        }
        for (ReadLimit l : limits) {
            if (!(l instanceof ReadMinRows) && !(l instanceof ReadMaxRows)) {
                throw new UnsupportedOperationException(GroupedKafkaProvider.SHORT_NAME + " has no read limit " + l);
            }
        }
        Optional<ReadMinRows> floor = limits.stream().filter(l -> l instanceof ReadMinRows).map(l -> (ReadMinRows) l)
            .findFirst();
        if (floor.isPresent() && delayBatch(floor.get().minRows(), latest, start, floor.get().maxTriggerDelayMs())) {
            return startOffset;
        }
        Optional<ReadMaxRows> cap = limits.stream().filter(l -> l instanceof ReadMaxRows).map(l -> (ReadMaxRows) l)
            .findFirst();
        if (cap.isEmpty()) {
            return new GroupedKafkaOffset(topic, latest);
        }
        Set<Integer> added = new HashSet<>(latest.keySet());
        added.removeAll(start.keySet());
        Map<Integer, Long> from = new TreeMap<>(start);
        from.putAll(listOffsets(added, OffsetSpec.earliest()));  // a new partition is read from its start
        return new GroupedKafkaOffset(topic, rateLimit(cap.get().maxRows(), from, latest));
    }

    /** Whether to skip this trigger: fewer new offsets than minOffsetsPerTrigger and maxTriggerDelay not yet passed. */
    private boolean delayBatch(long minRows, Map<Integer, Long> latest, Map<Integer, Long> start, long maxDelayMs) {
        long now = System.currentTimeMillis();
        if (now - lastTriggerMillis >= maxDelayMs) {
            lastTriggerMillis = now;
            return false;
        }
        double fresh = 0;
        for (Map.Entry<Integer, Long> e : latest.entrySet()) {
            fresh += e.getValue() - start.getOrDefault(e.getKey(), 0L);
        }
        if (fresh < minRows) {
            return true;
        }
        lastTriggerMillis = now;
        return false;
    }

    @Override
    public Offset reportLatestOffset() {
        return latestAvailable == null || latestAvailable.isEmpty() ? null : new GroupedKafkaOffset(topic, latestAvailable);
    }

    /** Spark's Kafka source's lag metrics: each partition's latest available offset less the one consumed. */
    @Override
    public Map<String, String> metrics(Optional<Offset> latestConsumedOffset) {
        if (latestConsumedOffset.isEmpty() || latestAvailable == null || latestAvailable.isEmpty()) {
            return Map.of();
        }
        Map<Integer, Long> consumed = ((GroupedKafkaOffset) latestConsumedOffset.get()).offsets();
        List<Long> behind = new ArrayList<>();
        latestAvailable.forEach((p, end) -> behind.add(end - consumed.getOrDefault(p, 0L)));
        long sum = 0;
        for (long b : behind) {
            sum += b;
        }
        return Map.of("minOffsetsBehindLatest", Long.toString(behind.stream().min(Long::compare).get()),
            "maxOffsetsBehindLatest", Long.toString(behind.stream().max(Long::compare).get()),
            "avgOffsetsBehindLatest", Double.toString((double) sum / behind.size()));
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
        resetAdmin();
    }

    @Override
    public String toString() {
        return GroupedKafkaProvider.SHORT_NAME + "[" + topic + ", " + slots + " slots]";
    }
}
