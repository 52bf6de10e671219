"""E1 reward configuration, read from a TOML file the user can change."""

from __future__ import annotations

import hashlib
import math
import tomllib
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

from sv_shared import CostConfig

REWARD_NAMES: tuple[str, ...] = ("accuracy", "format", "calibration", "asymmetric_cost", "abstention")


class RewardConfigError(ValueError):
    """A reward configuration file that cannot be used; the message names the file."""


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


def _number(table: dict, key: str, where: str, default: float | None = None) -> float:
    value = table.get(key, default)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise RewardConfigError(f"{where}: '{key}' must be a finite number, got {value!r}")
    return float(value)


@lru_cache(maxsize=32)
def load_reward_settings(path: str | Path | None = None) -> RewardSettings:
    """Settings from `path` (default: the packaged rewards.toml); errors name the file."""
    path = Path(path) if path else default_reward_config_path()
    if not path.is_file():
        raise RewardConfigError(f"reward config not found: {path}")
    raw = path.read_bytes()
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise RewardConfigError(f"{path}: not valid TOML ({exc})") from exc
    weights_table = data.get("weights", {})
    unknown = sorted(set(weights_table) - set(REWARD_NAMES))
    if unknown:
        raise RewardConfigError(
            f"{path}: unknown reward(s) {unknown} in [weights]; known: {list(REWARD_NAMES)}"
        )
    weights = {name: _number(weights_table, name, f"{path} [weights]", 0.0) for name in REWARD_NAMES}
    costs_table = data.get("costs", {})
    try:
        costs = CostConfig(
            positive_label=str(costs_table.get("positive_label", "Malicious")),
            fn_cost=_number(costs_table, "fn_cost", f"{path} [costs]", 5.0),
            fp_cost=_number(costs_table, "fp_cost", f"{path} [costs]", 1.0),
            abstain_cost=_number(costs_table, "abstain_cost", f"{path} [costs]", 0.5),
        )
    except ValueError as exc:
        raise RewardConfigError(f"{path} [costs]: {exc}") from exc
    credit = _number(data.get("abstention", {}), "credit", f"{path} [abstention]", 0.5)
    if not 0.0 <= credit <= 1.0:
        raise RewardConfigError(f"{path} [abstention]: 'credit' must be in [0, 1], got {credit}")
    return RewardSettings(
        weights=weights,
        costs=costs,
        abstain_credit=credit,
        source=str(path),
        sha256=hashlib.sha256(raw).hexdigest(),
    )
