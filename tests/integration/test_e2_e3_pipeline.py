"""E2 and E3 through Dagster: bundled datasets with the real test-only corpora beside them
(Terrascan's fixtures; Bandit's examples and ICD's rule tests, read from their pinned
packages), evals of the rule baseline and the oracle scored per source, tool-versioned
provenance in the instance, tool calls in the oracle's conversation, and `dagster job
execute -j eval_e2 / eval_e3` exactly as written."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import dagster as dg
import pytest

from sv_dagster.assembly import build_definitions
from sv_dagster.core.evals.runner import read_results
from tests.conftest import REPO_ROOT
from tests.integration.test_e1_pipeline import latest, materialize

E2_CORPORA = ["corpus/genkubesec", "corpus/k8s_policies", "corpus/terraform", "corpus/terrascan_infrastructure"]
E3_CORPORA = [
    "corpus/devign",
    "corpus/bigvul",
    "corpus/juliet",
    "corpus/codexglue_defect",
    "corpus/stack_v2_commits",
    "corpus/bandit_examples",
    "corpus/icd_rule_tests",
]
E2_PATH = [*E2_CORPORA, "dataset/e2", "eval/e2/heuristic", "eval/e2/tool_oracle"]
E3_PATH = [*E3_CORPORA, "dataset/e3", "eval/e3/heuristic", "eval/e3/tool_oracle"]


@pytest.fixture
def instance(isolated: Path) -> dg.DagsterInstance:
    return dg.DagsterInstance.get()


def test_e2_evals_record_tools_their_versions_and_the_oracles_tool_calls(isolated: Path, instance):
    result = materialize(build_definitions(), E2_PATH, instance)
    assert result.success
    dataset = latest(instance, "dataset/e2").asset_materialization.metadata
    # The bundled task set and 8 of Terrascan's resources (configs/sources.yaml's cap).
    assert dataset["sample"].value is True and dataset["split_sizes"].value["test"] == 31 + 8

    # Provenance as the instance stores it (the event log), not just the files.
    oracle = latest(instance, "eval/e2/tool_oracle").asset_materialization.metadata
    tools = oracle["tools"].value
    assert set(tools) == {"opa", "semgrep", "checkov", "kubelinter", "kubelinter_rego"}
    for name in ("opa", "semgrep", "checkov", "kubelinter_rego"):  # KubeLinter's checks as Rego: on by default
        assert tools[name]["available"] is True and tools[name]["ruleset_hash"], name
    assert tools["kubelinter_rego"]["ruleset_hash"] != tools["opa"]["ruleset_hash"]
    assert tools["semgrep"]["version"][0].isdigit() and tools["checkov"]["version"][0].isdigit()
    assert tools["kubelinter"]["available"] is (shutil.which("kube-linter") is not None)
    run_dir = Path(oracle["artifact_path"].value)
    assert json.loads((run_dir / "metadata.json").read_text())["tools"] == tools

    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["sample"] is True and summary["n_errors"] == 0
    assert summary["finding_f1"] == 1.0 and summary["grounding"] == 1.0  # it consulted the tools
    assert summary["tool_cache"]["hits"] + summary["tool_cache"]["misses"] > 0
    rows = read_results(run_dir / "results.jsonl")
    called = {call["name"] for row in rows for call in row["tool_calls"]}
    assert {"run_opa", "run_semgrep", "run_checkov", "run_kubelinter_rego"} <= called
    assert all(row["details"]["detection"]["f1"] == 1.0 for row in rows)
    assert any(vid.startswith("kubelinter_rego/") for row in rows for vid in row["details"]["oracle"])
    # Terrascan's rows are scored apart, each labelled by its folder and by the tools.
    real = summary["by_source"]["terrascan_infrastructure"]
    assert real["n_examples"] == 8 == sum(row.get("test_source") == "terrascan_infrastructure" for row in rows)
    assert real["label_agreement"]["n"] == 8 and summary["by_source"]["bundled"]["n_examples"] == 31

    heuristic_dir = Path(latest(instance, "eval/e2/heuristic").asset_materialization.metadata["artifact_path"].value)
    heuristic = json.loads((heuristic_dir / "summary.json").read_text())
    assert heuristic["finding_f1"] < summary["finding_f1"]  # no tools, fewer of the oracle's findings


def test_e3_evals_record_scanners_sandbox_and_test_outcomes(isolated: Path, instance):
    result = materialize(build_definitions(), E3_PATH, instance)
    assert result.success
    event = latest(instance, "eval/e3/tool_oracle").asset_materialization.metadata
    run_dir = Path(event["artifact_path"].value)
    metadata = json.loads((run_dir / "metadata.json").read_text())
    assert event["tools"].value == metadata["tools"]
    assert metadata["tools"]["bandit"]["version"][0].isdigit()
    assert metadata["tools"]["semgrep"]["available"] is True and metadata["tools"]["semgrep"]["ruleset_hash"]
    assert metadata["tools"]["sandbox"]["mode"] in {"bwrap", "unshare", "rlimits"}
    summary = json.loads((run_dir / "summary.json").read_text())
    bundled = summary["by_source"]["bundled"]
    assert bundled["fix_rate"] == 1.0 and bundled["test_pass_rate"] == 1.0 and summary["n_errors"] == 0
    rows = read_results(run_dir / "results.jsonl")
    for row in rows:
        assert row["details"]["patch"]["applied"] is True
        assert row["details"]["sandbox"]["mode"] == metadata["tools"]["sandbox"]["mode"]
        if row.get("test_source"):  # a real module without tests: compiled and named in the sandbox
            assert row["details"]["tests"] == "none" and row["details"]["module_check"]["status"] == "ok"
        else:
            assert row["details"]["tests"]["status"] == "ok"
    for source in ("bandit_examples", "icd_rule_tests"):
        assert (
            summary["by_source"][source]["n_examples"] == 4
            and summary["by_source"][source]["test_pass_rate"] == "no tests"
        )
    heuristic_dir = Path(latest(instance, "eval/e3/heuristic").asset_materialization.metadata["artifact_path"].value)
    heuristic = json.loads((heuristic_dir / "summary.json").read_text())
    assert 0.0 < heuristic["by_source"]["bundled"]["fix_rate"] < 1.0  # the regex fixer repairs some tasks, not all


@pytest.mark.slow
@pytest.mark.parametrize("env", ["e2", "e3"])
def test_dagster_job_execute_as_written(isolated: Path, env: str):
    environ = {**os.environ}
    environ.pop("DAGSTER_CLI_JOB_EXECUTE_MODULE_NAME", None)  # the venv's .pth sets it again
    proc = subprocess.run(
        [str(Path(sys.executable).parent / "dagster"), "job", "execute", "-j", f"eval_{env}"],
        cwd=REPO_ROOT,
        env=environ,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    evals = isolated / "outputs" / "evals"
    folders = sorted(p.name for p in evals.iterdir())
    assert len(folders) == 2 and all(name.endswith(("--heuristic", "--tool-oracle")) for name in folders)
    for folder in evals.iterdir():
        (run_dir,) = folder.iterdir()
        assert json.loads((run_dir / "metadata.json").read_text())["tools"]


def test_unscannable_configs_are_recorded_unscored_and_the_run_goes_on(isolated: Path):
    """Binary garbage, a YAML alias bomb and invalid HCL beside a normal file: each bad one is
    an unscored example naming the file and the reason (never "clean"); the good one scores."""
    from sv_dagster.core.envs import ENVS
    from sv_dagster.core.evals.evaluation import evaluate
    from sv_dagster.core.models.backends import make_backend
    from sv_dagster.core.models.registry import ModelSpec

    levels = ["a: &a [x, x, x, x, x, x, x, x, x, x]"] + [
        f"{chr(98 + i)}: &{chr(98 + i)} [" + ", ".join([f"*{chr(97 + i)}"] * 10) + "]" for i in range(8)
    ]
    bad = {
        "garbage.tf": "\x00\x01\x02 not terraform {{{",
        "bomb.yaml": "\n".join(levels) + "\n",
        "broken.tf": 'resource "aws_s3_bucket" "b" {\n  bucket = \n',
    }
    good = (
        REPO_ROOT
        / "environments/sv-env-config-verification/sv_env_config_verification/corpus/kubernetes/privileged-pod.yaml"
    ).read_text()
    dataset = isolated / "configs.jsonl"
    with dataset.open("w") as out:
        for name, content in {**bad, "pod.yaml": good}.items():
            out.write(json.dumps({"id": name, "filename": name, "content": content}) + "\n")
    spec = ModelSpec(name="heuristic", backend="heuristic", model="rules-v1")
    run = evaluate(
        ENVS["e2"],
        spec,
        make_backend(spec, "sv-env-config-verification"),
        dataset_path=dataset,
        outputs_root=isolated / "outputs",
        run_id="bad-input",
    )
    rows = {row["example_id"]: row for row in read_results(run.results_path)}
    for name in bad:
        assert rows[name]["error_kind"] == "scoring" and rows[name]["reward"] is None, name
        assert name in rows[name]["error"] and "no tool could scan" in rows[name]["error"]
    assert rows["pod.yaml"]["error"] is None and rows["pod.yaml"]["reward"] > 0
    assert run.summary["n_scoring_errors"] == 3 and run.summary["n_examples"] == 4
