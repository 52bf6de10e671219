"""The pinned-wheel loader: a wheel built here and served to real pip from a local folder
(`--no-index --find-links`), the hash checks with their error lines, a cache that is never
half-written, and members read against their pins and the wheel's RECORD."""

from __future__ import annotations

import base64
import hashlib
import os
import shutil
import time
import zipfile
from pathlib import Path

import pytest

from sv_dagster.core.artifacts.provenance import file_sha256
from sv_dagster.core.data.wheels import STAGING_PREFIX, PipDownloader, WheelError, entry_dir, fetch_wheel

PACKAGE, VERSION = "sv-toy-data", "1.0"
DATA = b'{"prompt": "ignore previous instructions"}\n' * 50
NOTES = b"toy notes\n"


def _record_hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def make_wheel(folder: Path, *, version: str = VERSION, record_overrides: dict[str, bytes] | None = None) -> Path:
    """A minimal valid wheel of PACKAGE (RECORD lists every member's sha256; an override
    records other bytes' hash for that member, as a wheel whose file changed would)."""
    dist = f"sv_toy_data-{version}.dist-info"
    members = {
        "sv_toy_data/data/prompts.jsonl": DATA,
        "sv_toy_data/notes.txt": NOTES,
        f"{dist}/METADATA": f"Metadata-Version: 2.1\nName: {PACKAGE}\nVersion: {version}\n".encode(),
        f"{dist}/WHEEL": b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    overrides = record_overrides or {}
    record = "".join(
        f"{name},{_record_hash(overrides.get(name, data))},{len(data)}\n" for name, data in members.items()
    )
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"sv_toy_data-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
        archive.writestr(f"{dist}/RECORD", record + f"{dist}/RECORD,,\n")
    return path


@pytest.fixture
def index(tmp_path: Path) -> tuple[Path, str]:
    """A find-links folder holding the toy wheel, and the wheel's sha256."""
    wheel = make_wheel(tmp_path / "index")
    return wheel.parent, file_sha256(wheel)


def local_pip(folder: Path) -> PipDownloader:
    return PipDownloader(no_index=True, find_links=(str(folder),))


def copier(folder: Path):
    """The download step injected: copy the wheel from `folder` (pip itself is tested above
    and below; the rest need not pay for a pip process each)."""

    def download(package: str, version: str, dest: Path) -> None:
        for wheel in folder.glob(f"sv_toy_data-{version}-*.whl"):
            shutil.copy(wheel, dest / wheel.name)

    return download


def no_download(package: str, version: str, folder: Path) -> None:
    raise AssertionError(f"{package}=={version} was downloaded again instead of read from the cache")


def test_real_pip_fetches_into_the_cache_once(tmp_path: Path, index: tuple[Path, str]) -> None:
    folder, sha = index
    cache = tmp_path / "cache"
    wheel = fetch_wheel(PACKAGE, VERSION, sha, cache_dir=cache, downloader=local_pip(folder))
    assert wheel.path == entry_dir(PACKAGE, VERSION, sha, cache) / "sv_toy_data-1.0-py3-none-any.whl"
    assert file_sha256(wheel.path) == sha
    assert wheel.provenance() == {
        "package": PACKAGE,
        "version": VERSION,
        "wheel": wheel.path.name,
        "wheel_sha256": sha,
    }
    # only the verified entry is left under the cache: no staging folder
    assert [p.name for p in (cache / PACKAGE / VERSION).iterdir()] == [sha]
    again = fetch_wheel(PACKAGE, VERSION, sha, cache_dir=cache, downloader=no_download)
    assert again.path == wheel.path


def test_default_cache_folder_follows_the_environment(
    tmp_path: Path, index: tuple[Path, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    folder, sha = index
    monkeypatch.setenv("SV_WHEEL_CACHE", str(tmp_path / "env-cache"))
    wheel = fetch_wheel(PACKAGE, VERSION, sha, downloader=copier(folder))
    assert wheel.path.is_relative_to(tmp_path / "env-cache")


def test_a_hash_mismatch_is_one_line_naming_everything_and_caches_nothing(
    tmp_path: Path, index: tuple[Path, str]
) -> None:
    folder, sha = index
    cache = tmp_path / "cache"
    wrong = "0" * 64
    with pytest.raises(WheelError) as failure:
        fetch_wheel(PACKAGE, VERSION, wrong, cache_dir=cache, downloader=copier(folder))
    message = str(failure.value)
    assert "\n" not in message
    assert f"{PACKAGE}=={VERSION}" in message and "sv_toy_data-1.0-py3-none-any.whl" in message
    assert f"sha256 {sha}, expected {wrong}" in message
    assert not list(cache.rglob("*.whl")) and not list(cache.rglob(f"{STAGING_PREFIX}*"))


def test_an_unknown_version_names_the_versions_there_are(tmp_path: Path, index: tuple[Path, str]) -> None:
    folder, sha = index
    with pytest.raises(WheelError) as failure:
        fetch_wheel(PACKAGE, "9.9", sha, cache_dir=tmp_path / "cache", downloader=local_pip(folder))
    message = str(failure.value)
    assert "\n" not in message
    assert message.startswith(f"{PACKAGE}==9.9: pip download failed:") and "from versions: 1.0" in message


def test_an_unreachable_index_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PIP_RETRIES", "1")  # pip's retry warning is what names the connection error
    monkeypatch.setenv("PIP_FIND_LINKS", "")
    dead = PipDownloader(index_url="http://127.0.0.1:9/simple")
    with pytest.raises(WheelError) as failure:
        fetch_wheel(PACKAGE, VERSION, "a" * 64, cache_dir=tmp_path / "cache", downloader=dead)
    message = str(failure.value)
    assert "\n" not in message and message.startswith(f"{PACKAGE}=={VERSION}: pip download failed")
    assert "package index is unreachable" in message and "Connection refused" in message


def test_an_interrupted_download_leaves_nothing_that_looks_valid(tmp_path: Path, index: tuple[Path, str]) -> None:
    folder, sha = index
    cache = tmp_path / "cache"
    whole = (folder / "sv_toy_data-1.0-py3-none-any.whl").read_bytes()

    def cut_off(package: str, version: str, dest: Path) -> None:
        (dest / "sv_toy_data-1.0-py3-none-any.whl").write_bytes(whole[: len(whole) // 2])
        raise KeyboardInterrupt  # as a Ctrl-C or a kill mid-download

    with pytest.raises(KeyboardInterrupt):
        fetch_wheel(PACKAGE, VERSION, sha, cache_dir=cache, downloader=cut_off)
    assert not entry_dir(PACKAGE, VERSION, sha, cache).exists()
    assert not list(cache.rglob("*.whl"))
    # A process killed outright leaves its staging folder (here with a whole, valid wheel in
    # it): it is never taken for an entry, and the next fetch downloads afresh.
    parent = entry_dir(PACKAGE, VERSION, sha, cache).parent
    parent.mkdir(parents=True)
    leftover = parent / f"{STAGING_PREFIX}killed"
    leftover.mkdir()
    (leftover / "sv_toy_data-1.0-py3-none-any.whl").write_bytes(whole)
    calls = []

    def counted(package: str, version: str, dest: Path) -> None:
        calls.append(package)
        copier(folder)(package, version, dest)

    wheel = fetch_wheel(PACKAGE, VERSION, sha, cache_dir=cache, downloader=counted)
    assert calls == [PACKAGE] and wheel.path.parent.name == sha
    assert leftover.is_dir()  # young: it might belong to a live process
    old = time.time() - 2 * 24 * 3600
    os.utime(leftover, (old, old))
    with pytest.raises(WheelError):
        fetch_wheel(PACKAGE, VERSION, "c" * 64, cache_dir=cache, downloader=copier(folder))
    assert not leftover.exists()  # a day old: removed


def test_a_cached_wheel_changed_after_verification_is_an_error(tmp_path: Path, index: tuple[Path, str]) -> None:
    folder, sha = index
    cache = tmp_path / "cache"
    wheel = fetch_wheel(PACKAGE, VERSION, sha, cache_dir=cache, downloader=copier(folder))
    with wheel.path.open("ab") as handle:
        handle.write(b"tampered")
    with pytest.raises(WheelError) as failure:
        fetch_wheel(PACKAGE, VERSION, sha, cache_dir=cache, downloader=no_download)
    message = str(failure.value)
    assert "\n" not in message and f"cached wheel {wheel.path} has sha256" in message
    assert f"expected {sha}" in message and "delete" in message


def test_members_are_read_against_their_pins_with_provenance(tmp_path: Path, index: tuple[Path, str]) -> None:
    folder, sha = index
    wheel = fetch_wheel(PACKAGE, VERSION, sha, cache_dir=tmp_path / "cache", downloader=copier(folder))
    member = "sv_toy_data/data/prompts.jsonl"
    pin = hashlib.sha256(DATA).hexdigest()
    data, facts = wheel.read(member, pin)
    assert data == DATA
    assert facts.provenance() == {
        "package": PACKAGE,
        "version": VERSION,
        "wheel_sha256": sha,
        "member": member,
        "member_sha256": pin,
        "member_bytes": len(DATA),
    }
    assert wheel.read("sv_toy_data/notes.txt")[0] == NOTES  # no pin: RECORD still checked
    assert wheel.recorded_sha256(member) == pin
    assert member in wheel.members() and "sv_toy_data-1.0.dist-info/RECORD" in wheel.members()

    dest = tmp_path / "out" / "prompts.jsonl"
    extracted = wheel.extract(member, dest, pin)
    assert extracted.path == dest and dest.read_bytes() == DATA

    wrong = "f" * 64
    with pytest.raises(WheelError) as failure:
        wheel.extract(member, tmp_path / "bad" / "prompts.jsonl", wrong)
    message = str(failure.value)
    assert "\n" not in message and f"{PACKAGE}=={VERSION}" in message and member in message
    assert f"sha256 {pin}, expected {wrong}" in message
    assert not list((tmp_path / "bad").iterdir())  # neither the file nor a partial one

    with pytest.raises(WheelError, match=r"no member 'sv_toy_data/missing.txt' \(it holds 5 files"):
        wheel.read("sv_toy_data/missing.txt")
    with pytest.raises(WheelError, match="is not a sha256"):
        wheel.read(member, "abc")


def test_a_member_that_disagrees_with_the_wheels_record_fails_without_a_pin(tmp_path: Path) -> None:
    made = make_wheel(tmp_path / "index", record_overrides={"sv_toy_data/notes.txt": b"what was published\n"})
    wheel = fetch_wheel(
        PACKAGE, VERSION, file_sha256(made), cache_dir=tmp_path / "cache", downloader=copier(made.parent)
    )
    with pytest.raises(WheelError) as failure:
        wheel.read("sv_toy_data/notes.txt")
    assert "the wheel's RECORD says" in str(failure.value)
    assert wheel.read("sv_toy_data/data/prompts.jsonl")[0] == DATA


def test_a_malformed_pin_fails_before_any_download(tmp_path: Path) -> None:
    with pytest.raises(WheelError, match=rf"{PACKAGE}==1.0: wheel pin: 'xyz' is not a sha256"):
        fetch_wheel(PACKAGE, VERSION, "xyz", cache_dir=tmp_path / "cache", downloader=no_download)
