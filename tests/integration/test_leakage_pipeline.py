"""The leakage screen in the pipeline, on E4's bundled test emails (`test_source: bundled`,
E4's second test source), whose generator uses the templates they come from, and the corpus
samples. With dataset/e4 materialized, the generator
rejects every candidate that duplicates a dev/test email (stage "leakage" in rejects.jsonl)
and the batch's blocking `no_test_leakage` check passes. A batch generated before the
dataset existed holds such emails: its check fails once the dataset is there, and
sft_data/e4 built on it drops every leaking row and lists it (file:line) in leakage.json."""

from __future__ import annotations

import json
from pathlib import Path

import dagster as dg
import pytest

from sv_dagster.assembly import build_definitions
from sv_dagster.core.data import leakage
from sv_dagster.core.data.corpora import load_sources
from sv_dagster.core.envs import ENVS
from tests.conftest import clear_source_overrides

PARTITION = "2026-11-22"
SCREENED = "2026-11-23"
QUIET = {"loggers": {"console": {"config": {"log_level": "WARNING"}}}}
CHECK = dg.AssetCheckKey(dg.AssetKey(["synthetic", "e4"]), "no_test_leakage")


def key(path: str) -> dg.AssetKey:
    return dg.AssetKey.from_user_string(path)


@pytest.fixture(scope="module")
def e4_run(tmp_path_factory):
    """dataset/e4 (its corpora, without their suites), synthetic/e4 with its leakage check,
    then sft_data/e4, in a fresh instance and outputs root."""
    root = tmp_path_factory.mktemp("leakage")
    with pytest.MonkeyPatch.context() as monkeypatch:
        home = root / "dagster_home"
        home.mkdir()
        (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
        monkeypatch.setenv("SV_OUTPUTS_DIR", str(root / "outputs"))
        monkeypatch.setenv("DAGSTER_HOME", str(home))
        monkeypatch.delenv("SV_MODEL_REGISTRY", raising=False)
        clear_source_overrides(monkeypatch)
        for spec in load_sources().values():
            if "e4" in spec.envs and spec.loader == "npm":  # SpamAssassin: its sample is enough here
                monkeypatch.setenv(spec.env_var, "sample")
        instance = dg.DagsterInstance.get()
        job = build_definitions().resolve_implicit_global_asset_job_def()

        def run(keys: set[dg.AssetKey], checks: set[dg.AssetCheckKey], **kwargs) -> dg.ExecuteInProcessResult:
            subset = job.get_subset(asset_selection=keys, asset_check_selection=checks)
            config = (
                {**QUIET, "ops": {"dataset__e4": {"config": {"test_source": "bundled"}}}}
                if key("dataset/e4") in keys
                else QUIET
            )
            return subset.execute_in_process(instance=instance, run_config=config, raise_on_error=False, **kwargs)

        corpora = {key(f"corpus/{spec.id}") for spec in load_sources().values() if "e4" in spec.envs}
        assert run(corpora, set()).success
        # Generated before there is a dataset to compare with: nothing screened.
        assert run({key("synthetic/e4")}, set(), partition_key=PARTITION).success
        assert run({key("dataset/e4")}, set()).success
        check = run(set(), {CHECK}, partition_key=PARTITION)
        sft = run({key("sft_data/e4")}, set())
        screened = run({key("synthetic/e4")}, {CHECK}, partition_key=SCREENED)
        yield instance, check, sft, screened


def evaluation_of(result: dg.ExecuteInProcessResult):
    return next(
        e.asset_check_evaluation_data for e in result.all_events if e.event_type_value == "ASSET_CHECK_EVALUATION"
    )


def test_the_generator_rejects_candidates_that_duplicate_a_held_out_row(e4_run):
    instance, _, _, screened = e4_run
    assert screened.success and evaluation_of(screened).passed
    assert {name: value.value for name, value in evaluation_of(screened).metadata.items()}["n_leaked"] == 0
    metadata = instance.get_latest_materialization_event(key("synthetic/e4")).asset_materialization.metadata
    folder = Path(metadata["artifact_path"].value)
    rejects = [json.loads(line) for line in (folder / "rejects.jsonl").read_text().splitlines() if line]
    leaked = [r for r in rejects if r["stage"] == "leakage"]
    assert leaked and all("duplicates held-out row" in r["reason"] for r in leaked)
    assert metadata["rejected_by_reason"].value  # counted with the batch's other rejects


def test_an_unscreened_leaking_batch_fails_its_blocking_check(e4_run):
    _, check, _, _ = e4_run
    evaluation = evaluation_of(check)
    metadata = {name: value.value for name, value in evaluation.metadata.items()}
    assert not evaluation.passed and evaluation.severity == dg.AssetCheckSeverity.ERROR
    assert metadata["n_leaked"] > 0 and metadata["leak_rate"] > metadata["max_leak_rate"]
    assert metadata["n_leaked"] == metadata["n_exact"] + metadata["n_near"]
    assert "examples.jsonl:" in metadata["first_leaks"][0]
    assert Path(metadata["report"]).is_file()


def test_sft_data_drops_the_leaked_rows_and_lists_them(e4_run):
    instance, _, sft, _ = e4_run
    assert sft.success
    metadata = instance.get_latest_materialization_event(key("sft_data/e4")).asset_materialization.metadata
    folder = Path(metadata["artifact_path"].value)
    report = json.loads((folder / "leakage.json").read_text())
    assert report["n_leaked"] == metadata["leaked_rows_dropped"].value > 0
    leaked_ids = set()
    for leak in report["leaks"]:
        line = Path(leak["file"]).read_text(encoding="utf-8").splitlines()[leak["line"] - 1]
        assert json.loads(line)["id"] == leak["id"]  # file:line names the row
        leaked_ids.add(leak["id"])
    trained = [json.loads(line) for line in (folder / "tasks" / "train.jsonl").read_text().splitlines() if line]
    assert trained and not leaked_ids & {row["id"] for row in trained}
    # Nothing left in training has the canonical text of a dev/test row.
    canonical = ENVS["e4"].canonical_text
    held_out = {
        leakage.text_hash(canonical(json.loads(line)))
        for path in report["reference_files"]
        for line in Path(path).read_text(encoding="utf-8").splitlines()
        if line.strip()
    }
    assert not held_out & {leakage.text_hash(canonical(row)) for row in trained}
