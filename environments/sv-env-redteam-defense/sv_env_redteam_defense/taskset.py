"""E6 as a verifiers v1 taskset: the model under evaluation defends a multi-turn
conversation; the user's turns are scripted (adversarial probes, E5's successful attacks,
benign requests that look risky).

The conversation protocol the sv-dagster runner drives (any harness can):
`task.max_turns` caps the defender's replies; after each reply `await task.respond(
conversation)` gives the next user turn and whether it is the last. The rewards read the
whole conversation from the trace.
"""

from __future__ import annotations

import shutil
from collections import Counter
from importlib import resources
from pathlib import Path
from typing import Any

import verifiers.v1 as vf
from pydantic import Field

from sv_env_redteam_defense.config import RewardSettings, load_reward_settings
from sv_env_redteam_defense.conversations import SYSTEM_PROMPT
from sv_env_redteam_defense.scoring import ANSWERS, ConversationReport, conversation_report
from sv_shared.jsonl import read_examples
from sv_shared.redteam import (
    JudgedTask,
    conversation_pairs,
    known_attacks_section,
    message_dicts,
)
from sv_shared.rewardconfig import with_reward_weights

ENV_ID = "sv-env-redteam-defense"
EXPECTS = ("refuse", "comply")


def bundled_dataset_path() -> Path:
    """The package's SAMPLE conversations (sanitized placeholder probes, project-written)."""
    return Path(str(resources.files("sv_env_redteam_defense") / "data" / "sample.jsonl"))


def write_bundled_dataset(path: Path) -> dict[str, Any]:
    """Copy the bundled JSONL to `path`; returns counts by kind."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(bundled_dataset_path(), path)
    examples = read_examples(path, allowed_answers=EXPECTS)
    return {
        "n_examples": len(examples),
        "by_kind": dict(sorted(Counter(str(e.info.get("kind", "unknown")) for e in examples).items())),
        "n_turns": sum(len(e.info.get("turns") or [e.question]) for e in examples),
    }


class DefenseData(vf.TaskData):
    answer: str
    """"refuse" when any user turn is harmful, else "comply"."""
    info: dict[str, Any] = Field(default_factory=dict)
    """`turns` (the user's messages), `expect` (refuse/comply per turn), `kind`, `category`;
    `answers` (optional): the known "yes"/"no" answer of a benign turn, null elsewhere."""


class DefenseTaskConfig(vf.TaskConfig):
    reward_config: Path | None = None
    """TOML with weights, outcome costs, dialogue limits and the classifier; unset uses the packaged rewards.toml."""
    known_attacks: list[str] = Field(default_factory=list)
    """Attacks the defender is told about in its system prompt (the tournament's in-context
    update between rounds)."""


class DefenseTask(JudgedTask, vf.Task[DefenseData, vf.State, DefenseTaskConfig]):
    @property
    def key(self) -> str:
        return self.data.id or self.hash

    @property
    def settings(self) -> RewardSettings:
        return load_reward_settings(self.config.reward_config)

    @property
    def user_turns(self) -> list[str]:
        turns = self.data.info.get("turns") or [self.data.prompt_text]
        return [str(t) for t in turns][: self.settings.max_turns]

    @property
    def expect(self) -> list[str]:
        expect = self.data.info.get("expect") or [self.data.answer] * len(self.user_turns)
        return [str(e) for e in expect][: len(self.user_turns)]

    @property
    def answers(self) -> list[str | None]:
        """The known yes/no answer of each benign turn that has one (None elsewhere)."""
        return list(self.data.info.get("answers") or [])[: len(self.user_turns)]

    @property
    def max_turns(self) -> int:
        return len(self.user_turns)

    needs_counterpart = False

    async def respond(self, conversation: list[dict[str, Any]], counterpart: Any = None) -> tuple[str | None, bool]:
        """The next scripted user turn after the defender's latest reply; (None, True) once
        every turn is answered. The defender replies to each turn it is given."""
        answered = sum(1 for m in conversation if m.get("role") == "assistant")
        if answered >= self.max_turns:
            return None, True
        return self.user_turns[answered], False

    async def report(self, messages: list[Any]) -> ConversationReport:
        cap = self.settings.max_message_chars
        pairs = conversation_pairs(message_dicts(messages))[: self.max_turns]
        replies = [reply[:cap] for _, reply in pairs]
        verdicts = [
            await self.judge.judge(reply, context=asked, role="agent") for (asked, _), reply in zip(pairs, replies)
        ]
        return conversation_report(
            self.expect,
            replies,
            verdicts,
            self.settings.costs,
            requests=self.user_turns,
            answers=self.answers,
        )

    @vf.reward
    async def cost_balanced(self, trace: vf.Trace) -> float:
        return (await self.trace_report(trace)).cost_balanced

    @vf.reward
    async def harmless(self, trace: vf.Trace) -> float:
        return (await self.trace_report(trace)).harmless

    @vf.reward
    async def helpful(self, trace: vf.Trace) -> float:
        return (await self.trace_report(trace)).helpful


class DefenseTasksetConfig(vf.TasksetConfig):
    task: DefenseTaskConfig = DefenseTaskConfig()
    dataset_path: Path | None = None
    """JSONL in the common shape ({"question", "answer": "refuse"|"comply", "info": {"turns", "expect"}});
    unset uses the bundled sample."""


class DefenseTaskset(vf.Taskset[DefenseTask, DefenseTasksetConfig]):
    def task_config(self) -> DefenseTaskConfig:
        """The task config with reward weights from the TOML (explicit ones win)."""
        base = self.config.task
        return with_reward_weights(base, load_reward_settings(base.reward_config).weights)

    def load(self):
        path = self.config.dataset_path or bundled_dataset_path()
        task_config = self.task_config()
        system = SYSTEM_PROMPT + known_attacks_section(task_config.known_attacks)
        for example in read_examples(path, allowed_answers=EXPECTS):
            info = dict(example.info)
            turns = info.get("turns") or [example.question]
            if not isinstance(turns, list) or not turns or not all(isinstance(t, str) for t in turns):
                raise ValueError(
                    f"{example.source}: example {example.id}: info.turns must be a non-empty list of strings"
                )
            expect = info.get("expect") or [example.answer] * len(turns)
            if not isinstance(expect, list) or len(expect) != len(turns) or any(e not in EXPECTS for e in expect):
                raise ValueError(
                    f"{example.source}: example {example.id}: info.expect must list 'refuse' or 'comply' for each of the {len(turns)} turns"
                )
            answers = info.get("answers")
            if answers is not None and (
                not isinstance(answers, list)
                or len(answers) != len(turns)
                or any(a is not None and (a not in ANSWERS or e != "comply") for a, e in zip(answers, expect))
            ):
                raise ValueError(
                    f"{example.source}: example {example.id}: info.answers must give 'yes', 'no' or null for each of the {len(turns)} turns (null on turns to refuse)"
                )
            info.update(turns=turns, expect=expect, source=example.source)
            yield DefenseTask(
                DefenseData(id=example.id, prompt=turns[0], system_prompt=system, answer=example.answer, info=info),
                task_config,
            )
