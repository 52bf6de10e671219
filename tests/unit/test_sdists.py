"""The pinned-sdist loader: an sdist built here and served by a real HTTP server on loopback as
a simple index (PEP 691 JSON and PEP 503 HTML pages), the hash checks with their error lines,
an index that cannot be reached, a cache that is never half-written, and members read against
their pins (regular files only)."""

from __future__ import annotations

import hashlib
import io
import json
import os
import socket
import tarfile
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from sv_dagster.core.data.sdists import IndexDownloader, SdistError, entry_dir, fetch_sdist

PACKAGE, VERSION = "sv-toy-logs", "1.0"
CONN = b"#separator \\x09\n#fields\tts\tid.resp_p\n#types\ttime\tport\n1.5\t23\n"


def make_sdist(folder: Path, *, with_link: bool = False) -> Path:
    """`sv_toy_logs-1.0.tar.gz` holding data/conn.log (and a symlink when asked)."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "sv_toy_logs-1.0.tar.gz"
    with tarfile.open(path, "w:gz") as archive:
        info = tarfile.TarInfo("sv_toy_logs-1.0/data/conn.log")
        info.size = len(CONN)
        archive.addfile(info, io.BytesIO(CONN))
        if with_link:
            link = tarfile.TarInfo("sv_toy_logs-1.0/data/passwd")
            link.type, link.linkname = tarfile.SYMTYPE, "/etc/passwd"
            archive.addfile(link)
    return path


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


class Index:
    """A simple index on loopback serving one sdist: `json` or `html` project pages; the page
    lists `listed_sha` (default: the file's own) and counts the file downloads."""

    def __init__(self, sdist: Path, style: str = "json", listed_sha: str | None = None) -> None:
        self.sdist, self.style, self.downloads = sdist, style, 0
        self.listed_sha = listed_sha or sha(sdist)
        index = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:
                return None

            def do_GET(self) -> None:
                if self.path == "/simple/sv-toy-logs/":
                    files = [("sv_toy_logs-0.9.tar.gz", "0" * 64), (index.sdist.name, index.listed_sha)]
                    if index.style == "json":
                        body = json.dumps(
                            {
                                "files": [
                                    {"filename": f, "url": f"../../files/{f}", "hashes": {"sha256": h}}
                                    for f, h in files
                                ]
                            }
                        ).encode()
                        kind = "application/vnd.pypi.simple.v1+json"
                    else:
                        body = "".join(f'<a href="/files/{f}#sha256={h}">{f}</a><br/>' for f, h in files).encode()
                        kind = "text/html"
                elif self.path == f"/files/{index.sdist.name}":
                    index.downloads += 1
                    body, kind = index.sdist.read_bytes(), "application/octet-stream"
                else:
                    self.send_error(404)
                    return
                self.send_response(200)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/simple"

    def __enter__(self) -> Index:
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def sdist(tmp_path: Path) -> Path:
    return make_sdist(tmp_path / "dist")


@pytest.mark.parametrize("style", ["json", "html"])
def test_fetched_once_from_the_index_then_read_from_the_cache(tmp_path: Path, sdist: Path, style: str) -> None:
    cache = tmp_path / "cache"
    with Index(sdist, style) as index:
        fetched = fetch_sdist(PACKAGE, VERSION, sha(sdist), cache_dir=cache, downloader=IndexDownloader(index.url))
        again = fetch_sdist(PACKAGE, VERSION, sha(sdist), cache_dir=cache, downloader=IndexDownloader(index.url))
        assert index.downloads == 1
    assert fetched.path == again.path == entry_dir(PACKAGE, VERSION, sha(sdist), cache) / sdist.name
    data, facts = fetched.read("sv_toy_logs-1.0/data/conn.log", hashlib.sha256(CONN).hexdigest())
    assert data == CONN
    assert facts.provenance() == {
        "package": PACKAGE,
        "version": VERSION,
        "sdist_sha256": sha(sdist),
        "member": "sv_toy_logs-1.0/data/conn.log",
        "member_sha256": hashlib.sha256(CONN).hexdigest(),
        "member_bytes": len(CONN),
    }
    assert fetched.members() == ["sv_toy_logs-1.0/data/conn.log"]


def test_a_pin_the_download_does_not_match_is_one_line_and_leaves_no_cache_entry(tmp_path: Path, sdist: Path) -> None:
    cache, wrong = tmp_path / "cache", "ab" * 32
    with Index(sdist, listed_sha=wrong) as index, pytest.raises(SdistError) as raised:
        fetch_sdist(PACKAGE, VERSION, wrong, cache_dir=cache, downloader=IndexDownloader(index.url))
    message = str(raised.value)
    assert "\n" not in message
    assert message == f"sv-toy-logs==1.0: downloaded {sdist.name} has sha256 {sha(sdist)}, expected {wrong}"
    assert not entry_dir(PACKAGE, VERSION, wrong, cache).exists()
    assert not (cache / PACKAGE).exists()  # no empty <name>/<version>/ folders either


def test_an_index_listing_another_hash_is_refused_before_the_download(tmp_path: Path, sdist: Path) -> None:
    with Index(sdist, listed_sha="cd" * 32) as index, pytest.raises(SdistError, match="the index lists sha256 cdcd"):
        fetch_sdist(PACKAGE, VERSION, sha(sdist), cache_dir=tmp_path / "cache", downloader=IndexDownloader(index.url))
    assert index.downloads == 0


def test_offline_names_the_package_and_the_index(tmp_path: Path, sdist: Path) -> None:
    with socket.socket() as closed:  # a port nothing listens on
        closed.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{closed.getsockname()[1]}/simple"
    with pytest.raises(SdistError) as raised:
        fetch_sdist(PACKAGE, VERSION, sha(sdist), cache_dir=tmp_path / "cache", downloader=IndexDownloader(url))
    message = str(raised.value)
    assert message.startswith(f"sv-toy-logs==1.0: the package index is unreachable ({url}/sv-toy-logs/: ConnectError")
    assert "\n" not in message


def test_a_version_the_index_lacks_lists_what_it_has(tmp_path: Path, sdist: Path) -> None:
    with Index(sdist) as index, pytest.raises(SdistError) as raised:
        fetch_sdist(PACKAGE, "2.0", sha(sdist), cache_dir=tmp_path / "cache", downloader=IndexDownloader(index.url))
    assert "no sdist sv-toy-logs-2.0.tar.gz on the index" in str(raised.value)
    assert "sv_toy_logs-1.0.tar.gz" in str(raised.value)


def test_a_cached_file_changed_after_it_was_verified_is_an_error(tmp_path: Path, sdist: Path) -> None:
    cache = tmp_path / "cache"
    with Index(sdist) as index:
        fetched = fetch_sdist(PACKAGE, VERSION, sha(sdist), cache_dir=cache, downloader=IndexDownloader(index.url))
    os.chmod(fetched.path, 0o644)
    fetched.path.write_bytes(fetched.path.read_bytes() + b"\0")
    with pytest.raises(SdistError, match="it changed after it was verified"):
        fetch_sdist(PACKAGE, VERSION, sha(sdist), cache_dir=cache)


def test_members_are_checked_against_their_pins_and_must_be_regular_files(tmp_path: Path) -> None:
    linked = make_sdist(tmp_path / "dist", with_link=True)
    with Index(linked) as index:
        fetched = fetch_sdist(
            PACKAGE, VERSION, sha(linked), cache_dir=tmp_path / "c", downloader=IndexDownloader(index.url)
        )
    with pytest.raises(SdistError, match="member sv_toy_logs-1.0/data/conn.log has sha256 .* expected 0000"):
        fetched.read("sv_toy_logs-1.0/data/conn.log", "0" * 64)
    with pytest.raises(SdistError, match="is not a regular file"):
        fetched.read("sv_toy_logs-1.0/data/passwd")
    with pytest.raises(SdistError, match="no member 'nope'"):
        fetched.read("nope")
