"""Stopping a query the job itself ends (its --timeout-s, Ctrl-C, a bench's arm) without the pages of stack traces
that stop makes.

A stop cancels the query's Spark job, and its tasks are killed mid-write: in real-time mode every
task is always mid-write (one long task per partition), in micro-batch mode the batch in flight.
Each killed task then logs, at ERROR or WARN on the driver's console: Spark's write path aborting
its writer ("Aborting task" with the task's InterruptedException or TaskKilledException and its
stack trace, "Aborting commit for partition", "Data source write support ... is aborting"), the
scheduler's "Lost task ... TaskKilled", and "Failed to cancel job group" for a job already gone.
All of it is expected, and none of it says anything about the run: the writers' aborts lose
nothing (the transactional writer's open transaction is aborted by the next producer's init, and
every record not committed is read again by the next run), so the loggers that write it are off
for the length of the stop, until the query's tasks have ended, and then back as they were. An
error while the query runs is logged as before, and so is whatever any other logger says during
the stop.

A killed micro-batch's Python tasks print more, and no logger can turn it off: each of PySpark's
workers finds its socket closed and prints an EOFError traceback straight to stderr. So a
micro-batch query ended by its timeout is stopped between two batches where one ends soon
enough: the stop then kills no task and nothing is printed.
"""

from __future__ import annotations

import time

# The loggers of a stopped query's expected noise (above), by the class that logs each line.
STOP_NOISE_LOGGERS = (
    "org.apache.spark.util.Utils",  # "Aborting task", with the killed task's stack trace
    "org.apache.spark.sql.execution.datasources.v2.DataWritingSparkTask",  # "Aborting commit for partition"
    "org.apache.spark.sql.execution.datasources.v2.WriteToDataSourceV2Exec",  # "... is aborting", "... aborted"
    "org.apache.spark.scheduler.TaskSetManager",  # "Lost task ... TaskKilled"
    "org.apache.spark.scheduler.DAGScheduler",  # "Failed to cancel job group"
)
TASKS_END_S = 10.0  # a killed task that has not ended by then is left to log what it will
BATCH_END_S = 10.0  # a micro-batch still running by then is killed, as at any stop
# The stop's "Failed to cancel job group" comes from the scheduler's event loop, on its own thread,
# even when no task was killed: an event queued at the stop, handled as soon as the loop gets to it.
SCHEDULER_SETTLE_S = 0.5


def stop_quietly(spark, query, between_batches: bool = False, tasks_end_s: float = TASKS_END_S) -> None:
    """Stop `query` (`between_batches`: after its batch in flight), its killed tasks' noise off until they end."""
    if between_batches:
        wait_for_batch_end(query, BATCH_END_S)  # still running: whatever it logs is printed
    levels = silence(spark, STOP_NOISE_LOGGERS)
    try:
        query.stop()
        wait_for_tasks_to_end(spark, tasks_end_s)
    finally:
        restore(spark, levels)


def wait_for_batch_end(query, most_s: float) -> None:
    """Wait, up to `most_s`, until the micro-batch query runs no batch: its trigger is idle, or a batch has ended."""
    deadline = time.monotonic() + most_s
    in_flight = _last_batch_id(query)
    while (query._jsq.status().isTriggerActive() and _last_batch_id(query) == in_flight
           and time.monotonic() < deadline):
        time.sleep(0.02)


def _last_batch_id(query) -> int:
    progress = query._jsq.lastProgress()
    return -1 if progress is None else progress.batchId()


def silence(spark, names) -> dict[str, str | None]:
    """Turn the named log4j loggers off; return each one's own level before (None: it had none, it inherited it)."""
    jvm = spark.sparkContext._jvm
    configurator, off = jvm.org.apache.logging.log4j.core.config.Configurator, jvm.org.apache.logging.log4j.Level.OFF
    own = _logger_configs(jvm)
    levels = {name: own.get(name).getLevel().name() if own.containsKey(name) else None for name in names}
    for name in names:
        configurator.setLevel(name, off)
    return levels


def restore(spark, levels: dict[str, str | None]) -> None:
    """Put the loggers back as `silence` found them: their own level, or none, so that they follow the root's again."""
    jvm = spark.sparkContext._jvm
    context = jvm.org.apache.logging.log4j.LogManager.getContext(False)
    configuration = context.getConfiguration()
    for name, level in levels.items():
        if level is None:
            configuration.removeLogger(name)
        else:
            jvm.org.apache.logging.log4j.core.config.Configurator.setLevel(
                name, jvm.org.apache.logging.log4j.Level.toLevel(level))
    context.updateLoggers()


def _logger_configs(jvm):
    return jvm.org.apache.logging.log4j.LogManager.getContext(False).getConfiguration().getLoggers()


def task_sets(spark) -> int:
    """The task sets Spark's scheduler still holds: a stage's stays until the last of its tasks has ended."""
    return spark.sparkContext._jsc.sc().taskScheduler().rootPool().getSortedTaskSetQueue().size()


def wait_for_tasks_to_end(spark, most_s: float) -> None:
    """Wait, up to `most_s`, until the scheduler holds no task set, then a moment for its event loop."""
    # Not the status tracker's running tasks: it reads the UI's store, which its listener writes
    # lazily, and it showed none running while four killed real-time tasks had yet to log "Lost
    # task". The scheduler logs that before the task's set goes.
    deadline = time.monotonic() + most_s
    while task_sets(spark) and time.monotonic() < deadline:
        time.sleep(0.1)
    time.sleep(SCHEDULER_SETTLE_S)
