"""Concurrency pools: eval assets of models behind one endpoint share a pool, and with the
project's instance config (one eval per pool) a multiprocess run never evaluates two of them
at once, so a sweep cannot multiply an endpoint's load."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import dagster as dg

from sv_dagster.core.models.registry import load_registry
from sv_env_network_logs import heuristic_reply
from tests.conftest import REPO_ROOT
from tests.support.openai_server import LoopbackOpenAIServer


def test_models_behind_one_endpoint_share_a_pool():
    models = load_registry(REPO_ROOT / "configs" / "models.yaml")
    assert models["gpt-5"].pool == models["gpt-5-mini"].pool == "endpoint-api.openai.com"
    assert models["claude-sonnet-4.5"].pool == "endpoint-api.anthropic.com"
    assert models["qwen3-72b"].pool != models["llama-3.1-8b"].pool  # separate vLLM servers
    assert models["heuristic"].pool is None and models["tool-oracle"].pool is None  # no endpoint


def test_a_multiprocess_run_evaluates_one_model_per_endpoint_at_a_time(isolated: Path):
    shutil.copy(REPO_ROOT / "configs" / "dagster.yaml", isolated / "dagster_home" / "dagster.yaml")  # default_limit: 1
    with LoopbackOpenAIServer(lambda req: heuristic_reply(req["messages"][-1]["content"]), delay_s=0.2) as server:
        registry = isolated / "models.yaml"
        registry.write_text(
            "models:\n"
            + "".join(
                f"  {name}:\n    backend: openai\n    model: {name}\n    base_url: {server.base_url}\n"
                "    default: true\n    max_concurrency: 3\n"
                for name in ("loop-a", "loop-b")
            )
        )
        environ = {**os.environ, "SV_MODEL_REGISTRY": str(registry)}
        environ.pop("DAGSTER_CLI_JOB_EXECUTE_MODULE_NAME", None)
        proc = subprocess.run(  # the default executor: multiprocess, both evals ready at once
            [str(Path(sys.executable).parent / "dagster"), "job", "execute", "-j", "eval_e1"],
            cwd=REPO_ROOT,
            env=environ,
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert proc.returncode == 0, proc.stderr[-3000:]
        test_rows = next((isolated / "outputs" / "datasets" / "e1").glob("*/test.jsonl")).read_text().splitlines()
        assert len(server.requests) == 2 * len(test_rows) and server.peak_in_flight <= 3
    instance = dg.DagsterInstance.get()
    (run,) = instance.get_runs()
    spans = {}
    for event in instance.all_logs(run.run_id):
        step, kind = event.step_key, event.dagster_event_type
        if step in ("eval__e1__loop_a", "eval__e1__loop_b") and kind in (
            dg.DagsterEventType.STEP_START,
            dg.DagsterEventType.STEP_SUCCESS,
        ):
            spans.setdefault(step, {})[kind] = event.timestamp
    assert len(spans) == 2, spans
    (a, b) = sorted(spans.values(), key=lambda span: span[dg.DagsterEventType.STEP_START])
    assert a[dg.DagsterEventType.STEP_SUCCESS] <= b[dg.DagsterEventType.STEP_START]  # one after the other
