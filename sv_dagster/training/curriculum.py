"""Stage 2's curriculum: rows of several environments in one GRPO run.

Each environment contributes `rows_per_env` prompts (seeded choice); with `easy_first` they
are ordered by their difficulty tag (0 easy .. 2 hard, from scenario and hard-case flags),
and the environments are interleaved row by row, so every batch mixes environments while
difficulty rises over the run. The trainer keeps this order (no shuffle).

Stage 2 starts from one environment's checkpoint and config, yet samples, scores and is
evaluated on every environment it mixes, so it takes from their configs what each one's
answers need (`stage2_defaults`).
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Iterable
from typing import Any

from sv_dagster.training.config import CurriculumConfig, TrainingConfig


def curriculum_rows(
    by_env: dict[str, list[dict[str, Any]]], config: CurriculumConfig, seed: int = 0
) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    lanes = []
    for env in config.envs:
        rows = [row for row in by_env.get(env, []) if row.get("task_key")]
        if not rows:
            raise ValueError(f"curriculum: no GRPO rows with a task for {env}")
        chosen = rng.sample(rows, min(config.rows_per_env, len(rows)))
        if config.order == "easy_first":
            chosen.sort(key=lambda row: int(row.get("difficulty", 0)))
        lanes.append(chosen)
    mixed = [row for group in itertools.zip_longest(*lanes) for row in group if row is not None]
    if config.order == "mixed":
        rng.shuffle(mixed)
    return mixed


def stage2_defaults(members: Iterable[TrainingConfig]) -> dict[str, Any]:
    """Settings of stage 2 from the configs of the environments it mixes, over its owner's: a
    rollout as long as the longest any of them allows (TRL has one length per run), as many
    tool rounds (each row is offered only its own environment's tools, within its task's
    budget), and eval replies as long as the longest any of them gets."""
    members = list(members)
    if not members:
        raise ValueError("stage 2 needs the configs of the environments it mixes")
    return {
        "grpo": {
            "max_completion_length": max(m.grpo.max_completion_length for m in members),
            "tool_calls": max(m.grpo.tool_calls for m in members),
        },
        "eval_max_tokens": max(m.eval_max_tokens for m in members),
    }
