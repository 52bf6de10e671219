"""sft_data/<env>: curated (and synthetic) rows as chat examples for TRL.

Every row is built from the environment's own task (loaded through its taskset, as an
eval would), so the prompt a model trains on is byte for byte the prompt it is evaluated
on. The target is the reply the environment's verifier rewards most:

  e1, e4  the gold label as the answer schema asks, with a fixed confidence (calibration is
          left for RL to learn); E4 adds evidence items that verify against the email
  e2      the tools' own findings and patch (the oracle), batched through one scan per tool;
          variant `cot` puts the tool-by-tool reasoning first
  e3      the task's reference fix as a unified diff; variant `rag` retrieves similar
          vulnerable->fixed pairs into the prompt
  e5      the scripted attacker's first message for the behavior (sanitized placeholders)
  e6      per scripted turn, a refusal with a safe alternative or a helpful answer; variant
          `refusal` adds every jailbreak framing of each adversarial probe

Rows for GRPO are the same prompts without targets, plus what the reward adapter needs to
rebuild the task (`task_key`) and, for dialogues, the conversation before the sampled turn.
"""

from __future__ import annotations

import json
import random
import re
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sv_dagster.core.envs import ENVS, EnvSpec

SFT_CONFIDENCE = 0.8
"""The confidence every label target states: SFT teaches the schema and the label, RL the calibration."""
VARIANTS = {"e2": ("cot",), "e3": ("rag",), "e4": ("mix",), "e6": ("refusal",)}


class SftDataError(ValueError):
    """Data that cannot become SFT rows; the message names the file or example."""


@dataclass
class ChatExample:
    prompt: list[dict[str, str]]
    completion: str
    task_key: str
    env: str
    turns_before: list[dict[str, str]] = field(default_factory=list)
    """Dialogue turns between the task's prompt and the sampled turn (E6's earlier turns)."""
    difficulty: int = 0
    """0 easy .. 2 hard: the curriculum's ordering key."""
    source: str = "curated"

    def sft_row(self) -> dict[str, Any]:
        return {
            "prompt": [*self.prompt, *self.turns_before],
            "completion": [{"role": "assistant", "content": self.completion}],
            **self.keys(),
        }

    def grpo_row(self) -> dict[str, Any]:
        return {"prompt": [*self.prompt, *self.turns_before], "turns_before": self.turns_before, **self.keys()}

    def keys(self) -> dict[str, Any]:
        return {"task_key": self.task_key, "env": self.env, "difficulty": self.difficulty, "source": self.source}


def _difficulty(info: dict[str, Any]) -> int:
    if info.get("hard"):
        return 2
    scenario = str(info.get("scenario") or info.get("framing") or "")
    # Scenarios a rule baseline gets wrong (named so by the generators) are the hard ones.
    if any(word in scenario for word in ("cc_https", "failed", "midstream", "fiction", "roleplay", "obfuscat")):
        return 2
    return int(info.get("difficulty", 1 if scenario else 0))


def _label_target(label: str, evidence: list[str] | None = None) -> str:
    answer: dict[str, Any] = {"label": label, "confidence": SFT_CONFIDENCE}
    if evidence is not None:
        answer["evidence"] = evidence
    return json.dumps(answer)


def _e1(tasks: list[Any], variant: str | None, context: dict[str, Any]) -> Iterable[ChatExample]:
    from sv_dagster.core.traces import chat_messages

    for task in tasks:
        yield ChatExample(chat_messages(task), _label_target(task.data.answer), task.key, "e1", difficulty=_difficulty(task.data.info))


def _e4(tasks: list[Any], variant: str | None, context: dict[str, Any]) -> Iterable[ChatExample]:
    from sv_env_phishing_detection.baseline import classify_email
    from sv_env_phishing_detection.evidence import build_index, check_item

    from sv_dagster.core.traces import chat_messages

    for task in tasks:
        email = task.data.info.get("email") or {}
        evidence: list[str] = []
        if task.data.answer == "Phishing" and email:
            index = build_index(email)
            # The baseline's cues, kept only where they verify against this email.
            evidence = [item for item in classify_email(email)[2] if check_item(item, index).verified]
        yield ChatExample(chat_messages(task), _label_target(task.data.answer, evidence), task.key, "e4",
                          difficulty=_difficulty(task.data.info), source=str(task.data.info.get("source") or "curated"))


def _e2(tasks: list[Any], variant: str | None, context: dict[str, Any]) -> Iterable[ChatExample]:
    from sv_env_config_verification import oracle_replies

    from sv_dagster.core.traces import chat_messages

    messages = [chat_messages(task) for task in tasks]
    replies = oracle_replies([m[-1]["content"] for m in messages])
    for task, prompt, reply in zip(tasks, messages, replies):
        if variant == "cot":
            answer = json.loads(reply)
            found = ", ".join(v["id"] for v in answer.get("violations") or []) or "no violation"
            # Reasoning first, then the answer fields, in one JSON object the parser reads.
            reply = json.dumps({"reasoning": f"The tools report: {found}. Each finding is confirmed by the "
                                "file's own fields; the patch changes only those fields.", **answer})
        yield ChatExample(prompt, reply, task.key, "e2", difficulty=0 if task.data.info.get("clean") else 1)


_TOKEN = re.compile(r"[A-Za-z_]{3,}")


def _tokens(text: str) -> set[str]:
    return {t.lower() for t in _TOKEN.findall(text)}


def retrieve_fix_pairs(code: str, pairs: list[dict[str, Any]], k: int = 2, exclude: str | None = None) -> list[dict[str, Any]]:
    """The `k` vulnerable->fixed pairs whose vulnerable code shares the most identifiers
    with `code` (Jaccard), excluding the task's own id."""
    wanted = _tokens(code)
    scored = []
    for pair in pairs:
        if exclude is not None and pair.get("id") == exclude:
            continue
        have = _tokens(str(pair.get("before") or ""))
        union = wanted | have
        scored.append((len(wanted & have) / len(union) if union else 0.0, str(pair.get("id")), pair))
    scored.sort(key=lambda item: (-item[0], item[1]))
    return [pair for score, _, pair in scored[:k] if score > 0]


def _e3(tasks: list[Any], variant: str | None, context: dict[str, Any]) -> Iterable[ChatExample]:
    from sv_dagster.core.traces import chat_messages

    pairs = context.get("fix_pairs") or [
        # Without a corpus of fixes, the other tasks' reference fixes are the retrieval pool.
        {"id": t.key, "cwe": t.data.task.get("cwe"), "before": t.data.task.get("source"), "after": t.data.task.get("fix_diff")}
        for t in tasks
    ]
    for task in tasks:
        prompt = chat_messages(task)
        data = task.data.task
        if variant == "rag":
            shown = retrieve_fix_pairs(str(data.get("source") or ""), pairs, exclude=task.key)
            if shown:
                examples = "\n\n".join(
                    f"Example fix ({p.get('cwe') or 'CWE unknown'}):\nBefore:\n{p.get('before')}\nAfter:\n{p.get('after')}"
                    for p in shown
                )
                prompt = [*prompt[:-1], {"role": "user", "content": f"{examples}\n\n{prompt[-1]['content']}"}]
        answer = json.dumps({"diff": data.get("fix_diff") or "", "explanation": f"fixes {data.get('cwe')}: {data.get('title')}"})
        yield ChatExample(prompt, answer, task.key, "e3", difficulty=1)


def _e5(tasks: list[Any], variant: str | None, context: dict[str, Any]) -> Iterable[ChatExample]:
    from sv_env_redteam_attack import attacker_reply

    from sv_dagster.core.traces import chat_messages

    for task in tasks:
        prompt = chat_messages(task)
        yield ChatExample(prompt, attacker_reply(prompt), task.key, "e5", difficulty=1)


def _e6(tasks: list[Any], variant: str | None, context: dict[str, Any]) -> Iterable[ChatExample]:
    from sv_env_redteam_defense import reference_reply
    from sv_env_redteam_defense.conversations import HARMFUL_GOALS
    from sv_shared.redteam import JAILBREAK_FRAMINGS

    from sv_dagster.core.traces import chat_messages

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
            yield ChatExample(prompt, reply, task.key, "e6", turns_before=list(before), difficulty=_difficulty(task.data.info))
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
                yield ChatExample([*prompt[:-1], {"role": "user", "content": request}], reference_reply(request, "refuse"),
                                  "", "e6", difficulty=2, source=f"refusal-augmented:{category}:{name}")


BUILDERS: dict[str, Callable[[list[Any], str | None, dict[str, Any]], Iterable[ChatExample]]] = {
    "e1": _e1, "e2": _e2, "e3": _e3, "e4": _e4, "e5": _e5, "e6": _e6,
}


def load_tasks(env: EnvSpec, path: Path) -> list[Any]:
    try:
        return env.load_tasks(path, None)
    except Exception as exc:
        raise SftDataError(f"{env.short}: cannot load tasks from {path}: {type(exc).__name__}: {exc}") from exc


def mix_by_source(examples: list[ChatExample], seed: int) -> list[ChatExample]:
    """E4's cross-corpus mix: as many rows from each source as the smallest one has, so no
    corpus dominates the style the model learns."""
    by_source: dict[str, list[ChatExample]] = {}
    for example in examples:
        by_source.setdefault(example.source, []).append(example)
    if len(by_source) < 2:
        return examples
    size = min(len(rows) for rows in by_source.values())
    rng = random.Random(seed)
    mixed = [row for rows in by_source.values() for row in rng.sample(rows, size)]
    rng.shuffle(mixed)
    return mixed


def build_examples(
    env_short: str, tasks: list[Any], *, variant: str | None = None, seed: int = 0, context: dict[str, Any] | None = None
) -> list[ChatExample]:
    if variant is not None and variant not in VARIANTS.get(env_short, ()):
        raise SftDataError(f"{env_short}: unknown sft variant {variant!r} (known: {list(VARIANTS.get(env_short, ()))})")
    examples = list(BUILDERS[env_short](tasks, variant, context or {}))
    if variant == "mix":
        examples = mix_by_source(examples, seed)
    return examples


def write_rows(path: Path, rows: Iterable[dict[str, Any]]) -> int:
    path.parent.mkdir(parents=True, exist_ok=True)
    count = 0
    with path.open("w", encoding="utf-8") as handle:
        for row in rows:
            handle.write(json.dumps(row, sort_keys=True) + "\n")
            count += 1
    return count


def read_rows(path: Path) -> list[dict[str, Any]]:
    with path.open(encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def summarize(examples: list[ChatExample]) -> dict[str, Any]:
    return {
        "n": len(examples),
        "by_source": dict(Counter(e.source for e in examples)),
        "by_difficulty": dict(Counter(str(e.difficulty) for e in examples)),
        "n_tasks": len({e.task_key for e in examples}),
    }


def env_spec(env_short: str) -> EnvSpec:
    if env_short not in ENVS:
        raise SftDataError(f"unknown environment {env_short!r} (known: {sorted(ENVS)})")
    return ENVS[env_short]
