"""The regression gate blocks a planted regression, in Dagster and in `make check`, and
says NO BASELINE (a warning, never a pass) when there is nothing to compare with."""

from __future__ import annotations

from pathlib import Path

import dagster as dg

from sv_dagster.assembly import build_definitions
from sv_dagster.cli import main
from sv_env_network_logs import heuristic_reply
from tests.support.openai_server import LoopbackOpenAIServer
from tests.support.registry import loopback_registry

KEY = dg.AssetKey(["eval", "e1", "loop"])
CHECK = dg.AssetCheckKey(KEY, "regression_gate")


def test_gate_warns_without_baseline_then_blocks_a_planted_regression(isolated: Path, monkeypatch, capsys):
    policy = {"reply": lambda prompt: heuristic_reply(prompt)}
    with LoopbackOpenAIServer(lambda req: policy["reply"](req["messages"][-1]["content"])) as server:
        monkeypatch.setenv("SV_MODEL_REGISTRY", str(loopback_registry(isolated / "models.yaml", server.base_url)))
        defs = build_definitions()
        instance = dg.DagsterInstance.get()
        job = defs.resolve_implicit_global_asset_job_def()
        path = {
            *(dg.AssetKey(["corpus", c]) for c in ("iot23", "cicids2017", "unsw_nb15")),
            dg.AssetKey(["dataset", "e1"]),
            KEY,
        }
        config = {"ops": {"eval__e1__loop": {"config": {"split": "train", "use_cache": False}}}}

        # No baseline: a failed check of WARN severity, which blocks nothing (the run succeeds).
        first = job.get_subset(asset_selection=path).execute_in_process(instance=instance, run_config=config)
        (evaluation,) = [
            e for e in first.get_asset_check_evaluations() if e.asset_check_key == CHECK
        ]  # not the data suites
        assert not evaluation.passed and evaluation.severity == dg.AssetCheckSeverity.WARN
        assert evaluation.metadata["state"].value == "NO BASELINE"
        assert "no baseline recorded" in evaluation.metadata["gate"].value["note"]
        capsys.readouterr()
        assert main(["check"]) == 3
        assert "NO BASELINE  eval/e1/loop  no baseline recorded" in capsys.readouterr().out
        eval_dir = Path(
            instance.get_latest_materialization_event(KEY).asset_materialization.metadata["artifact_path"].value
        )
        assert main(["baseline", "record", str(eval_dir)]) == 0

        same = job.get_subset(asset_selection={KEY}).execute_in_process(instance=instance, run_config=config)
        assert same.get_asset_check_evaluations()[0].passed  # same replies: no regression
        capsys.readouterr()
        assert main(["check"]) == 0
        assert "PASS         eval/e1/loop  accuracy +0.0000" in capsys.readouterr().out

        test_split = {"ops": {"eval__e1__loop": {"config": {"split": "test", "use_cache": False}}}}
        other = job.get_subset(asset_selection={KEY}).execute_in_process(instance=instance, run_config=test_split)
        (evaluation,) = other.get_asset_check_evaluations()
        assert not evaluation.passed and evaluation.severity == dg.AssetCheckSeverity.WARN
        assert "is of split 'train', this eval of 'test'" in evaluation.metadata["gate"].value["note"]

        policy["reply"] = lambda prompt: '{"label": "Benign", "confidence": 0.9}'  # the planted regression
        worse = job.get_subset(asset_selection={KEY}).execute_in_process(
            instance=instance, run_config=config, raise_on_error=False
        )
    (failed,) = worse.get_asset_check_evaluations()
    assert not failed.passed and failed.severity == dg.AssetCheckSeverity.ERROR
    gate = failed.metadata["gate"].value
    assert "accuracy fell" in gate["failures"][0]
    accuracy = next(c for c in gate["comparisons"] if c["metric"] == "accuracy")
    assert accuracy["delta"] < -0.1 and accuracy["p_value"] < 0.05 and accuracy["ci"][1] < 0
    capsys.readouterr()
    assert main(["check"]) == 1
    out = capsys.readouterr().out
    assert "FAIL         eval/e1/loop  accuracy fell" in out and "1 regression(s)" in out
