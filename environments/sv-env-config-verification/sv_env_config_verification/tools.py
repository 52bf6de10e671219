"""E2's security tools behind one interface: in-process Rego plus the shared CLI scanners.

`ToolSuite` owns the in-process Rego evaluators (`opa`, the project's policies, and
`kubelinter_rego`, KubeLinter's default checks written as Rego) and one
`sv_shared.tools.Scanner` per CLI tool (Semgrep with the project's own local rules,
Checkov's built-in checks, KubeLinter when its binary is installed). Every file is parsed
with E2's bounded parsers first, so a YAML bomb, a huge file, binary garbage, broken HCL or
a Helm template is reported as an error by every tool and never reaches a CLI tool. A tool
that is not installed is labelled unavailable, never replaced: `kubelinter_rego` is a tool
of its own, with its own ids, not a stand-in reported as `kubelinter`.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import hashlib
import json
import os
from collections.abc import Iterable, Sequence
from importlib import resources
from pathlib import Path
from typing import Any

from sv_env_config_verification.inputs import InputError, file_kind, load_terraform
from sv_env_config_verification.opa import KUBELINTER_REGO, KubeLinterRegoEvaluator, OpaEvaluator, load_manifests
from sv_shared.tools import Finding, Scanner, ToolCache, ToolResult, default_cache

TOOL_NAMES: tuple[str, ...] = ("opa", "semgrep", "checkov", "kubelinter", KUBELINTER_REGO)
DEFAULT_TOOLS: tuple[str, ...] = ("opa", "semgrep", "checkov", "kubelinter", KUBELINTER_REGO)
"""Tools used when none are named: all of them. `kubelinter` runs only where its binary is
installed; `kubelinter_rego` needs none, so KubeLinter's default checks always run. Name a
narrower set in the task config's `tools` or in $SV_E2_TOOLS (e.g.
"opa,semgrep,checkov,kubelinter" leaves out `kubelinter_rego`)."""
_IN_PROCESS = ("opa", KUBELINTER_REGO)
_KINDS = {
    "opa": {"kubernetes", "terraform"},
    "semgrep": {"kubernetes", "terraform"},
    "checkov": {"kubernetes", "terraform"},
    "kubelinter": {"kubernetes"},
    KUBELINTER_REGO: {"kubernetes"},
}
_PRECHECKS_KEPT = 256
ENV_TOOLS = "SV_E2_TOOLS"
"""Comma-separated tools to use (e.g. "opa" for a fast offline run); unset = all available."""
SCANNED_TASK_FILE = "task file"
SCANNED_GIVEN_CONTENT = "given content"
"""What a tool result shown to the model scanned (`findings_json`): only a scan of the task's
file as given can ground an answer."""


def semgrep_rules_dir() -> Path:
    return Path(str(resources.files("sv_env_config_verification") / "rules" / "semgrep"))


def checkov_checks_path() -> Path:
    return Path(str(resources.files("sv_env_config_verification") / "rules" / "checkov" / "checks.txt"))


@functools.lru_cache(maxsize=1)
def checkov_checks() -> tuple[frozenset[str], str]:
    """(check ids E2 keeps from Checkov's built-ins, hash of the list file)."""
    raw = checkov_checks_path().read_bytes()
    ids = frozenset(
        line.split()[0] for line in raw.decode("utf-8").splitlines() if line.strip() and not line.startswith("#")
    )
    return ids, hashlib.sha256(raw).hexdigest()[:16]


def _select(tool: str, result: ToolResult) -> ToolResult:
    """Checkov's result narrowed to E2's check list (rules/checkov/checks.txt); the ruleset
    hash then names that list. Other tools' results pass unchanged."""
    if tool != "checkov":
        return result
    keep, digest = checkov_checks()
    findings = tuple(f for f in result.findings if f.rule in keep)
    return dataclasses.replace(result, findings=findings, ruleset_hash=f"{result.ruleset_hash}+e2-{digest}")


def precheck(filename: str, content: str | bytes) -> str | None:
    """Why the file cannot be scanned (size, binary, YAML bomb, syntax, Helm template), or None."""
    try:
        if file_kind(filename) == "kubernetes":
            load_manifests(content)
        else:
            load_terraform(content)
    except InputError as exc:
        return f"{filename}: {exc}"
    return None


class ToolSuite:
    def __init__(self, cache: ToolCache | None = None, tools: Iterable[str] | None = None) -> None:
        wanted = tuple(tools) if tools is not None else DEFAULT_TOOLS
        unknown = sorted(set(wanted) - set(TOOL_NAMES))
        if unknown:
            raise ValueError(f"unknown tool(s) {unknown}; known: {list(TOOL_NAMES)}")
        self.enabled = tuple(name for name in TOOL_NAMES if name in wanted)
        self.cache = cache
        self._prechecked: dict[tuple[str, str], str | None] = {}
        self.opa = OpaEvaluator(cache)
        self.rego: dict[str, OpaEvaluator] = {"opa": self.opa}
        if KUBELINTER_REGO in self.enabled:
            self.rego[KUBELINTER_REGO] = KubeLinterRegoEvaluator(cache)
        self.scanners: dict[str, Scanner] = {}
        if "semgrep" in self.enabled:
            self.scanners["semgrep"] = Scanner("semgrep", rules=semgrep_rules_dir(), cache=cache)
        if "checkov" in self.enabled:
            self.scanners["checkov"] = Scanner("checkov", cache=cache)
        if "kubelinter" in self.enabled:
            self.scanners["kubelinter"] = Scanner("kubelinter", cache=cache)

    def is_available(self, tool: str) -> bool:
        if tool in _IN_PROCESS:
            return tool in self.enabled
        scanner = self.scanners.get(tool)
        return scanner is not None and scanner.available

    @property
    def available(self) -> tuple[str, ...]:
        return tuple(name for name in self.enabled if self.is_available(name))

    def applicable(self, filename: str) -> tuple[str, ...]:
        """Available tools that scan this kind of file (KubeLinter: Kubernetes only)."""
        kind = file_kind(filename)
        return tuple(name for name in self.available if kind in _KINDS[name])

    def versions(self) -> dict[str, dict[str, Any]]:
        """Every default tool, and any other one that is enabled: available, version,
        ruleset_hash (provenance); a tool left out of this suite is reported "disabled"."""
        out: dict[str, dict[str, Any]] = {}
        for name in TOOL_NAMES:
            if name not in DEFAULT_TOOLS and name not in self.enabled:
                continue
            if name in self.rego:
                info = self.rego[name].info()
            elif name in self.scanners:
                info = self.scanners[name].info()
            else:
                info = {"available": False, "version": "disabled", "ruleset_hash": None, "path": None}
            info = {k: v for k, v in info.items() if k != "path"}
            if name == "checkov":
                info["ruleset_hash"] = f"{info['ruleset_hash']}+e2-{checkov_checks()[1]}"
            info["available"] = bool(info["available"]) and name in self.enabled
            out[name] = info
        return out

    def _error(self, tool: str, error: str) -> ToolResult:
        info = self.versions().get(tool, {"version": "disabled", "ruleset_hash": None})
        return ToolResult(tool, str(info["version"]), str(info["ruleset_hash"]), (), error)

    async def run(self, tool: str, filename: str, content: str) -> ToolResult:
        """One tool on one file (concurrent callers of a CLI tool share its process)."""
        if not self.is_available(tool):
            return self._error(tool, f"{tool} unavailable")
        if tool in _IN_PROCESS:  # records a wrong file kind as its own error
            return await asyncio.to_thread(self.rego[tool].evaluate, filename, content)
        if file_kind(filename) not in _KINDS[tool]:
            return self._error(tool, f"{tool} does not scan {file_kind(filename)} files")
        problem = await self._precheck(filename, content)
        if problem is not None:
            return self._error(tool, problem)
        return _select(tool, await self.scanners[tool].scan(filename, content))

    async def scan_for_model(self, tool: str, filename: str, task_content: str, given: str | None = None) -> str:
        """A tool call of the model's: `tool` on the task's file, or on the `given` content
        (a candidate patched version), as `findings_json` saying which it scanned."""
        if given is None:
            return findings_json(await self.run(tool, filename, task_content), SCANNED_TASK_FILE)
        return findings_json(await self.run(tool, filename, str(given)), SCANNED_GIVEN_CONTENT)

    async def _precheck(self, filename: str, content: str | bytes) -> str | None:
        """`precheck`, remembered per file text: every reply to a task has its original
        file scanned again (from the tool cache), and parsing it again each time cost more
        than the rest of scoring the reply."""
        key = (filename, content) if isinstance(content, str) else None
        if key is not None and key in self._prechecked:
            return self._prechecked[key]
        problem = await asyncio.to_thread(precheck, filename, content)
        if key is not None:
            if len(self._prechecked) >= _PRECHECKS_KEPT:
                self._prechecked.clear()
            self._prechecked[key] = problem
        return problem

    async def run_all(self, filename: str, content: str, tools: Sequence[str] | None = None) -> dict[str, ToolResult]:
        names = tuple(tools) if tools is not None else self.applicable(filename)
        results = await asyncio.gather(*(self.run(name, filename, content) for name in names))
        return dict(zip(names, results))

    def scan_many(self, files: dict[str, str], tools: Sequence[str] | None = None) -> dict[str, dict[str, ToolResult]]:
        """{filename: {tool: result}} for many files: one process per CLI tool for all of
        them (what baselines and dataset checks use)."""
        out: dict[str, dict[str, ToolResult]] = {name: {} for name in files}
        scannable: dict[str, str] = {}
        for name, content in files.items():
            problem = precheck(name, content)
            if problem is None:
                scannable[name] = content
        for tool in tools if tools is not None else self.available:
            for name, content in files.items():
                if file_kind(name) not in _KINDS[tool]:
                    continue
                if tool in self.rego:
                    out[name][tool] = self.rego[tool].evaluate(name, content)
                elif tool in _IN_PROCESS:
                    out[name][tool] = self._error(tool, f"{tool} unavailable")
                elif name not in scannable:
                    out[name][tool] = self._error(tool, precheck(name, content) or "not scannable")
            if tool not in _IN_PROCESS and self.is_available(tool):
                batch = {n: c for n, c in scannable.items() if file_kind(n) in _KINDS[tool]}
                for name, result in self.scanners[tool].scan_many(batch).items():
                    out[name][tool] = _select(tool, result)
        return out


def configured_tools() -> tuple[str, ...] | None:
    raw = os.environ.get(ENV_TOOLS, "").strip()
    return tuple(t.strip() for t in raw.split(",") if t.strip()) if raw else None


@functools.lru_cache(maxsize=8)
def _suite(tools: tuple[str, ...] | None) -> ToolSuite:
    return ToolSuite(cache=default_cache(), tools=tools)


def default_suite(tools: Sequence[str] | None = None) -> ToolSuite:
    """The process-wide suite (shared cache, shared scanners) for `tools` (default: $SV_E2_TOOLS,
    else `DEFAULT_TOOLS`)."""
    chosen = tuple(tools) if tools is not None else configured_tools()
    return _suite(chosen)


def tool_versions(tools: Sequence[str] | None = None) -> dict[str, dict[str, Any]]:
    """Provenance: for each tool, whether it is available, its version and rule-set hash."""
    return default_suite(tools).versions()


def findings_json(result: ToolResult, scanned: str, limit: int = 50) -> str:
    """A compact JSON view of one tool result, as the model sees it. `scanned` says what the
    tool read: the task's file as given (`SCANNED_TASK_FILE`) or content the model passed in
    (`SCANNED_GIVEN_CONTENT`, e.g. a candidate patch): only the first can ground an answer."""
    findings = [
        {"id": f.id, "severity": f.severity, "line": f.line, "message": f.message[:200]}
        for f in result.findings[:limit]
    ]
    body: dict[str, Any] = {"tool": result.tool, "version": result.version, "scanned": scanned, "findings": findings}
    if len(result.findings) > limit:
        body["truncated"] = len(result.findings) - limit
    if result.error:
        body["error"] = result.error[:300]
    return json.dumps(body, separators=(",", ":"))


def oracle_index(results: dict[str, ToolResult]) -> dict[str, str]:
    """Union of findings over tools: violation id -> highest severity reported for it."""
    rank = {"low": 0, "medium": 1, "high": 2}
    out: dict[str, str] = {}
    for result in results.values():
        for finding in result.findings:
            current = out.get(finding.id)
            if current is None or rank.get(finding.severity, 1) > rank.get(current, 1):
                out[finding.id] = finding.severity
    return out


__all__ = [
    "DEFAULT_TOOLS",
    "ENV_TOOLS",
    "SCANNED_GIVEN_CONTENT",
    "SCANNED_TASK_FILE",
    "TOOL_NAMES",
    "Finding",
    "ToolSuite",
    "default_suite",
    "findings_json",
    "oracle_index",
    "precheck",
    "tool_versions",
]


def tool_cache_stats() -> dict[str, Any] | None:
    """Hits and misses of the shared tool-result cache in this process so far."""
    cache = default_suite().cache
    return cache.stats() if cache is not None else None
