"""Test-only sources: their rows join `test` beside the bundled task set whatever their hash,
capped evenly over labels by seed; corpus copies of them never reach train; an eval's summary
scores each source's rows apart (`by_source`), and the table gives each a row of its own."""

from __future__ import annotations

import json
from pathlib import Path

from sv_dagster.core.data.corpora.curate import curate_items
from sv_dagster.core.data.corpora.normalize import capped
from sv_dagster.core.envs import ENVS
from sv_dagster.core.evals.summary import summarize
from sv_dagster.core.reporting.console import eval_table
from sv_shared.corpora import Item


def _e2_item(name: str, clean: bool, *, test_only: bool, source: str = "real") -> Item:
    record = {
        "id": name,
        "filename": f"{name}.tf",
        "content": f'resource "aws_s3_bucket" "{name}" {{}}\n',
        "clean": clean,
    }
    return Item("e2", record, source, f"{source}:{name}", test_only=test_only)


def test_a_cap_keeps_labels_even_and_the_same_rows_for_a_seed():
    items = [_e2_item(f"flagged{i}", False, test_only=True) for i in range(9)]
    items += [_e2_item(f"clean{i}", True, test_only=True) for i in range(3)]
    kept = capped(items, 6, seed=0, env="e2")
    assert [item.record["clean"] for item in kept].count(True) == 3  # all three clean ones, three flagged
    assert [i.record["id"] for i in kept] == [i.record["id"] for i in items if i in kept]  # order kept
    assert capped(list(reversed(items)), 6, seed=0, env="e2") == list(reversed(kept))  # listing order is no input
    assert capped(items, 6, seed=1, env="e2") != kept and len(capped(items, 100, seed=0, env="e2")) == 12


def test_test_only_rows_join_test_beside_the_bundled_set_and_their_copies_never_train():
    bundled = [{"id": "b1", "filename": "b.tf", "content": "resource x {}\n", "clean": True}]
    real = [_e2_item(f"r{i}", i % 2 == 0, test_only=True) for i in range(6)]
    copy = _e2_item("r0", False, test_only=False, source="other")  # the same text, another corpus, listed first
    other = [_e2_item(f"o{i}", True, test_only=False, source="other") for i in range(20)]
    curated = curate_items([copy, *other, *real], bundled_test=bundled, test_schema="e2", sample=True)
    test_ids = [row["id"] for row in curated.files["test"]]
    assert test_ids[0] == "b1" and sorted(test_ids[1:]) == [f"r{i}" for i in range(6)]
    assert all(row["split"] == "test" for row in curated.files["test"][1:])
    assert curated.stats["n_duplicates_of_test_dropped"] == 1  # the copy, whatever the order
    assert curated.stats["test_only_by_source"] == {"real": 6}
    assert "r0" not in {row["id"] for name in ("train", "dev", "corpus_test") for row in curated.files.get(name, [])}
    assert sum(curated.bucket_counts.values()) == 20  # test-only rows are not hash-split


def _row(source: str | None, reward: float, tests: bool) -> dict:
    details = {"patch": {"applied": True}} | ({} if tests else {"tests": "none"})
    rewards = {"functional": 1.0, "security": 1.0 if tests else 0.0, "finding_fixed": 1.0, "no_new_findings": 1.0}
    row = {"reward": reward, "rewards": rewards, "details": details, "error": None, "parsed": {"format_ok": True}}
    return row | ({"test_source": source} if source else {})


def _table(env, summary: dict, run_dir: Path) -> str:
    (run_dir / "metadata.json").write_text(json.dumps({"dataset": {"n_examples": summary["n_examples"]}}))
    return eval_table(env, [({**summary, "model": "heuristic"}, run_dir)])


def test_the_summary_scores_each_source_apart_and_the_table_gives_each_a_row(tmp_path: Path):
    env = ENVS["e3"]
    rows = [_row(None, 2.0, True)] * 3 + [_row("bandit_examples", 0.5, False)] * 2
    settings = env.reward_settings(None)
    summary = summarize(env, rows, settings)
    assert summary["n_examples"] == 5 and summary["test_pass_rate"] == 1.0  # rows without tests are not counted in it
    groups = summary["by_source"]
    assert set(groups) == {"bundled", "bandit_examples"}
    assert groups["bundled"]["mean_reward"] == 2.0 and groups["bundled"]["n_examples"] == 3
    assert groups["bandit_examples"]["mean_reward"] == 0.5 and groups["bandit_examples"]["test_pass_rate"] == "no tests"
    assert "by_source" not in summarize(env, rows[:3], settings)  # the bundled set alone: one row, as before
    table = _table(env, summary, tmp_path).splitlines()
    assert table[0].split()[:3] == ["model", "source", "n"]
    assert table[2].split()[:5] == ["heuristic", "bundled", "3", "2.000", "1.000"]
    assert table[3].split()[:6] == ["heuristic", "bandit_examples", "2", "0.500", "no", "tests"]


def test_a_source_label_the_tools_disagree_with_is_a_line_under_the_table(tmp_path: Path):
    env = ENVS["e2"]

    def scored(source_clean: bool | None, tools_clean: bool, source: str = "terrascan_infrastructure") -> dict:
        details = {"clean": tools_clean, "source_clean": source_clean, "detection": {"f1": 1.0}}
        return {"reward": 1.0, "rewards": {}, "details": details, "error": None, "test_source": source}

    rows = [scored(False, True), scored(False, True), scored(False, False), scored(True, True), scored(True, False)]
    summary = summarize(env, rows, env.reward_settings(None))
    agreement = summary["by_source"]["terrascan_infrastructure"]["label_agreement"]
    assert agreement == {"n": 5, "agree": 2, "source_misconfigured_tools_clean": 2, "source_clean_tools_flag": 1}
    lines = _table(env, summary, tmp_path).splitlines()
    assert lines[-1] == (
        "  terrascan_infrastructure: the source's label and the tools' verdict agree on 2 of 5 files "
        "(source misconfigured, no tool finding: 2; source clean, a tool finding: 1)"
    )
    assert (
        "label_agreement"
        not in summarize(env, [scored(None, True)], env.reward_settings(None))["by_source"]["terrascan_infrastructure"]
    )
