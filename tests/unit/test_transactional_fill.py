"""The demo fill's transaction plan: seeded, complete and exact at the ratio's ends."""

import pytest

from producers.transactional_fill import payload, plan_transactions


def test_plan_covers_every_sequence_number_once():
    plan = plan_transactions(10_050, 1_000, 0.3, seed=7)
    written = [seq for spec in plan for seq in spec.sequence_numbers]
    assert written == list(range(10_050))
    assert plan[-1].count == 50


@pytest.mark.parametrize("ratio,committed", [(0.0, 20), (1.0, 0)])
def test_ratio_ends_commit_or_abort_everything(ratio, committed):
    plan = plan_transactions(2_000, 100, ratio, seed=3)
    assert sum(spec.commit for spec in plan) == committed


def test_same_seed_same_plan_and_payloads():
    assert plan_transactions(5_000, 100, 0.5, seed=1) == plan_transactions(5_000, 100, 0.5, seed=1)
    assert payload(42, 100, seed=1) == payload(42, 100, seed=1)
    assert payload(42, 100, seed=1) != payload(42, 100, seed=2)
    assert len(payload(42, 100, seed=1)) == 100


def test_ratio_outside_unit_interval_is_rejected():
    with pytest.raises(ValueError):
        plan_transactions(10, 1, 1.5, seed=0)
