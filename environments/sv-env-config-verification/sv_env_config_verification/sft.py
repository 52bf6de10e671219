"""E2's SFT targets: the tools' own findings and patch (the oracle), batched through one
scan per tool; variant `cot` puts the tool-by-tool reasoning first."""

import json
from collections.abc import Iterable
from typing import Any

from sv_env_config_verification.baseline import oracle_replies
from sv_shared.sft import SftExample, SftSpec, chat_messages


def build(tasks: list[Any], variant: str | None, context: dict[str, Any]) -> Iterable[SftExample]:
    messages = [chat_messages(task) for task in tasks]
    replies = oracle_replies([m[-1]["content"] for m in messages])
    for task, prompt, reply in zip(tasks, messages, replies):
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
        yield SftExample(prompt, reply, task.key, difficulty=0 if task.data.info.get("clean") else 1)


SFT = SftSpec(build=build, variants=("cot",))
