"""A checkpoint trained here, evaluated the way the eval assets evaluate a registry `local`
model: one spec (greedy, the training config's reply length) and one backend factory, so
ablations, co-training and `eval/<env>/<model>` read the same prompts and sample alike."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from sv_dagster.core.envs import EnvSpec
from sv_dagster.core.evals.evaluation import EvalRun, evaluate
from sv_dagster.core.models.backends import make_backend
from sv_dagster.core.models.registry import ModelSpec
from sv_dagster.training.catalog import CHECKPOINT_CONCURRENCY, checkpoint_spec

RULE_COUNTERPART = ModelSpec(name="heuristic", backend="heuristic", model="rules-v1")
"""The other side of a dialogue when no checkpoint plays it: the environment's rule baseline."""


def evaluate_checkpoint(
    env: EnvSpec,
    name: str,
    checkpoint: Path,
    *,
    dataset_path: Path,
    outputs_root: Path,
    run_id: str,
    max_tokens: int,
    limit: int | None = None,
    seed: int | None = None,
    dataset_info: dict[str, Any] | None = None,
    counterpart: tuple[str, Path] | None = None,
    observe: Callable[[dict[str, Any]], None] | None = None,
) -> EvalRun:
    """Evaluate the checkpoint folder `checkpoint` as model `name` on `dataset_path`. In a
    dialogue environment the other side is `counterpart` (a name and a checkpoint folder),
    else the counterpart environment's rule baseline."""
    spec = checkpoint_spec(name, str(checkpoint), max_tokens)
    other_backend, other_spec = None, None
    if env.counterpart_env:
        if counterpart is None:
            other_spec = RULE_COUNTERPART
            other_backend = make_backend(other_spec, env.counterpart_env)
        else:
            other_name, other_checkpoint = counterpart
            other_spec = checkpoint_spec(other_name, str(other_checkpoint), max_tokens)
            other_backend = make_backend(other_spec, env.counterpart_env, other_checkpoint)
    return evaluate(
        env,
        spec,
        make_backend(spec, env.env_id, checkpoint),
        dataset_path=dataset_path,
        outputs_root=outputs_root,
        run_id=run_id,
        limit=limit,
        seed=seed,
        concurrency=CHECKPOINT_CONCURRENCY,
        dataset_info=dataset_info,
        counterpart=other_backend,
        counterpart_model=other_spec,
        observe=observe,
    )
