"""Weekly and monthly reports and per-environment scoreboards, from eval folders.

Plain functions over `EvalRecord`s (one eval materialization each); the Dagster assets
gather the records from the instance, so every number here traces to an eval table, and
every table row links to the `summary.json` it came from.
"""

from __future__ import annotations

import html
import json
import os
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from sv_dagster.core.runner import read_results
from sv_dagster.core.redaction import write_redacted


@dataclass(frozen=True)
class EvalRecord:
    env: str
    model: str
    run_dir: Path
    summary: dict[str, Any]
    timestamp: float
    data_version: str

    @property
    def when(self) -> str:
        return datetime.fromtimestamp(self.timestamp).strftime("%Y-%m-%d %H:%M")


def load_record(env: str, model: str, run_dir: Path, timestamp: float, data_version: str) -> EvalRecord:
    summary = json.loads((run_dir / "summary.json").read_text())
    return EvalRecord(env, model, run_dir, summary, timestamp, data_version)


def _fmt(value: Any, digits: int = 3) -> str:
    return "-" if value is None else f"{value:.{digits}f}" if isinstance(value, float) else str(value)


def _ci(record: EvalRecord, metric: str) -> str:
    ci = (record.summary.get("ci95") or {}).get(metric)
    return f"[{ci[0]:.3f}, {ci[1]:.3f}]" if ci else "-"


def _link(record: EvalRecord, base: Path) -> str:
    return os.path.relpath(record.run_dir / "summary.json", base)


def scoreboard(records: Sequence[EvalRecord]) -> list[dict[str, Any]]:
    """Latest eval per model, best mean reward first."""
    latest: dict[str, EvalRecord] = {}
    for record in records:
        if record.model not in latest or record.timestamp > latest[record.model].timestamp:
            latest[record.model] = record
    rows = [
        {
            "model": r.model,
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
            # The environment's own headline metrics (E2 finding F1, E3 fix rate, ...) with CIs.
            "metrics": {key: r.summary.get(key) for _, key in headline_columns(r.env)},
            "metrics_ci95": {key: (r.summary.get("ci95") or {}).get(key) for _, key in headline_columns(r.env)},
        }
        for r in latest.values()
    ]
    return sorted(rows, key=lambda row: -(row["mean_reward"] if row["mean_reward"] is not None else float("-inf")))


def headline_columns(env: str) -> list[tuple[str, str]]:
    """(title, summary key) of an environment's headline metrics, mean reward and errors aside."""
    from sv_dagster.core.envs import ENVS

    spec = ENVS.get(env)
    columns = spec.columns if spec is not None else (("accuracy", "accuracy"),)
    return [(title, key) for title, key in columns if key not in ("mean_reward", "n_errors")]


def scoreboard_markdown(env: str, rows: list[dict[str, Any]], base: Path) -> str:
    columns = headline_columns(env)
    lines = [
        f"# Scoreboard: {env}",
        "",
        "| # | model | mean reward [95% CI] | " + " | ".join(f"{title} [95% CI]" for title, _ in columns)
        + " | n | errors | eval |",
        "|---" * (len(columns) + 6) + "|",
    ]
    for rank, row in enumerate(rows, start=1):
        cells = [_with_ci(row["mean_reward"], row["mean_reward_ci95"])]
        cells += [_with_ci(row["metrics"].get(key), row["metrics_ci95"].get(key)) for _, key in columns]
        lines.append(
            f"| {rank} | {row['model']}{' (sample)' if row['sample'] else ''} | " + " | ".join(cells)
            + f" | {row['n_examples']} | {row['n_errors']} |"
            f" [summary]({os.path.relpath(Path(row['eval_dir']) / 'summary.json', base)}) |"
        )
    return "\n".join(lines) + "\n"


def _with_ci(value: Any, ci: list[float] | None) -> str:
    return f"{_fmt(value)} [{ci[0]:.3f}, {ci[1]:.3f}]" if ci else _fmt(value)


def weekly_markdown(
    week: str,
    records: Sequence[EvalRecord],
    previous: dict[tuple[str, str], EvalRecord],
    gates: dict[tuple[str, str], dict[str, Any]],
    base: Path,
    synthetic_volumes: dict[str, int] | None = None,
) -> str:
    """Reward deltas (with CIs) against each model's previous eval, regressions, synthetic
    data volumes and open risks."""
    lines = [f"# Weekly report {week}", ""]
    if any(r.summary.get("sample") for r in records):
        lines += ["> Numbers computed on bundled SAMPLE data, not the real corpora.", ""]
    lines += [
        "## Reward deltas",
        "",
        "| env | model | mean reward [95% CI] | previous | delta | accuracy [95% CI] | eval |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in sorted(records, key=lambda r: (r.env, r.model)):
        prev = previous.get((r.env, r.model))
        now, before = r.summary.get("mean_reward"), prev.summary.get("mean_reward") if prev else None
        delta = f"{now - before:+.3f}" if now is not None and before is not None else "-"
        lines.append(
            f"| {r.env} | {r.model} | {_fmt(now)} {_ci(r, 'mean_reward')} | {_fmt(before)} | {delta} |"
            f" {_fmt(r.summary.get('accuracy'))} {_ci(r, 'accuracy')} | [summary]({_link(r, base)}) |"
        )
    regressions = [(key, gate) for key, gate in gates.items() if gate.get("failures")]
    lines += ["", "## Regressions", ""]
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
    ] + [f"- {r.env} / {r.model}: {r.summary['n_unpriced']} calls without a price" for r in records if r.summary.get("n_unpriced")]
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


@dataclass(frozen=True)
class TrainingRecord:
    """One training materialization's compute: a checkpoint stage or an ablation run."""

    asset: str
    model: str
    env: str
    wall_seconds: float
    cpu_hours: float
    gpu_hours: float
    path: str


def training_compute(records: Sequence[TrainingRecord]) -> list[dict[str, Any]]:
    """Wall time and CPU/GPU hours summed per (model, environment)."""
    totals: dict[tuple[str, str], dict[str, Any]] = {}
    for r in records:
        row = totals.setdefault((r.model, r.env), {"model": r.model, "env": r.env, "runs": 0, "wall_seconds": 0.0,
                                                   "cpu_hours": 0.0, "gpu_hours": 0.0, "checkpoints": []})
        row["runs"] += 1
        row["wall_seconds"] += r.wall_seconds
        row["cpu_hours"] += r.cpu_hours
        row["gpu_hours"] += r.gpu_hours
        row["checkpoints"].append(r.path)
    return [totals[key] for key in sorted(totals)]


def monthly_report(
    month: str, records: Sequence[EvalRecord], out_dir: Path, tournaments: Sequence[tuple[float, Path]] = (),
    training: Sequence[TrainingRecord] = (),
) -> dict[str, Path]:
    """Markdown + HTML with PNG plots: reliability diagrams, reward trends per model and
    env, cost per model, the attacker success curves of the month's E5<->E6 tournaments
    (`tournaments`: (timestamp, tournament folder)), and the training compute per model and
    environment. Returns the files written."""
    import matplotlib

    matplotlib.use("Agg")  # no display here or on servers
    import matplotlib.pyplot as plt

    out_dir.mkdir(parents=True, exist_ok=True)
    files: dict[str, Path] = {}
    by_env: dict[str, list[EvalRecord]] = defaultdict(list)
    for record in records:
        by_env[record.env].append(record)

    for env, env_records in by_env.items():
        latest = {row["model"]: row for row in scoreboard(env_records)}
        curves = {model: reliability_points(Path(row["eval_dir"])) for model, row in latest.items()}
        if any(curves.values()):  # labelling environments (E1, E4); E2/E3 answers carry no label
            fig, ax = plt.subplots(figsize=(5, 5))
            ax.plot([0, 1], [0, 1], "k--", linewidth=1, label="perfect calibration")
            for model, points in curves.items():
                if points:
                    ax.plot([p[0] for p in points], [p[1] for p in points], "o-", label=model)
            ax.set(xlabel="confidence", ylabel="accuracy", title=f"Reliability: {env}", xlim=(0, 1), ylim=(0, 1))
            ax.legend(fontsize=7)
            files[f"reliability_{env}"] = out_dir / f"reliability-{env}.png"
            fig.savefig(files[f"reliability_{env}"], dpi=90, bbox_inches="tight")
            plt.close(fig)

        fig, ax = plt.subplots(figsize=(7, 4))
        for model in sorted({r.model for r in env_records}):
            series = sorted((r for r in env_records if r.model == model), key=lambda r: r.timestamp)
            xs = [datetime.fromtimestamp(r.timestamp) for r in series]
            ys = [r.summary.get("mean_reward") for r in series]
            ax.plot(xs, ys, "o-", label=model)
        ax.set(ylabel="mean reward", title=f"Reward trend: {env}")
        ax.legend(fontsize=7)
        fig.autofmt_xdate()
        files[f"trend_{env}"] = out_dir / f"reward-trend-{env}.png"
        fig.savefig(files[f"trend_{env}"], dpi=90, bbox_inches="tight")
        plt.close(fig)

    costs: dict[str, float] = defaultdict(float)
    for record in records:
        costs[record.model] += record.summary.get("total_cost_usd") or 0.0
    fig, ax = plt.subplots(figsize=(6, 3))
    ax.bar(list(costs), list(costs.values()))
    ax.set(ylabel="USD", title=f"Model cost, {month}")
    files["cost"] = out_dir / "cost-per-model.png"
    fig.savefig(files["cost"], dpi=90, bbox_inches="tight")
    plt.close(fig)

    sample = any(r.summary.get("sample") for r in records)
    md = [f"# Monthly report {month}", ""]
    if sample:
        md += ["> Numbers computed on bundled SAMPLE data, not the real corpora.", ""]
    md += [f"{len(records)} eval materializations this month.", ""]
    for env in sorted(by_env):
        md += [scoreboard_markdown(env, scoreboard(by_env[env]), out_dir)]
        if f"reliability_{env}" in files:
            md.append(f"![reliability]({files[f'reliability_{env}'].name})")
        md += [f"![trend]({files[f'trend_{env}'].name})", ""]
    md += ["## Cost", "", f"![cost]({files['cost'].name})", ""]
    md += [f"- {model}: ${cost:.4f}" for model, cost in sorted(costs.items())]
    md += ["", "## Training compute", ""]
    compute = training_compute(training)
    if compute:
        md += ["| model | env | runs | wall time (s) | CPU hours | GPU hours | latest checkpoint |", "|---|---|---|---|---|---|---|"]
        md += [f"| {row['model']} | {row['env']} | {row['runs']} | {row['wall_seconds']:.1f} | {row['cpu_hours']:.4f} | "
               f"{row['gpu_hours']:.4f} | [{Path(row['checkpoints'][-1]).name}]({row['checkpoints'][-1]}) |" for row in compute]
        md += ["", f"Total: {sum(r['cpu_hours'] for r in compute):.4f} CPU hours, "
                   f"{sum(r['gpu_hours'] for r in compute):.4f} GPU hours.", ""]
    else:
        md += ["No training ran this month.", ""]
    md += ["", "## Attacker success (E5<->E6 tournaments)", ""]
    loaded = [(ts, path, json.loads((path / "tournament.json").read_text())) for ts, path in tournaments
              if (path / "tournament.json").exists()]
    if loaded:
        fig, ax = plt.subplots(figsize=(6, 3.5))
        md += ["| date | attacker | defender | success per round | judged by | tournament |", "|---|---|---|---|---|---|"]
        for ts, path, data in sorted(loaded, key=lambda item: item[0]):
            label = f"{datetime.fromtimestamp(ts):%m-%d %H:%M} {data['attacker']['name']} vs {data['defender']['name']}"
            rounds = data["rounds"]
            ax.plot([r["round"] for r in rounds], [r["attacker_success_rate"] for r in rounds], "o-", label=label)
            curve = " -> ".join(f"{r['attacker_success_rate']:.2f}" for r in rounds if r["attacker_success_rate"] is not None)
            md.append(f"| {datetime.fromtimestamp(ts):%Y-%m-%d} | {data['attacker']['name']} | {data['defender']['name']} "
                      f"| {curve} | {data.get('classifier')} | [summary]({path / 'tournament.json'}) |")
        ax.set(xlabel="round", ylabel="attacker success", ylim=(-0.02, 1.02), title="Attacker success per round")
        ax.legend(fontsize=6)
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
            rendered = []
            for cell in cells:
                if cell.startswith("[summary](") and cell.endswith(")"):
                    href = html.escape(cell[len("[summary]("):-1])
                    rendered.append(f'<td><a href="{href}">summary</a></td>')
                else:
                    rendered.append(f"<td>{html.escape(cell)}</td>")
            body.append("<tr>" + "".join(rendered) + "</tr>")
        elif block.strip():
            body.append(f"<p>{html.escape(block.lstrip('> -'))}</p>")
    page = "\n".join(body)
    return (
        f"<!doctype html><html><head><meta charset='utf-8'><title>Monthly report {html.escape(month)}</title>"
        "<style>body{font-family:sans-serif;max-width:1000px;margin:auto}td{border:1px solid #ccc;padding:2px 6px}"
        f"table{{border-collapse:collapse}}</style></head><body>\n{_close_tables(page)}\n</body></html>\n"
    )


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
