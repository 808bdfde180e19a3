"""`eosbench produce` without a broker: flag rules (KIP-1260, KIP-91, Java's), outcomes and output lines."""

from __future__ import annotations

import io
import re
from collections import Counter
from pathlib import Path

import pytest

from conf.produce_settings import ProduceSettings, to_librdkafka_config
from conf.settings import SettingsError
from eosbench.bench.produce import FINAL_LINE
from eosbench.console.errors import EXIT_BAD_INPUT
from producers.perf import ProducerPerformance
from producers.perf_stats import PerfStats
from tests.unit.fake_kafka import FakeProducer
from tests.unit.test_cli_errors import assert_one_line_error, run_eosbench

BASE = {"topic": "t", "num_records": 1000, "record_size": 10, "throughput": -1}


def settings(**overrides) -> ProduceSettings:
    """ProduceSettings with small defaults."""
    return ProduceSettings(**{**BASE, **overrides})


@pytest.mark.parametrize("ratio", [-0.1, 1.5])
def test_abort_ratio_outside_unit_interval_is_rejected(ratio):
    with pytest.raises(ValueError, match=r"between 0.0 and 1.0"):
        settings(transaction_abort_ratio=ratio, transactional_id="x")


def test_abort_ratio_needs_transactions():
    with pytest.raises(ValueError, match="only valid when transactions are enabled"):
        settings(transaction_abort_ratio=0.5)
    for enabling in ({"transactional_id": "x"}, {"transaction_duration_ms": 100},
                     {"producer_props": ("transactional.id=y",)}, {"records_per_transaction": 10}):
        assert settings(transaction_abort_ratio=0.5, **enabling).transactions_enabled


def test_abort_ratio_parses_and_zero_needs_nothing():
    assert settings(transaction_abort_ratio=0.5, transactional_id="x").transaction_abort_ratio == 0.5
    assert settings().transaction_abort_ratio == 0.0


@pytest.mark.parametrize("props", [
    ("delivery.timeout.ms=1000",),  # < 5 + 30000 (librdkafka's defaults)
    ("delivery.timeout.ms=3000", "request.timeout.ms=2000", "linger.ms=1001"),
    ("message.timeout.ms=100", "queue.buffering.max.ms=0", "request.timeout.ms=200"),  # librdkafka's names
])
def test_kip91_rejects_delivery_timeout_below_linger_plus_request_timeout(props):
    with pytest.raises(ValueError, match=r"delivery.timeout.ms \(\d+\) must be at least linger.ms"):
        settings(producer_props=props)


def test_kip91_accepts_the_boundary_and_reads_properties_files(tmp_path: Path):
    assert settings(producer_props=("delivery.timeout.ms=3000", "request.timeout.ms=2995", "linger.ms=5"))
    config = tmp_path / "producer.properties"
    config.write_text("delivery.timeout.ms=100\nrequest.timeout.ms=1000\n")
    with pytest.raises(ValueError, match="KIP-91"):
        settings(producer_config=config)


def test_java_rules_from_config_post_processor():
    with pytest.raises(ValueError, match="--num-records"):
        settings(num_records=0)
    with pytest.raises(ValueError, match="--warmup-records"):
        settings(warmup_records=1000)
    with pytest.raises(ValueError, match="exactly one of"):
        ProduceSettings(topic="t", num_records=1, throughput=-1)
    with pytest.raises(ValueError, match="--transaction-duration-ms"):
        settings(transaction_duration_ms=0)


def test_transactions_default_to_java_duration_and_a_perf_producer_id():
    s = settings(transactional_id=None, transaction_duration_ms=None, producer_props=("transactional.id=mine",))
    assert s.effective_transaction_duration_ms == 3000
    assert s.client_config()["transactional.id"] == "mine"
    one_run = settings(transaction_duration_ms=100)
    generated = one_run.client_config()["transactional.id"]
    assert generated.startswith("performance-producer-")
    assert one_run.client_config()["transactional.id"] == generated, "one run keeps one generated id"


@pytest.mark.parametrize(("props", "idempotent"), [
    ((), "true"),  # Java's default since Kafka 3.0, which librdkafka does not share
    (("acks=-1", "max.in.flight.requests.per.connection=5"), "true"),
    (("enable.idempotence=false",), "false"),
    (("acks=1",), None),  # conflicting settings turn Java's default off rather than failing (KAFKA-13673)
    (("request.required.acks=0",), None),
    (("retries=0",), None),
    (("max.in.flight=6",), None),
])
def test_idempotence_defaults_on_as_in_java_unless_set_or_ruled_out(props, idempotent):
    assert settings(transactional_id=None, transaction_duration_ms=None,
                    producer_props=props).client_config().get("enable.idempotence") == idempotent


def test_a_non_numeric_retries_is_one_line_of_bad_input():
    with pytest.raises(ValueError, match="retries must be a whole number, got 'many'"):
        settings(producer_props=("retries=many",))


def test_java_property_names_are_translated_for_librdkafka():
    assert to_librdkafka_config({"buffer.memory": "33554432", "key.serializer": "x", "acks": "all"}) == {
        "queue.buffering.max.kbytes": "32768", "acks": "all"}


def test_resume_needs_the_interrupted_loads_transactional_id():
    with pytest.raises(ValueError, match="--resume needs"):
        settings(resume=True, transaction_duration_ms=100)


def _run(**overrides):
    clients: list[FakeProducer] = []

    def factory(*args, **kwargs):
        clients.append(FakeProducer(*args, **kwargs))
        return clients[-1]

    out = io.StringIO()
    summary = ProducerPerformance(settings(**overrides), out=out, producer_factory=factory).run()
    return summary, clients[0], out.getvalue()


def test_ratio_zero_commits_every_transaction():
    summary, client, _ = _run(num_records=2000, records_per_transaction=100, transaction_abort_ratio=0.0)
    assert (summary.transactions_committed, summary.transactions_aborted) == (20, 0)
    assert Counter(client.committed) == Counter(str(i).encode() for i in range(2000))
    assert summary.abort_overhead_ratio == 0.0


def test_ratio_one_aborts_every_transaction():
    summary, client, _ = _run(num_records=2000, records_per_transaction=100, transaction_abort_ratio=1.0)
    assert (summary.transactions_committed, summary.transactions_aborted) == (0, 20)
    assert client.committed == []
    assert summary.transactions_aborted_by_ratio == 20
    assert summary.abort_overhead_ratio is None


def test_ratio_half_aborts_about_half_and_the_log_accounts_for_every_record():
    summary, client, _ = _run(num_records=40_000, records_per_transaction=40, transaction_abort_ratio=0.5, seed=5)
    assert summary.transactions_committed + summary.transactions_aborted == 1000
    assert 430 <= summary.transactions_aborted <= 570  # > 4 sigma either side of 500
    committed = [seq for first, n, outcome in summary.transactions if outcome == "committed"
                 for seq in range(first, first + n)]
    assert Counter(client.committed) == Counter(str(seq).encode() for seq in committed)
    assert summary.records_committed == len(committed)


def test_same_seed_same_decisions_and_payloads():
    first, client_a, _ = _run(num_records=5000, records_per_transaction=50, transaction_abort_ratio=0.5, seed=9)
    second, client_b, _ = _run(num_records=5000, records_per_transaction=50, transaction_abort_ratio=0.5, seed=9)
    other, _, _ = _run(num_records=5000, records_per_transaction=50, transaction_abort_ratio=0.5, seed=10)
    assert first.abort_decisions == second.abort_decisions != other.abort_decisions
    assert client_a.values == client_b.values


def test_output_lines_are_javas():
    _, _, out = _run(num_records=3000, warmup_records=1000)
    lines = out.splitlines()
    assert lines[0] == "Warmup first 1000 records. Steady state results will print after the complete test summary."
    totals = FINAL_LINE.findall(out)
    assert len(totals) == 1 and totals[0][0] == "3000"
    steady = [line for line in lines if " steady state records sent, " in line]
    assert len(steady) == 1 and steady[0].startswith("2000 steady state records sent, ")


def test_javas_summary_is_the_last_line_and_eosbench_tally_comes_before_it():
    # A script reading Java's summary with `tail -1` must find it there, transactions or not.
    _, _, out = _run(num_records=3000, records_per_transaction=500, transaction_abort_ratio=0.5)
    lines = out.splitlines()
    assert FINAL_LINE.fullmatch(lines[-1]) and lines[-1].startswith("3000 records sent, ")
    assert " transactions committed (" in lines[-2]


def test_with_warmup_the_steady_state_line_is_last_as_in_java():
    _, _, out = _run(num_records=3000, warmup_records=1000, records_per_transaction=500)
    lines = out.splitlines()
    assert lines[-2].startswith("3000 records sent, ") and lines[-1].startswith("2000 steady state records sent, ")


def test_print_metrics_waits_for_statistics_made_after_the_last_record():
    # librdkafka reports statistics on an interval; the one in hand at the end predates the last
    # acknowledgements, so --print-metrics must wait for a fresh one.
    _, _, out = _run(num_records=2000, print_metrics=True)
    sent = [line for line in out.splitlines() if line.startswith("producer-metrics:txmsgs ")]
    assert sent and float(sent[0].split(":")[-1]) == 2000.0, sent


def test_window_lines_match_javas_format():
    stats = PerfStats(10, reporting_interval_ms=1, steady_state=False, out=io.StringIO())
    import numpy as np

    stats.window_start_ms -= 10
    stats.record_many(np.array([1.0, 3.0]), 200, at_ms=stats.window_start_ms + 10)
    line = stats.out.getvalue().strip()
    assert re.fullmatch(r"2 records sent, [\d.]+ records/sec \([\d.]+ MB/sec\), 2\.0 ms avg latency, 3\.0 ms max latency\.",
                        line), line


def test_java_sampling_keeps_every_nth_latency():
    import numpy as np

    stats = PerfStats(1_000_000, reporting_interval_ms=10**9, steady_state=False, out=io.StringIO())
    assert stats.sampling == 2
    for start in range(0, 10, 3):  # batches that split the sampling stride unevenly
        stats.record_many(np.arange(start, min(start + 3, 10), dtype=float), 0, at_ms=0)
    assert list(stats.samples[: stats.sample_count]) == [0.0, 2.0, 4.0, 6.0, 8.0]


@pytest.mark.parametrize("args,fragment", [
    (["--transaction-abort-ratio", "1.5", "--transactional-id", "x"], "between 0.0 and 1.0"),
    (["--transaction-abort-ratio", "0.5"], "only valid when transactions are enabled"),
    (["--producer-props", "delivery.timeout.ms=10"], "KIP-91"),
    (["--producer-props", "acks"], "expected key=value"),
])
def test_cli_rejects_bad_flags_with_one_line_and_exit_2(args, fragment):
    completed = run_eosbench("produce", "--topic", "t", "--num-records", "10", "--record-size", "10",
                             "--throughput", "-1", *args)
    assert_one_line_error(completed, EXIT_BAD_INPUT, fragment)


def test_cli_needs_exactly_one_payload_source():
    completed = run_eosbench("produce", "--topic", "t", "--num-records", "10", "--throughput", "-1")
    assert_one_line_error(completed, EXIT_BAD_INPUT, "one of the arguments --record-size --payload-file")


def test_payload_file_is_split_like_javas_scanner(tmp_path: Path):
    path = tmp_path / "payloads.txt"
    path.write_text("alpha\nbeta\n\ngamma\n")
    assert settings(record_size=None, payload_file=path).read_payloads() == [b"alpha", b"beta", b"gamma"]
    with pytest.raises(SettingsError):
        settings(record_size=None, payload_file=tmp_path / "absent").read_payloads()
