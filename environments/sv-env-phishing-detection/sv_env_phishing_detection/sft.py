"""E4's SFT targets: the gold label with the fixed confidence, plus the baseline's
evidence items that verify against the email; variant `mix` balances the sources."""

from collections.abc import Iterable
from typing import Any

from sv_env_phishing_detection.baseline import classify_email
from sv_env_phishing_detection.evidence import build_index, check_item
from sv_shared.sft import SftExample, SftSpec, chat_messages, difficulty, label_target


def build(tasks: list[Any], variant: str | None, context: dict[str, Any]) -> Iterable[SftExample]:
    for task in tasks:
        email = task.data.info.get("email") or {}
        evidence: list[str] = []
        if task.data.answer == "Phishing" and email:
            index = build_index(email)
            # The baseline's cues, kept only where they verify against this email.
            evidence = [item for item in classify_email(email)[2] if check_item(item, index).verified]
        yield SftExample(
            chat_messages(task),
            label_target(task.data.answer, evidence),
            task.key,
            difficulty=difficulty(task.data.info),
            source=str(task.data.info.get("source") or "curated"),
        )


SFT = SftSpec(build=build, variants=("mix",), mix_variant="mix")
