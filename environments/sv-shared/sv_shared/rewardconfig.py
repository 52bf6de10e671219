"""Reading an environment's reward TOML: one set of rules and error messages for every
environment (each message names the file and the table)."""

from __future__ import annotations

import math
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sv_shared.errors import UserError
from sv_shared.rewards import CostConfig


class RewardConfigError(UserError, ValueError):
    """A reward configuration file that cannot be used; the message names the file."""


@dataclass(frozen=True)
class RewardToml:
    path: Path
    raw: bytes
    """The file's bytes (their sha256 is what provenance records)."""
    data: dict[str, Any]

    def table(self, name: str, known: tuple[str, ...] | None = None) -> dict[str, Any]:
        """[name] (empty when absent); with `known`, any other key is an error."""
        table = self.data.get(name, {})
        if not isinstance(table, dict):
            raise RewardConfigError(f"{self.path}: [{name}] must be a table")
        if known is not None:
            unknown = sorted(set(table) - set(known))
            if unknown:
                raise RewardConfigError(f"{self.path} [{name}]: unknown key(s) {unknown}; known: {list(known)}")
        return table

    def number(self, table: str, key: str, default: float, *, positive: bool = False) -> float:
        value = self.table(table).get(key, default)
        where = f"{self.path} [{table}]"
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise RewardConfigError(f"{where}: '{key}' must be a finite number, got {value!r}")
        if positive and value <= 0:
            raise RewardConfigError(f"{where}: '{key}' must be > 0, got {value!r}")
        return float(value)

    def fraction(self, table: str, key: str, default: float) -> float:
        """A number that must lie in [0, 1] (credits, penalties)."""
        value = self.number(table, key, default)
        if not 0.0 <= value <= 1.0:
            raise RewardConfigError(f"{self.path} [{table}]: '{key}' must be in [0, 1], got {value}")
        return value

    def costs(self, positive_label: str) -> CostConfig:
        """[costs] of a labelling environment: positive_label, fn_cost, fp_cost, abstain_cost."""
        fn_cost = self.number("costs", "fn_cost", 5.0)
        fp_cost = self.number("costs", "fp_cost", 1.0)
        abstain_cost = self.number("costs", "abstain_cost", 0.5)
        try:
            return CostConfig(
                positive_label=str(self.table("costs").get("positive_label", positive_label)),
                fn_cost=fn_cost,
                fp_cost=fp_cost,
                abstain_cost=abstain_cost,
            )
        except ValueError as exc:
            raise RewardConfigError(f"{self.path} [costs]: {exc}") from exc

    def weights(self, names: tuple[str, ...]) -> dict[str, float]:
        """[weights]: one finite number per reward name (missing ones are 0)."""
        unknown = sorted(set(self.table("weights")) - set(names))
        if unknown:
            raise RewardConfigError(f"{self.path}: unknown reward(s) {unknown} in [weights]; known: {list(names)}")
        return {name: self.number("weights", name, 0.0) for name in names}


def read_reward_toml(path: str | Path) -> RewardToml:
    path = Path(path)
    if not path.is_file():
        raise RewardConfigError(f"reward config not found: {path}")
    raw = path.read_bytes()
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise RewardConfigError(f"{path}: not valid TOML ({exc})") from exc
    return RewardToml(path, raw, data)


def with_reward_weights(task_config: Any, weights: dict[str, float]) -> Any:
    """A verifiers `TaskConfig` with the TOML's reward `weights` as verifiers' own per-reward
    overrides, so `vf-eval` and the pipeline weigh alike; weights set explicitly in
    `task_config.rewards` (e.g. on the vf-eval command line) win. verifiers is imported
    here, not at module level: sv-shared itself needs only the standard library."""
    import verifiers.v1 as vf

    rewards = {name: vf.RewardFunctionConfig(weight=weight) for name, weight in weights.items()}
    rewards.update(task_config.rewards)
    return task_config.model_copy(update={"rewards": rewards})
