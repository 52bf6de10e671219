"""E4 reward configuration, read from a TOML file the user can change."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

from sv_shared import CostConfig
from sv_shared.rewardconfig import RewardConfigError as RewardConfigError  # the package re-exports it
from sv_shared.rewardconfig import read_reward_toml

REWARD_NAMES: tuple[str, ...] = ("accuracy", "format", "calibration", "asymmetric_cost", "abstention", "evidence")


@dataclass(frozen=True)
class RewardSettings:
    weights: dict[str, float]
    costs: CostConfig
    abstain_credit: float
    evidence_penalty: float
    evidence_max_items: int
    source: str
    sha256: str

    def as_dict(self) -> dict[str, Any]:
        return {
            "weights": dict(self.weights),
            "costs": {
                "positive_label": self.costs.positive_label,
                "fn_cost": self.costs.fn_cost,
                "fp_cost": self.costs.fp_cost,
                "abstain_cost": self.costs.abstain_cost,
            },
            "abstain_credit": self.abstain_credit,
            "evidence": {"invented_penalty": self.evidence_penalty, "max_items": self.evidence_max_items},
            "source": self.source,
            "sha256": self.sha256,
        }


def default_reward_config_path() -> Path:
    return Path(str(resources.files("sv_env_phishing_detection") / "rewards.toml"))


@lru_cache(maxsize=32)
def load_reward_settings(path: str | Path | None = None) -> RewardSettings:
    """Settings from `path` (default: the packaged rewards.toml); errors name the file."""
    toml = read_reward_toml(path or default_reward_config_path())
    path = toml.path
    weights = toml.weights(REWARD_NAMES)
    costs = toml.costs(positive_label="Phishing")
    credit = toml.fraction("abstention", "credit", 0.5)
    penalty = toml.fraction("evidence", "invented_penalty", 0.25)
    max_items = toml.number("evidence", "max_items", 10, positive=True)
    return RewardSettings(
        weights=weights,
        costs=costs,
        abstain_credit=credit,
        evidence_penalty=penalty,
        evidence_max_items=max(1, int(max_items)),
        source=str(path),
        sha256=hashlib.sha256(toml.raw).hexdigest(),
    )
