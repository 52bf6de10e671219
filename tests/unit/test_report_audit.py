"""Reports name the run and data version of every sourced row, link relative to themselves,
and `audit` renders each row again from the files it cites: a changed summary, a changed
file beside it, or a missing one is a mismatch naming the line; a moved report still audits.
Also the monthly report's current checkpoint and its plots."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import matplotlib
import pytest

from sv_dagster.core.artifacts.provenance import content_hash
from sv_dagster.core.reporting.audit import audit_report, main_audit, table_rows
from sv_dagster.core.reporting.reports import (
    EvalRecord,
    TournamentRecord,
    TrainingRecord,
    attacker_success_figure,
    cost_figure,
    load_record,
    monthly_report,
    reliability_figure,
    scoreboard,
    scoreboard_markdown,
    weekly_markdown,
)

matplotlib.use("Agg")
import matplotlib.pyplot as plt

RUN_A, RUN_B, RUN_OLD = "aaaa1111-0000-4000-8000-000000000001", "bbbb2222-0000-4000-8000-000000000002", "cccc3333-0000"


def write_eval(folder: Path, model: str, mean_reward: float, accuracy: float, cost: float = 0.0) -> Path:
    folder.mkdir(parents=True)
    rows = [
        {
            "example_id": f"x{i}",
            "answer": "Anomalous",
            "parsed": {"label": "Anomalous", "confidence": 0.9},
            "error": None,
        }
        for i in range(4)
    ]
    (folder / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    summary = {
        "model": model,
        "mean_reward": mean_reward,
        "accuracy": accuracy,
        "n_examples": 4,
        "n_errors": 0,
        "ci95": {"mean_reward": [mean_reward - 0.1, mean_reward + 0.1], "accuracy": [accuracy - 0.2, 1.0]},
        "total_cost_usd": cost,
        "ece": 0.05,
    }
    (folder / "summary.json").write_text(json.dumps(summary))
    return folder


def record(folder: Path, model: str, timestamp: float, run_id: str) -> EvalRecord:
    return load_record("e1", model, folder, timestamp, content_hash([folder]), run_id)


def write_checkpoint(folder: Path, wall: float, cpu: float, gpu: float = 0.0, steps: int | None = None) -> Path:
    """A finished stage's folder: weights and the checkpoint.json the stage writes."""
    folder.mkdir(parents=True)
    (folder / "model.safetensors").write_bytes(b"weights")
    record = {"stage": "sft", "env": "e1", "wall_seconds": wall, "cpu_hours": cpu, "gpu_hours": gpu, "steps": steps}
    (folder / "checkpoint.json").write_text(json.dumps(record, indent=2, sort_keys=True) + "\n")
    return folder


def training_record(
    asset: str, folder: Path, timestamp: float, run_id: str, record_file: str = "checkpoint.json"
) -> TrainingRecord:
    # The metadata's compute figures are deliberately not the files': rows show what the files say.
    return TrainingRecord(
        asset, "tiny", "e1", -1.0, -1.0, -1.0, str(folder), timestamp, run_id, content_hash([folder]), record_file
    )


@pytest.fixture
def outputs(tmp_path: Path) -> Path:
    root = tmp_path / "outputs"
    old = write_eval(root / "evals" / "e1--heuristic" / "old", "heuristic", 0.40, 0.50)
    new = write_eval(root / "evals" / "e1--heuristic" / "new", "heuristic", 0.55, 0.75)
    oracle = write_eval(root / "evals" / "e1--oracle" / "r1", "oracle", 1.0, 1.0, cost=0.0123)
    records = [
        record(old, "heuristic", 1_000, RUN_OLD),
        record(new, "heuristic", 2_000, RUN_A),
        record(oracle, "oracle", 2_000, RUN_B),
    ]
    latest = [records[1], records[2]]
    weekly = root / "reports" / "weekly"
    weekly.mkdir(parents=True)
    (weekly / "2026-W48.md").write_text(
        weekly_markdown("2026-W48", latest, {("e1", "heuristic"): records[0]}, {}, weekly)
    )
    board = root / "reports" / "scoreboard"
    board.mkdir(parents=True)
    (board / "e1.md").write_text(scoreboard_markdown("e1", latest, board))
    tournament = root / "tournaments" / "t1"
    tournament.mkdir(parents=True)
    (tournament / "tournament.json").write_text(
        json.dumps(
            {
                "attacker": {"name": "heuristic"},
                "defender": {"name": "heuristic"},
                "classifier": "rules",
                "rounds": [{"round": 1, "attacker_success_rate": 0.5}, {"round": 2, "attacker_success_rate": 0.25}],
            }
        )
    )
    stage1 = write_checkpoint(root / "checkpoints" / "rlft_stage1" / "e1" / "run1", 10.5, 0.0125, steps=20)
    sft = write_checkpoint(root / "checkpoints" / "sft" / "e1" / "run0", 4.25, 0.005, steps=8)
    ablation = root / "ablations" / "e1" / "a1"
    ablation.mkdir(parents=True)
    variants = [
        {"experiment": "lr", "wall_seconds": 3.0, "cpu_hours": 0.001, "gpu_hours": 0.0},
        {"experiment": "kl", "wall_seconds": 2.0, "cpu_hours": 0.002, "gpu_hours": 0.0},
    ]
    (ablation / "ablations.json").write_text(json.dumps({"env": "e1", "variants": variants}))
    training = [
        training_record("checkpoint/e1/sft", sft, 1_000, RUN_A),
        training_record("checkpoint/e1/rlft_stage1", stage1, 900, RUN_B),
        # The newest of the month, but an ablation's folder is never the current checkpoint.
        training_record("ablation/e1", ablation, 1_100, RUN_A, record_file="ablations.json"),
    ]
    monthly_report(
        "2026-11",
        records,
        root / "reports" / "monthly" / "2026-11",
        [TournamentRecord(1_500, tournament, RUN_B, content_hash([tournament]))],
        training,
        promoted={"e1": str(stage1)},
    )
    return root


REPORTS = ["reports/weekly/2026-W48.md", "reports/scoreboard/e1.md", "reports/monthly/2026-11/report.md"]


@pytest.mark.parametrize("report", REPORTS)
def test_every_sourced_row_names_its_run_and_data_version_and_audits_clean(outputs: Path, report: str, capsys):
    path = outputs / report
    # Training summary rows are sums over the rows above them, checked as such (below).
    rows = [row for row in table_rows(path.read_text()) if row.table not in ("other", "training summary")]
    assert rows, "no sourced rows"
    for row in rows:
        assert row.cells["run"] in (RUN_A[:8], RUN_B[:8]), row
        assert len(row.cells["data version"]) == 12
    result = audit_report(path)
    assert result.ok, result.problems
    assert result.rows == len(rows) and result.cells >= 3 * len(rows)
    assert main_audit(str(path)) == 0
    assert capsys.readouterr().out.splitlines()[-1].startswith(f"OK: {path}: {len(rows)} sourced rows")


def test_weekly_rows_cite_the_previous_eval_behind_their_delta(outputs: Path):
    (row,) = [
        r
        for r in table_rows((outputs / REPORTS[0]).read_text())
        if r.table == "weekly" and r.cells["model"] == "heuristic"
    ]
    assert row.cells["previous"] == "0.400" and row.cells["delta"] == "+0.150"
    assert "[previous](../../evals/e1--heuristic/old/summary.json)" in row.cells["eval"]


@pytest.mark.parametrize("report", REPORTS)
def test_a_summary_changed_after_the_report_fails_the_audit_naming_line_and_cell(outputs: Path, report: str, capsys):
    summary = outputs / "evals" / "e1--heuristic" / "new" / "summary.json"
    data = json.loads(summary.read_text())
    data["mean_reward"] = 0.95
    summary.write_text(json.dumps(data))
    path = outputs / report
    result = audit_report(path)
    line = next(r.line for r in table_rows(path.read_text()) if r.cells.get("model") == "heuristic")
    assert any(
        p.startswith(f"{path.name}:{line}: mean reward [95% CI] shows '0.550 [0.450, 0.650]'") and "'0.950" in p
        for p in result.problems
    ), result.problems
    assert any(p.startswith(f"{path.name}:{line}: data version") for p in result.problems)
    assert main_audit(str(path)) == 1
    out = capsys.readouterr().out
    assert out.splitlines()[-1].startswith(f"FAILED: {path}") and "MISMATCH" in out


def test_a_changed_file_beside_the_summary_fails_on_its_hash_alone(outputs: Path):
    with (outputs / "evals" / "e1--oracle" / "r1" / "results.jsonl").open("a") as handle:
        handle.write('{"id": "forged"}\n')
    problems = audit_report(outputs / REPORTS[1]).problems
    assert len(problems) == 1 and "data version" in problems[0] and "e1--oracle" in problems[0]


def test_a_missing_source_and_an_unreadable_report_are_reported(outputs: Path, capsys):
    shutil.rmtree(outputs / "tournaments" / "t1")
    problems = audit_report(outputs / "reports" / "monthly" / "2026-11").problems
    assert len(problems) == 1 and "tournament.json, which is not there" in problems[0]
    assert main_audit(str(outputs / "reports" / "nope.md")) == 2
    assert capsys.readouterr().err.strip() == f"error: {outputs / 'reports' / 'nope.md'}: no such report"


def test_a_moved_outputs_folder_still_audits_because_links_are_relative(outputs: Path, tmp_path: Path):
    moved = tmp_path / "published"
    shutil.move(outputs, moved)
    for report in REPORTS:
        assert audit_report(moved / report).ok
    html = (moved / "reports" / "monthly" / "2026-11" / "report.html").read_text()
    assert str(tmp_path) not in html and str(tmp_path) not in (moved / REPORTS[2]).read_text()
    assert '<a href="../../../evals/e1--oracle/r1/summary.json">summary</a>' in html


def test_the_scoreboard_ranks_only_evals_on_the_same_split_and_examples(tmp_path: Path):
    def eval_on(name: str, split: str, ids: list[str], mean_reward: float) -> EvalRecord:
        folder = tmp_path / name
        folder.mkdir()
        (folder / "metadata.json").write_text(json.dumps({"dataset": {"split": split}}))
        (folder / "results.jsonl").write_text("".join(json.dumps({"example_id": i}) + "\n" for i in ids))
        (folder / "summary.json").write_text(json.dumps({"mean_reward": mean_reward, "n_examples": len(ids)}))
        return load_record("e1", name, folder, 1_000, content_hash([folder]), RUN_A)

    test_ids = [f"t{i}" for i in range(4)]
    records = [
        eval_on("heuristic", "test", test_ids, 0.5),
        eval_on("oracle", "test", test_ids, 0.9),
        eval_on("dev-run", "dev", ["d0", "d1"], 1.0),  # the best number, on other examples
        eval_on("subset", "test", test_ids[:2], 0.95),
    ]
    rows = scoreboard(records)
    ranks = {r["model"]: (r["split"], r["rank"]) for r in rows}
    assert ranks == {"oracle": ("test", 1), "heuristic": ("test", 2), "dev-run": ("dev", 1), "subset": ("test", 1)}
    text = scoreboard_markdown("e1", records, tmp_path)
    titles = [line for line in text.splitlines() if line.startswith("## ")]
    assert len(titles) == 3 and titles[0].startswith("## split test, 4 examples (set ")
    assert {t.split(" (set")[0] for t in titles[1:]} == {"## split dev, 2 examples", "## split test, 2 examples"}
    (tmp_path / "board.md").write_text(text)
    audit = audit_report(tmp_path / "board.md")
    assert audit.ok and audit.rows == 4


def test_the_monthly_report_shows_the_promoted_checkpoint_as_current(outputs: Path):
    path = outputs / REPORTS[2]
    (summary,) = [row for row in table_rows(path.read_text()) if row.table == "training summary"]
    # The SFT checkpoint and the ablation are newer this month, but the stage-1 one is promoted.
    assert summary.cells["current checkpoint"] == "[run1](../../../checkpoints/rlft_stage1/e1/run1) (promoted)"
    assert audit_report(path).ok


def test_without_a_promotion_the_newest_checkpoint_is_shown_and_said_to_be_unpromoted(tmp_path: Path):
    new = write_checkpoint(tmp_path / "new", 1.0, 0.1)
    old = write_checkpoint(tmp_path / "old", 1.0, 0.1)
    ablation = tmp_path / "ablation"
    ablation.mkdir()
    (ablation / "ablations.json").write_text(json.dumps({"variants": []}))
    training = [
        training_record("checkpoint/e1/sft", new, 2, RUN_A),
        training_record("checkpoint/e1/sft", old, 1, RUN_B),
        training_record("ablation/e1", ablation, 3, RUN_A, record_file="ablations.json"),
    ]
    files = monthly_report("2026-11", [], tmp_path / "report", training=training)
    (summary,) = [r for r in table_rows(files["markdown"].read_text()) if r.table == "training summary"]
    assert summary.cells["current checkpoint"] == "[new](../new) (newest, not promoted)"
    assert audit_report(files["markdown"]).ok


def training_rows(path: Path) -> dict[str, object]:
    return {row.cells["asset"]: row for row in table_rows(path.read_text()) if row.table == "training"}


def test_training_rows_cite_their_json_run_and_data_version_and_are_checked_like_eval_rows(outputs: Path, capsys):
    path = outputs / REPORTS[2]
    rows = training_rows(path)
    assert set(rows) == {"checkpoint/e1/sft", "checkpoint/e1/rlft_stage1", "ablation/e1"}
    sft, ablation = rows["checkpoint/e1/sft"], rows["ablation/e1"]
    assert sft.cells["record"] == "[checkpoint.json](../../../checkpoints/sft/e1/run0/checkpoint.json)"
    assert sft.cells["run"] == RUN_A[:8]
    assert content_hash([outputs / "checkpoints" / "sft" / "e1" / "run0"]).startswith(sft.cells["data version"])
    # The files' numbers, not the metadata's (-1 in the records): an ablation's variants summed.
    assert [sft.cells[c] for c in ("wall time (s)", "CPU hours", "GPU hours", "steps")] == [
        "4.2",
        "0.0050",
        "0.0000",
        "8",
    ]
    assert ablation.cells["record"] == "[ablations.json](../../../ablations/e1/a1/ablations.json)"
    assert [ablation.cells[c] for c in ("wall time (s)", "CPU hours", "steps")] == ["5.0", "0.0030", "-"]
    result = audit_report(path)
    assert result.ok, result.problems
    assert {line for line, _, _ in result.checked} >= {row.line for row in rows.values()}
    assert result.derived == 2  # the (tiny, e1) summary and the total line
    other = [row for row in table_rows(path.read_text()) if row.table == "other"]
    assert result.unsourced == len(other) and not any("CPU hours" in row.cells for row in other)
    assert main_audit(str(path)) == 0
    out = capsys.readouterr().out
    assert f"  line {sft.line:<4} checkpoint/e1/sft (tiny)  run {RUN_A[:8]}" in out
    assert "2 training sums recomputed from them, 0 mismatches" in out


def test_a_tampered_checkpoint_json_fails_the_audit_naming_the_row_the_summary_and_the_total(outputs: Path, capsys):
    path = outputs / REPORTS[2]
    line = training_rows(path)["checkpoint/e1/rlft_stage1"].line
    record = outputs / "checkpoints" / "rlft_stage1" / "e1" / "run1" / "checkpoint.json"
    data = json.loads(record.read_text())
    data["cpu_hours"] = 0.5
    record.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
    assert main_audit(str(path)) == 1
    mismatches = [m for m in capsys.readouterr().out.splitlines() if m.startswith("MISMATCH ")]
    (cell,) = [m for m in mismatches if m.startswith(f"MISMATCH report.md:{line}: CPU hours")]
    assert cell.startswith(f"MISMATCH report.md:{line}: CPU hours shows '0.0125' but checkpoint.json in ")
    assert cell.endswith("gives '0.5000'")
    assert any(m.startswith(f"MISMATCH report.md:{line}: data version") for m in mismatches)
    # The sums are rendered again from the files the rows cite, so they move with it.
    assert any("CPU hours shows '0.0205' but the 3 training rows' files sum to '0.5080'" in m for m in mismatches)
    total = next(n for n, text in enumerate(path.read_text().splitlines(), 1) if text.startswith("Total training"))
    assert any(m.startswith(f"MISMATCH report.md:{total}: shows 'Total training compute: 3 runs") for m in mismatches)


def test_the_training_total_and_summary_are_recomputed_from_the_rows_checked(outputs: Path):
    path = outputs / REPORTS[2]
    lines = path.read_text().splitlines()
    total = next(n for n, text in enumerate(lines, 1) if text.startswith("Total training compute:"))
    assert lines[total - 1] == "Total training compute: 3 runs, 19.8 s wall time, 0.0205 CPU hours, 0.0000 GPU hours."
    # An edited total fails on its own line.
    edited = [
        text.replace("0.0205 CPU hours", "0.0105 CPU hours") if n == total else text for n, text in enumerate(lines, 1)
    ]
    path.write_text("\n".join(edited) + "\n")
    (problem,) = audit_report(path).problems
    assert (
        problem.startswith(f"report.md:{total}: shows ")
        and "files give 'Total training compute: 3 runs, 19.8 s wall time, 0.0205 CPU" in problem
    )
    # A row dropped from the table (its run's compute hidden) no longer adds up.
    dropped = training_rows(path)["ablation/e1"].line
    path.write_text("\n".join(text for n, text in enumerate(lines, 1) if n != dropped) + "\n")
    problems = audit_report(path).problems
    assert any("runs shows '3' but the 2 training rows' files sum to '2'" in p for p in problems)
    assert any(p.startswith(f"report.md:{total - 1}: shows 'Total training compute: 3 runs") for p in problems)


def test_a_current_checkpoint_no_row_trained_fails_the_audit(outputs: Path):
    path = outputs / REPORTS[2]
    text = path.read_text()
    path.write_text(
        text.replace(
            "[run1](../../../checkpoints/rlft_stage1/e1/run1) (promoted)", "[a1](../../../ablations/e1/a1) (promoted)"
        )
    )
    (problem,) = audit_report(path).problems
    assert "current checkpoint" in problem and "is not among the tiny / e1 rows' checkpoints" in problem


def test_cost_plot_draws_one_labelled_bar_per_priced_model_or_says_none_was_priced():
    fig = cost_figure(plt, "2026-11", {"a-very-long-model-name": 0.25, "b": 0.0, "c": 1.5})
    (ax,) = fig.axes
    assert [t.get_text() for t in ax.get_yticklabels()] == ["a-very-long-model-name", "c"]
    assert sorted(t.get_text() for t in ax.texts) == ["$0.2500", "$1.5000"]
    plt.close(fig)
    fig = cost_figure(plt, "2026-11", {"heuristic": 0.0, "oracle": 0.0})
    (ax,) = fig.axes
    assert (
        not ax.patches
        and "No priced calls in 2026-11" in ax.texts[0].get_text()
        and "heuristic, oracle" in ax.texts[0].get_text()
    )
    plt.close(fig)


def test_attacker_success_ticks_are_whole_rounds():
    rounds = [{"round": r, "attacker_success_rate": 0.1 * r} for r in (1, 2, 3)]
    fig = attacker_success_figure(
        plt, [(0.0, {"attacker": {"name": "a"}, "defender": {"name": "d"}, "rounds": rounds})]
    )
    fig.canvas.draw()
    ticks = [t for t in fig.axes[0].get_xticks() if 1 <= t <= 3]
    assert ticks == [1.0, 2.0, 3.0]
    plt.close(fig)


def test_reliability_points_carry_their_bin_counts_and_overlapping_lines_stay_distinct():
    same = [(0.55, 0.5, 12), (0.95, 0.9, 30)]
    fig = reliability_figure(plt, "e1", {"heuristic": same, "heuristic_copy": same})
    ax = fig.axes[0]
    lines = ax.get_lines()[1:]  # after the diagonal
    assert len({(line.get_marker(), line.get_linestyle()) for line in lines}) == 2
    assert sorted(t.get_text() for t in ax.texts) == ["12", "12", "30", "30"]
    assert [t.get_text() for t in ax.get_legend().get_texts()][1:] == ["heuristic (n=42)", "heuristic_copy (n=42)"]
    plt.close(fig)


def test_reports_compare_models_on_the_same_examples_with_paired_tests(tmp_path: Path):
    """Two models on the same 40 examples: the weekly and monthly reports show their paired
    deltas with CI and p (McNemar on accuracy, bootstrap on reward), and E1's calibration
    columns; a model on other examples is compared with neither."""

    def eval_of(name: str, correct: list[bool], ids: list[str]) -> EvalRecord:
        folder = tmp_path / "evals" / name
        folder.mkdir(parents=True)
        rows = [
            {
                "example_id": i,
                "answer": "Malicious",
                "parsed": {"label": "Malicious" if ok else "Benign", "confidence": 0.9},
                "reward": 1.0 if ok else 0.0,
                "error": None,
            }
            for i, ok in zip(ids, correct)
        ]
        (folder / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
        (folder / "metadata.json").write_text(json.dumps({"dataset": {"split": "test"}}))
        summary = {"mean_reward": sum(correct) / len(correct), "n_examples": len(ids), "fnr": 0.25, "brier": 0.1}
        (folder / "summary.json").write_text(json.dumps(summary))
        return load_record("e1", name, folder, 1_000, content_hash([folder]), RUN_A)

    ids = [f"t{i}" for i in range(40)]
    weak = eval_of("weak", [i < 16 for i in range(40)], ids)
    strong = eval_of("strong", [i < 36 for i in range(40)], ids)
    elsewhere = eval_of("elsewhere", [True] * 10, [f"d{i}" for i in range(10)])
    weekly = weekly_markdown("2026-W48", [weak, strong, elsewhere], {}, {}, tmp_path)
    header = next(line for line in weekly.splitlines() if line.startswith("| env | model |"))
    assert all(f"| {title} |" in header for title in ("FNR", "Brier", "AURC", "abstain", "tool calls"))
    pairs = [line for line in weekly.splitlines() if line.startswith("| e1 | test 40 ")]
    assert len(pairs) == 2 and all("| strong | weak |" in line for line in pairs)  # elsewhere: no pair
    accuracy = next(line for line in pairs if "| accuracy |" in line)
    assert "| 40 | 0.900 | 0.400 | -0.500 [" in accuracy and "mcnemar" in accuracy.lower()
    assert float(accuracy.split("|")[10]) < 0.001  # 20 discordant pairs, all one way
    monthly = monthly_report("2026-11", [weak, strong, elsewhere], tmp_path / "monthly")
    text = monthly["markdown"].read_text()
    assert "### Paired comparisons: e1" in text and "| strong | weak | mean_reward | 40 |" in text
    board = next(line for line in text.splitlines() if line.startswith("| # | model |"))
    assert "| FNR [95% CI] |" in board and "| Brier [95% CI] |" in board and "| tool calls" not in board
    assert audit_report(tmp_path / "monthly" / "report.md").ok


def test_training_records_carry_the_run_data_version_and_record_file_of_each_materialization(tmp_path: Path):
    import dagster as dg

    from sv_dagster.assets.reports import training_records
    from sv_dagster.instance import DATA_VERSION_TAG

    stage = write_checkpoint(tmp_path / "checkpoints" / "sft", 1.0, 0.25)
    ablation = tmp_path / "ablations" / "e1"
    ablation.mkdir(parents=True)
    (ablation / "ablations.json").write_text(json.dumps({"variants": []}))
    instance = dg.DagsterInstance.ephemeral()
    for key, folder in ((["checkpoint", "e1", "sft"], stage), (["ablation", "e1"], ablation)):
        instance.report_runless_asset_event(
            dg.AssetMaterialization(
                asset_key=key,
                metadata={
                    "cpu_hours": 0.25,
                    "wall_seconds": 1.0,
                    "base_model": "tiny",
                    "env": "e1",
                    "artifact_path": dg.MetadataValue.path(str(folder)),
                },
                tags={DATA_VERSION_TAG: content_hash([folder])},
            )
        )
    keys = [dg.AssetKey(["checkpoint", "e1", "sft"]), dg.AssetKey(["ablation", "e1"])]
    records, moved = training_records(instance, keys, 0.0, 4e9)
    assert moved == {}
    by_asset = {r.asset: r for r in records}
    assert (
        by_asset["checkpoint/e1/sft"].source == stage / "checkpoint.json"
        and by_asset["checkpoint/e1/sft"].is_checkpoint
    )
    assert by_asset["ablation/e1"].source == ablation / "ablations.json" and not by_asset["ablation/e1"].is_checkpoint
    assert all(r.data_version == content_hash([Path(r.path)]) for r in records)  # runless events: no run id
    files = monthly_report("2026-11", [], tmp_path / "report", training=records)
    assert audit_report(files["markdown"]).ok


def test_lineage_of_a_training_row_names_its_asset_and_a_summary_row_points_to_the_rows(outputs: Path):
    from sv_dagster.instance.lineage import LineageError, report_row_asset

    path = outputs / REPORTS[2]
    sft = training_rows(path)["checkpoint/e1/sft"]
    assert report_row_asset(path, sft.line) == ("checkpoint/e1/sft", RUN_A[:8], sft.cells["data version"])
    (summary,) = [row for row in table_rows(path.read_text()) if row.table == "training summary"]
    with pytest.raises(LineageError, match=f":{summary.line} is a sum over the training rows above it"):
        report_row_asset(path, summary.line)


def _judged_eval(folder: Path, external_kappa: float) -> Path:
    """An E5 eval's folder whose summary carries its judge's frozen and external agreement."""
    write_eval(folder, "heuristic", 0.5, 0.5)
    summary = json.loads((folder / "summary.json").read_text())
    external = {
        "n": 395,
        "accuracy": 0.55,
        "cohen_kappa": external_kappa,
        "unsafe_recall": 0.08,
        "ci95": {"accuracy": [0.5, 0.6], "cohen_kappa": [0.03, 0.12], "unsafe_recall": [0.05, 0.13]},
    }
    summary["classifier"] = "judge@1"
    summary["classifier_agreement"] = {
        "cohen_kappa": 0.788,
        "ci95": {"cohen_kappa": [0.56, 0.95]},
        "external": {
            "judges": {"judge@1": external},
            "published": {
                "n_scorers": 26,
                "accuracy_min": 0.585,
                "accuracy_max": 0.896,
                "best": {"chain": "Best(Scorer)", "accuracy": 0.896, "recall": 0.9},
            },
        },
    }
    (folder / "summary.json").write_text(json.dumps(summary))
    return folder


def test_reports_show_each_judge_with_its_external_figures_and_the_audit_checks_them(tmp_path: Path):
    folder = _judged_eval(tmp_path / "evals" / "e5--heuristic" / "r1", external_kappa=0.071)
    r = load_record("e5", "heuristic", folder, 1.0, content_hash([folder]), RUN_A)
    report = tmp_path / "reports" / "weekly" / "report.md"
    report.parent.mkdir(parents=True)
    report.write_text(weekly_markdown("2026-W48", [r], {}, {}, report.parent))
    text = report.read_text()
    (row,) = [row for row in table_rows(text) if row.table == "judges"]
    assert row.cells["judge"] == "judge@1" and row.cells["frozen kappa [95% CI]"] == "0.788 [0.560, 0.950]"
    assert row.cells["external kappa [95% CI]"] == "0.071 [0.030, 0.120]"
    assert row.cells["status"] == "NOT VALIDATED: external kappa 0.071 < 0.4"
    assert "PyRIT's own 26 scorers on the same rows" in text
    assert audit_report(report).ok
    # The external figure changed after the report was written: the audit names the cell.
    summary = json.loads((folder / "summary.json").read_text())
    summary["classifier_agreement"]["external"]["judges"]["judge@1"]["cohen_kappa"] = 0.65
    (folder / "summary.json").write_text(json.dumps(summary))
    problems = audit_report(report).problems
    assert any("external kappa [95% CI] shows '0.071" in p for p in problems)
    assert any("status shows 'NOT VALIDATED" in p and "'validated: external kappa 0.650" in p for p in problems)
