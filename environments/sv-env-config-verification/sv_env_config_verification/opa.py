"""The project's own Rego policy library, evaluated in-process with `regopy`.

OPA is E2's always-available tool: no subprocess and no binary, a few milliseconds per file.
Each Kubernetes YAML document and each Terraform file (normalised by `inputs`) is one Rego
input; every rule registers itself in `rules` (id -> severity, title) and reports through
`deny`, so the catalogue and the findings can never disagree.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import math
import threading
import time
from importlib import resources
from pathlib import Path
from typing import Any

from sv_env_config_verification.inputs import (
    INPUTS_REVISION,
    InputError,
    file_kind,
    load_terraform,
    load_yaml_documents,
    terraform_block_lines,
)
from sv_shared.tools import Finding, ToolCache, ToolResult, normalize_severity

TOOL = "opa"
PACKAGES = {"kubernetes": "svcv.kubernetes", "terraform": "svcv.terraform"}


def policies_dir() -> Path:
    return Path(str(resources.files("sv_env_config_verification") / "policies"))


def rego_version() -> str:
    import regopy

    return f"regopy-{getattr(regopy, '__version__', 'unknown')}"


def policies_hash(root: Path | None = None) -> str:
    """Hash of every .rego file (relative name + bytes) and of the input normaliser's
    revision: a policy edit, or a change in what the policies see, is a new cache key."""
    root = root or policies_dir()
    digest = hashlib.sha256(f"inputs-{INPUTS_REVISION}".encode())
    for path in sorted(root.rglob("*.rego")):
        digest.update(str(path.relative_to(root)).encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def _jsonable(value: Any, depth: int = 0) -> Any:
    """YAML values Rego can take: dates as ISO text, non-finite floats as text, string keys."""
    if depth > 200:
        raise InputError("document nested too deeply")
    if isinstance(value, dict):
        return {str(k): _jsonable(v, depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple, set)):
        return [_jsonable(v, depth + 1) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, (datetime.date, datetime.datetime)):
        return value.isoformat()
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return value


class OpaEvaluator:
    """Thread-safe: one interpreter per file kind, each used under a lock."""

    def __init__(self, cache: ToolCache | None = None, policies: Path | None = None) -> None:
        self.cache = cache
        self.policies = Path(policies) if policies else policies_dir()
        self.version = rego_version()
        self.ruleset_hash = policies_hash(self.policies)
        self._interpreters: dict[str, Any] = {}
        self._lock = threading.Lock()
        self.last_eval_s: float | None = None
        """Seconds the last uncached evaluation took (parse + all queries)."""

    available = True

    def info(self) -> dict[str, Any]:
        return {"available": True, "version": self.version, "ruleset_hash": self.ruleset_hash, "path": None}

    def _interpreter(self, kind: str) -> Any:
        interpreter = self._interpreters.get(kind)
        if interpreter is None:
            from regopy import Interpreter

            interpreter = Interpreter()
            for path in sorted((self.policies / kind).glob("*.rego")):
                interpreter.add_module(path.stem, path.read_text(encoding="utf-8"))
            self._interpreters[kind] = interpreter
        return interpreter

    def _query(self, kind: str, query: str, value: Any) -> Any:
        """Result of `query` for input `value` (None when undefined). Caller holds the lock."""
        interpreter = self._interpreter(kind)
        interpreter.set_input_term(json.dumps(_jsonable(value), allow_nan=False))
        output = interpreter.query(query)
        if not output.ok():
            raise RuntimeError(f"rego query {query} failed: {str(output)[:300]}")
        text = str(output)
        if text.strip() == "undefined":
            return None
        return json.loads(text)["expressions"][0]

    def catalogue(self) -> dict[str, dict[str, str]]:
        """Every rule: id -> {"severity", "title", "kind"}."""
        out: dict[str, dict[str, str]] = {}
        with self._lock:
            for kind, package in PACKAGES.items():
                rules = self._query(kind, f"data.{package}.rules", {}) or {}
                for rule_id, meta in rules.items():
                    out[rule_id] = {"severity": meta["severity"], "title": meta["title"], "kind": kind}
        return out

    def _result(self, findings: list[Finding] = (), error: str | None = None) -> ToolResult:  # type: ignore[assignment]
        ordered = sorted(set(findings), key=lambda f: (f.line or 0, f.rule, f.message))
        return ToolResult(TOOL, self.version, self.ruleset_hash, tuple(ordered), error)

    def evaluate(self, filename: str, content: str | bytes) -> ToolResult:
        """Findings for one file; a file that cannot be parsed gives a finding-free result
        with `error` set (recorded, never raised)."""
        suffix = Path(filename).suffix
        text_for_cache = content if isinstance(content, str) else None
        if self.cache is not None and text_for_cache is not None:
            hit = self.cache.lookup(TOOL, self.version, self.ruleset_hash, suffix, text_for_cache)
            if hit is not None:
                return hit
        start = time.perf_counter()
        try:
            result = self._result(self._evaluate(filename, content))
        except InputError as exc:
            result = self._result(error=f"{filename}: {exc}")
        except RuntimeError as exc:  # a Rego evaluation failure: not a verdict on the file
            self.last_eval_s = time.perf_counter() - start
            return ToolResult(TOOL, self.version, self.ruleset_hash, (), f"opa: {exc}", extra={"deterministic": False})
        self.last_eval_s = time.perf_counter() - start
        if self.cache is not None and text_for_cache is not None:
            self.cache.store(result, suffix, text_for_cache)
        return result

    def _evaluate(self, filename: str, content: str | bytes) -> list[Finding]:
        kind = file_kind(filename)
        package = PACKAGES[kind]
        findings: list[Finding] = []
        if kind == "kubernetes":
            documents = load_yaml_documents(content)
            with self._lock:
                raw = [(doc.line, self._query(kind, f"data.{package}.deny", doc.value) or []) for doc in documents]
            for line, items in raw:
                findings.extend(self._finding(item, line) for item in items)
        else:
            value = load_terraform(content)
            text = content if isinstance(content, str) else content.decode("utf-8")
            lines = terraform_block_lines(text)
            with self._lock:
                items = self._query(kind, f"data.{package}.deny", value) or []
            findings.extend(self._finding(item, lines.get(item.get("resource", ""))) for item in items)
        return findings

    @staticmethod
    def _finding(item: dict[str, Any], line: int | None) -> Finding:
        return Finding(
            tool=TOOL,
            rule=str(item["rule"]),
            severity=normalize_severity(item.get("severity")),
            line=line,
            message=str(item.get("msg", ""))[:300],
        )
