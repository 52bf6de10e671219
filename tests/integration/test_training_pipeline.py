"""Training as Dagster assets, run for real on CPU: the chain `make demo` trains as written
(SFT -> GRPO -> safety review -> evals, training in its own process through Pipes; the
session's one demo run), the same chain through `dagster job execute -j rlft_e1`, the human
sign-off that promotes the reviewed checkpoint, a failed review that blocks the chain, a
training process that dies, stage 2, co-training and an ablation."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import dagster as dg
import pytest

from sv_dagster.jobs.synthetic import DEMO_PARTITION
from sv_dagster.training.config import load_training_config
from tests.conftest import REPO_ROOT, TRAINING_PROFILE

pytestmark = pytest.mark.slow

E1_CHAIN = [
    "sft_data/e1",
    "checkpoint/e1/base",
    "checkpoint/e1/sft",
    "checkpoint/e1/rlft_stage1",
    "safety_review/e1/rlft_stage1",
    "eval/e1/tiny_e1_base",
    "eval/e1/tiny_e1_sft",
    "eval/e1/tiny_e1_rlft1",
]
FAST = '{"grpo": {"max_steps": 4}}'


def cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(Path(sys.executable).parent / args[0]), *args[1:]],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=1500,
    )


def key(path: str) -> dg.AssetKey:
    return dg.AssetKey(path.split("/"))


def latest(instance: dg.DagsterInstance, path: str):
    return instance.get_latest_materialization_event(key(path))


def run_job(name: str, run_config: dict | None = None, only: list[str] | None = None):
    """Job `name` in-process; `only`: just those of its assets, with the job's config for them
    (a subset of a job keeps the job's config for every op, which then fails to validate)."""
    from sv_dagster.assembly import build_definitions

    defs = build_definitions()
    job = defs.resolve_job_def(name)
    if only:
        ops = (job.run_config or {}).get("ops", {})
        keys = {key(path) for path in only}
        run_config = {"ops": {"__".join(k.path): ops["__".join(k.path)] for k in keys if "__".join(k.path) in ops}}
        job = defs.resolve_implicit_global_asset_job_def().get_subset(asset_selection=keys)
    return job.execute_in_process(instance=dg.DagsterInstance.get(), run_config=run_config or {}, raise_on_error=False)


@pytest.fixture(scope="module")
def trained(full_demo) -> dict[str, Path]:
    """The session's `sv-dagster demo`: it trains the E1 chain as written (a day's synthetic
    batch, then `rlft_e1`), so its instance and outputs root serve this module."""
    assert full_demo.proc.returncode == 0, full_demo.proc.stderr[-6000:]
    root = full_demo.root
    return {
        "home": root / "dagster_home",
        "outputs": root / "outputs",
        "root": root,
        "log": full_demo.proc.stdout + full_demo.proc.stderr,
    }


@pytest.fixture
def instance_of(trained, monkeypatch):
    monkeypatch.setenv("DAGSTER_HOME", str(trained["home"]))
    monkeypatch.setenv("SV_OUTPUTS_DIR", str(trained["outputs"]))
    monkeypatch.setenv("SV_TRAINING_PROFILE", TRAINING_PROFILE)
    # the demo's review of the tiny model (tests/support/full_demo.py), for later chains too
    monkeypatch.setenv("SV_SAFETY_REVIEW_CONFIG", str(trained["root"] / "review-tiny-model.yaml"))
    return dg.DagsterInstance.get()


def test_rlft_e1_runs_the_chain_and_keeps_everything_beside_the_weights(trained, instance_of):
    instance = instance_of
    for path in E1_CHAIN:
        assert latest(instance, path) is not None, path
    review = instance.get_latest_asset_check_evaluation_record(
        dg.AssetCheckKey(key("safety_review/e1/rlft_stage1"), "automated_review")
    )
    assert review.event.dagster_event.event_specific_data.passed
    stages = {}
    for stage in ("base", "sft", "rlft_stage1"):
        metadata = latest(instance, f"checkpoint/e1/{stage}").asset_materialization.metadata
        folder = Path(metadata["checkpoint_path"].value)
        assert folder.parent.parent == trained["outputs"] / "checkpoints" / "tiny-e1" and folder.parent.name == stage
        assert not list(folder.parent.glob("*.partial")), "no half-written checkpoint left"
        record = json.loads((folder / "checkpoint.json").read_text())
        assert record["config"]["env"] == "e1" and record["wall_seconds"] > 0 and record["cpu_hours"] > 0
        assert "sft_data/e1" in record["inputs"]  # the input data versions beside the weights
        stages[stage] = (folder, record)
    assert stages["rlft_stage1"][1]["reward_weights"]["e1"]["accuracy"] == 1.0  # the env's weights snapshot
    assert stages["rlft_stage1"][1]["upstream_checkpoint"] == str(stages["sft"][0])  # lineage, not "newest folder"
    assert (stages["sft"][0] / "model.safetensors").is_file()
    # E1's SFT trained on its own rows and 128 of E6's (sft.mix), all in the file beside it.
    mixed = latest(instance, "checkpoint/e1/sft").asset_materialization.metadata["sft_mix"].value
    rows = [json.loads(line) for line in stages["sft"][0].with_name(stages["sft"][0].name + ".sft-mix.jsonl").open()]
    assert mixed["e6"] == 128 and mixed["own"] > 0 and len(rows) == mixed["own"] + 128
    assert sum(row.get("env") == "e6" for row in rows) == 128
    assert "sft_data/e6" in stages["sft"][1]["inputs"]  # its data version beside the weights too
    # Step metrics streamed back from the training process through Pipes while it ran.
    rlft_run = latest(instance, "checkpoint/e1/rlft_stage1").run_id
    messages = [e.user_message for e in instance.all_logs(rlft_run) if e.step_key == "checkpoint__e1__rlft_stage1"]
    assert any(m.startswith("metrics ") and '"reward"' in m for m in messages)
    assert any(
        re.fullmatch(r"grpo e1: step (\d+)/\1 \(100%\), loss -?[\d.]+, reward -?[\d.]+, [\d.]+ s/step", m)
        for m in messages
    ), messages  # the step line a person reads
    assert "{'loss'" not in trained["log"]  # and not the Trainer's raw metrics dicts beside it
    assert re.search(r" - grpo e1: step \d+/\d+ \(\d+%\), loss ", trained["log"])  # the console too
    # Offline W&B: the run is on disk under the outputs root, nothing needed a key.
    assert list((trained["outputs"] / "wandb").rglob("offline-run-*"))
    # Each checkpoint's eval scored that checkpoint, on the held-out test split.
    evaluated = latest(instance, "eval/e1/tiny_e1_rlft1").asset_materialization.metadata
    assert evaluated["checkpoint_path"].value == str(stages["rlft_stage1"][0])
    summaries = {
        m: json.loads(
            (
                Path(latest(instance, f"eval/e1/tiny_e1_{m}").asset_materialization.metadata["artifact_path"].value)
                / "summary.json"
            ).read_text()
        )
        for m in ("base", "sft", "rlft1")
    }
    assert summaries["base"]["format_rate"] < summaries["sft"]["format_rate"]  # SFT taught the answer schema
    assert all(s["ci95"]["format_rate"] and s["ci95"]["mean_reward"] for s in summaries.values())
    # Each trained stage was evaluated on the dev split as it finished; the test split only at the end.
    for stage in ("sft", "rlft_stage1"):
        dev = latest(instance, f"checkpoint/e1/{stage}").asset_materialization.metadata["dev_eval"].value
        dev_summary = json.loads(Path(dev["summary"]).read_text())
        assert dev["split"] == "dev" and dev["n"] == dev_summary["n_examples"] > 0, dev
        assert dev["mean_reward"] == dev_summary["mean_reward"] and dev["mean_reward_ci95"]
        assert json.loads((Path(dev["summary"]).parent / "metadata.json").read_text())["dataset"]["split"] == "dev"
    assert "dev_eval" not in latest(instance, "checkpoint/e1/base").asset_materialization.metadata


def test_sft_data_trains_on_the_synthetic_batch_minus_what_a_reviewer_rejected(trained, instance_of):
    env = {**os.environ, "DAGSTER_HOME": str(trained["home"]), "SV_OUTPUTS_DIR": str(trained["outputs"])}
    first = latest(instance_of, "sft_data/e1").asset_materialization.metadata
    batch = json.loads((Path(first["artifact_path"].value) / "metadata.json").read_text())["synthetic"]
    assert batch["partition"] == DEMO_PARTITION and batch["n_rows"] > 1000 and batch["n_excluded"] == 0
    rejected = json.loads(Path(batch["path"]).read_text().splitlines()[0])["id"]
    review = cli(
        "sv-dagster",
        "review",
        "synthetic",
        "e1",
        "--partition",
        DEMO_PARTITION,
        "--reviewer",
        "bob",
        "--verdict",
        "reject",
        "--rows",
        rejected,
        "--note",
        "implausible byte counts",
        env=env,
    )
    assert review.returncode == 0, review.stderr[-3000:]
    # The data step alone: training on it is the demo's chain, already checked above.
    result = run_job("sft_e1", only=["sft_data/e1"])
    assert result.success
    again = latest(instance_of, "sft_data/e1").asset_materialization.metadata
    folder = Path(again["artifact_path"].value)
    assert rejected not in {
        json.loads(line)["id"] for line in (folder / "tasks" / "train.jsonl").read_text().splitlines()
    }
    recorded = json.loads((folder / "metadata.json").read_text())["synthetic"]
    assert recorded["n_excluded"] == 1 and recorded["decision_ids"]  # the rejection, in sft_data's provenance


def test_lineage_of_a_trained_models_eval_reaches_the_corpus(trained, instance_of):
    env = {**os.environ, "DAGSTER_HOME": str(trained["home"]), "SV_OUTPUTS_DIR": str(trained["outputs"])}
    proc = cli("sv-dagster", "lineage", "eval/e1/tiny_e1_rlft1", "--json", env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    keys = json.dumps(json.loads(proc.stdout))
    for path in (
        "safety_review/e1/rlft_stage1",
        "checkpoint/e1/rlft_stage1",
        "checkpoint/e1/sft",
        "sft_data/e1",
        "synthetic/e1",
        "dataset/e1",
        "corpus/iot23",
    ):
        assert path in keys, path


def test_a_human_signoff_promotes_and_sweeps_evaluate_the_promoted_checkpoint(trained, instance_of):
    env = {**os.environ, "DAGSTER_HOME": str(trained["home"]), "SV_OUTPUTS_DIR": str(trained["outputs"])}
    assert latest(instance_of, "checkpoint/e1/promoted") is None
    # Until one is promoted, the promoted model's eval is skipped, not failed. (The nightly job's
    # other assets, all six environments' evals, are tested in test_program.)
    promoted_eval = ["eval/e1/tiny_e1_promoted"]
    skipped = run_job("nightly_regression", only=promoted_eval)
    assert skipped.success and latest(instance_of, "eval/e1/tiny_e1_promoted") is None

    rejected = cli(
        "sv-dagster", "signoff", "e1", "--reviewer", "bob", "--verdict", "reject", "--note", "too weak", env=env
    )
    assert rejected.returncode == 0 and "not promoted" in rejected.stdout
    assert latest(instance_of, "checkpoint/e1/promoted") is None

    approved = cli("sv-dagster", "signoff", "e1", "--reviewer", "alice", "--verdict", "approve", env=env)
    assert approved.returncode == 0, approved.stderr[-3000:]
    promoted = latest(instance_of, "checkpoint/e1/promoted").asset_materialization.metadata
    reviewed = latest(instance_of, "safety_review/e1/rlft_stage1").asset_materialization.metadata
    assert promoted["checkpoint_path"].value == reviewed["checkpoint_path"].value
    signoff = json.loads(
        (
            Path(latest(instance_of, "safety_signoff/e1").asset_materialization.metadata["artifact_path"].value)
            / "signoff.json"
        ).read_text()
    )
    assert signoff["reviewer"] == "alice" and signoff["verdict"] == "approve" and signoff["signed_at"]
    lineage = cli("sv-dagster", "lineage", "checkpoint/e1/promoted", "--json", env=env)
    assert "safety_signoff/e1" in lineage.stdout and "safety_review/e1/rlft_stage1" in lineage.stdout

    nightly = run_job("nightly_regression", only=promoted_eval)
    assert nightly.success
    scored = latest(instance_of, "eval/e1/tiny_e1_promoted").asset_materialization.metadata
    assert scored["checkpoint_path"].value == promoted["checkpoint_path"].value


def test_a_failed_review_blocks_the_eval_and_the_promotion(trained, instance_of, tmp_path, monkeypatch):
    strict = tmp_path / "review.yaml"
    text = (
        (REPO_ROOT / "configs" / "safety" / "review.yaml")
        .read_text()
        .replace("canary_failures: 0", "canary_failures: -1")
    )
    strict.write_text(text)  # no number of canary hits is acceptable now: the review must fail
    monkeypatch.setenv("SV_SAFETY_REVIEW_CONFIG", str(strict))
    from sv_dagster.assembly import build_definitions

    defs = build_definitions()
    job = defs.resolve_job_def("rlft_e1").get_subset(
        asset_selection={key("safety_review/e1/rlft_stage1"), key("eval/e1/tiny_e1_rlft1")}
    )
    before = latest(instance_of, "eval/e1/tiny_e1_rlft1").run_id
    result = job.execute_in_process(instance=instance_of, raise_on_error=False)
    checks = [e for e in result.all_events if e.event_type_value == "ASSET_CHECK_EVALUATION"]
    assert checks and not checks[0].event_specific_data.passed
    from sv_dagster.instance.outcome import blocked_by_review

    assert blocked_by_review(result)  # what `sv-dagster demo` prints as a stopped chain, not a broken one
    assert latest(instance_of, "eval/e1/tiny_e1_rlft1").run_id == before  # the eval did not run on a blocked checkpoint
    env = {
        **os.environ,
        "DAGSTER_HOME": str(instance_of.root_directory),
        "SV_OUTPUTS_DIR": os.environ["SV_OUTPUTS_DIR"],
    }
    refused = cli("sv-dagster", "signoff", "e1", "--reviewer", "alice", "--verdict", "approve", env=env)
    assert refused.returncode == 1 and "automated safety review failed" in refused.stderr


def test_a_training_process_that_fails_fails_its_asset_with_its_error(trained, instance_of):
    result = run_job(
        "sft_e1",
        {
            "ops": {
                "checkpoint__e1__base": {"config": {"overrides": '{"model": {"base": "/no/such/model"}}'}},
                "checkpoint__e1__sft": {"config": {"overrides": '{"model": {"base": "/no/such/model"}}'}},
            }
        },
    )
    assert not result.success
    failures = [e for e in result.all_events if e.is_step_failure]
    assert [e.step_key for e in failures] == ["checkpoint__e1__sft"]
    assert "cannot load model '/no/such/model'" in str(failures[0].step_failure_data.error.to_string())
    partial = [
        p
        for p in (Path(os.environ["SV_OUTPUTS_DIR"]) / "checkpoints" / "tiny-e1" / "sft").iterdir()
        if result.run_id[:8] in p.name
    ]
    # Only the stage's inputs (its spec, E1's SFT mix) and its partial folder: never a finished-looking one.
    assert all(p.name.endswith((".spec.json", ".sft-mix.jsonl", ".partial")) for p in partial)


def test_stage2_mixes_environments_from_the_reviewed_checkpoint(trained, instance_of):
    result = run_job("rlft_stage2", {"ops": {"checkpoint__rlft_stage2": {"config": {"overrides": FAST}}}})
    assert result.success
    record = json.loads(
        (
            Path(latest(instance_of, "checkpoint/rlft_stage2").asset_materialization.metadata["checkpoint_path"].value)
            / "checkpoint.json"
        ).read_text()
    )
    assert set(record["reward_weights"]) == {"e1", "e4"} and record["steps"] == 4
    # E4's rows are sampled as E4's own GRPO samples them: its reply length and its tools.
    assert record["tools_offered"] == {"e1": [], "e4": ["check_url"]}
    e4 = load_training_config("e4")
    assert record["config"]["grpo"]["max_completion_length"] == e4.grpo.max_completion_length
    assert (
        record["upstream_checkpoint"]
        == latest(instance_of, "checkpoint/e1/rlft_stage1").asset_materialization.metadata["checkpoint_path"].value
    )
    for env in ("e1", "e4"):
        assert latest(instance_of, f"eval/{env}/tiny_rlft2") is not None


def test_an_ablation_reports_paired_deltas_against_the_baseline(trained, instance_of):
    result = run_job(
        "ablation_e1", {"ops": {"ablation__e1": {"config": {"experiments": ["no_calibration"], "overrides": FAST}}}}
    )
    assert result.success
    report = json.loads(
        (
            Path(latest(instance_of, "ablation/e1").asset_materialization.metadata["artifact_path"].value)
            / "ablations.json"
        ).read_text()
    )
    (variant,) = report["variants"]
    assert variant["changes"] == {"reward_overrides.weights.calibration": 0.0}
    metrics = {d["metric"]: d for d in variant["deltas"]}
    assert set(metrics) == {"accuracy", "mean_reward"} and metrics["accuracy"]["test"] == "mcnemar_exact"
    assert (
        metrics["mean_reward"]["n_pairs"]
        == report["baseline"]["summary"]["n_examples"] - report["baseline"]["summary"]["n_errors"]
    )


def test_a_study_detects_what_sft_teaches_and_flags_a_grpo_that_changed_nothing(trained, instance_of):
    """On the tiny model, SFT teaches E1's JSON answer (a planted easy gain: the random base
    writes none); GRPO at a learning rate too small to move a float32 weight is flat, and the
    study says the policy did not move rather than report a finding."""
    config = {"seeds": [0], "grpo_steps": 2, "eval_every": 1, "overrides": '{"grpo": {"learning_rate": 1e-12}}'}
    from sv_dagster.assembly import build_definitions

    # Its own base (built again: an earlier test here leaves a base the SFT stage cannot load).
    selection = {key("checkpoint/e1/base"), key("study/h1_e1")}
    job = build_definitions().resolve_implicit_global_asset_job_def().get_subset(asset_selection=selection)
    result = job.execute_in_process(
        instance=instance_of, run_config={"ops": {"study__h1_e1": {"config": config}}}, raise_on_error=False
    )
    assert result.success
    event = latest(instance_of, "study/h1_e1")
    folder = Path(event.asset_materialization.metadata["artifact_path"].value)
    study = json.loads((folder / "study.json").read_text())
    (seed,) = study["seeds"]
    sft = {c["metric"]: c for c in seed["comparisons"]["sft_vs_base"]}
    assert sft["reward.format"]["verdict"] == "gain" and sft["reward.format"]["p_value"] < 0.05
    assert sft["mean_reward"]["verdict"] == "gain" and sft["mean_reward"]["p_value"] < 0.05
    flat = seed["comparisons"]["grpo_vs_sft"]
    assert flat and {c["verdict"] for c in flat} == {"no change detected"}
    assert [p["step"] for p in seed["curve"]] == [0, 1, 2]
    assert seed["diagnostics"]["policy_unchanged"] and seed["grpo"]["steps"] == 2
    report = (folder / "study.md").read_text()
    assert "GRPO left every dev reply unchanged; not a finding" in report
    assert (folder / "dev_curve.png").read_bytes()[:4] == b"\x89PNG"
    assert study["base_test"]["n"] == seed["test"]["sft"]["n"] == seed["test"]["grpo"]["n"]
    assert study["training_configs"]["0"]["grpo"]["learning_rate"] == 1e-12  # the run's settings, recorded


def test_cotraining_alternates_attacker_and_defender(trained, instance_of):
    quick = json.dumps(
        {
            "cotrain": {"attacker_steps": 2, "defender_steps": 2, "behaviors": 6},
            "sft": {"epochs": 1.0},
            "dev_eval_limit": 5,
        }
    )
    ops = {
        f"checkpoint__{e}__{s}": {"config": {"overrides": quick}}
        for e in ("e5", "e6")
        for s in ("base", "sft", "cotrain_1", "cotrain_2")
    }
    result = run_job("cotrain_e5_e6", {"ops": ops})
    assert result.success
    for env in ("e5", "e6"):  # each stage's dev eval: the same 5 drawn dev examples
        assert latest(instance_of, f"checkpoint/{env}/sft").asset_materialization.metadata["dev_eval"].value["n"] == 5
    for cycle in (1, 2):
        attacker = latest(instance_of, f"checkpoint/e5/cotrain_{cycle}").asset_materialization.metadata
        defender = latest(instance_of, f"checkpoint/e6/cotrain_{cycle}").asset_materialization.metadata
        assert attacker["steps"].value == 2 and defender["steps"].value == 2
        assert defender["probes_from_attacks"].value >= 0 and "attacker_success_rate" in defender
        assert defender["attacked_behaviors"].value == 6  # drawn from the train and dev behaviors
        assert latest(instance_of, f"eval/e5/tiny_e5_cotrain{cycle}") is not None
    # The cycle-2 attacker trained against the cycle-1 defender.
    second = json.loads(
        (
            Path(latest(instance_of, "checkpoint/e5/cotrain_2").asset_materialization.metadata["checkpoint_path"].value)
            / "checkpoint.json"
        ).read_text()
    )
    assert second["upstream_checkpoint"].endswith(
        Path(
            latest(instance_of, "checkpoint/e5/cotrain_1").asset_materialization.metadata["checkpoint_path"].value
        ).name
    )


def test_a_checkpoint_folder_is_a_registry_edit_away_from_an_eval(trained, instance_of, tmp_path):
    """The `local` backend: any checkpoint folder (or model id) served with transformers."""
    # The checkpoint tiny-e1-sft's eval scored (a later test retrains checkpoint/e1/sft).
    folder = latest(instance_of, "eval/e1/tiny_e1_sft").asset_materialization.metadata["checkpoint_path"].value
    registry = tmp_path / "models.yaml"
    registry.write_text(
        (REPO_ROOT / "configs" / "models.yaml").read_text()
        + f"  my-checkpoint:\n    backend: local\n    model: {folder}\n    envs: [e1]\n"
        "    sampling: {temperature: 0.0, max_tokens: 48}\n"
    )
    env = {
        **os.environ,
        "DAGSTER_HOME": str(trained["home"]),
        "SV_OUTPUTS_DIR": str(trained["outputs"]),
        "SV_MODEL_REGISTRY": str(registry),
    }
    proc = cli("sv-dagster", "eval", "e1", "--models", "my-checkpoint", "--n", "10", env=env)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    assert re.search(r"^my-checkpoint +10 ", proc.stdout, re.MULTILINE), proc.stdout  # its row: model, n

    def completions(path: str) -> dict[str, str]:
        folder = Path(latest(instance_of, path).asset_materialization.metadata["artifact_path"].value)
        return {
            row["example_id"]: row["completion"]
            for row in map(json.loads, (folder / "results.jsonl").read_text().splitlines())
        }

    mine, sft = completions("eval/e1/my_checkpoint"), completions("eval/e1/tiny_e1_sft")
    assert len(mine) == 10 and all(mine[example] == sft[example] for example in mine)  # same weights, greedy


def test_dagster_job_execute_runs_the_chain_from_the_cli(trained, instance_of, tmp_path):
    """The same chain as a user starts it from a shell (multiprocess executor), with fewer steps."""
    config = tmp_path / "quick.yaml"
    ops = {
        "checkpoint__e1__sft": {"config": {"overrides": '{"sft": {"epochs": 0.1}}'}},
        "checkpoint__e1__rlft_stage1": {"config": {"overrides": FAST}},
    }
    config.write_text(json.dumps({"ops": ops}))  # YAML is a superset of JSON
    env = {**os.environ, "DAGSTER_HOME": str(trained["home"]), "SV_OUTPUTS_DIR": str(trained["outputs"])}
    env.pop("DAGSTER_CLI_JOB_EXECUTE_MODULE_NAME", None)  # the venv's .pth supplies it, as for a user
    before = latest(instance_of, "eval/e1/tiny_e1_rlft1").run_id
    proc = cli("dagster", "job", "execute", "-j", "rlft_e1", "-c", str(config), env=env)
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0, log[-6000:]
    run_id = latest(instance_of, "eval/e1/tiny_e1_rlft1").run_id
    assert run_id != before and run_id in log
    for path in E1_CHAIN[1:]:
        assert latest(instance_of, path).run_id == run_id, path
    record = Path(
        latest(instance_of, "checkpoint/e1/rlft_stage1").asset_materialization.metadata["checkpoint_path"].value
    )
    assert json.loads((record / "checkpoint.json").read_text())["steps"] == 4
    assert re.search(r"grpo e1: step 4/4 \(100%\), (mean )?loss -?[\d.]+, reward -?[\d.]+, [\d.]+ s/step", log)
    assert "{'loss'" not in log and "eval/e1/tiny_e1_rlft1: wrote " in log
