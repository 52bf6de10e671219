"""E1 reward configuration, read from a TOML file the user can change."""

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

REWARD_NAMES: tuple[str, ...] = ("accuracy", "format", "calibration", "asymmetric_cost", "abstention")


@dataclass(frozen=True)
class RewardSettings:
    weights: dict[str, float]
    costs: CostConfig
    abstain_credit: float
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
            "source": self.source,
            "sha256": self.sha256,
        }


def default_reward_config_path() -> Path:
    return Path(str(resources.files("sv_env_network_logs") / "rewards.toml"))


@lru_cache(maxsize=32)
def load_reward_settings(path: str | Path | None = None) -> RewardSettings:
    """Settings from `path` (default: the packaged rewards.toml); errors name the file."""
    toml = read_reward_toml(path or default_reward_config_path())
    path = toml.path
    weights = toml.weights(REWARD_NAMES)
    costs = toml.costs(positive_label="Malicious")
    credit = toml.fraction("abstention", "credit", 0.5)
    return RewardSettings(
        weights=weights,
        costs=costs,
        abstain_credit=credit,
        source=str(path),
        sha256=hashlib.sha256(toml.raw).hexdigest(),
    )
