"""Bootstrap CIs, McNemar and paired comparisons."""

from __future__ import annotations

import numpy as np
import pytest

from sv_dagster.core.evals.stats import (
    bootstrap_cis,
    example_arrays,
    headline_metrics,
    mcnemar_exact,
    paired_compare,
)
from sv_shared import CostConfig, Prediction, classification_metrics

COSTS = CostConfig(positive_label="Malicious")


def rows(n: int, wrong_every: int, seed: int = 0, prefix: str = "x") -> list[dict]:
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        gold = "Malicious" if i % 2 else "Benign"
        label = gold if i % wrong_every else ("Benign" if gold == "Malicious" else "Malicious")
        label = "Abstain" if i % 11 == 5 else label
        label = None if i % 13 == 7 else label
        out.append(
            {
                "example_id": f"{prefix}{i}",
                "answer": gold,
                "error": None,
                "reward": float(label == gold),
                "parsed": {"label": label, "confidence": float(rng.uniform(0.5, 1.0))},
            }
        )
    return out


def test_numpy_metrics_match_the_reference_metrics():
    data = rows(200, wrong_every=4)
    arrays = example_arrays(data, COSTS)
    ours = headline_metrics(arrays, np.arange(len(data))[None, :])
    ref = classification_metrics(
        [Prediction(r["parsed"]["label"], r["answer"], r["parsed"]["confidence"]) for r in data],
        positive_label="Malicious",
        costs=COSTS,
    )
    for name in ("accuracy", "cost_weighted_accuracy", "ece"):
        assert ours[name][0] == pytest.approx(ref[name]), name


def test_bootstrap_ci_contains_the_estimate_narrows_with_n_and_is_seeded():
    small, large = example_arrays(rows(60, 4), COSTS), example_arrays(rows(2000, 4), COSTS)
    ci_small, ci_large = bootstrap_cis(small), bootstrap_cis(large)
    point = headline_metrics(large, np.arange(2000)[None, :])["accuracy"][0]
    assert ci_large["accuracy"][0] <= point <= ci_large["accuracy"][1]
    width = lambda ci: ci["accuracy"][1] - ci["accuracy"][0]  # noqa: E731
    assert width(ci_large) < width(ci_small)
    assert bootstrap_cis(small, seed=42) == bootstrap_cis(small, seed=42)
    assert bootstrap_cis(example_arrays([], COSTS))["accuracy"] is None


def test_mcnemar_exact_values():
    assert mcnemar_exact(0, 10) == pytest.approx(2 / 1024)
    assert mcnemar_exact(5, 5) == 1.0
    assert mcnemar_exact(0, 0) == 1.0
    assert mcnemar_exact(3, 12) == pytest.approx(0.03515625)


def test_paired_compare_sees_a_planted_regression_and_not_noise():
    base = rows(400, wrong_every=10)
    same = [dict(r) for r in base]
    worse = [dict(r, parsed={**r["parsed"], "label": "Benign"}) for r in base]  # says Benign to everything
    correct = lambda r: float(r["parsed"]["label"] == r["answer"])  # noqa: E731
    null = paired_compare(base, same, "accuracy", value=correct, binary=True)
    assert null.delta == 0 and null.p_value == 1.0
    drop = paired_compare(base, worse, "accuracy", value=correct, binary=True)
    assert drop.delta < -0.2 and drop.p_value < 1e-6 and drop.ci[1] < 0
    reward = paired_compare(
        base, worse, "mean_reward", value=lambda r: r["reward"] - (r["parsed"]["label"] != r["answer"]), binary=False
    )
    assert reward.test == "paired_bootstrap" and reward.p_value < 0.01
    assert paired_compare(base, rows(10, 3, prefix="other"), "accuracy", value=correct, binary=True) is None


def test_a_rate_summary_has_a_format_rate_only_where_replies_have_a_format():
    from sv_dagster.core.evals.summary import rate_summary

    def row(reward: float, parsed: dict | None) -> dict:
        return {"reward": reward, "parsed": parsed, "rewards": {}}

    diffs = rate_summary([row(1.0, {"format_ok": True}), row(0.0, {"format_ok": False}), row(0.0, None)], {})
    assert diffs["format_rate"] == pytest.approx(1 / 3)  # a reply that did not parse is not in the format
    dialogues = rate_summary([row(0.5, {"turns": 2}), row(1.0, None)], {})
    assert dialogues["format_rate"] is None and dialogues["mean_reward"] == 0.75


def test_the_same_rows_in_another_order_give_the_same_cis():
    """An eval writes rows as they finish; its summary must not depend on that order."""
    from types import SimpleNamespace

    from sv_dagster.core.evals.summary import summarize

    in_order = rows(49, 3)
    shuffled = [in_order[i] for i in np.random.default_rng(1).permutation(len(in_order))]
    labelling = SimpleNamespace(positive_label="Malicious", rates={}, summary_extra=None)
    scored = SimpleNamespace(positive_label=None, rates={"right": lambda row: row["reward"]}, summary_extra=None)
    settings = SimpleNamespace(costs=COSTS, classifier=None)
    for env in (labelling, scored):
        first, second = summarize(env, in_order, settings), summarize(env, shuffled, settings)
        assert first["ci95"] == second["ci95"] and first["ci95"]["mean_reward"] is not None
    # The resamples index rows: without the canonical order the intervals move.
    reversed_cis = bootstrap_cis(example_arrays(in_order[::-1], COSTS))
    assert reversed_cis != bootstrap_cis(example_arrays(in_order, COSTS))
