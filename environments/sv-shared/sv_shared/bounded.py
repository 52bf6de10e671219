"""Bounds on parsing untrusted text: model replies, dataset rows, user files, emails.

Every parser of untrusted input is bounded one of two ways:

- a cheap pre-check refuses what would be expensive before the parser sees it: a size cap
  (`check_size`) and a nesting-depth limit read in linear time (JSON:
  `sv_shared.parsing.json_nested_deeper_than`; YAML and HCL: their environment's loaders);
- where no pre-check can bound the cost (python-hcl2's lexer and the email package's header
  parser have super-linear paths inside regexes and recursive descent), `run_bounded` runs the
  parser in a worker process with a deadline and a memory cap: one hostile file then costs at
  most the deadline (of the worker's CPU time while other work starves it, within a wall-clock
  cap), on another core, and never holds the caller's interpreter or its GIL.

A refusal is an `InputRefused` (a ValueError) whose one-line message names what was refused
and the limit it passed; callers turn it into their own per-example error.
"""

from __future__ import annotations

import atexit
import importlib
import json
import os
import selectors
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from typing import Any

MAX_NESTING_DEPTH = 100
"""Deepest nesting of lists and maps a parsed document may have (YAML, HCL, JSON). Honest
configs, answers and dataset rows nest under 20 levels."""
DEFAULT_DEADLINE_S = 10.0
"""Seconds one call of `run_bounded` may take; honest inputs take milliseconds. Counted in
the worker's CPU time while the machine is busy (see STARVED_WALL_FACTOR)."""
STARVED_WALL_FACTOR = 6.0
"""A worker past its wall-clock deadline that has used less CPU than the deadline was kept
off the CPU by other work, not parsing: it may go on, up to this many deadlines of wall
time. A hostile input spends the deadline in CPU and is refused on time on an idle machine."""
DEFAULT_MEMORY_MB = 2048
"""Address-space cap of a worker process (the parser's own memory included)."""
_IMPORT_DEADLINE_S = 120.0
"""Seconds a fresh worker may take to import a parser's module (once per worker)."""


class InputRefused(ValueError):
    """Untrusted input refused before or while parsing it: too large, nested too deeply, or
    too slow / too big to parse. The message is one line naming what and the limit."""


class ParserFailed(ValueError):
    """The parser raised inside the worker process (a syntax error, most often)."""

    def __init__(self, kind: str, detail: str) -> None:
        super().__init__(f"{kind}: {detail}")
        self.kind = kind
        """Name of the exception type the parser raised."""
        self.detail = detail


def check_size(text: str | bytes, limit: int, what: str = "input") -> None:
    """InputRefused if `text` is longer than `limit` characters (bytes for bytes)."""
    if len(text) > limit:
        unit = "bytes" if isinstance(text, (bytes, bytearray)) else "characters"
        raise InputRefused(f"{what} too large: {len(text)} {unit} > limit {limit}")


def find_block(lines: Sequence[str], block: Sequence[str], hint: int, lo: int = 0) -> int | None:
    """The start of the occurrence of `block` in `lines` (at or after `lo`) nearest `hint`,
    the lower one on a tie; None if there is none.

    Where a diff's hunk sits in a file. Comparing the hunk at every line costs
    O(lines x hunk) per hunk, minutes for thousands of hunks on a long file; here two C-speed
    substring searches on the joined text find the nearest occurrence on either side of
    `hint` in time linear in the file. Lines must not contain a newline (they are lines)."""
    if not block:
        return min(max(hint, lo), len(lines))
    if any("\n" in line for line in block):
        return None  # no line of a file holds a newline
    # Every line preceded by "\n", so a match of "\n" + block + "\n" starts at a line start;
    # line k's "\n" is at character k + (length of the lines before it).
    text = "\n" + "\n".join(lines) + "\n" if lines else "\n"
    needle = "\n" + "\n".join(block) + "\n"
    lo = min(max(lo, 0), len(lines))
    hint = min(max(hint, lo), len(lines))
    at_lo = lo + sum(map(len, lines[:lo]))
    at_hint = at_lo + (hint - lo) + sum(map(len, lines[lo:hint]))
    after = text.find(needle, at_hint)
    # The last match starting before `hint`, but not before `lo`.
    before = text.rfind(needle, at_lo, at_hint + len(needle) - 1) if hint > lo else -1
    candidates = [text.count("\n", 0, at) for at in (before, after) if at >= 0]
    if not candidates:
        return None
    return min(candidates, key=lambda start: (abs(start - hint), start))


# --- parsing in a worker process with a deadline ------------------------------------------------

# A pool of our own rather than a library's: the standard library's pools have no per-task kill
# (killing a worker breaks the executor, or leaves its task unanswered), and pebble's workers
# share one task pipe, so a worker it kills at a deadline may already have taken the next
# caller's task, which then fails as if it were slow. Here each call has a worker, and its
# pipes, to itself.


class _Worker:
    """One worker process: requests and replies are JSON lines on its stdin/stdout."""

    def __init__(self, memory_mb: int) -> None:
        # The parent's import path, so the worker imports the very modules the parent does.
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
        self.proc = subprocess.Popen(
            [sys.executable, "-c", f"from sv_shared.bounded import _serve; _serve({int(memory_mb)})"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            close_fds=True,
            env=env,
        )
        self._buffer = b""
        self._imported: set[str] = set()

    def call(self, target: str, args: Sequence[Any], deadline_s: float, what: str) -> Any:
        module = target.partition(":")[0]
        if module not in self._imported:
            # Importing is start-up, not parsing: it runs before the deadline starts.
            try:
                self._request({"import": module, "deadline_s": _IMPORT_DEADLINE_S}, _IMPORT_DEADLINE_S, what)
            except (InputRefused, ParserFailed) as exc:
                raise RuntimeError(f"the parser worker could not import {module}: {exc}") from exc
            self._imported.add(module)
        return self._request({"target": target, "args": list(args), "deadline_s": deadline_s}, deadline_s, what)

    def _request(self, body: dict[str, Any], deadline_s: float, what: str) -> Any:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        request = json.dumps(body) + "\n"
        start = time.monotonic()
        try:
            self.proc.stdin.write(request.encode("ascii"))  # ensure_ascii: lone surrogates travel too
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            self._died(what)
        reply = self._read_line(start + deadline_s, deadline_s, what)
        message = json.loads(reply)
        if "error" in message:
            kind, detail = message["error"]
            if kind == "MemoryError":
                raise InputRefused(f"{what} needs more than {message.get('memory_mb')} MB to parse; refused")
            raise ParserFailed(kind, detail)
        return message["ok"]

    def _cpu_seconds(self) -> float | None:
        """The worker's user + system CPU time (Linux /proc), or None where it cannot be read."""
        try:
            with open(f"/proc/{self.proc.pid}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
            return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        except (OSError, ValueError, IndexError):
            return None

    def _read_line(self, deadline: float, deadline_s: float, what: str) -> bytes:
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        cpu_start = self._cpu_seconds()
        wall_cap = deadline + (STARVED_WALL_FACTOR - 1) * deadline_s
        with selectors.DefaultSelector() as selector:
            selector.register(fd, selectors.EVENT_READ)
            while b"\n" not in self._buffer:
                left = deadline - time.monotonic()
                if left <= 0 or not selector.select(left):
                    cpu_now = self._cpu_seconds()
                    used = cpu_now - cpu_start if cpu_now is not None and cpu_start is not None else None
                    if used is not None and used < deadline_s and time.monotonic() < wall_cap:
                        deadline = min(wall_cap, time.monotonic() + max(deadline_s - used, 0.1))
                        continue  # starved by other work, not parsing: the CPU deadline is not spent
                    self.kill()
                    raise InputRefused(f"{what} took longer than {deadline_s:g} s to parse; refused")
                chunk = os.read(fd, 1 << 20)
                if not chunk:
                    self._died(what)
                self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        return line

    def _died(self, what: str) -> None:
        code = self.kill()
        raise InputRefused(f"{what}: the parser's worker process died (exit code {code}); refused")

    def kill(self) -> int | None:
        if self.proc.poll() is None:
            self.proc.kill()
        try:
            return self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            return None

    def close(self) -> None:
        """Ask an idle worker to exit (end of its input), killing it if it does not."""
        try:
            if self.proc.stdin is not None:
                self.proc.stdin.close()
            self.proc.wait(timeout=2)
        except (OSError, subprocess.TimeoutExpired):
            self.kill()

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None


class WorkerPool:
    """Up to `size` worker processes, started on first use and kept between calls (a call
    costs a pipe round trip, not a Python start-up); a worker past its deadline is killed
    and replaced by the next call. Thread-safe; callers beyond `size` wait for a worker."""

    def __init__(self, size: int | None = None, memory_mb: int = DEFAULT_MEMORY_MB) -> None:
        self.size = size or max(2, min(4, os.cpu_count() or 1))
        self.memory_mb = memory_mb
        self._slots = threading.BoundedSemaphore(self.size)
        self._idle: list[_Worker] = []
        self._lock = threading.Lock()

    def call(self, target: str, *args: Any, deadline_s: float = DEFAULT_DEADLINE_S, what: str = "input") -> Any:
        with self._slots:
            with self._lock:
                worker = None
                while self._idle and worker is None:
                    candidate = self._idle.pop()
                    worker = candidate if candidate.alive else None
            if worker is None:
                worker = _Worker(self.memory_mb)
            healthy = False
            try:
                result = worker.call(target, args, deadline_s, what)
                healthy = True
            except ParserFailed:
                healthy = True
                raise
            finally:
                if healthy and worker.alive:
                    with self._lock:
                        self._idle.append(worker)
                else:  # killed at its deadline, died, or interrupted mid-call: never reused
                    worker.kill()
            return result

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
        for worker in idle:
            worker.close()


_POOL: WorkerPool | None = None
_POOL_PID: int | None = None
_POOL_LOCK = threading.Lock()


def _pool() -> WorkerPool:
    """The process-wide pool. A forked child gets a pool of its own: the parent's worker
    pipes are the parent's."""
    global _POOL, _POOL_PID
    with _POOL_LOCK:
        if _POOL is None or _POOL_PID != os.getpid():
            _POOL, _POOL_PID = WorkerPool(), os.getpid()
        return _POOL


@atexit.register
def _close_pool() -> None:
    if _POOL is not None and _POOL_PID == os.getpid():
        _POOL.close()


def run_bounded(target: str, *args: Any, deadline_s: float = DEFAULT_DEADLINE_S, what: str = "input") -> Any:
    """`module:function` called with `args` in a worker process, its result returned.

    Arguments and result travel as JSON (str, numbers, bools, None, lists, dicts with string
    keys). Raises InputRefused when the call passes `deadline_s` (the worker is killed), runs
    out of the worker's memory cap, or kills its worker; ParserFailed when the function
    raises (its exception type's name in `.kind`)."""
    return _pool().call(target, *args, deadline_s=deadline_s, what=what)


def _serve(memory_mb: int) -> None:
    """The worker's loop: one JSON request a line in, one JSON reply a line out."""
    try:
        import resource

        limit = memory_mb * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    except (ImportError, ValueError, OSError):  # no rlimits here: the deadline still holds
        pass
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides when a worker stops
    # Replies get a private copy of stdout; whatever an imported module prints goes to stderr.
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    for line in sys.stdin.buffer:
        request = json.loads(line)
        # Should the parent vanish mid-call, the worker still stops soon after its wall cap.
        signal.alarm(int(request["deadline_s"] * STARVED_WALL_FACTOR) + 5)
        try:
            if "import" in request:
                importlib.import_module(request["import"])
                result = None
            else:
                module, _, name = request["target"].partition(":")
                result = getattr(importlib.import_module(module), name)(*request["args"])
            reply = json.dumps({"ok": result})
        except MemoryError:
            reply = json.dumps({"error": ["MemoryError", ""], "memory_mb": memory_mb})
        except Exception as exc:
            reply = json.dumps({"error": [type(exc).__name__, " ".join(str(exc).split())[:500]]})
        signal.alarm(0)
        out.write(reply.encode("ascii") + b"\n")
        out.flush()
