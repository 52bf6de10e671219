"""E2's SFT targets: the tools' own findings and patch (the oracle), batched through one
scan per tool. Variant `cot` puts the tool-by-tool reasoning first; variant `tool_calls`
teaches the calls themselves: the reply calls each tool the task offers (as a model calls
them in an eval or a tool-calling GRPO rollout), reads their results and then answers."""

import json
from collections.abc import Iterable
from typing import Any

from sv_env_config_verification.baseline import oracle_scans
from sv_env_config_verification.tools import SCANNED_TASK_FILE, findings_json
from sv_shared.sft import Messages, SftExample, SftSpec, chat_messages, tool_call_turns


def tool_turns(task: Any, results: dict[str, Any]) -> Messages:
    """One assistant turn calling each of the task's tools on its file (within its budget of
    calls), then each tool's result as the tool itself returns it to a model."""
    tools = [tool for tool in task.tool_names if tool in results][: task.tool_budget]
    # No arguments: each tool scans the task's own file.
    return tool_call_turns([(f"run_{tool}", {}, findings_json(results[tool], SCANNED_TASK_FILE)) for tool in tools])


def build(tasks: list[Any], variant: str | None, context: dict[str, Any]) -> Iterable[SftExample]:
    messages = [chat_messages(task) for task in tasks]
    scans = oracle_scans([m[-1]["content"] for m in messages])
    for task, prompt, (reply, results) in zip(tasks, messages, scans):
        turns: Messages = []
        if variant == "cot":
            answer = json.loads(reply)
            found = ", ".join(v["id"] for v in answer.get("violations") or []) or "no violation"
            # Reasoning first, then the answer fields, in one JSON object the parser reads.
            reply = json.dumps(
                {
                    "reasoning": f"The tools report: {found}. Each finding is confirmed by the "
                    "file's own fields; the patch changes only those fields.",
                    **answer,
                }
            )
        elif variant == "tool_calls":
            turns = tool_turns(task, results)
        difficulty = 0 if task.data.info.get("clean") else 1
        yield SftExample(prompt, reply, task.key, difficulty=difficulty, tool_turns=turns)


SFT = SftSpec(build=build, variants=("cot", "tool_calls"))
