"""E1's SFT targets: the gold label as the answer schema asks, with the fixed confidence
(calibration is left for RL to learn)."""

from collections.abc import Iterable
from typing import Any

from sv_shared.sft import SftExample, SftSpec, chat_messages, difficulty, label_target

HARD_SCENARIOS = ("benign_failed_connection", "benign_midstream")
"""Benign flows the rule baseline calls attacks."""


def build(tasks: list[Any], variant: str | None, context: dict[str, Any]) -> Iterable[SftExample]:
    for task in tasks:
        yield SftExample(
            chat_messages(task),
            label_target(task.data.answer),
            task.key,
            difficulty=difficulty(task.data.info, HARD_SCENARIOS),
        )


SFT = SftSpec(build=build)
