"""The E1 path materialized in-process: artifacts, metrics, and the provenance that the
instance stores, read back from its event log."""

from __future__ import annotations

import json
from pathlib import Path

import dagster as dg
import pytest

from sv_dagster.assembly import build_definitions
from sv_dagster.core.evals.runner import read_results

E1_CORPORA = ["corpus/iot23", "corpus/cicids2017", "corpus/unsw_nb15"]  # configs/sources.yaml's E1 sources
E1_PATH = [*E1_CORPORA, "dataset/e1", "eval/e1/heuristic"]


def materialize(defs: dg.Definitions, keys: list[str], instance: dg.DagsterInstance, run_config=None):
    job = defs.resolve_implicit_global_asset_job_def()
    selection = {dg.AssetKey.from_user_string(key) for key in keys}
    return job.get_subset(asset_selection=selection).execute_in_process(
        instance=instance, run_config=run_config or {}, raise_on_error=False
    )


def latest(instance: dg.DagsterInstance, key: str) -> dg.EventLogEntry:
    entry = instance.get_latest_materialization_event(dg.AssetKey.from_user_string(key))
    assert entry is not None, key
    return entry


@pytest.fixture
def run_e1(isolated: Path):
    instance = dg.DagsterInstance.get()
    result = materialize(build_definitions(), E1_PATH, instance)
    assert result.success
    return instance, result, isolated / "outputs"


def test_e1_path_writes_eval_artifacts(run_e1):
    instance, result, outputs = run_e1
    run_dir = outputs / "evals" / "sv-env-network-logs--heuristic" / result.run_id
    # references/: the trivial policies scored on the same rows (core/evals/references.py)
    assert {p.name for p in run_dir.iterdir()} == {
        "metadata.json",
        "results.jsonl",
        "summary.json",
        "provenance.json",
        "references",
    }
    provenance = json.loads((run_dir / "provenance.json").read_text())  # what made it, kept with a copy
    assert provenance["content_hash"] == latest(instance, "eval/e1/heuristic").tags["dagster/data_version"]
    assert provenance["dagster_run_id"] == result.run_id and set(provenance["input_data_versions"]) == {"dataset/e1"}
    dataset_dir = next((outputs / "datasets" / "e1").iterdir())
    n_test = sum(1 for line in (dataset_dir / "test.jsonl").open() if line.strip())
    rows = read_results(run_dir / "results.jsonl")
    assert len(rows) == n_test > 30
    for row in rows:
        assert set(row["rewards"]) == {"accuracy", "format", "calibration", "asymmetric_cost", "abstention"}
        assert row["error"] is None and row["parsed"]["format_ok"] is True
        assert row["prompt"][0]["role"] == "system" and row["completion"].startswith("{")
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["sample"] is True and summary["n_examples"] == n_test
    assert 0.5 < summary["accuracy"] < 1.0  # the rules are decent, and wrong on some scenarios
    assert 0.0 <= summary["ece"] <= 1.0 and 0.0 <= summary["cost_weighted_accuracy"] <= 1.0
    metadata = json.loads((run_dir / "metadata.json").read_text())
    assert metadata["model"]["backend"] == "heuristic" and metadata["dataset"]["split"] == "test"
    assert metadata["counts"]["n_scored"] == n_test


def test_provenance_is_stored_on_every_materialization(run_e1):
    instance, result, _ = run_e1
    for key in E1_PATH:
        entry = latest(instance, key)
        metadata = entry.asset_materialization.metadata
        for field in (
            "git_commit",
            "git_dirty",
            "packages",
            "config_hash",
            "content_hash",
            "input_data_versions",
            "seed",
            "config",
        ):
            assert field in metadata, (key, field)
        assert entry.tags["dagster/data_version"] == metadata["content_hash"].value
        packages = metadata["packages"].value
        assert packages["dagster"] == dg.__version__ and packages["verifiers"] == "0.4.0"
    corpus = latest(instance, "corpus/iot23").asset_materialization.metadata
    assert corpus["sample"].value is True and corpus["row_count"].value == 306
    dataset = latest(instance, "dataset/e1")
    assert dataset.asset_materialization.metadata["input_data_versions"].value == {
        key: latest(instance, key).tags["dagster/data_version"] for key in E1_CORPORA
    }
    evaluation = latest(instance, "eval/e1/heuristic").asset_materialization.metadata
    assert evaluation["input_data_versions"].value == {"dataset/e1": dataset.tags["dagster/data_version"]}
    assert evaluation["model_id"].value == "rules-v1" and evaluation["backend"].value == "heuristic"
    assert evaluation["sampling"].value["temperature"] == 0.0
    assert len(evaluation["reward_config_hash"].value) == 64
    assert evaluation["reward_config"].value["weights"]["accuracy"] == 1.0
    assert "sv-env-network-logs" in evaluation["packages"].value


def test_same_inputs_give_the_same_data_version(run_e1):
    instance, _, _ = run_e1
    first = latest(instance, "dataset/e1").tags["dagster/data_version"]
    result = materialize(build_definitions(), ["dataset/e1"], instance)
    assert result.success
    assert latest(instance, "dataset/e1").tags["dagster/data_version"] == first


def test_eval_run_config_limits_and_reward_config(isolated: Path, tmp_path: Path):
    instance = dg.DagsterInstance.get()
    custom = tmp_path / "weights.toml"
    custom.write_text("[weights]\naccuracy = 3.0\n")
    config = {"ops": {"eval__e1__heuristic": {"config": {"limit": 5, "split": "dev", "reward_config": str(custom)}}}}
    result = materialize(build_definitions(), E1_PATH, instance, run_config=config)
    assert result.success
    run_dir = isolated / "outputs" / "evals" / "sv-env-network-logs--heuristic" / result.run_id
    rows = read_results(run_dir / "results.jsonl")
    assert len(rows) == 5 and all(row["reward_weights"]["accuracy"] == 3.0 for row in rows)
    assert all(row["reward_weights"]["format"] == 0.0 for row in rows)  # unset in the custom TOML
    metadata = latest(instance, "eval/e1/heuristic").asset_materialization.metadata
    assert metadata["reward_config"].value["source"] == str(custom)
    assert metadata["dataset_split"].value == "dev"


def test_openai_model_eval_via_registry_and_no_secret_anywhere(isolated: Path, monkeypatch):
    from sv_env_network_logs import heuristic_reply
    from tests.support.openai_server import LoopbackOpenAIServer
    from tests.support.registry import loopback_registry

    secret = "sk-test-DO-NOT-LEAK-0123456789abcdef"
    monkeypatch.setenv("LOOPBACK_API_KEY", secret)
    with LoopbackOpenAIServer(
        lambda req: heuristic_reply(req["messages"][-1]["content"]), require_api_key=secret
    ) as server:
        registry = loopback_registry(
            isolated / "models.yaml",
            server.base_url,
            name="loopback-llm",
            model="loopback-model",
            extra="    api_key_env: LOOPBACK_API_KEY\n    sampling: {temperature: 0.7, max_tokens: 64, seed: 3}\n",
        )
        monkeypatch.setenv("SV_MODEL_REGISTRY", str(registry))
        instance = dg.DagsterInstance.get()
        result = materialize(build_definitions(), [*E1_CORPORA, "dataset/e1", "eval/e1/loopback_llm"], instance)
        assert result.success
        assert server.requests and server.requests[0]["max_completion_tokens"] == 64
    evaluation = latest(instance, "eval/e1/loopback_llm").asset_materialization.metadata
    assert evaluation["base_url"].value == server.base_url and evaluation["model_id"].value == "loopback-model"
    assert evaluation["sampling"].value == {
        "temperature": 0.7,
        "max_tokens": 64,
        "top_p": 1.0,
        "seed": 3,
        "timeout_s": 60.0,
    }
    assert evaluation["config"].value["model"]["api_key_env"] == "LOOPBACK_API_KEY"
    leaks = [
        str(path)
        for path in isolated.rglob("*")
        if path.is_file() and path.name != "models.yaml" and secret.encode() in path.read_bytes()
    ]
    assert leaks == []
    assert sum(1 for _ in isolated.rglob("*.db")) > 0  # the event log was among the files scanned


def test_rescore_job_rescores_the_latest_eval_with_a_new_reward_config(run_e1, tmp_path: Path):
    instance, first, _ = run_e1
    custom = tmp_path / "rescore.toml"
    custom.write_text("[weights]\naccuracy = 5.0\n")
    result = (
        build_definitions()
        .resolve_job_def("rescore_e1")
        .execute_in_process(
            instance=instance,
            run_config={"ops": {"rescore__e1__heuristic": {"config": {"reward_config": str(custom)}}}},
        )
    )
    assert result.success
    metadata = latest(instance, "rescore/e1/heuristic").asset_materialization.metadata
    assert metadata["rescored_from"].value["run_id"] == first.run_id
    assert metadata["input_data_versions"].value == {
        "eval/e1/heuristic": latest(instance, "eval/e1/heuristic").tags["dagster/data_version"]
    }
    rows = read_results(Path(metadata["artifact_path"].value) / "results.jsonl")
    assert rows and all(row["reward_weights"]["accuracy"] == 5.0 for row in rows)
    assert (
        metadata["reward_config_hash"].value
        != latest(instance, "eval/e1/heuristic").asset_materialization.metadata["reward_config_hash"].value
    )
