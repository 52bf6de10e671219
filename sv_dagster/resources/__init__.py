"""Dagster resources: thin, configurable wrappers over `sv_dagster.core`."""

from __future__ import annotations

import dagster as dg

from typing import TYPE_CHECKING

from sv_dagster.core.registry import ModelSpec, load_registry, registry_path

if TYPE_CHECKING:
    from sv_dagster.core.backends import Backend


class ModelRegistry(dg.ConfigurableResource):
    """The model registry file and the backends it describes (heuristic, oracle, openai).

    API keys are read from the environment variable each entry names, at call time;
    they never enter run config, metadata or logs.
    """

    registry_path: str = str(registry_path())

    def specs(self) -> dict[str, ModelSpec]:
        return load_registry(self.registry_path)

    def spec(self, name: str) -> ModelSpec:
        specs = self.specs()
        if name not in specs:
            raise dg.Failure(f"model {name!r} is not in {self.registry_path} (known: {sorted(specs)})")
        return specs[name]

    def backend(self, name: str, env_id: str) -> Backend:
        from sv_dagster.core.backends import make_backend  # the openai client: ~1 s to import

        return make_backend(self.spec(name), env_id)
