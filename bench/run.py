"""Benchmarks (`make bench`): definitions load time, the E1 path in-process, and runner
throughput against a loopback OpenAI-compatible server. Results go to
bench/results/<date>-<name>.json with the command that produced them and the machine.

Targets (checked here, never in timed tests): definitions load < 3 s; E1 path (heuristic,
sample data) < 30 s in-process; runner >= 50 examples/s at concurrency 16 on loopback.
"""

from __future__ import annotations

import asyncio
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

TARGETS = {"definitions_load_s": 3.0, "e1_path_in_process_s": 30.0, "runner_examples_per_s": 50.0}


def bench_definitions_load(repeats: int = 5) -> dict:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", "import sv_dagster.definitions"], check=True, cwd=ROOT)
        times.append(time.perf_counter() - start)
    return {"definitions_load_s": statistics.median(times), "definitions_load_all_s": times}


def bench_e1_path() -> dict:
    import dagster as dg

    from sv_dagster.definitions import build_definitions

    with tempfile.TemporaryDirectory() as tmp:
        os.environ["SV_OUTPUTS_DIR"] = str(Path(tmp) / "outputs")
        instance = dg.DagsterInstance.ephemeral()
        job = build_definitions().resolve_job_def("eval_e1")
        start = time.perf_counter()
        result = job.execute_in_process(instance=instance)
        elapsed = time.perf_counter() - start
        assert result.success
    return {"e1_path_in_process_s": elapsed}


def bench_runner(n: int = 400, concurrency: int = 16) -> dict:
    from sv_env_network_logs import heuristic_reply

    from sv_dagster.core.backends import OpenAICompatibleBackend
    from sv_dagster.core.envs import ENVS
    from sv_dagster.core.registry import ModelSpec
    from tests.support.openai_server import LoopbackOpenAIServer

    env = ENVS["e1"]
    tasks = env.load_tasks(None, None)
    tasks = (tasks * (n // len(tasks) + 1))[:n]

    def reply(request: dict) -> str:
        return heuristic_reply(request["messages"][-1]["content"])

    from sv_dagster.core.runner import run_eval

    with LoopbackOpenAIServer(reply) as server, tempfile.TemporaryDirectory() as tmp:
        spec = ModelSpec(name="loopback", backend="openai", model="loopback-model", base_url=server.base_url)
        backend = OpenAICompatibleBackend(spec)
        start = time.perf_counter()
        counts = asyncio.run(run_eval(tasks, backend, Path(tmp) / "results.jsonl", concurrency=concurrency, parse=env.parser()))
        elapsed = time.perf_counter() - start
    assert counts.n_scored == n, counts
    return {"runner_examples": n, "runner_concurrency": concurrency, "runner_s": elapsed, "runner_examples_per_s": n / elapsed}


def main() -> int:
    results: dict = {}
    results.update(bench_definitions_load())
    results.update(bench_e1_path())
    results.update(bench_runner())
    verdicts = {
        name: (results[name] >= target if name.endswith("per_s") else results[name] <= target)
        for name, target in TARGETS.items()
    }
    record = {
        "command": "make bench  (python bench/run.py)",
        "date": datetime.now(UTC).isoformat(),
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count(), "platform": platform.platform()},
        "results": results,
        "targets": TARGETS,
        "met": verdicts,
    }
    out = ROOT / "bench" / "results" / f"{datetime.now(UTC):%Y-%m-%d}-foundation.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(record, indent=2) + "\n")
    for name, value in results.items():
        if not isinstance(value, list):
            print(f"{name:28s} {value:10.3f}" if isinstance(value, float) else f"{name:28s} {value}")
    print(f"targets met: {verdicts}\nwritten to {out.relative_to(ROOT)}")
    return 0 if all(verdicts.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
