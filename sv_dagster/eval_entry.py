"""A large eval in its own process: `python -m sv_dagster.eval_entry SPEC.json`.

The eval asset launches it through Dagster Pipes (the `launcher` resource: a subprocess
here, a Kubernetes pod or a Ray job elsewhere) when its run config says `external: true`.
The process runs the same `evaluate` as an in-process eval, logs into the run's event log,
and reports the eval folder; the asset reads the folder's files as usual.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any


def run_spec(spec: dict[str, Any], log) -> dict[str, Any]:
    from sv_dagster.core.envs import ENVS
    from sv_dagster.core.evals.evaluation import evaluate
    from sv_dagster.core.evals.progress import EvalProgress
    from sv_dagster.core.models.backends import make_backend
    from sv_dagster.core.models.cache import ResponseCache
    from sv_dagster.training.catalog import load_models

    env = ENVS[spec["env"]]
    registry = load_models(spec.get("registry"))
    model = registry[spec["model"]]
    target = registry[spec["target_model"]] if spec.get("target_model") else None
    outputs_root = Path(spec["outputs_root"])
    log(f"evaluating {model.name} on {env.env_id}: {spec['dataset_path']}")
    progress = (
        EvalProgress(spec["total"], f"eval {env.short}/{model.name}", log) if spec.get("total") is not None else None
    )
    run = evaluate(
        env,
        model,
        make_backend(model, env.env_id, spec.get("checkpoint")),
        dataset_path=Path(spec["dataset_path"]),
        outputs_root=outputs_root,
        run_id=spec["run_id"],
        resume=spec.get("resume", False),
        cache=ResponseCache(outputs_root / "cache" / "responses.sqlite3") if spec.get("use_cache") else None,
        limit=spec.get("limit"),
        concurrency=spec.get("concurrency"),
        reward_config=Path(spec["reward_config"]) if spec.get("reward_config") else None,
        seed=spec.get("seed"),
        dataset_info=spec.get("dataset_info"),
        use_tools=spec.get("use_tools", True),
        counterpart=make_backend(target, env.counterpart_env) if target else None,
        counterpart_model=target,
        progress=progress,
    )
    if progress is not None:
        progress.finish()
    log(f"finished: {run.summary.get('n_examples')} examples, mean reward {run.summary.get('mean_reward')}")
    return {
        "run_dir": str(run.run_dir),
        "n_examples": run.summary.get("n_examples"),
        "mean_reward": run.summary.get("mean_reward"),
    }


def main(argv: list[str] | None = None) -> int:
    from dagster_pipes import PipesEnvVarParamsLoader, open_dagster_pipes

    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        print("usage: python -m sv_dagster.eval_entry SPEC.json", file=sys.stderr)
        return 2
    spec = json.loads(Path(argv[0]).read_text(encoding="utf-8"))
    if not PipesEnvVarParamsLoader().is_dagster_pipes_process():  # run by hand
        print(json.dumps(run_spec(spec, print)))
        return 0
    with open_dagster_pipes() as pipes:
        record = run_spec(spec, pipes.log.info)
        pipes.report_custom_message({"kind": "eval", **record})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
