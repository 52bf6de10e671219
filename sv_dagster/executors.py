"""Which executor runs a run's steps, chosen without code changes.

`SV_EXECUTOR` = `multiprocess` | `in_process` | `k8s` | `celery` | `ray`; unset keeps Dagster's
default executor (multiprocess, or in-process when a run's config asks for it). The settings
of each live in `configs/executors/<name>.yaml` (or the file `SV_EXECUTOR_CONFIG` names), in
the executor's own config schema, with `{env: NAME}` for what differs per deployment (image,
namespace, broker URLs, Ray address). A file may also have the `execution: {config: ...}`
shape that `dagster-celery worker start -y` reads, so Celery workers and runs share one file.
A chosen executor whose file is missing or invalid, or whose variables are unset, fails when
the definitions load, naming the file and the variables (docs/deploy.md has the details).

Local multiprocess runs start their step processes from a forkserver that has already imported
the definitions (and Great Expectations), unless a run's config picks a start method: a spawned
step re-imports them, ~6 s of CPU per step (10 s for a data check) before any work.

`k8s_job_tags(gpu=...)` gives the `dagster-k8s/config` tag that sizes a pod: on an asset's
`op_tags` it sizes that step's pod under the k8s_job_executor; on a job's `tags`, the run pod
under the K8sRunLauncher (dagster-k8s gives step pods only their op tags, never run tags).
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import dagster as dg
import yaml

from sv_dagster.core.artifacts.paths import CONFIGS_DIR
from sv_shared.errors import UserError

EXECUTOR_ENV = "SV_EXECUTOR"
EXECUTOR_CONFIG_ENV = "SV_EXECUTOR_CONFIG"
EXECUTORS_DIR = CONFIGS_DIR / "executors"
EXECUTOR_NAMES = ("multiprocess", "in_process", "k8s", "celery", "ray")
K8S_CONFIG_TAG = "dagster-k8s/config"
# Imported once by the forkserver; a module that fails to import there is skipped by it.
FORKSERVER_PRELOAD = ("dagster._core.executor.multiprocess", "sv_dagster.definitions", "great_expectations")


class ExecutorConfigError(UserError, ValueError):
    """SV_EXECUTOR names an unknown executor, or its config file is missing or invalid."""


def executor_definition(name: str) -> dg.ExecutorDefinition:
    """The executor itself, not yet configured (deploy extras are imported only when chosen)."""
    if name == "multiprocess":
        return dg.multiprocess_executor
    if name == "in_process":
        return dg.in_process_executor
    if name == "k8s":
        from dagster_k8s import k8s_job_executor

        return k8s_job_executor
    if name == "celery":
        from dagster_celery import celery_executor

        return celery_executor
    if name == "ray":
        from dagster_ray import ray_executor

        return ray_executor
    raise ExecutorConfigError(f"{EXECUTOR_ENV}={name!r} is not an executor; choose one of: {', '.join(EXECUTOR_NAMES)}")


def executor_config_path(name: str) -> Path:
    override = os.environ.get(EXECUTOR_CONFIG_ENV)
    return Path(override) if override else EXECUTORS_DIR / f"{name}.yaml"


def load_executor_config(name: str, path: Path) -> dict[str, Any]:
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ExecutorConfigError(f"{path}: no such file ({EXECUTOR_ENV}={name} reads its settings there)") from None
    except yaml.YAMLError as error:
        raise ExecutorConfigError(f"{path}: not valid YAML: {error}") from None
    if data is None:
        return {}
    if isinstance(data, dict) and set(data) == {"execution"} and isinstance(data["execution"], dict):
        data = data["execution"].get("config") or {}  # the dagster-celery worker's shape
    if not isinstance(data, dict):
        raise ExecutorConfigError(f"{path}: expected a mapping of {name} executor settings, got {type(data).__name__}")
    return data


def env_references(config: Any, where: tuple[str, ...] = ()) -> Iterator[tuple[str, str]]:
    """(`dotted.key`, variable) for every `{env: NAME}` value in a Dagster config."""
    if isinstance(config, Mapping):
        if set(config) == {"env"} and isinstance(config["env"], str):
            yield ".".join(where), config["env"]
            return
        for key, value in config.items():
            yield from env_references(value, (*where, str(key)))
    elif isinstance(config, list):
        for index, value in enumerate(config):
            yield from env_references(value, (*where, str(index)))


def build_executor(name: str, path: Path | None = None) -> dg.ExecutorDefinition:
    """The executor configured from `path` (default `configs/executors/<name>.yaml`, or
    $SV_EXECUTOR_CONFIG), checked against its schema."""
    executor = executor_definition(name)
    path = path or executor_config_path(name)
    config = load_executor_config(name, path)
    missing = [f"{key} (${var})" for key, var in env_references(config) if not os.environ.get(var)]
    if missing:
        raise ExecutorConfigError(
            f"{path}: {EXECUTOR_ENV}={name} needs these environment variables set: {', '.join(missing)}"
        )
    if name == "multiprocess":
        configured = executor.configured(lambda _: with_forkserver_start(config))
    else:
        configured = executor.configured(config)
    # Dagster checks executor config only when a run starts; check it now, on an empty job.
    probe = dg.GraphDefinition(name="sv_executor_config_check").to_job(executor_def=configured)
    try:
        dg.validate_run_config(probe, {})
    except dg.DagsterInvalidConfigError as error:
        raise ExecutorConfigError(f"{path}: invalid {name} executor config: {error}") from None
    return configured


def executor_from_env() -> dg.ExecutorDefinition:
    """The executor `SV_EXECUTOR` names, configured; Dagster's default when unset."""
    name = os.environ.get(EXECUTOR_ENV, "").strip()
    return build_executor(name) if name else default_executor()


_forkserver_environment: str | None = None


def forkserver_matches_environment() -> bool:
    """Whether a forkserver of this process runs with the current environment variables.

    A process has one forkserver, started by its first forkserver run with the environment of
    that moment, and every step forked from it inherits that environment. A later run in the
    same process (a test, a notebook) under other variables must spawn its steps instead."""
    global _forkserver_environment
    digest = hashlib.sha256(json.dumps(sorted(os.environ.items())).encode()).hexdigest()
    if _forkserver_environment is None:
        _forkserver_environment = digest
    return _forkserver_environment == digest


def with_forkserver_start(config: Mapping[str, Any]) -> dict[str, Any]:
    """Multiprocess executor config that starts steps from a preloaded forkserver, unless the
    config chooses a start method or this process's forkserver has another environment."""
    if "start_method" in config or not forkserver_matches_environment():
        return dict(config)
    return {**config, "start_method": {"forkserver": {"preload_modules": list(FORKSERVER_PRELOAD)}}}


def default_executor() -> dg.ExecutorDefinition:
    """Dagster's default executor, same name and run config, with forkserver-started steps."""
    base = dg.multi_or_in_process_executor

    def mapped(config: dict[str, Any]) -> dict[str, Any]:
        if "in_process" in config:
            return config
        return {"multiprocess": with_forkserver_start(config.get("multiprocess") or {})}

    # configured() is typed for raw schemas; the executor's own schema object works as well
    return base.configured(mapped, name=base.name, config_schema=base.config_schema)  # type: ignore[arg-type]


def k8s_job_tags(gpu: bool = False, pods_file: Path = EXECUTORS_DIR / "k8s-pods.yaml") -> dict[str, str]:
    """The `dagster-k8s/config` tag for a CPU or GPU pod (sizes in configs/executors/k8s-pods.yaml):
    container requests/limits, and for GPU an `nvidia.com/gpu` limit, node selector and toleration."""
    profiles = yaml.safe_load(pods_file.read_text(encoding="utf-8"))
    profile = profiles["gpu" if gpu else "cpu"]
    config: dict[str, Any] = {
        "container_config": {"resources": {"requests": profile["requests"], "limits": profile["limits"]}}
    }
    pod_spec = {key: profile[key] for key in ("node_selector", "tolerations") if profile.get(key)}
    if pod_spec:
        config["pod_spec_config"] = pod_spec
    return {K8S_CONFIG_TAG: json.dumps(config, sort_keys=True)}
