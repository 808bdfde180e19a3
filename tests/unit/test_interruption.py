"""A batch cut short by a stop re-raises two lines that Spark's own stop check still recognises."""

from __future__ import annotations

import re

import pytest
from py4j.protocol import Py4JJavaError

from streaming.sink.interruption import BatchInterrupted, stop_kept_short

# Spark 4.2's StreamExecution.PROXY_ERROR, read from spark-sql_2.13-4.2.0.jar with javap.
SPARK_PROXY_ERROR = re.compile(r"py4j.protocol.Py4JJavaError: An error occurred while calling((.|\r\n|\r|\n)*)"
                               r"(java.lang.InterruptedException|java.io.InterruptedIOException"
                               r"|java.nio.channels.ClosedByInterruptException)")
JAVA_STACK = "".join(f"\tat org.apache.spark.Frame{i}.run(Frame.java:{i})\n" for i in range(3000))


class JavaErrorText(Py4JJavaError):
    """A Py4JJavaError with its text given, as py4j renders it, without a gateway to ask."""

    def __init__(self, text: str):
        Exception.__init__(self, text)
        self.text = text

    def __str__(self) -> str:
        return self.text


def raised_by(error: Exception) -> BaseException:
    with pytest.raises(Exception) as caught:
        with stop_kept_short(7):
            raise error
    return caught.value


def test_an_interrupted_action_is_reraised_short_and_still_reads_as_a_stop():
    error = raised_by(JavaErrorText("An error occurred while calling o277.save.\n: java.lang.InterruptedException\n"
                                    + JAVA_STACK))
    assert isinstance(error, BatchInterrupted) and error.__suppress_context__ and error.__cause__ is None
    assert str(error) == ("batch 7 stopped: py4j.protocol.Py4JJavaError: An error occurred while calling o277.save.\n"
                          ": java.lang.InterruptedException")
    assert SPARK_PROXY_ERROR.search(str(error))


def test_a_cancelled_job_keeps_its_job_group_for_sparks_second_check():
    first_lines = ("An error occurred while calling o88.collectToPython.\n: org.apache.spark.SparkException:"
                   " [SPARK_JOB_CANCELLED] Job 19 cancelled Query q [id = 1b4b, runId = 84046f15] was stopped")
    error = raised_by(JavaErrorText(first_lines + "\n" + JAVA_STACK))
    assert isinstance(error, BatchInterrupted)
    # Spark's other check: the message names a SparkException, 'cancelled' and the query's job group (its run id).
    assert all(part in str(error) for part in ("org.apache.spark.SparkException", "cancelled", "84046f15"))


def test_any_other_java_error_passes_through_whole():
    original = JavaErrorText("An error occurred while calling o5.save.\n: org.apache.kafka.common.errors."
                             "TopicAuthorizationException: denied\n" + JAVA_STACK)
    assert raised_by(original) is original
