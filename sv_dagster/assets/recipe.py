"""The one place provenance is applied.

Every asset in the project is declared with `@provenance_asset(...)` instead of
`@dg.asset(...)`. Its body is a short recipe that writes files and returns an `Artifact`
saying what it wrote and with which config and seed; this module turns that into the
materialization: provenance metadata (git commit and dirty flag, package versions, config
hash, input data versions, content hash, seed, plus the artifact's own facts) and the
content hash as the Dagster data version. The same record is written with the artifact
(`provenance.json` inside a folder, `<file>.provenance.json` beside a file), so a copy
taken off the instance still says what made it. `definitions.py` refuses any asset
declared without it.
"""

from __future__ import annotations

import functools
import inspect
import json
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import dagster as dg

from sv_dagster.assets.common import write_json
from sv_dagster.core.artifacts import storage
from sv_dagster.core.artifacts.paths import localize_artifact_paths, outputs_root, outputs_url
from sv_dagster.core.artifacts.provenance import build_provenance, provenance_path
from sv_dagster.instance import DATA_VERSION_TAG

PROVENANCE_TAG = "sv/provenance"


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
    uri: str | None = None
    """Where `path` was published when the outputs root is a URL (set by `to_output`)."""


def publish_artifact(artifact: Artifact) -> Artifact:
    """With an fsspec outputs root, copy the artifact (with the provenance record beside a
    single file, and any named file outside its path) to the store under the same relative
    layout; the copy records its URL."""
    root_url = outputs_url()
    if root_url is None:
        return artifact
    local_root = outputs_root()
    uri = storage.publish(artifact.path, local_root, root_url)
    sidecar = provenance_path(artifact.path)
    if artifact.path.is_file() and sidecar.is_file():  # a folder's record went with the folder
        storage.publish(sidecar, local_root, root_url)
    for file in artifact.files.values():
        if file != artifact.path and artifact.path not in file.parents:
            storage.publish(file, local_root, root_url)
    return replace(artifact, uri=uri)


def localize_artifact(artifact: Artifact) -> Artifact:
    """The artifact with paths on this machine: files another machine published and that are
    missing here are fetched from the store into the local staging root first."""
    paths = [artifact.path, *artifact.files.values()]
    if artifact.uri is None or all(path.exists() for path in paths):
        return artifact
    path, *files = localize_artifact_paths(paths, artifact.uri, artifact.path)
    return replace(artifact, path=path, files=dict(zip(artifact.files, files, strict=True)))


def artifact_io_managers() -> dict[str, dg.ConfigurableIOManagerFactory]:
    """With an fsspec outputs root, the `Artifact` handles passed between steps are pickled in
    the same store (`<root>/.dagster-io/`), so a step on another machine can load them; with a
    local root, Dagster's default IO manager (under DAGSTER_HOME) stays."""
    root_url = outputs_url()
    return {"io_manager": dg.FilesystemIOManager(base_dir=storage.join(root_url, ".dagster-io"))} if root_url else {}


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
    # A copy of the artifact taken off the instance still says what made it; the record is
    # left out of the content hash, so writing it after hashing changes nothing.
    write_json(provenance_path(artifact.path), provenance)
    artifact = publish_artifact(artifact)  # after hashing: the store gets the bytes just hashed
    # The console of every job (INFO) says, step by step, what was written and where.
    context.log.info(
        f"{context.asset_key.to_user_string()}: wrote {artifact.uri or artifact.path} "
        f"(data version {provenance['content_hash'][:12]})"
    )
    metadata = {
        **{key: _metadata_value(value) for key, value in provenance.items()},
        "artifact_path": dg.MetadataValue.path(str(artifact.path)),
        **({"artifact_uri": dg.MetadataValue.path(artifact.uri)} if artifact.uri else {}),
        **{key: _metadata_value(value) for key, value in artifact.metadata.items()},
    }
    return dg.Output(artifact, data_version=dg.DataVersion(provenance["content_hash"]), metadata=metadata)


def provenance_asset(**asset_kwargs: Any) -> Callable[[Callable[..., Artifact | None]], dg.AssetsDefinition]:
    """`@dg.asset` for recipes that return an `Artifact`; see the module doc."""

    def decorate(recipe: Callable[..., Artifact | None]) -> dg.AssetsDefinition:
        def run(context: dg.AssetExecutionContext, *args: Any, **kwargs: Any) -> Artifact | None:
            args = tuple(localize_artifact(a) if isinstance(a, Artifact) else a for a in args)
            kwargs = {k: localize_artifact(v) if isinstance(v, Artifact) else v for k, v in kwargs.items()}
            return recipe(context, *args, **kwargs)

        if asset_kwargs.get("output_required") is False:
            # A recipe that may have nothing to make (an eval of a checkpoint not promoted
            # yet) returns None: no materialization, and its downstream steps are skipped.
            @functools.wraps(recipe)
            def compute(context: dg.AssetExecutionContext, *args: Any, **kwargs: Any):
                artifact = run(context, *args, **kwargs)
                if artifact is not None:
                    yield to_output(context, artifact)

            returns: Any = inspect.Signature.empty
        else:

            @functools.wraps(recipe)
            def compute(context: dg.AssetExecutionContext, *args: Any, **kwargs: Any) -> dg.Output:
                artifact = run(context, *args, **kwargs)
                assert artifact is not None  # output_required: the recipe always makes one
                return to_output(context, artifact)

            returns = dg.Output
        # Dagster reads config/resource types from the annotations; resolve the recipe's
        # (string, under `from __future__ import annotations`) in the recipe's module.
        hints = {name: hint for name, hint in typing.get_type_hints(recipe).items() if name != "return"}
        compute.__annotations__ = {**hints, **({"return": returns} if returns is not inspect.Signature.empty else {})}
        # mypy does not model attributes set on a function
        compute.__signature__ = inspect.signature(recipe, eval_str=True).replace(return_annotation=returns)  # type: ignore[attr-defined]
        tags = {**asset_kwargs.pop("tags", {}), PROVENANCE_TAG: "v1"}
        return dg.asset(tags=tags, **asset_kwargs)(compute)

    return decorate
