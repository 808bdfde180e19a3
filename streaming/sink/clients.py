"""The transactional sink's Kafka clients on one Python worker: Steps 1, 2 and 5 of `streaming/sink/task.py`.

Step 1's producer cache (a new producer's `init_transactions` fences its predecessors), Step 2's
readers of the group's committed offsets and of the owner record, a `send_offsets_to_transaction` bounded where
librdkafka ignores its timeout, and Step 5's classification of a failure. Spark reuses Python
workers across tasks, so clients live on between tasks and batches.
"""

from __future__ import annotations

import os
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

from conf.client_config import connection_of
from conf.client_log import CLIENT_LOG
from conf.failures import AuthorizationFailure, authorization_error_name, authorization_failure
from conf.watermarks import END_FETCH_WAIT_MS
from streaming.group import CommittedOffset, read_committed_offsets
from streaming.owner import Owner, owner_group, read_owner
from streaming.task_plan import TaskPlan

# Per Python worker: Spark reuses workers across tasks, so producers and consumers live on. They
# are keyed by their whole client configuration too: a process that runs sinks against several
# clusters in turn (a sweep over broker counts) must never reuse a client of a stopped one.
_PRODUCERS: dict[tuple, object] = {}
_OFFSET_READERS: dict[tuple, object] = {}
# A producer left idle this long is closed. Spark runs a partition's (or slot's) task on whichever
# Python worker is free, so a worker keeps copies that another worker's init has since fenced, and
# a finished query's producers stay behind in a session that runs several: a bench arm at 256
# partitions left 900 idle producers, each with its librdkafka threads, beside the next arm. An
# evicted producer that is wanted again costs one init_transactions.
PRODUCER_IDLE_S = 60.0
# At most this many producers per process, the least recently used closed first. Each
# confluent-kafka client holds one of the process's 1,024 thread-local keys (glibc's
# PTHREAD_KEYS_MAX) until it is gone: partition scope at 1,000 partitions left the bench driver
# with a thousand of the keeper's producers, and its next client failed with "Failed to
# initialize thread local storage". A worker holds one producer per partition (or slot) it ran:
# the cap leaves a quarter of the keys to other clients and still holds the 500 partitions each
# of two workers runs at 1,000 (at 256, partition scope there created every producer anew each batch).
MAX_CACHED_PRODUCERS = 768
_LAST_USED: dict[tuple, float] = {}
# Each producer's writer token: which init of its transactional id it is. The driver learns from the
# tasks' rows which token inited each id last and ships that in the plan, so a worker whose copy a
# later init (another worker's, or the driver's fence) has fenced drops it before the attempt
# instead of failing one: Spark runs a slot's task on whichever Python worker is free.
_WRITERS: dict[tuple, str] = {}
FENCED_BY_DRIVER = "driver"  # the token of an id the driver fenced: no task's copy is current
_clock = time.monotonic


def kafka_module():
    import confluent_kafka

    return confluent_kafka


def producer_key(plan: TaskPlan, txn_id: str) -> tuple:
    """The cache key of T(p)'s producer: the id and everything the client is built from."""
    return txn_id, tuple(sorted(plan.producer_config.items())), plan.sink_client


def has_producer(key: tuple) -> bool:
    """Whether this worker holds a producer for the key, whose init may predate a later producer of its id."""
    return key in _PRODUCERS


def cached_producer(plan: TaskPlan, key: tuple, timings: dict[str, float]):
    """Step 1: the cached producer for T(p), or a new one that has fenced its predecessors."""
    txn_id = key[0]
    latest = plan.writers.get(txn_id)
    if latest is not None and key in _PRODUCERS and latest != _WRITERS.get(key):
        drop_producer(key)  # a later init fenced it: a new producer now costs no failed attempt
    producer = _PRODUCERS.get(key)
    if producer is None:
        started = time.perf_counter()
        if plan.sink_client == "kafka-python":
            from streaming.sink.preregister import PreRegisteringProducer

            producer = PreRegisteringProducer(plan.producer_config, txn_id, plan.app_id)
        else:
            producer = kafka_module().Producer({**plan.producer_config, "transactional.id": txn_id}, logger=CLIENT_LOG)
            _await_learned_broker(producer, plan.output_topic)
        producer.init_transactions(60)
        timings["init"] += time.perf_counter() - started
        _PRODUCERS[key] = producer
        _WRITERS[key] = f"{os.getpid()}.{uuid.uuid4().hex[:8]}"
    now = _clock()
    _LAST_USED.pop(key, None)
    _LAST_USED[key] = now  # the dict stays in order of last use, the least recent first
    for idle in [other for other, used in _LAST_USED.items() if now - used > PRODUCER_IDLE_S]:
        drop_producer(idle)
    for oldest in list(_LAST_USED)[:max(0, len(_LAST_USED) - MAX_CACHED_PRODUCERS)]:
        drop_producer(oldest)
    return producer


def writer_of(key: tuple) -> str:
    """The writer token of this worker's producer for the key ('' without one)."""
    return _WRITERS.get(key, "")


def _await_learned_broker(producer, topic: str) -> None:
    """Return once a new client is connected to a broker named by the cluster's metadata.

    librdkafka 2.16 retires its bootstrap connection as soon as the first metadata arrives, and
    connects to the brokers that metadata names only after a pause (reconnect.backoff.ms / 2). A
    transactional producer whose PID state machine runs in that gap finds no broker up and waits
    for its 500 ms retry timer: a new producer's init_transactions took 505 ms instead of 55 ms in
    16 of 80 measured inits, and every partition that moves between Python workers needs one. The
    first metadata request is answered on the bootstrap connection; the second can only be
    answered by a broker from that metadata, which is what init_transactions needs (0 of 80 slow).
    """
    for _ in range(2):
        producer.list_topics(topic, timeout=30)


# How many producers a fence inits at once: a driver that must fence T(p) of 1,000 partitions (a
# change of scope) would otherwise wait for 1,000 inits one after another.
FENCE_THREADS = 16


def fence(plan: TaskPlan, txn_ids: list[str]) -> None:
    """init_transactions on each of these ids, several at once: each fences every older producer of its id and aborts
    its open transaction. This process's own producers of those ids are dropped first, being fenced too."""
    for txn_id in txn_ids:
        drop_producer(producer_key(plan, txn_id))

    def init(txn_id: str) -> None:
        kafka = kafka_module()
        producer = kafka.Producer({**plan.producer_config, "transactional.id": txn_id}, logger=CLIENT_LOG)
        _await_learned_broker(producer, plan.output_topic)
        try:
            producer.init_transactions(60)
        except kafka.KafkaException as exc:  # a missing ACL names the id; anything else is the caller's to judge
            raise authorization_failure(exc.args[0], txn_id) or exc from None

    with ThreadPoolExecutor(FENCE_THREADS, thread_name_prefix="eosbench-fence") as pool:
        list(pool.map(init, txn_ids))


def drop_producer(key: tuple) -> None:
    """Forget a producer; the next one's init_transactions aborts whatever it left open."""
    producer = _PRODUCERS.pop(key, None)
    _LAST_USED.pop(key, None)
    _WRITERS.pop(key, None)
    if producer is not None:
        try:
            producer.purge()
            producer.flush(0)
        except Exception:  # a fenced or fatal producer refuses even this; it is gone either way
            pass


def abort_or_drop(key: tuple) -> None:
    """Abort the producer's transaction and keep the producer; if it cannot abort, forget it (its successor's init aborts)."""
    try:
        _PRODUCERS[key].abort_transaction(60)
    except Exception:
        drop_producer(key)


def abort_and_drop(key: tuple) -> None:
    """Abort the producer's transaction if it can, so that nothing stays open on the outputs, then forget it."""
    producer = _PRODUCERS.get(key)
    if producer is not None:
        try:
            producer.abort_transaction(30)
        except Exception:  # not in a transaction, or refused: the next init of this id aborts it
            pass
    drop_producer(key)


def classify(exc: Exception) -> str | None:
    """Step 5's cases: 'denied' (an ACL is missing), 'fenced' (or fatal), 'abortable', 'indefinite', or None for not Kafka's."""
    if isinstance(exc, AuthorizationFailure) or authorization_error_name(exc):
        return "denied"
    kafka = kafka_module()
    if isinstance(exc, kafka.KafkaException):
        error = exc.args[0]
        # A fatal producer's produce() raises _FATAL without the fatal flag: in partition scope that
        # is a cached producer fenced by the same partition's producer on another Python worker.
        if error.fatal() or error.code() in (kafka.KafkaError._FATAL, kafka.KafkaError._FENCED,
                                             kafka.KafkaError.PRODUCER_FENCED, kafka.KafkaError.INVALID_PRODUCER_EPOCH):
            return "fenced"
        return "abortable" if error.txn_requires_abort() else "indefinite"
    try:  # the pre-registering producer is kafka-python's
        import kafka.errors as kafka_python_errors
    except ImportError:
        return None
    if isinstance(exc, (kafka_python_errors.ProducerFencedError, kafka_python_errors.InvalidProducerEpochError)):
        return "fenced"
    if isinstance(exc, kafka_python_errors.KafkaError):
        return "indefinite"
    return None


def group_offsets_of(plan: TaskPlan, topic: str, partitions: list[int],
                     held_s: float | None = None) -> dict[int, CommittedOffset]:
    """Step 2: the group's committed offsets of these partitions (stable), with the scope that wrote them.

    With `held_s`, offsets not yet stable after that long (an open transaction holds them) raise OffsetsHeldOpen.
    """
    cluster = connection_of(plan.producer_config)
    reader = _OFFSET_READERS.get((plan.app_id, cluster))
    if reader is None:
        reader = kafka_module().Consumer(cluster.librdkafka(**{
            "group.id": plan.app_id, "isolation.level": "read_committed", "enable.auto.commit": False,
        }), logger=CLIENT_LOG)
        _OFFSET_READERS[(plan.app_id, cluster)] = reader
    return read_committed_offsets(reader, topic, partitions, plan.app_id, held_s=held_s)


def owner_of(plan: TaskPlan) -> Owner | None:
    """The pipeline's owner record, read by this worker's reader of group `<app-id>.owner`."""
    cluster = connection_of(plan.producer_config)
    reader = _OFFSET_READERS.get((owner_group(plan.app_id), cluster))
    if reader is None:
        reader = kafka_module().Consumer(cluster.librdkafka(**{
            "group.id": owner_group(plan.app_id), "enable.auto.commit": False}), logger=CLIENT_LOG)
        _OFFSET_READERS[(owner_group(plan.app_id), cluster)] = reader
    return read_owner(reader, plan.dead_letter_topic, plan.app_id)


def committed_record_between(plan: TaskPlan, topic: str, partition: int, low: int, high: int,
                             timeout_s: float = 30.0) -> int | None:
    """The offset of the first committed input record in [low, high), or None if that range holds only aborted records
    and transaction markers (read read_committed, which skips them)."""
    kafka = kafka_module()
    reader = kafka.Consumer(connection_of(plan.producer_config).librdkafka(**{
        "group.id": f"{plan.app_id}.gap-check", "isolation.level": "read_committed", "enable.auto.commit": False,
        "enable.partition.eof": True, "fetch.wait.max.ms": END_FETCH_WAIT_MS}), logger=CLIENT_LOG)
    try:
        reader.assign([kafka.TopicPartition(topic, partition, low)])
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            message = reader.poll(0.5)
            if message is None:
                continue
            error = message.error()
            if error is not None:
                if error.code() == kafka.KafkaError._PARTITION_EOF:
                    return None
                raise kafka.KafkaException(error)
            return message.offset() if message.offset() < high else None
        raise kafka.KafkaException(kafka.KafkaError(
            kafka.KafkaError._TIMED_OUT, f"{topic}[{partition}]: no record or end found after offset {low} in {timeout_s:g} s"))
    finally:
        reader.close()


# librdkafka can block in send_offsets_to_transaction() past its timeout once the group
# coordinator's broker is killed (confluentinc/librdkafka#5456 and #5511, open in 2.16; seen in the
# three-broker soak). The call runs on a helper thread; a producer still blocked at the deadline is
# abandoned (kept referenced: destroying it under a blocked call is unsafe) and Step 5 initialises
# a new producer for T(p), which fences it and aborts its transaction.
SEND_OFFSETS_TIMEOUT_S = 30.0
_ABANDONED: list[tuple[object, threading.Thread]] = []


def send_offsets(producer, key: tuple, offsets: list, group_metadata) -> None:
    """send_offsets_to_transaction, bounded even where librdkafka ignores the timeout."""
    failure: list[BaseException] = []

    def call() -> None:
        try:
            producer.send_offsets_to_transaction(offsets, group_metadata, SEND_OFFSETS_TIMEOUT_S)
        except BaseException as exc:  # handed to the task's thread, which classifies it (Step 5)
            failure.append(exc)
    thread = threading.Thread(target=call, name=f"send-offsets {key[0]}", daemon=True)
    thread.start()
    thread.join(SEND_OFFSETS_TIMEOUT_S + 5)
    _ABANDONED[:] = [(old, blocked) for old, blocked in _ABANDONED if blocked.is_alive()]
    if thread.is_alive():
        _PRODUCERS.pop(key, None)
        _ABANDONED.append((producer, thread))
        kafka = kafka_module()
        raise kafka.KafkaException(kafka.KafkaError(
            kafka.KafkaError._TIMED_OUT, f"send_offsets_to_transaction still blocked after {SEND_OFFSETS_TIMEOUT_S + 5:g} s"))
    if failure:
        raise failure[0]
