"""Where things live: the project root, the outputs root and the config folder."""

from __future__ import annotations

import os
import re
from pathlib import Path

from sv_dagster.core.artifacts.storage import StorageError, is_url, localize, normalize_root

PROJECT_ROOT = Path(__file__).resolve().parents[3]
CONFIGS_DIR = PROJECT_ROOT / "configs"
SAMPLES_DIR = PROJECT_ROOT / "data" / "samples"


def outputs_url() -> str | None:
    """`SV_OUTPUTS_DIR` when it is an fsspec URL (`s3://bucket/prefix`, `file:///...`,
    `memory://...`): the artifact store that recipes' outputs are published to; else None."""
    value = os.environ.get("SV_OUTPUTS_DIR") or ""
    return normalize_root(value) if is_url(value) else None


def outputs_root() -> Path:
    """The local folder recipes write under (read at call time so tests and runs can point it
    elsewhere): `SV_OUTPUTS_DIR`, default `./outputs` under the project root; when
    `SV_OUTPUTS_DIR` is a URL, the local staging copy, `SV_STAGING_DIR` or `./.cache/outputs`
    (caches under it stay local; artifacts are published to the URL, see core/storage.py)."""
    if outputs_url():
        return Path(os.environ.get("SV_STAGING_DIR") or PROJECT_ROOT / ".cache" / "outputs").resolve()
    return Path(os.environ.get("SV_OUTPUTS_DIR") or PROJECT_ROOT / "outputs").resolve()


def slug(name: str) -> str:
    """A name usable in Dagster asset keys and op names (letters, digits, underscore)."""
    return re.sub(r"[^A-Za-z0-9_]", "_", name)


def safe_path_part(name: str) -> str:
    """A name usable as one folder name: model ids like `org/model:tag` keep their
    characters except path separators and colons."""
    return re.sub(r"[/\\:\s]+", "_", name).strip("._") or "unnamed"


def localize_artifact_paths(paths: list[Path], artifact_uri: str, artifact_path: Path) -> list[Path]:
    """`paths` of an artifact published to `artifact_uri`, on this machine: those missing
    here are fetched from the store into the local staging root."""
    root_url = outputs_url()
    if root_url is None:
        raise StorageError(
            f"{artifact_path} is missing here and was published to {artifact_uri}, but SV_OUTPUTS_DIR "
            "is not a URL on this machine; point it at the same artifact store"
        )
    return localize(
        paths, artifact_url=artifact_uri, artifact_path=artifact_path, root_url=root_url, local_root=outputs_root()
    )
