"""Bounded parsing of the files E2 scans: Kubernetes YAML and Terraform HCL.

Model-written patches and user datasets reach these parsers, so every parse is bounded:
a size cap, a binary check, and for YAML a cap on the size of the document *after* alias
expansion (a "billion laughs" YAML bomb is tiny on disk and huge in memory). Failures raise
`InputError` with a message that says what was wrong; callers record it per example.
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass
from typing import Any, Literal

import yaml

MAX_BYTES = 1_000_000
"""Largest file (UTF-8 bytes) any tool is asked to scan."""
MAX_YAML_NODES = 200_000
"""Largest YAML node count after alias expansion (the corpus's files have < 500)."""
MAX_YAML_ALIASES = 1_000
"""Most alias references in one file; real manifests rarely use more than a handful."""

FileKind = Literal["kubernetes", "terraform"]


class InputError(ValueError):
    """A file that cannot be scanned (too big, binary, YAML bomb, syntax error)."""


@dataclass(frozen=True)
class YamlDocument:
    index: int
    line: int
    """1-based line where the document's content starts."""
    value: Any


def file_kind(filename: str) -> FileKind:
    """Kubernetes for .yaml/.yml, Terraform for .tf (what the tools are told, too)."""
    lower = filename.lower()
    if lower.endswith((".yaml", ".yml")):
        return "kubernetes"
    if lower.endswith((".tf", ".hcl")):
        return "terraform"
    raise InputError(f"{filename}: unsupported file type (expected .yaml, .yml or .tf)")


def check_text(content: str | bytes, *, max_bytes: int = MAX_BYTES) -> str:
    """`content` as text, or InputError if it is too large or not text."""
    if isinstance(content, bytes):
        if len(content) > max_bytes:
            raise InputError(f"file too large: {len(content)} bytes > limit {max_bytes}")
        try:
            content = content.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise InputError(f"binary or non-UTF-8 content ({exc.reason} at byte {exc.start})") from exc
    if len(content) > max_bytes:  # characters <= bytes, so this bounds cheaply first
        raise InputError(f"file too large: {len(content)} characters > limit {max_bytes}")
    try:
        size = len(content.encode("utf-8"))
    except UnicodeEncodeError as exc:
        # A lone surrogate (from a model's patch): no tool can be handed it as UTF-8.
        raise InputError(f"not UTF-8 text (lone surrogate at character {exc.start})") from exc
    if size > max_bytes:
        raise InputError(f"file too large: {size} bytes > limit {max_bytes}")
    if "\x00" in content:
        raise InputError("binary content (NUL bytes)")
    controls = sum(1 for ch in content[:4096] if ord(ch) < 32 and ch not in "\t\n\r")
    if controls > 8:
        raise InputError(f"binary content ({controls} control characters in the first 4 KiB)")
    return content


def _expanded_size(root: yaml.Node, limit: int) -> int:
    """Node count of `root` with every alias expanded, computed without expanding (shared
    nodes are memoised), raising once the count passes `limit` or on a recursive alias."""
    memo: dict[int, int] = {}
    active: set[int] = set()

    def size(node: yaml.Node) -> int:
        key = id(node)
        if key in memo:
            return memo[key]
        if key in active:
            raise InputError("YAML with a recursive alias")
        active.add(key)
        total = 1
        if isinstance(node, yaml.SequenceNode):
            total += sum(size(child) for child in node.value)
        elif isinstance(node, yaml.MappingNode):
            total += sum(size(k) + size(v) for k, v in node.value)
        active.discard(key)
        if total > limit:
            raise InputError(f"YAML expands to more than {limit} nodes (alias bomb?)")
        memo[key] = total
        return total

    return size(root)


def load_yaml_documents(content: str | bytes, *, max_bytes: int = MAX_BYTES) -> list[YamlDocument]:
    """Every non-empty document of a (multi-document) YAML file, bounded as described above."""
    text = check_text(content, max_bytes=max_bytes)
    try:
        aliases = sum(1 for event in yaml.parse(text, Loader=yaml.SafeLoader) if isinstance(event, yaml.AliasEvent))
        if aliases > MAX_YAML_ALIASES:
            raise InputError(f"YAML uses {aliases} aliases > limit {MAX_YAML_ALIASES} (alias bomb?)")
        nodes = list(yaml.compose_all(text, Loader=yaml.SafeLoader))
    except yaml.YAMLError as exc:
        raise InputError(f"invalid YAML: {_one_line(exc)}") from exc
    except RecursionError as exc:
        raise InputError("YAML nested too deeply") from exc
    documents = []
    for index, node in enumerate(nodes):
        if node is None:
            continue
        _expanded_size(node, MAX_YAML_NODES)
        try:
            value = yaml.SafeLoader(text).construct_document(node)
        except (yaml.YAMLError, RecursionError, TypeError) as exc:
            raise InputError(f"invalid YAML document {index}: {_one_line(exc)}") from exc
        if value is None:
            continue
        documents.append(YamlDocument(index=index, line=node.start_mark.line + 1, value=value))
    return documents


def _unquote(value: Any) -> Any:
    """python-hcl2 keeps string quotes and marks blocks; give Rego plain values."""
    if isinstance(value, str):
        if len(value) >= 2 and value[0] == '"' and value[-1] == '"':
            return value[1:-1]
        return value
    if isinstance(value, list):
        return [_unquote(v) for v in value]
    if isinstance(value, dict):
        return {_unquote(k): _unquote(v) for k, v in value.items() if k != "__is_block__"}
    return value


def _flatten_blocks(raw: list[dict] | None, mode: str) -> list[dict[str, Any]]:
    out = []
    for block in raw or []:
        for rtype, named in _unquote(block).items():
            if not isinstance(named, dict):
                continue
            for name, config in named.items():
                out.append({"mode": mode, "type": rtype, "name": name, "config": config})
    return out


# python-hcl2 8.x serializes with a mutable default `SerializationContext` shared by every
# call and flipped while it walks interpolations: two threads parsing at once corrupt each
# other's strings (and OPA then finds nothing). Known upstream (amplify-education/python-hcl2
# issue 327, open); drop the lock once a release fixes it. Parsing takes milliseconds.
_HCL_LOCK = threading.Lock()

INPUTS_REVISION = 2
"""How files become Rego input; part of OPA's cache key. 2: HCL parsed one at a time (an
OPA result cached before may come from a corrupted concurrent parse)."""


def load_terraform(content: str | bytes, *, max_bytes: int = MAX_BYTES) -> dict[str, Any]:
    """{"resources": [...], "data": [...]} (each {"mode", "type", "name", "config"}) from HCL."""
    import hcl2

    text = check_text(content, max_bytes=max_bytes)
    try:
        with _HCL_LOCK:
            raw = hcl2.loads(text)
    except RecursionError as exc:
        raise InputError("HCL nested too deeply") from exc
    except Exception as exc:  # lark's parse errors have no common public base in hcl2's API
        raise InputError(f"invalid HCL: {_one_line(exc)}") from exc
    return {
        "resources": _flatten_blocks(raw.get("resource"), "managed"),
        "data": _flatten_blocks(raw.get("data"), "data"),
    }


_BLOCK_HEADER = re.compile(r'^[ \t]*(resource|data)\s+"([^"]+)"\s+"([^"]+)"', re.MULTILINE)


def terraform_block_lines(text: str) -> dict[str, int]:
    """Block address ("type.name", and "data.type.name") -> 1-based line of its block header."""
    lines: dict[str, int] = {}
    for match in _BLOCK_HEADER.finditer(text):
        kind, rtype, name = match.groups()
        key = f"{rtype}.{name}" if kind == "resource" else f"data.{rtype}.{name}"
        lines.setdefault(key, text.count("\n", 0, match.start()) + 1)
    return lines


def _one_line(exc: BaseException, limit: int = 300) -> str:
    text = " ".join(str(exc).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."
