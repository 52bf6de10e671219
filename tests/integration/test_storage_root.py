"""An fsspec artifact root (`SV_OUTPUTS_DIR=file://...`): `eval_e1` runs in-process, every
artifact appears in the store under the usual layout with the bytes its content hash names,
and a downstream asset runs from the store after the local staging copy is gone (as on
another machine)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import dagster as dg

from sv_dagster.assembly import build_definitions
from sv_dagster.core.artifacts.storage import content_hash_at
from sv_dagster.instance import local_artifact_path
from tests.integration.test_e1_pipeline import E1_PATH, latest, materialize

TRIAGE = "triage/e1/heuristic"


def tree(folder: Path) -> dict[str, bytes]:
    if folder.is_file():
        return {folder.name: folder.read_bytes()}
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_eval_e1_publishes_to_the_store_and_downstream_runs_from_it(isolated: Path, monkeypatch):
    remote, staging = isolated / "remote", isolated / "staging"
    monkeypatch.setenv("SV_OUTPUTS_DIR", remote.as_uri())
    monkeypatch.setenv("SV_STAGING_DIR", str(staging))
    instance = dg.DagsterInstance.get()
    defs = build_definitions()
    io_manager = defs.resources["io_manager"]  # the Artifact handles passed between steps: in the store too
    assert isinstance(io_manager, dg.FilesystemIOManager) and io_manager.base_dir == f"{remote.as_uri()}/.dagster-io"
    job = defs.resolve_job_def("eval_e1")

    result = job.execute_in_process(instance=instance)
    assert result.success
    published = {}
    for key in [*E1_PATH, TRIAGE]:
        entry = latest(instance, key)
        metadata = entry.asset_materialization.metadata
        local = Path(metadata["artifact_path"].value)
        relative = local.relative_to(staging).as_posix()
        assert metadata["artifact_uri"].value == f"{remote.as_uri()}/{relative}"
        assert (
            content_hash_at(metadata["artifact_uri"].value)
            == metadata["content_hash"].value
            == entry.tags["dagster/data_version"]
        )
        assert tree(remote / relative) == tree(local), key  # same layout, same bytes
        published[key] = relative

    # the layout of a local root, under the URL
    assert published["corpus/iot23"].startswith("corpora/iot23/")
    assert published["dataset/e1"].startswith("datasets/e1/")
    assert published["eval/e1/heuristic"] == f"evals/sv-env-network-logs--heuristic/{result.run_id}"
    assert {p.name for p in (remote / published["eval/e1/heuristic"]).iterdir()} == {
        "metadata.json",
        "results.jsonl",
        "summary.json",
        "provenance.json",
        "references",  # the reference policies' results, published with the eval
    }
    assert (remote / f"{published[TRIAGE]}.provenance.json").is_file()  # a single file's record is published beside it
    assert published[TRIAGE].startswith("notes/") and (remote / published[TRIAGE]).with_suffix(".json").is_file()
    assert (remote / ".dagster-io" / "eval" / "e1" / "heuristic").is_file()
    assert (staging / "cache").is_dir() and not (remote / "cache").exists()  # caches stay local

    # Another machine: nothing local. Triage loads the eval's Artifact from the store's IO
    # manager, gets its folder fetched into the (new) staging root, and runs on it.
    first_triage = (remote / published[TRIAGE]).read_text()
    shutil.rmtree(staging)
    second = materialize(defs, [TRIAGE], instance)
    assert second.success
    assert tree(staging / published["eval/e1/heuristic"]) == tree(remote / published["eval/e1/heuristic"])
    entry = latest(instance, TRIAGE)
    metadata = entry.asset_materialization.metadata
    assert entry.run_id == second.run_id
    assert metadata["input_data_versions"].value == {
        "eval/e1/heuristic": latest(instance, "eval/e1/heuristic").tags["dagster/data_version"]
    }
    assert content_hash_at(metadata["artifact_uri"].value) == metadata["content_hash"].value
    assert Path(metadata["artifact_path"].value).read_text() == (remote / published[TRIAGE]).read_text() == first_triage
    # ...and whoever reads materializations from the instance gets the eval folder the same way
    shutil.rmtree(staging / published["eval/e1/heuristic"])
    eval_dir = local_artifact_path(latest(instance, "eval/e1/heuristic").asset_materialization.metadata)
    assert eval_dir == staging / published["eval/e1/heuristic"]
    assert json.loads((eval_dir / "summary.json").read_text()) == json.loads(
        (remote / published["eval/e1/heuristic"] / "summary.json").read_text()
    )
