"""E4 as a verifiers v1 taskset: one email in; a calibrated label with verifiable evidence out."""

from __future__ import annotations

import shutil
from collections import Counter
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import verifiers.v1 as vf
from pydantic import Field

from sv_env_phishing_detection.config import REWARD_NAMES, RewardSettings, load_reward_settings
from sv_env_phishing_detection.emails import (
    GOLD_LABELS,
    INT_LABELS,
    LABELS,
    SYSTEM_PROMPT,
    email_from_question,
    normalize_email,
    parse_email_question,
    render_email_question,
)
from sv_env_phishing_detection.evidence import EmailIndex, build_index, evidence_items, evidence_report
from sv_env_phishing_detection.urltools import check_url
from sv_shared import (
    ParsedAnswer,
    abstention_reward,
    accuracy_reward,
    asymmetric_cost_reward,
    calibration_reward,
    format_reward,
    parse_label_answer,
    parsed_once,
)
from sv_shared.jsonl import read_examples
from sv_shared.rewardconfig import with_reward_weights

ENV_ID = "sv-env-phishing-detection"
_MEMO_REPLIES = 8
"""Replies memoised per task (see `PhishingTask._reply`)."""


def bundled_dataset_path() -> Path:
    """The package's own small SAMPLE dataset (synthetic emails)."""
    return Path(str(resources.files("sv_env_phishing_detection") / "data" / "sample.jsonl"))


def write_bundled_dataset(path: Path) -> dict[str, Any]:
    """Copy the bundled JSONL to `path`; returns {"n_examples", "by_language", "by_label"}."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(bundled_dataset_path(), path)
    examples = read_examples(path, allowed_answers=GOLD_LABELS, int_answers=INT_LABELS)
    return {
        "n_examples": len(examples),
        "by_language": dict(sorted(Counter(str(e.info.get("language", "unknown")) for e in examples).items())),
        "by_label": dict(sorted(Counter(e.answer for e in examples).items())),
    }


@dataclass(frozen=True)
class PhishingAnswer:
    """sv_shared's ParsedAnswer plus the evidence list."""

    parsed: ParsedAnswer
    evidence: list[Any]

    def __getattr__(self, name: str) -> Any:  # label, confidence, format_ok, problems, raw, ...
        return getattr(self.parsed, name)

    def to_dict(self) -> dict[str, Any]:
        out = self.parsed.to_dict()
        out["evidence"] = [e if isinstance(e, str) else repr(e) for e in self.evidence[:50]]
        return out


@parsed_once
def parse_completion(text: str | None) -> PhishingAnswer:
    parsed = parse_label_answer(text, LABELS, int_labels=INT_LABELS)
    raw = parsed.raw or {}
    value = next((v for k, v in raw.items() if isinstance(k, str) and k.strip().casefold() == "evidence"), None)
    return PhishingAnswer(parsed, evidence_items(value))


class PhishingData(vf.TaskData):
    answer: str
    """Gold label: Phishing or Legitimate."""
    info: dict[str, Any] = Field(default_factory=dict)
    """Includes `email` (the structured, normalised email the evidence is checked against)."""


class PhishingTaskConfig(vf.TaskConfig):
    reward_config: Path | None = None
    """TOML with reward weights, costs and the evidence penalty; unset uses the packaged rewards.toml."""
    max_tool_calls: int = Field(3, ge=0)
    """check_url calls a model may make per rollout (`task.tool_budget`)."""


class PhishingTask(vf.Task[PhishingData, vf.State, PhishingTaskConfig]):
    """Rewards read the model's last reply; weights come from the task config, which the
    taskset fills from the reward TOML (see `PhishingTaskset.task_config`)."""

    @property
    def key(self) -> str:
        return self.data.id or self.hash

    @property
    def settings(self) -> RewardSettings:
        return load_reward_settings(self.config.reward_config)

    @property
    def tool_budget(self) -> int:
        return self.config.max_tool_calls

    def tool_functions(self) -> list:
        return [check_url]

    @property
    def index(self) -> EmailIndex:
        index = self.__dict__.get("_email_index")
        if index is None:
            email = self.data.info.get("email")
            if not isinstance(email, dict):
                email = parse_email_question(self.data.prompt_text)
            index = self.__dict__["_email_index"] = build_index(email)
        return index

    def _reply(self, text: str | None) -> list:
        """[parsed answer, evidence report or None] for one reply text, memoised per task:
        a rollout's six rewards and its `details` read one parse (and one evidence check)
        instead of parsing the reply again each. The memo belongs to this task's data,
        config and reward settings (a `with_data` copy or a reloaded TOML starts afresh)
        and keeps the last `_MEMO_REPLIES` replies (concurrent rollouts of one task)."""
        settings = self.settings
        memo = self.__dict__.get("_reply_memo")
        if memo is None or memo[0] is not self.data or memo[1] is not self.config or memo[2] is not settings:
            memo = self.__dict__["_reply_memo"] = (self.data, self.config, settings, {})
        replies: dict[str | None, Any] = memo[3]
        entry = replies.get(text)
        if entry is None:
            if len(replies) >= _MEMO_REPLIES:
                replies.clear()
            entry = replies[text] = [parse_completion(text), None]
        return entry

    def answer(self, trace: vf.Trace) -> PhishingAnswer:
        return self._reply(trace.last_reply)[0]

    def evidence_report(self, completion: str | None):
        entry = self._reply(completion)
        if entry[1] is None:
            answer, settings = entry[0], self.settings
            entry[1] = evidence_report(
                answer.evidence,
                self.index,
                answer.label,
                penalty=settings.evidence_penalty,
                max_items=settings.evidence_max_items,
            )
        return entry[1]

    def details(self, completion: str | None, turns: list[dict[str, Any]] | None = None) -> dict[str, Any]:
        """Which evidence items verified and why (stored per results row), and the email's
        group in its corpus where it has one (SpamAssassin's easy_ham, hard_ham, spam): the
        summary reports false alarms per group."""
        out: dict[str, Any] = {"evidence": self.evidence_report((completion or "").strip()).to_dict()}
        group = self.data.info.get("group")
        if isinstance(group, str) and group:
            out["group"] = group
        return out

    # The rewards of one reply (`trace.last_reply`: the final assistant text, stripped).
    def _format(self, reply: str) -> float:
        return format_reward(self._reply(reply)[0].parsed)

    def _accuracy(self, reply: str) -> float:
        return accuracy_reward(self._reply(reply)[0].label, self.data.answer)

    def _calibration(self, reply: str) -> float:
        parsed = self._reply(reply)[0]
        return calibration_reward(parsed.label, parsed.confidence, self.data.answer)

    def _asymmetric_cost(self, reply: str) -> float:
        return asymmetric_cost_reward(self._reply(reply)[0].label, self.data.answer, self.settings.costs)

    def _abstention(self, reply: str) -> float:
        return abstention_reward(
            self._reply(reply)[0].label, self.data.answer, abstain_credit=self.settings.abstain_credit
        )

    def _evidence(self, reply: str) -> float:
        return self.evidence_report(reply).score

    def reward_values(self, completion: str | None) -> dict[str, float]:
        """The six reward scores of a single-turn reply, without a trace: exactly what the
        @vf.reward methods give for a trace whose final assistant message is `completion`
        (a trainer scoring a batch of replies it already holds)."""
        reply = (completion or "").strip()
        return {name: getattr(self, "_" + name)(reply) for name in REWARD_NAMES}

    def fast_score(self, completion: str | None) -> tuple[dict[str, float], dict[str, float], float] | None:
        """`sv_dagster.core.evals.runner.score_completion`'s (scores, weights, total) for a
        single-turn reply without building a trace or going through verifiers' `task.score`
        (the same rewards, weights, order and sum, so the same numbers). None where the
        config plugs what this shortcut does not model (reward functions of its own,
        metrics, judges) or scoring is deferred: score through verifiers then."""
        config = self.config
        plugged = config.rewards
        if (
            self.scoring_deferred
            or config.metrics
            or config.judges
            or any(spec.fn or name not in REWARD_NAMES for name, spec in plugged.items())
        ):
            return None
        values = self.reward_values(completion)
        order = []
        for name in REWARD_NAMES:
            method, spec = getattr(type(self), name), plugged.get(name)
            priority = spec.priority if spec is not None and spec.priority is not None else method.reward_priority
            weight = spec.weight if spec is not None and spec.weight is not None else method._vf_weight
            order.append((-priority, name, float(weight)))
        order.sort()
        scores = {name: float(values[name]) for _, name, _ in order}
        weights = {name: weight for _, name, weight in order}
        return scores, weights, sum(scores[name] * weights[name] for name in scores)

    @vf.reward
    async def format(self, trace: vf.Trace) -> float:
        return self._format(trace.last_reply)

    @vf.reward
    async def accuracy(self, trace: vf.Trace) -> float:
        return self._accuracy(trace.last_reply)

    @vf.reward
    async def calibration(self, trace: vf.Trace) -> float:
        return self._calibration(trace.last_reply)

    @vf.reward
    async def asymmetric_cost(self, trace: vf.Trace) -> float:
        return self._asymmetric_cost(trace.last_reply)

    @vf.reward
    async def abstention(self, trace: vf.Trace) -> float:
        return self._abstention(trace.last_reply)

    @vf.reward
    async def evidence(self, trace: vf.Trace) -> float:
        return self._evidence(trace.last_reply)


class PhishingTasksetConfig(vf.TasksetConfig):
    task: PhishingTaskConfig = PhishingTaskConfig()
    dataset_path: Path | None = None
    """JSONL in the common shape ({"question", "answer", "meta"|"info"}, info.email optional);
    unset uses the bundled sample."""


class PhishingTaskset(vf.Taskset[PhishingTask, PhishingTasksetConfig]):
    def task_config(self) -> PhishingTaskConfig:
        """The task config with reward weights from the TOML (explicit ones win)."""
        base = self.config.task
        return with_reward_weights(base, load_reward_settings(base.reward_config).weights)

    def load(self):
        path = self.config.dataset_path or bundled_dataset_path()
        task_config = self.task_config()
        for example in read_examples(path, allowed_answers=GOLD_LABELS, int_answers=INT_LABELS):
            info = dict(example.info)
            raw_email = info.get("email")
            if isinstance(raw_email, dict):
                # The prompt is rendered from the (normalised) email, so the model sees
                # exactly what evidence is checked against.
                email, notes = normalize_email(raw_email)
                prompt = render_email_question(email)
            else:
                original = len(example.question)
                email, notes = email_from_question(example.question)
                prompt = render_email_question(email)
                if original > len(prompt) + 1000:
                    notes.append(f"prompt cut from {original} characters")
            info.update(email=email, source=example.source)
            if notes:
                info["notes"] = notes
            yield PhishingTask(
                PhishingData(
                    id=example.id, prompt=prompt, system_prompt=SYSTEM_PROMPT, answer=example.answer, info=info
                ),
                task_config,
            )
