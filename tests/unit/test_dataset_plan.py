"""What an eval builds first, read from the instance: dataset/<env> when never built or built
from other data than asked for, with its corpora never built or whose source now names other
data."""

from __future__ import annotations

import json
from pathlib import Path

import dagster as dg

from sv_dagster.instance.datasets import dataset_plan

DATASET = dg.AssetKey(["dataset", "e1"])
SOURCE = "iot23"  # a corpus source of E1 (configs/sources.yaml), offline: its bundled sample


def record(instance: dg.DagsterInstance, key: dg.AssetKey, **metadata) -> None:
    instance.report_runless_asset_event(dg.AssetMaterialization(asset_key=key, metadata=metadata))


def test_never_built_then_built_then_a_user_file(tmp_path: Path, offline_sources):
    from sv_dagster.core.data.user_dataset import usable_user_rows

    source = SOURCE
    corpus, other = dg.AssetKey(["corpus", source]), dg.AssetKey(["dataset_inputs", "e1"])
    instance = dg.DagsterInstance.ephemeral()
    plan = dataset_plan(instance, DATASET, [corpus, other], None)
    assert plan.build and plan.corpora == [corpus, other] and plan.reasons == []

    record(instance, DATASET, artifact_path=str(tmp_path))
    record(instance, other)
    record(instance, corpus, sample=True, location="somewhere/else", files=[])
    plan = dataset_plan(instance, DATASET, [corpus, other], None)
    assert plan.build and plan.corpora == [corpus]
    (reason,) = plan.reasons
    assert reason.startswith(f"corpus/{source} is now read from ") and "last built from somewhere/else" in reason

    rows = tmp_path / "rows.jsonl"
    rows.write_text(json.dumps({"question": "a flow", "answer": "benign"}) + "\n")
    user = usable_user_rows("e1", rows)
    plan = dataset_plan(instance, DATASET, [corpus, other], user)
    assert plan.build and plan.reasons == []  # the user's file is what is evaluated
    record(instance, DATASET, artifact_path=str(tmp_path), user_file=str(user.path), user_file_sha256=user.sha256)
    assert dataset_plan(instance, DATASET, [other], user).build is False
    assert dataset_plan(instance, DATASET, [other], None).build is True  # never the user's rows unasked
