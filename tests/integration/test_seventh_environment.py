"""Adding an environment is one package: the toy E7 (tests/fixtures/sv-env-toy-echo, a test
SAMPLE) installed into a folder of its own and put on PYTHONPATH gets its corpus, dataset,
synthetic batch, evals, triage, rescore and jobs, and `sv-dagster eval e7` scores it, with no
file outside the package naming it. It is never installed into the venv: other tests snapshot
the six environments."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import dagster as dg
import pytest

from sv_dagster.core.envs import ENVS
from tests.conftest import REPO_ROOT

TOY = REPO_ROOT / "tests" / "fixtures" / "sv-env-toy-echo"
SOURCE = "toy_echo_lines"
BIN = Path(sys.executable).parent
PARTITION = "2026-11-20"

# Run in a subprocess with the toy on PYTHONPATH: what the code location holds for E7, one
# synthetic/e7 batch materialized, and E7's SFT targets scored by its own rewards.
PROBE = f"""
import asyncio
import json
import dagster as dg
from sv_dagster.core.data.corpora import load_sources
from sv_dagster.core.envs import ENVS
from sv_dagster.core.evals.runner import score_completion
from sv_dagster.assembly import build_definitions
from sv_dagster.training.sft_data import build_examples

defs = build_definitions()
graph = defs.resolve_asset_graph()
jobs = {{name: defs.resolve_job_def(name) for name in ("eval_e7", "rescore_e7", "demo", "synthetic_daily")}}
result = jobs["synthetic_daily"].execute_in_process(
    instance=dg.DagsterInstance.get(),
    partition_key="{PARTITION}",
    asset_selection=[dg.AssetKey(["synthetic", "e7"])],
    raise_on_error=False,
)
batch = [e.step_materialization_data.materialization for e in result.get_asset_materialization_events()]
tasks = {{task.key: task for task in ENVS["e7"].load_tasks(None, None)}}
examples = build_examples("e7", list(tasks.values()))
rewards = [asyncio.run(score_completion(tasks[e.task_key], e.completion))[2] for e in examples]
print(json.dumps({{
    "envs": list(ENVS),
    "sample": {{split: str(path) for split, path in load_sources()["{SOURCE}"].sample.items()}},
    "assets": sorted(key.to_user_string() for key in graph.get_all_asset_keys()),
    "checks": sorted(key.to_user_string() for key in graph.asset_check_keys),
    "jobs": {{name: sorted(k.to_user_string() for k in job.asset_layer.selected_asset_keys) for name, job in jobs.items()}},
    "synthetic": {{
        "success": result.success,
        "keys": [m.asset_key.to_user_string() for m in batch],
        "accepted": [m.metadata["accepted"].value for m in batch],
        "path": [m.metadata["artifact_path"].value for m in batch],
    }},
    "sft": {{"n": len(examples), "rewards": sorted(set(rewards)), "difficulty": [e.difficulty for e in examples]}},
}}))
"""


@pytest.fixture(scope="module")
def toy_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The toy package installed into a folder of its own (its dist-info carries the entry point)."""
    root = tmp_path_factory.mktemp("toy")
    # Built from a copy, so the build leaves nothing (build/, *.egg-info) in the repository.
    source = shutil.copytree(TOY, root / "src", ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
    site = root / "site"
    pip = [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation"]
    proc = subprocess.run([*pip, "--target", str(site), str(source)], capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    return site


def _run(args: list[str], site: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(site)}  # DAGSTER_HOME and SV_OUTPUTS_DIR: `isolated`'s
    env.pop("DAGSTER_CLI_JOB_EXECUTE_MODULE_NAME", None)
    return subprocess.run(args, cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=300)


def test_the_toy_is_no_environment_of_the_project_itself():
    assert "e7" not in ENVS and importlib.util.find_spec("sv_env_toy_echo") is None
    for folder in ("configs", "sv_dagster"):
        for path in (REPO_ROOT / folder).rglob("*"):
            if path.is_file() and path.suffix in (".py", ".yaml", ".yml", ".toml"):
                text = path.read_text(encoding="utf-8", errors="replace")
                assert "toy_echo" not in text and "toy-echo" not in text, path


@pytest.mark.slow
def test_the_installed_toy_gets_every_asset_and_job(isolated: Path, toy_site: Path):
    proc = _run([sys.executable, "-c", PROBE], toy_site)
    assert proc.returncode == 0, proc.stderr[-4000:]
    seen = json.loads(proc.stdout.strip().splitlines()[-1])
    assert seen["envs"] == [*ENVS, "e7"]
    # The corpus source the package ships, its sample a file of the installed package.
    assert seen["sample"] == {"train": str(toy_site / "sv_env_toy_echo" / "data" / "corpus.sample.jsonl")}
    assets = set(seen["assets"])
    e7 = {
        f"corpus/{SOURCE}",
        "dataset/e7",
        "synthetic/e7",
        "eval/e7/heuristic",
        "triage/e7/heuristic",
        "rescore/e7/heuristic",
    }
    assert e7 <= assets
    # One eval, triage and rescore per registry model that supports every environment.
    assert {a.split("/")[2] for a in assets if a.startswith("eval/e7/")} == {
        a.split("/")[2] for a in assets if a.startswith("triage/e7/")
    }
    assert {
        f"corpus/{SOURCE}:great_expectations",
        "dataset/e7:great_expectations",
        "synthetic/e7:spot_check",
        "eval/e7/heuristic:regression_gate",
    } <= set(seen["checks"])
    jobs = seen["jobs"]
    assert set(jobs["eval_e7"]) == {f"corpus/{SOURCE}", "dataset/e7", "eval/e7/heuristic", "triage/e7/heuristic"}
    assert jobs["rescore_e7"] == ["rescore/e7/heuristic"]
    assert {"eval/e7/heuristic", "triage/e7/heuristic", "dataset/e7"} <= set(jobs["demo"])
    assert "synthetic/e7" in jobs["synthetic_daily"]
    # A synthetic batch from the package's template generator, checked by its own verifier.
    synthetic = seen["synthetic"]
    assert synthetic["success"] and synthetic["keys"] == ["synthetic/e7"] and synthetic["accepted"][0] > 0
    batch = Path(synthetic["path"][0])
    assert batch.is_relative_to(isolated / "outputs") and (batch / "examples.jsonl").is_file()
    # Every SFT target earns the full reward (accuracy 1.0 + format 0.2); the negated lines are the hard ones.
    assert seen["sft"]["n"] == 12 and seen["sft"]["rewards"] == [1.2]
    assert sorted(seen["sft"]["difficulty"]) == [1] * 9 + [2] * 3


@pytest.mark.slow
def test_sv_dagster_eval_scores_the_toy(isolated: Path, toy_site: Path):
    proc = _run([str(BIN / "sv-dagster"), "eval", "e7", "--models", "heuristic"], toy_site)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    lines = proc.stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("== e7: "))
    assert lines[start + 1].startswith("DATA: bundled SAMPLE (project-written test SAMPLE lines)")
    header = lines[start + 2].split()
    assert header[:3] == ["model", "n", "accuracy"] and "format" in header
    row = next(line for line in lines[start:] if line.startswith("heuristic ")).split()
    # The rule baseline takes the first label word: 3 of the 12 bundled lines name another first.
    assert row[:3] == ["heuristic", "12", "0.750"]
    instance = dg.DagsterInstance.get()  # the DAGSTER_HOME the subprocess used
    for key in (["corpus", SOURCE], ["dataset", "e7"], ["eval", "e7", "heuristic"]):
        assert instance.get_latest_materialization_event(dg.AssetKey(key)) is not None, key
    (run_dir,) = (isolated / "outputs" / "evals" / "sv-env-toy-echo--heuristic").iterdir()
    summary = json.loads((run_dir / "summary.json").read_text())
    assert (summary["n_examples"], summary["accuracy"], summary["n_errors"]) == (12, 0.75, 0)
    metadata = json.loads((run_dir / "metadata.json").read_text())
    assert metadata["reward_config"]["weights"] == {"format": 0.2, "accuracy": 1.0}
