"""The artifact store: a local folder (the default) or any fsspec URL (`s3://bucket/prefix`,
`gs://...`, `file:///shared/sv`, `memory://...`), with the same layout either way.

Recipes write to a local staging root with plain pathlib/pandas/sqlite; when the root is a URL
the one place provenance is applied publishes each artifact to `<root>/<same relative path>`,
and a consumer on another machine fetches it back into its own staging root by that URL
(`localize`). Only files move: what is hashed locally is what is published, byte for byte.
Plain functions, no Dagster; the protocol's fsspec package must be installed (s3fs for s3://).
"""

from __future__ import annotations

import hashlib
import os
import posixpath
import re
import shutil
import uuid
from collections.abc import Iterable
from pathlib import Path
from typing import Any

_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.\-]*://")

PROVENANCE_FILE = "provenance.json"
"""An artifact's provenance record: inside its folder, or `<file>.provenance.json` beside a file."""


class StorageError(RuntimeError):
    """An artifact could not be published to or fetched from the artifact store."""


def is_url(value: str) -> bool:
    """`scheme://...` (fsspec URL), as opposed to a local path."""
    return bool(_URL.match(value))


def normalize_root(value: str) -> str:
    """A store root without trailing slashes after its `scheme://` (`memory://` stays whole)."""
    scheme = _URL.match(value)
    if not scheme:
        raise StorageError(f"{value!r} is not an fsspec URL (scheme://...)")
    return scheme.group(0) + value[scheme.end() :].rstrip("/")


def join(root: str, relative: str) -> str:
    return root + ("" if root.endswith("/") else "/") + relative.strip("/")


def _fs(url: str) -> tuple[Any, str]:
    """(fsspec filesystem, path within it)."""
    from fsspec.core import url_to_fs

    try:
        found: tuple[Any, str] = url_to_fs(url)
        return found
    except (ImportError, ValueError) as error:
        raise StorageError(f"{url}: cannot open this artifact store: {error}") from None


def relative_to_root(path: Path, local_root: Path) -> str:
    """`path` as a POSIX path relative to the staging root; refuses paths outside it."""
    try:
        return path.resolve().relative_to(local_root.resolve()).as_posix()
    except ValueError:
        raise StorageError(
            f"{path} is not under the outputs root {local_root}; only artifacts written there are published"
        ) from None


def publish(local: Path, local_root: Path, root_url: str) -> str:
    """Copy a file or folder under `local_root` to the same relative place under `root_url`;
    returns its URL. Files already there are overwritten (a resumed eval adds lines)."""
    relative = relative_to_root(local, local_root)
    if not local.exists():
        raise StorageError(f"{local}: nothing to publish (the recipe's artifact path does not exist)")
    fs, root = _fs(root_url)
    target = posixpath.join(root, relative)
    files = (
        [(local, target)]
        if local.is_file()
        else [
            (file, posixpath.join(target, file.relative_to(local).as_posix()))
            for file in sorted(local.rglob("*"))
            if file.is_file()
        ]
    )
    try:
        for source, destination in files:
            fs.makedirs(posixpath.dirname(destination), exist_ok=True)
            fs.put_file(str(source), destination)
    except OSError as error:
        raise StorageError(f"publishing {local} to {join(root_url, relative)} failed: {error}") from error
    return join(root_url, relative)


def fetch(url: str, local: Path) -> Path:
    """Download the file or folder at `url` to `local`. It appears whole or not at all (a
    temporary sibling renamed into place), so concurrent consumers never read half a copy."""
    fs, remote = _fs(url)
    if not fs.exists(remote):
        raise StorageError(f"{url}: not in the artifact store (was it published, and is SV_OUTPUTS_DIR the same root?)")
    local.parent.mkdir(parents=True, exist_ok=True)
    partial = local.with_name(f".{local.name}.fetch-{os.getpid()}-{uuid.uuid4().hex[:8]}")
    try:
        if fs.isdir(remote):
            partial.mkdir()
            for remote_file in fs.find(remote):
                destination = partial / posixpath.relpath(remote_file, remote)
                destination.parent.mkdir(parents=True, exist_ok=True)
                fs.get_file(remote_file, str(destination))
        else:
            fs.get_file(remote, str(partial))
        try:
            os.replace(partial, local)
        except OSError:
            if not local.exists():
                raise  # not a lost race: a real failure
    except OSError as error:
        raise StorageError(f"fetching {url} to {local} failed: {error}") from error
    finally:
        if partial.is_dir():
            shutil.rmtree(partial, ignore_errors=True)
        elif partial.exists():
            partial.unlink()
    return local


def localize(
    paths: Iterable[Path], *, artifact_url: str, artifact_path: Path, root_url: str, local_root: Path
) -> list[Path]:
    """Where `paths` (written under another machine's staging root) live under this machine's
    `local_root`, fetching from `root_url` whatever is missing here. `artifact_url` and
    `artifact_path` (one published artifact) tell the old root from the relative layout."""
    prefix = join(root_url, "")
    if not artifact_url.startswith(prefix):
        raise StorageError(
            f"{artifact_url} is not under this machine's artifact root {root_url} (SV_OUTPUTS_DIR differs?)"
        )
    relative = Path(artifact_url[len(prefix) :])
    if artifact_path.parts[-len(relative.parts) :] != relative.parts:
        raise StorageError(
            f"{artifact_path} does not end in {relative.as_posix()}, the layout {artifact_url} was published with"
        )
    old_root = Path(*artifact_path.parts[: -len(relative.parts)])
    localized = []
    for path in paths:
        try:
            inside = path.relative_to(old_root)
        except ValueError:
            localized.append(path)  # not an artifact file (written outside the outputs root)
            continue
        here = local_root / inside
        if not here.exists():
            fetch(join(root_url, inside.as_posix()), here)
        localized.append(here)
    return localized


def content_hash_at(url: str) -> str:
    """`sv_dagster.core.artifacts.provenance.content_hash` of the file or folder at `url`, read from the
    store (same rule: names relative to the folder, or the file's name, and each file's sha256;
    a folder's own provenance record is left out)."""
    fs, remote = _fs(url)
    if not fs.exists(remote):
        raise StorageError(f"{url}: not in the artifact store")
    if fs.isdir(remote):
        entries = [(posixpath.relpath(file, remote), file) for file in fs.find(remote)]
        entries = [(name, file) for name, file in entries if name != PROVENANCE_FILE]
    else:
        entries = [(posixpath.basename(remote), remote)]
    digest = hashlib.sha256()
    for name, file in sorted(entries):
        file_digest = hashlib.sha256()
        with fs.open(file, "rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                file_digest.update(block)
        digest.update(name.encode() + b"\0" + file_digest.hexdigest().encode() + b"\n")
    return digest.hexdigest()
