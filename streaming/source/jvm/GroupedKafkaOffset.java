package eosbench.spark;

import java.io.IOException;
import java.util.Iterator;
import java.util.Map;
import java.util.TreeMap;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import org.apache.spark.sql.connector.read.streaming.Offset;

/**
 * The grouped source's offset: each partition's next offset to read, written exactly as Spark's
 * KafkaSourceOffset writes it ({"topic":{"0":n,"1":m}}, partitions in ascending order), so the
 * sink's CheckpointLog reads offsets/&lt;batch&gt; unchanged and a checkpoint moves between sources.
 */
public final class GroupedKafkaOffset extends Offset {
    private static final ObjectMapper JSON = new ObjectMapper();

    private final String topic;
    private final TreeMap<Integer, Long> offsets;

    /** An offset of one topic's partitions. */
    public GroupedKafkaOffset(String topic, Map<Integer, Long> offsets) {
        this.topic = topic;
        this.offsets = new TreeMap<>(offsets);
    }

    /** The topic. */
    public String topic() {
        return topic;
    }

    /** Partition to offset, in partition order (a copy). */
    public TreeMap<Integer, Long> offsets() {
        return new TreeMap<>(offsets);
    }

    /**
     * Reads Spark's JSON; -2 (earliest) and -1 (latest) stay as they are for the caller to resolve.
     * Refuses another topic than {@code topic} (null: any) and a second topic, which this source never reads.
     */
    public static GroupedKafkaOffset parse(String json, String topic) {
        JsonNode root;
        try {
            root = JSON.readTree(json);
        } catch (IOException e) {
            throw new IllegalArgumentException("not a Kafka source offset: " + json, e);
        }
        if (root == null || !root.isObject() || root.size() != 1) {
            throw new IllegalArgumentException("expected the offsets of one topic, {\"topic\":{\"0\":n}}, got " + json);
        }
        Iterator<String> names = root.fieldNames();
        String found = names.next();
        if (topic != null && !topic.equals(found)) {
            throw new IllegalArgumentException("the offsets name topic " + found + ", but the source reads " + topic);
        }
        TreeMap<Integer, Long> offsets = new TreeMap<>();
        root.get(found).fields().forEachRemaining(e -> offsets.put(Integer.parseInt(e.getKey()), e.getValue().asLong()));
        return new GroupedKafkaOffset(found, offsets);
    }

    @Override
    public String json() {
        ObjectNode root = JSON.createObjectNode();
        ObjectNode partitions = root.putObject(topic);
        offsets.forEach((p, o) -> partitions.put(String.valueOf(p), o));
        return root.toString();
    }
}
