"""E1 corpora and dataset curation: the IoT-23 entry point, column-wise rendering (the same
text as the environment's renderer), de-duplication, stable splits, OOD, rejects."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from sv_dagster.core.data.corpora import CorpusError, load_source, load_sources
from sv_dagster.core.data.corpora.normalize import normalise
from sv_env_network_logs.flow_curation import FlowPart, render_questions
from sv_env_network_logs.flow_curation import curate_flows as curate_e1
from sv_env_network_logs.flows import FLOW_FIELD_NAMES, render_flow_question
from sv_shared.corpora import split_for

pytestmark = pytest.mark.usefixtures("offline_sources")  # tests/conftest.py


def load_iot23(source: str = "sample", **options):
    """The flows of one IoT-23 source (all of the flow fields and the label) and its CorpusInfo."""
    loaded = load_source("iot23", source, columns=(*FLOW_FIELD_NAMES, "label"), **options)
    return loaded.frame, loaded.info


def iot23_part(frame: pd.DataFrame, source: str = "iot23", ood: bool = False) -> FlowPart:
    result = normalise(load_sources()["iot23"], frame, "e1")
    return FlowPart(source, result.flows, ood)


def test_bundled_sample_is_labelled_as_sample():
    flows, info = load_iot23("sample")
    assert info.sample is True and "SAMPLE" in info.license
    assert len(flows) == 306 and set(flows["label"]) == {"Benign", "Malicious"}


def test_column_wise_rendering_is_the_environments_text():
    flows, _ = load_iot23("sample")
    assert render_questions(flows) == [render_flow_question(row) for row in flows.to_dict(orient="records")]
    # Nulls, floats holding integers, large floats, text numbers and a column of None.
    odd = pd.DataFrame(
        {
            "id.orig_p": [80.0, np.nan, 1234567.0],
            "id.resp_p": pd.array([443, None, 22], dtype="Int64"),
            "proto": ["tcp", None, "udp"],
            "duration": [0.1234567, np.nan, 3.0],
            "orig_bytes": ["12", None, 5],
            "service": [None, None, None],
        }
    )
    for name in (
        "resp_bytes",
        "conn_state",
        "missed_bytes",
        "history",
        "orig_pkts",
        "orig_ip_bytes",
        "resp_pkts",
        "resp_ip_bytes",
    ):
        odd[name] = None
    expected = [
        render_flow_question(row) for row in odd.astype(object).where(odd.notna(), None).to_dict(orient="records")
    ]
    assert render_questions(odd)[0] == expected[0] and render_questions(odd)[2] == expected[2]
    assert "id.resp_p: -" in render_questions(odd)[1] and "duration: -" in render_questions(odd)[1]


def test_curation_dedups_splits_and_keeps_labels():
    flows, _ = load_iot23("sample")
    curated = curate_e1([iot23_part(flows)], sample=True)
    rows = pd.concat(curated.splits.values(), ignore_index=True)
    assert curated.n_duplicates >= 6
    assert len(rows) == len(flows) - curated.n_duplicates
    assert rows["id"].is_unique and all(info["sample"] is True for info in rows["info"])
    sizes = {name: len(split) for name, split in curated.splits.items()}
    assert sizes["test"] > 30 and sizes["dev"] > 10 and sizes["train"] > sizes["test"]
    for name, split in curated.splits.items():
        assert {info["split"] for info in split["info"]} <= {name}
    assert curated.bucket_counts == {name: sizes[name] for name in ("train", "dev", "test")}


def test_split_is_stable_when_other_rows_change():
    flows, _ = load_iot23("sample")
    full = curate_e1([iot23_part(flows)], sample=True)
    half = curate_e1([iot23_part(flows.iloc[::2].reset_index(drop=True))], sample=True)
    where_full = {row_id: name for name, rows in full.splits.items() for row_id in rows["id"]}
    moved = [
        (row_id, name) for name, rows in half.splits.items() for row_id in rows["id"] if where_full[row_id] != name
    ]
    assert not moved and sum(len(r) for r in half.splits.values()) > 100


def test_split_fractions_follow_the_hash_buckets():
    assert split_for("0" * 64, 0.1, 0.2) == "test"
    assert split_for("4" * 64, 0.1, 0.2) == "dev"  # 0x444.../16^12 = 0.267: in [0.2, 0.3)
    assert split_for("f" * 64, 0.1, 0.2) == "train"


def test_near_duplicates_ood_and_conflicting_labels():
    flows, _ = load_iot23("sample")
    first = flows.head(40).reset_index(drop=True)
    recased = first.head(5).copy()
    recased["proto"] = recased["proto"].str.upper()  # TCP vs tcp: the same flow, re-cased
    conflicting = first.head(1).copy()
    conflicting["label"] = "Benign" if first.loc[0, "label"] == "Malicious" else "Malicious"
    ood = flows.iloc[100:120].reset_index(drop=True)
    curated = curate_e1(
        [
            iot23_part(first),
            iot23_part(pd.concat([recased, conflicting], ignore_index=True), "copy"),
            iot23_part(ood, "other", ood=True),
        ],
        sample=False,
    )
    assert curated.n_duplicates == 6
    assert len(curated.rejects) == 1 and curated.rejects[0]["source"] == "copy"
    assert "another label" in curated.rejects[0]["reason"] and curated.rejects[0]["ref"].endswith(":1")
    assert len(curated.splits["ood"]) > 0 and set(curated.splits["ood"]["id"].str.split("-").str[0]) == {"other"}
    assert sum(curated.bucket_counts.values()) == 40  # OOD rows are not in the buckets


def test_bad_rows_are_recorded_and_the_rest_kept():
    flows, _ = load_iot23("sample")
    broken = flows.head(5).copy()
    broken["label"] = [
        "Suspicious",
        None,
        1,
        "Benign",
        "malicious   PartOfAHorizontalPortScan",
    ]  # 0/1 and detailed labels are coerced
    result = normalise(load_sources()["iot23"], broken, "e1")
    assert [r["ref"] for r in result.rejects] == [f"{broken['_file'][0]}:{broken['_line'][i]}" for i in (0, 1)]
    assert "Suspicious" in result.rejects[0]["reason"]
    assert list(result.flows["label"]) == ["Malicious", "Benign", "Malicious"]


def test_local_copy_in_parquet_is_used_without_code_change(tmp_path: Path, monkeypatch):
    flows, _ = load_iot23("sample")
    path = tmp_path / "iot23.parquet"
    flows.head(20).drop(columns=["_file", "_line", "_split"]).to_parquet(path)
    loaded, info = load_iot23(str(path))
    assert len(loaded) == 20 and info.sample is False and info.location == str(path)
    monkeypatch.setenv("SV_IOT23_SOURCE", str(path))  # the variable E1 always read still works
    loaded, info = load_iot23("sample")  # an explicit value wins over the variable...
    assert info.sample is True
    from sv_dagster.core.data.corpora import resolve_location

    assert resolve_location(load_sources()["iot23"]).paths == {"train": str(path)}  # ...else the variable


def test_local_copy_missing_a_column_names_it(tmp_path: Path):
    path = tmp_path / "thin.csv"
    pd.DataFrame({"proto": ["tcp"], "label": ["Benign"]}).to_csv(path, index=False)
    with pytest.raises(CorpusError, match=r"lacks column\(s\) \['id.orig_p'"):
        load_iot23(str(path))


def test_online_loader_failure_names_the_source_and_the_repo(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # no hub here: the real loader must fail clearly
    with pytest.raises(CorpusError, match=r"corpus iot23: .*19kmunz/iot-23-preprocessed@main.*huggingface.co/datasets"):
        load_iot23("hf", max_rows=10)
