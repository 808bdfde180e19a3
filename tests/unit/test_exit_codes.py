"""Exit codes as documented: 2 bad input, 3 the environment lacks something, 1 a check ran and failed.

The first table walks every kind of failure the command line can meet, ours and the libraries',
through the one mapping (`classify_failure`); the second runs the real command for the cases that
used to come out wrong, with no broker anywhere.
"""

from __future__ import annotations

from types import SimpleNamespace

import errno
import inspect
import pkgutil
import socket
import subprocess
import sys
from importlib import import_module
from pathlib import Path

import pytest
import yaml
from confluent_kafka import KafkaError, KafkaException
from pydantic import BaseModel, ValidationError, field_validator

from conf.failures import AuthorizationFailure, EnvironmentFailure, RunFailed, bind_failure, streaming_query_failure
from conf.settings import SettingsError
from eosbench.console.errors import (EXIT_BAD_INPUT, EXIT_CHECK_FAILED, EXIT_CODES, EXIT_ENVIRONMENT, BadInput,
                                     CheckFailed, EnvironmentProblem, classify_failure)
from producers.perf import ProduceFailed
from streaming.group import SinkPreconditionError
from streaming.task_plan import ExactlyOnceViolation
from tests.unit.test_cli_errors import assert_one_line_error, free_port, run_eosbench


class _Positive(BaseModel):
    value: int

    @field_validator("value")
    @classmethod
    def _positive(cls, value: int) -> int:
        if value < 1:
            raise ValueError("must be positive")
        return value


def _validation_error() -> ValidationError:
    try:
        _Positive(value=0)
    except ValidationError as exc:
        return exc
    raise AssertionError("unreachable")


def _yaml_error() -> yaml.YAMLError:
    try:
        yaml.safe_load("sizes: [1, 2\nbrokers: 1\n")
    except yaml.YAMLError as exc:
        return exc
    raise AssertionError("unreachable")


def _os_error(code: int) -> OSError:
    return OSError(code, "refused", None)


FAILURES = [
    # ours, by kind
    (BadInput("--partitions must be at least 1"), EXIT_BAD_INPUT),
    (SettingsError("--trigger must be available-now"), EXIT_BAD_INPUT),
    (SinkPreconditionError("--starting-offsets group: partition 2 holds records but has no group offset"), EXIT_BAD_INPUT),
    (_validation_error(), EXIT_BAD_INPUT),
    (EnvironmentProblem("cannot reach Kafka"), EXIT_ENVIRONMENT),
    (EnvironmentFailure("the broker did not answer"), EXIT_ENVIRONMENT),
    (AuthorizationFailure("TRANSACTIONAL_ID_AUTHORIZATION_FAILED on app.in.3: the principal lacks an ACL"), EXIT_ENVIRONMENT),
    (CheckFailed("verify failed"), EXIT_CHECK_FAILED),
    (RunFailed("fenced"), EXIT_CHECK_FAILED),
    (ProduceFailed("fenced by a newer producer"), EXIT_CHECK_FAILED),
    (ExactlyOnceViolation("two tasks wrote for one input partition"), EXIT_CHECK_FAILED),
    # a socket that cannot listen
    (bind_failure(_os_error(errno.EADDRINUSE), "127.0.0.1", 9400), EXIT_ENVIRONMENT),
    (bind_failure(socket.gaierror(-2, "Name or service not known"), "no.such.host", 9400), EXIT_BAD_INPUT),
    (bind_failure(_os_error(errno.EADDRNOTAVAIL), "10.9.9.9", 9400), EXIT_BAD_INPUT),
    # the Kafka client's errors, by code
    (KafkaException(KafkaError(KafkaError._INVALID_ARG, "No such configuration property: \"acks.typo\"")), EXIT_BAD_INPUT),
    (KafkaException(KafkaError(KafkaError.UNKNOWN_TOPIC_OR_PART)), EXIT_BAD_INPUT),
    (KafkaException(KafkaError(KafkaError.INVALID_TRANSACTION_TIMEOUT)), EXIT_BAD_INPUT),
    (KafkaException(KafkaError(KafkaError._TRANSPORT)), EXIT_ENVIRONMENT),
    (KafkaException(KafkaError(KafkaError._TIMED_OUT)), EXIT_ENVIRONMENT),
    (KafkaException(KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED)), EXIT_ENVIRONMENT),
    (KafkaException(KafkaError(KafkaError._FENCED)), EXIT_CHECK_FAILED),
    (KafkaException(KafkaError(KafkaError.PRODUCER_FENCED)), EXIT_CHECK_FAILED),
    # files, YAML
    (_yaml_error(), EXIT_BAD_INPUT),
    (FileNotFoundError(errno.ENOENT, "No such file or directory", "/no/such/file"), EXIT_ENVIRONMENT),
    (PermissionError(errno.EACCES, "Permission denied", "/root/x"), EXIT_ENVIRONMENT),
    # nobody's: still one line, exit 3
    (KeyError("surprise"), None),
]


@pytest.mark.parametrize("failure,exit_code", FAILURES, ids=lambda value: type(value).__name__ if isinstance(value, Exception) else str(value))
def test_every_failure_maps_to_its_documented_exit_code(failure, exit_code):
    code, message = classify_failure(failure)
    assert code == exit_code
    assert message and "\n" not in message


def test_a_yaml_error_keeps_its_line_and_column():
    assert classify_failure(_yaml_error())[1] == ("line 2, column 8: expected ',' or ']', but got ':'"
                                                 " (while parsing a flow sequence at line 1, column 8)")


def _our_exception_classes():
    for package in ("conf", "producers", "streaming", "eosbench"):
        root = import_module(package)
        for module_info in pkgutil.walk_packages(root.__path__, f"{package}."):
            module = import_module(module_info.name)
            for _, cls in inspect.getmembers(module, inspect.isclass):
                if issubclass(cls, Exception) and cls.__module__ == module.__name__:
                    yield cls


# Raised and caught inside the engines, never reaching the command line as themselves.
INTERNAL = {"BatchInterrupted", "OffsetsHeldOpen", "SinkTaskFailed"}


def test_every_failure_class_of_ours_has_a_kind_with_an_exit_code():
    classes = {cls for cls in _our_exception_classes() if cls.__name__ not in INTERNAL}
    unmapped = sorted(cls.__qualname__ for cls in classes if not issubclass(cls, tuple(EXIT_CODES)))
    assert unmapped == []
    assert {cls.__name__ for cls in classes} >= {"BadInput", "EnvironmentProblem", "CheckFailed", "ProduceFailed",
                                                "ExactlyOnceViolation", "SinkPreconditionError"}


# ------------------------------------------------------------------ the real command, no broker


def test_produce_metrics_port_in_use_is_the_environment():
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        port = squatter.getsockname()[1]
        completed = run_eosbench("produce", "--topic", "t", "--num-records", "10", "--record-size", "10",
                                 "--throughput", "-1", "--metrics-port", str(port), "--metrics-linger", "0",
                                 "--bootstrap-server", f"127.0.0.1:{free_port()}")
    assert_one_line_error(completed, EXIT_ENVIRONMENT, f"port {port} on 127.0.0.1 is already in use")


@pytest.mark.parametrize("extra,fragment", [
    (["--producer-props", "acks.typo=1"], "invalid producer configuration: No such configuration property: \"acks.typo\""),
    (["--producer-props", "compression.type=zip"], "invalid producer configuration: Invalid value \"zip\""),
    (["--metrics-port", str(free_port()), "--metrics-host", "no.such.host.invalid"],
     "--metrics-host/--metrics-port: cannot listen on no.such.host.invalid"),
    (["--output-json", "no/such/folder/summary.json"], "--output-json no/such/folder/summary.json: its folder no/such/folder does not exist"),
])
def test_produce_bad_input_exits_2_before_asking_a_broker(extra, fragment):
    completed = run_eosbench("produce", "--topic", "t", "--num-records", "10", "--record-size", "10",
                             "--throughput", "-1", "--bootstrap-server", f"127.0.0.1:{free_port()}", *extra)
    assert_one_line_error(completed, EXIT_BAD_INPUT, fragment)


def test_stream_output_json_checks_its_path_before_spark_starts(tmp_path: Path):
    completed = run_eosbench("stream", "--input-topic", "i", "--output-topic", "o", "--output-json", str(tmp_path))
    assert_one_line_error(completed, EXIT_BAD_INPUT, f"--output-json {tmp_path}: is a folder")


def test_a_workload_yaml_error_names_line_and_column(tmp_path: Path):
    workload = tmp_path / "broken.yaml"
    workload.write_text("grid:\n  brokers: [1, 3\n  sink: kafka-eos\n")
    completed = run_eosbench("bench", "sweep", "--workload", str(workload))
    assert_one_line_error(completed, EXIT_BAD_INPUT, f"workload {workload} is not valid YAML: line 3, column 7:")


def test_the_default_workload_comes_from_the_package_wherever_the_command_runs(tmp_path: Path):
    from conf.workload_settings import WORKLOADS_DIR, workload_path

    assert workload_path("default") == WORKLOADS_DIR / "default.yaml"
    assert workload_path("smoke.yaml") == WORKLOADS_DIR / "smoke.yaml"
    assert workload_path(str(tmp_path / "mine.yaml")) == tmp_path / "mine.yaml"
    completed = run_eosbench("bench", "sweep", "--workload", "nonesuch")
    assert_one_line_error(completed, EXIT_BAD_INPUT, "cannot read workload nonesuch", "packaged workloads: brokers, default, smoke")


# ------------------------------------------------------------------ a streaming query that stopped

# str() of the StreamingQueryException that ended soak 308a257e's stream when its checkpoint's
# NameNode was SIGKILLed (the query's ids, offsets and plan shortened).
HDFS_DOWN = ('[STREAM_FAILED] Query [id = de73b207, runId = ba6e8b09] terminated with exception: End of File Exception'
             ' between local host is: "vm/127.0.0.1"; destination host is: "localhost":8020; : java.io.EOFException;'
             ' For more details see:  http://wiki.apache.org/hadoop/EOFException SQLSTATE: XXKST\n'
             '=== Streaming Query ===\n'
             'Identifier: soak-308a257e [id = de73b207, runId = ba6e8b09]\n'
             'Current Committed Offsets: {KafkaV2[Subscribe[soak-308a257e-in]]: {"soak-308a257e-in":{"0":123062}}}\n'
             '\nCurrent State: ACTIVE\nThread State: RUNNABLE\n\nLogical Plan:\n'
             '~WriteToMicroBatchDataSourceV1 ForeachBatchSink, de73b207, [checkpointLocation=hdfs://127.0.0.1:8020/x]\n')


def test_a_failed_query_is_one_line_with_its_cause_and_no_ids_offsets_or_plan():
    failure = streaming_query_failure(HDFS_DOWN)
    assert str(failure) == ('the streaming query failed: End of File Exception between local host is: "vm/127.0.0.1";'
                            ' destination host is: "localhost":8020; : java.io.EOFException; For more details see: '
                            ' http://wiki.apache.org/hadoop/EOFException')
    assert classify_failure(failure) == (EXIT_ENVIRONMENT, str(failure))


# The same fault when it met the sink's own read of the offset log (soak 4a7fe35a): the error
# surfaces in foreachBatch's Python, through py4j (frames and Java stack shortened).
HDFS_DOWN_IN_THE_SINK = (
    '[STREAM_FAILED] Query [id = af76fa94, runId = ae1e507a] terminated with exception:'
    ' [FOREACH_BATCH_USER_FUNCTION_ERROR] An error occurred in the user provided function in foreach batch sink.'
    ' Reason: An exception was raised by the Python Proxy. Return Message: Traceback (most recent call last):\n'
    '  File "/x/site-packages/streaming/source/checkpoint.py", line 69, in _call\n'
    '    return getattr(self._fs, method)(self._hadoop_path(self._root, relative))\n'
    '  File "/x/py4j/protocol.py", line 327, in get_return_value\n'
    '    raise Py4JJavaError(\n'
    'py4j.protocol.Py4JJavaError: An error occurred while calling o158.open.\n'
    ': java.io.EOFException: End of File Exception between local host is: "vm/127.0.0.1"; destination host is:'
    ' "localhost":8020; : java.io.EOFException; For more details see:  http://wiki.apache.org/hadoop/EOFException\n'
    '\tat org.apache.hadoop.ipc.Client.call(Client.java:1558)\n'
    'Caused by: java.io.EOFException\n'
    '\tat java.base/java.io.DataInputStream.readInt(DataInputStream.java:386)\n'
    ' SQLSTATE: 39000\n'
    '=== Streaming Query ===\n'
    'Identifier: soak-4a7fe35a [id = af76fa94, runId = ae1e507a]\n')

# A plain Python error in foreachBatch: its traceback's last line names it.
PYTHON_RAISED_IN_THE_SINK = (
    '[STREAM_FAILED] Query [id = 1, runId = 2] terminated with exception: [FOREACH_BATCH_USER_FUNCTION_ERROR]'
    ' An error occurred in the user provided function in foreach batch sink. Reason: An exception was raised by'
    ' the Python Proxy. Return Message: Traceback (most recent call last):\n'
    '  File "/x/site-packages/streaming/sink/driver.py", line 186, in _run_batch\n'
    '    plan = self.plan(batch_id)\n'
    'ValueError: batch 3 has no offsets\n'
    ' SQLSTATE: 39000\n=== Streaming Query ===\n')


@pytest.mark.parametrize("error,line", [
    (HDFS_DOWN_IN_THE_SINK, 'java.io.EOFException: End of File Exception between local host is: "vm/127.0.0.1";'
                            ' destination host is: "localhost":8020; : java.io.EOFException; For more details see: '
                            ' http://wiki.apache.org/hadoop/EOFException'),
    (PYTHON_RAISED_IN_THE_SINK, "ValueError: batch 3 has no offsets"),
])
def test_a_query_failed_in_the_sinks_python_is_named_by_what_raised(error, line):
    assert str(streaming_query_failure(error)) == f"the streaming query failed: {line}"


# Data loss as each Kafka source words it: Spark's over several lines, naming the partition in the
# last; the grouped source's first.
SPARK_DATA_LOSS = (
    '[STREAM_FAILED] Query [id = 1, runId = 2] terminated with exception: Some data may have been lost because they'
    ' are not available in Kafka any more;\neither the data was aged out by Kafka or the topic may have been deleted'
    ' before all the data in the\ntopic was processed. If you want your streaming query to fail on such cases, set'
    ' the\nsource option "failOnDataLoss" to "true".\nReason: Added partition in-3 starts from 30 instead of 0.'
    ' SQLSTATE: XXKST\n=== Streaming Query ===\nIdentifier: [id = 1, runId = 2]\n')
GROUPED_DATA_LOSS = (
    '[STREAM_FAILED] Query [id = 1, runId = 2] terminated with exception: Added partition in-3 starts from 30'
    ' instead of 0. Some data may have been lost because they are not available in Kafka any more; either the data'
    ' was aged out by Kafka or the topic may have been deleted before all the data in the topic was processed. If'
    " you don't want your streaming query to fail on such cases, set the source option failOnDataLoss to false."
    ' SQLSTATE: XXKST\n=== Streaming Query ===\n')


@pytest.mark.parametrize("error", [SPARK_DATA_LOSS, GROUPED_DATA_LOSS], ids=["spark", "grouped"])
def test_data_loss_is_one_line_naming_the_partition_and_offsets_alike_on_either_source(error):
    assert str(streaming_query_failure(error)) == (
        "the streaming query failed: Added partition in-3 starts from 30 instead of 0: some data may have been lost"
        " (records deleted before they were read); the source option failOnDataLoss=false goes on without them")


@pytest.mark.parametrize("failure,exit_code", [
    (streaming_query_failure(HDFS_DOWN), 3),
    (ExactlyOnceViolation("batch 7: two tasks wrote for one input partition: [('in', 0), ('in', 0)]"), 1),
    (SinkPreconditionError("--starting-offsets group: partition 2 holds records but has no group offset"), 2),
])
@pytest.mark.parametrize("running_before", [False, True])
def test_spark_submits_entry_point_ends_a_failed_run_in_one_line(monkeypatch, capsys, failure, exit_code, running_before):
    from pyspark import SparkContext

    import streaming.session
    from streaming import job

    monkeypatch.setattr(SparkContext, "_active_spark_context", object() if running_before else None)

    def fail(_spark, _settings, timeline=None):
        raise failure
    stopped = []
    spark = SimpleNamespace(sparkContext=SimpleNamespace(setLogLevel=stopped.append), stop=lambda: stopped.append("stop"))
    monkeypatch.setattr(streaming.session, "build_spark_session", lambda _name, defaults: spark)
    monkeypatch.setattr(streaming.session, "session_defaults", lambda _settings: {})
    monkeypatch.setattr(job, "run", fail)
    with pytest.raises(SystemExit) as exited:
        job.main(["--input-topic", "i", "--output-topic", "o"])
    assert exited.value.code == exit_code
    assert capsys.readouterr().err == f"streaming/job.py: error: {str(failure).splitlines()[0]}\n"
    # The session main started stops, muted, before the line, so nothing of its shutdown follows
    # it; a caller's own session (a test's, a notebook's) is left running.
    assert stopped == ([] if running_before else ["OFF", "stop"])


def test_a_reader_that_went_away_ends_the_command_quietly_with_the_sigpipe_exit():
    # In a child of its own: the handler points the process's stdout at /dev/null.
    program = ("import sys; from eosbench.console.errors import run_handler\n"
               "def handler(args): raise BrokenPipeError(32, 'Broken pipe')\n"
               "sys.exit(run_handler(handler, None))")
    completed = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True)
    assert (completed.returncode, completed.stderr) == (141, "")
