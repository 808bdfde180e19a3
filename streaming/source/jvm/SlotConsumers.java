package eosbench.spark;

import java.time.Duration;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The executor's slot consumers, one per (client settings, topic, slot), kept across batches so a
 * stream creates G consumers, not one per partition and batch. A task borrows its slot's consumer
 * and gives it back; a second task of the same slot at the same time (a retry beside a zombie)
 * gets a private consumer that it closes. Consumers idle longer than idleMs() are closed.
 */
final class SlotConsumers {
    private static final Logger LOG = LoggerFactory.getLogger(SlotConsumers.class);
    // As the sink closes idle producers after 60 s: a slot that moved to another executor, or a
    // query that stopped, gives its connections back.
    static final long IDLE_MS = 60_000L;
    /** A system property that replaces IDLE_MS, read at every sweep so that a test can shorten it in a running JVM. */
    static final String IDLE_MS_PROPERTY = "eosbench.grouped.consumerIdleMs";
    // Every second rather than a share of the idle time: a consumer closes within a second of it
    // whatever it is, even when a test shortens it after the sweeper was scheduled.
    private static final long SWEEP_MS = 1_000L;
    /** Consumers this executor JVM created (the grouped source's counter; the task metric reports each task's). */
    static final AtomicLong CREATED = new AtomicLong();
    private static final ConcurrentHashMap<String, Slot> CACHE = new ConcurrentHashMap<>();
    private static final ScheduledExecutorService SWEEPER = Executors.newSingleThreadScheduledExecutor(r -> {
        Thread thread = new Thread(r, "eosbench-slot-consumer-sweeper");
        thread.setDaemon(true);
        return thread;
    });

    static {
        SWEEPER.scheduleWithFixedDelay(SlotConsumers::closeIdle, SWEEP_MS, SWEEP_MS, TimeUnit.MILLISECONDS);
        Runtime.getRuntime().addShutdownHook(new Thread(() -> CACHE.keySet().forEach(SlotConsumers::evict),
            "eosbench-slot-consumer-close"));
    }

    private SlotConsumers() {
    }

    /**
     * One slot's consumer and what it read past the last batch's end. {@code resumeAt} holds, per
     * partition, the offset the consumer's stream (the records kept ahead, then its position)
     * continues from; it is set only when a task read its whole range, so any other start seeks.
     */
    static final class Slot {
        final KafkaConsumer<byte[], byte[]> consumer;
        final boolean pooled;
        final Map<Integer, ArrayDeque<ConsumerRecord<byte[], byte[]>>> ahead = new HashMap<>();
        final Map<Integer, Long> resumeAt = new HashMap<>();
        List<TopicPartition> assigned = List.of();
        boolean inUse;
        boolean closed;
        long lastUsed = System.currentTimeMillis();

        Slot(Map<String, Object> params, boolean pooled) {
            this.consumer = new KafkaConsumer<>(clientConfig(params));
            this.pooled = pooled;
            long created = CREATED.incrementAndGet();
            LOG.info("grouped source: consumer {} created in this executor ({})", created,
                pooled ? "kept for its slot" : "private to a second task of a busy slot");
        }

        /** Assign exactly these partitions; a changed set forgets what was read ahead, so every partition seeks. */
        void assign(String topic, int[] partitions) {
            List<TopicPartition> wanted = new ArrayList<>();
            for (int p : partitions) {
                wanted.add(new TopicPartition(topic, p));
            }
            if (!wanted.equals(assigned)) {
                consumer.assign(wanted);
                assigned = wanted;
                ahead.clear();
                resumeAt.clear();
            }
        }
    }

    /** The user's client settings with what the source owns: read_committed, no commits, no reset, bytes. */
    static Map<String, Object> clientConfig(Map<String, Object> params) {
        Map<String, Object> conf = new HashMap<>(params);
        conf.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
        conf.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        // A range below the log start is data loss, never a silent jump.
        conf.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "none");
        conf.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        conf.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        return conf;
    }

    /** Borrow the slot's consumer, or a private one if another task of the slot holds it now. */
    static Slot borrow(SlotInputPartition partition, boolean[] created) {
        String key = partition.consumerKey();
        while (true) {
            created[0] = false;
            Slot slot = CACHE.computeIfAbsent(key, k -> {
                created[0] = true;
                return new Slot(partition.params(), true);
            });
            synchronized (slot) {
                if (slot.closed) {  // the sweeper closed it between the lookup and here
                    continue;
                }
                if (!slot.inUse) {
                    slot.inUse = true;
                    return slot;
                }
            }
            created[0] = true;
            return new Slot(partition.params(), false);
        }
    }

    /** Give a borrowed consumer back (a private one is closed). */
    static void release(Slot slot) {
        if (!slot.pooled) {
            slot.closed = true;
            slot.consumer.close(Duration.ofSeconds(5));
            return;
        }
        synchronized (slot) {
            slot.inUse = false;
            slot.lastUsed = System.currentTimeMillis();
        }
    }

    /** Drop a slot's consumer after a failure that may have left it in an unknown state. */
    static void discard(SlotInputPartition partition, Slot slot) {
        if (slot.pooled) {
            CACHE.remove(partition.consumerKey(), slot);
        }
        synchronized (slot) {
            slot.closed = true;
        }
        slot.consumer.close(Duration.ofSeconds(5));
    }

    /** How long a kept consumer may stay unused: IDLE_MS unless the system property IDLE_MS_PROPERTY says otherwise. */
    static long idleMs() {
        return Long.getLong(IDLE_MS_PROPERTY, IDLE_MS);
    }

    private static void closeIdle() {
        long now = System.currentTimeMillis();
        long idleMs = idleMs();
        for (Map.Entry<String, Slot> entry : CACHE.entrySet()) {
            Slot slot = entry.getValue();
            synchronized (slot) {
                if (slot.inUse || now - slot.lastUsed < idleMs) {
                    continue;
                }
            }
            evict(entry.getKey());
        }
    }

    private static void evict(String key) {
        Slot slot = CACHE.get(key);
        if (slot == null) {
            return;
        }
        synchronized (slot) {
            if (slot.inUse && !Thread.currentThread().getName().equals("eosbench-slot-consumer-close")) {
                return;
            }
            CACHE.remove(key, slot);
            slot.closed = true;
        }
        try {
            slot.consumer.close(Duration.ofSeconds(5));
        } catch (RuntimeException e) {
            LOG.warn("grouped source: closing an idle consumer failed", e);
        }
    }
}
