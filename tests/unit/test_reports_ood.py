"""The out-of-distribution section of the weekly and monthly reports: OOD figures beside the
test split's with the gap, cited and audited like every other row, and OOD evals never
ranked, plotted or delta'd against test evals."""

from __future__ import annotations

import json
from pathlib import Path

from sv_dagster.core.artifacts.provenance import content_hash
from sv_dagster.core.reporting.audit import audit_report
from sv_dagster.core.reporting.reports import (
    OOD_HEADING,
    EvalRecord,
    load_record,
    monthly_report,
    ood_pairs,
    scoreboard,
    weekly_markdown,
)

RUN_WEEKLY, RUN_NIGHTLY = "aaaa1111-0000-4000-8000-000000000001", "bbbb2222-0000-4000-8000-000000000002"


def write_eval(folder: Path, split: str, n: int, accuracy: float, f1: float, fnr: float, ece: float) -> Path:
    folder.mkdir(parents=True)
    (folder / "metadata.json").write_text(json.dumps({"dataset": {"split": split, "n_examples": n}}))
    rows = [{"example_id": f"{split}-{i}", "answer": "Malicious", "parsed": {"label": "Malicious"}} for i in range(n)]
    (folder / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    summary = {
        "mean_reward": accuracy,
        "accuracy": accuracy,
        "f1": f1,
        "fnr": fnr,
        "ece": ece,
        "n_examples": n,
        "n_errors": 0,
        "ci95": {"accuracy": [accuracy - 0.1, accuracy + 0.05]},
    }
    (folder / "summary.json").write_text(json.dumps(summary))
    return folder


def record(folder: Path, model: str, timestamp: float, run_id: str) -> EvalRecord:
    return load_record("e1", model, folder, timestamp, content_hash([folder]), run_id)


def section(text: str) -> list[str]:
    return text.split(OOD_HEADING, 1)[1].split("\n## ", 1)[0].splitlines()


def test_ood_rows_show_both_splits_the_gap_and_n_and_audit_clean(tmp_path: Path):
    evals = tmp_path / "outputs" / "evals"
    weekly_test = record(
        write_eval(evals / "h" / RUN_WEEKLY, "test", 10, 0.8, 0.75, 0.2, 0.1), "heuristic", 1_000, RUN_WEEKLY
    )
    weekly_ood = record(
        write_eval(evals / "h" / f"{RUN_WEEKLY}-ood", "ood", 10, 0.5, 0.4, 0.6, 0.3), "heuristic", 1_001, RUN_WEEKLY
    )
    nightly_test = record(
        write_eval(evals / "h" / RUN_NIGHTLY, "test", 49, 0.9, 0.85, 0.1, 0.05), "heuristic", 2_000, RUN_NIGHTLY
    )
    assert weekly_ood.is_ood and not weekly_test.is_ood and weekly_ood.split == "ood"

    # The OOD eval is read beside the test eval of its own run, not the newer nightly one.
    assert ood_pairs([weekly_test, weekly_ood, nightly_test]) == [(weekly_ood, weekly_test)]

    out = tmp_path / "outputs" / "reports" / "monthly" / "2026-11"
    files = monthly_report("2026-11", [weekly_test, weekly_ood, nightly_test], out)
    text = files["markdown"].read_text()
    assert "3 eval materializations this month (1 on the ood split)." in text
    lines = section(text)
    header = next(line for line in lines if line.startswith("| env |"))
    assert [c.strip() for c in header.strip("|").split("|")] == [
        "env",
        "model",
        "n (test)",
        "n (ood)",
        *(f"{m} {side}" for m in ("accuracy", "F1", "FNR", "ECE") for side in ("(test)", "(ood)", "gap")),
        "run",
        "data version",
        "evals",
    ]
    [row] = [line for line in lines if line.startswith("| e1 | heuristic |")]
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[2:9] == ["10", "10", "0.800 [0.700, 0.850]", "0.500 [0.400, 0.550]", "-0.300", "0.750", "0.400"]
    assert cells[9:16] == ["-0.350", "0.200", "0.600", "+0.400", "0.100", "0.300", "+0.200"]
    assert cells[16] == RUN_WEEKLY[:8] and cells[18].startswith("[ood](") and "[test](" in cells[18]
    result = audit_report(files["markdown"])
    assert result.ok, result.problems
    assert (weekly_ood.run_dir / "summary.json").resolve() in result.sources

    # A changed OOD figure is caught by the audit, naming the OOD column.
    summary = json.loads((weekly_ood.run_dir / "summary.json").read_text())
    (weekly_ood.run_dir / "summary.json").write_text(json.dumps({**summary, "fnr": 0.7}))
    problems = audit_report(files["markdown"]).problems
    assert any("FNR (ood) shows '0.600'" in p for p in problems) and any("FNR gap" in p for p in problems)


def test_ood_evals_stay_out_of_the_deltas_plots_and_test_rankings(tmp_path: Path):
    evals = tmp_path / "evals"
    test = record(write_eval(evals / "t", "test", 4, 0.75, 0.7, 0.2, 0.1), "heuristic", 1_000, RUN_WEEKLY)
    ood = record(write_eval(evals / "o", "ood", 6, 0.5, 0.4, 0.5, 0.3), "heuristic", 1_001, RUN_WEEKLY)
    oracle_ood = record(write_eval(evals / "q", "ood", 6, 1.0, 1.0, 0.0, 0.0), "oracle", 1_002, RUN_WEEKLY)

    weekly = weekly_markdown("2026-W48", [test, ood, oracle_ood], {}, {}, evals)
    deltas = weekly.split("## Reward deltas", 1)[1].split("\n## ", 1)[0]
    assert [line.split("|")[2].strip() for line in deltas.splitlines() if line.startswith("| e1 |")] == ["heuristic"]
    rows = {line.split("|")[2].strip(): line for line in section(weekly) if line.startswith("| e1 |")}
    assert set(rows) == {"heuristic", "oracle"}
    assert rows["oracle"].startswith("| e1 | oracle | - | 6 |")  # no test eval of its own: "-", never another's
    (evals / "weekly.md").write_text(weekly)
    assert audit_report(evals / "weekly.md").ok

    # Ranked only among evals on the same split; the OOD table after the test one.
    ranks = [(r["model"], r["split"], r["rank"]) for r in scoreboard([ood, test, oracle_ood])]
    assert ranks == [("heuristic", "test", 1), ("oracle", "ood", 1), ("heuristic", "ood", 2)]


def test_without_ood_evals_the_section_says_so(tmp_path: Path):
    test = record(write_eval(tmp_path / "t", "test", 4, 0.75, 0.7, 0.2, 0.1), "heuristic", 1_000, RUN_WEEKLY)
    weekly = weekly_markdown("2026-W48", [test], {}, {}, tmp_path)
    assert [line for line in section(weekly) if line] == ["No eval on an out-of-distribution split."]
