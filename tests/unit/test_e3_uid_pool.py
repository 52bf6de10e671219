"""E3's sandbox uids are unique across processes: two Dagster steps (or test workers) running
sandboxed tests at once must never share a uid, since a run ends by killing every process of
its uid."""

from __future__ import annotations

import subprocess
import sys

from sv_env_code_vulnerability.sandbox import UID_BASE, _UidPool

OTHER_PROCESS = """
import sys
from pathlib import Path
from sv_env_code_vulnerability.sandbox import _UidPool
print(_UidPool(Path(sys.argv[1])).acquire())
"""


def _in_another_process(lock_dir) -> int:
    done = subprocess.run(
        [sys.executable, "-c", OTHER_PROCESS, str(lock_dir)], capture_output=True, text=True, check=True
    )
    return int(done.stdout.strip())


def test_a_uid_held_here_is_not_handed_out_in_another_process(tmp_path):
    pool = _UidPool(tmp_path)
    first, second = pool.acquire(), pool.acquire()
    assert (first, second) == (UID_BASE, UID_BASE + 1)
    assert _in_another_process(tmp_path) == UID_BASE + 2
    pool.release(first)
    # The other process has exited, so its uid is free again, and so is the one released here.
    assert _in_another_process(tmp_path) == UID_BASE
    assert pool.acquire() == UID_BASE
