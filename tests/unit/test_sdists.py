"""The pinned-sdist reader: a toy sdist served from a local PEP 503 index (`file://`), the
hash checks with their one-line errors, an unreachable index, a cache that is never
half-written, and members read in one pass against their pins."""

from __future__ import annotations

import hashlib
import io
import tarfile
from pathlib import Path

import pytest

from sv_dagster.core.artifacts.provenance import file_sha256
from sv_dagster.core.data.sdists import STAGING_PREFIX, SdistError, SimpleIndexDownloader, entry_dir, fetch_sdist

PACKAGE, VERSION = "SV_Toy-Fixtures", "0.2"
FAIL_TF = b'resource "aws_s3_bucket" "b" {\n  acl = "public-read"\n}\n'
EXAMPLE = b"import os\nos.system('ls')\n"


def make_sdist(folder: Path, *, version: str = VERSION, extra: dict[str, bytes] | None = None) -> Path:
    """A .tar.gz sdist whose members sit under `<name>-<version>/`, plus a link and a
    `..` entry that must never be offered as members."""
    top = f"sv_toy_fixtures-{version}"
    members = {"tests/fail/main.tf": FAIL_TF, "examples/os_system.py": EXAMPLE, "setup.py": b"raise SystemExit\n"}
    members.update(extra or {})
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{top}.tar.gz"
    with tarfile.open(path, "w:gz") as archive:
        for name, data in members.items():
            info = tarfile.TarInfo(f"{top}/{name}")
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
        link = tarfile.TarInfo(f"{top}/examples/passwd.py")
        link.type, link.linkname = tarfile.SYMTYPE, "/etc/passwd"
        archive.addfile(link)
        escape = tarfile.TarInfo(f"{top}/../escape.py")
        escape.size = 1
        archive.addfile(escape, io.BytesIO(b"x"))
    return path


def make_index(root: Path, sdist: Path, stated: str | None = None) -> str:
    """A PEP 503 index folder with one project page linking `sdist` (its `#sha256=` fragment
    `stated`, default the file's own); returns its file:// URL."""
    page = root / "simple" / "sv-toy-fixtures"
    page.mkdir(parents=True)
    files = root / "files"
    files.mkdir(exist_ok=True)
    (files / sdist.name).write_bytes(sdist.read_bytes())
    fragment = stated or file_sha256(sdist)
    (page / "index.html").write_text(
        f'<html><body><a href="../../files/{sdist.name}#sha256={fragment}">{sdist.name}</a>'
        '<a href="../../files/sv_toy_fixtures-0.1.tar.gz#sha256=00">sv_toy_fixtures-0.1.tar.gz</a></body></html>'
    )
    return (root / "simple").as_uri()


@pytest.fixture
def toy(tmp_path: Path) -> tuple[str, str]:
    """(file:// index URL, the toy sdist's sha256)."""
    sdist = make_sdist(tmp_path / "build")
    return make_index(tmp_path / "index", sdist), file_sha256(sdist)


def test_fetches_from_the_index_into_the_cache_and_reads_members(tmp_path: Path, toy: tuple[str, str]) -> None:
    url, sha = toy
    cache = tmp_path / "cache"
    sdist = fetch_sdist(PACKAGE, VERSION, sha, cache_dir=cache, downloader=SimpleIndexDownloader(url))
    assert sdist.path.parent == entry_dir(PACKAGE, VERSION, sha, cache) and file_sha256(sdist.path) == sha
    # Regular files only, without the top folder: the link and the `..` entry are not members.
    assert sdist.members() == ["examples/os_system.py", "setup.py", "tests/fail/main.tf"]
    assert sdist.matching("tests/*/*.tf") == ["tests/fail/main.tf"]
    assert sdist.matching("**/*.py") == ["examples/os_system.py", "setup.py"]
    read = sdist.read_many({"tests/fail/main.tf": hashlib.sha256(FAIL_TF).hexdigest(), "examples/os_system.py": None})
    blob, facts = read["tests/fail/main.tf"]
    assert blob == FAIL_TF and read["examples/os_system.py"][0] == EXAMPLE
    assert facts.provenance() == {
        "package": PACKAGE,
        "version": VERSION,
        "sdist_sha256": sha,
        "member": "tests/fail/main.tf",
        "member_sha256": hashlib.sha256(FAIL_TF).hexdigest(),
        "member_bytes": len(FAIL_TF),
    }

    def no_download(*args: object) -> None:
        raise AssertionError("downloaded again instead of read from the cache")

    again = fetch_sdist(PACKAGE, VERSION, sha, cache_dir=cache, downloader=no_download)
    assert again.path == sdist.path
    assert not list(cache.rglob(f"{STAGING_PREFIX}*"))


def test_a_wrong_pin_is_one_line_naming_both_hashes_and_nothing_is_cached(tmp_path: Path, toy: tuple[str, str]) -> None:
    url, sha = toy
    wrong = "0" * 64
    cache = tmp_path / "cache"
    # The index states the real hash: refused before the download.
    with pytest.raises(SdistError, match=f"the index states sha256 {sha} .* expected {wrong}") as stated:
        fetch_sdist(PACKAGE, VERSION, wrong, cache_dir=cache, downloader=SimpleIndexDownloader(url))
    # An index that states no hash: the downloaded file's own hash is checked.
    bare = tmp_path / "bare"
    page = make_index(bare, make_sdist(tmp_path / "build2"), stated="x")
    (bare / "simple" / "sv-toy-fixtures" / "index.html").write_text(
        (bare / "simple" / "sv-toy-fixtures" / "index.html").read_text().replace("#sha256=x", "")
    )
    with pytest.raises(SdistError, match=f"downloaded sv_toy_fixtures-0.2.tar.gz has sha256 {sha}, expected {wrong}"):
        fetch_sdist(PACKAGE, VERSION, wrong, cache_dir=cache, downloader=SimpleIndexDownloader(page))
    assert "\n" not in str(stated.value)
    assert not cache.exists() or not any(cache.rglob("*.tar.gz"))  # nothing unverified is kept
    with pytest.raises(SdistError, match="sdist pin: 'abc' is not a sha256"):
        fetch_sdist(PACKAGE, VERSION, "abc", cache_dir=cache)


def test_an_unreachable_index_and_a_missing_version_say_so(tmp_path: Path, toy: tuple[str, str]) -> None:
    url, sha = toy
    offline = SimpleIndexDownloader("http://127.0.0.1:9/simple", timeout_s=5)
    with pytest.raises(
        SdistError,
        match=rf"{PACKAGE}==0.2: the package index is unreachable \(http://127.0.0.1:9/simple/sv-toy-fixtures/",
    ):
        fetch_sdist(PACKAGE, VERSION, sha, cache_dir=tmp_path / "cache", downloader=offline)
    with pytest.raises(
        SdistError,
        match=r"==9.9: no sdist of this version on .* \(sdists there: \['sv_toy_fixtures-0.1.tar.gz', 'sv_toy_fixtures-0.2.tar.gz'\]\)",
    ):
        fetch_sdist(PACKAGE, "9.9", sha, cache_dir=tmp_path / "cache", downloader=SimpleIndexDownloader(url))
    assert not (tmp_path / "cache").exists() or not any((tmp_path / "cache").rglob("*"))


def test_a_cached_file_changed_after_it_was_verified_is_an_error(tmp_path: Path, toy: tuple[str, str]) -> None:
    url, sha = toy
    cache = tmp_path / "cache"
    sdist = fetch_sdist(PACKAGE, VERSION, sha, cache_dir=cache, downloader=SimpleIndexDownloader(url))
    sdist.path.write_bytes(sdist.path.read_bytes() + b"\0")
    with pytest.raises(SdistError, match=f"cached sdist .* expected {sha} \\(it changed after it was verified; delete"):
        fetch_sdist(PACKAGE, VERSION, sha, cache_dir=cache)


def test_member_pins_and_missing_members_are_one_line_errors(tmp_path: Path, toy: tuple[str, str]) -> None:
    url, sha = toy
    sdist = fetch_sdist(PACKAGE, VERSION, sha, cache_dir=tmp_path / "cache", downloader=SimpleIndexDownloader(url))
    with pytest.raises(
        SdistError, match=r"member tests/fail/main.tf has sha256 [0-9a-f]{64}, expected 1{64} \(the pin\)"
    ):
        sdist.read("tests/fail/main.tf", "1" * 64)
    with pytest.raises(SdistError, match=r"no member 'examples/passwd.py' \(it holds 3 files"):
        sdist.read("examples/passwd.py")
    bad = tmp_path / "bad" / "sv_toy_fixtures-0.3.tar.gz"
    bad.parent.mkdir()
    bad.write_bytes(b"not gzip")
    folder = entry_dir(PACKAGE, "0.3", file_sha256(bad), tmp_path / "cache")
    folder.mkdir(parents=True)
    (folder / bad.name).write_bytes(bad.read_bytes())
    broken = fetch_sdist(PACKAGE, "0.3", file_sha256(bad), cache_dir=tmp_path / "cache")
    with pytest.raises(SdistError, match=r"sv_toy_fixtures-0.3.tar.gz\): not a readable .tar.gz sdist"):
        broken.members()
