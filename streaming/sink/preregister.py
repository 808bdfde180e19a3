"""`--pre-register-partitions` (KIP-609): register a transaction's partitions and group up front.

librdkafka registers partitions lazily (AddPartitionsToTxn as records for a new partition show
up) and the group only at send_offsets_to_transaction, and exposes no call to do either
earlier. kafka-python's transaction manager does: `maybe_add_partition_to_transaction(tp)`
queues a partition for AddPartitionsToTxn, and `send_offsets_to_transaction` sends
AddOffsetsToTxn and TxnOffsetCommit. With the option on, a task's transaction therefore runs on
a kafka-python producer that, right after begin_transaction,

  1. queues every partition of the output topic for the transaction, and the dead-letter
     partitions its poison records will go to (the records are processed before the transaction
     begins, so these are known, and picked with the partitioner the producer itself uses),
  2. sends the batch's offsets for the group (known before any record is read: they come from
     the query's offset log), which registers the group, and
  3. waits until the coordinator has acknowledged every partition,

and only then sends the first record. The broker sees AddPartitionsToTxn, AddOffsetsToTxn and
TxnOffsetCommit before the first Produce request of the transaction; the proof is a test that
reads kafka-python's debug log. This adapter gives the kafka-python producer the few methods of
confluent-kafka's Producer that the sink uses. One difference stays inside it: confluent-kafka
names the group of a transaction's offsets by the consumer's group metadata, kafka-python by the
group's id, so the adapter is built with its group id and takes (and ignores) the metadata the
callers hand every producer alike.
"""

from __future__ import annotations

import logging
import threading
import time

from conf.client_config import kafka_python_options

_TM_LOGGER = "kafka.producer.transaction_manager"


class _ResponseCounter(logging.Handler):
    """Counts transactional responses (one per coordinator round trip) in kafka-python's log."""

    def __init__(self):
        super().__init__(logging.DEBUG)
        self.count = 0
        self._lock = threading.Lock()

    def emit(self, record: logging.LogRecord) -> None:
        if record.getMessage().startswith("Received transactional response"):
            with self._lock:
                self.count += 1


class PreRegisteringProducer:
    """A kafka-python transactional producer with confluent-kafka's method names, committing offsets for one group."""

    def __init__(self, config: dict, transactional_id: str, group_id: str):
        from kafka import KafkaProducer

        self.group_id = group_id  # kafka-python's name for the group confluent-kafka's group metadata stands for

        extra = {"linger_ms": int(config.get("linger.ms", 5))}
        self._producer = KafkaProducer(bootstrap_servers=config["bootstrap.servers"].split(","),
                                       transactional_id=transactional_id, acks="all", **extra,
                                       **kafka_python_options(config))
        self._offsets_sent = False
        self._counter = _ResponseCounter()
        logger = logging.getLogger(_TM_LOGGER)
        logger.addHandler(self._counter)
        if logger.level == logging.NOTSET or logger.level > logging.DEBUG:
            logger.setLevel(logging.DEBUG)
        self._closed = False

    # confluent-kafka's names ---------------------------------------------------------------

    def init_transactions(self, timeout: float | None = None) -> None:
        """Fence older producers of this transactional id."""
        self._producer.init_transactions()

    def begin_transaction(self) -> None:
        """Open a transaction."""
        self._offsets_sent = False
        self._producer.begin_transaction()

    def produce(self, topic, value=None, key=None, headers=None, partition=None) -> None:
        """Send one record (to `partition`, or where the partitioner puts its key)."""
        self._producer.send(topic, value=value, key=key, headers=headers, partition=partition)

    def poll(self, timeout: float = 0) -> int:
        """Nothing to serve: kafka-python completes futures on its own thread."""
        return 0

    def flush(self, timeout: float | None = None) -> int:
        """Wait for every record sent so far."""
        if not self._closed:
            self._producer.flush(timeout=timeout)
        return 0

    def send_offsets_to_transaction(self, offsets, _group_metadata, timeout: float | None = None) -> None:
        """Commit offsets for this producer's group (a no-op when pre-registration already sent them)."""
        if not self._offsets_sent:
            self._send_offsets({(tp.topic, tp.partition): tp.offset for tp in offsets},
                               (offsets[0].metadata or "") if offsets else "")

    def commit_transaction(self, timeout: float | None = None) -> None:
        """Commit."""
        self._producer.commit_transaction()

    def abort_transaction(self, timeout: float | None = None) -> None:
        """Abort."""
        self._producer.abort_transaction()

    def purge(self) -> None:
        """Drop the client (the next producer's init aborts any open transaction)."""
        self._closed = True
        self._producer.close(timeout=0)
        logging.getLogger(_TM_LOGGER).removeHandler(self._counter)

    # pre-registration ----------------------------------------------------------------------

    def _send_offsets(self, offsets: dict[tuple[str, int], int], metadata: str) -> None:
        from kafka.structs import OffsetAndMetadata, TopicPartition

        # The same bytes as confluent-kafka's commits, C terminator included: librdkafka hands back a
        # committed offset's metadata without one unless it was committed with one (sink_group._scope_in).
        self._producer.send_offsets_to_transaction(
            {TopicPartition(t, p): OffsetAndMetadata(end, metadata + "\0", -1) for (t, p), end in offsets.items()},
            self.group_id)
        self._offsets_sent = True

    def pre_register(self, output_topic: str, offsets: dict[tuple[str, int], int], metadata: str,
                     dead_letter: tuple[str, list] = ("", []), timeout_s: float = 60.0,
                     input_partitioned: bool = False) -> int:
        """Register the output partitions, the dead-letter partitions of `dead_letter`'s keys and the
        producer's group (its offsets carry `metadata`); return the coordinator round trips taken.

        Keyed output may land in every output partition; `input_partitioned` output lands in the
        partitions numbered as `offsets`' input partitions, and `dead_letter` then names partitions.
        """
        from kafka.structs import TopicPartition

        before = self._counter.count
        manager = self._producer._transaction_manager  # kafka-python's own API for this
        dead_letter_topic, dead_keys = dead_letter
        if input_partitioned:
            partitions = [TopicPartition(output_topic, p) for _, p in sorted(offsets)]
            partitions += [TopicPartition(dead_letter_topic, p) for p in sorted(set(dead_keys))]
            dead_keys = []
        else:
            partitions = [TopicPartition(output_topic, p) for p in sorted(self._producer.partitions_for(output_topic))]
        if dead_keys:
            self._producer.partitions_for(dead_letter_topic)  # waits for the topic's metadata
            # The producer's own partitioner (the records are sent without serializers), so these
            # are the partitions send() will pick.
            pick = self._producer.config["partitioner"].partition
            partitions += [TopicPartition(dead_letter_topic, p) for p in sorted(
                {pick(dead_letter_topic, key, key, None, None, self._producer._metadata) for key in dead_keys})]
        with manager._lock:  # re-entrant; queue them all before the sender looks: one AddPartitionsToTxn
            for tp in partitions:
                manager.maybe_add_partition_to_transaction(tp)
        self._producer._sender.wakeup()
        self._send_offsets(offsets, metadata)  # blocks until AddOffsetsToTxn + TxnOffsetCommit are done
        deadline = time.monotonic() + timeout_s
        while not all(manager.is_partition_added(tp) for tp in partitions):
            if time.monotonic() > deadline:
                raise TimeoutError(f"partitions of {output_topic} (and dead letters) not registered in {timeout_s} s")
            time.sleep(0.0005)
        return self._counter.count - before
