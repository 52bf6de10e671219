"""`synthetic_daily` for one partition in an isolated instance: six batches, spot checks that
fail until a reviewer decides, decisions recorded by `sv-dagster review synthetic` as events
in the instance, rejected rows excluded downstream, and the seed-model path from the run
config through the registry to a loopback endpoint."""

from __future__ import annotations

import json
from pathlib import Path

import dagster as dg
import pytest

from sv_dagster.assembly import build_definitions
from sv_dagster.cli import main as cli
from sv_dagster.core.data.synthetic import accepted_examples, write_accepted
from sv_dagster.core.envs import ENVS
from tests.support.openai_server import LoopbackOpenAIServer
from tests.support.registry import loopback_registry

PARTITION = "2026-11-12"
QUIET = {"loggers": {"console": {"config": {"log_level": "WARNING"}}}}


def _key(env: str) -> dg.AssetKey:
    return dg.AssetKey(["synthetic", env])


def _batch(instance: dg.DagsterInstance, env: str) -> Path:
    record = instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=_key(env), asset_partitions=[PARTITION]), limit=1
    ).records[0]
    return Path(record.asset_materialization.metadata["artifact_path"].value)


def _latest_check(instance: dg.DagsterInstance, env: str):
    record = instance.get_latest_asset_check_evaluation_record(dg.AssetCheckKey(_key(env), "spot_check"))
    return record.event.dagster_event.event_specific_data


@pytest.fixture(scope="module")
def daily(tmp_path_factory: pytest.TempPathFactory):
    """One synthetic_daily run (module-scoped: the six batches take ~30-50 s with cold tools)."""
    root = tmp_path_factory.mktemp("synthetic")
    patch = pytest.MonkeyPatch()
    home = root / "dagster_home"
    home.mkdir()
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    patch.setenv("SV_OUTPUTS_DIR", str(root / "outputs"))
    patch.setenv("DAGSTER_HOME", str(home))
    patch.delenv("SV_MODEL_REGISTRY", raising=False)
    instance = dg.DagsterInstance.get()
    job = build_definitions().resolve_job_def("synthetic_daily")
    result = job.execute_in_process(instance=instance, partition_key=PARTITION, run_config=QUIET, raise_on_error=False)
    yield root, instance, result
    patch.undo()


def test_synthetic_daily_writes_six_loadable_sample_batches(daily):
    root, instance, result = daily
    assert result.success
    materialized = {
        e.step_materialization_data.materialization.asset_key.path[1]: e
        for e in result.get_asset_materialization_events()
    }
    assert set(materialized) == set(ENVS)
    for env, event in materialized.items():
        assert event.step_materialization_data.materialization.partition == PARTITION
        batch = _batch(instance, env)
        assert batch == root / "outputs" / "datasets" / env / "synthetic" / f"{PARTITION}_{result.run_id[:8]}"
        meta = json.loads((batch / "metadata.json").read_text())
        assert meta["sample"] is True and meta["partition"] == PARTITION and meta["counts"]["accepted"] > 0
        assert sum(meta["label_balance"].values()) == meta["counts"]["accepted"]
        assert meta["rejected"]["count"] == len((batch / "rejects.jsonl").read_text().splitlines())
        queue = (batch / "spot_check.jsonl").read_text().splitlines()
        assert len(queue) == max(1, round(0.05 * meta["counts"]["accepted"]))
        out = root / "loadable" / f"{env}.jsonl"
        rows = write_accepted(batch, out).rows
        tasks = list(ENVS[env].iter_tasks(out, None))  # the environment's own taskset loads the batch
        assert len(tasks) == len(rows) == meta["counts"]["accepted"]
    assert (_batch(instance, "e1") / "flows.parquet").is_file()
    e6_meta = json.loads((_batch(instance, "e6") / "metadata.json").read_text())
    assert e6_meta["seeds"]["source"] == f"synthetic/e5 batch {result.run_id[:8]}"  # paired with this day's E5 batch
    e5_ids = {json.loads(line)["id"] for line in (_batch(instance, "e5") / "examples.jsonl").read_text().splitlines()}
    e6_rows = [json.loads(line) for line in (_batch(instance, "e6") / "examples.jsonl").read_text().splitlines()]
    assert {r["info"]["paired_attack"]["e5_id"] for r in e6_rows if r["info"]["kind"] == "adversarial"} <= e5_ids


def test_spot_checks_fail_until_a_decision_and_decisions_are_in_the_event_log(daily, capsys):
    root, instance, result = daily
    pending = [e for e in result.get_asset_check_evaluations() if e.check_name == "spot_check"]
    assert len(pending) == 6 and not any(e.passed for e in pending)
    assert all(e.severity == dg.AssetCheckSeverity.WARN and "pending human review" in e.description for e in pending)

    e1_batch = _batch(instance, "e1")
    sampled = [json.loads(line)["row_id"] for line in (e1_batch / "spot_check.jsonl").read_text().splitlines()]
    assert (
        cli(
            [
                "review",
                "synthetic",
                "e1",
                "--partition",
                PARTITION,
                "--reviewer",
                "ana",
                "--verdict",
                "reject",
                "--rows",
                sampled[0],
                "--note",
                "implausible duration",
            ]
        )
        == 0
    )
    assert "recorded rev-" in capsys.readouterr().out
    assert _latest_check(instance, "e1").passed is False  # one of the sampled rows decided: still pending
    assert (
        cli(
            [
                "review",
                "synthetic",
                "e1",
                "--partition",
                PARTITION,
                "--reviewer",
                "ana",
                "--verdict",
                "accept",
                "--rows",
                *sampled[1:],
            ]
        )
        == 0
    )
    e1 = _latest_check(instance, "e1")
    assert e1.passed is True and e1.partition == PARTITION and e1.metadata["rejected_rows"].value == 1

    assert cli(["review", "synthetic", "e6", "--partition", PARTITION, "--reviewer", "ben", "--verdict", "accept"]) == 0
    assert _latest_check(instance, "e6").passed is True
    assert (
        cli(
            [
                "review",
                "synthetic",
                "e3",
                "--partition",
                PARTITION,
                "--reviewer",
                "ben",
                "--verdict",
                "reject",
                "--note",
                "tests too weak",
            ]
        )
        == 0
    )
    e3 = _latest_check(instance, "e3")
    assert e3.passed is False and e3.severity == dg.AssetCheckSeverity.ERROR

    observations = instance.fetch_observations(
        dg.AssetRecordsFilter(asset_key=_key("e1"), asset_partitions=[PARTITION]), limit=10
    ).records
    verdicts = [o.asset_observation.metadata["verdict"].value for o in observations]
    assert sorted(verdicts) == ["accept", "reject"]
    assert {o.asset_observation.metadata["reviewer"].value for o in observations} == {"ana"}

    # Downstream: the rejected row is gone, the decision ids come with the rows.
    accepted = accepted_examples(e1_batch)
    assert sampled[0] in accepted.excluded and sampled[0] not in {r["id"] for r in accepted.rows}
    assert len(accepted.decision_ids) == 2
    assert accepted_examples(_batch(instance, "e3")).rows == []

    # A decision on a partition that was never materialized fails with the reason.
    assert (
        cli(["review", "synthetic", "e2", "--partition", "2026-11-13", "--reviewer", "x", "--verdict", "accept"]) == 1
    )
    assert "no materialization for partition 2026-11-13" in capsys.readouterr().err


def test_seed_models_from_the_run_config_sample_through_the_registry(daily, tmp_path, monkeypatch):
    _, instance, _ = daily

    def reply(request: dict) -> str:  # a writer that rephrases the email body, keeping its links
        return "Reminder.\n" + request["messages"][-1]["content"].split("\n\n", 1)[1]

    with LoopbackOpenAIServer(reply) as server:
        monkeypatch.setenv("SV_MODEL_REGISTRY", str(loopback_registry(tmp_path / "models.yaml", server.base_url)))
        job = build_definitions().resolve_job_def("synthetic_daily")
        config = {
            "ops": {
                "synthetic__e4": {
                    "config": {
                        "seed_models": ["loop"],
                        "temperatures": [0.4, 0.8],
                        "variations_per_model": 3,
                        "batch_size": 20,
                    }
                }
            },
            **QUIET,
        }
        result = job.execute_in_process(
            instance=instance, partition_key=PARTITION, run_config=config, asset_selection=[_key("e4")]
        )
        assert result.success and sorted({r["temperature"] for r in server.requests}) == [0.4, 0.8]
        bad = {"ops": {"synthetic__e4": {"config": {"seed_models": ["heuristic"]}}}, **QUIET}
        failed = job.execute_in_process(
            instance=instance,
            partition_key=PARTITION,
            run_config=bad,
            asset_selection=[_key("e4")],
            raise_on_error=False,
        )
    assert not failed.success
    message = next(e.step_failure_data.error.to_string() for e in failed.all_events if e.is_step_failure)
    assert "seed_models ['heuristic'] use an embedded backend" in message
    assert not (Path(_batch(instance, "e4")).parent / f"{PARTITION}_{failed.run_id[:8]}").exists()  # no work done
    rows = [json.loads(line) for line in (_batch(instance, "e4") / "examples.jsonl").read_text().splitlines()]
    assert _batch(instance, "e4").name.endswith(result.run_id[:8])
    from_model = [r for r in rows if r["info"]["origin"] == "model"]
    assert len(from_model) == 6 and {r["info"]["seed_model"]["temperature"] for r in from_model} == {0.4, 0.8}
    meta = (
        instance.fetch_materializations(
            dg.AssetRecordsFilter(asset_key=_key("e4"), asset_partitions=[PARTITION]), limit=1
        )
        .records[0]
        .asset_materialization.metadata
    )
    assert meta["seed_models"].value[0]["name"] == "loop" and meta["seed_models"].value[0]["temperatures"] == [0.4, 0.8]
