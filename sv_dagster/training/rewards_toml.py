"""Reward overrides (ablations) as a copy of the environment's own reward TOML.

The copy keeps every table and key it does not override (costs, limits, the safety
classifier) and is loaded by the environment's own loader, so an unknown reward name or a
bad value fails there, with the copy's path in the message, before any training starts.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import tomli_w

from sv_dagster.core.envs import EnvSpec


def with_overrides(env: EnvSpec, overrides: Mapping[str, Mapping[str, Any]], target: Path) -> Path:
    source = Path(env.reward_settings(None).source)
    data = tomllib.loads(source.read_text(encoding="utf-8"))
    for table, values in overrides.items():
        data[table] = {**data.get(table, {}), **dict(values)}
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(
        f"# {env.env_id} rewards with an experiment's overrides (copied from {source})\n" + tomli_w.dumps(data),
        encoding="utf-8",
    )
    env.reward_settings(target)  # validated by the environment itself
    return target
