"""E5's SFT targets: the scripted attacker's first message for the behavior (sanitized placeholders)."""

from collections.abc import Iterable
from typing import Any

from sv_env_redteam_attack.baseline import attacker_reply
from sv_shared.sft import SftExample, SftSpec, chat_messages


def build(tasks: list[Any], variant: str | None, context: dict[str, Any]) -> Iterable[SftExample]:
    for task in tasks:
        prompt = chat_messages(task)
        yield SftExample(prompt, attacker_reply(prompt), task.key, difficulty=1)


SFT = SftSpec(build=build)
