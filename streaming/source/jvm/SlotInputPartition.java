package eosbench.spark;

import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.HashMap;
import java.util.HexFormat;
import java.util.Map;
import java.util.TreeMap;

import org.apache.spark.sql.connector.read.InputPartition;

/**
 * One Spark input partition of the grouped source: slot k of G, the whole ranges of the Kafka
 * partitions the slot map gives it in this batch, and the executor that owns the slot. The getters
 * are public so that the sink reads the batch's map from the RDD (streaming/source/batch_ranges.py).
 */
public final class SlotInputPartition implements InputPartition {
    private static final long serialVersionUID = 1L;

    private final int slot;
    private final int slots;
    private final String topic;
    private final int[] partitions;
    private final long[] from;
    private final long[] until;
    private final HashMap<String, Object> params;
    private final String location;
    private final boolean failOnDataLoss;
    private final long pollTimeoutMs;

    SlotInputPartition(int slot, int slots, String topic, int[] partitions, long[] from, long[] until,
                       Map<String, Object> params, String location, boolean failOnDataLoss, long pollTimeoutMs) {
        this.slot = slot;
        this.slots = slots;
        this.topic = topic;
        this.partitions = partitions.clone();
        this.from = from.clone();
        this.until = until.clone();
        this.params = new HashMap<>(params);
        this.location = location;
        this.failOnDataLoss = failOnDataLoss;
        this.pollTimeoutMs = pollTimeoutMs;
    }

    /** Slot k. */
    public int slot() {
        return slot;
    }

    /** G, the slot count. */
    public int slots() {
        return slots;
    }

    /** The topic. */
    public String topic() {
        return topic;
    }

    /** How many Kafka partitions the slot reads in this batch. */
    public int size() {
        return partitions.length;
    }

    /** The i-th Kafka partition of the slot. */
    public int partition(int i) {
        return partitions[i];
    }

    /** The i-th partition's first offset of the batch. */
    public long fromOffset(int i) {
        return from[i];
    }

    /** The i-th partition's end (exclusive) in the batch. */
    public long untilOffset(int i) {
        return until[i];
    }

    /**
     * Every range as "partition:from:until", separated by ",": the sink reads a batch's map with one
     * call per slot, where a call per range cost 0.3 s a batch at 1,000 partitions over py4j.
     */
    public String ranges() {
        StringBuilder text = new StringBuilder();
        for (int i = 0; i < partitions.length; i++) {
            text.append(i == 0 ? "" : ",").append(partitions[i]).append(':').append(from[i]).append(':').append(until[i]);
        }
        return text.toString();
    }

    /** The owner executor, executor_&lt;host&gt;_&lt;id&gt;, or "" for none. */
    public String location() {
        return location == null ? "" : location;
    }

    @Override
    public String[] preferredLocations() {
        return location == null || location.isEmpty() ? new String[0] : new String[] {location};
    }

    /** The kafka.* client settings, without the prefix. */
    Map<String, Object> params() {
        return params;
    }

    /** Whether a range below the log start fails the task. */
    boolean failOnDataLoss() {
        return failOnDataLoss;
    }

    /** The longest the slot waits for its ranges. */
    long pollTimeoutMs() {
        return pollTimeoutMs;
    }

    /** The slot's Kafka partitions in this batch (a copy). */
    int[] partitions() {
        return partitions.clone();
    }

    /**
     * The cache key of the slot's consumer: a digest of the client settings, the topic and the slot,
     * not its partitions, so that a slot whose partitions change keeps its consumer (re-assigned).
     */
    String consumerKey() {
        try {
            byte[] digest = MessageDigest.getInstance("SHA-256").digest(
                new TreeMap<>(params).toString().getBytes(StandardCharsets.UTF_8));
            return HexFormat.of().formatHex(digest, 0, 8) + "|" + topic + "|" + slot;
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException(e);
        }
    }
}
