"""Run the CLI security tools (Semgrep, Checkov, Bandit, KubeLinter) over many files at once.

Each tool pays seconds of start-up per process, so a `Scanner` scans a whole batch of
files in one process, caches every per-file verdict by content (`ToolCache`), and lets
concurrent async callers share one process (`await scanner.scan(...)` waits a few ms for
company). Semgrep and Checkov pin dependencies that clash with ours, so they live in an
isolated tool environment: binaries are looked up in `$SV_TOOLS_BIN` (the project sets it
to its `.venv-tools/bin`) and then on PATH. A missing tool is reported as unavailable, never
replaced by anything else.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
import threading
from collections.abc import Callable, Coroutine, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sv_shared.tools.cache import ToolCache
from sv_shared.tools.findings import Finding, ToolResult, normalize_severity

MAX_FILE_BYTES = 2_000_000
"""Files above this are not handed to a tool (bounded time and memory); their result is an error."""


class ToolUnavailable(RuntimeError):
    """The tool's binary is not installed (names where it was looked for)."""


def find_tool(binary: str) -> str | None:
    """`binary` in `$SV_TOOLS_BIN` (colon-separated folders), else on PATH."""
    for folder in filter(None, os.environ.get("SV_TOOLS_BIN", "").split(os.pathsep)):
        candidate = Path(folder) / binary
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    return shutil.which(binary)


@functools.cache
def _tool_version(path: str, args: tuple[str, ...]) -> str:
    """The tool's version, asked once per installed binary: Checkov takes seconds to print
    it, so answers are kept on disk keyed by the binary's path, size and mtime (a reinstall
    rewrites the script, so a new version is asked again)."""
    stat = os.stat(path)
    key = f"{path}|{stat.st_size}|{stat.st_mtime_ns}|{' '.join(args)}"
    memo_path = (
        Path(os.environ.get("SV_TOOL_CACHE") or Path.home() / ".cache" / "sv-dagster" / "tools") / "versions.json"
    )
    try:
        memo = json.loads(memo_path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        memo = {}
    if key in memo:
        version: str = memo[key]
        return version
    try:
        out = subprocess.run([path, *args], capture_output=True, text=True, timeout=60, env=_tool_env())
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"unknown ({type(exc).__name__})"  # not remembered: ask again next time
    text = (out.stdout or out.stderr).strip()
    match = re.search(r"\d+\.\d+(?:\.\d+)?", text.splitlines()[0] if text else "")
    version = match.group(0) if match else (text[:40] or "unknown")
    memo[key] = version
    try:
        memo_path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=memo_path.parent, suffix=".tmp")
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(memo, handle)
        os.replace(tmp, memo_path)
    except OSError:
        pass  # a read-only cache folder only costs the next process the same question
    return version


def _tool_env() -> dict[str, str]:
    """Tools get no secrets and never phone home."""
    keep = ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "SSL_CERT_FILE")
    env = {k: os.environ[k] for k in keep if k in os.environ}
    env.update(
        SEMGREP_SEND_METRICS="off",
        SEMGREP_ENABLE_VERSION_CHECK="0",
        BC_SKIP_MAPPING="TRUE",
        CHECKOV_RUN_SCA_PACKAGE_SCAN_V2="false",
        PYTHONWARNINGS="ignore",
    )
    return env


def ruleset_hash(rules: Path | None) -> str:
    """Hash of every file under `rules` (names and bytes), or "builtin" for a tool's own rules."""
    if rules is None:
        return "builtin"
    paths = sorted(p for p in ([rules] if rules.is_file() else rules.rglob("*")) if p.is_file())
    digest = hashlib.sha256()
    for path in paths:
        digest.update(str(path.relative_to(rules if rules.is_dir() else rules.parent)).encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


# --- per-tool command lines and output parsers -------------------------------------------

# Checkov run offline reports no severities (they come from its SaaS platform), so ours
# are set here for the checks the bundled corpora exercise; anything else is "medium".
CHECKOV_SEVERITY = {
    "CKV_K8S_16": "high",  # privileged container
    "CKV_K8S_17": "high",
    "CKV_K8S_18": "high",
    "CKV_K8S_19": "high",  # hostPID/IPC/Network
    "CKV_K8S_20": "high",  # allowPrivilegeEscalation
    "CKV_K8S_23": "medium",
    "CKV_K8S_40": "medium",  # root user
    "CKV_K8S_14": "low",
    "CKV_K8S_43": "low",  # image tag / digest
    "CKV_K8S_10": "low",
    "CKV_K8S_11": "low",
    "CKV_K8S_12": "low",
    "CKV_K8S_13": "low",  # requests/limits
    "CKV_K8S_49": "high",
    "CKV_K8S_155": "high",
    "CKV_K8S_157": "high",  # wildcard RBAC
    "CKV_AWS_20": "high",
    "CKV_AWS_57": "high",  # public S3 ACL
    "CKV_AWS_24": "high",
    "CKV_AWS_25": "high",
    "CKV_AWS_260": "high",  # SG open to the world
    "CKV_AWS_3": "medium",
    "CKV_AWS_16": "medium",
    "CKV_AWS_19": "medium",
    "CKV_AWS_145": "medium",  # encryption
    "CKV_AWS_1": "high",
    "CKV_AWS_62": "high",
    "CKV_AWS_63": "high",  # IAM wildcards
}


_Parsed = tuple[dict[str, list[Finding]], dict[str, str]]
"""A tool's findings by our file name, and its per-file errors."""


@dataclass(frozen=True)
class ToolDef:
    name: str
    binary: str
    version_args: tuple[str, ...]
    command: Callable[[str, Path | None, list[str]], list[str]]
    parse: Callable[[dict[str, Any], dict[str, str]], _Parsed]
    """(tool JSON output, {path in output -> our file name}) -> (findings, per-file errors)."""
    ok_codes: tuple[int, ...] = (0, 1)


def _by_name(path: str, names: dict[str, str]) -> str | None:
    return names.get(path) or names.get(os.path.basename(path))


def _parse_semgrep(out: dict[str, Any], names: dict[str, str]) -> _Parsed:
    findings: dict[str, list[Finding]] = {}
    for item in out.get("results", []):
        name = _by_name(item.get("path", ""), names)
        if name is None:
            continue
        extra = item.get("extra", {})
        severity = (extra.get("metadata") or {}).get("severity") or extra.get("severity")
        findings.setdefault(name, []).append(
            Finding(
                tool="semgrep",
                rule=item["check_id"].rsplit(".", 1)[-1],
                severity=normalize_severity(severity),
                line=item.get("start", {}).get("line"),
                message=str(extra.get("message", ""))[:300],
            )
        )
    errors: dict[str, str] = {}
    for err in out.get("errors", []):
        name = _by_name(str(err.get("path", "")), names)
        if name is not None:
            errors[name] = f"semgrep: {err.get('type', 'error')}: {str(err.get('message', ''))[:200]}"
    return findings, errors


def _parse_checkov(out: Any, names: dict[str, str]) -> _Parsed:
    findings: dict[str, list[Finding]] = {}
    reports = out if isinstance(out, list) else [out]
    for report in reports:
        for check in (report.get("results") or {}).get("failed_checks", []):
            name = _by_name(str(check.get("file_abs_path") or check.get("file_path", "")), names)
            if name is None:
                continue
            rule = check["check_id"]
            line_range = check.get("file_line_range") or [None]
            findings.setdefault(name, []).append(
                Finding(
                    tool="checkov",
                    rule=rule,
                    severity=normalize_severity(check.get("severity"), CHECKOV_SEVERITY.get(rule, "medium")),
                    line=line_range[0],
                    message=str(check.get("check_name", ""))[:300],
                )
            )
    return findings, {}


def _parse_bandit(out: dict[str, Any], names: dict[str, str]) -> _Parsed:
    findings: dict[str, list[Finding]] = {}
    for item in out.get("results", []):
        name = _by_name(item.get("filename", ""), names)
        if name is not None:
            findings.setdefault(name, []).append(
                Finding(
                    tool="bandit",
                    rule=item["test_id"],
                    severity=normalize_severity(item.get("issue_severity")),
                    line=item.get("line_number"),
                    message=str(item.get("issue_text", ""))[:300],
                )
            )
    errors: dict[str, str] = {}
    for err in out.get("errors", []):
        name = _by_name(err.get("filename", ""), names)
        if name is not None:
            errors[name] = f"bandit: {str(err.get('reason', 'error'))[:200]}"
    return findings, errors


def _parse_kubelinter(out: dict[str, Any], names: dict[str, str]) -> _Parsed:
    # kube-linter's JSON: {"Reports": [{"Check", "Object": {"Metadata": {"FilePath"}}, "Diagnostic": {"Message"}}]}
    findings: dict[str, list[Finding]] = {}
    for report in out.get("Reports") or []:
        path = ((report.get("Object") or {}).get("Metadata") or {}).get("FilePath", "")
        name = _by_name(path, names)
        if name is not None:
            findings.setdefault(name, []).append(
                Finding(
                    tool="kubelinter",
                    rule=report.get("Check", "unknown"),
                    severity="medium",
                    message=str((report.get("Diagnostic") or {}).get("Message", ""))[:300],
                )
            )
    return findings, {}


TOOLS: dict[str, ToolDef] = {
    "semgrep": ToolDef(
        "semgrep",
        "semgrep",
        ("--version",),
        lambda exe, rules, files: [
            exe,
            "scan",
            "--config",
            str(rules),
            "--json",
            "--metrics=off",
            "--disable-version-check",
            "--no-git-ignore",
            "--quiet",
            "--jobs",
            "1",
            *files,
        ],
        _parse_semgrep,
    ),
    "checkov": ToolDef(
        "checkov",
        "checkov",
        ("--version",),
        lambda exe, rules, files: [
            exe,
            *[a for f in files for a in ("-f", f)],
            "-o",
            "json",
            "--quiet",
            "--compact",
            "--skip-download",
            "--framework",
            "kubernetes",
            "terraform",
        ],
        _parse_checkov,
    ),
    "bandit": ToolDef(
        "bandit",
        "bandit",
        ("--version",),
        lambda exe, rules, files: [exe, "-f", "json", "-q", *files],
        _parse_bandit,
    ),
    "kubelinter": ToolDef(
        "kubelinter",
        "kube-linter",
        ("version",),
        lambda exe, rules, files: [exe, "lint", "--format", "json", *files],
        _parse_kubelinter,
    ),
}


def _json_out(stdout: str) -> Any:
    """The tool's JSON document (some tools print a banner line before it)."""
    start = min((i for i in (stdout.find("{"), stdout.find("[")) if i >= 0), default=-1)
    if start < 0:
        raise ValueError("no JSON in tool output")
    return json.loads(stdout[start:])


class Scanner:
    """One tool with one rule set: batched, cached, and shareable by async callers."""

    def __init__(
        self,
        tool: str,
        rules: Path | None = None,
        cache: ToolCache | None = None,
        *,
        timeout_s: float = 120.0,
        batch_window_s: float = 0.05,
        max_batch: int = 64,
        max_processes: int = 2,
    ) -> None:
        if tool not in TOOLS:
            raise ValueError(f"unknown tool {tool!r}; known: {sorted(TOOLS)}")
        if tool == "semgrep" and rules is None:
            raise ValueError("semgrep needs local rule files (the online registry is never used)")
        self.definition = TOOLS[tool]
        self.tool = tool
        self.rules = Path(rules) if rules is not None else None
        self.cache = cache
        self.timeout_s = timeout_s
        self.batch_window_s = batch_window_s
        self.max_batch = max_batch
        self.executable = find_tool(self.definition.binary)
        self.ruleset_hash = ruleset_hash(self.rules)
        self.processes_run = 0
        self._lock = threading.Lock()
        self._pending: dict[asyncio.AbstractEventLoop, list[tuple[str, str, asyncio.Future[ToolResult]]]] = {}
        self._windows: set[asyncio.AbstractEventLoop] = set()
        self._tasks: set[asyncio.Task[None]] = set()
        # Tool processes at once, whatever the number of waiting batches (two cores here).
        self._processes = threading.BoundedSemaphore(max_processes)

    @property
    def available(self) -> bool:
        return self.executable is not None

    @property
    def version(self) -> str:
        if self.executable is None:
            return "unavailable"
        return _tool_version(self.executable, self.definition.version_args)

    def info(self) -> dict[str, Any]:
        """What provenance records about this tool."""
        return {
            "available": self.available,
            "version": self.version,
            "ruleset_hash": self.ruleset_hash,
            "path": self.executable,
        }

    def _result(self, findings: Iterable[Finding] = (), error: str | None = None) -> ToolResult:
        return ToolResult(self.tool, self.version, self.ruleset_hash, tuple(findings), error)

    def scan_many(self, files: Mapping[str, str], *, look_up: bool = True) -> dict[str, ToolResult]:
        """Results for every file ({name: content}; the name's suffix tells the tool the
        language, e.g. .yaml, .tf, .py). Cached files cost nothing; the rest share one process."""
        if not self.available:
            return {
                name: self._result(
                    error=f"{self.tool} unavailable: {self.definition.binary!r} not in $SV_TOOLS_BIN or PATH"
                )
                for name in files
            }
        results: dict[str, ToolResult] = {}
        todo: dict[str, str] = {}
        for name, content in files.items():
            suffix = Path(name).suffix
            hit = (
                self.cache.lookup(self.tool, self.version, self.ruleset_hash, suffix, content)
                if self.cache and look_up
                else None
            )
            if hit is not None:
                results[name] = hit
            elif len(content.encode("utf-8", "surrogateescape")) > MAX_FILE_BYTES:
                results[name] = self._result(error=f"file larger than {MAX_FILE_BYTES} bytes; not scanned")
            else:
                todo[name] = content
        if todo:
            fresh = self._run(todo)
            for name, result in fresh.items():
                if self.cache is not None and result.extra.get("deterministic", True):
                    self.cache.store(result, Path(name).suffix, todo[name])
                results[name] = result
        return results

    def _run(self, files: dict[str, str]) -> dict[str, ToolResult]:
        with self._processes:
            self.processes_run += 1
            return self._run_process(files)

    def _run_process(self, files: dict[str, str]) -> dict[str, ToolResult]:
        with tempfile.TemporaryDirectory(prefix=f"sv-{self.tool}-") as tmp:
            names: dict[str, str] = {}
            paths = []
            for i, (name, content) in enumerate(files.items()):
                path = Path(tmp) / f"f{i}{Path(name).suffix}"
                path.write_text(content, encoding="utf-8", errors="surrogateescape")
                names[str(path)] = name
                names[path.name] = name
                paths.append(str(path))
            assert self.executable is not None  # scan_many answers without us when it is missing
            command = self.definition.command(self.executable, self.rules, paths)
            timeout = self.timeout_s + 2.0 * len(paths)
            try:
                proc = subprocess.run(
                    command,
                    capture_output=True,
                    text=True,
                    timeout=timeout,
                    cwd=tmp,
                    env=_tool_env(),
                    stdin=subprocess.DEVNULL,
                )
            except subprocess.TimeoutExpired:
                return {n: self._transient(f"{self.tool} timed out after {timeout:.0f} s") for n in files}
            try:
                out = _json_out(proc.stdout)
            except ValueError:
                tail = (proc.stderr or proc.stdout).strip()[-300:]
                return {n: self._transient(f"{self.tool} exited {proc.returncode} without JSON: {tail}") for n in files}
            findings, errors = self.definition.parse(out, names)
            return {
                n: self._result(findings=sorted(set(findings.get(n, [])), key=_order), error=errors.get(n))
                for n in files
            }

    def _transient(self, error: str) -> ToolResult:
        """A failure of the process, not a verdict on the file: never cached."""
        return ToolResult(self.tool, self.version, self.ruleset_hash, (), error, extra={"deterministic": False})

    async def scan(self, filename: str, content: str) -> ToolResult:
        """One file's result; callers within `batch_window_s` of each other share a process.
        Batches are per event loop (futures belong to their loop), so threads that run
        their own loops can share one scanner."""
        if self.cache is not None and self.available:
            hit = self.cache.lookup(self.tool, self.version, self.ruleset_hash, Path(filename).suffix, content)
            if hit is not None:
                return hit
        loop = asyncio.get_running_loop()
        future: asyncio.Future[ToolResult] = loop.create_future()
        with self._lock:
            pending = self._pending.setdefault(loop, [])
            pending.append((filename, content, future))
            full = len(pending) >= self.max_batch
            if full:
                batch = self._pending.pop(loop)
            open_window = not full and loop not in self._windows
            if open_window:
                self._windows.add(loop)
        if full:
            self._spawn(self._run_batch(batch))
        elif open_window:
            self._spawn(self._window(loop))
        return await future

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)  # keep a reference until it finishes
        task.add_done_callback(self._tasks.discard)

    async def _window(self, loop: asyncio.AbstractEventLoop) -> None:
        try:
            await asyncio.sleep(self.batch_window_s)
        finally:
            with self._lock:
                self._windows.discard(loop)
                batch = self._pending.pop(loop, [])
        await self._run_batch(batch)

    async def _run_batch(self, batch: list[tuple[str, str, asyncio.Future[ToolResult]]]) -> None:
        if not batch:
            return
        # Two callers may send the same content under different names: key by a unique name.
        files = {f"b{i}{Path(name).suffix}": content for i, (name, content, _) in enumerate(batch)}
        try:
            # scan() already looked these up in the cache (and counted the misses).
            results = await asyncio.to_thread(self.scan_many, files, look_up=False)
        except Exception as exc:  # never leave a caller waiting forever
            for _, _, future in batch:
                if not future.done():
                    future.set_exception(exc)
            return
        for i, (name, _, future) in enumerate(batch):
            if not future.done():
                future.set_result(results[f"b{i}{Path(name).suffix}"])


def _order(finding: Finding) -> tuple[int, str, str]:
    return (finding.line or 0, finding.id, finding.message)


def tool_info(scanners: Mapping[str, Scanner]) -> dict[str, dict[str, Any]]:
    return {name: scanner.info() for name, scanner in scanners.items()}
