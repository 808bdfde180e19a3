"""`bench spark`'s scaling figures from fake broker counters and phase timings: exact numbers."""

from collections import Counter

import pytest

from eosbench.bench.commands import spark_master
from eosbench.bench.spark_figures import (phase_shares, plot_scaling, request_rates, scaling_figures, scaling_line,
                                  scaling_series)

BEFORE = Counter({"AddPartitionsToTxn_client": 100, "AddOffsetsToTxn": 50, "TxnOffsetCommit": 50, "EndTxn": 50,
                  "InitProducerId": 10, "FindCoordinator": 7})
# 64 transactions in 4 batches over 8 s: one add, add-offsets, offset commit and end each; 16 new producers.
AFTER = BEFORE + Counter({"AddPartitionsToTxn_client": 64, "AddOffsetsToTxn": 64, "TxnOffsetCommit": 64,
                          "EndTxn": 64, "InitProducerId": 16, "FindCoordinator": 32})
PHASES = {"init": 2.0, "register": 0.0, "produce": 4.0, "send_offsets": 1.0, "commit": 3.0}


def test_request_rates_per_second_transaction_and_batch():
    rates = request_rates(BEFORE, AFTER, seconds=8.0, transactions=64, batches=4)
    assert rates == {
        "AddPartitionsToTxn_client": {"count": 64, "per_s": 8.0, "per_txn": 1.0, "per_batch": 16.0},
        "AddPartitionsToTxn_broker": {"count": 0, "per_s": 0.0, "per_txn": 0.0, "per_batch": 0.0},
        "AddOffsetsToTxn": {"count": 64, "per_s": 8.0, "per_txn": 1.0, "per_batch": 16.0},
        "TxnOffsetCommit": {"count": 64, "per_s": 8.0, "per_txn": 1.0, "per_batch": 16.0},
        "EndTxn": {"count": 64, "per_s": 8.0, "per_txn": 1.0, "per_batch": 16.0},
        "InitProducerId": {"count": 16, "per_s": 2.0, "per_txn": 0.25, "per_batch": 4.0},
        "FindCoordinator": {"count": 32, "per_s": 4.0, "per_txn": 0.5, "per_batch": 8.0},
    }


def test_phase_shares_are_of_every_phase_summed():
    assert phase_shares(PHASES) == {"init": 0.2, "send_offsets": 0.1, "commit": 0.3}
    assert phase_shares(dict.fromkeys(PHASES, 0.0)) == {"init": 0.0, "send_offsets": 0.0, "commit": 0.0}


def test_scaling_figures_count_producers_created_from_init_producer_id():
    figures = scaling_figures(64, 4, 8.0, PHASES, 1024, BEFORE, AFTER)
    assert {key: value for key, value in figures.items() if key != "requests"} == {
        "transactions": 64, "batches": 4, "seconds": 8.0, "transactions_per_s": 8.0, "transactions_per_batch": 16.0,
        "markers": 1088, "output_markers": 1024, "markers_per_batch": 272.0, "output_markers_per_batch": 256.0,
        "phase_shares": {"init": 0.2, "send_offsets": 0.1, "commit": 0.3},
        "producers_created": 16, "producers_created_per_batch": 4.0, "producer_cache_hit_rate": 0.75}
    assert scaling_line(figures) == (
        "64 transactions in 4 batches, 8.0/s, 272 markers per batch; time in init 20%, send_offsets 10%, commit 30%; 4.00 producers created"
        " per batch (cache hit 75%); requests AddPartitionsToTxn_client 8.0/s (1.00/txn), AddOffsetsToTxn 8.0/s"
        " (1.00/txn), TxnOffsetCommit 8.0/s (1.00/txn), EndTxn 8.0/s (1.00/txn), InitProducerId 2.0/s (0.25/txn),"
        " FindCoordinator 4.0/s (0.50/txn)")


def test_scaling_figures_without_an_exporter_keep_rates_and_shares_only():
    figures = scaling_figures(64, 4, 8.0, PHASES, 1024, Counter(), None)
    assert figures == {"transactions": 64, "batches": 4, "seconds": 8.0, "transactions_per_s": 8.0,
                       "transactions_per_batch": 16.0, "markers": 1088, "output_markers": 1024,
                       "markers_per_batch": 272.0, "output_markers_per_batch": 256.0,
                       "phase_shares": {"init": 0.2, "send_offsets": 0.1, "commit": 0.3}}
    assert scaling_line(figures) == ("64 transactions in 4 batches, 8.0/s, 272 markers per batch; time in init 20%,"
                                     " send_offsets 10%, commit 30%")


def _run_at(partitions: int) -> dict:
    """A report of `run` at one partition count: P transactions and P² markers a batch, batch scope one and P."""
    per_batch = scaling_figures(4 * partitions, 4, 8.0, PHASES, 4 * partitions ** 2, BEFORE, AFTER)
    batch_scope = scaling_figures(4, 4, 8.0, PHASES, 4 * partitions, Counter(), None)
    alo = scaling_figures(0, 4, 8.0, PHASES, 0, Counter(), None)  # no transactions: not plotted
    return {"run_id": f"r{partitions}", "partitions": partitions, "master": "spark://127.0.0.1:7077",
            "scaling": {"kafka-eos": [per_batch], "kafka-eos+batch": [batch_scope], "kafka-alo": [alo]}}


def test_scaling_series_put_each_sinks_per_batch_costs_against_partitions_with_the_model_to_1000(tmp_path):
    series = scaling_series([_run_at(4), _run_at(16)])
    assert series == {
        "partition scope (kafka-eos): transactions": {4: 4.0, 16: 16.0},
        "partition scope (kafka-eos): commit markers": {4: 20.0, 16: 272.0},
        # the fake counters: 16 of each of four requests, 4 InitProducerId and 8 FindCoordinator a batch
        "partition scope (kafka-eos): coordinator requests": {4: 76.0, 16: 76.0},
        "batch scope (kafka-eos+batch): transactions": {4: 1.0, 16: 1.0},
        "batch scope (kafka-eos+batch): commit markers": {4: 5.0, 16: 17.0},
        "ideal P² + P markers (partition scope)": {4: 20.0, 16: 272.0, 1000: 1_001_000.0}}
    assert plot_scaling([_run_at(4), _run_at(16)], tmp_path).read_bytes()[:4] == b"\x89PNG"
    assert (tmp_path / "spark-scaling-r16.png").exists()


@pytest.mark.parametrize("master", ["local", "local[2,4]", "local[*]", "spark://127.0.0.1:7077", "spark://node-1:7077",
                                    "yarn"])
def test_spark_master_takes_local_standalone_and_yarn_masters(master):
    assert spark_master(master) == master


def test_throughput_is_plotted_per_sink_against_partitions(tmp_path):
    from eosbench.bench.spark_figures import plot_throughput, throughput_series

    reports = [{"run_id": f"r{p}", "partitions": p, "master": "local",
                "median_records_per_sec": {"kafka-alo": 1000.0 / p, "kafka-eos+slot": 1200.0 / p}} for p in (16, 64)]
    assert throughput_series(reports) == {"kafka-alo": {16: 62.5, 64: 15.625},
                                          "slot scope (kafka-eos+slot)": {16: 75.0, 64: 18.75}}
    assert plot_throughput(reports, tmp_path).read_bytes()[:4] == b"\x89PNG"


def test_the_scaling_table_gives_each_sink_its_ratio_to_the_baseline_and_its_costs_per_batch():
    from eosbench.bench.spark_figures import scaling_table

    report = _run_at(4)
    report["median_records_per_sec"] = {"kafka-eos": 100.0, "kafka-alo": 125.0}
    report["scaling"]["kafka-eos"][0]["steady_records_per_s"] = 300.0
    report["scaling"]["kafka-alo"][0]["steady_records_per_s"] = 250.0
    assert scaling_table([report])[2:] == [
        "| 4 | kafka-eos | 100 | 0.80 | 300 | 1.20 | 4.0 | 20 (16) | 76 | 4.00 | 20% | 10% | 30% | — |",
        "| 4 | kafka-alo | 125 | 1.00 | 250 | 1.00 | — | — | — | — | — | — | — | — |"]
