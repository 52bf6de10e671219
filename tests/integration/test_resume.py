"""A killed eval resumes: nothing lost, nothing duplicated, finished examples not re-asked."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import dagster as dg

from sv_dagster.assembly import build_definitions
from sv_dagster.core.envs import ENVS
from sv_dagster.core.evals.evaluation import evaluate
from sv_dagster.core.evals.runner import compact_results, read_results
from sv_dagster.core.models.backends import OpenAICompatibleBackend
from sv_dagster.core.models.registry import ModelSpec
from sv_env_network_logs import heuristic_reply
from tests.conftest import REPO_ROOT
from tests.support.openai_server import LoopbackOpenAIServer
from tests.support.registry import loopback_registry

E1 = ENVS["e1"]
N = 60  # the bundled E1 sample

CHILD = """
import sys
from pathlib import Path
from sv_dagster.core.models.backends import OpenAICompatibleBackend
from sv_dagster.core.envs import ENVS
from sv_dagster.core.evals.evaluation import evaluate
from sv_dagster.core.models.registry import ModelSpec
spec = ModelSpec(name="loop", backend="openai", model="m", base_url=sys.argv[1])
evaluate(ENVS["e1"], spec, OpenAICompatibleBackend(spec), dataset_path=None,
         outputs_root=Path(sys.argv[2]), run_id="killed", concurrency=4)
"""


def reply(request: dict) -> str:
    return heuristic_reply(request["messages"][-1]["content"])


def lines(path: Path) -> int:
    return sum(1 for _ in path.open()) if path.exists() else 0


def test_kill_9_mid_run_then_resume_loses_and_duplicates_nothing(tmp_path: Path):
    results = tmp_path / "evals" / "sv-env-network-logs--loop" / "killed" / "results.jsonl"
    with LoopbackOpenAIServer(reply, delay_s=0.05) as server:
        child = subprocess.Popen([sys.executable, "-c", CHILD, server.base_url, str(tmp_path)], cwd=REPO_ROOT)
        deadline = time.time() + 120
        while lines(results) < 12 and time.time() < deadline:
            time.sleep(0.02)
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
        done_before = lines(results)
        assert 12 <= done_before < N, "the child must die mid-run"
        with results.open("a") as handle:  # a torn last line, as a kill mid-write leaves
            handle.write('{"example_id": "torn')
        asked_before = len(server.requests)

        spec = ModelSpec(name="loop", backend="openai", model="m", base_url=server.base_url)
        run = evaluate(
            E1,
            spec,
            OpenAICompatibleBackend(spec),
            dataset_path=None,
            outputs_root=tmp_path,
            run_id="killed",
            resume=True,
        )
        asked_after = len(server.requests) - asked_before
    rows = read_results(results)
    ids = [row["example_id"] for row in rows]
    assert len(ids) == len(set(ids)) == N
    assert {t.key for t in E1.load_tasks(None, None)} == set(ids)
    assert run.metadata["counts"]["n_resumed"] == done_before
    assert asked_after == N - done_before  # finished examples were not asked again
    assert run.summary["n_examples"] == N


def test_compact_keeps_scored_and_drops_model_failures(tmp_path: Path):
    path = tmp_path / "results.jsonl"
    rows = [
        {"example_id": "a", "error_kind": None},
        {"example_id": "b", "error_kind": "model"},
        {"example_id": "c", "error_kind": "scoring"},
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows) + "not json\n")
    assert compact_results(path) == {"a", "c"}
    assert [r["example_id"] for r in read_results(path)] == ["a", "c"]


def test_dagster_resume_run_id_continues_the_folder(isolated: Path, monkeypatch):
    with LoopbackOpenAIServer(reply) as server:
        monkeypatch.setenv("SV_MODEL_REGISTRY", str(loopback_registry(isolated / "models.yaml", server.base_url)))
        defs = build_definitions()
        instance = dg.DagsterInstance.get()
        job = defs.resolve_implicit_global_asset_job_def()
        keys = {
            dg.AssetKey.from_user_string(k)
            for k in ("corpus/iot23", "corpus/cicids2017", "corpus/unsw_nb15", "dataset/e1", "eval/e1/loop")
        }
        no_cache = {"ops": {"eval__e1__loop": {"config": {"use_cache": False}}}}  # count real requests
        first = job.get_subset(asset_selection=keys).execute_in_process(instance=instance, run_config=no_cache)
        results = isolated / "outputs" / "evals" / "sv-env-network-logs--loop" / first.run_id / "results.jsonl"
        total = lines(results)
        kept = results.read_text().splitlines()[: total // 2]
        results.write_text("\n".join(kept) + "\n")  # as if the run had died half way
        asked = len(server.requests)
        config = {"ops": {"eval__e1__loop": {"config": {"resume_run_id": first.run_id, "use_cache": False}}}}
        second = job.get_subset(asset_selection={dg.AssetKey(["eval", "e1", "loop"])}).execute_in_process(
            instance=instance, run_config=config
        )
        assert second.success
        assert len(server.requests) - asked == total - len(kept)
    ids = [row["example_id"] for row in read_results(results)]
    assert len(ids) == len(set(ids)) == total
    metadata = instance.get_latest_materialization_event(
        dg.AssetKey(["eval", "e1", "loop"])
    ).asset_materialization.metadata
    assert metadata["eval_run_id"].value == first.run_id and metadata["resumed_examples"].value == len(kept)


def test_a_results_path_that_is_not_a_regular_file_is_refused(tmp_path: Path):
    import asyncio

    import pytest

    from sv_dagster.core.evals.runner import run_eval

    with pytest.raises(ValueError, match="not a regular file"):
        asyncio.run(run_eval([], None, Path(os.devnull)))
    assert Path(os.devnull).is_char_device()
    with pytest.raises(ValueError, match="not a regular file"):
        asyncio.run(run_eval([], None, tmp_path))
