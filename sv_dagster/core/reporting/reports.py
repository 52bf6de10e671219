"""Weekly and monthly reports and per-environment scoreboards, from eval, tournament and
training folders.

Plain functions over `EvalRecord`s (one eval materialization each), `TournamentRecord`s and
`TrainingRecord`s; the Dagster assets gather the records from the instance, so every number
here traces to a materialization. Every sourced table row links to the JSON it came from and
names the Dagster run and data version of that materialization; the cells are rendered by
`row_cells`, which `sv_dagster.core.reporting.audit` uses again to check a report against the
files it cites. The monthly report's training sums are rendered from the same files.
"""

from __future__ import annotations

import html
import json
import os
import re
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import partial
from pathlib import Path
from typing import Any

from sv_dagster.core.artifacts.redaction import write_redacted
from sv_dagster.core.eval_request import OOD_SPLIT
from sv_dagster.core.evals.runner import read_results
from sv_dagster.core.reporting.figures import REPORT_CI_DIGITS, fmt, with_ci


@dataclass(frozen=True)
class EvalRecord:
    env: str
    model: str
    run_dir: Path
    summary: dict[str, Any]
    timestamp: float
    data_version: str
    run_id: str = ""
    split: str = ""
    """The dataset split scored, from the eval's metadata.json ("" where it has none)."""

    @property
    def when(self) -> str:
        return datetime.fromtimestamp(self.timestamp).strftime("%Y-%m-%d %H:%M")

    @property
    def is_ood(self) -> bool:
        """Scored on the out-of-distribution split: its own series, never compared with test runs."""
        return self.split == OOD_SPLIT


def load_record(
    env: str, model: str, run_dir: Path, timestamp: float, data_version: str, run_id: str = ""
) -> EvalRecord:
    summary = json.loads((run_dir / "summary.json").read_text())
    metadata = run_dir / "metadata.json"
    split = (json.loads(metadata.read_text()).get("dataset") or {}).get("split") if metadata.is_file() else None
    return EvalRecord(env, model, run_dir, summary, timestamp, data_version, run_id, split or "")


def in_distribution(records: Sequence[EvalRecord]) -> list[EvalRecord]:
    return [r for r in records if not r.is_ood]


@dataclass(frozen=True)
class TournamentRecord:
    """One red-team tournament materialization: its folder holds `tournament.json`."""

    timestamp: float
    path: Path
    run_id: str = ""
    data_version: str = ""


RUN_ID_SHOWN = 8  # characters of a Dagster run id in a table; enough to find the run
DATA_VERSION_SHOWN = 12


def source_cells(run_id: str, data_version: str) -> str:
    """The run and data version cells of a row (short forms; the audit compares prefixes)."""
    return f"{run_id[:RUN_ID_SHOWN] or '-'} | {data_version[:DATA_VERSION_SHOWN] or '-'}"


def _link(record: EvalRecord, base: Path) -> str:
    return os.path.relpath(record.run_dir / "summary.json", base)


def _ci_of(summary: dict[str, Any], key: str) -> list[float] | None:
    return (summary.get("ci95") or {}).get(key)


def _delta(now: Any, before: Any) -> str:
    return f"{now - before:+.3f}" if isinstance(now, (int, float)) and isinstance(before, (int, float)) else "-"


def _curve(tournament: dict[str, Any]) -> str:
    return " -> ".join(
        f"{r['attacker_success_rate']:.2f}"
        for r in tournament.get("rounds", [])
        if r.get("attacker_success_rate") is not None
    )


def row_cells(table: str, env: str) -> dict[str, Any]:
    """Column title -> how its cell is rendered from the JSON files the row cites (the eval's
    summary first; the weekly table's previous summary second; a training row's checkpoint.json
    or ablations.json). Reports render these cells with it, and the audit renders them again
    to compare."""
    if table == "tournament":
        return {"success per round": lambda cited: _curve(cited[0])}
    if table == "judges":
        return judge_row_cells()
    if table == "training":
        return training_row_cells()
    if table == "ood":
        return ood_row_cells()
    if table == "study":
        return study_row_cells()
    mean = {
        "mean reward [95% CI]": lambda cited: _with_ci(cited[0].get("mean_reward"), _ci_of(cited[0], "mean_reward"))
    }
    if table == "weekly":
        return {
            **mean,
            "previous": lambda cited: fmt(cited[1].get("mean_reward")) if len(cited) > 1 else "-",
            "delta": lambda cited: (
                _delta(cited[0].get("mean_reward"), cited[1].get("mean_reward")) if len(cited) > 1 else "-"
            ),
            "accuracy [95% CI]": lambda cited: _with_ci(cited[0].get("accuracy"), _ci_of(cited[0], "accuracy")),
            # One table for every environment: "-" where a summary has no such figure.
            **{
                title: lambda cited, key=key: fmt(cited[0].get(key))
                for title, key in CALIBRATION_COLUMNS + TOOL_COLUMNS
            },
        }
    cells = dict(mean)
    for title, key in report_columns(env):
        cells[f"{title} [95% CI]"] = partial(_ci_cell, key)
    cells["n"] = lambda cited: fmt(cited[0].get("n_examples"))
    cells["errors"] = lambda cited: fmt(cited[0].get("n_errors"))
    return cells


def study_row_cells() -> dict[str, Any]:
    """A study report's checkpoint rows, each citing its eval's summary.json."""
    return {
        "n": lambda cited: fmt(cited[0].get("n_examples")),
        "mean reward [95% CI]": lambda cited: _with_ci(cited[0].get("mean_reward"), _ci_of(cited[0], "mean_reward")),
        "accuracy": lambda cited: fmt(cited[0].get("accuracy")),
        "ECE": lambda cited: fmt(cited[0].get("ece")),
    }


def ranked(records: Sequence[EvalRecord]) -> list[EvalRecord]:
    """Latest eval per model, best mean reward first."""
    latest: dict[str, EvalRecord] = {}
    for record in records:
        if record.model not in latest or record.timestamp > latest[record.model].timestamp:
            latest[record.model] = record

    def mean(r: EvalRecord) -> Any:
        return r.summary.get("mean_reward")

    return sorted(latest.values(), key=lambda r: -(mean(r) if mean(r) is not None else float("-inf")))


@dataclass(frozen=True)
class ExampleSet:
    """What an eval was scored on: its split and its exact example ids. Only evals on the
    same set are ranked against each other (a dev run of 28 beside a test run of 56 is no
    comparison)."""

    split: str
    n: int
    digest: str

    @property
    def title(self) -> str:
        return f"split {self.split}, {self.n} examples (set {self.digest})"


def example_set(record: EvalRecord) -> ExampleSet:
    import hashlib

    metadata = record.run_dir / "metadata.json"
    split = (json.loads(metadata.read_text()).get("dataset") or {}).get("split") if metadata.is_file() else None
    results = record.run_dir / "results.jsonl"
    rows = read_results(results, drop=("prompt", "completion", "parsed", "details")) if results.is_file() else []
    ids = sorted(str(row.get("example_id")) for row in rows)
    digest = hashlib.sha256("\n".join(ids).encode()).hexdigest()[:8]
    return ExampleSet(split or "unknown", len(ids), digest)


def comparable_groups(records: Sequence[EvalRecord]) -> list[tuple[ExampleSet, list[EvalRecord]]]:
    """Records grouped by example set, each group `ranked`; the largest group first, the
    out-of-distribution ones after every in-distribution one."""
    groups: dict[ExampleSet, list[EvalRecord]] = defaultdict(list)
    for record in records:
        groups[example_set(record)].append(record)
    ordered = sorted(
        groups.items(),
        key=lambda item: (item[0].split == OOD_SPLIT, -len(item[1]), item[0].split, -item[0].n, item[0].digest),
    )
    return [(key, ranked(group)) for key, group in ordered]


def scoreboard(records: Sequence[EvalRecord]) -> list[dict[str, Any]]:
    """Latest eval per model, ranked by mean reward among evals on the same example set,
    as JSON-ready rows."""
    return [
        {
            "model": r.model,
            "split": key.split,
            "example_set": key.digest,
            "rank": rank,
            "mean_reward": r.summary.get("mean_reward"),
            "mean_reward_ci95": (r.summary.get("ci95") or {}).get("mean_reward"),
            "accuracy": r.summary.get("accuracy"),
            "accuracy_ci95": (r.summary.get("ci95") or {}).get("accuracy"),
            "ece": r.summary.get("ece"),
            "cost_weighted_accuracy": r.summary.get("cost_weighted_accuracy"),
            "n_examples": r.summary.get("n_examples"),
            "n_errors": r.summary.get("n_errors"),
            "total_cost_usd": r.summary.get("total_cost_usd"),
            "sample": r.summary.get("sample"),
            "eval_dir": str(r.run_dir),
            "data_version": r.data_version,
            "run_id": r.run_id,
            # The environment's own headline metrics (E2 finding F1, E3 fix rate, ...) with CIs.
            "metrics": {key: r.summary.get(key) for _, key in report_columns(r.env)},
            "metrics_ci95": {key: (r.summary.get("ci95") or {}).get(key) for _, key in report_columns(r.env)},
        }
        for key, group in comparable_groups(records)
        for rank, r in enumerate(group, start=1)
    ]


CALIBRATION_COLUMNS = (("FNR", "fnr"), ("Brier", "brier"), ("AURC", "aurc"), ("abstain", "abstain_rate"))
"""What reports add for a labelling environment (`positive_label`) beside its headline."""
TOOL_COLUMNS = (("tool calls", "n_tool_calls"),)
"""What reports add for an environment whose answers use tools (`tool_reward`)."""


def headline_columns(env: str) -> list[tuple[str, str]]:
    """(title, summary key) of an environment's headline metrics, mean reward and errors aside."""
    from sv_dagster.core.envs import ENVS

    spec = ENVS.get(env)
    columns = spec.columns if spec is not None else (("accuracy", "accuracy"),)
    return [(title, key) for title, key in columns if key not in ("mean_reward", "n_errors")]


def report_columns(env: str) -> list[tuple[str, str]]:
    """The headline columns plus the calibration (FNR, Brier, AURC, abstention) and tool-call
    figures the environment's summaries carry, each once."""
    from sv_dagster.core.envs import ENVS

    spec = ENVS.get(env)
    columns = headline_columns(env)
    extra = [
        *(CALIBRATION_COLUMNS if spec is not None and spec.positive_label else ()),
        *(TOOL_COLUMNS if spec is not None and spec.tool_reward else ()),
    ]
    shown = {key for _, key in columns}
    return columns + [(title, key) for title, key in extra if key not in shown]


def scoreboard_markdown(env: str, records: Sequence[EvalRecord], base: Path) -> str:
    """One table per example set (`comparable_groups`), one row per model, its cells
    rendered from the summary it links to."""
    cells = row_cells("scoreboard", env)
    lines = [f"# Scoreboard: {env}", ""]
    for key, group in comparable_groups(records):
        lines += [
            f"## {key.title}",
            "",
            "| # | model | " + " | ".join(cells) + " | run | data version | eval |",
            "|---" * (len(cells) + 5) + "|",
        ]
        for rank, r in enumerate(group, start=1):
            lines.append(
                f"| {rank} | {r.model}{' (sample)' if r.summary.get('sample') else ''} | "
                + " | ".join(render([r.summary]) for render in cells.values())
                + f" | {source_cells(r.run_id, r.data_version)} | [summary]({_link(r, base)}) |"
            )
        lines.append("")
    return "\n".join(lines)


def paired_comparisons(records: Sequence[EvalRecord]) -> list[tuple[ExampleSet, EvalRecord, EvalRecord, Any]]:
    """Every pair of models evaluated on the same example set, the better-ranked first,
    compared on the examples both scored: accuracy by McNemar's exact test where the
    answers carry labels, mean reward by a paired bootstrap."""
    from sv_dagster.core.evals.gate import CORE_METRICS
    from sv_dagster.core.evals.stats import paired_compare

    drop = ("prompt", "completion", "details")
    compared = []
    for key, group in comparable_groups(records):
        rows = {r.model: read_results(r.run_dir / "results.jsonl", drop=drop) for r in group}
        for i, first in enumerate(group):
            for second in group[i + 1 :]:
                for metric, (value, binary) in CORE_METRICS.items():
                    result = paired_compare(rows[first.model], rows[second.model], metric, value=value, binary=binary)
                    if result is not None:
                        compared.append((key, first, second, result))
    return compared


def paired_markdown(env: str, records: Sequence[EvalRecord], base: Path) -> list[str]:
    """The `paired_comparisons` of one environment as a table (delta: second minus first)."""
    compared = paired_comparisons(records)
    if not compared:
        return [f"No two models of {env} were evaluated on the same examples.", ""]
    lines = [
        "| env | examples | first | second | metric | n pairs | first | second | delta [95% CI] | p | test | evals |",
        "|---" * 12 + "|",
    ]
    for key, first, second, c in compared:
        links = f"[first]({_link(first, base)}) [second]({_link(second, base)})"
        lines.append(
            f"| {env} | {key.split} {key.n} ({key.digest}) | {first.model} | {second.model} | {c.metric} | "
            f"{c.n_pairs} | {c.baseline:.3f} | {c.candidate:.3f} | {c.delta:+.3f} [{c.ci[0]:+.3f}, {c.ci[1]:+.3f}] | "
            f"{c.p_value:.2g} | {c.test} | {links} |"
        )
    return [*lines, ""]


OOD_METRICS = (("accuracy", "accuracy"), ("F1", "f1"), ("FNR", "fnr"), ("ECE", "ece"))
"""What the OOD section shows of each split, and the gap between them."""
OOD_HEADING = "## Out-of-distribution (OOD)"


def ood_row_cells() -> dict[str, Any]:
    """An OOD row's number cells: the OOD eval's summary is the first file it cites, the
    in-distribution test eval's the second (absent: "-"); gap = OOD minus test."""

    def test_side(render: Any) -> Any:
        return lambda cited: render(cited[1]) if len(cited) > 1 else "-"

    cells: dict[str, Any] = {
        "n (test)": test_side(lambda summary: fmt(summary.get("n_examples"))),
        "n (ood)": lambda cited: fmt(cited[0].get("n_examples")),
    }
    for title, key in OOD_METRICS:
        cells[f"{title} (test)"] = test_side(lambda summary, key=key: _with_ci(summary.get(key), _ci_of(summary, key)))
        cells[f"{title} (ood)"] = lambda cited, key=key: _with_ci(cited[0].get(key), _ci_of(cited[0], key))
        cells[f"{title} gap"] = lambda cited, key=key: (
            _delta(cited[0].get(key), cited[1].get(key)) if len(cited) > 1 else "-"
        )
    return cells


def ood_pairs(records: Sequence[EvalRecord]) -> list[tuple[EvalRecord, EvalRecord | None]]:
    """The latest OOD eval of each (env, model), with the in-distribution eval on the test
    split it is read beside: the one of the same run (same model state, N and seed) when
    there is one, else the latest; None when the model has no test eval among `records`."""
    latest: dict[tuple[str, str], EvalRecord] = {}
    for r in records:
        if r.is_ood and ((r.env, r.model) not in latest or r.timestamp > latest[(r.env, r.model)].timestamp):
            latest[(r.env, r.model)] = r
    pairs = []
    for key in sorted(latest):
        ood = latest[key]
        tests = [r for r in records if (r.env, r.model) == key and r.split == "test"]
        same_run = [r for r in tests if r.run_id and r.run_id == ood.run_id]
        chosen = max(same_run or tests, key=lambda r: r.timestamp, default=None)
        pairs.append((ood, chosen))
    return pairs


def ood_markdown(records: Sequence[EvalRecord], base: Path) -> list[str]:
    """The OOD section: per (env, model), the OOD figures beside the test split's and the gap;
    each row cites the OOD summary, then the test one."""
    lines = [OOD_HEADING, ""]
    pairs = ood_pairs(records)
    if not pairs:
        return [*lines, "No eval on an out-of-distribution split.", ""]
    cells = row_cells("ood", "")
    lines += [
        "Gap = OOD minus test: a negative accuracy or F1 gap, or a positive FNR or ECE gap, is what the model "
        "loses out of distribution. Read it with both n.",
        "",
        "| env | model | " + " | ".join(cells) + " | run | data version | evals |",
        "|---" * (len(cells) + 5) + "|",
    ]
    for ood, test in pairs:
        cited = [ood.summary, *([test.summary] if test else [])]
        links = f"[ood]({_link(ood, base)})" + (f" [test]({_link(test, base)})" if test else "")
        lines.append(_cited_row(ood, cited, cells, links))
    return [*lines, ""]


def _cited_row(record: EvalRecord, cited: list[dict[str, Any]], cells: dict[str, Any], links: str) -> str:
    """A report table row: the cells rendered from the summaries it cites, then its source."""
    return (
        f"| {record.env} | {record.model} | "
        + " | ".join(render(cited) for render in cells.values())
        + f" | {source_cells(record.run_id, record.data_version)} | {links} |"
    )


def _ci_cell(key: str, cited: list[dict[str, Any]]) -> str:
    return _with_ci(cited[0].get(key), _ci_of(cited[0], key))


def _with_ci(value: Any, ci: list[float] | None) -> str:
    return with_ci(value, ci, REPORT_CI_DIGITS)


def _judge_figure(key: str, external: bool) -> Any:
    def render(cited: list[dict[str, Any]]) -> str:
        from sv_dagster.core.evals.judge_validation import external_of

        block = cited[0].get("classifier_agreement") or {}
        report = external_of(block, str(cited[0].get("classifier"))) if external else block
        return "-" if "error" in report else _with_ci(report.get(key), (report.get("ci95") or {}).get(key))

    return render


def judge_row_cells() -> dict[str, Any]:
    """The judges table's cells, from an E5/E6 eval's summary: the judge that scored it, its
    frozen-part kappa, its external figures and whether it is validated."""
    from sv_dagster.core.evals.judge_validation import external_of
    from sv_dagster.core.reporting.judges import validation_label

    def status(cited: list[dict[str, Any]]) -> str:
        block = cited[0].get("classifier_agreement")
        return validation_label(external_of(block, str(cited[0].get("classifier")))).replace("|", "/")

    return {
        "judge": lambda cited: str(cited[0].get("classifier")),
        "frozen kappa [95% CI]": _judge_figure("cohen_kappa", external=False),
        "external accuracy [95% CI]": _judge_figure("accuracy", external=True),
        "external kappa [95% CI]": _judge_figure("cohen_kappa", external=True),
        "external unsafe recall [95% CI]": _judge_figure("unsafe_recall", external=True),
        "status": status,
    }


def judges_markdown(records: Sequence[EvalRecord], base: Path) -> list[str]:
    """The safety judges that scored the reported E5/E6 evals: per eval, the judge's agreement
    on the labelled set's frozen part and on the external test (PyRIT's human labels), with
    "NOT VALIDATED" below kappa 0.4 there, and PyRIT's own scorers' figures on the same rows."""
    from sv_dagster.core.reporting.judges import published_line

    judged = [r for r in records if r.summary.get("classifier")]
    lines = ["## Safety judges", ""]
    if not judged:
        return [*lines, "- no eval in this report was scored by a safety judge", ""]
    cells = row_cells("judges", "")
    lines += [
        "| env | model | " + " | ".join(cells) + " | run | data version | eval |",
        "|---" * (len(cells) + 5) + "|",
    ]
    for r in sorted(judged, key=lambda r: (r.env, r.model)):
        lines.append(_cited_row(r, [r.summary], cells, f"[summary]({_link(r, base)})"))
    published = next((line for r in judged if (line := published_line(r.summary.get("classifier_agreement")))), None)
    return [*lines, "", *([f"- {published}", ""] if published else [])]


def weekly_markdown(
    week: str,
    records: Sequence[EvalRecord],
    previous: dict[tuple[str, str], EvalRecord],
    gates: dict[tuple[str, str], dict[str, Any]],
    base: Path,
    synthetic_volumes: dict[str, int] | None = None,
) -> str:
    """Reward deltas (with CIs) against each model's previous eval, the out-of-distribution
    figures beside the test split's (`ood_markdown`), regressions, synthetic data volumes and
    open risks. `records`: the latest eval of each (env, model) and split kind; the OOD ones
    appear only in their own section (and among themselves in the paired comparisons)."""
    lines = [f"# Weekly report {week}", ""]
    if any(r.summary.get("sample") for r in records):
        lines += ["> Numbers computed on bundled SAMPLE data, not the real corpora.", ""]
    cells = row_cells("weekly", "")
    lines += [
        "## Reward deltas",
        "",
        "| env | model | " + " | ".join(cells) + " | run | data version | eval |",
        "|---" * (len(cells) + 5) + "|",
    ]
    for r in sorted(in_distribution(records), key=lambda r: (r.env, r.model)):
        prev = previous.get((r.env, r.model))
        cited = [r.summary, *([prev.summary] if prev else [])]
        links = f"[summary]({_link(r, base)})" + (f" [previous]({_link(prev, base)})" if prev else "")
        lines.append(_cited_row(r, cited, cells, links))
    lines += ["", *ood_markdown(records, base)]
    lines += ["## Paired comparisons", ""]
    by_env: dict[str, list[EvalRecord]] = defaultdict(list)
    for record in records:
        by_env[record.env].append(record)
    for env in sorted(by_env):
        lines += paired_markdown(env, by_env[env], base)
    lines += judges_markdown(records, base)
    regressions = [(key, gate) for key, gate in gates.items() if gate.get("failures")]
    lines += ["## Regressions", ""]
    compared = [key for key, gate in gates.items() if gate.get("state") != "NO BASELINE"]
    unchecked = sorted(key for key, gate in gates.items() if gate.get("state") == "NO BASELINE")
    lines += [f"- {env} / {model}: {'; '.join(gate['failures'])}" for (env, model), gate in regressions] or [
        f"- none among the {len(compared)} eval(s) compared with a recorded baseline"
    ]
    if unchecked:
        lines.append("- NO BASELINE (nothing compared): " + ", ".join(f"{env} / {model}" for env, model in unchecked))
    lines += ["", "## Synthetic data volumes", ""]
    lines += [f"- {env}: {count} rows" for env, count in (synthetic_volumes or {}).items()] or [
        "- no synthetic batches materialized yet"
    ]
    risks = [
        f"- {r.env} / {r.model}: {r.summary['n_errors']} examples unscored (errors)"
        for r in records
        if r.summary.get("n_errors")
    ] + [
        f"- {r.env} / {r.model}: {r.summary['n_unpriced']} calls without a price"
        for r in records
        if r.summary.get("n_unpriced")
    ]
    if any(r.summary.get("sample") for r in records):
        risks.append("- evals ran on SAMPLE data; point the corpora at the real sources before drawing conclusions")
    lines += ["", "## Open risks", "", *(risks or ["- none noted"]), ""]
    return "\n".join(lines)


def reliability_points(run_dir: Path, n_bins: int = 10) -> list[tuple[float, float, int]]:
    """(mean confidence, accuracy, count) per confidence bin of answered, valid examples."""
    bins: dict[int, list[tuple[float, bool]]] = defaultdict(list)
    for row in read_results(run_dir / "results.jsonl"):
        parsed = row.get("parsed") or {}
        label, confidence = parsed.get("label"), parsed.get("confidence")
        if row.get("error") or label in (None, "Abstain") or confidence is None:
            continue
        bins[min(int(confidence * n_bins), n_bins - 1)].append((confidence, label == row.get("answer")))
    return [
        (sum(c for c, _ in items) / len(items), sum(ok for _, ok in items) / len(items), len(items))
        for _, items in sorted(bins.items())
    ]


CHECKPOINT_RECORD = "checkpoint.json"
"""What a training stage writes in its checkpoint folder (`sv_dagster.training.stages`)."""
ABLATION_RECORD = "ablations.json"
"""What an ablation materialization writes in its folder: each variant's compute."""
TRAINING_FIGURES = ("wall_seconds", "cpu_hours", "gpu_hours")
TRAINING_TOTAL = "Total training compute:"
"""How the monthly report's total line starts; the audit finds it by this."""


@dataclass(frozen=True)
class TrainingRecord:
    """One training materialization: a checkpoint stage or an ablation run. Its numbers are
    read from `record_file` in its folder `path` (the JSON a report row cites); the compute
    fields are what its Dagster metadata recorded."""

    asset: str
    model: str
    env: str
    wall_seconds: float
    cpu_hours: float
    gpu_hours: float
    path: str
    timestamp: float = 0.0
    run_id: str = ""
    data_version: str = ""
    record_file: str = CHECKPOINT_RECORD

    @property
    def source(self) -> Path:
        return Path(self.path) / self.record_file

    @property
    def is_checkpoint(self) -> bool:
        """An ablation's folder holds a report, not weights: never a current checkpoint."""
        return self.record_file == CHECKPOINT_RECORD


def training_figures(record: Mapping[str, Any]) -> dict[str, Any]:
    """Wall seconds, CPU and GPU hours and steps from the JSON a training materialization
    wrote: a stage's checkpoint.json, or an ablation's ablations.json with its variants
    summed, as its materialization's compute is (variants record no steps)."""
    if "variants" in record:
        variants = record.get("variants") or []
        return {key: sum(float(v.get(key) or 0.0) for v in variants) for key in TRAINING_FIGURES} | {"steps": None}
    return {key: record.get(key) for key in (*TRAINING_FIGURES, "steps")}


def _seconds(value: Any) -> str:
    return "-" if value is None else f"{float(value):.1f}"


def _hours(value: Any) -> str:
    return "-" if value is None else f"{float(value):.4f}"


def training_row_cells() -> dict[str, Any]:
    """The number cells of a training row, rendered from the JSON it cites (`row_cells`)."""
    return {
        "wall time (s)": lambda cited: _seconds(training_figures(cited[0])["wall_seconds"]),
        "CPU hours": lambda cited: _hours(training_figures(cited[0])["cpu_hours"]),
        "GPU hours": lambda cited: _hours(training_figures(cited[0])["gpu_hours"]),
        "steps": lambda cited: fmt(training_figures(cited[0])["steps"]),
    }


def _sums(figures: Sequence[Mapping[str, Any]]) -> dict[str, float]:
    return {key: sum(float(f.get(key) or 0.0) for f in figures) for key in TRAINING_FIGURES}


def training_summary_cells(figures: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    """A (model, environment) summary row's cells from the `training_figures` of its training
    rows; the audit renders them again from the files those rows cite."""
    sums = _sums(figures)
    return {
        "runs": str(len(figures)),
        "wall time (s)": _seconds(sums["wall_seconds"]),
        "CPU hours": _hours(sums["cpu_hours"]),
        "GPU hours": _hours(sums["gpu_hours"]),
    }


def training_total(figures: Sequence[Mapping[str, Any]]) -> str:
    """The total line under the training tables, from the `training_figures` of every row."""
    sums = _sums(figures)
    return (
        f"{TRAINING_TOTAL} {len(figures)} runs, {sums['wall_seconds']:.1f} s wall time, "
        f"{sums['cpu_hours']:.4f} CPU hours, {sums['gpu_hours']:.4f} GPU hours."
    )


def training_compute(records: Sequence[TrainingRecord]) -> list[dict[str, Any]]:
    """The records grouped per (model, environment), each group's `records` and
    `checkpoints` (its stage checkpoints' paths) oldest first."""
    groups: dict[tuple[str, str], dict[str, Any]] = {}
    for r in sorted(records, key=lambda r: r.timestamp):
        group = groups.setdefault((r.model, r.env), {"model": r.model, "env": r.env, "records": [], "checkpoints": []})
        group["records"].append(r)
        if r.is_checkpoint:
            group["checkpoints"].append(r.path)
    return [groups[key] for key in sorted(groups)]


def current_checkpoint(row: dict[str, Any], promoted: Mapping[str, str]) -> tuple[str, str] | None:
    """(path, how) of the checkpoint a training summary row shows: the environment's promoted
    one when this row trained it, else the newest this month (not promoted); None when the
    row trained no checkpoint (ablations only)."""
    chosen = promoted.get(row["env"])
    if chosen and chosen in row["checkpoints"]:
        return chosen, "promoted"
    return (row["checkpoints"][-1], "newest, not promoted") if row["checkpoints"] else None


def training_markdown(records: Sequence[TrainingRecord], promoted: Mapping[str, str], base: Path) -> list[str]:
    """One row per training materialization, its numbers rendered from the JSON it links to
    and named by its run and data version; a summary per (model, environment) with its
    current checkpoint; and the total. The summary and total are sums over the rows, which
    the audit recomputes from the files the rows cite."""
    if not records:
        return ["No training ran this month.", ""]
    loaded = []
    for r in sorted(records, key=lambda r: (r.env, r.model, r.timestamp)):
        if not r.source.is_file():
            raise FileNotFoundError(f"{r.source}: the compute record of {r.asset} (run {r.run_id[:8]}) is not there")
        loaded.append((r, json.loads(r.source.read_text(encoding="utf-8"))))
    cells = row_cells("training", "")
    md = [
        "| date | asset | model | env | " + " | ".join(cells) + " | run | data version | record |",
        "|---" * (len(cells) + 7) + "|",
    ]
    for r, data in loaded:
        md.append(
            f"| {datetime.fromtimestamp(r.timestamp):%Y-%m-%d %H:%M} | {r.asset} | {r.model} | {r.env} | "
            + " | ".join(render([data]) for render in cells.values())
            + f" | {source_cells(r.run_id, r.data_version)} | [{r.record_file}]({os.path.relpath(r.source, base)}) |"
        )
    summary = training_summary_cells([])
    md += [
        "",
        "| model | env | " + " | ".join(summary) + " | current checkpoint |",
        "|---" * (len(summary) + 3) + "|",
    ]
    for group in training_compute(records):
        figures = [training_figures(data) for r, data in loaded if (r.model, r.env) == (group["model"], group["env"])]
        current = current_checkpoint(group, promoted)
        shown = (
            f"[{Path(current[0]).name}]({os.path.relpath(current[0], base)}) ({current[1]})"
            if current
            else "- (no checkpoint trained)"
        )
        md.append(
            f"| {group['model']} | {group['env']} | "
            + " | ".join(training_summary_cells(figures).values())
            + f" | {shown} |"
        )
    return [*md, "", training_total([training_figures(data) for _, data in loaded]), ""]


def monthly_report(
    month: str,
    records: Sequence[EvalRecord],
    out_dir: Path,
    tournaments: Sequence[TournamentRecord] = (),
    training: Sequence[TrainingRecord] = (),
    promoted: Mapping[str, str] | None = None,
    studies: Sequence[Path] = (),
) -> dict[str, Path]:
    """Markdown + HTML with PNG plots: reliability diagrams, reward trends per model and
    env, cost per model, the attacker success curves of the month's red-team tournaments, and
    the compute of each training materialization with sums per model and environment (`promoted`: env -> the promoted
    checkpoint's path), the OOD section (`ood_markdown`; the plots show in-distribution
    evals only) and the latest study results (`studies`: study folders). Links are relative
    to `out_dir`, so the folder can be moved.
    Returns the files written."""
    import matplotlib

    matplotlib.use("Agg")  # no display here or on servers
    import matplotlib.pyplot as plt

    out_dir.mkdir(parents=True, exist_ok=True)
    files: dict[str, Path] = {}
    by_env: dict[str, list[EvalRecord]] = defaultdict(list)
    for record in records:
        by_env[record.env].append(record)

    for env, env_records in by_env.items():
        # The plots follow the in-distribution evals; OOD ones are in their own section.
        env_records = in_distribution(env_records)
        curves = {r.model: reliability_points(r.run_dir) for r in ranked(env_records)}
        if any(curves.values()):  # labelling environments (E1, E4); E2/E3 answers carry no label
            fig = reliability_figure(plt, env, curves)
            files[f"reliability_{env}"] = out_dir / f"reliability-{env}.png"
            fig.savefig(files[f"reliability_{env}"], dpi=90, bbox_inches="tight")
            plt.close(fig)

        fig, ax = plt.subplots(figsize=(7, 4))
        for model in sorted({r.model for r in env_records}):
            series = sorted((r for r in env_records if r.model == model), key=lambda r: r.timestamp)
            xs = [datetime.fromtimestamp(r.timestamp) for r in series]
            ys = [r.summary.get("mean_reward") for r in series]
            # matplotlib plots datetimes (and skips None) through its unit converters; its stubs
            # take numbers only
            ax.plot(xs, ys, "o-", label=model)  # type: ignore[arg-type]
        ax.set(ylabel="mean reward", title=f"Reward trend: {env}")
        ax.legend(fontsize=7)
        fig.autofmt_xdate()
        files[f"trend_{env}"] = out_dir / f"reward-trend-{env}.png"
        fig.savefig(files[f"trend_{env}"], dpi=90, bbox_inches="tight")
        plt.close(fig)

    costs: dict[str, float] = defaultdict(float)
    for record in records:
        costs[record.model] += record.summary.get("total_cost_usd") or 0.0
    fig = cost_figure(plt, month, costs)
    files["cost"] = out_dir / "cost-per-model.png"
    fig.savefig(files["cost"], dpi=90, bbox_inches="tight")
    plt.close(fig)

    sample = any(r.summary.get("sample") for r in records)
    md = [f"# Monthly report {month}", ""]
    if sample:
        md += ["> Numbers computed on bundled SAMPLE data, not the real corpora.", ""]
    n_ood = sum(r.is_ood for r in records)
    md += [
        f"{len(records)} eval materializations this month"
        + (f" ({n_ood} on the {OOD_SPLIT} split)." if n_ood else "."),
        "",
    ]
    for env in sorted(by_env):
        md += [scoreboard_markdown(env, by_env[env], out_dir)]
        md += [f"### Paired comparisons: {env}", "", *paired_markdown(env, by_env[env], out_dir)]
        if f"reliability_{env}" in files:
            md.append(f"![reliability]({files[f'reliability_{env}'].name})")
        md += [f"![trend]({files[f'trend_{env}'].name})", ""]
    md += ood_markdown(records, out_dir)
    md += judges_markdown(records, out_dir)
    md += ["## Cost", "", f"![cost]({files['cost'].name})", ""]
    md += [f"- {model}: ${cost:.4f}" for model, cost in sorted(costs.items())]
    md += ["", "## Training compute", ""]
    md += training_markdown(training, promoted or {}, out_dir)
    md += ["", *studies_markdown(studies, out_dir)]
    md += ["", "## Attacker success (red-team tournaments)", ""]
    loaded = [
        (t, json.loads((t.path / "tournament.json").read_text()))
        for t in tournaments
        if (t.path / "tournament.json").exists()
    ]
    if loaded:
        from sv_dagster.core.reporting.judges import judge_name

        cells = row_cells("tournament", "")
        md += [
            "| date | pair | attacker | defender | "
            + " | ".join(cells)
            + " | judged by | run | data version | tournament |",
            "|---" * (len(cells) + 8) + "|",
        ]
        loaded.sort(key=lambda item: item[0].timestamp)
        for t, data in loaded:
            md.append(
                f"| {datetime.fromtimestamp(t.timestamp):%Y-%m-%d} | {data.get('pair') or '-'} "
                f"| {data['attacker']['name']} | {data['defender']['name']} "
                f"| "
                + " | ".join(render([data]) for render in cells.values())
                + f" | {judge_name(str(data.get('classifier')), data.get('classifier_agreement'))} "
                f"| {source_cells(t.run_id, t.data_version)} | [summary]({os.path.relpath(t.path / 'tournament.json', out_dir)}) |"
            )
        fig = attacker_success_figure(plt, [(t.timestamp, data) for t, data in loaded])
        files["attacker_success"] = out_dir / "attacker-success.png"
        fig.savefig(files["attacker_success"], dpi=90, bbox_inches="tight")
        plt.close(fig)
        md += ["", f"![attacker success]({files['attacker_success'].name})", ""]
    else:
        md += ["No tournament ran this month.", ""]
    files["markdown"] = out_dir / "report.md"
    write_redacted(files["markdown"], "\n".join(md))
    files["html"] = out_dir / "report.html"
    write_redacted(files["html"], _html(month, md))
    return files


STUDY_HEADLINE = ("mean_reward", "accuracy", "ece")


def studies_markdown(folders: Sequence[Path], out_dir: Path) -> list[str]:
    """The latest result of each study: its paired tests between stages on the headline
    metrics, per run (arm and seed), and a link to the study's own report."""
    md = ["## Studies", ""]
    loaded = [(folder, json.loads((folder / "study.json").read_text())) for folder in folders]
    loaded = [(folder, data) for folder, data in loaded if data.get("seeds")]
    if not loaded:
        return [*md, "No study ran this month.", ""]
    md += [
        "| study | training run | comparison | metric | baseline | candidate | delta [95% CI] | p | verdict | report |",
        "|---" * 10 + "|",
    ]
    for folder, data in loaded:
        link = f"[study.md]({os.path.relpath(folder / 'study.md', out_dir)})"
        for seed in data["seeds"]:
            for pair, comparisons in seed["comparisons"].items():
                for c in (c for c in comparisons if c["metric"] in STUDY_HEADLINE):
                    md.append(
                        f"| {data['hypothesis']} {data['env']} | {seed.get('label', seed['seed'])} | {pair} | {c['metric']} | "
                        f"{c['baseline']:.3f} | {c['candidate']:.3f} | {c['delta']:+.3f} "
                        f"[{c['ci'][0]:+.3f}, {c['ci'][1]:+.3f}] | {c['p_value']:.3g} | {c['verdict']} | {link} |"
                    )
    return [*md, ""]


_MARKERS = ("o", "s", "^", "D", "v", "P", "X")
_DASHES = ("-", "--", "-.", ":")


def reliability_figure(plt: Any, env: str, curves: Mapping[str, list[tuple[float, float, int]]]) -> Any:
    """Accuracy against confidence per model; each point is labelled with its bin's count."""
    fig, ax = plt.subplots(figsize=(5, 5))
    ax.plot([0, 1], [0, 1], "k--", linewidth=1, label="perfect calibration")
    plotted = [(model, points) for model, points in curves.items() if points]
    for i, (model, points) in enumerate(plotted):
        # Models often agree bin for bin: distinct markers and dashes, slightly transparent,
        # keep every line visible.
        ax.plot(
            [p[0] for p in points],
            [p[1] for p in points],
            marker=_MARKERS[i % len(_MARKERS)],
            linestyle=_DASHES[i % len(_DASHES)],
            alpha=0.75,
            label=f"{model} (n={sum(p[2] for p in points)})",
        )
        for x, y, n in points:
            ax.annotate(str(n), (x, y), textcoords="offset points", xytext=(4, 3 + 7 * (i % 3)), fontsize=6)
    ax.set(
        xlabel="confidence (label: examples in the bin)",
        ylabel="accuracy",
        title=f"Reliability: {env}",
        xlim=(0, 1.05),
        ylim=(0, 1.08),
    )
    ax.legend(fontsize=7)
    return fig


def attacker_success_figure(plt: Any, tournaments: Sequence[tuple[float, dict[str, Any]]]) -> Any:
    """Attacker success per round, one line per tournament; rounds are whole numbers."""
    from matplotlib.ticker import MaxNLocator

    fig, ax = plt.subplots(figsize=(6, 3.5))
    for timestamp, data in tournaments:
        label = (
            f"{datetime.fromtimestamp(timestamp):%m-%d %H:%M} {data['attacker']['name']} vs {data['defender']['name']}"
        )
        rounds = data["rounds"]
        ax.plot([r["round"] for r in rounds], [r["attacker_success_rate"] for r in rounds], "o-", label=label)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set(xlabel="round", ylabel="attacker success", ylim=(-0.02, 1.02), title="Attacker success per round")
    ax.legend(fontsize=6)
    return fig


def cost_figure(plt: Any, month: str, costs: Mapping[str, float]) -> Any:
    """Horizontal bars, one per model with its amount, so long names never overlap; a month
    with no priced call says so instead of drawing empty axes."""
    priced = sorted(((model, cost) for model, cost in costs.items() if cost > 0), key=lambda item: item[1])
    fig, ax = plt.subplots(figsize=(6, max(1.6, 0.35 * len(priced) + 1)))
    if priced:
        bars = ax.barh([model for model, _ in priced], [cost for _, cost in priced])
        ax.bar_label(bars, labels=[f"${cost:.4f}" for _, cost in priced], fontsize=7, padding=2)
        ax.set(xlabel="USD", title=f"Model cost, {month}")
        ax.margins(x=0.25)
        ax.tick_params(axis="y", labelsize=7)
    else:
        unpriced = ", ".join(sorted(costs)) or "none"
        ax.text(
            0.5,
            0.5,
            f"No priced calls in {month}.\nModels evaluated (all free or local): {unpriced}",
            ha="center",
            va="center",
            wrap=True,
            fontsize=8,
            transform=ax.transAxes,
        )
        ax.set_axis_off()
        ax.set_title(f"Model cost, {month}")
    return fig


def _html(month: str, markdown_lines: list[str]) -> str:
    """A self-contained page: tables and images from the markdown lines."""
    body: list[str] = []
    for block in "\n".join(markdown_lines).split("\n"):
        if block.startswith("# "):
            body.append(f"<h1>{html.escape(block[2:])}</h1>")
        elif block.startswith("## "):
            body.append(f"<h2>{html.escape(block[3:])}</h2>")
        elif block.startswith("![") and "](" in block:
            alt, src = block[2:].split("](", 1)
            body.append(f'<img alt="{html.escape(alt)}" src="{html.escape(src.rstrip(")"))}">')
        elif block.startswith("|") and not block.startswith("|---"):
            cells = [c.strip() for c in block.strip("|").split("|")]
            body.append("<tr>" + "".join(f"<td>{_html_cell(cell)}</td>" for cell in cells) + "</tr>")
        elif block.strip():
            body.append(f"<p>{html.escape(block.lstrip('> -'))}</p>")
    page = "\n".join(body)
    return (
        f"<!doctype html><html><head><meta charset='utf-8'><title>Monthly report {html.escape(month)}</title>"
        "<style>body{font-family:sans-serif;max-width:1000px;margin:auto}td{border:1px solid #ccc;padding:2px 6px}"
        f"table{{border-collapse:collapse}}</style></head><body>\n{_close_tables(page)}\n</body></html>\n"
    )


MARKDOWN_LINK = re.compile(r"\[([^\]]*)\]\(([^)\s]+)\)")


def _html_cell(cell: str) -> str:
    """A table cell's text, escaped, with its Markdown links as anchors."""
    out, end = [], 0
    for match in MARKDOWN_LINK.finditer(cell):
        out.append(html.escape(cell[end : match.start()]))
        out.append(f'<a href="{html.escape(match.group(2))}">{html.escape(match.group(1))}</a>')
        end = match.end()
    return "".join(out) + html.escape(cell[end:])


def _close_tables(page: str) -> str:
    """Wrap consecutive <tr> lines in <table> elements."""
    out, in_table = [], False
    for line in page.split("\n"):
        if line.startswith("<tr>") and not in_table:
            out.append("<table>")
            in_table = True
        elif not line.startswith("<tr>") and in_table:
            out.append("</table>")
            in_table = False
        out.append(line)
    if in_table:
        out.append("</table>")
    return "\n".join(out)
