"""Content-addressed, on-disk cache of tool results, shared by every run and process.

The key is (tool, tool version, rule-set hash, file suffix, file content): a new tool
version or an edited rule file is a new key, so a cached verdict is never stale. Writes
are atomic (temp file + rename), so concurrent writers at worst write the same value twice.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
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
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def _path(self, key: str) -> Path:
        return self.root / key[:2] / f"{key}.json"

    def lookup(self, tool: str, version: str, ruleset_hash: str, suffix: str, content: str | bytes) -> ToolResult | None:
        path = self._path(cache_key(tool, version, ruleset_hash, suffix, content))
        try:
            result = ToolResult.from_dict(json.loads(path.read_text(encoding="utf-8")), cached=True)
        except (OSError, ValueError, KeyError):
            result = None
        with self._lock:
            if result is None:
                self.misses += 1
            else:
                self.hits += 1
        return result

    def store(self, result: ToolResult, suffix: str, content: str | bytes) -> None:
        path = self._path(cache_key(result.tool, result.version, result.ruleset_hash, suffix, content))
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(result.to_dict(), handle)
        os.replace(tmp, path)

    def stats(self) -> dict[str, float | int]:
        with self._lock:
            total = self.hits + self.misses
            return {"hits": self.hits, "misses": self.misses, "hit_rate": (self.hits / total) if total else None}


def default_cache() -> ToolCache:
    """`$SV_TOOL_CACHE`, else ~/.cache/sv-dagster/tools (the pipeline sets the variable to
    its outputs/cache/tools)."""
    root = os.environ.get("SV_TOOL_CACHE") or Path.home() / ".cache" / "sv-dagster" / "tools"
    return ToolCache(root)
