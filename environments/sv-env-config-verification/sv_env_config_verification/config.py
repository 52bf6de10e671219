"""E2 reward configuration, read from a TOML file the user can change."""

from __future__ import annotations

import hashlib
import math
import tomllib
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

REWARD_NAMES: tuple[str, ...] = ("format", "detection", "patch", "grounding")
SEVERITY_NAMES: tuple[str, ...] = ("low", "medium", "high")


class RewardConfigError(ValueError):
    """A reward configuration file that cannot be used; the message names the file."""


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


def _number(table: dict, key: str, where: str, default: float) -> float:
    value = table.get(key, default)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise RewardConfigError(f"{where}: '{key}' must be a finite number, got {value!r}")
    return float(value)


def _known(table: dict, known: tuple[str, ...], where: str) -> None:
    unknown = sorted(set(table) - set(known))
    if unknown:
        raise RewardConfigError(f"{where}: unknown key(s) {unknown}; known: {list(known)}")


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
    _known(weights_table, REWARD_NAMES, f"{path} [weights]")
    weights = {name: _number(weights_table, name, f"{path} [weights]", 0.0) for name in REWARD_NAMES}
    severity_table = data.get("severity", {})
    _known(severity_table, SEVERITY_NAMES, f"{path} [severity]")
    defaults = {"low": 1.0, "medium": 2.0, "high": 3.0}
    severity = {name: _number(severity_table, name, f"{path} [severity]", defaults[name]) for name in SEVERITY_NAMES}
    if any(w <= 0 for w in severity.values()):
        raise RewardConfigError(f"{path} [severity]: weights must be > 0, got {severity}")
    penalty = _number(data.get("patch", {}), "new_finding_penalty", f"{path} [patch]", 1.0)
    if penalty < 0:
        raise RewardConfigError(f"{path} [patch]: 'new_finding_penalty' must be >= 0, got {penalty}")
    return RewardSettings(
        weights=weights,
        severity_weights=severity,
        new_finding_penalty=penalty,
        source=str(path),
        sha256=hashlib.sha256(raw).hexdigest(),
    )
