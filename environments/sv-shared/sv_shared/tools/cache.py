"""Content-addressed, on-disk cache of tool results, shared by every run and process.

The key is (tool, tool version, rule-set hash, file suffix, file content): a new tool
version or an edited rule file is a new key, so a cached verdict is never stale. One
SQLite file in WAL mode (standard library): many processes read and write it at once, and
a lookup costs tens of microseconds where a file per result cost milliseconds to open.
Concurrent writers of one key write the same value (INSERT OR REPLACE).
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import threading
from pathlib import Path

from sv_shared.tools.findings import ToolResult


def cache_key(tool: str, version: str, ruleset_hash: str, suffix: str, content: str | bytes) -> str:
    raw = content.encode("utf-8", "surrogateescape") if isinstance(content, str) else content
    parts = [tool, version, ruleset_hash, suffix, hashlib.sha256(raw).hexdigest()]
    return hashlib.sha256(json.dumps(parts).encode()).hexdigest()


class ToolCache:
    def __init__(self, root: Path | str) -> None:
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self.path = self.root / "tool-results.sqlite3"
        self._lock = threading.Lock()
        self._db = sqlite3.connect(self.path, timeout=60, isolation_level=None, check_same_thread=False)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")  # a lost last write is only a future miss
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS results (key TEXT PRIMARY KEY, tool TEXT NOT NULL, value TEXT NOT NULL)"
        )
        self.hits = 0
        self.misses = 0

    def lookup(
        self, tool: str, version: str, ruleset_hash: str, suffix: str, content: str | bytes
    ) -> ToolResult | None:
        key = cache_key(tool, version, ruleset_hash, suffix, content)
        with self._lock:
            row = self._db.execute("SELECT value FROM results WHERE key = ?", (key,)).fetchone()
        try:
            result = ToolResult.from_dict(json.loads(row[0]), cached=True) if row else None
        except (ValueError, KeyError):
            result = None
        with self._lock:
            if result is None:
                self.misses += 1
            else:
                self.hits += 1
        return result

    def store(self, result: ToolResult, suffix: str, content: str | bytes) -> None:
        key = cache_key(result.tool, result.version, result.ruleset_hash, suffix, content)
        with self._lock:
            self._db.execute(
                "INSERT OR REPLACE INTO results (key, tool, value) VALUES (?, ?, ?)",
                (key, result.tool, json.dumps(result.to_dict())),
            )

    def stats(self) -> dict[str, float | int | None]:
        with self._lock:
            total = self.hits + self.misses
            return {"hits": self.hits, "misses": self.misses, "hit_rate": (self.hits / total) if total else None}


def default_cache() -> ToolCache:
    """`$SV_TOOL_CACHE`, else ~/.cache/sv-dagster/tools (the pipeline sets the variable to
    its outputs/cache/tools)."""
    root = os.environ.get("SV_TOOL_CACHE") or Path.home() / ".cache" / "sv-dagster" / "tools"
    return ToolCache(root)
