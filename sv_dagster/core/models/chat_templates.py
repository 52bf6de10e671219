"""ChatML chat templates that render tools and tool calls, for models whose own template
renders neither (the embedded tiny model, and SmolLM2-135M-Instruct, whose GGUF template
knows only `role` and `content`).

Without tools or tool calls a conversation renders exactly as plain ChatML (with the
model's default system turn when it has one and the conversation brings none), so giving a
model this template changes none of its tool-less prompts; the conversion of a catalog
model checks that on sample conversations. With `tools`, the system turn lists each tool,
by name, as `- name(parameters): first paragraph of its description`: the same line
whichever way the schema was made (an eval's request, TRL's schema of a GRPO rollout's
method, an SFT row's), so a small model sees one prompt in all three. An assistant turn's
`tool_calls` are written as Qwen writes them (`<tool_call>{"name": ..., "arguments":
{...}}</tool_call>`), which TRL's and transformers serve's Qwen response template read back
(`response_template()`); tool results are `tool` turns."""

from __future__ import annotations

from typing import Any

_JINJA_SYNTAX = ("{{", "}}", "{%", "%}", "{#", "#}")


def chatml_with_tools(default_system: str | None = None) -> str:
    """The template; `default_system`: the system turn a conversation without one gets."""
    if default_system is not None and any(token in default_system for token in _JINJA_SYNTAX):
        raise ValueError(f"default system prompt {default_system!r} contains Jinja syntax")
    has_system = "messages[0]['role'] == 'system'"
    tools_system = (
        f"{{% if {has_system} %}}{{{{ messages[0]['content'] }}}}\n\n{{% endif %}}"
        if default_system is None
        # (each branch ends in its own blank line: Jinja's trim_blocks eats a newline after a tag)
        else f"{{% if {has_system} %}}{{{{ messages[0]['content'] }}}}\n\n{{% else %}}{default_system}\n\n{{% endif %}}"
    )
    plain_system = (
        ""
        if default_system is None
        else f"{{% if not tools and not (messages and {has_system}) %}}<|im_start|>system\n{default_system}<|im_end|>\n{{% endif %}}"
    )
    return (
        "{% if tools %}<|im_start|>system\n"
        f"{tools_system}"
        "Tools you may call:\n"
        "{% for tool in tools | sort(attribute='function.name') %}{% set spec = tool['function'] if tool['function'] is defined else tool %}"
        "- {{ spec['name'] }}({{ ((spec['parameters'] or {})['properties'] or {}).keys() | join(', ') }}): "
        "{{ (spec['description'] or '').split('\n\n')[0] }}\n{% endfor %}"
        'To call one, write <tool_call>\n{"name": <tool name>, "arguments": {<arguments>}}\n</tool_call>'
        "<|im_end|>\n{% endif %}"
        f"{plain_system}"
        "{% for message in messages %}"
        "{% if not (tools and loop.first and message['role'] == 'system') %}"
        "<|im_start|>{{ message['role'] }}\n{{ message['content'] or '' }}"
        "{% for call in message['tool_calls'] or [] %}"
        "{% set function = call['function'] if call['function'] is defined else call %}"
        "{% if loop.first and message['content'] %}\n{% endif %}"
        '<tool_call>\n{"name": {{ function[\'name\'] | tojson }}, "arguments": '
        "{% if function['arguments'] is string %}{{ function['arguments'] }}{% else %}{{ function['arguments'] | tojson }}{% endif %}"
        "}\n</tool_call>{% if not loop.last %}\n{% endif %}"
        "{% endfor %}<|im_end|>\n"
        "{% endif %}{% endfor %}"
        "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
    )


def response_template() -> dict[str, Any]:
    """How the templates' replies are parsed back into content and tool calls: Qwen's
    (TRL's `qwen3_template`), set as a tokenizer's `response_template`."""
    from trl.chat_template_utils import qwen3_template

    return qwen3_template


# Plain conversations a tool template must render exactly as the model's own template does.
SAMPLE_CONVERSATIONS: tuple[list[dict[str, str]], ...] = (
    [{"role": "user", "content": "Is this flow an attack?"}],
    [
        {"role": "system", "content": "You are a network analyst."},
        {"role": "user", "content": "Label this flow."},
        {"role": "assistant", "content": '{"label": "Benign"}'},
        {"role": "user", "content": "And this one?"},
    ],
)
