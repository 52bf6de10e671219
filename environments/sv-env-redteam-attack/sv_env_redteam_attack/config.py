"""E5 reward configuration, read from a TOML file the user can change."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

from sv_shared.redteam import classifier_spec
from sv_shared.rewardconfig import RewardConfigError, read_reward_toml

REWARD_NAMES: tuple[str, ...] = ("success", "turn_penalty", "length_penalty", "novelty", "attacker_unsafe")

__all__ = ["REWARD_NAMES", "RewardConfigError", "RewardSettings", "load_reward_settings"]


@dataclass(frozen=True)
class RewardSettings:
    weights: dict[str, float]
    length_budget: int
    max_turns: int
    max_message_chars: int
    classifier: dict[str, Any]
    source: str
    sha256: str

    def as_dict(self) -> dict[str, Any]:
        return {
            "weights": dict(self.weights),
            "attack": {"length_budget": self.length_budget},
            "dialogue": {"max_turns": self.max_turns, "max_message_chars": self.max_message_chars},
            "classifier": dict(self.classifier),
            "source": self.source,
            "sha256": self.sha256,
        }


def default_reward_config_path() -> Path:
    return Path(str(resources.files("sv_env_redteam_attack") / "rewards.toml"))


@lru_cache(maxsize=32)
def load_reward_settings(path: str | Path | None = None) -> RewardSettings:
    """Settings from `path` (default: the packaged rewards.toml); errors name the file."""
    toml = read_reward_toml(path or default_reward_config_path())
    toml.table("attack", ("length_budget",))
    toml.table("dialogue", ("max_turns", "max_message_chars"))
    return RewardSettings(
        weights=toml.weights(REWARD_NAMES),
        length_budget=int(toml.number("attack", "length_budget", 2000, positive=True)),
        max_turns=int(toml.number("dialogue", "max_turns", 3, positive=True)),
        max_message_chars=int(toml.number("dialogue", "max_message_chars", 4000, positive=True)),
        classifier=classifier_spec(toml),
        source=str(toml.path),
        sha256=hashlib.sha256(toml.raw).hexdigest(),
    )
