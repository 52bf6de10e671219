"""The one place provenance is applied.

Every asset in the project is declared with `@provenance_asset(...)` instead of
`@dg.asset(...)`. Its body is a short recipe that writes files and returns an `Artifact`
saying what it wrote and with which config and seed; this module turns that into the
materialization: provenance metadata (git commit and dirty flag, package versions, config
hash, input data versions, content hash, seed, plus the artifact's own facts) and the
content hash as the Dagster data version. `definitions.py` refuses any asset declared
without it.
"""

from __future__ import annotations

import functools
import inspect
import json
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import dagster as dg

from sv_dagster.core.provenance import build_provenance

PROVENANCE_TAG = "sv/provenance"
DATA_VERSION_TAG = "dagster/data_version"


@dataclass(frozen=True)
class Artifact:
    """What an asset wrote. Downstream assets receive this object (through the IO
    manager, i.e. through lineage), never a "newest folder" lookup."""

    path: Path
    """File or folder written under the outputs root; hashed into the data version."""
    config: Mapping[str, Any]
    """The config that shaped it (hashed; secrets are removed before recording)."""
    seed: int | None = None
    packages: tuple[str, ...] = ()
    """Extra packages whose versions matter (e.g. the environment package)."""
    facts: Mapping[str, Any] = field(default_factory=dict)
    """Provenance beyond the common fields (model id, backend, reward config, ...)."""
    metadata: Mapping[str, Any] = field(default_factory=dict)
    """For the UI only: counts, previews, tables (Dagster metadata values allowed)."""
    files: Mapping[str, Path] = field(default_factory=dict)
    """Named files inside `path` that downstream recipes read."""


def upstream_data_versions(context: dg.AssetExecutionContext) -> dict[str, str]:
    """Data version of each upstream asset's latest materialization: the one this run
    consumed (Dagster records the same in the materialization's tags)."""
    versions: dict[str, str] = {}
    spec = context.assets_def.specs_by_key[context.asset_key]
    for dep in spec.deps:
        entry = context.instance.get_latest_materialization_event(dep.asset_key)
        tags = (entry.tags or {}) if entry else {}
        versions[dep.asset_key.to_user_string()] = tags.get(DATA_VERSION_TAG, "never materialized")
    return versions


def _metadata_value(value: Any) -> Any:
    if isinstance(value, dg.MetadataValue):
        return value
    if isinstance(value, (dict, list, tuple)):
        return dg.MetadataValue.json(json.loads(json.dumps(value, default=str)))
    if value is None:
        return dg.MetadataValue.text("null")
    return value


def to_output(context: dg.AssetExecutionContext, artifact: Artifact) -> dg.Output:
    provenance = build_provenance(
        config=artifact.config,
        written=[artifact.path],
        seed=artifact.seed,
        inputs=upstream_data_versions(context),
        packages=artifact.packages,
        extra={**artifact.facts, "dagster_run_id": context.run_id},
    )
    metadata = {
        **{key: _metadata_value(value) for key, value in provenance.items()},
        "artifact_path": dg.MetadataValue.path(str(artifact.path)),
        **{key: _metadata_value(value) for key, value in artifact.metadata.items()},
    }
    return dg.Output(artifact, data_version=dg.DataVersion(provenance["content_hash"]), metadata=metadata)


def provenance_asset(**asset_kwargs: Any) -> Callable[[Callable[..., Artifact]], dg.AssetsDefinition]:
    """`@dg.asset` for recipes that return an `Artifact`; see the module doc."""

    def decorate(recipe: Callable[..., Artifact]) -> dg.AssetsDefinition:
        @functools.wraps(recipe)
        def compute(context: dg.AssetExecutionContext, *args: Any, **kwargs: Any) -> dg.Output:
            return to_output(context, recipe(context, *args, **kwargs))

        # Dagster reads config/resource types from the annotations; resolve the recipe's
        # (string, under `from __future__ import annotations`) in the recipe's module.
        compute.__annotations__ = {**typing.get_type_hints(recipe), "return": dg.Output}
        compute.__signature__ = inspect.signature(recipe, eval_str=True).replace(return_annotation=dg.Output)
        tags = {**asset_kwargs.pop("tags", {}), PROVENANCE_TAG: "v1"}
        return dg.asset(tags=tags, **asset_kwargs)(compute)

    return decorate
