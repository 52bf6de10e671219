"""A training run its safety review stopped is told apart from a run that broke."""

from __future__ import annotations

import dagster as dg

from sv_dagster.instance.outcome import blocked_by_review


@dg.asset(key=["safety_review", "e1", "rlft_stage1"])
def review() -> int:
    return 1


@dg.asset_check(asset=review, blocking=True)
def automated_review() -> dg.AssetCheckResult:
    return dg.AssetCheckResult(passed=False, description="probe_unsafe_rate 0.500 exceeds 0.1")


@dg.asset(key=["eval", "e1", "rlft1"], deps=[review])
def final_eval() -> int:
    return 2


@dg.asset(key=["checkpoint", "e1", "sft"])
def broken_checkpoint() -> int:
    raise RuntimeError("out of memory")


def _run(*defs):
    return dg.materialize(list(defs), raise_on_error=False, instance=dg.DagsterInstance.ephemeral())


def test_a_run_stopped_only_by_a_failed_review_check_is_blocked_by_review():
    result = _run(review, automated_review, final_eval)

    assert not result.success
    assert blocked_by_review(result)


def test_a_run_where_another_step_failed_is_not_blocked_by_review():
    result = _run(review, automated_review, final_eval, broken_checkpoint)

    assert not result.success
    assert not blocked_by_review(result)


def test_a_successful_run_is_not_blocked_by_review():
    assert not blocked_by_review(_run(final_eval))
