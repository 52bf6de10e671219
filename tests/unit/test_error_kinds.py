"""Every row left unscored has a kind, and every summary counts each kind: the counters add up
to `n_errors` in every environment, the dialogues (whose target and judge can fail) included."""

from __future__ import annotations

import pytest

from sv_dagster.core.envs import ENVS
from sv_dagster.core.evals.errors import ErrorKind, error_counts
from sv_dagster.core.evals.summary import summarize


def unscored(kind: ErrorKind, index: int) -> dict:
    return {
        "example_id": f"{kind}-{index}",
        "idx": index,
        "answer": None,
        "completion": None,
        "parsed": None,
        "rewards": None,
        "reward": None,
        "error": f"{kind} failed",
        "error_kind": kind,
    }


def scored_row(env, index: int) -> dict:
    label = env.positive_label
    return {
        "example_id": f"scored-{index}",
        "idx": index,
        "answer": label,
        "completion": "{}",
        "parsed": {"label": label, "confidence": 0.9, "format_ok": True} if label else {"format_ok": True},
        "rewards": {"correct": 1.0},
        "reward": 1.0,
        "error": None,
        "error_kind": None,
    }


@pytest.mark.parametrize("env_short", sorted(ENVS))
def test_the_error_kinds_add_up_to_the_errors_in_every_environment(env_short: str):
    env = ENVS[env_short]
    rows = [scored_row(env, 0)] + [unscored(kind, i) for i, kind in enumerate(ErrorKind, start=1)]
    summary = summarize(env, rows, env.reward_settings(None))
    kinds = {kind.counter: summary[kind.counter] for kind in ErrorKind}
    assert summary["n_errors"] == len(ErrorKind) == sum(kinds.values()), (env_short, kinds)
    assert set(kinds.values()) == {1}


def test_a_row_without_an_error_is_never_counted_whatever_its_kind_says():
    counts = error_counts([{"error": None, "error_kind": "model"}, {"error": "x", "error_kind": "scoring"}])
    assert counts == {"n_errors": 1, **{kind.counter: int(kind is ErrorKind.SCORING) for kind in ErrorKind}}
