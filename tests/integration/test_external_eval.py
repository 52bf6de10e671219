"""A large eval in its own process through Dagster Pipes (`external: true`): same rewards,
same files, the process's log lines in the run's event log."""

from __future__ import annotations

import json
from pathlib import Path

import dagster as dg

from sv_dagster.assembly import build_definitions


def results(instance: dg.DagsterInstance) -> dict[str, float]:
    entry = instance.get_latest_materialization_event(dg.AssetKey(["eval", "e1", "heuristic"]))
    folder = Path(entry.asset_materialization.metadata["artifact_path"].value)
    return {
        row["example_id"]: row["reward"] for row in map(json.loads, (folder / "results.jsonl").read_text().splitlines())
    }


def test_an_external_eval_scores_exactly_as_an_in_process_one(isolated: Path):
    job = build_definitions().resolve_job_def("eval_e1")
    instance = dg.DagsterInstance.get()
    config = {"limit": 20, "seed": 7}
    inline = job.execute_in_process(instance=instance, run_config={"ops": {"eval__e1__heuristic": {"config": config}}})
    in_process = results(instance)
    external = job.execute_in_process(
        instance=instance, run_config={"ops": {"eval__e1__heuristic": {"config": {**config, "external": True}}}}
    )
    assert inline.success and external.success
    assert results(instance) == in_process and len(in_process) == 20
    messages = [e.user_message for e in instance.all_logs(external.run_id) if e.step_key == "eval__e1__heuristic"]
    assert any(m.startswith("evaluating heuristic on sv-env-network-logs") for m in messages)  # from the child process
    spec = next((isolated / "outputs" / "evals" / "sv-env-network-logs--heuristic").glob("*.spec.json"))
    assert json.loads(spec.read_text())["limit"] == 20
