"""Bounded parsing of the files E2 scans: Kubernetes YAML and Terraform HCL.

Model-written patches and user datasets reach these parsers, so every parse is bounded:
a size cap, a binary check, a nesting-depth limit read in linear time before the parser
runs, and for YAML a cap on the size of the document *after* alias expansion (a "billion
laughs" YAML bomb is tiny on disk and huge in memory). HCL is parsed in a worker process
with a deadline (`sv_shared.bounded`): python-hcl2's lexer has super-linear regexes no
pre-check can rule out. Failures raise `InputError` with a message that says what was
wrong; callers record it per example.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Literal

import yaml

from sv_shared.bounded import MAX_NESTING_DEPTH, InputRefused, ParserFailed, run_bounded

MAX_BYTES = 1_000_000
"""Largest file (UTF-8 bytes) any tool is asked to scan."""
MAX_YAML_NODES = 200_000
"""Largest YAML node count after alias expansion (the corpus's files have < 500)."""
MAX_YAML_ALIASES = 1_000
"""Most alias references in one file; real manifests rarely use more than a handful."""
MAX_DEPTH = MAX_NESTING_DEPTH
"""Deepest nesting of sequences/mappings (YAML) or brackets (HCL) a file may have; the
corpus's files nest under 10 levels."""
HCL_DEADLINE_S = 10.0
"""Seconds python-hcl2 may take on one file (a few milliseconds for the corpus's files)."""

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


def _check_yaml_events(text: str, loader: type) -> None:
    """InputError at the first event nested past MAX_DEPTH, or when the file uses more than
    MAX_YAML_ALIASES aliases; YAMLError when `loader`'s parser finds a syntax error."""
    depth = aliases = 0
    for event in yaml.parse(text, Loader=loader):
        if isinstance(event, yaml.CollectionStartEvent):
            depth += 1
            if depth > MAX_DEPTH:
                line = event.start_mark.line + 1 if event.start_mark is not None else "?"
                raise InputError(f"YAML nested deeper than {MAX_DEPTH} levels (line {line})")
        elif isinstance(event, yaml.CollectionEndEvent):
            depth -= 1
        elif isinstance(event, yaml.AliasEvent):
            aliases += 1
    if aliases > MAX_YAML_ALIASES:
        raise InputError(f"YAML uses {aliases} aliases > limit {MAX_YAML_ALIASES} (alias bomb?)")


def check_yaml_structure(text: str) -> None:
    """InputError for YAML nested past MAX_DEPTH or with too many aliases, before PyYAML's
    pure-Python scanner sees it: that scanner keeps a pending "simple key" per open flow
    collection and re-checks them all at every token, so `[[[...]]]` costs time quadratic
    in its depth (half a minute at depth 10,000, holding the GIL all along).

    Read from libyaml's event stream: C speed, linear, and it stops at the first event past
    the limit. Where libyaml finds a syntax error, the pure-Python parser (the one that
    builds the documents) is asked the same question instead, so a file libyaml alone
    rejects is judged exactly as before; its scanner stops at the limit too, after at most
    the 1024 characters a simple key may span."""
    fast = getattr(yaml, "CSafeLoader", None)
    if fast is not None:
        try:
            _check_yaml_events(text, fast)
            return
        except yaml.YAMLError:
            pass
    _check_yaml_events(text, yaml.SafeLoader)


def load_yaml_documents(content: str | bytes, *, max_bytes: int = MAX_BYTES) -> list[YamlDocument]:
    """Every non-empty document of a (multi-document) YAML file, bounded as described above."""
    text = check_text(content, max_bytes=max_bytes)
    try:
        check_yaml_structure(text)
        nodes = list(yaml.compose_all(text, Loader=yaml.SafeLoader))
    except yaml.YAMLError as exc:
        raise InputError(f"invalid YAML: {_one_line(exc)}") from exc
    except RecursionError as exc:
        raise InputError("YAML nested too deeply") from exc
    documents = []
    # One constructor for every document: building a loader reads (and checks) the whole
    # text, so a loader per document cost time quadratic in the file for many documents.
    constructor = yaml.SafeLoader("")
    for index, node in enumerate(nodes):
        if node is None:
            continue
        _expanded_size(node, MAX_YAML_NODES)
        try:
            value = constructor.construct_document(node)
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
# issue 327, open). Each parse runs in a worker process that parses one file at a time, so
# no two parses ever share it.

INPUTS_REVISION = 2
"""How files become Rego input; part of OPA's cache key. 2: HCL parsed one at a time (an
OPA result cached before may come from a corrupted concurrent parse)."""

# What HCL text opens or closes a nesting level with, outside comments and strings.
_HCL_CODE = re.compile(r'[\[\](){}"#]|//|/\*')
# Inside a quoted string: an escape, a literal "$${" / "%%{", the end, or an interpolation.
_HCL_STRING = re.compile(r'\\.|\$\$\{|%%\{|"|\n|[$%]\{')


def hcl_nested_deeper_than(text: str, limit: int = MAX_DEPTH) -> bool:
    """Whether brackets, strings and "${...}" interpolations nest more than `limit` levels in
    HCL `text`, read in one pass without parsing.

    A fast refusal, not the bound itself: heredocs are read as code, so a heredoc's
    unbalanced brackets can make this over- or under-count; the worker's deadline bounds
    whatever it misses."""
    stack: list[str] = []
    pos = 0
    while True:
        if stack and stack[-1] == '"':
            match = _HCL_STRING.search(text, pos)
            if match is None:
                return False
            token, pos = match.group(), match.end()
            if token in ('"', "\n"):  # a quoted string ends at its line's end at the latest
                stack.pop()
            elif token in ("${", "%{"):
                stack.append("{")
        else:
            match = _HCL_CODE.search(text, pos)
            if match is None:
                return False
            token, pos = match.group(), match.end()
            if token in ("(", "[", "{", '"'):
                stack.append(token)
            elif token in (")", "]", "}"):
                if stack:
                    stack.pop()
                continue
            elif token == "/*":
                end = text.find("*/", pos)
                pos = len(text) if end < 0 else end + 2
                continue
            else:  # "#" or "//": a comment to the end of the line
                end = text.find("\n", pos)
                pos = len(text) if end < 0 else end + 1
                continue
        if len(stack) > limit:
            return True


def _parse_hcl(text: str) -> dict[str, Any]:
    """python-hcl2's parse of `text`, in a worker process with a deadline and memory cap."""
    try:
        return run_bounded("hcl2:loads", text, deadline_s=HCL_DEADLINE_S, what="HCL")
    except InputRefused as exc:
        raise InputError(str(exc)) from exc
    except ParserFailed as exc:
        if exc.kind == "RecursionError":
            raise InputError("HCL nested too deeply") from exc
        # lark's parse errors have no common public base in hcl2's API: any error is "invalid"
        raise InputError(f"invalid HCL: {_one_line(exc.detail)}") from exc


def load_terraform(content: str | bytes, *, max_bytes: int = MAX_BYTES) -> dict[str, Any]:
    """{"resources": [...], "data": [...]} (each {"mode", "type", "name", "config"}) from HCL."""
    text = check_text(content, max_bytes=max_bytes)
    if hcl_nested_deeper_than(text, MAX_DEPTH):
        raise InputError(f"HCL nested deeper than {MAX_DEPTH} levels")
    raw = _parse_hcl(text)
    if not isinstance(raw, dict):
        raise InputError("invalid HCL: the parser returned no body")
    return {
        "resources": _flatten_blocks(raw.get("resource"), "managed"),
        "data": _flatten_blocks(raw.get("data"), "data"),
    }


def terraform_blocks(content: str | bytes) -> list[dict[str, Any]]:
    """The top-level blocks of HCL `content` in file order, each {"kind", "labels", "text"}
    (`resource`, `["aws_s3_bucket", "b"]`, the block's own text as written, comments inside
    it included), parsed by python-hcl2 in the bounded worker. InputError as for
    `load_terraform`."""
    text = check_text(content)
    if hcl_nested_deeper_than(text, MAX_DEPTH):
        raise InputError(f"HCL nested deeper than {MAX_DEPTH} levels")
    try:
        spans = run_bounded(
            "sv_env_config_verification.inputs:block_spans", text, deadline_s=HCL_DEADLINE_S, what="HCL"
        )
    except InputRefused as exc:
        raise InputError(str(exc)) from exc
    except ParserFailed as exc:
        raise InputError(f"invalid HCL: {_one_line(exc.detail)}") from exc
    return [{"kind": kind, "labels": labels, "text": text[start:end]} for kind, labels, start, end in spans]


def block_spans(text: str) -> list[list[Any]]:
    """[kind, labels, start, end] of each top-level block (character offsets into `text`);
    what the bounded worker runs for `terraform_blocks`."""
    import hcl2

    tree = hcl2.parses_to_tree(text)
    body = next((child for child in tree.children if getattr(child, "data", None) == "body"), None)
    spans: list[list[Any]] = []
    for node in body.children if body is not None else ():
        if getattr(node, "data", None) != "block":
            continue
        parts = [child for child in node.children if hasattr(child, "data")]
        kind = str(parts[0].children[0]) if parts and parts[0].data == "identifier" else ""
        labels = [text[p.meta.start_pos : p.meta.end_pos].strip('"') for p in parts[1:] if p.data == "string"]
        spans.append([kind, labels, node.meta.start_pos, node.meta.end_pos])
    return spans


_BLOCK_HEADER = re.compile(r'^[ \t]*(resource|data)\s+"([^"]+)"\s+"([^"]+)"', re.MULTILINE)


def terraform_block_lines(text: str) -> dict[str, int]:
    """Block address ("type.name", and "data.type.name") -> 1-based line of its block header."""
    lines: dict[str, int] = {}
    for match in _BLOCK_HEADER.finditer(text):
        kind, rtype, name = match.groups()
        key = f"{rtype}.{name}" if kind == "resource" else f"data.{rtype}.{name}"
        lines.setdefault(key, text.count("\n", 0, match.start()) + 1)
    return lines


def _one_line(exc: BaseException | str, limit: int = 300) -> str:
    text = " ".join(str(exc).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."
