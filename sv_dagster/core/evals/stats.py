"""Uncertainty for eval tables: seeded bootstrap CIs, paired bootstrap and McNemar's test.

Per-example arrays are built once from results rows; bootstrap replicates are computed
with numpy in chunks, so 1,000 replicates over 100,000 examples stay within memory.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

STANDARD_SEED = 42
N_BOOT = 1000


@dataclass(frozen=True)
class ExampleArrays:
    """One entry per scored example (errors are left out, as in the metrics)."""

    ids: list[str]
    answered: np.ndarray  # not an abstention
    valid: np.ndarray  # a usable label (invalid answers count as wrong, have no calibration)
    correct: np.ndarray  # predicted == gold
    confidence: np.ndarray  # nan when missing
    cost: np.ndarray  # decision cost
    reward: np.ndarray  # weighted total reward
    max_cost: float


def example_arrays(rows: Sequence[dict[str, Any]], costs: Any, abstain_label: str = "Abstain") -> ExampleArrays:
    from sv_shared import decision_cost

    scored = [row for row in rows if row.get("error") is None]
    labels = [(row.get("parsed") or {}).get("label") for row in scored]
    confidence = [(row.get("parsed") or {}).get("confidence") for row in scored]
    return ExampleArrays(
        ids=[row["example_id"] for row in scored],
        answered=np.array([label != abstain_label for label in labels], dtype=bool),
        valid=np.array([label is not None for label in labels], dtype=bool),
        correct=np.array([label == row["answer"] for label, row in zip(labels, scored)], dtype=bool),
        confidence=np.array([np.nan if c is None else c for c in confidence], dtype=float),
        cost=np.array([decision_cost(label, row["answer"], costs) for label, row in zip(labels, scored)], dtype=float),
        reward=np.array(
            [row.get("reward") if row.get("reward") is not None else np.nan for row in scored], dtype=float
        ),
        max_cost=costs.max_cost,
    )


def _ratio(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, num / np.where(den > 0, den, 1), np.nan)


def headline_metrics(a: ExampleArrays, idx: np.ndarray) -> dict[str, np.ndarray]:
    """Metrics for each replicate; `idx` is (replicates, n) example indices."""
    answered, correct = a.answered[idx], a.correct[idx]
    n_answered = answered.sum(axis=1)
    conf = a.confidence[idx]
    has_conf = answered & a.valid[idx] & ~np.isnan(conf)
    bins = np.clip(np.nan_to_num(conf * 10).astype(int), 0, 9)
    ece = np.zeros(idx.shape[0])
    total = has_conf.sum(axis=1)
    for b in range(10):  # expected calibration error, 10 equal-width bins
        in_bin = has_conf & (bins == b)
        count = in_bin.sum(axis=1)
        gap = np.abs(
            _ratio((correct & in_bin).sum(axis=1), count) - _ratio(np.where(in_bin, conf, 0).sum(axis=1), count)
        )
        ece += np.where(count > 0, count * np.nan_to_num(gap), 0)
    return {
        "accuracy": _ratio((correct & answered).sum(axis=1), n_answered),
        "cost_weighted_accuracy": 1.0 - a.cost[idx].mean(axis=1) / a.max_cost if a.max_cost else np.ones(idx.shape[0]),
        "mean_reward": np.nanmean(a.reward[idx], axis=1)
        if not np.isnan(a.reward).all()
        else np.full(idx.shape[0], np.nan),
        "ece": _ratio(ece, total),
    }


def bootstrap_cis(
    a: ExampleArrays,
    *,
    n_boot: int = N_BOOT,
    seed: int = STANDARD_SEED,
    alpha: float = 0.05,
    chunk: int = 50,
) -> dict[str, list[float] | None]:
    """Percentile CIs of each headline metric over `n_boot` resamples of the examples."""
    n = len(a.ids)
    if n == 0:
        return {name: None for name in ("accuracy", "cost_weighted_accuracy", "mean_reward", "ece")}
    rng = np.random.default_rng(seed)
    replicates: dict[str, list[np.ndarray]] = {}
    for start in range(0, n_boot, chunk):
        idx = rng.integers(0, n, size=(min(chunk, n_boot - start), n))
        for name, values in headline_metrics(a, idx).items():
            replicates.setdefault(name, []).append(values)
    cis = {}
    for name, parts in replicates.items():
        values = np.concatenate(parts)
        values = values[~np.isnan(values)]
        cis[name] = (
            [float(np.quantile(values, alpha / 2)), float(np.quantile(values, 1 - alpha / 2))] if values.size else None
        )
    return cis


def mean_cis(
    values: Mapping[str, Sequence[float | None]],
    *,
    n_boot: int = N_BOOT,
    seed: int = STANDARD_SEED,
    alpha: float = 0.05,
) -> dict[str, list[float] | None]:
    """Percentile bootstrap CIs of the mean of each per-example series (None entries are
    left out of that series), for environments whose headline numbers are rates and mean
    rewards rather than label metrics."""
    cis: dict[str, list[float] | None] = {}
    for name, series in values.items():
        x = np.array([v for v in series if v is not None], dtype=float)
        if x.size == 0:
            cis[name] = None
            continue
        rng = np.random.default_rng(seed)
        means = np.concatenate(
            [
                x[rng.integers(0, x.size, size=(min(200, n_boot - start), x.size))].mean(axis=1)
                for start in range(0, n_boot, 200)
            ]
        )
        cis[name] = [float(np.quantile(means, alpha / 2)), float(np.quantile(means, 1 - alpha / 2))]
    return cis


def mcnemar_exact(b: int, c: int) -> float:
    """Two-sided exact McNemar p-value from the discordant counts (b: only A right,
    c: only B right)."""
    n = b + c
    if n == 0:
        return 1.0
    tail: float = sum(math.comb(n, k) for k in range(0, min(b, c) + 1)) / 2**n
    return min(1.0, 2 * tail)


@dataclass(frozen=True)
class PairedComparison:
    metric: str
    n_pairs: int
    baseline: float
    candidate: float
    delta: float
    ci: list[float]
    p_value: float
    test: str

    def as_dict(self) -> dict[str, Any]:
        return self.__dict__.copy()


def paired_compare(
    baseline_rows: Sequence[dict[str, Any]],
    candidate_rows: Sequence[dict[str, Any]],
    metric: str,
    *,
    value: Callable[[dict[str, Any]], float | None],
    binary: bool,
    n_boot: int = N_BOOT,
    seed: int = STANDARD_SEED,
) -> PairedComparison | None:
    """Candidate minus baseline on the examples both scored. Binary outcomes get
    McNemar's exact test; others a paired-bootstrap p-value (two-sided)."""
    base = {row["example_id"]: value(row) for row in baseline_rows if row.get("error") is None}
    cand = {row["example_id"]: value(row) for row in candidate_rows if row.get("error") is None}
    common = [key for key in base if key in cand and base[key] is not None and cand[key] is not None]
    if not common:
        return None
    x = np.array([base[key] for key in common], dtype=float)
    y = np.array([cand[key] for key in common], dtype=float)
    diff = y - x
    rng = np.random.default_rng(seed)
    boots = np.array([diff[rng.integers(0, len(diff), len(diff))].mean() for _ in range(n_boot)])
    ci = [float(np.quantile(boots, 0.025)), float(np.quantile(boots, 0.975))]
    if binary:
        p = mcnemar_exact(int(((x == 1) & (y == 0)).sum()), int(((x == 0) & (y == 1)).sum()))
        test = "mcnemar_exact"
    else:
        centred = boots - diff.mean()  # bootstrap null: the observed difference shifted to 0
        p = float(min(1.0, (np.abs(centred) >= abs(diff.mean())).mean() + 1 / n_boot))
        test = "paired_bootstrap"
    return PairedComparison(metric, len(common), float(x.mean()), float(y.mean()), float(diff.mean()), ci, p, test)


def cohen_kappa(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Cohen's kappa of boolean arrays along the last axis (the convention of
    `sv_shared.safety.agreement`: 1 for perfect agreement, 0 when chance agreement is 1)."""
    n = a.shape[-1]
    observed = (a == b).mean(axis=-1)
    pa, pb = a.mean(axis=-1), b.mean(axis=-1)
    expected = pa * pb + (1 - pa) * (1 - pb)
    with np.errstate(invalid="ignore", divide="ignore"):
        kappa = (observed - expected) / (1 - expected)
    degenerate = np.isclose(expected, 1.0) | (n == 0)
    return np.where(degenerate, np.where(observed == 1.0, 1.0, 0.0), kappa)


def kappa_ci(
    a: Sequence[bool], b: Sequence[bool], *, n_boot: int = N_BOOT, seed: int = STANDARD_SEED
) -> list[float] | None:
    """Percentile bootstrap 95% CI of Cohen's kappa between two labelings of the same rows."""
    x, y = np.asarray(a, dtype=bool), np.asarray(b, dtype=bool)
    if x.size == 0:
        return None
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, x.size, size=(n_boot, x.size))
    values = cohen_kappa(x[idx], y[idx])
    return [float(np.quantile(values, 0.025)), float(np.quantile(values, 0.975))]


def _calibration_arrays(rows: Sequence[dict[str, Any]], abstain_label: str) -> ExampleArrays:
    """What ECE reads (answered, valid, correct, confidence), costs and rewards left empty."""
    labels = [(row.get("parsed") or {}).get("label") for row in rows]
    confidence = [(row.get("parsed") or {}).get("confidence") for row in rows]
    n = len(rows)
    return ExampleArrays(
        ids=[row["example_id"] for row in rows],
        answered=np.array([label != abstain_label for label in labels], dtype=bool),
        valid=np.array([label is not None for label in labels], dtype=bool),
        correct=np.array([label == row["answer"] for label, row in zip(labels, rows)], dtype=bool),
        confidence=np.array([np.nan if c is None else float(c) for c in confidence], dtype=float),
        cost=np.zeros(n),
        reward=np.full(n, np.nan),
        max_cost=1.0,
    )


def paired_ece(
    baseline_rows: Sequence[dict[str, Any]],
    candidate_rows: Sequence[dict[str, Any]],
    *,
    abstain_label: str = "Abstain",
    n_boot: int = N_BOOT,
    seed: int = STANDARD_SEED,
) -> PairedComparison | None:
    """Candidate minus baseline expected calibration error (lower is better) on the examples
    both scored: each bootstrap replicate resamples the same examples for both, and the
    p-value is the paired bootstrap's (two-sided). None when either side states no
    confidence on any shared example."""
    base = {row["example_id"]: row for row in baseline_rows if row.get("error") is None}
    cand = {row["example_id"]: row for row in candidate_rows if row.get("error") is None}
    common = [key for key in base if key in cand]
    if not common:
        return None
    a = _calibration_arrays([base[k] for k in common], abstain_label)
    b = _calibration_arrays([cand[k] for k in common], abstain_label)
    whole = np.arange(len(common))[None, :]
    x, y = headline_metrics(a, whole)["ece"][0], headline_metrics(b, whole)["ece"][0]
    if np.isnan(x) or np.isnan(y):
        return None
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(common), size=(n_boot, len(common)))
    diffs = headline_metrics(b, idx)["ece"] - headline_metrics(a, idx)["ece"]
    diffs = diffs[~np.isnan(diffs)]
    delta = float(y - x)
    ci = [float(np.quantile(diffs, 0.025)), float(np.quantile(diffs, 0.975))]
    p = float(min(1.0, (np.abs(diffs - diffs.mean()) >= abs(delta)).mean() + 1 / n_boot))
    return PairedComparison("ece", len(common), float(x), float(y), delta, ci, p, "paired_bootstrap")
