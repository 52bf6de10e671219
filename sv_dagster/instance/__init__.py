"""The Dagster layer's reads and writes of the instance outside asset bodies: lineage walks
(from an asset, a run, a data version or a report row) and the records of synthetic batches
and their review decisions. The plain core below never imports Dagster; this package does."""

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from sv_dagster.core.artifacts.paths import localize_artifact_paths

DATA_VERSION_TAG = "dagster/data_version"
"""The tag of a materialization's event that holds its data version (the content hash we set)."""
INPUT_DATA_VERSION_TAG = "dagster/input_data_version/"
"""Prefix of the tags that hold the data version of each input a materialization read."""


def local_artifact_path(metadata: Mapping[str, Any]) -> Path:
    """The `artifact_path` a materialization recorded, as a path on this machine: fetched
    from its `artifact_uri` into the local staging root when it is missing here. For code
    that reads materializations from the instance rather than receiving an `Artifact`."""
    path = Path(metadata["artifact_path"].value)
    uri = metadata["artifact_uri"].value if "artifact_uri" in metadata else None
    if uri is None or path.exists():
        return path
    return localize_artifact_paths([path], uri, path)[0]
