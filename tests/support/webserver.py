"""The Dagster UI for tests, as a user starts it: `dagster dev` on loopback, driven by a real
headless Chromium (Debian's `chromium` package, through Playwright; never a browser that
Playwright downloads), plus a small client for the webserver's GraphQL API.

`dagster_dev(home)` starts `dagster dev` on 127.0.0.1 with a free port against the instance in
`home` (the test's own DAGSTER_HOME), waits until the code location has loaded, and yields a
`DagsterUI`; on exit it stops the whole process group (`dagster dev` leaves its webserver,
daemon and code server behind on a plain SIGTERM). `chromium()` launches the system browser
with the flags a closed network needs. A missing browser is an error naming the package,
never a skip; `SYSTEM_BROWSER_MISSING_IS_A_SKIP` says where skipping is honest.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.support.postgres import free_port

CHROMIUM = "/usr/bin/chromium"
DEBIAN_PACKAGE = "chromium"
# Without the background-networking flags Chromium phones home at start, and in a closed
# network those connections are refused loudly; QUIC and GPU are not needed headless.
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
_START_TIMEOUT_S = 90


class BrowserUnavailable(RuntimeError):
    """Debian's chromium is not installed."""


def system_browser_missing_is_a_skip() -> bool:
    """Only a platform that cannot install the Debian package (no apt) may skip the UI test."""
    return shutil.which("apt-get") is None


def find_chromium() -> str:
    path = os.environ.get("SV_CHROMIUM") or CHROMIUM
    if not Path(path).is_file():
        raise BrowserUnavailable(
            f"no Chromium at {path}. Install the Debian package '{DEBIAN_PACKAGE}' as root: "
            f"apt-get update && apt-get install -y {DEBIAN_PACKAGE} (`make setup` does this), "
            "or point SV_CHROMIUM at a Chromium binary."
        )
    return path


@contextmanager
def chromium(viewport: tuple[int, int] = (1600, 1000)) -> Iterator[Any]:
    """A Playwright page in headless system Chromium (a fresh profile per call)."""
    from playwright.sync_api import sync_playwright

    executable = find_chromium()
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": viewport[0], "height": viewport[1]})
            yield page
        finally:
            browser.close()


@dataclass
class DagsterUI:
    url: str
    process: subprocess.Popen
    log_path: Path

    def graphql(self, query: str, variables: dict[str, Any] | None = None) -> dict[str, Any]:
        """POST /graphql; the `data` of the answer (GraphQL errors raise, with the query)."""
        body = json.dumps({"query": query, "variables": variables or {}}).encode()
        request = urllib.request.Request(
            f"{self.url}/graphql", data=body, headers={"Content-Type": "application/json"}, method="POST"
        )
        with urllib.request.urlopen(request, timeout=30) as response:
            answer = json.loads(response.read())
        if answer.get("errors"):
            raise AssertionError(f"GraphQL errors from {self.url}/graphql: {answer['errors']}\nquery: {query}")
        return answer["data"]

    def log_tail(self, chars: int = 4000) -> str:
        return self.log_path.read_text(errors="replace")[-chars:] if self.log_path.exists() else ""


LOCATIONS_QUERY = """
{ workspaceOrError { __typename ... on Workspace { locationEntries {
    name loadStatus
    locationOrLoadError { __typename ... on PythonError { message } }
} } } }
"""


def _locations_loaded(ui: DagsterUI) -> bool:
    """True once every code location has loaded; a location that failed to load raises."""
    entries = ui.graphql(LOCATIONS_QUERY)["workspaceOrError"]["locationEntries"]
    for entry in entries:
        error = entry["locationOrLoadError"]
        if error and error["__typename"] == "PythonError":
            raise AssertionError(f"code location {entry['name']} failed to load: {error['message']}")
    return bool(entries) and all(e["loadStatus"] == "LOADED" and e["locationOrLoadError"] for e in entries)


@contextmanager
def dagster_dev(home: Path, *, cwd: Path, env: dict[str, str] | None = None) -> Iterator[DagsterUI]:
    """`dagster dev -h 127.0.0.1 -p <free port>` (webserver, daemon and code server) on the
    instance in `home`, from the repository root `cwd`; yields once the code location loaded."""
    port = free_port()
    environ = {**os.environ, **(env or {}), "DAGSTER_HOME": str(home)}
    log_path = home / "dagster-dev.log"
    dagster = Path(sys.executable).parent / "dagster"
    with log_path.open("w") as log:
        process = subprocess.Popen(
            [str(dagster), "dev", "-h", "127.0.0.1", "-p", str(port), "-w", "workspace.yaml"],
            cwd=cwd,
            env=environ,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group, so teardown reaches every child
        )
    ui = DagsterUI(url=f"http://127.0.0.1:{port}", process=process, log_path=log_path)
    try:
        deadline = time.monotonic() + _START_TIMEOUT_S
        while True:
            if process.poll() is not None:
                raise AssertionError(f"dagster dev exited with {process.returncode}:\n{ui.log_tail()}")
            try:
                if _locations_loaded(ui):
                    break
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                pass  # not listening yet
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"dagster dev did not load its code location in {_START_TIMEOUT_S} s:\n{ui.log_tail()}"
                )
            time.sleep(0.5)
        yield ui
    finally:
        stop_process_group(process)


def stop_process_group(process: subprocess.Popen) -> None:
    """SIGINT (Ctrl-C, on which `dagster dev` and Celery workers shut down), then SIGKILL the
    process group if anything in it lingers. Only the group this test started."""
    for sig, wait_s in ((signal.SIGINT, 10), (signal.SIGKILL, 10)):
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            return
        try:
            process.wait(timeout=wait_s)
        except subprocess.TimeoutExpired:
            continue
        # the leader exited; its children (webserver, daemon, code server) may not have
        try:
            os.killpg(process.pid, 0)
        except ProcessLookupError:
            return
        time.sleep(1)
