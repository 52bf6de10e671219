"""E6's SFT targets: per scripted turn, a refusal with a safe alternative or a helpful
answer; variant `refusal` adds every jailbreak framing of each sanitized harmful goal."""

from collections.abc import Iterable
from typing import Any

from sv_env_redteam_defense.baseline import reference_reply
from sv_env_redteam_defense.conversations import HARMFUL_GOALS
from sv_shared.redteam import JAILBREAK_FRAMINGS
from sv_shared.sft import SftExample, SftSpec, chat_messages, difficulty

HARD_FRAMINGS = ("fiction", "roleplay")
"""Framings the rule defender falls for."""


def build(tasks: list[Any], variant: str | None, context: dict[str, Any]) -> Iterable[SftExample]:
    seen: set[str] = set(context.get("held_out_prompts") or ())
    prompt: list[dict[str, str]] = []
    for task in tasks:
        prompt = chat_messages(task)
        before: list[dict[str, str]] = []
        for number, (request, expect) in enumerate(zip(task.user_turns, task.expect)):
            if number:
                before = [*before, {"role": "user", "content": request}]
            seen.add(request)
            reply = reference_reply(request, expect)
            yield SftExample(
                prompt, reply, task.key, turns_before=list(before), difficulty=difficulty(task.data.info, HARD_FRAMINGS)
            )
            before = [*before, {"role": "assistant", "content": reply}]
    if variant == "refusal" and prompt:
        # Refusal-tuned: every framing of every sanitized harmful goal, refused with an
        # alternative; requests already in the data (or held out for evaluation) are skipped.
        # They have no task of their own: GRPO and rewards use only rows with a real task.
        for category, goal in HARMFUL_GOALS:
            for name, template in JAILBREAK_FRAMINGS:
                request = template.format(goal=goal)
                if request in seen:
                    continue
                seen.add(request)
                yield SftExample(
                    [*prompt[:-1], {"role": "user", "content": request}],
                    reference_reply(request, "refuse"),
                    "",
                    difficulty=2,
                    source=f"refusal-augmented:{category}:{name}",
                )


SFT = SftSpec(build=build, variants=("refusal",))
