"""E2 reward configuration, read from a TOML file the user can change."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

from sv_shared.rewardconfig import RewardConfigError, read_reward_toml

REWARD_NAMES: tuple[str, ...] = ("format", "detection", "patch", "grounding")
SEVERITY_NAMES: tuple[str, ...] = ("low", "medium", "high")


@dataclass(frozen=True)
class RewardSettings:
    weights: dict[str, float]
    severity_weights: dict[str, float]
    new_finding_penalty: float
    source: str
    sha256: str

    def as_dict(self) -> dict[str, Any]:
        return {
            "weights": dict(self.weights),
            "severity_weights": dict(self.severity_weights),
            "new_finding_penalty": self.new_finding_penalty,
            "source": self.source,
            "sha256": self.sha256,
        }


def default_reward_config_path() -> Path:
    return Path(str(resources.files("sv_env_config_verification") / "rewards.toml"))


@lru_cache(maxsize=32)
def load_reward_settings(path: str | Path | None = None) -> RewardSettings:
    """Settings from `path` (default: the packaged rewards.toml); errors name the file."""
    toml = read_reward_toml(path or default_reward_config_path())
    path = toml.path
    weights = toml.weights(REWARD_NAMES)
    toml.table("severity", SEVERITY_NAMES)
    defaults = {"low": 1.0, "medium": 2.0, "high": 3.0}
    severity = {name: toml.number("severity", name, defaults[name], positive=True) for name in SEVERITY_NAMES}
    penalty = toml.number("patch", "new_finding_penalty", 1.0)
    if penalty < 0:
        raise RewardConfigError(f"{path} [patch]: 'new_finding_penalty' must be >= 0, got {penalty}")
    return RewardSettings(
        weights=weights,
        severity_weights=severity,
        new_finding_penalty=penalty,
        source=str(path),
        sha256=hashlib.sha256(toml.raw).hexdigest(),
    )
