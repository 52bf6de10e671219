"""A response cache: the same request to the same model is answered from disk.

Keyed by (backend, base URL, model id, messages, sampling parameters including the seed,
and for a model served here the checkpoint it serves), so re-running an eval after a
verifier change costs no model calls. SQLite (standard library) in WAL mode: several
processes may share one cache file.

Only replies that were scored are stored: the runner settles each example's replies once
it knows its outcome, so a reply that failed or could not be scored is asked again next
time rather than replayed.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from sv_dagster.core.artifacts.provenance import stable_json
from sv_dagster.core.models.completion import Backend, Completion
from sv_dagster.core.models.registry import ModelSpec

SCHEMA = """
CREATE TABLE IF NOT EXISTS responses (
    key TEXT PRIMARY KEY,
    model TEXT NOT NULL,
    completion TEXT NOT NULL,
    created_at REAL NOT NULL
)
"""


def request_key(
    spec: ModelSpec,
    messages: list[dict[str, Any]],
    tools: list[dict[str, Any]] | None = None,
    served: dict[str, Any] | None = None,
) -> str:
    """`served`: the checkpoint a model served here answers from (its registry name and model
    id do not say which: every trained checkpoint of one config shares them)."""
    sampling = {k: v for k, v in spec.sampling.as_dict().items() if k != "timeout_s"}
    identity = {
        "backend": spec.backend,
        "base_url": spec.base_url,
        "model": spec.model,
        "messages": messages,
        "sampling": sampling,
    }
    if tools:  # offered tools change the answer; keys without tools stay as they were
        identity["tools"] = tools
    if served is not None:
        identity["served"] = served
    return hashlib.sha256(stable_json(identity).encode()).hexdigest()


class ResponseCache:
    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._db = sqlite3.connect(path, timeout=30, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute(SCHEMA)
        self.hits = 0
        self.misses = 0

    def get(self, key: str) -> Completion | None:
        row = self._db.execute("SELECT completion FROM responses WHERE key = ?", (key,)).fetchone()
        data = json.loads(row[0]) if row is not None else None
        if data is not None and not data.get("finish_reason") and not data.get("text") and not data.get("tool_calls"):
            # An empty reply with no finish reason is what a fault (a 200 with no choices)
            # left in caches written before faults were told apart: ask again.
            self._db.execute("DELETE FROM responses WHERE key = ?", (key,))
            data = None
        if data is None:
            self.misses += 1
            return None
        self.hits += 1
        data["tool_calls"] = tuple(data.get("tool_calls") or ())
        return Completion(**{**data, "latency_s": 0.0, "attempts": 0, "cached": True})

    def put(self, key: str, model: str, completion: Completion) -> None:
        data: dict[str, Any] = {
            "text": completion.text,
            "usage": completion.usage,
            "latency_s": completion.latency_s,
            "finish_reason": completion.finish_reason,
        }
        if completion.tool_calls:
            data["tool_calls"] = list(completion.tool_calls)
        self._db.execute(
            "INSERT OR REPLACE INTO responses (key, model, completion, created_at) VALUES (?, ?, ?, ?)",
            (key, model, json.dumps(data), time.time()),
        )

    def close(self) -> None:
        self._db.close()


class CachedBackend:
    """Wraps a backend: answers repeated requests from the cache. New replies wait in memory
    until the runner settles their example: stored if it was scored, dropped otherwise."""

    def __init__(self, inner: Backend, cache: ResponseCache) -> None:
        self.inner = inner
        self.cache = cache
        self.spec = inner.spec
        self.pending: dict[str, Completion] = {}

    async def preflight(self) -> None:
        await self.inner.preflight()

    async def complete(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None) -> Completion:
        key = request_key(self.spec, messages, tools, getattr(self.inner, "cache_identity", None))
        cached = self.cache.get(key)
        if cached is not None:
            return replace(cached, cache_key=key)
        completion = replace(await self.inner.complete(messages, tools), cache_key=key)
        self.pending[key] = completion
        return completion

    def settle(self, completions: list[Completion], scored: bool) -> None:
        """Store the new replies of one example when it was scored; forget them otherwise."""
        for completion in completions:
            key = completion.cache_key
            fresh = self.pending.pop(key, None) if key else None
            if key and fresh is not None and scored:
                self.cache.put(key, self.spec.name, replace(fresh, cached=False))

    async def aclose(self) -> None:
        await self.inner.aclose()
