"""The installed environments, discovered through their entry points, and how the
pipeline loads, scores and summarises each one.

An environment is a verifiers v1 taskset package that exports one
`sv_shared.environment.Environment` under the entry point group `sv_dagster.environments`.
The pipeline loops over what it finds here; it names none.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from dataclasses import dataclass, fields
from importlib.metadata import entry_points
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sv_shared.environment import ENTRY_POINT_GROUP, Environment
from sv_shared.errors import UserError

if TYPE_CHECKING:
    import verifiers.v1 as vf


class EnvironmentPluginError(UserError, RuntimeError):
    """An installed environment's entry point is unusable; the message names it."""


@dataclass(frozen=True)
class EnvSpec(Environment):
    """An installed `Environment`, with what the pipeline does with it."""

    @classmethod
    def of(cls, environment: Environment) -> EnvSpec:
        return cls(**{f.name: getattr(environment, f.name) for f in fields(Environment)})

    @property
    def package(self) -> Any:
        return importlib.import_module(self.module)

    def load_tasks(
        self,
        dataset_path: Path | None,
        reward_config: Path | None,
        limit: int | None = None,
        seed: int | None = None,
        task_options: dict[str, Any] | None = None,
    ) -> list[vf.Task]:
        return list(self.iter_tasks(dataset_path, reward_config, limit, seed, task_options))

    def iter_tasks(
        self,
        dataset_path: Path | None,
        reward_config: Path | None,
        limit: int | None = None,
        seed: int | None = None,
        task_options: dict[str, Any] | None = None,
    ) -> Iterator[vf.Task]:
        """Tasks through verifiers' own loader, as `vf-eval` would build them, one at a
        time (a 100k-example eval never holds 100k tasks). With a `limit`, the subset is
        `limit` tasks after a shuffle under `seed` (vf-eval's `-s --select.seed SEED -n
        LIMIT` picks the same ones), so every model compared with one seed sees the same
        examples. The dataset file is read and checked on the first `next()`.
        `task_options` are further task-config fields (E5's novelty memory, the
        tournament's known attacks)."""
        from verifiers.v1.utils.loaders import load_taskset, taskset_config_type

        config_type = taskset_config_type(self.env_id)
        config = config_type(
            id=self.env_id,
            dataset_path=dataset_path,
            task={"reward_config": reward_config, **(task_options or {})},
        )
        taskset = load_taskset(config)
        if limit:
            taskset = (taskset.shuffle(seed) if seed is not None else taskset).take(limit)
        return iter(taskset)

    def reward_settings(self, reward_config: Path | None) -> Any:
        if self.load_reward_settings is None:
            raise EnvironmentPluginError(f"{self.env_id} declares no load_reward_settings")
        return self.load_reward_settings(reward_config)

    def tools_now(self) -> dict[str, Any] | None:
        """The environment's tools (available, version, rule-set hash), for provenance."""
        return self.tool_versions() if self.tool_versions is not None else None

    def tool_cache_now(self) -> dict[str, Any] | None:
        """Hits and misses of the environment's tool-result cache in this process so far."""
        return self.tool_cache_stats() if self.tool_cache_stats is not None else None


def discover() -> dict[str, EnvSpec]:
    """Every installed environment by its short name, in short-name order."""
    found: dict[str, EnvSpec] = {}
    for entry in entry_points(group=ENTRY_POINT_GROUP):
        try:
            environment = entry.load()
        except Exception as exc:
            raise EnvironmentPluginError(
                f"environment entry point {entry.name} = {entry.value}: {type(exc).__name__}: {exc}"
            ) from exc
        if not isinstance(environment, Environment):
            raise EnvironmentPluginError(
                f"environment entry point {entry.name} = {entry.value} is a "
                f"{type(environment).__name__}, not an sv_shared Environment"
            )
        if environment.short in found:
            raise EnvironmentPluginError(
                f"two installed environments call themselves {environment.short!r}: "
                f"{found[environment.short].env_id} and {environment.env_id}"
            )
        found[environment.short] = EnvSpec.of(environment)
    return dict(sorted(found.items()))


ENVS: dict[str, EnvSpec] = discover()


def env_by_id(env_id: str) -> EnvSpec:
    """The environment whose taskset id is `env_id` (what eval metadata and `counterpart_env` record)."""
    for spec in ENVS.values():
        if spec.env_id == env_id:
            return spec
    raise KeyError(
        f"no installed environment has the taskset id {env_id!r} (installed: "
        f"{', '.join(spec.env_id for spec in ENVS.values())})"
    )


def counterpart_pairs() -> list[tuple[EnvSpec, EnvSpec]]:
    """(attack, defense) for every installed dialogue environment whose counterpart is
    installed too: the pairs tournaments and co-training run over."""
    installed = {spec.env_id: spec for spec in ENVS.values()}
    return [(spec, installed[spec.counterpart_env]) for spec in ENVS.values() if spec.counterpart_env in installed]


def pair_label(attack: EnvSpec, defense: EnvSpec) -> str:
    """How reports and descriptions name a pair, e.g. "E5<->E6"."""
    return f"{attack.short.upper()}<->{defense.short.upper()}"


def pair_key(attack: EnvSpec, defense: EnvSpec) -> str:
    """The asset key part and job suffix of a pair, e.g. "e5_e6"."""
    return f"{attack.short}_{defense.short}"
