package eosbench.spark;

import java.time.Duration;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.Set;

import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.OffsetOutOfRangeException;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.header.Header;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.GenericInternalRow;
import org.apache.spark.sql.catalyst.expressions.UnsafeProjection;
import org.apache.spark.sql.catalyst.util.GenericArrayData;
import org.apache.spark.sql.connector.metric.CustomTaskMetric;
import org.apache.spark.sql.connector.read.PartitionReader;
import org.apache.spark.unsafe.types.UTF8String;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Reads one slot's whole ranges with the slot's one consumer. read_committed: a partition is done
 * once its position reached its end (the position moves past aborted records and markers, so a
 * range ending in them ends too) or a record at or past its end arrived; such records are kept
 * for the next batch, which takes them if it starts where this one ended.
 */
final class SlotPartitionReader implements PartitionReader<InternalRow> {
    private static final Logger LOG = LoggerFactory.getLogger(SlotPartitionReader.class);
    static final String CONSUMERS_CREATED = "consumersCreated";

    private final SlotInputPartition slot;
    private final SlotConsumers.Slot cached;
    private final boolean created;
    private final UnsafeProjection toUnsafe = UnsafeProjection.create(GroupedKafkaProvider.SCHEMA);
    private final UTF8String topic;
    private final Map<Integer, Integer> index = new HashMap<>();
    private final Set<Integer> open = new HashSet<>();
    private final ArrayDeque<ConsumerRecord<byte[], byte[]>> ready = new ArrayDeque<>();
    private boolean failed;
    private InternalRow current;

    SlotPartitionReader(SlotInputPartition slot) {
        this.slot = slot;
        this.topic = UTF8String.fromString(slot.topic());
        boolean[] made = new boolean[1];
        this.cached = SlotConsumers.borrow(slot, made);
        this.created = made[0];
        try {
            start();
        } catch (RuntimeException e) {
            failed = true;
            close();
            throw e;
        }
    }

    private void start() {
        cached.assign(slot.topic(), slot.partitions());
        List<TopicPartition> resume = new ArrayList<>();
        List<ConsumerRecord<byte[], byte[]>> kept = new ArrayList<>();
        for (int i = 0; i < slot.size(); i++) {
            int p = slot.partition(i);
            index.put(p, i);
            TopicPartition tp = new TopicPartition(slot.topic(), p);
            Long resumeAt = cached.resumeAt.remove(p);
            ArrayDeque<ConsumerRecord<byte[], byte[]>> ahead = cached.ahead.remove(p);
            if (resumeAt != null && resumeAt == slot.fromOffset(i)) {
                if (ahead != null) {  // fetched by the last batch past its end, which is this batch's start
                    kept.addAll(ahead);
                }
            } else {
                cached.consumer.seek(tp, slot.fromOffset(i));
            }
            resume.add(tp);
            open.add(p);
        }
        cached.consumer.resume(resume);
        kept.forEach(this::take);
        closeFinished();
    }

    /** A record of this batch goes to the output, one at or past its partition's end is kept for the next. */
    private void take(ConsumerRecord<byte[], byte[]> record) {
        int i = index.get(record.partition());
        if (record.offset() >= slot.untilOffset(i)) {
            cached.ahead.computeIfAbsent(record.partition(), k -> new ArrayDeque<>()).add(record);
        } else if (record.offset() >= slot.fromOffset(i)) {
            ready.add(record);
        }
    }

    /** Pause each partition that reached its end, so later polls fetch only the open ones. */
    private void closeFinished() {
        List<TopicPartition> done = new ArrayList<>();
        for (Iterator<Integer> it = open.iterator(); it.hasNext();) {
            int p = it.next();
            TopicPartition tp = new TopicPartition(slot.topic(), p);
            if (cached.ahead.containsKey(p) || cached.consumer.position(tp) >= slot.untilOffset(index.get(p))) {
                it.remove();
                done.add(tp);
            }
        }
        if (!done.isEmpty()) {
            cached.consumer.pause(done);
        }
    }

    /**
     * kafkaConsumer.pollTimeoutMs bounds each wait for records, as in Spark's source: the clock
     * starts when the task asks for a row that is not there yet and restarts whenever a poll moves
     * the slot on (records arrive, or read_committed moves a position past aborted records), so the
     * time the writer spends between rows never counts.
     */
    @Override
    public boolean next() {
        long waitingSince = System.currentTimeMillis();
        long positions = ready.isEmpty() && !open.isEmpty() ? positions() : 0L;
        while (ready.isEmpty() && !open.isEmpty()) {
            if (System.currentTimeMillis() - waitingSince > slot.pollTimeoutMs()) {
                failed = true;
                throw new IllegalStateException("slot " + slot.slot() + " of " + slot.topic() + " read nothing for"
                    + " kafkaConsumer.pollTimeoutMs = " + slot.pollTimeoutMs() + " ms short of the batch's end"
                    + " (partition:from:until) " + slot.ranges() + " (partitions still short of it: " + open + ")");
            }
            ConsumerRecords<byte[], byte[]> records;
            try {
                records = cached.consumer.poll(Duration.ofMillis(100));
            } catch (OffsetOutOfRangeException e) {
                skipDeleted(e);
                continue;
            } catch (KafkaException e) {
                failed = true;
                throw e;
            }
            for (ConsumerRecord<byte[], byte[]> record : records) {
                take(record);
            }
            closeFinished();
            long now = positions();
            if (!records.isEmpty() || now != positions) {
                waitingSince = System.currentTimeMillis();
                positions = now;
            }
        }
        ConsumerRecord<byte[], byte[]> record = ready.poll();
        if (record == null) {
            return false;
        }
        current = toUnsafe.apply(row(record));
        return true;
    }

    /** The sum of the slot's consumer positions: it grows whenever a poll moves any partition on. */
    private long positions() {
        long sum = 0;
        for (int i = 0; i < slot.size(); i++) {
            sum += cached.consumer.position(new TopicPartition(slot.topic(), slot.partition(i)));
        }
        return sum;
    }

    /**
     * Records deleted before they were read (retention, DeleteRecords): Spark's data loss, named by
     * partition, the offset the slot needed and the log start; with failOnDataLoss=false, read on
     * from the log start and say what was skipped.
     */
    private void skipDeleted(OffsetOutOfRangeException e) {
        Map<TopicPartition, Long> starts = cached.consumer.beginningOffsets(e.offsetOutOfRangePartitions().keySet());
        List<String> lost = new ArrayList<>();
        e.offsetOutOfRangePartitions().forEach((tp, needed) -> lost.add(tp + " needs offset " + needed
            + " but its log starts at " + starts.get(tp)));
        if (slot.failOnDataLoss()) {
            failed = true;
            throw new IllegalStateException("slot " + slot.slot() + ": " + String.join(", ", lost) + " (records deleted"
                + " before they were read). Some data may have been lost because they are not available in Kafka any"
                + " more; set the source option failOnDataLoss to false to read on from the log start", e);
        }
        LOG.warn("grouped source: {}: skipping to the log start (failOnDataLoss=false)", String.join(", ", lost));
        cached.consumer.seekToBeginning(e.offsetOutOfRangePartitions().keySet());
    }

    /** Spark's Kafka source's row with includeHeaders; headers are null when a record has none, as there. */
    private InternalRow row(ConsumerRecord<byte[], byte[]> r) {
        Header[] headers = r.headers().toArray();
        GenericArrayData headerRows = null;
        if (headers.length > 0) {
            Object[] rows = new Object[headers.length];
            for (int h = 0; h < headers.length; h++) {
                rows[h] = new GenericInternalRow(new Object[] {UTF8String.fromString(headers[h].key()),
                    headers[h].value()});
            }
            headerRows = new GenericArrayData(rows);
        }
        return new GenericInternalRow(new Object[] {r.key(), r.value(), topic, r.partition(), r.offset(),
            r.timestamp() * 1000L, r.timestampType().id, headerRows});
    }

    @Override
    public InternalRow get() {
        return current;
    }

    @Override
    public CustomTaskMetric[] currentMetricsValues() {
        return new CustomTaskMetric[] {new CustomTaskMetric() {
            @Override
            public String name() {
                return CONSUMERS_CREATED;
            }

            @Override
            public long value() {
                return created ? 1L : 0L;
            }
        }};
    }

    @Override
    public void close() {
        if (cached.closed) {
            return;
        }
        if (failed) {
            SlotConsumers.discard(slot, cached);
            return;
        }
        // The next batch may continue where this one ended only if this task read its whole range;
        // a task stopped half way (a limit, a kill) leaves no resume point, so the next one seeks.
        boolean finished = open.isEmpty() && ready.isEmpty();
        if (finished) {
            for (int i = 0; i < slot.size(); i++) {
                cached.resumeAt.put(slot.partition(i), slot.untilOffset(i));
            }
        } else {
            cached.resumeAt.clear();
            cached.ahead.clear();
        }
        SlotConsumers.release(cached);
    }
}
