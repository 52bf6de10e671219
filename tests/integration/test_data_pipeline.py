"""Every corpus and dataset materialized offline through Dagster with their Great Expectations
checks; a broken corpus blocks what depends on it; malformed rows are recorded, not fatal."""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path

import dagster as dg
import pandas as pd
import pytest

from sv_dagster.assembly import build_definitions
from sv_dagster.core.data.corpora import load_sources
from sv_dagster.core.data.corpora.registry import PINNED_LOADERS
from sv_dagster.core.envs import ENVS
from tests.conftest import clear_source_overrides
from tests.support.registry import rule_baselines_registry

TASK_FILES = ("train", "dev", "test", "corpus_test", "ood")


def isolate(monkeypatch: pytest.MonkeyPatch, root: Path) -> dg.DagsterInstance:
    home = root / "dagster_home"
    home.mkdir(parents=True)
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    monkeypatch.setenv("SV_OUTPUTS_DIR", str(root / "outputs"))
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    monkeypatch.setenv("SV_MODEL_REGISTRY", str(rule_baselines_registry(root / "models.yaml")))
    clear_source_overrides(monkeypatch)
    return dg.DagsterInstance.get()


def run(
    defs: dg.Definitions, keys: list[str], instance: dg.DagsterInstance, run_config=None
) -> dg.ExecuteInProcessResult:
    job = defs.resolve_implicit_global_asset_job_def()
    selection = {dg.AssetKey.from_user_string(key) for key in keys}
    return job.get_subset(asset_selection=selection).execute_in_process(
        instance=instance, run_config=run_config or {}, raise_on_error=False
    )


def checks_of(result: dg.ExecuteInProcessResult) -> dict[str, dg.AssetCheckEvaluation]:
    return {
        f"{e.asset_check_evaluation_data.asset_key.to_user_string()}:{e.asset_check_evaluation_data.check_name}": e.asset_check_evaluation_data
        for e in result.all_events
        if e.event_type_value == "ASSET_CHECK_EVALUATION"
    }


def materialized(result: dg.ExecuteInProcessResult) -> set[str]:
    return {
        e.step_materialization_data.materialization.asset_key.to_user_string()
        for e in result.get_asset_materialization_events()
    }


@pytest.fixture(scope="module")
def offline(tmp_path_factory):
    """All corpora and datasets, materialized once on the bundled samples."""
    with pytest.MonkeyPatch.context() as monkeypatch:
        root = tmp_path_factory.mktemp("data")
        instance = isolate(monkeypatch, root)
        for spec in load_sources().values():  # a pinned package's source reads it unless told otherwise
            if spec.loader in PINNED_LOADERS:
                monkeypatch.setenv(spec.env_var, "sample")
        keys = [f"corpus/{sid}" for sid in load_sources()] + [f"dataset/{env}" for env in ENVS]
        result = run(build_definitions(), keys, instance)
        yield instance, result, keys


def test_every_corpus_and_dataset_materializes_offline_with_passing_checks(offline):
    instance, result, keys = offline
    assert result.success
    assert materialized(result) == set(keys)
    checks = checks_of(result)
    assert set(checks) == {f"{key}:great_expectations" for key in keys}
    assert all(c.passed and c.severity == dg.AssetCheckSeverity.ERROR for c in checks.values())
    dataset_check = checks["dataset/e1:great_expectations"].metadata
    assert dataset_check["failed"].value == 0 and dataset_check["expectations"].value >= 15
    assert "in_test_normalized" in dataset_check["results"].value  # the markdown table of every expectation
    for key in keys:
        metadata = instance.get_latest_materialization_event(
            dg.AssetKey.from_user_string(key)
        ).asset_materialization.metadata
        assert metadata["sample"].value is True, key
        assert len(metadata["content_hash"].value) == 64
        if key.startswith("corpus/"):
            for name in (
                "source_id",
                "revision",
                "license",
                "row_count",
                "fetched_at",
                "loader_version",
                "n_malformed",
            ):
                assert name in metadata, (key, name)
            assert metadata["n_malformed"].value == 0 and metadata["row_count"].value >= 8
        else:
            assert "| train |" in metadata["label_balance"].value or key == "dataset/e3"


def test_every_split_loads_through_its_environments_taskset(offline):
    instance, _, _ = offline
    for short, env in ENVS.items():
        entry = instance.get_latest_materialization_event(dg.AssetKey(["dataset", short]))
        folder = Path(entry.asset_materialization.metadata["artifact_path"].value)
        report = json.loads((folder / "metadata.json").read_text())
        splits = [name for name in report["files"] if name in TASK_FILES]
        assert "test" in splits and (short == "e3" or {"train", "dev"} <= set(splits)), (short, splits)
        for name in splits:
            n = sum(1 for _ in env.iter_tasks(folder / report["files"][name], None))
            assert n == report["split_sizes"][name] > 0, (short, name)
            for line in (folder / report["files"][name]).read_text().splitlines():
                row = json.loads(line)
                flag = (
                    row.get("info", {}).get("sample")
                    if short in ("e1", "e4", "e5", "e6")
                    else (row.get("sample") if short == "e2" else row.get("meta", {}).get("sample"))
                )
                assert flag is True, (short, name, row.get("id"))
        if short == "e1":
            assert report["split_sizes"]["ood"] == 86 and report["test_source"] == "corpora"
        if short == "e3":
            pairs = [json.loads(line) for line in (folder / "fix_pairs.jsonl").read_text().splitlines()]
            assert {"id", "cwe", "language", "before", "after", "source", "sample"} <= set(pairs[0])
            assert {p["source"] for p in pairs} == {"bigvul", "juliet", "stack_v2_commits"}


def test_a_corpus_that_fails_its_suite_blocks_its_dataset_and_evals(tmp_path, monkeypatch):
    instance = isolate(monkeypatch, tmp_path)
    sample = pd.read_json(load_sources()["iot23"].sample["train"], lines=True)
    broken = tmp_path / "iot23-relabelled.jsonl"
    relabelled = sample.copy()
    relabelled.loc[relabelled.index[:60], "label"] = "Suspicious"  # 20% outside {Benign, Malicious}
    relabelled.to_json(broken, orient="records", lines=True)
    defs = build_definitions()
    job = defs.resolve_job_def("eval_e1")
    result = job.execute_in_process(
        instance=instance,
        raise_on_error=False,
        run_config={"ops": {"corpus__iot23": {"config": {"source": str(broken)}}}},
    )
    assert not result.success
    check = checks_of(result)["corpus/iot23:great_expectations"]
    assert not check.passed and check.severity == dg.AssetCheckSeverity.ERROR
    failing = check.metadata["failing_expectations"].value
    assert [f["expectation"] for f in failing] == ["expect_column_values_to_be_null"]
    assert failing[0]["column"] == "label_unmapped" and failing[0]["unexpected_count"] == 60
    assert failing[0]["examples"][0] == f"{broken}:1: label_unmapped='Suspicious'"
    done = materialized(result)
    assert "corpus/iot23" in done and {"dataset/e1", "eval/e1/heuristic", "triage/e1/heuristic"}.isdisjoint(done)
    assert instance.get_latest_materialization_event(dg.AssetKey(["dataset", "e1"])) is None


def test_malformed_rows_are_recorded_with_file_and_line_and_the_run_goes_on(tmp_path, monkeypatch):
    instance = isolate(monkeypatch, tmp_path)
    sample = load_sources()["iot23"].sample["train"]
    lines = sample.read_text().splitlines()
    copy = tmp_path / "iot23-copy.jsonl"
    odd = json.loads(lines[4])
    odd["label"] = "Suspicious"  # one unusable label: a reject of the dataset, not a failed corpus
    copy.write_text("\n".join([*lines[:2], "{truncated", *lines[2:4], json.dumps(odd), *lines[5:]]) + "\n")
    monkeypatch.setenv("SV_IOT23_SOURCE", str(copy))  # the variable E1 always read
    result = build_definitions().resolve_job_def("eval_e1").execute_in_process(instance=instance, raise_on_error=False)
    assert result.success
    corpus = instance.get_latest_materialization_event(dg.AssetKey(["corpus", "iot23"])).asset_materialization.metadata
    assert corpus["n_malformed"].value == 1 and corpus["sample"].value is False
    assert f"{copy}:3: not valid JSON" in corpus["malformed_examples"].value
    dataset = instance.get_latest_materialization_event(dg.AssetKey(["dataset", "e1"])).asset_materialization.metadata
    folder = Path(dataset["artifact_path"].value)
    rejects = [json.loads(line) for line in (folder / "rejects.jsonl").read_text().splitlines()]
    assert {"source": "iot23", "ref": f"{copy}:6", "reason": "unusable label 'Suspicious'"} in rejects
    assert dataset["sample"].value is True and dataset["sample_inputs"].value == ["cicids2017", "unsw_nb15"]
    assert "eval/e1/heuristic" in materialized(result)


def test_long_data_work_says_when_it_starts_and_how_long_it_took(tmp_path, monkeypatch):
    """Reading a real source, curating and checking many rows print progress lines; the
    row threshold is lowered so the bundled rows count as many."""
    import sv_dagster.assets.data_checks as data_checks
    import sv_dagster.assets.datasets as datasets

    instance = isolate(monkeypatch, tmp_path)
    monkeypatch.setattr(datasets, "LONG_WORK_ROWS", 1)
    monkeypatch.setattr(data_checks, "LONG_WORK_ROWS", 1)
    copy = tmp_path / "flows.jsonl"
    copy.write_text(load_sources()["iot23"].sample["train"].read_text())
    monkeypatch.setenv("SV_SOURCE_IOT23", str(copy))
    keys = ["corpus/iot23", "corpus/cicids2017", "corpus/unsw_nb15", "dataset/e1"]
    result = run(build_definitions(), keys, instance)
    assert result.success
    lines = [e.user_message for e in instance.all_logs(result.run_id) if e.level == logging.INFO]
    assert f"corpus/iot23: reading {copy} (SV_SOURCE_IOT23)" in lines
    assert any(re.fullmatch(r"corpus/iot23: [\d,]+ rows read in [\d.]+ s", line) for line in lines)
    # A bundled sample says it is one (a warning), and no reading line.
    assert not any(line.startswith("corpus/cicids2017: reading") for line in lines)
    curating = next(line for line in lines if line.startswith("dataset/e1: curating "))
    assert re.fullmatch(r"dataset/e1: curating [\d,]+ corpus rows from 3 corpora", curating)
    assert any(re.fullmatch(r"dataset/e1: curated in [\d.]+ s, splits \{.*'test': \d+.*\}", line) for line in lines)
    for name in ("corpus/iot23", "dataset/e1"):
        assert any(re.fullmatch(rf"{name}: checking [\d,]+ rows with Great Expectations", line) for line in lines)
        assert any(re.fullmatch(rf"{name}: Great Expectations suite done in [\d.]+ s", line) for line in lines)


def test_a_bad_dataset_config_fails_before_any_work(offline):
    instance, _, _ = offline
    result = run(
        build_definitions(),
        ["dataset/e3"],
        instance,
        run_config={"ops": {"dataset__e3": {"config": {"test_source": "corpora"}}}},
    )
    assert not result.success
    failure = next(e for e in result.all_events if e.event_type_value == "STEP_FAILURE")
    assert (
        "dataset/e3: test_source must be one of ('bundled',), got 'corpora'" in failure.step_failure_data.error.message
    )
