"""The Dagster instance on a real PostgreSQL server (configs/dagster-postgres.yaml).

A throwaway server is started from the Debian binaries on 127.0.0.1 (tests/support/postgres.py);
each test gets its own database. Runs are made in-process and by several `dagster job execute`
processes at once; every event each process printed must be in Postgres, and a second process
sees the same runs.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import dagster as dg
import pytest

from tests.conftest import REPO_ROOT
from tests.support.postgres import PostgresServer, PostgresUnavailable, find_bindir, postgres_server

BIN = Path(sys.executable).parent
CONFIG = REPO_ROOT / "configs" / "dagster-postgres.yaml"
EVAL_KEY = dg.AssetKey(["eval", "e1", "heuristic"])
N_CONCURRENT = 3
# A console log line of an event: "... - <run_id> - <pid> - [<step_key> - ]<EVENT_TYPE> - ..."
EVENT_LINE = re.compile(r" - (?P<run>[0-9a-f]{8}-[0-9a-f-]{27}) - \d+ - (?:\S+ - )?(?P<type>[A-Z_]+) - ")


@pytest.fixture(scope="module")
def pg_server() -> Iterator[PostgresServer]:
    with postgres_server() as server:
        yield server


@pytest.fixture
def pg_instance_home(isolated: Path, pg_server: PostgresServer, monkeypatch: pytest.MonkeyPatch) -> Path:
    """DAGSTER_HOME with the Postgres dagster.yaml, SV_PG_* set to a fresh database."""
    home = Path(os.environ["DAGSTER_HOME"])
    shutil.copyfile(CONFIG, home / "dagster.yaml")
    for name, value in pg_server.env(db_name=pg_server.new_database()).items():
        monkeypatch.setenv(name, value)
    return home


def stored_event_types(instance: dg.DagsterInstance, run_id: str) -> Counter:
    return Counter(e.dagster_event.event_type.name for e in instance.all_logs(run_id) if e.is_dagster_event)


def printed_event_types(stdout: str) -> dict[str, Counter]:
    by_run: dict[str, Counter] = {}
    for m in EVENT_LINE.finditer(stdout):
        by_run.setdefault(m["run"], Counter())[m["type"]] += 1
    return by_run


def test_config_reads_credentials_from_env_only():
    text = CONFIG.read_text()
    for var in ("SV_PG_HOST", "SV_PG_PORT", "SV_PG_USER", "SV_PG_PASSWORD", "SV_PG_DB"):
        assert f"env: {var}" in text
    assert "password: " not in text.replace("password:\n", "")  # no literal password


def test_missing_binaries_is_an_error_naming_the_package(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    monkeypatch.setenv("SV_PG_BINDIR", str(tmp_path))
    with pytest.raises(PostgresUnavailable, match=r"apt-get install -y postgresql"):
        find_bindir()


@pytest.mark.slow
def test_runs_on_postgres_concurrently_without_lost_events(pg_instance_home: Path, pg_server: PostgresServer):
    home = pg_instance_home
    instance = dg.DagsterInstance.get()
    assert type(instance.run_storage).__name__ == "PostgresRunStorage"
    assert type(instance.event_log_storage).__name__ == "PostgresEventLogStorage"

    # 1. One run in this process.
    from sv_dagster.assembly import build_definitions

    result = build_definitions().resolve_job_def("eval_e1").execute_in_process(instance=instance)
    assert result.success
    first = result.run_id
    # Every event the run produced is stored (the store also holds the *_PLANNED events
    # written when the run was created).
    assert not Counter(e.event_type.name for e in result.all_events) - stored_event_types(instance, first)

    # 2. Several `dagster job execute` processes at once (multiprocess executor: each also runs
    #    a worker process per step, all writing events to the same database).
    env = dict(os.environ)
    env.pop("DAGSTER_CLI_JOB_EXECUTE_MODULE_NAME", None)  # the venv's defaults find the module
    procs = [
        subprocess.Popen(
            [str(BIN / "dagster"), "job", "execute", "-j", "eval_e1"],
            cwd=REPO_ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for _ in range(N_CONCURRENT)
    ]
    try:
        outputs = [p.communicate(timeout=240)[0] for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    for p, out in zip(procs, outputs):
        assert p.returncode == 0, out[-4000:]

    printed: dict[str, Counter] = {}
    for out in outputs:
        ((run_id, types),) = printed_event_types(out).items()  # one run per process
        assert types["RUN_SUCCESS"] == 1 and types["ASSET_MATERIALIZATION"] >= 4, types  # parsed the log
        printed[run_id] = types
    cli_runs = set(printed)
    assert len(cli_runs) == N_CONCURRENT and first not in cli_runs

    # 3. Every event each process printed is stored, and each run is complete.
    runs = {r.run_id: r for r in instance.get_runs()}
    assert set(runs) == cli_runs | {first}
    for run_id in cli_runs:
        assert runs[run_id].is_success and runs[run_id].job_name == "eval_e1"
        stored = stored_event_types(instance, run_id)
        missing = printed[run_id] - stored
        assert not missing, f"events printed by the run but not in Postgres: {missing}"
        assert stored["RUN_SUCCESS"] == 1 and stored["RUN_FAILURE"] == 0
        assert stored["STEP_START"] == stored["STEP_SUCCESS"] > 0
    # Same job, same plan: the runs' step and asset events agree (engine chatter aside).
    chatter = {"ENGINE_EVENT", "LOGS_CAPTURED"}
    profiles = [
        {k: v for k, v in stored_event_types(instance, run_id).items() if k not in chatter}
        for run_id in sorted(cli_runs)
    ]
    assert all(p == profiles[0] for p in profiles)
    mats = instance.fetch_materializations(EVAL_KEY, limit=100).records
    assert sorted(r.run_id for r in mats) == sorted(cli_runs | {first})

    # 4. A second process sees the same runs and events.
    probe = textwrap.dedent(
        """
        import json, dagster as dg
        instance = dg.DagsterInstance.get()
        print(json.dumps({
            "storage": type(instance.run_storage).__name__,
            "runs": {r.run_id: [r.status.value, len(instance.all_logs(r.run_id))] for r in instance.get_runs()},
        }))
        """
    )
    proc = subprocess.run(
        [sys.executable, "-c", probe], cwd=REPO_ROOT, env=dict(os.environ), capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    seen = json.loads(proc.stdout.strip().splitlines()[-1])
    assert seen["storage"] == "PostgresRunStorage"
    assert seen["runs"] == {run_id: ["SUCCESS", len(instance.all_logs(run_id))] for run_id in cli_runs | {first}}

    # 5. The data really is in Postgres, and no SQLite instance database was made.
    conn = pg_server.connect(os.environ["SV_PG_DB"])
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT run_id, status FROM runs")
            assert dict(cur.fetchall()) == {run_id: "SUCCESS" for run_id in cli_runs | {first}}
            cur.execute("SELECT run_id, count(*) FROM event_logs GROUP BY run_id")
            counts = dict(cur.fetchall())
    finally:
        conn.close()
    assert counts == {run_id: len(instance.all_logs(run_id)) for run_id in cli_runs | {first}}
    sqlite_files = [p for p in home.rglob("*") if p.suffix == ".db" or p.name.endswith((".db-wal", ".sqlite"))]
    assert sqlite_files == []
