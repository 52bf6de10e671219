"""`SV_SOURCE_<ID>=FILE` through `sv-dagster eval`, run in-process: the eval rebuilds the corpus
and dataset when the variable is set or the file's bytes change (a new data version, never the
older rows), the DATA line names the file, and a file of which no row is usable fails rather
than leave the eval to the bundled rows of the other corpora."""

from __future__ import annotations

import json
from pathlib import Path

import dagster as dg
import pytest

from sv_dagster.core.data.corpora import load_sources


def version(key: list[str]) -> str:
    from sv_dagster.instance import DATA_VERSION_TAG

    return dg.DagsterInstance.get().get_latest_materialization_event(dg.AssetKey(key)).tags[DATA_VERSION_TAG]


def eval_e1(capsys) -> tuple[int, str, str]:
    from sv_dagster.cli import main

    code = main(["eval", "e1", "--models", "heuristic", "--n", "5"])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def flows(isolated: Path) -> Path:
    """A copy of the IoT-23 sample outside the repository: a user's own file in the corpus's layout."""
    path = isolated / "my-flows.jsonl"
    path.write_text(load_sources()["iot23"].sample["train"].read_text())
    return path


def test_setting_or_changing_the_file_rebuilds_and_the_data_line_names_it(flows: Path, monkeypatch, capsys):
    code, out, _ = eval_e1(capsys)
    assert code == 0 and "DATA: bundled SAMPLE" in out
    before = version(["dataset", "e1"])

    monkeypatch.setenv("SV_SOURCE_IOT23", str(flows))
    code, out, err = eval_e1(capsys)
    assert code == 0, err
    assert (
        f"corpus/iot23 is now read from {flows} (SV_SOURCE_IOT23), last built from iot23-preprocessed.sample.jsonl: "
        "building it and dataset/e1 again" in err
    )
    data = next(line for line in out.splitlines() if line.startswith("DATA: "))
    assert data.startswith(f"DATA: corpus rows of iot23 from {flows} (sha256 ")
    assert data.endswith("; bundled SAMPLE rows of cicids2017, unsw_nb15")
    with_file = version(["dataset", "e1"])
    assert with_file != before

    code, _, err = eval_e1(capsys)  # the same file, the same bytes: nothing to rebuild
    assert code == 0 and "building it" not in err and version(["dataset", "e1"]) == with_file

    lines = flows.read_text().splitlines()
    flows.write_text("\n".join(lines[: len(lines) // 2]) + "\n")
    code, _, err = eval_e1(capsys)
    assert code == 0 and f"corpus/iot23: {flows} changed since it was last built (sha256 now " in err
    assert version(["dataset", "e1"]) not in (before, with_file)

    monkeypatch.delenv("SV_SOURCE_IOT23")
    code, out, err = eval_e1(capsys)
    assert code == 0 and "corpus/iot23 is now read from iot23-preprocessed.sample.jsonl (default)" in err
    assert "DATA: bundled SAMPLE" in out and version(["dataset", "e1"]) == before  # the sample's rows again


def test_a_file_with_no_usable_row_fails_instead_of_evaluating_the_other_corpora(flows: Path, monkeypatch, capsys):
    rows = [json.loads(line) for line in flows.read_text().splitlines()]
    # Labelled rows without the flow fields E1 classifies: each one is a normaliser reject.
    bare = [{"label": row["label"], "ts": 1_600_000_000 + i} for i, row in enumerate(rows[:40])]
    flows.write_text("".join(json.dumps(row) + "\n" for row in bare))
    monkeypatch.setenv("SV_SOURCE_IOT23", str(flows))
    code, out, err = eval_e1(capsys)
    assert code != 0 and "heuristic " not in out
    failed = next(line for line in err.splitlines() if line.startswith("FAILED dataset__e1"))
    assert "dataset/e1: corpus iot23 has no usable row (40 read, 40 rejected; first: " in failed
    assert failed.endswith("nothing is built from the other corpora in its place")
    assert dg.DagsterInstance.get().get_latest_materialization_event(dg.AssetKey(["eval", "e1", "heuristic"])) is None
