"""Whether a GRPO run had anything to learn from. GRPO's advantage is a completion's reward
less its group's mean: a group whose completions all score the same teaches nothing, and a run
where every group does leaves the policy where it was. TRL logs, per logging window, the mean
within-group reward standard deviation (`reward_std`), the fraction of groups whose rewards
are all equal (`frac_reward_zero_std`) and, when the KL term is on (beta > 0), the policy's
KL to the reference model (`kl`); this summarises them for the checkpoint's record."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any


def _mean(entries: Sequence[Mapping[str, Any]], key: str) -> float | None:
    values = [float(entry[key]) for entry in entries if isinstance(entry.get(key), int | float)]
    return sum(values) / len(values) if values else None


def grpo_signal(log_history: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Means over the logged windows of a trainer's `state.log_history`: within-group reward
    std, the fraction of groups without signal, and KL (None when beta is 0, as TRL then
    computes none); `no_signal` is true when no group of any logged window had any."""
    logged = [entry for entry in log_history if "frac_reward_zero_std" in entry]
    without = _mean(logged, "frac_reward_zero_std")
    return {
        "logged_steps": [entry.get("step") for entry in logged],
        "reward_std_within_groups": _mean(logged, "reward_std"),
        "groups_without_signal": without,
        "kl": _mean(logged, "kl"),
        "no_signal": None if without is None else without >= 1.0,
    }
