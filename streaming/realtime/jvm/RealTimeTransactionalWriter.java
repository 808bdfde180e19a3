package eosbench.spark;

import java.nio.charset.StandardCharsets;
import java.security.SecureRandom;
import java.sql.Timestamp;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.ReentrantLock;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import org.apache.kafka.clients.consumer.ConsumerGroupMetadata;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.AuthorizationException;
import org.apache.kafka.common.errors.InterruptException;
import org.apache.kafka.common.errors.TimeoutException;
import org.apache.kafka.common.header.internals.RecordHeaders;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.apache.spark.sql.ForeachWriter;
import org.apache.spark.sql.Row;
import org.apache.spark.util.AccumulatorV2;

/**
 * The transactional sink of real-time mode: one task per input partition p, one transaction per
 * commit interval, each committing the group offset of p with the records it wrote.
 *
 * <p>Per task (streaming/realtime/writer.py has the whole argument):
 * <ol>
 *   <li>At p's first record, take the producer of T(p) = {@code <app-id>.<topic>.<p>}; a new one
 *       calls initTransactions, which fences every older producer of T(p) and aborts its open
 *       transaction (or completes one whose commit was already decided), then stops the writer
 *       unless the pipeline's owner record names its driver run (streaming/owner.py).
 *   <li>Read c, the group's committed offset of p; with no older producer left, it is stable.
 *   <li>Drop every record below c: Spark replays an epoch from its start after a failure, and
 *       those records are already committed.
 *   <li>Keep the rest; once the oldest kept record has waited the commit interval (checked on
 *       every record and by a timer), and at the epoch's close: begin, produce them, send the
 *       offset {p: last + 1}, commit.
 *   <li>On any Kafka failure, drop the producer and go back to step 1 with the kept records: the
 *       new producer settles the failed transaction, and c then says whether its commit landed.
 * </ol>
 * Rows reach this writer without passing through Python: PySpark's {@code foreach} hands rows to
 * its Python worker in pickles that grow until they hold a megabyte, which in real-time mode holds
 * a row back for up to the rest of the epoch.
 */
public final class RealTimeTransactionalWriter extends ForeachWriter<Row> {
    private static final long serialVersionUID = 1L;
    private static final String SCOPE_TAG = "eosbench txn-scope=partition;partitions=%d;token=%016x;%s";
    // The run an owner record names (streaming/owner.py), read from the record's start.
    private static final String OWNER_GROUP_SUFFIX = ".owner";
    private static final Pattern OWNER_RUN = Pattern.compile("eosbench owner run=([0-9a-f]{16});");
    private static final long TIMER_PERIOD_MS = 5;
    private static final SecureRandom RANDOM = new SecureRandom();
    // How long c may stay unstable before a reused producer gives way to a new one (settle), and the
    // read's wait otherwise: a transaction of T(p) still settling ends well within it.
    private static final Duration HELD_OPEN = Duration.ofSeconds(1);
    private static final Duration COMMITTED_WAIT = Duration.ofSeconds(60);
    // Producers and offset readers outlive a task (an epoch), so the next epoch's task on this executor
    // skips initTransactions; a task takes one out and puts it back when it closes cleanly, so two
    // tasks of one T(p) on one executor never share one. They are keyed by their whole client
    // configuration as well as their id: a JVM that runs writers against several clusters or
    // settings in turn must never hand one a client of another.
    private static final Map<String, KafkaProducer<byte[], byte[]>> IDLE_PRODUCERS = new ConcurrentHashMap<>();
    private static final Map<String, KafkaConsumer<byte[], byte[]>> IDLE_READERS = new ConcurrentHashMap<>();

    private final HashMap<String, String> clientProps;
    private final HashMap<String, String> producerProps;
    private final String appId;
    private final String run;
    private final String outputTopic;
    private final String deadLetterTopic;
    private final String process;
    private final boolean inputPartitioned;
    private final long commitIntervalMs;
    private final int inputPartitions;
    private final int maxRetries;
    private final Counters counters;
    private final LatencyHistogram latency;

    private transient ReentrantLock lock;
    private transient ScheduledExecutorService timer;
    private transient volatile Throwable timerFailure;
    private transient long epoch;
    private transient String topic;
    private transient int partition;
    private transient TopicPartition inputPartition;
    private transient KafkaProducer<byte[], byte[]> producer;
    private transient KafkaConsumer<byte[], byte[]> reader;
    private transient KafkaConsumer<byte[], byte[]> ownerReader;
    private transient long committed;
    private transient List<Kept> kept;
    private transient long keptSinceMs;

    /** One record kept for the open transaction. */
    private record Kept(byte[] key, byte[] value, long offset, long timestampMs) {}

    /** The writer's shared settings; `counters` and `latency` are accumulators the driver registered. */
    public RealTimeTransactionalWriter(Map<String, String> clientProps, Map<String, String> producerProps, String appId,
                                       String run, String outputTopic, String deadLetterTopic, String process,
                                       boolean inputPartitioned, long commitIntervalMs, int inputPartitions,
                                       int maxRetries, Counters counters, LatencyHistogram latency) {
        this.clientProps = new HashMap<>(clientProps);
        this.producerProps = new HashMap<>(producerProps);
        this.appId = appId;
        this.run = run;
        this.outputTopic = outputTopic;
        this.deadLetterTopic = deadLetterTopic;
        this.process = process;
        this.inputPartitioned = inputPartitioned;
        this.commitIntervalMs = commitIntervalMs;
        this.inputPartitions = inputPartitions;
        this.maxRetries = maxRetries;
        this.counters = counters;
        this.latency = latency;
    }

    @Override
    public boolean open(long partitionId, long epochId) {
        lock = new ReentrantLock();
        epoch = epochId;
        kept = new ArrayList<>();
        timer = Executors.newSingleThreadScheduledExecutor(runnable -> {
            Thread thread = new Thread(runnable, "eosbench-realtime-commit");
            thread.setDaemon(true);
            return thread;
        });
        timer.scheduleAtFixedRate(this::commitIfDue, TIMER_PERIOD_MS, TIMER_PERIOD_MS, TimeUnit.MILLISECONDS);
        return true;
    }

    @Override
    public void process(Row row) {
        lock.lock();
        try {
            rethrowTimerFailure();
            String rowTopic = row.getAs("topic");
            int rowPartition = row.<Integer>getAs("partition");
            if (topic == null) {
                topic = rowTopic;
                partition = rowPartition;
                inputPartition = new TopicPartition(topic, partition);
                try {
                    settle();
                } catch (InterruptException killed) {
                    // Without c this row cannot be kept or dropped: fail the task rather than lose it.
                    discardProducer();
                    Thread.currentThread().interrupt();
                    throw killed;
                }
            } else if (rowPartition != partition || !rowTopic.equals(topic)) {
                throw new IllegalStateException("eosbench realtime sink: one task received records of " + topic + "["
                        + partition + "] and " + rowTopic + "[" + rowPartition + "]; real-time mode needs one task"
                        + " per Kafka partition (no minPartitions, no shuffle)");
            }
            long offset = row.<Long>getAs("offset");
            if (offset < committed) {
                counters.add(Counters.SKIPPED, 1);
                return;
            }
            if (kept.isEmpty()) {
                keptSinceMs = System.currentTimeMillis();
            }
            kept.add(new Kept(row.getAs("key"), row.getAs("value"), offset, row.<Timestamp>getAs("timestamp").getTime()));
            if (System.currentTimeMillis() - keptSinceMs >= commitIntervalMs) {
                commitKept();
            }
        } finally {
            lock.unlock();
        }
    }

    @Override
    public void close(Throwable error) {
        timer.shutdownNow();
        lock.lock();
        try {
            if (error == null && timerFailure == null) {
                commitKept();
                if (!kept.isEmpty()) {
                    // An interrupt stopped the last commit: the epoch must not end as if its rows were written.
                    discardProducer();
                    throw new IllegalStateException("eosbench realtime sink: " + transactionalId() + ": " + kept.size()
                            + " rows of epoch " + epoch + " were not committed (the task was interrupted); the epoch"
                            + " is run again");
                }
                giveBack();
            } else {
                discardProducer();
            }
        } finally {
            lock.unlock();
        }
        rethrowTimerFailure();
    }

    private void commitIfDue() {
        if (!lock.tryLock()) {
            return;  // the task's own thread is at work; it checks the interval itself
        }
        try {
            if (timerFailure == null && !kept.isEmpty() && System.currentTimeMillis() - keptSinceMs >= commitIntervalMs) {
                commitKept();
            }
        } catch (Throwable failure) {
            timerFailure = failure;
        } finally {
            lock.unlock();
        }
    }

    private void rethrowTimerFailure() {
        Throwable failure = timerFailure;
        if (failure instanceof RuntimeException runtime) {
            throw runtime;
        }
        if (failure != null) {
            throw new IllegalStateException(failure);
        }
    }

    /**
     * Steps 1-3: a producer of T(p) that fenced every older one, then c, then what is left to write.
     *
     * <p>An idle producer fenced nothing: another executor may hold a newer producer of T(p) whose
     * failed attempt left a transaction open with p's offset in it, and c is unstable until that
     * transaction ends. So a reused producer gives the read {@link #HELD_OPEN} only; offsets still
     * held open then get a new producer at once, whose initTransactions fences that attempt and
     * aborts its transaction, and the read again, with the usual wait. Without it the read waited
     * out its 60 s before the producer's next call found itself fenced (the Python sink's Step 2
     * does the same, streaming/sink/task.py).
     */
    private void settle() {
        boolean reused = false;
        if (producer == null) {
            producer = IDLE_PRODUCERS.remove(producerKey());
            reused = producer != null;
            if (producer == null) {
                producer = newProducer();
            }
        }
        try {
            committed = readCommitted(reused ? HELD_OPEN : COMMITTED_WAIT);
        } catch (TimeoutException heldOpen) {
            if (!reused) {
                throw heldOpen;
            }
            discardProducer();
            producer = newProducer();
            committed = readCommitted(COMMITTED_WAIT);
        }
        kept.removeIf(record -> record.offset() < committed);
    }

    /** A new producer of T(p), whose init fenced every older one, once the owner record names this writer's run. */
    private KafkaProducer<byte[], byte[]> newProducer() {
        Map<String, Object> props = new HashMap<>(clientProps);
        props.putAll(producerProps);
        props.put("transactional.id", transactionalId());
        props.put("enable.idempotence", "true");
        props.put("key.serializer", ByteArraySerializer.class.getName());
        props.put("value.serializer", ByteArraySerializer.class.getName());
        KafkaProducer<byte[], byte[]> created = new KafkaProducer<>(props);
        created.initTransactions();
        counters.add(Counters.PRODUCERS, 1);
        try {
            checkOwner();
        } catch (RuntimeException refused) {
            created.close(Duration.ZERO);
            throw refused;
        }
        return created;
    }

    /**
     * Stop unless the pipeline's owner record names this writer's run: a writer of an older driver run whose
     * producer was made after the new run's claim fenced the ids stops here (streaming/owner.py).
     */
    private void checkOwner() {
        if (run.isEmpty()) {
            return;  // a writer built without a driver's claim (a test's)
        }
        if (ownerReader == null) {
            ownerReader = IDLE_READERS.remove(readerKey() + OWNER_GROUP_SUFFIX);
        }
        if (ownerReader == null) {
            ownerReader = newReader(appId + OWNER_GROUP_SUFFIX);
        }
        TopicPartition record = new TopicPartition(deadLetterTopic, 0);
        OffsetAndMetadata found = ownerReader.committed(Set.of(record), COMMITTED_WAIT).get(record);
        Matcher owner = OWNER_RUN.matcher(found == null || found.metadata() == null ? "" : found.metadata());
        if (!owner.lookingAt() || !owner.group(1).equals(run)) {
            throw new IllegalStateException("the owner record of pipeline '" + appId + "' (group '" + appId
                    + OWNER_GROUP_SUFFIX + "') " + (owner.lookingAt() ? "names run " + owner.group(1) : "names no run")
                    + ", not this writer's run " + run + ": a newer driver has claimed the pipeline, so this writer"
                    + " stops without committing");
        }
    }

    private KafkaConsumer<byte[], byte[]> newReader(String group) {
        Map<String, Object> props = new HashMap<>(clientProps);
        props.put("group.id", group);
        props.put("enable.auto.commit", "false");
        props.put("isolation.level", "read_committed");
        props.put("key.deserializer", ByteArrayDeserializer.class.getName());
        props.put("value.deserializer", ByteArrayDeserializer.class.getName());
        return new KafkaConsumer<>(props);
    }

    private long readCommitted(Duration wait) {
        if (reader == null) {
            reader = IDLE_READERS.remove(readerKey());
        }
        if (reader == null) {
            reader = newReader(appId);
        }
        OffsetAndMetadata found = reader.committed(Set.of(inputPartition), wait).get(inputPartition);
        return found == null ? -1 : found.offset();
    }

    /** Step 4, retried through step 5. */
    private void commitKept() {
        for (int attempt = 0; !kept.isEmpty(); attempt++) {
            try {
                settle();
                if (kept.isEmpty()) {
                    return;  // the failed attempt's commit had landed
                }
                commitOnce();
                return;
            } catch (InterruptException killed) {
                // The task is being killed (a stopped query) or the timer stopped: nothing more commits
                // here, and whatever did not is read again by the next run. Spark sees the interrupt itself.
                discardProducer();
                Thread.currentThread().interrupt();
                return;
            } catch (AuthorizationException denied) {  // no retry can grant an ACL
                discardProducer();
                throw denied;
            } catch (KafkaException failed) {
                counters.add(Counters.RETRIES, 1);
                discardProducer();
                if (attempt >= maxRetries) {
                    throw new IllegalStateException("eosbench realtime sink: " + transactionalId() + ": no commit after "
                            + (maxRetries + 1) + " attempts: " + failed, failed);
                }
            }
        }
    }

    private void commitOnce() {
        String identity = appId + ":" + partition + ":" + epoch + ":" + String.format("%015x", RANDOM.nextLong() >>> 4);
        byte[][] results = new byte[kept.size()][];
        boolean[] poison = new boolean[kept.size()];
        int dead = 0;
        for (int i = 0; i < kept.size(); i++) {
            Kept record = kept.get(i);
            poison[i] = RecordProcess.isPoison(record.value());
            results[i] = poison[i] ? record.value() : RecordProcess.transform(process, record.key(), record.value());
            dead += poison[i] ? 1 : 0;
        }
        byte[] outTxn = (identity + ":" + (kept.size() - dead)).getBytes(StandardCharsets.UTF_8);
        byte[] deadTxn = (identity + ":" + dead).getBytes(StandardCharsets.UTF_8);
        Integer where = inputPartitioned ? partition : null;
        producer.beginTransaction();
        for (int i = 0; i < kept.size(); i++) {
            Kept record = kept.get(i);
            RecordHeaders headers = new RecordHeaders();
            headers.add("eos.src", (topic + ":" + partition + ":" + record.offset()).getBytes(StandardCharsets.US_ASCII));
            headers.add("eos.in_ts", Long.toString(record.timestampMs()).getBytes(StandardCharsets.US_ASCII));
            headers.add("eos.txn", poison[i] ? deadTxn : outTxn);
            producer.send(new ProducerRecord<>(poison[i] ? deadLetterTopic : outputTopic, where, null, record.key(),
                    results[i], headers));
        }
        long last = kept.get(kept.size() - 1).offset();
        String tag = String.format(SCOPE_TAG, inputPartitions, RANDOM.nextLong(), run.isEmpty() ? "" : "run=" + run + ";");
        producer.sendOffsetsToTransaction(Map.of(inputPartition, new OffsetAndMetadata(last + 1, tag)),
                new ConsumerGroupMetadata(appId));
        producer.commitTransaction();
        long now = System.currentTimeMillis();
        for (Kept record : kept) {
            latency.addLatency(now - record.timestampMs());
        }
        counters.add(Counters.OUT, kept.size() - dead);
        counters.add(Counters.DEAD, dead);
        counters.add(Counters.TRANSACTIONS, 1);
        committed = last + 1;
        kept.clear();
    }

    private String transactionalId() {
        return appId + "." + topic + "." + partition;
    }

    /** The idle-producer cache key: T(p) and everything its producer is built from. */
    private String producerKey() {
        return transactionalId() + "\n" + new TreeMap<>(clientProps) + "\n" + new TreeMap<>(producerProps);
    }

    /** The idle-reader cache key: the group and everything its consumer is built from. */
    private String readerKey() {
        return appId + "\n" + new TreeMap<>(clientProps);
    }

    private void giveBack() {
        if (producer != null && IDLE_PRODUCERS.putIfAbsent(producerKey(), producer) != null) {
            producer.close(Duration.ZERO);
        }
        producer = null;
        if (reader != null && IDLE_READERS.putIfAbsent(readerKey(), reader) != null) {
            reader.close(Duration.ZERO);
        }
        reader = null;
        if (ownerReader != null && IDLE_READERS.putIfAbsent(readerKey() + OWNER_GROUP_SUFFIX, ownerReader) != null) {
            ownerReader.close(Duration.ZERO);
        }
        ownerReader = null;
    }

    private void discardProducer() {
        if (producer != null) {
            try {
                producer.close(Duration.ZERO);  // its open transaction is aborted by the next producer's init
            } catch (InterruptException killed) {
                // the task was killed (a stopped query): the close is cut short, the fence still holds
            }
            producer = null;
        }
    }

    // ------------------------------------------------------------------ what the driver reads back

    /** The writer's counts, one slot per kind; summed over tasks when each task (an epoch) ends. */
    public static final class Counters extends AccumulatorV2<long[], long[]> {
        private static final long serialVersionUID = 1L;
        public static final int OUT = 0, DEAD = 1, SKIPPED = 2, TRANSACTIONS = 3, RETRIES = 4, PRODUCERS = 5;
        private long[] counts = new long[6];

        void add(int kind, long count) {
            counts[kind] += count;
        }

        @Override public boolean isZero() { return Arrays.stream(counts).allMatch(count -> count == 0); }
        @Override public Counters copy() { Counters copy = new Counters(); copy.counts = counts.clone(); return copy; }
        @Override public void reset() { counts = new long[6]; }
        @Override public void add(long[] more) { for (int i = 0; i < counts.length; i++) { counts[i] += more[i]; } }
        @Override public void merge(AccumulatorV2<long[], long[]> other) { add(other.value()); }
        @Override public long[] value() { return counts; }
    }

    /** Commit-time latency (ms after the input record's timestamp) in streaming/stats.py's buckets. */
    public static final class LatencyHistogram extends AccumulatorV2<long[], long[]> {
        private static final long serialVersionUID = 1L;
        private final double[] bounds;
        private long[] counts;

        /** `bounds` are LATENCY_BOUNDS_MS; bucket i counts latencies in (bounds[i-1], bounds[i]]. */
        public LatencyHistogram(double[] bounds) {
            this.bounds = bounds.clone();
            this.counts = new long[bounds.length + 1];
        }

        void addLatency(double ms) {
            int index = Arrays.binarySearch(bounds, ms);
            counts[index >= 0 ? firstEqual(index, ms) : -index - 1]++;
        }

        private int firstEqual(int index, double ms) {
            while (index > 0 && bounds[index - 1] == ms) {
                index--;
            }
            return index;
        }

        @Override public boolean isZero() { return Arrays.stream(counts).allMatch(count -> count == 0); }
        @Override public LatencyHistogram copy() { LatencyHistogram copy = new LatencyHistogram(bounds); copy.counts = counts.clone(); return copy; }
        @Override public void reset() { counts = new long[bounds.length + 1]; }
        @Override public void add(long[] more) { for (int i = 0; i < counts.length; i++) { counts[i] += more[i]; } }
        @Override public void merge(AccumulatorV2<long[], long[]> other) { add(other.value()); }
        @Override public long[] value() { return counts; }
    }
}
