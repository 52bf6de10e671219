"""E4's SFT targets: the gold label with the fixed confidence, plus the baseline's
evidence items that verify against the email. Variant `mix` balances the sources; variant
`tool_calls` first calls `check_url` on the email's links (as a model may in an eval or a
tool-calling GRPO rollout), reads the reports and then answers."""

from collections.abc import Iterable
from typing import Any

from sv_env_phishing_detection.baseline import classify_email
from sv_env_phishing_detection.emails import normalize_email
from sv_env_phishing_detection.evidence import build_index, check_item
from sv_env_phishing_detection.urltools import url_report_json
from sv_shared.sft import Messages, SftExample, SftSpec, chat_messages, difficulty, label_target, tool_call_turns


def tool_turns(task: Any) -> Messages:
    """One assistant turn calling `check_url` on each distinct link of the email (the first
    `task.tool_budget` of them), then each report as the tool returns it to a model; none for
    an email without links."""
    email, _ = normalize_email(task.data.info.get("email") or {})
    links = list(dict.fromkeys(str(link) for link in email["links"]))[: task.tool_budget]
    return tool_call_turns([("check_url", {"url": link}, url_report_json(link)) for link in links])


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
            tool_turns=tool_turns(task) if variant == "tool_calls" else [],
        )


SFT = SftSpec(build=build, variants=("mix", "tool_calls"), mix_variant="mix")
