"""The SFT part of the environment contract: how an environment's tasks become chat
examples whose target is the reply its verifier rewards most.

A builder gets the tasks (loaded through the taskset, so the prompt a model trains on is
byte for byte the prompt it is evaluated on), the chosen variant and a context (the
curated dataset's extra files, e.g. `fix_pairs`, and `held_out_prompts`: test prompts no
augmented row may repeat), and yields `SftExample`s.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

SFT_CONFIDENCE = 0.8
"""The confidence every label target states: SFT teaches the schema and the label, RL the calibration."""

Messages = list[dict[str, Any]]


@dataclass
class SftExample:
    prompt: Messages
    completion: str
    task_key: str
    """The task the reward adapter rebuilds ("" for augmented rows with no task of their own)."""
    env: str = ""
    """Set by the pipeline: the environment's short name."""
    turns_before: Messages = field(default_factory=list)
    """Dialogue turns between the task's prompt and the sampled turn (earlier turns of a conversation)."""
    difficulty: int = 0
    """0 easy .. 2 hard: the curriculum's ordering key."""
    source: str = "curated"
    tool_turns: Messages = field(default_factory=list)
    """The reply's tool calls and the tools' results, before its final `completion` (for
    environments whose evals offer tools; the pipeline adds the tools' schemas to the row)."""

    def sft_row(self) -> dict[str, Any]:
        return {
            "prompt": [*self.prompt, *self.turns_before],
            "completion": [*self.tool_turns, {"role": "assistant", "content": self.completion}],
            **self.keys(),
        }

    def grpo_row(self) -> dict[str, Any]:
        return {"prompt": [*self.prompt, *self.turns_before], "turns_before": self.turns_before, **self.keys()}

    def keys(self) -> dict[str, Any]:
        return {"task_key": self.task_key, "env": self.env, "difficulty": self.difficulty, "source": self.source}


Builder = Callable[[list[Any], "str | None", dict[str, Any]], Iterable[SftExample]]


@dataclass(frozen=True)
class SftSpec:
    build: Builder
    variants: tuple[str, ...] = ()
    """Named variants of the targets (`cot`, `rag`, ...) a training config may choose."""
    mix_variant: str | None = None
    """The variant that balances rows across sources after building (as many from each
    source as the smallest has)."""


def tool_call_turns(calls: list[tuple[str, dict[str, Any], str]]) -> Messages:
    """`calls` (tool name, arguments, what the tool returned) as one assistant turn making
    every call (arguments as a JSON string, the OpenAI form), then each result as a `tool`
    turn; none for no calls."""
    if not calls:
        return []
    return [
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {"type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}
                for name, arguments, _ in calls
            ],
        },
        *({"role": "tool", "name": name, "content": result} for name, _, result in calls),
    ]


def chat_messages(task: Any) -> Messages:
    """OpenAI chat messages for a single-turn task: system prompt (if any) + user prompt."""
    messages = []
    if task.data.system_prompt:
        messages.append({"role": "system", "content": task.data.system_prompt})
    messages.append({"role": "user", "content": task.data.prompt_text})
    return messages


def label_target(label: str, evidence: list[str] | None = None) -> str:
    """The answer a labelling environment's parser reads: label and the fixed SFT confidence."""
    answer: dict[str, Any] = {"label": label, "confidence": SFT_CONFIDENCE}
    if evidence is not None:
        answer["evidence"] = evidence
    return json.dumps(answer)


def difficulty(info: dict[str, Any], hard_scenarios: tuple[str, ...] = ()) -> int:
    """2 for rows marked hard or whose scenario (or framing) names one of
    `hard_scenarios` (the ones the environment's rule baseline gets wrong); else the row's
    own difficulty, 1 for a row with a scenario, 0 otherwise."""
    if info.get("hard"):
        return 2
    scenario = str(info.get("scenario") or info.get("framing") or "")
    if any(word in scenario for word in hard_scenarios):
        return 2
    return int(info.get("difficulty", 1 if scenario else 0))
