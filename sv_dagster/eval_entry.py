"""A large eval in its own process: `python -m sv_dagster.eval_entry [--verbose] SPEC.json`.

The eval asset launches it through Dagster Pipes (the `launcher` resource: a subprocess
here, a Kubernetes pod or a Ray job elsewhere) when its run config says `external: true`.
The process runs the same `evaluate` as an in-process eval, logs into the run's event log,
and reports the eval folder; the asset reads the folder's files as usual.

A mistake in the spec (an unknown environment or model, a model not registered for the
environment, an endpoint model whose key is not set, a dataset file that is not there) is
found before any model is called. Run by hand, it ends in one line on stderr and exit 2
(its traceback with --verbose); under Pipes it is raised, so the run's event log has it.
"""

from __future__ import annotations

import argparse
import json
import sys
import traceback
from pathlib import Path
from typing import Any

REQUIRED = ("env", "model", "dataset_path", "outputs_root", "run_id")
"""What a spec must name (`run_external_eval` in sv_dagster.assets.evals writes them all)."""


def check_spec(spec: dict[str, Any]):
    """The spec's environment and registry, or EvalRequestError naming its mistake."""
    from sv_dagster.core.envs import ENVS, env_by_id
    from sv_dagster.core.eval_request import EvalRequestError, check_models
    from sv_dagster.training.catalog import load_models

    missing = [key for key in REQUIRED if not spec.get(key)]
    if missing:
        raise EvalRequestError(f"the spec names no {', '.join(missing)} (it needs {', '.join(REQUIRED)})")
    env = ENVS.get(spec["env"])
    if env is None:
        raise EvalRequestError(f"unknown env {spec['env']!r} in the spec; the envs: {', '.join(sorted(ENVS))}")
    registry = load_models(spec.get("registry"))
    check_models(env.short, [spec["model"]], registry)
    if spec.get("target_model") and env.counterpart_env:
        other = env_by_id(env.counterpart_env).short
        check_models(
            other, [spec["target_model"]], registry, label="target_model", side=f" (the side {env.short} talks to)"
        )
    if not Path(spec["dataset_path"]).exists():
        raise EvalRequestError(f"dataset_path {spec['dataset_path']}: no such file")
    return env, registry


def run_spec(spec: dict[str, Any], log) -> dict[str, Any]:
    from sv_dagster.core.evals.evaluation import evaluate
    from sv_dagster.core.evals.progress import EvalProgress
    from sv_dagster.core.models.backends import make_backend
    from sv_dagster.core.models.cache import ResponseCache

    env, registry = check_spec(spec)  # before any model is called
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


def read_spec(path: Path) -> dict[str, Any]:
    from sv_dagster.core.eval_request import EvalRequestError

    try:
        spec = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise EvalRequestError(f"{path}: cannot read the spec ({exc.strerror or exc})") from exc
    except json.JSONDecodeError as exc:
        raise EvalRequestError(f"{path}:{exc.lineno}: not JSON ({exc.msg})") from exc
    if not isinstance(spec, dict):
        raise EvalRequestError(f"{path}: expected a JSON object, got {type(spec).__name__}")
    return spec


def main(argv: list[str] | None = None) -> int:
    from dagster_pipes import PipesEnvVarParamsLoader, open_dagster_pipes

    from sv_dagster.core.eval_request import EvalRequestError
    from sv_dagster.core.models.registry import RegistryError

    parser = argparse.ArgumentParser(prog="python -m sv_dagster.eval_entry", description=__doc__.splitlines()[0])
    parser.add_argument("spec", type=Path, help="the eval's spec (JSON), as the eval asset writes it")
    parser.add_argument("-v", "--verbose", action="store_true", help="a mistake's traceback too, not only its line")
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    if not PipesEnvVarParamsLoader().is_dagster_pipes_process():  # run by hand
        try:
            record = run_spec(read_spec(args.spec), print)
        except (EvalRequestError, RegistryError) as exc:
            if args.verbose:
                traceback.print_exc()
            print(f"sv_dagster.eval_entry: {exc}", file=sys.stderr)
            return 2
        print(json.dumps(record))
        return 0
    with open_dagster_pipes() as pipes:
        record = run_spec(read_spec(args.spec), pipes.log.info)
        pipes.report_custom_message({"kind": "eval", **record})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
