"""A throwaway PostgreSQL server for tests, started from the Debian binaries (not a mock).

`postgres_server()` runs `initdb` + `pg_ctl` from `/usr/lib/postgresql/<ver>/bin` (Debian package
`postgresql`) in a fresh temp dir, listening on 127.0.0.1 only, on a free port, and yields a
`PostgresServer` with the credentials of a password-protected role. `server.new_database()` creates
an empty database owned by that role, so tests sharing one server do not share state. On exit
the server is stopped and its directory removed.

PostgreSQL refuses to run as root; when the tests run as root (CI, these machines) the server
runs as the `postgres` system user, which the Debian package creates, via `runuser` (or
`setpriv`). Missing binaries are an error naming the package, never a skip.
"""

from __future__ import annotations

import os
import pwd
import re
import secrets
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

DEBIAN_PACKAGE = "postgresql"
BINDIR_ENV = "SV_PG_BINDIR"  # override: a directory holding initdb and pg_ctl
_DEBIAN_ROOT = Path("/usr/lib/postgresql")
SERVER_USER = "postgres"  # the system user the Debian package creates
_START_TIMEOUT_S = 30


class PostgresUnavailable(RuntimeError):
    """The PostgreSQL server binaries (or the user to run them as) are not on this machine."""


def find_bindir() -> Path:
    """The newest `/usr/lib/postgresql/<ver>/bin` holding initdb and pg_ctl (or $SV_PG_BINDIR)."""
    override = os.environ.get(BINDIR_ENV)
    candidates = (
        [Path(override)]
        if override
        else sorted(
            (p / "bin" for p in _DEBIAN_ROOT.glob("*") if re.fullmatch(r"\d+", p.name)),
            key=lambda p: int(p.parent.name),
            reverse=True,
        )
    )
    for bindir in candidates:
        if (bindir / "initdb").is_file() and (bindir / "pg_ctl").is_file():
            return bindir
    where = override or f"{_DEBIAN_ROOT}/<version>/bin"
    raise PostgresUnavailable(
        f"PostgreSQL server binaries (initdb, pg_ctl) not found in {where}. Install the Debian "
        f"package '{DEBIAN_PACKAGE}' as root: apt-get update && apt-get install -y {DEBIAN_PACKAGE} "
        f"(`make setup` does this), or point {BINDIR_ENV} at a directory holding them."
    )


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class PostgresServer:
    host: str
    port: int
    user: str
    password: str = field(repr=False)
    db_name: str
    root: Path
    bindir: Path
    _admin_password: str = field(repr=False, default="")

    def env(self, db_name: str | None = None) -> dict[str, str]:
        """The SV_PG_* variables configs/dagster-postgres.yaml reads."""
        return {
            "SV_PG_HOST": self.host,
            "SV_PG_PORT": str(self.port),
            "SV_PG_USER": self.user,
            "SV_PG_PASSWORD": self.password,
            "SV_PG_DB": db_name or self.db_name,
        }

    def connect(self, db_name: str | None = None, *, admin: bool = False):
        """A psycopg2 connection (psycopg2-binary comes with dagster-postgres)."""
        import psycopg2

        return psycopg2.connect(
            host=self.host,
            port=self.port,
            user="svadmin" if admin else self.user,
            password=self._admin_password if admin else self.password,
            dbname=db_name or self.db_name,
            connect_timeout=10,
        )

    def new_database(self, prefix: str = "sv_test") -> str:
        """Create an empty database owned by the test role; returns its name."""
        name = f"{prefix}_{secrets.token_hex(4)}"
        conn = self.connect("postgres", admin=True)
        try:
            conn.autocommit = True
            with conn.cursor() as cur:
                cur.execute(f'CREATE DATABASE "{name}" OWNER "{self.user}"')
        finally:
            conn.close()
        return name


def _as_server_user(cmd: list[str]) -> list[str]:
    """Prefix `cmd` so it runs as the postgres system user when we are root."""
    if os.geteuid() != 0:
        return cmd
    try:
        pwd.getpwnam(SERVER_USER)
    except KeyError as exc:
        raise PostgresUnavailable(
            f"running as root and there is no '{SERVER_USER}' system user to run PostgreSQL as; "
            f"the Debian package '{DEBIAN_PACKAGE}' creates it (apt-get install -y {DEBIAN_PACKAGE})"
        ) from exc
    if shutil.which("runuser"):
        return ["runuser", "-u", SERVER_USER, "--", *cmd]
    if shutil.which("setpriv"):
        return ["setpriv", f"--reuid={SERVER_USER}", f"--regid={SERVER_USER}", "--init-groups", *cmd]
    raise PostgresUnavailable("running as root, and neither runuser nor setpriv (util-linux) is available")


def _run(cmd: list[str], cwd: Path, env: dict[str, str], timeout: float = 60) -> None:
    proc = subprocess.run(_as_server_user(cmd), cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")


@contextmanager
def postgres_server(*, user: str = "sv_test", db_name: str = "sv_test") -> Iterator[PostgresServer]:
    """Start a PostgreSQL server on 127.0.0.1:<free port>; stop it and delete it on exit."""
    bindir = find_bindir()
    # Our own temp dir in /tmp (pytest's tmp_path is 0700 root, which the postgres user cannot enter).
    root = Path(tempfile.mkdtemp(prefix="sv-pg-"))
    data = root / "data"
    admin_password = secrets.token_hex(16)
    password = secrets.token_hex(16)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
    env["LC_ALL"] = env["LANG"] = "C.UTF-8"
    started = False
    try:
        (root / "pwfile").write_text(admin_password + "\n")
        if os.geteuid() == 0:
            _as_server_user(["true"])  # raises if there is no postgres user to run as
            owner = pwd.getpwnam(SERVER_USER)
            os.chown(root, owner.pw_uid, owner.pw_gid)
            os.chown(root / "pwfile", owner.pw_uid, owner.pw_gid)
        os.chmod(root / "pwfile", 0o600)
        _run(
            [
                str(bindir / "initdb"),
                "-D",
                str(data),
                "-U",
                "svadmin",
                f"--pwfile={root / 'pwfile'}",
                "--auth=scram-sha-256",
                "--encoding=UTF8",
                "--no-sync",
            ],
            cwd=root,
            env=env,
            timeout=120,
        )
        (root / "pwfile").unlink()
        for attempt in range(3):  # a free port can be taken by someone else before we bind it
            port = free_port()
            options = (
                f"-c listen_addresses=127.0.0.1 -p {port} -k {root} -c max_connections=200 "
                "-c fsync=off -c full_page_writes=off"
            )
            try:
                _run(
                    [
                        str(bindir / "pg_ctl"),
                        "-D",
                        str(data),
                        "-l",
                        str(root / "server.log"),
                        "-w",
                        "-t",
                        str(_START_TIMEOUT_S),
                        "-o",
                        options,
                        "start",
                    ],
                    cwd=root,
                    env=env,
                    timeout=_START_TIMEOUT_S + 15,
                )
                started = True
                break
            except RuntimeError:
                if attempt == 2:
                    log = (root / "server.log").read_text(errors="replace") if (root / "server.log").exists() else ""
                    raise RuntimeError(f"PostgreSQL did not start; server log:\n{log[-3000:]}") from None
                time.sleep(0.5)
        server = PostgresServer(
            host="127.0.0.1",
            port=port,
            user=user,
            password=password,
            db_name=db_name,
            root=root,
            bindir=bindir,
            _admin_password=admin_password,
        )
        conn = server.connect("postgres", admin=True)
        try:
            conn.autocommit = True
            with conn.cursor() as cur:
                cur.execute(f'CREATE ROLE "{user}" LOGIN PASSWORD %s', (password,))
                cur.execute(f'CREATE DATABASE "{db_name}" OWNER "{user}"')
        finally:
            conn.close()
        yield server
    finally:
        if started:
            try:
                _run([str(bindir / "pg_ctl"), "-D", str(data), "-m", "fast", "-w", "stop"], cwd=root, env=env)
            except Exception:
                _run([str(bindir / "pg_ctl"), "-D", str(data), "-m", "immediate", "-w", "stop"], cwd=root, env=env)
        shutil.rmtree(root, ignore_errors=True)
