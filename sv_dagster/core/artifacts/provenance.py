"""Provenance facts: what code, packages, config, inputs and bytes produced an artifact.

Plain functions; the Dagster layer (`sv_dagster.assets.recipe`) attaches their result to
every materialization. Secrets are removed here, once, before anything is recorded.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import subprocess
import time
from collections.abc import Iterable, Mapping
from functools import lru_cache
from importlib import metadata
from pathlib import Path
from typing import Any

from sv_dagster.core.artifacts.paths import PROJECT_ROOT
from sv_dagster.core.artifacts.redaction import redact
from sv_dagster.core.artifacts.storage import PROVENANCE_FILE

# Packages whose versions go into every record.
CORE_PACKAGES: tuple[str, ...] = ("sv-dagster", "dagster", "verifiers", "sv-shared")


def provenance_path(artifact_path: Path) -> Path:
    """Where an artifact's provenance record is written: inside a folder, or beside a file."""
    artifact_path = Path(artifact_path)
    if artifact_path.is_dir():
        return artifact_path / PROVENANCE_FILE
    return artifact_path.with_name(f"{artifact_path.name}.{PROVENANCE_FILE}")


@lru_cache(maxsize=4)
def git_state(root: Path = PROJECT_ROOT) -> dict[str, Any]:
    """Commit and dirty flag of the checkout, or 'unknown' outside a git checkout."""

    def git(*args: str) -> str | None:
        try:
            out = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            return None
        return out.stdout.strip() if out.returncode == 0 else None

    commit = git("rev-parse", "HEAD")
    status = git("status", "--porcelain", "--untracked-files=no")
    return {"git_commit": commit or "unknown", "git_dirty": bool(status) if status is not None else None}


def package_versions(names: Iterable[str]) -> dict[str, str]:
    versions = {}
    for name in names:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = "not installed"
    return versions


def stable_json(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), default=str)


def config_hash(obj: Any) -> str:
    return hashlib.sha256(stable_json(obj).encode()).hexdigest()


def sha256_hex(value: str) -> str:
    """`value` as a lower-case sha256 hex digest; ValueError if it is not one."""
    value = value.strip().lower()
    if not re.fullmatch(r"[0-9a-f]{64}", value):
        raise ValueError(f"{value!r} is not a sha256 (64 hex digits)")
    return value


STALE_STAGING_S = 24 * 3600.0
"""Age after which a cache's staging folder can only be a killed process's leftover."""


def remove_stale_staging(folder: Path, prefix: str, older_than_s: float = STALE_STAGING_S) -> None:
    """Temporary folders a killed process left under `folder` (never taken for cache entries,
    since their names are no hashes; removed once old enough that no live process still
    writes them)."""
    now = time.time()
    for leftover in folder.glob(f"{prefix}*"):
        try:
            if leftover.is_dir() and now - leftover.stat().st_mtime > older_than_s:
                shutil.rmtree(leftover, ignore_errors=True)
        except OSError:
            continue


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def content_hash(paths: Iterable[Path]) -> str:
    """One hash over files, or every file under folders: names relative to the folder
    given, and bytes. Where the artifact lives (outputs root, dated folder) does not
    count, so the same content always gets the same hash. A folder's own provenance record
    (PROVENANCE_FILE at its top) is left out: it is written after hashing and holds the hash."""
    entries: list[tuple[str, Path]] = []
    for path in map(Path, paths):
        if path.is_dir():
            entries.extend(
                (str(p.relative_to(path)), p) for p in path.rglob("*") if p.is_file() and p != path / PROVENANCE_FILE
            )
        else:
            entries.append((path.name, path))
    digest = hashlib.sha256()
    for name, file in sorted(entries):
        digest.update(name.encode() + b"\0" + file_sha256(file).encode() + b"\n")
    return digest.hexdigest()


def build_provenance(
    *,
    config: Mapping[str, Any],
    written: Iterable[Path],
    seed: int | None = None,
    inputs: Mapping[str, str] | None = None,
    packages: Iterable[str] = (),
    extra: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The provenance record of one artifact (JSON-ready, secrets removed)."""
    config = redact(dict(config))
    record: dict[str, Any] = {
        **git_state(),
        "packages": package_versions([*CORE_PACKAGES, *packages]),
        "config": config,
        "config_hash": config_hash(config),
        "input_data_versions": dict(inputs or {}),
        "content_hash": content_hash(written),
        "seed": seed,
    }
    if extra:
        record.update(redact(dict(extra)))
    return record
