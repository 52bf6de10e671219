"""A kill -9 mid-eval resumes with the documented command alone: the dead run is marked
failed, its endpoint pool slot is freed, and `sv-dagster resume RUN_ID` finishes the folder
with no example lost and none that had finished asked again."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import dagster as dg

from sv_dagster.core.evals.runner import read_results
from sv_dagster.runs import OWNER_PID, owner_alive, owner_tags, reap_dead_runs
from tests.conftest import REPO_ROOT
from tests.support.openai_server import LoopbackOpenAIServer
from tests.support.registry import loopback_registry

CLI = str(Path(sys.executable).parent / "sv-dagster")


def right_answer(request: dict) -> str:
    from sv_env_network_logs import heuristic_reply

    return heuristic_reply(request["messages"][-1]["content"])


def prompts(requests: list[dict]) -> list[str]:
    return [request["messages"][-1]["content"] for request in requests]


def test_kill_9_at_half_then_resume_run_id_finishes_the_folder(isolated: Path):
    # The project's instance settings: one eval per endpoint pool, so a leaked slot blocks.
    shutil.copy(REPO_ROOT / "configs" / "dagster.yaml", isolated / "dagster_home" / "dagster.yaml")
    with LoopbackOpenAIServer(right_answer, delay_s=0.15) as server:
        registry = loopback_registry(isolated / "models.yaml", server.base_url, extra="    max_concurrency: 1\n")
        environ = {**os.environ, "SV_MODEL_REGISTRY": str(registry)}
        child = subprocess.Popen(
            [CLI, "eval", "e1", "--models", "loop"],
            cwd=REPO_ROOT,
            env=environ,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        evals = isolated / "outputs" / "evals" / "sv-env-network-logs--loop"
        deadline, results = time.time() + 240, None
        while time.time() < deadline:
            found = list(evals.glob("*/results.jsonl"))
            if found and sum(1 for _ in found[0].open()) >= 25:
                results = found[0]
                break
            time.sleep(0.05)
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
        assert results is not None, child.stderr.read().decode()[-2000:]
        finished_before = {row["prompt"][-1]["content"] for row in read_results(results) if row["error"] is None}
        asked_before = len(server.requests)
        run_id = results.parent.name

        instance = dg.DagsterInstance.get()
        assert instance.get_run_by_id(run_id).status == dg.DagsterRunStatus.STARTED  # what a kill leaves
        assert run_id in instance.event_log_storage.get_concurrency_run_ids()  # and its pool slot

        started = time.perf_counter()
        resumed = subprocess.run(
            [CLI, "resume", run_id], cwd=REPO_ROOT, env=environ, capture_output=True, text=True, timeout=240
        )
        took = time.perf_counter() - started
        asked_after = prompts(server.requests[asked_before:])
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert took < 120
    assert f"run {run_id}" in resumed.stderr and "marked failed" in resumed.stderr

    rows = read_results(results)
    ids = [row["example_id"] for row in rows]
    n_test = sum(
        1 for _ in (Path(json.loads((results.parent / "metadata.json").read_text())["dataset"]["path"])).open()
    )
    assert len(ids) == len(set(ids)) == n_test  # none lost, none twice
    assert all(row["error"] is None for row in rows)
    assert 20 <= len(finished_before) < n_test - 5  # killed about half way
    assert not finished_before & set(asked_after)  # finished examples were not asked again
    assert len(asked_after) <= n_test - len(finished_before)

    instance = dg.DagsterInstance.get()
    killed = instance.get_run_by_id(run_id)
    assert killed.status == dg.DagsterRunStatus.FAILURE
    assert run_id not in instance.event_log_storage.get_concurrency_run_ids()
    resumer = instance.get_runs(filters=dg.RunsFilter(tags={"sv/resumes": run_id}))
    assert len(resumer) == 1 and resumer[0].status == dg.DagsterRunStatus.SUCCESS
    summary = json.loads((results.parent / "summary.json").read_text())
    assert summary["n_examples"] == n_test and summary["run_id"] == run_id


@dg.op
def noop() -> None:
    return None


@dg.job
def noop_job() -> None:
    noop()


def test_the_reaper_leaves_a_live_owner_alone_and_reaps_it_once_gone(isolated: Path):
    owner = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    try:
        tags = owner_tags(owner.pid)
        instance = dg.DagsterInstance.get()

        run = instance.create_run_for_job(noop_job, status=dg.DagsterRunStatus.STARTED, tags=tags)
        assert owner_alive(run.tags) is True
        assert reap_dead_runs(instance) == []
        assert instance.get_run_by_id(run.run_id).status == dg.DagsterRunStatus.STARTED
    finally:
        owner.kill()
        owner.wait()
    assert owner_alive(run.tags) is False
    assert [r.run_id for r in reap_dead_runs(instance)] == [run.run_id]
    assert instance.get_run_by_id(run.run_id).status == dg.DagsterRunStatus.FAILURE
    assert reap_dead_runs(instance) == []  # once


def test_the_reaper_takes_only_runs_the_named_process_executed(isolated: Path):
    owner = subprocess.Popen([sys.executable, "-c", "pass"])
    owner.wait()
    tags = owner_tags(owner.pid)  # a dead owner's tags, as a re-execution from the UI inherits them
    instance = dg.DagsterInstance.get()
    parent = instance.create_run_for_job(noop_job, status=dg.DagsterRunStatus.FAILURE, tags=tags)
    launched = instance.create_run_for_job(
        noop_job, status=dg.DagsterRunStatus.STARTED, tags=tags, parent_run_id=parent.run_id, root_run_id=parent.run_id
    )
    never_started = instance.create_run_for_job(noop_job, status=dg.DagsterRunStatus.NOT_STARTED, tags=tags)

    assert [r.run_id for r in reap_dead_runs(instance)] == [never_started.run_id]
    assert instance.get_run_by_id(launched.run_id).status == dg.DagsterRunStatus.STARTED
    assert instance.get_run_by_id(never_started.run_id).status == dg.DagsterRunStatus.FAILURE
    events = instance.all_logs(never_started.run_id, of_type=dg.DagsterEventType.ENGINE_EVENT)
    assert any(f"sv-dagster resume {never_started.run_id}" in (e.message or "") for e in events)


def test_a_run_of_another_host_or_without_owner_is_never_reaped():
    assert owner_alive({}) is None
    assert owner_alive({"sv/owner_host": "elsewhere.example", OWNER_PID: "1"}) is None


def test_resume_refuses_unknown_and_non_eval_runs_in_one_line(isolated: Path):
    unknown = subprocess.run([CLI, "resume", "no-such-run"], cwd=REPO_ROOT, capture_output=True, text=True, timeout=120)
    assert unknown.returncode == 2
    assert unknown.stderr.strip().splitlines()[-1].startswith("sv-dagster resume: no run no-such-run on the instance")
    assert "Traceback" not in unknown.stderr
