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
from sv_shared import (
    ParsedAnswer,
    abstention_reward,
    accuracy_reward,
    asymmetric_cost_reward,
    calibration_reward,
    format_reward,
    parse_label_answer,
)
from sv_shared.jsonl import read_examples

from sv_env_phishing_detection.config import RewardSettings, load_reward_settings
from sv_env_phishing_detection.emails import (
    GOLD_LABELS,
    INT_LABELS,
    LABELS,
    SYSTEM_PROMPT,
    normalize_email,
    parse_email_question,
    render_email_question,
)
from sv_env_phishing_detection.evidence import EmailIndex, build_index, evidence_items, evidence_report
from sv_env_phishing_detection.urltools import check_url

ENV_ID = "sv-env-phishing-detection"


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

    def answer(self, trace: vf.Trace) -> PhishingAnswer:
        return parse_completion(trace.last_reply)

    def evidence_report(self, completion: str | None):
        answer = parse_completion(completion)
        settings = self.settings
        return evidence_report(answer.evidence, self.index, answer.label, penalty=settings.evidence_penalty,
                               max_items=settings.evidence_max_items)

    def details(self, completion: str | None) -> dict[str, Any]:
        """Which evidence items verified and why (stored per results row)."""
        return {"evidence": self.evidence_report((completion or "").strip()).to_dict()}

    @vf.reward
    async def format(self, trace: vf.Trace) -> float:
        return format_reward(self.answer(trace).parsed)

    @vf.reward
    async def accuracy(self, trace: vf.Trace) -> float:
        return accuracy_reward(self.answer(trace).label, self.data.answer)

    @vf.reward
    async def calibration(self, trace: vf.Trace) -> float:
        parsed = self.answer(trace)
        return calibration_reward(parsed.label, parsed.confidence, self.data.answer)

    @vf.reward
    async def asymmetric_cost(self, trace: vf.Trace) -> float:
        return asymmetric_cost_reward(self.answer(trace).label, self.data.answer, self.settings.costs)

    @vf.reward
    async def abstention(self, trace: vf.Trace) -> float:
        return abstention_reward(
            self.answer(trace).label, self.data.answer, abstain_credit=self.settings.abstain_credit
        )

    @vf.reward
    async def evidence(self, trace: vf.Trace) -> float:
        return self.evidence_report(trace.last_reply).score


class PhishingTasksetConfig(vf.TasksetConfig):
    task: PhishingTaskConfig = PhishingTaskConfig()
    dataset_path: Path | None = None
    """JSONL in the common shape ({"question", "answer", "meta"|"info"}, info.email optional);
    unset uses the bundled sample."""


class PhishingTaskset(vf.Taskset[PhishingTask, PhishingTasksetConfig]):
    def task_config(self) -> PhishingTaskConfig:
        """The task config with reward weights from the TOML; weights set explicitly in
        `config.task.rewards` (e.g. on the vf-eval command line) win."""
        base = self.config.task
        weights = load_reward_settings(base.reward_config).weights
        rewards = {name: vf.RewardFunctionConfig(weight=w) for name, w in weights.items()}
        rewards.update(base.rewards)
        return base.model_copy(update={"rewards": rewards})

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
                email = parse_email_question(example.question)
                notes = ["email parsed from the prompt"]
                prompt = render_email_question(email)
                if original > len(prompt) + 1000:
                    notes.append(f"prompt cut from {original} characters")
            info.update(email=email, source=example.source)
            if notes:
                info["notes"] = notes
            yield PhishingTask(
                PhishingData(id=example.id, prompt=prompt, system_prompt=SYSTEM_PROMPT, answer=example.answer,
                             info=info),
                task_config,
            )
