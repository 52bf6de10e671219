"""IoT-23 corpus loading and E1 dataset curation."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from sv_dagster.core.e1_data import CorpusError, curate_e1, load_iot23, split_for


def test_bundled_sample_is_labelled_as_sample():
    flows, info = load_iot23("sample")
    assert info.sample is True and "sample" in info.license
    assert len(flows) == 306 and set(flows["label"]) == {"Benign", "Malicious"}


def test_curation_dedups_splits_and_keeps_labels():
    flows, _ = load_iot23("sample")
    curated = curate_e1(flows, sample=True)
    rows = [row for split in curated.splits.values() for row in split]
    assert curated.n_duplicates >= 6
    assert len(rows) == len(flows) - curated.n_duplicates - len(curated.rejects)
    assert len({row["id"] for row in rows}) == len(rows)
    assert all(row["info"]["sample"] is True for row in rows)
    sizes = {name: len(split) for name, split in curated.splits.items()}
    assert sizes["test"] > 30 and sizes["dev"] > 10 and sizes["train"] > sizes["test"]
    for name, split in curated.splits.items():
        assert {row["info"]["split"] for row in split} <= {name}


def test_split_is_stable_when_other_rows_change():
    flows, _ = load_iot23("sample")
    full = curate_e1(flows, sample=True)
    half = curate_e1(flows.iloc[::2], sample=True)
    where_full = {row["id"]: name for name, rows in full.splits.items() for row in rows}
    for name, rows in half.splits.items():
        for row in rows:
            assert where_full[row["id"]] == name


def test_split_fractions_follow_the_hash_buckets():
    assert split_for("0" * 64, 0.1, 0.2) == "test"
    assert split_for("f" * 64, 0.1, 0.2) == "train"


def test_bad_rows_are_recorded_and_the_rest_kept():
    flows, _ = load_iot23("sample")
    broken = flows.head(5).copy()
    broken["label"] = ["Suspicious", None, 1, "Benign", "malicious   PartOfAHorizontalPortScan"]  # 0/1 and detailed labels are coerced
    curated = curate_e1(broken, sample=False)
    assert [r["row"] for r in curated.rejects] == [0, 1]
    assert sum(len(s) for s in curated.splits.values()) == 3


def test_local_copy_in_parquet_is_used_without_code_change(tmp_path: Path):
    flows, _ = load_iot23("sample")
    path = tmp_path / "iot23.parquet"
    flows.head(20).to_parquet(path)
    loaded, info = load_iot23(str(path))
    assert len(loaded) == 20 and info.sample is False and info.location == str(path)


def test_local_copy_missing_a_column_names_it(tmp_path: Path):
    path = tmp_path / "thin.csv"
    pd.DataFrame({"proto": ["tcp"], "label": ["Benign"]}).to_csv(path, index=False)
    with pytest.raises(CorpusError, match=r"lacks column\(s\) \['id.orig_p'"):
        load_iot23(str(path))


def test_online_loader_failure_names_the_repo(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # no hub here: the real loader must fail clearly
    with pytest.raises(CorpusError, match="19kmunz/iot-23-preprocessed@main"):
        load_iot23("hf", max_rows=10)
