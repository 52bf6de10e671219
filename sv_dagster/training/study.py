"""Studies: one hypothesis of the research plan tested by training, as plain functions.

A study (`configs/studies/<name>.yaml`) names a hypothesis, an environment and the training
settings it changes, and optionally arms (conditions compared side by side). Each run, an
arm and a seed, trains base -> SFT -> GRPO, draws a dev-reward curve from
policy snapshots every `eval_every` GRPO steps, and evaluates base, SFT and GRPO once on the
test split. Stages are compared on the same test examples, per reward component: paired
differences with 95% bootstrap CIs and McNemar (binary outcomes) or paired-bootstrap
p-values. Whether the policy moved at all is measured beside them (rewards' spread within
GRPO groups, and how many dev replies differ from the SFT policy's): a GRPO that changes
nothing is a bug to find, not a finding.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from sv_dagster.core.artifacts.paths import CONFIGS_DIR
from sv_dagster.core.evals.gate import CORE_METRICS
from sv_dagster.core.evals.stats import PairedComparison, paired_compare, paired_ece
from sv_shared.errors import UserError

STUDIES_DIR = CONFIGS_DIR / "studies"
ALPHA = 0.05
STAGE_PAIRS = (("sft", "base"), ("grpo", "sft"), ("grpo", "base"))
"""(candidate, baseline): what SFT adds, what GRPO adds after it, and both together."""
LOWER_IS_BETTER = frozenset({"ece"})
NO_DIRECTION = frozenset({"abstention_rate"})
"""Reported, never called a gain or a loss: abstaining more is right only when unsure."""


class StudyConfigError(UserError, ValueError):
    """A study config that cannot run; the message names the file."""


class Arm(BaseModel):
    """One condition a study trains under; a study with several compares them seed by seed."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    synthetic_sft: bool = True
    """False: SFT leaves out the rows sft_data took from the synthetic batch."""
    training: dict[str, Any] = {}
    """Merged over the study's own `training` for this arm."""


class StudyConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    hypothesis: str
    env: str
    title: str
    claim: str
    seeds: list[int] = Field([0, 1], min_length=1)
    eval_every: int = Field(20, ge=1)
    """GRPO steps between dev-curve points (policy snapshots)."""
    dev_limit: int | None = Field(None, ge=1)
    """Dev examples per curve point (drawn with seed 42, the same each point); None: all."""
    training: dict[str, Any] = {}
    """Merged over the environment's training config (under its profile) for every seed."""
    arms: dict[str, Arm] = Field(default_factory=lambda: {"main": Arm()}, min_length=1)
    """The conditions; the first is the one the others are compared against."""

    def runs(self) -> list[tuple[str, int]]:
        """(arm, seed) in training order: each seed through every arm."""
        return [(arm, seed) for seed in self.seeds for arm in self.arms]

    def label(self, arm: str, seed: int) -> str:
        return str(seed) if len(self.arms) == 1 else f"{arm} s{seed}"


def study_path(name: str) -> Path:
    return STUDIES_DIR / f"{name}.yaml"


def list_studies() -> list[str]:
    return sorted(p.stem for p in STUDIES_DIR.glob("*.yaml"))


def load_study(name: str, path: Path | None = None) -> StudyConfig:
    path = path or study_path(name)
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        study = StudyConfig.model_validate(data)
    except OSError as exc:
        raise StudyConfigError(f"{path}: cannot read the study config ({exc.strerror})") from exc
    except yaml.YAMLError as exc:
        raise StudyConfigError(f"{path}: not YAML: {exc}") from exc
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors())
        raise StudyConfigError(f"{path}: {problems}") from exc
    from sv_dagster.training.catalog import training_envs

    if study.env not in training_envs():
        raise StudyConfigError(f"{path}: env {study.env!r} has no training config (have: {', '.join(training_envs())})")
    return study


def seed_overrides(
    study: StudyConfig, seed: int, *, arm: str | None = None, grpo_steps: int | None = None
) -> dict[str, Any]:
    """The training overrides of one run: the study's, its arm's, the seed, snapshots every
    `eval_every` steps, and a step count when the run config sets one."""
    from sv_dagster.training.config import merge_config

    grpo: dict[str, Any] = {"snapshot_steps": study.eval_every}
    if grpo_steps is not None:
        grpo["max_steps"] = grpo_steps
    own = study.arms[arm].training if arm else {}
    return merge_config(merge_config(study.training, own), {"seed": seed, "grpo": grpo})


def without_synthetic(sft_rows: list[dict[str, Any]], synthetic_ids: set[str]) -> list[dict[str, Any]]:
    """SFT rows minus those made from the synthetic batch's tasks (their `task_key`)."""
    return [row for row in sft_rows if row.get("task_key") not in synthetic_ids]


def arm_comparisons(
    study: StudyConfig, rows: dict[tuple[str, int], dict[str, list[dict[str, Any]]]]
) -> dict[str, list[dict[str, Any]]]:
    """Each other arm against the first, seed by seed, stage by stage (SFT and GRPO) on the
    same test examples; `rows`: (arm, seed) -> stage -> results rows."""
    first, *others = study.arms
    found = {}
    for arm in others:
        for seed in study.seeds:
            for stage in ("sft", "grpo"):
                key = f"{stage}: {arm} vs {first} (seed {seed})"
                found[key] = compare_stages(rows[(first, seed)][stage], rows[(arm, seed)][stage])
    return found


def _component(name: str) -> Callable[[dict[str, Any]], float | None]:
    return lambda row: (row.get("rewards") or {}).get(name)


def _abstained(row: dict[str, Any]) -> float | None:
    parsed = row.get("parsed") or {}
    return float(parsed["label"] == "Abstain") if "label" in parsed else None


def _binary(rows: Sequence[dict[str, Any]], value: Callable[[dict[str, Any]], float | None]) -> bool:
    return all(v in (0.0, 1.0) for row in rows if (v := value(row)) is not None)


def compare_stages(baseline_rows: list[dict[str, Any]], candidate_rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Candidate minus baseline on the examples both scored: the total reward, label accuracy,
    abstention and ECE where the environment labels, and each reward component."""
    metrics: dict[str, tuple[Callable[[dict[str, Any]], float | None], bool]] = dict(CORE_METRICS)
    metrics["abstention_rate"] = (_abstained, True)
    names = sorted({name for row in [*baseline_rows, *candidate_rows] for name in row.get("rewards") or {}})
    for name in names:
        value = _component(name)
        metrics[f"reward.{name}"] = (value, _binary([*baseline_rows, *candidate_rows], value))
    found: list[PairedComparison] = []
    for name, (value, binary) in metrics.items():
        comparison = paired_compare(baseline_rows, candidate_rows, name, value=value, binary=binary)
        if comparison is not None:
            found.append(comparison)
    ece = paired_ece(baseline_rows, candidate_rows)
    if ece is not None:
        found.append(ece)
    return [{**c.as_dict(), "verdict": verdict(c.metric, c.delta, c.p_value)} for c in found]


def verdict(metric: str, delta: float, p_value: float, alpha: float = ALPHA) -> str:
    """gain / loss when the paired test rejects no difference at `alpha`, else `no change
    detected`; metrics without a better direction are `changed` when the test rejects."""
    if p_value >= alpha or delta == 0:
        return "no change detected"
    if metric in NO_DIRECTION:
        return "changed"
    better = delta < 0 if metric in LOWER_IS_BETTER else delta > 0
    return "gain" if better else "loss"


def replies_changed(before: list[dict[str, Any]], after: list[dict[str, Any]]) -> float | None:
    """The fraction of shared examples whose reply text differs (greedy decoding: any
    difference is a changed policy)."""
    a = {row["example_id"]: row.get("completion") for row in before if row.get("error") is None}
    b = {row["example_id"]: row.get("completion") for row in after if row.get("error") is None}
    common = [key for key in a if key in b]
    if not common:
        return None
    return sum(a[key] != b[key] for key in common) / len(common)


def _figures(summary: dict[str, Any], run_dir: Path) -> dict[str, Any]:
    """What the study records of an eval summary, and where the eval is."""
    return {
        "n": summary.get("n_examples"),
        "mean_reward": summary.get("mean_reward"),
        "mean_reward_ci95": (summary.get("ci95") or {}).get("mean_reward"),
        "accuracy": summary.get("accuracy"),
        "ece": summary.get("ece"),
        "components": summary.get("mean_rewards") or {},
        "eval_dir": str(run_dir),
    }


def curve_point(step: int, label: str, summary: dict[str, Any], changed: float | None, run_dir: Path) -> dict[str, Any]:
    return {"step": step, "checkpoint": label, **_figures(summary, run_dir), "replies_changed_from_sft": changed}


def diagnostics(signal: dict[str, Any] | None, curve: list[dict[str, Any]]) -> dict[str, Any]:
    """Did the policy move? GRPO's own signal and the dev replies after the last step."""
    signal = signal or {}
    last = curve[-1]["replies_changed_from_sft"] if curve else None
    return {
        "reward_std_within_groups": signal.get("reward_std_within_groups"),
        "groups_without_signal": signal.get("groups_without_signal"),
        "kl": signal.get("kl"),
        "dev_replies_changed": last,
        "policy_unchanged": last == 0.0,
    }


def _commonest(row: dict[str, Any]) -> str:
    found = row.get("commonest_label")
    return "-" if not found else f"{found['label']} {found['share']:.2f}"


def _num(value: Any, digits: int = 3) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def _cells(row: dict[str, Any], report_dir: Path | None) -> list[str]:
    """A checkpoint row's number cells. With `report_dir`: rendered from its eval's
    summary.json (as `sv-dagster audit` renders them again), then the link to that file and
    the eval folder's data version. Without: from the figures study.json recorded."""
    from sv_dagster.core.artifacts.provenance import content_hash
    from sv_dagster.core.reporting.reports import row_cells

    if report_dir is None:
        keys = ("n", "mean_reward", "accuracy", "ece")
        data = {"n_examples": row["n"], "ci95": {"mean_reward": row["mean_reward_ci95"]}}
        data |= {key: row[key] for key in keys[1:]}
        return [render([data]) for render in row_cells("study", "").values()]
    path = Path(row["eval_dir"]) / "summary.json"
    data = json.loads(path.read_text(encoding="utf-8"))
    cells = [render([data]) for render in row_cells("study", "").values()]
    return [*cells, f"[summary.json]({os.path.relpath(path, report_dir)})", content_hash([path.parent])[:12]]


def _row(*cells: Any) -> str:
    return "| " + " | ".join(str(c) for c in cells) + " |"


def _label(run: dict[str, Any]) -> str:
    return str(run.get("label", run["seed"]))


def study_markdown(summary: dict[str, Any], report_dir: Path | None) -> str:
    """The study report. In the study's folder (`report_dir`) checkpoint rows render their
    figures from the eval summaries they link (`sv-dagster audit` renders them again); with
    None, from study.json alone (docs/results.md). The rest is read from `summary`."""
    s = summary
    figures = "n | mean reward [95% CI] | accuracy | ECE" + (" | summary | data version" if report_dir else "")
    rule = "|---" * (6 if report_dir else 4)
    lines = [
        f"# {s['title']}",
        "",
        f"**{s['hypothesis']}:** {s['claim']}",
        "",
        f"Environment {s['env']}; model `{s['model']}`; runs {', '.join(_label(x) for x in s['seeds'])}; "
        f"GRPO {s['grpo_steps']} steps of {s['completions_per_step']} completions (learning rate "
        f"{s['grpo_learning_rate']}), a dev point every {s['eval_every']} steps; the test split evaluated once, "
        f"at the end. Data: {'SAMPLE rows' if s.get('sample') else 'the dataset as curated'}.",
        "",
        "## Test split, each stage once",
        "",
        f"| training run | checkpoint | {figures} |",
        "|---|---" + rule + "|",
        _row("-", "base", *_cells(s["base_test"], report_dir)),
    ]
    for seed in s["seeds"]:
        for stage in ("sft", "grpo"):
            lines.append(_row(_label(seed), stage, *_cells(seed["test"][stage], report_dir)))
    lines += ["", "Reference policies on the same test examples (from the base model's eval summary):", ""]
    lines += ["| policy | n | mean reward | accuracy | ECE |", "|---|---|---|---|---|"]
    for ref in s.get("references") or []:
        lines.append(
            _row(f"ref: {ref['policy']}", ref["n"], _num(ref["mean_reward"]), _num(ref["accuracy"]), _num(ref["ece"]))
        )
    lines += [
        "",
        "## Paired differences between stages (test split)",
        "",
        f"Candidate minus baseline on the same examples; 95% bootstrap CI; gain or loss only where p < {ALPHA} "
        "(McNemar for binary outcomes, else a paired bootstrap). ECE: lower is better.",
        "",
        "| training run | comparison | metric | baseline | candidate | delta [95% CI] | p | verdict |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for seed in s["seeds"]:
        for pair, comparisons in seed["comparisons"].items():
            for c in comparisons:
                lines.append(
                    f"| {_label(seed)} | {pair} | {c['metric']} | {c['baseline']:.3f} | {c['candidate']:.3f} | "
                    f"{c['delta']:+.3f} [{c['ci'][0]:+.3f}, {c['ci'][1]:+.3f}] | {c['p_value']:.3g} | {c['verdict']} |"
                )
    if s.get("arm_comparisons"):
        lines += [
            "",
            "## Between arms (test split)",
            "",
            "| comparison | metric | first arm | other arm | delta [95% CI] | p | verdict |",
            "|---|---|---|---|---|---|---|",
        ]
        for pair, comparisons in s["arm_comparisons"].items():
            for c in comparisons:
                lines.append(
                    f"| {pair} | {c['metric']} | {c['baseline']:.3f} | {c['candidate']:.3f} | "
                    f"{c['delta']:+.3f} [{c['ci'][0]:+.3f}, {c['ci'][1]:+.3f}] | {c['p_value']:.3g} | {c['verdict']} |"
                )
    lines += [
        "",
        "## Dev curve (every few GRPO steps; step 0 is the SFT checkpoint)",
        "",
        f"| training run | step | checkpoint | replies changed from SFT | {figures} |",
        "|---|---|---|---" + rule + "|",
    ]
    for seed in s["seeds"]:
        for p in seed["curve"]:
            changed = _num(p["replies_changed_from_sft"], 2)
            lines.append(_row(_label(seed), p["step"], p["checkpoint"], changed, *_cells(p, report_dir)))
    lines += [
        "",
        "## Did the policy move?",
        "",
        "| training run | reward std within groups | groups without signal | KL | dev replies changed | "
        "commonest test answer: SFT | GRPO | GRPO wall s |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for seed in s["seeds"]:
        d = seed["diagnostics"]
        lines.append(
            f"| {_label(seed)} | {_num(d['reward_std_within_groups'])} | {_num(d['groups_without_signal'], 2)} | "
            f"{_num(d['kl'])} | {_num(d['dev_replies_changed'], 2)} | {_commonest(seed['test']['sft'])} | "
            f"{_commonest(seed['test']['grpo'])} | {_num(seed['grpo']['wall_seconds'], 1)} |"
        )
    unchanged = [_label(seed) for seed in s["seeds"] if seed["diagnostics"]["policy_unchanged"]]
    if unchanged:
        lines += ["", f"**Run {', '.join(unchanged)}: GRPO left every dev reply unchanged; not a finding.**"]
    lines += ["", f"Plot: `{Path(s['plot']).name}`. Reproduce: `{s['command']}`.", ""]
    return "\n".join(lines)


def plot_curves(summary: dict[str, Any], path: Path) -> None:
    """Dev mean reward against GRPO steps, one line per seed, with the base model's and the
    reference policies' dev rewards as horizontal lines."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4.0), dpi=100)
    for seed in summary["seeds"]:
        points = [p for p in seed["curve"] if p.get("mean_reward") is not None]
        ax.plot(
            [p["step"] for p in points],
            [p["mean_reward"] for p in points],
            marker="o",
            label=_label(seed) if "arm" in seed and len(summary.get("arms") or []) > 1 else f"seed {seed['seed']}",
        )
    if summary.get("base_dev", {}).get("mean_reward") is not None:
        ax.axhline(summary["base_dev"]["mean_reward"], color="grey", linestyle=":", label="base")
    for i, ref in enumerate(summary.get("dev_references") or []):
        if ref.get("mean_reward") is not None:
            ax.axhline(
                ref["mean_reward"], linestyle="--", linewidth=0.8, color=f"C{7 + i}", label=f"ref: {ref['policy']}"
            )
    ax.set_xlabel("GRPO step (0: the SFT checkpoint)")
    ax.set_ylabel("dev mean reward")
    ax.set_title(f"{summary['hypothesis']} on {summary['env']}: {summary['model']}")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def render_study(folder: Path) -> str:
    """study.md and dev_curve.png written again from the folder's study.json."""
    summary = json.loads((folder / "study.json").read_text(encoding="utf-8"))
    return render_summary(summary, folder)


def render_summary(summary: dict[str, Any], folder: Path) -> str:
    plot_curves(summary, folder / "dev_curve.png")
    markdown = study_markdown(summary, folder)
    (folder / "study.md").write_text(markdown, encoding="utf-8")
    return markdown


def commonest_label(rows: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The label answered most often and its share of the scored answers: a policy that
    answers one label everywhere reads nothing of the input. None where nothing is labelled."""
    labels = [
        str(label)
        for row in rows
        if row.get("error") is None and (label := (row.get("parsed") or {}).get("label")) is not None
    ]
    if not labels:
        return None
    top = max(sorted(set(labels)), key=labels.count)
    return {"label": top, "share": labels.count(top) / len(labels)}


def eval_row(summary: dict[str, Any], run_dir: Path) -> dict[str, Any]:
    """An eval's figures as the study records them, with its commonest answer label."""
    from sv_dagster.core.evals.runner import read_results

    return {"commonest_label": commonest_label(read_results(run_dir / "results.jsonl")), **_figures(summary, run_dir)}


def reference_rows(summary: dict[str, Any]) -> list[dict[str, Any]]:
    """The trivial policies an eval scored on the same examples."""
    return [
        {
            "policy": p["policy"],
            "n": p.get("n_examples"),
            "mean_reward": p.get("mean_reward"),
            "accuracy": p.get("accuracy"),
            "ece": p.get("ece"),
        }
        for p in (summary.get("reference_policies") or {}).get("policies", [])
    ]
