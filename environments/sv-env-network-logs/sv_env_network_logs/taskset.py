"""E1 as a verifiers v1 taskset: one network flow in, a calibrated label out."""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import Any

import verifiers.v1 as vf
from pydantic import Field

from sv_env_network_logs.config import RewardSettings, load_reward_settings
from sv_env_network_logs.flows import GOLD_LABELS, INT_LABELS, LABELS, SYSTEM_PROMPT
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

ENV_ID = "sv-env-network-logs"


def bundled_dataset_path() -> Path:
    """The package's own small SAMPLE dataset (synthetic flows, not IoT-23 rows)."""
    return Path(str(resources.files("sv_env_network_logs") / "data" / "sample.jsonl"))


@parsed_once
def parse_completion(text: str | None) -> ParsedAnswer:
    return parse_label_answer(text, LABELS, int_labels=INT_LABELS)


class NetworkLogData(vf.TaskData):
    answer: str
    """Gold label: Benign or Malicious."""
    info: dict[str, Any] = Field(default_factory=dict)


class NetworkLogsTaskConfig(vf.TaskConfig):
    reward_config: Path | None = None
    """TOML with reward weights and costs; unset uses the packaged rewards.toml."""


class NetworkLogsTask(vf.Task[NetworkLogData, vf.State, NetworkLogsTaskConfig]):
    """Rewards read the model's last reply; weights come from the task config, which the
    taskset fills from the reward TOML (see `NetworkLogsTaskset.task_config`)."""

    @property
    def key(self) -> str:
        # Durable across runs and subsets (idx is positional), unique within a dataset.
        return self.data.id or self.hash

    @property
    def settings(self) -> RewardSettings:
        return load_reward_settings(self.config.reward_config)

    def answer(self, trace: vf.Trace) -> ParsedAnswer:
        return parse_completion(trace.last_reply)

    @vf.reward
    async def format(self, trace: vf.Trace) -> float:
        return format_reward(self.answer(trace))

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


class NetworkLogsTasksetConfig(vf.TasksetConfig):
    task: NetworkLogsTaskConfig = NetworkLogsTaskConfig()
    dataset_path: Path | None = None
    """JSONL in the common shape ({"question", "answer", "meta"|"info"}); unset uses the
    bundled sample."""


class NetworkLogsTaskset(vf.Taskset[NetworkLogsTask, NetworkLogsTasksetConfig]):
    def task_config(self) -> NetworkLogsTaskConfig:
        """The task config with reward weights from the TOML (explicit ones win)."""
        base = self.config.task
        return with_reward_weights(base, load_reward_settings(base.reward_config).weights)

    def load(self):
        path = self.config.dataset_path or bundled_dataset_path()
        task_config = self.task_config()
        for example in read_examples(path, allowed_answers=GOLD_LABELS, int_answers=INT_LABELS):
            data = NetworkLogData(
                id=example.id,
                prompt=example.question,
                system_prompt=SYSTEM_PROMPT,
                answer=example.answer,
                info={**example.info, "source": example.source},
            )
            yield NetworkLogsTask(data, task_config)
