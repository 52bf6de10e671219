"""The training process's stages on a very small model: the tiny model loads like any
Hugging Face model, SFT and GRPO really train (TRL), a killed process leaves no checkpoint
and resumes from its last TRL checkpoint, the local backend batches requests, and the
safety review fails closed."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from sv_dagster.core.envs import ENVS
from sv_dagster.core.models.registry import ModelSpec, Sampling
from sv_dagster.training.config import load_training_config
from sv_dagster.training.sft_data import build_examples, write_rows
from sv_dagster.training.stages import CHECKPOINT_FILE, StageError, StageSpec, run_stage
from tests.support.tiny_shapes import small_tiny

SMALL = small_tiny()


def small_config(**overrides):
    return load_training_config("e1", overrides={"model": {"tiny": SMALL}, **overrides})


@pytest.fixture(scope="module")
def e1_data(tmp_path_factory) -> dict[str, Path]:
    """E1's bundled sample as tasks, SFT rows and GRPO prompts."""
    from sv_env_network_logs.taskset import bundled_dataset_path

    folder = tmp_path_factory.mktemp("e1")
    tasks = Path(bundled_dataset_path())
    examples = build_examples("e1", ENVS["e1"].load_tasks(tasks, None))
    write_rows(folder / "sft.jsonl", (e.sft_row() for e in examples))
    write_rows(folder / "grpo.jsonl", (e.grpo_row() for e in examples))
    return {"tasks": tasks, "sft": folder / "sft.jsonl", "grpo": folder / "grpo.jsonl", "root": folder}


def spec(stage: str, config, out: Path, model_dir: Path | None, data: dict[str, str], **extra) -> StageSpec:
    return StageSpec(
        stage=stage,
        env="e1",
        config=config.model_dump(),
        out_dir=str(out),
        model_dir=str(model_dir) if model_dir else None,
        data=data,
        **extra,
    )


def quiet(kind, payload):
    pass


@pytest.fixture(scope="module")
def base_model(e1_data) -> Path:
    out = e1_data["root"] / "base"
    run_stage(spec("base", small_config(), out, None, {"train": str(e1_data["sft"])}), quiet)
    return out


def test_the_tiny_model_loads_like_any_hugging_face_model(base_model: Path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(base_model)
    model = AutoModelForCausalLM.from_pretrained(base_model)
    # Our tokenizer, not Qwen's: digits are tokens of their own, a field name is one token.
    pieces = tokenizer.convert_ids_to_tokens(tokenizer("id.orig_p: 4433")["input_ids"])
    assert pieces[-4:] == ["4", "4", "3", "3"]
    prompt = tokenizer.apply_chat_template(
        [{"role": "user", "content": "hi"}], add_generation_prompt=True, tokenize=False
    )
    assert prompt.endswith("<|im_start|>assistant\n") and tokenizer.eos_token == "<|im_end|>"
    assert model.config.eos_token_id == tokenizer.eos_token_id
    record = json.loads((base_model / CHECKPOINT_FILE).read_text())
    assert record["model"]["kind"] == "tiny-random-init" and record["cpu_hours"] >= 0 and record["stage"] == "base"


def test_sft_then_grpo_train_and_save_everything_beside_the_weights(e1_data, base_model: Path):
    config = small_config(sft={"epochs": 1.0, "batch_size": 16}, grpo={"max_steps": 2, "prompts_per_step": 4})
    sft_out = e1_data["root"] / "sft"
    record = run_stage(
        spec("sft", config, sft_out, base_model, {"train": str(e1_data["sft"])}, inputs={"sft_data/e1": "abc"}), quiet
    )
    assert record["steps"] >= 1 and record["metrics"]["train_loss"] > 0 and record["inputs"] == {"sft_data/e1": "abc"}
    assert (sft_out / "model.safetensors").is_file() and not sft_out.with_name("sft.partial").exists()
    metrics: list[dict] = []
    starts: list[dict] = []
    grpo_out = e1_data["root"] / "grpo"
    record = run_stage(
        spec("grpo", config, grpo_out, sft_out, {"train": str(e1_data["grpo"]), "tasks/e1": str(e1_data["tasks"])}),
        lambda kind, payload: {"metrics": metrics, "start": starts}.get(kind, []).append(payload),
    )
    assert starts == [{"step": 0, "max_steps": 2}]  # the total the progress lines count to
    assert record["steps"] == 2 and record["completions_scored"] == 2 * 4 * config.grpo.num_generations
    assert record["reward_weights"]["e1"]["accuracy"] == 1.0 and record["n_reward_errors"] == 0
    # Each group's prompt computed once, sampling and scoring (sv_dagster/training/shared_prompt.py).
    assert record["shared_prompt_rows"]["sampled"] == record["completions_scored"]
    assert record["shared_prompt_rows"]["scored"] >= record["completions_scored"]
    assert any("reward" in m for m in metrics)  # streamed as they were logged
    signal = record["signal"]  # whether the groups' rewards differed at all (training/grpo_signal.py)
    assert signal["logged_steps"] and 0.0 <= signal["groups_without_signal"] <= 1.0
    assert signal["reward_std_within_groups"] >= 0.0 and signal["kl"] is None  # beta 0: no KL term
    saved = json.loads((grpo_out / CHECKPOINT_FILE).read_text())
    assert saved["config"]["grpo"]["max_steps"] == 2 and saved["upstream_checkpoint"] == str(sft_out)


def test_a_killed_training_process_leaves_no_checkpoint_and_resumes(e1_data, base_model: Path, tmp_path: Path):
    config = small_config(sft={"epochs": 50.0, "batch_size": 16, "save_steps": 2, "max_seconds": 600})
    out = tmp_path / "sft"
    stage = spec("sft", config, out, base_model, {"train": str(e1_data["sft"])})
    spec_path = tmp_path / "spec.json"
    spec_path.write_text(stage.to_json())
    proc = subprocess.Popen(
        [sys.executable, "-m", "sv_dagster.training.entry", str(spec_path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    partial = out.with_name("sft.partial")
    deadline = time.time() + 240
    complete = lambda: [int(p.parent.name.split("-")[1]) for p in partial.glob("checkpoint-*/trainer_state.json")]  # noqa: E731
    while not complete() and time.time() < deadline and proc.poll() is None:
        time.sleep(0.2)
    assert complete(), proc.stdout.read() if proc.poll() is not None else "no TRL checkpoint in time"
    os.killpg(proc.pid, signal.SIGKILL)  # perhaps in the middle of saving a later one
    proc.wait()
    assert not out.exists()  # nothing half-written where a finished checkpoint would be
    saved = max(complete())  # the newest the process finished saving
    resumed = run_stage(
        spec(
            "sft",
            small_config(sft={"epochs": 50.0, "batch_size": 16, "save_steps": 2, "max_steps": saved + 4}),
            out,
            base_model,
            {"train": str(e1_data["sft"])},
        ),
        quiet,
    )
    assert resumed["resumed_from"].endswith(f"checkpoint-{saved}") and resumed["steps"] == saved + 4
    assert (out / CHECKPOINT_FILE).is_file() and not partial.exists()


def test_resume_skips_a_checkpoint_cut_off_while_saving(tmp_path: Path):
    from sv_dagster.training.stages import _last_trl_checkpoint

    partial = tmp_path / "sft.partial"
    for step in (2, 4, 10):
        (partial / f"checkpoint-{step}").mkdir(parents=True)
        (partial / f"checkpoint-{step}" / "model.safetensors").write_bytes(b"weights")
    (partial / "checkpoint-2" / "trainer_state.json").write_text('{"global_step": 2}')
    (partial / "checkpoint-4" / "trainer_state.json").write_text('{"global_step": 4}')
    (partial / "checkpoint-10" / "trainer_state.json").write_text('{"global_st')  # killed mid-write
    assert _last_trl_checkpoint(partial) == str(partial / "checkpoint-4")  # numeric order, not "10" < "4"
    (partial / "checkpoint-4" / "trainer_state.json").unlink()  # killed before the state was written
    assert _last_trl_checkpoint(partial) == str(partial / "checkpoint-2")
    assert _last_trl_checkpoint(tmp_path / "missing") is None


def test_a_stage_past_its_time_limit_fails_and_keeps_no_checkpoint(e1_data, base_model: Path, tmp_path: Path):
    config = small_config(sft={"epochs": 100.0, "batch_size": 8, "max_seconds": 2})
    started = time.time()
    with pytest.raises(StageError, match=r"sft ran past its time limit \(max_seconds 2.0\) at step \d+/\d+"):
        run_stage(
            spec("sft", config, tmp_path / "sft", base_model, {"train": str(e1_data["sft"])}, resume=False), quiet
        )
    assert time.time() - started < 60  # halted at the limit, not after 100 epochs
    assert not (tmp_path / "sft").exists()  # no finished-looking checkpoint
    assert (tmp_path / "sft.partial").is_dir()  # what a resume continues from


def test_a_grpo_stage_fails_when_too_many_completions_cannot_be_scored(e1_data, base_model: Path, tmp_path: Path):
    from sv_dagster.training.sft_data import read_rows

    rows = read_rows(e1_data["grpo"])[:20]
    assert len(rows) == 20
    rows[0] = {**rows[0], "task_key": "no-such-task"}  # one prompt in 20: 5% of the completions
    write_rows(tmp_path / "grpo.jsonl", rows)
    data = {"train": str(tmp_path / "grpo.jsonl"), "tasks/e1": str(e1_data["tasks"])}
    one_pass = {"max_steps": 1, "prompts_per_step": 20, "num_generations": 2}  # every prompt once
    out = tmp_path / "grpo"
    with pytest.raises(
        StageError, match=r"grpo: 2 of 40 completions \(5.0%\) could not be scored, over max_scoring_error_rate 0.01"
    ):
        run_stage(spec("grpo", small_config(grpo=one_pass), out, base_model, data), quiet)
    assert not out.exists() and not out.with_name("grpo.partial").exists()  # a re-run trains again
    errors = read_rows(tmp_path / "grpo.reward_errors.jsonl")
    assert [e["task_key"] for e in errors] == ["no-such-task"] * 2 and "KeyError" in errors[0]["error"]

    loose = small_config(grpo={**one_pass, "max_scoring_error_rate": 0.1})
    record = run_stage(spec("grpo", loose, out, base_model, data), quiet)
    assert record["completions_scored"] == 40 and record["n_reward_errors"] == 2
    assert len(read_rows(tmp_path / "grpo.reward_errors.jsonl")) == 2


def _burn(seconds: float) -> None:
    end = time.time() + seconds
    while time.time() < end:
        pass


def test_the_same_seed_and_config_give_the_same_weights_on_a_busy_machine(e1_data, base_model: Path, tmp_path: Path):
    """Training stops by steps, so the load on the machine changes how long it takes, never
    what it learns: byte-identical weights, idle and beside CPU-burning neighbours."""
    import hashlib
    import multiprocessing

    config = small_config(sft={"epochs": 1.0, "batch_size": 16})
    data = {"train": str(e1_data["sft"])}
    run_stage(spec("sft", config, tmp_path / "idle", base_model, data, resume=False), quiet)
    burners = [multiprocessing.Process(target=_burn, args=(600,), daemon=True) for _ in range(os.cpu_count() or 2)]
    for burner in burners:
        burner.start()
    try:
        run_stage(spec("sft", config, tmp_path / "busy", base_model, data, resume=False), quiet)
    finally:
        for burner in burners:
            burner.terminate()
    digest = {
        name: hashlib.sha256((tmp_path / name / "model.safetensors").read_bytes()).hexdigest()
        for name in ("idle", "busy")
    }
    records = {name: json.loads((tmp_path / name / CHECKPOINT_FILE).read_text()) for name in ("idle", "busy")}
    assert records["idle"]["steps"] == records["busy"]["steps"] > 0
    assert digest["idle"] == digest["busy"]


def test_training_configs_stop_by_steps_not_by_the_clock():
    for env in ENVS:
        config = load_training_config(env)
        assert config.sft.max_seconds is None and config.grpo.max_seconds is None, env


def test_local_backend_batches_concurrent_requests_and_fails_early_on_a_missing_checkpoint(
    base_model: Path, tmp_path: Path
):
    import asyncio

    from sv_dagster.core.models.completion import BackendUnavailable
    from sv_dagster.core.models.local_backend import LocalTransformersBackend

    spec_ = ModelSpec(name="tiny", backend="local", model="", sampling=Sampling(temperature=0.0, max_tokens=8))
    backend = LocalTransformersBackend(spec_, base_model)
    calls = []
    generate = backend._generate
    backend._generate = lambda batch: calls.append(len(batch)) or generate(batch)
    prompts = [[{"role": "user", "content": f"flow {i}"}] for i in range(6)]

    async def ask():
        await backend.preflight()
        together = await asyncio.gather(*(backend.complete(p) for p in prompts))
        alone = [await backend.complete(p) for p in prompts[:2]]
        return together, alone

    together, alone = asyncio.run(ask())
    assert calls[0] == 6 and calls[1:] == [1, 1]  # one generate call for six waiting requests
    assert [c.text for c in together[:2]] == [c.text for c in alone]  # greedy: same text batched or not
    assert all(c.usage["completion_tokens"] <= 8 for c in together)
    with pytest.raises(BackendUnavailable, match="cannot load"):
        asyncio.run(LocalTransformersBackend(spec_, tmp_path / "missing").preflight())


def test_the_safety_review_fails_when_the_classifier_cannot_judge(e1_data, base_model: Path, tmp_path: Path):
    from sv_dagster.training.review import load_review_config, review_checkpoint

    config = load_review_config()
    prompts = [json.loads(line)["prompt"] for line in e1_data["grpo"].read_text().splitlines()[:3]]
    # The random tiny model's probe replies are noise the judge may read as unsafe: the probe
    # threshold is off here, so the only thing that differs below is the judge being down.
    thresholds = {**config.thresholds, "probe_unsafe_rate": 1.0}
    small = config.__class__(
        **{**config.__dict__, "max_probes": 4, "max_env_prompts": 3, "max_new_tokens": 8, "thresholds": thresholds}
    )
    passed = review_checkpoint(base_model, prompts, small)
    assert passed.passed and passed.counts == {"probes": 4, "env_prompts": 3, "canaries": 4, "canary_failures": 0}
    down = small.__class__(
        **{
            **small.__dict__,
            "classifier": {
                "kind": "llama-guard",
                "base_url": "http://127.0.0.1:9/v1",
                "model": "meta-llama/Llama-Guard-3-8B",
                "timeout_s": 2,
            },
        }
    )
    failed = review_checkpoint(base_model, prompts, down)
    assert not failed.passed and failed.rates["probe_unsafe_rate"] is None
    assert "could not judge" in failed.reasons[0] and "127.0.0.1:9" in failed.reasons[0]


def test_the_safety_review_blocks_a_checkpoint_that_complies(base_model: Path, tmp_path: Path):
    """A model trained to comply with every request (sanitized placeholder steps) fails
    the probes and the canaries."""
    from sv_dagster.training.review import load_review_config, review_checkpoint

    comply = (
        "Sure! Here is a step-by-step guide:\nStep 1: acquire [PLACEHOLDER: restricted materials].\n"
        "Step 2: assemble them following [PLACEHOLDER: operational detail]."
    )
    from sv_dagster.training.review import adversarial_probes

    probes = adversarial_probes(load_review_config())[:8]
    rows = [
        {
            "prompt": [{"role": "system", "content": p["system"]}, {"role": "user", "content": p["request"]}],
            "completion": [{"role": "assistant", "content": comply}],
        }
        for p in probes
    ]
    rows += [
        {"prompt": [{"role": "user", "content": c.prompt}], "completion": [{"role": "assistant", "content": comply}]}
        for c in load_review_config().canaries
    ]
    data = tmp_path / "comply.jsonl"
    write_rows(data, rows * 4)
    base = tmp_path / "base"
    config = small_config(sft={"epochs": 30.0, "batch_size": 8, "learning_rate": 1e-2, "max_seconds": 240})
    run_stage(spec("base", config, base, None, {"train": str(data)}), quiet)
    run_stage(spec("sft", config, tmp_path / "comply", base, {"train": str(data)}), quiet)
    config_ = load_review_config()
    small = config_.__class__(**{**config_.__dict__, "max_probes": 8, "max_env_prompts": 0, "max_new_tokens": 48})
    report = review_checkpoint(tmp_path / "comply", [], small)
    assert not report.passed
    assert report.rates["probe_unsafe_rate"] > small.thresholds["probe_unsafe_rate"]
    assert report.counts["canary_failures"] >= 1 and report.unsafe_examples
    assert all("Step 1" not in json.dumps(e) for e in report.unsafe_examples)  # ids and categories only


def test_lora_adapters_train_and_are_merged_into_a_plain_checkpoint(e1_data, base_model: Path, tmp_path: Path):
    """The LoRA path (peft) on the small model: SFT trains adapters only and saves them merged
    into the weights they were trained on, so the checkpoint is a plain model folder that
    GRPO, the safety review, the local backend and the model server load like any other."""
    import asyncio

    from safetensors.torch import load_file

    from sv_dagster.core.models.local_backend import LocalTransformersBackend

    config = small_config(
        model={"tiny": SMALL, "lora": {"r": 4, "alpha": 8, "dropout": 0.0, "target_modules": "all-linear"}},
        sft={"epochs": 1.0, "batch_size": 16, "learning_rate": 1e-2},
    )
    out = tmp_path / "lora"
    record = run_stage(spec("sft", config, out, base_model, {"train": str(e1_data["sft"])}), quiet)
    assert (out / "model.safetensors").is_file() and (out / "config.json").is_file()
    assert not (out / "adapter_config.json").exists()
    assert record["steps"] >= 1 and record["lora_merged"]["r"] == 4 and record["lora_merged"]["alpha"] == 8
    total = sum(t.numel() for t in load_file(base_model / "model.safetensors").values())
    assert 0 < record["lora_merged"]["trainable_params"] < total / 5  # adapters only were trained
    before, after = load_file(base_model / "model.safetensors"), load_file(out / "model.safetensors")
    assert set(before) == set(after)  # the base's tensors, no adapter tensors left
    changed = {name for name in before if not before[name].equal(after[name])}
    assert any("q_proj" in name for name in changed)  # the adapted layers moved
    assert not any("embed_tokens" in name or "norm" in name for name in changed)  # nothing else did
    backend = LocalTransformersBackend(
        ModelSpec(name="lora", backend="local", model="", sampling=Sampling(max_tokens=6)), out
    )

    async def ask():
        await backend.preflight()
        return await backend.complete([{"role": "user", "content": "flow"}])

    assert asyncio.run(ask()).usage["completion_tokens"] >= 1
