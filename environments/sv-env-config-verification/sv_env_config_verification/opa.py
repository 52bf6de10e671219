"""The project's own Rego rule sets, evaluated in-process with `regopy`.

Two tools share this machinery:

- `opa` (`OpaEvaluator`): the project's policy library (`policies/`), E2's always-available
  tool. Each Kubernetes YAML document and each Terraform file (normalised by `inputs`) is
  one Rego input.
- `kubelinter_rego` (`KubeLinterRegoEvaluator`): KubeLinter's default checks written as Rego
  (`rules/kubelinter/`), ids = KubeLinter's check names. The whole file is one input
  (`{"documents": [...]}`), so cross-document checks (a Service that selects no pod
  template in the file) can be made. It never runs the `kube-linter` binary.

No subprocess and no binary, a few milliseconds per file. Every rule registers itself in
`rules` (id -> severity, title) and reports through `deny`, so the catalogue and the
findings can never disagree. Helm chart templates are refused with an error naming them.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import math
import re
import threading
import time
from importlib import resources
from pathlib import Path
from typing import Any

from sv_env_config_verification.inputs import (
    INPUTS_REVISION,
    InputError,
    YamlDocument,
    check_text,
    file_kind,
    load_terraform,
    load_yaml_documents,
    terraform_block_lines,
)
from sv_shared.tools import Finding, ToolCache, ToolResult, normalize_severity

TOOL = "opa"
KUBELINTER_REGO = "kubelinter_rego"
PACKAGES = {"kubernetes": "svcv.kubernetes", "terraform": "svcv.terraform"}
LOADER_REVISION = 1
"""How this module turns a file into Rego input, on top of `inputs`; part of the cache key.
1: Helm templates are refused."""

# A template action that uses Helm's built-in objects or its include/tpl functions. Plain
# Go-template text inside a ConfigMap (alerting templates: `{{ .CommonLabels.x }}`) is data,
# not a chart, and passes. Bounded so a file full of "{{" costs linear time.
_HELM_ACTION = re.compile(
    r"\{\{-?[^{}\n]{0,300}?(?:\.(?:Values|Release|Chart|Capabilities|Files)\b|\b(?:include|tpl)\b)"
)
_ANY_ACTION = re.compile(r"\{\{")


def policies_dir() -> Path:
    return Path(str(resources.files("sv_env_config_verification") / "policies"))


def kubelinter_rules_dir() -> Path:
    return Path(str(resources.files("sv_env_config_verification") / "rules" / "kubelinter"))


def rego_version() -> str:
    import regopy

    return f"regopy-{getattr(regopy, '__version__', 'unknown')}"


def policies_hash(root: Path | None = None) -> str:
    """Hash of every .rego file (relative name + bytes) and of the input normaliser's
    revisions: a policy edit, or a change in what the policies see, is a new cache key."""
    root = root or policies_dir()
    digest = hashlib.sha256(f"inputs-{INPUTS_REVISION}".encode())
    digest.update(f"loader-{LOADER_REVISION}".encode())
    for path in sorted(root.rglob("*.rego")):
        digest.update(str(path.relative_to(root)).encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def _helm_error(text: str, match: re.Match[str]) -> InputError:
    line = text.count("\n", 0, match.start()) + 1
    return InputError(
        f"Helm template (template action `{{{{ ... }}}}` at line {line}), not a Kubernetes manifest: "
        "render it with `helm template` and scan the output"
    )


def load_manifests(content: str | bytes) -> list[YamlDocument]:
    """The documents of a Kubernetes YAML file (`inputs.load_yaml_documents`, bounded), or
    InputError for a Helm template: a chart that uses `.Values`/`.Release`/`include`, or any
    file that has `{{` and is not valid YAML. Scanning a template would judge placeholders
    (an image "{{ .Values.image }}" has no tag), not the manifest the chart renders."""
    text = check_text(content)
    match = _HELM_ACTION.search(text)
    if match is not None:
        raise _helm_error(text, match)
    try:
        return load_yaml_documents(text)
    except InputError as exc:
        match = _ANY_ACTION.search(text)
        if match is None:
            raise
        raise _helm_error(text, match) from exc


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


def _expression(query: str, output: Any) -> Any:
    """The value of a regopy query's output (None when undefined)."""
    if not output.ok():
        raise RuntimeError(f"rego query {query} failed: {str(output)[:300]}")
    text = str(output)
    if text.strip() == "undefined":
        return None
    return json.loads(text)["expressions"][0]


def _unreadable(query: str, exc: ValueError) -> str:
    # regopy 1.5.2 prints a string default of object.get() quoted and unescaped inside
    # sprintf, so its own JSON output fails to parse: a policy bug, reported as a tool
    # error (not cached) rather than raised out of scoring.
    return f"rego query {query}: regopy output is not valid JSON ({exc})"


class OpaEvaluator:
    """Thread-safe: one interpreter per file kind, each used under a lock."""

    tool = TOOL
    packages = PACKAGES

    def __init__(self, cache: ToolCache | None = None, policies: Path | None = None) -> None:
        self.cache = cache
        self.policies = Path(policies) if policies else self.default_policies()
        self.version = rego_version()
        self.ruleset_hash = policies_hash(self.policies)
        self._interpreters: dict[str, Any] = {}
        self._lock = threading.Lock()
        self.last_eval_s: float | None = None
        """Seconds the last uncached evaluation took (parse + all queries)."""

    available = True

    @staticmethod
    def default_policies() -> Path:
        return policies_dir()

    def info(self) -> dict[str, Any]:
        return {"available": True, "version": self.version, "ruleset_hash": self.ruleset_hash, "path": None}

    def _modules(self, kind: str) -> list[Path]:
        return sorted((self.policies / kind).glob("*.rego"))

    def _interpreter(self, kind: str) -> Any:
        interpreter = self._interpreters.get(kind)
        if interpreter is None:
            from regopy import Interpreter

            interpreter = Interpreter()
            for path in self._modules(kind):
                interpreter.add_module(path.stem, path.read_text(encoding="utf-8"))
            self._interpreters[kind] = interpreter
        return interpreter

    def _query(self, kind: str, query: str, value: Any) -> Any:
        """Result of `query` for input `value` (None when undefined). Caller holds the lock."""
        interpreter = self._interpreter(kind)
        interpreter.set_input_term(json.dumps(_jsonable(value), allow_nan=False))
        try:
            output = interpreter.query(query)
        except ValueError as exc:
            raise RuntimeError(_unreadable(query, exc)) from exc
        return _expression(query, output)

    def catalogue(self) -> dict[str, dict[str, str]]:
        """Every rule: id -> {"severity", "title", "kind"}."""
        out: dict[str, dict[str, str]] = {}
        with self._lock:
            for kind, package in self.packages.items():
                rules = self._query(kind, f"data.{package}.rules", {}) or {}
                for rule_id, meta in rules.items():
                    out[rule_id] = {"severity": meta["severity"], "title": meta["title"], "kind": kind}
        return out

    def _result(self, findings: list[Finding] = (), error: str | None = None) -> ToolResult:  # type: ignore[assignment]
        ordered = sorted(set(findings), key=lambda f: (f.line or 0, f.rule, f.message))
        return ToolResult(self.tool, self.version, self.ruleset_hash, tuple(ordered), error)

    def evaluate(self, filename: str, content: str | bytes) -> ToolResult:
        """Findings for one file; a file that cannot be parsed gives a finding-free result
        with `error` set (recorded, never raised)."""
        suffix = Path(filename).suffix
        text_for_cache = content if isinstance(content, str) else None
        if self.cache is not None and text_for_cache is not None:
            hit = self.cache.lookup(self.tool, self.version, self.ruleset_hash, suffix, text_for_cache)
            if hit is not None:
                return hit
        start = time.perf_counter()
        try:
            result = self._result(self._evaluate(filename, content))
        except InputError as exc:
            result = self._result(error=f"{filename}: {exc}")
        except RuntimeError as exc:  # a Rego evaluation failure: not a verdict on the file
            self.last_eval_s = time.perf_counter() - start
            return ToolResult(
                self.tool, self.version, self.ruleset_hash, (), f"{self.tool}: {exc}", extra={"deterministic": False}
            )
        self.last_eval_s = time.perf_counter() - start
        if self.cache is not None and text_for_cache is not None:
            self.cache.store(result, suffix, text_for_cache)
        return result

    def _evaluate(self, filename: str, content: str | bytes) -> list[Finding]:
        kind = file_kind(filename)
        package = self.packages[kind]
        findings: list[Finding] = []
        if kind == "kubernetes":
            documents = load_manifests(content)
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

    def _finding(self, item: dict[str, Any], line: int | None) -> Finding:
        return Finding(
            tool=self.tool,
            rule=str(item["rule"]),
            severity=normalize_severity(item.get("severity")),
            line=line,
            message=str(item.get("msg", ""))[:300],
        )


class KubeLinterRegoEvaluator(OpaEvaluator):
    """KubeLinter's default checks as the project's Rego (`rules/kubelinter/`), one query per
    file over all of its documents. Kubernetes YAML only."""

    tool = KUBELINTER_REGO
    packages = {"kubernetes": "svcv.kubelinter"}

    def __init__(self, cache: ToolCache | None = None, policies: Path | None = None) -> None:
        super().__init__(cache, policies)
        self._bundles: dict[str, Any] = {}
        self._severities: dict[str, str] | None = None

    @staticmethod
    def default_policies() -> Path:
        return kubelinter_rules_dir()

    def _modules(self, kind: str) -> list[Path]:
        return sorted(self.policies.glob("*.rego"))

    def _query(self, kind: str, query: str, value: Any) -> Any:
        """`query` ("data.<package>.<rule>") through a bundle compiled once: this rule set is
        large enough that regopy's per-query compilation cost ~150 ms a file."""
        package, _, rule = query.removeprefix("data.").rpartition(".")
        entrypoint = f"{package.replace('.', '/')}/{rule}"
        bundle = self._bundles.get(kind)
        if bundle is None:
            entrypoints = [f"{self.packages[kind].replace('.', '/')}/{name}" for name in ("deny", "rules")]
            bundle = self._bundles[kind] = self._interpreter(kind).build(None, entrypoints)
        interpreter = self._interpreter(kind)
        interpreter.set_input_term(json.dumps(_jsonable(value), allow_nan=False))
        try:
            output = interpreter.query_bundle_entrypoint(bundle, entrypoint)
        except ValueError as exc:
            raise RuntimeError(_unreadable(query, exc)) from exc
        return _expression(query, output)

    def _evaluate(self, filename: str, content: str | bytes) -> list[Finding]:
        kind = file_kind(filename)
        if kind not in self.packages:
            raise InputError(f"{self.tool} scans Kubernetes YAML only, not {kind} files")
        documents = load_manifests(content)
        if self._severities is None:
            self._severities = {rule: meta["severity"] for rule, meta in self.catalogue().items()}
        with self._lock:
            items = self._query(kind, f"data.{self.packages[kind]}.deny", {"documents": [d.value for d in documents]})
        lines = [d.line for d in documents]
        findings = []
        for item in items or []:
            index = item.get("doc")
            line = lines[index] if isinstance(index, int) and 0 <= index < len(lines) else None
            findings.append(self._finding({**item, "severity": self._severities.get(str(item["rule"]))}, line))
        return findings
