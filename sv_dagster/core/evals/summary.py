"""Summary metrics of an eval's results.jsonl."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from statistics import fmean
from typing import Any

from sv_dagster.core.evals.errors import error_counts
from sv_dagster.core.evals.safety import safety_summary
from sv_dagster.core.evals.stats import STANDARD_SEED, bootstrap_cis, example_arrays, mean_cis
from sv_shared import Prediction, classification_metrics

RateFn = Callable[[dict[str, Any]], float | None]


def classification_summary(rows: list[dict[str, Any]], settings: Any) -> dict[str, Any]:
    """Metrics for a labelling environment (E1, E4) from its results rows.

    Rows whose model call or scoring failed are counted separately (`n_errors`) and left
    out of every metric: an outage is not a wrong answer.
    """
    scored = [row for row in rows if row.get("error") is None]
    preds = [
        Prediction(
            predicted=(row.get("parsed") or {}).get("label"),
            gold=row["answer"],
            confidence=(row.get("parsed") or {}).get("confidence"),
        )
        for row in scored
    ]
    metrics = classification_metrics(preds, positive_label=settings.costs.positive_label, costs=settings.costs)
    valid_json = [float(bool((row.get("parsed") or {}).get("format_ok"))) for row in scored]
    reward_names = sorted({name for row in scored for name in (row.get("rewards") or {})})
    return {
        **metrics,
        "n_examples": len(rows),
        **error_counts(rows),
        "n_refusals": sum(1 for row in rows if row.get("refusal")),
        "format_rate": fmean(valid_json) if valid_json else None,
        "mean_reward": _mean(row.get("reward") for row in scored),
        "total_cost_usd": _sum(row.get("cost_usd") for row in rows),
        "n_unpriced": sum(1 for row in rows if row.get("completion") is not None and row.get("cost_usd") is None),
        "tokens": {
            kind: sum((row.get("usage") or {}).get(kind, 0) for row in rows)
            for kind in ("prompt_tokens", "completion_tokens")
        },
        # 95% percentile bootstrap CIs (1,000 resamples, seed 42) of the headline metrics.
        "ci95": {
            **bootstrap_cis(example_arrays(scored, settings.costs), seed=STANDARD_SEED),
            **mean_cis({"format_rate": valid_json}, seed=STANDARD_SEED),
        },
        "mean_rewards": {name: _mean((row.get("rewards") or {}).get(name) for row in scored) for name in reward_names},
    }


def _common_counts(rows: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "n_examples": len(rows),
        **error_counts(rows),
        "n_refusals": sum(1 for row in rows if row.get("refusal")),
        "total_cost_usd": _sum(row.get("cost_usd") for row in rows),
        "n_unpriced": sum(1 for row in rows if row.get("completion") is not None and row.get("cost_usd") is None),
        "tokens": {
            kind: sum((row.get("usage") or {}).get(kind, 0) for row in rows)
            for kind in ("prompt_tokens", "completion_tokens")
        },
    }


def rate_summary(rows: list[dict[str, Any]], rates: Mapping[str, RateFn]) -> dict[str, Any]:
    """Metrics for environments scored by verifiers rather than labels (E2, E3): the mean
    reward and each reward component, plus the environment's own per-example rates (e.g.
    finding F1, patch success), each with a seeded 95% bootstrap CI. Errors are counted
    and left out, as in `classification_summary`."""
    scored = [row for row in rows if row.get("error") is None]
    reward_names = sorted({name for row in scored for name in (row.get("rewards") or {})})
    series: dict[str, list[float | None]] = {"mean_reward": [row.get("reward") for row in scored]}
    series.update({name: [fn(row) for row in scored] for name, fn in rates.items()})
    summary: dict[str, Any] = {name: _mean(values) for name, values in series.items()}
    summary.update(
        _common_counts(rows),
        format_rate=_format_rate(scored),
        mean_rewards={name: _mean((row.get("rewards") or {}).get(name) for row in scored) for name in reward_names},
        n_tool_calls=sum(len(row.get("tool_calls") or ()) for row in rows),
        ci95=mean_cis(series, seed=STANDARD_SEED),
    )
    return summary


def _format_rate(scored: list[dict[str, Any]]) -> float | None:
    """Share of replies in the environment's answer format; None where its answers have no
    format to check (no parsed reply says `format_ok`: dialogues)."""
    parsed = [row.get("parsed") or {} for row in scored]
    if not any("format_ok" in p for p in parsed):
        return None
    return fmean(bool(p.get("format_ok")) for p in parsed)


def _example_order(row: dict[str, Any]) -> tuple[str, str]:
    return str(row.get("example_id", "")), str(row.get("idx", ""))


def _mean(values: Iterable[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return fmean(present) if present else None


def _sum(values: Iterable[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return sum(present) if present else None


BUNDLED_SOURCE = "bundled"
"""The group of rows without a `test_source`: the environment's own task set."""


def _metrics(env: Any, rows: list[dict[str, Any]], settings: Any) -> dict[str, Any]:
    summary = classification_summary(rows, settings) if env.positive_label else rate_summary(rows, env.rates)
    if env.summary_extra is not None:
        summary.update(env.summary_extra(rows, summary))
    return summary


def summarize(env: Any, rows: list[dict[str, Any]], settings: Any) -> dict[str, Any]:
    """An eval's summary: classification metrics for a labelling environment (one with a
    positive label), else the mean reward and the environment's rates; then its own extra
    keys, and the safety judge's measured agreement where its reward settings name a
    classifier. Rows are read in example order, not the order they finished in: the
    bootstrap's seeded resamples index rows, so the same rows give the same CIs. When some
    rows come from a test-only corpus (`test_source`), `by_source` holds the same metrics for
    each source's rows (the others: "bundled"), so rows scored differently (E3's without
    tests) are never read only as one mean."""
    rows = sorted(rows, key=_example_order)
    summary = _metrics(env, rows, settings)
    if any(row.get("test_source") for row in rows):
        groups: dict[str, list[dict[str, Any]]] = {}
        for row in rows:
            groups.setdefault(row.get("test_source") or BUNDLED_SOURCE, []).append(row)
        summary["by_source"] = {name: _metrics(env, group, settings) for name, group in sorted(groups.items())}
    if getattr(settings, "classifier", None) is not None:
        summary.update(safety_summary(rows, settings))
    return summary
