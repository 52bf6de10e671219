"""The study analysis on planted results: a reward that rises between stages is a gain at
p < 0.05, a flat one is not; the policy-change diagnostics; configs and snapshots."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from sv_dagster.training.config import load_training_config
from sv_dagster.training.study import (
    StudyConfigError,
    arm_comparisons,
    commonest_label,
    compare_stages,
    curve_point,
    diagnostics,
    eval_row,
    load_study,
    plot_curves,
    replies_changed,
    seed_overrides,
    study_markdown,
    verdict,
    without_synthetic,
)


def rows(correct: list[bool], *, confidence: float = 0.9, seed: int = 0) -> list[dict]:
    """E1-shaped results rows: each answers Malicious with `confidence`; the gold label makes it
    right or wrong, and the reward components follow."""
    out = []
    for i, ok in enumerate(correct):
        out.append(
            {
                "example_id": f"ex-{i}",
                "answer": "Malicious" if ok else "Benign",
                "parsed": {"label": "Malicious", "confidence": confidence},
                "completion": f"reply {i} {ok} {seed}",
                "rewards": {"accuracy": float(ok), "format": 1.0, "calibration": 1 - (confidence - ok) ** 2},
                "reward": 3.0 * ok + 1.0,
            }
        )
    return out


def by_metric(comparisons: list[dict]) -> dict[str, dict]:
    return {c["metric"]: c for c in comparisons}


def test_a_reward_that_rises_on_planted_examples_is_a_gain():
    rng = random.Random(0)
    before = rows([rng.random() < 0.2 for _ in range(60)])
    after = [dict(row) for row in before]
    for row in after[:40]:  # the candidate gets the first 40 right
        row.update(answer="Malicious", rewards={**row["rewards"], "accuracy": 1.0}, reward=4.0)
    found = by_metric(compare_stages(before, after))
    for metric in ("mean_reward", "accuracy", "reward.accuracy"):
        assert found[metric]["delta"] > 0 and found[metric]["p_value"] < 0.05, found[metric]
        assert found[metric]["verdict"] == "gain"
    assert found["accuracy"]["test"] == "mcnemar_exact" and found["mean_reward"]["test"] == "paired_bootstrap"
    assert found["reward.format"]["verdict"] == "no change detected"  # format was 1 throughout


def test_a_flat_reward_is_not_a_gain():
    before = rows([i % 3 == 0 for i in range(60)])
    after = rows([i % 3 == 0 for i in range(60)], seed=1)  # other words, the same outcomes
    found = by_metric(compare_stages(before, after))
    assert {c["verdict"] for c in found.values()} == {"no change detected"}
    assert found["mean_reward"]["delta"] == 0 and found["mean_reward"]["p_value"] == 1.0


def test_a_small_noisy_difference_is_not_called_a_gain():
    before = rows([i % 2 == 0 for i in range(20)])
    after = rows([i % 2 == 0 or i == 1 for i in range(20)])  # one more right of 20
    found = by_metric(compare_stages(before, after))
    assert found["mean_reward"]["delta"] > 0 and found["mean_reward"]["verdict"] == "no change detected"


def test_ece_is_better_when_lower_and_abstention_has_no_direction():
    overconfident = rows([i % 2 == 0 for i in range(80)], confidence=0.99)
    calibrated = rows([i % 2 == 0 for i in range(80)], confidence=0.5)
    ece = by_metric(compare_stages(overconfident, calibrated))["ece"]
    assert ece["delta"] < -0.4 and ece["verdict"] == "gain"
    assert verdict("ece", 0.2, 0.001) == "loss"
    assert verdict("abstention_rate", 0.3, 0.001) == "changed"
    assert verdict("mean_reward", 0.3, 0.2) == "no change detected"


def test_replies_changed_and_an_unmoved_policy_is_flagged():
    before = rows([True] * 10)
    assert replies_changed(before, before) == 0.0
    assert replies_changed(before, rows([True] * 10, seed=1)) == 1.0
    curve = [{"replies_changed_from_sft": 0.0}, {"replies_changed_from_sft": 0.0}]
    flagged = diagnostics({"reward_std_within_groups": 0.0, "groups_without_signal": 1.0}, curve)
    assert flagged["policy_unchanged"] and flagged["groups_without_signal"] == 1.0
    assert not diagnostics({}, [{"replies_changed_from_sft": 0.25}])["policy_unchanged"]


def test_a_study_config_with_a_typo_names_its_file(tmp_path):
    path = tmp_path / "h9.yaml"
    path.write_text("hypothesis: H9\nenv: e1\ntitle: t\nclaim: c\nseedz: [0]\n")
    with pytest.raises(StudyConfigError, match=r"h9\.yaml: seedz"):
        load_study("h9", path)
    path.write_text("hypothesis: H9\nenv: e9\ntitle: t\nclaim: c\n")
    with pytest.raises(StudyConfigError, match=r"h9\.yaml: env 'e9' has no training config"):
        load_study("h9", path)


def test_each_seed_trains_with_its_seed_and_snapshots():
    study = load_study("h1_e1")
    overrides = seed_overrides(study, 7, grpo_steps=6)
    config = load_training_config("e1", overrides=overrides, profile="tiny")
    assert config.seed == 7 and config.grpo.max_steps == 6 and config.grpo.snapshot_steps == study.eval_every
    assert config.grpo.learning_rate == study.training["grpo"]["learning_rate"]


def _eval_dir(root: Path, name: str, summary: dict) -> str:
    folder = root / "evals" / name
    folder.mkdir(parents=True)
    (folder / "summary.json").write_text(json.dumps(summary))
    return str(folder)


def test_the_report_cites_each_checkpoints_eval_and_passes_the_audit(tmp_path):
    from sv_dagster.core.reporting.audit import audit_report

    def summary_of(n: int, reward: float) -> dict:
        return {
            "n_examples": n,
            "mean_reward": reward,
            "ci95": {"mean_reward": [reward - 0.2, reward + 0.2]},
            "accuracy": 0.5,
            "ece": 0.2,
        }

    def row(name: str, n: int, reward: float) -> dict:  # as the study records it beside its eval
        recorded = {"n": n, "mean_reward": reward, "mean_reward_ci95": [reward - 0.2, reward + 0.2]}
        return {"eval_dir": _eval_dir(tmp_path, name, summary_of(n, reward)), **recorded, "accuracy": 0.5, "ece": 0.2}

    comparison = {
        "metric": "mean_reward",
        "baseline": 1.0,
        "candidate": 1.111,
        "delta": 0.111,
        "ci": [0.01, 0.2],
        "p_value": 0.03,
        "verdict": "gain",
    }
    curve = [
        {
            **row(f"dev-{step}", 21, 1.25),
            "step": step,
            "checkpoint": f"step{step}",
            "replies_changed_from_sft": step / 10,
        }
        for step in (0, 2, 4)
    ]
    summary = {
        "title": "planted",
        "hypothesis": "H1",
        "claim": "c",
        "env": "e1",
        "model": "tiny",
        "grpo_steps": 4,
        "completions_per_step": 8,
        "grpo_learning_rate": 1e-5,
        "eval_every": 2,
        "base_test": row("base", 49, 0.0),
        "base_dev": {"mean_reward": 0.0},
        "references": [{"policy": "always abstain", "n": 49, "mean_reward": 0.65, "accuracy": None, "ece": None}],
        "dev_references": [{"policy": "always abstain", "mean_reward": 0.65}],
        "seeds": [
            {
                "seed": 3,
                "test": {"sft": row("sft", 49, 1.0), "grpo": row("grpo", 49, 1.111)},
                "comparisons": {"grpo_vs_sft": [comparison]},
                "curve": curve,
                "diagnostics": diagnostics({"reward_std_within_groups": 0.31}, [{"replies_changed_from_sft": 0.4}]),
                "grpo": {"wall_seconds": 12.5},
            }
        ],
        "arm_comparisons": {"grpo: b vs a (seed 3)": [comparison]},
        "plot": "dev_curve.png",
        "command": "dagster job execute -j study_planted",
    }
    report_dir = tmp_path / "study"
    report_dir.mkdir()
    text = study_markdown(summary, report_dir)
    assert "| 3 | grpo_vs_sft | mean_reward | 1.000 | 1.111 | +0.111 [+0.010, +0.200] | 0.03 | gain |" in text
    assert (
        "| 3 | grpo | 49 | 1.111 [0.911, 1.311] | 0.500 | 0.200 | [summary.json](../evals/grpo/summary.json) |" in text
    )
    assert "| 3 | 4 | step4 | 0.40 | 21 | 1.250 [1.050, 1.450] |" in text
    assert "| ref: always abstain | 49 | 0.650 |" in text and "not a finding" not in text
    assert "| grpo: b vs a (seed 3) | mean_reward | 1.000 | 1.111 | +0.111 [+0.010, +0.200] | 0.03 | gain |" in text
    (report_dir / "study.md").write_text(text)
    audit = audit_report(report_dir / "study.md")
    assert audit.ok and audit.rows == 6, audit.problems  # base, 2 stages, 3 curve points
    (tmp_path / "evals" / "grpo" / "summary.json").write_text(json.dumps(summary_of(49, 1.5)))
    problems = audit_report(report_dir / "study.md").problems
    assert any("mean reward [95% CI] shows '1.111 [0.911, 1.311]'" in p for p in problems), problems
    recorded = study_markdown(summary, None)  # docs/results.md: from study.json alone, no links
    assert "| 3 | grpo | 49 | 1.111 [0.911, 1.311] | 0.500 | 0.200 |\n" in recorded and "summary.json" not in recorded
    plot_curves(summary, tmp_path / "curve.png")
    assert Path(tmp_path / "curve.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_the_monthly_report_lists_each_studys_paired_tests(tmp_path):
    from sv_dagster.core.reporting.reports import studies_markdown

    folder = tmp_path / "studies" / "h1_e1" / "2026-11-29_abc"
    folder.mkdir(parents=True)
    before, after = rows([i % 4 == 0 for i in range(40)]), rows([i % 4 != 3 for i in range(40)])
    study = {
        "hypothesis": "H1",
        "env": "e1",
        "seeds": [{"seed": 0, "comparisons": {"grpo_vs_sft": compare_stages(before, after)}}],
    }
    (folder / "study.json").write_text(json.dumps(study))
    lines = studies_markdown([folder], tmp_path / "reports" / "monthly" / "2026-11")
    (row,) = [line for line in lines if "| mean_reward |" in line]
    assert row.startswith("| H1 e1 | 0 | grpo_vs_sft | mean_reward | 1.750 | 3.250 | +1.500")
    assert row.endswith("| gain | [study.md](../../../studies/h1_e1/2026-11-29_abc/study.md) |")
    assert not [line for line in lines if "reward.format" in line]  # headline metrics only
    assert "No study ran this month." in studies_markdown([], tmp_path)


def test_arms_train_each_seed_under_their_own_settings_and_compare_against_the_first():
    study = load_study("h2_e1")
    first, other = list(study.arms)
    assert study.runs() == [(arm, seed) for seed in study.seeds for arm in (first, other)]
    assert study.label(other, 1) == f"{other} s1" and load_study("h1_e1").label("main", 1) == "1"
    assert not study.arms[other].synthetic_sft and study.arms[first].synthetic_sft
    rows_ = [{"task_key": "iot23-1"}, {"task_key": "e1-syn-1"}, {}]
    assert without_synthetic(rows_, {"e1-syn-1"}) == [{"task_key": "iot23-1"}, {}]
    flat, better = rows([i % 2 == 0 for i in range(40)]), rows([i % 8 != 7 for i in range(40)])
    found = arm_comparisons(
        study, {(arm, seed): {"sft": flat, "grpo": better if arm == other else flat} for arm, seed in study.runs()}
    )
    assert set(found) == {
        f"{stage}: {other} vs {first} (seed {seed})" for stage in ("sft", "grpo") for seed in study.seeds
    }
    assert by_metric(found[f"grpo: {other} vs {first} (seed 0)"])["mean_reward"]["verdict"] == "gain"
    assert by_metric(found[f"sft: {other} vs {first} (seed 0)"])["mean_reward"]["verdict"] == "no change detected"


def test_a_policy_answering_one_label_everywhere_is_visible():
    mixed = rows([i % 2 == 0 for i in range(10)])  # always Malicious, half of them right
    assert commonest_label(mixed) == {"label": "Malicious", "share": 1.0}
    mixed[0]["parsed"] = {"label": "Benign", "confidence": 0.8}
    mixed[1]["error"] = "timeout"  # not scored, not counted
    assert commonest_label(mixed) == {"label": "Malicious", "share": 8 / 9}
    assert commonest_label([{"parsed": {}}]) is None


def test_an_evals_figures_are_recorded_with_its_folder(tmp_path):
    (tmp_path / "results.jsonl").write_text("\n".join(json.dumps(row) for row in rows([True, False, True])) + "\n")
    summary = {"n_examples": 3, "mean_reward": 3.0, "ci95": {"mean_reward": [1.0, 4.0]}, "accuracy": 0.667}
    recorded = eval_row(summary, tmp_path)
    assert recorded["commonest_label"] == {"label": "Malicious", "share": 1.0}
    assert (recorded["n"], recorded["mean_reward_ci95"], recorded["ece"]) == (3, [1.0, 4.0], None)
    point = curve_point(20, "step20", summary, 0.5, tmp_path)
    assert point["step"] == 20 and point["replies_changed_from_sft"] == 0.5 and point["eval_dir"] == str(tmp_path)
