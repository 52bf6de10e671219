"""Apply a model's fix to the task's file: a unified diff or an RFC 6902 JSON patch.

A patch is untrusted model output. A unified diff may only touch the task's own file (no
other names, no absolute paths, no `..`), and every hunk's context must match the file;
a JSON patch applies to the parsed YAML (one document: paths start at the document; several
documents: paths start with the document index, e.g. `/1/spec/replicas`) and the result is
re-serialised. Anything else raises `PatchError` with the reason.
"""

from __future__ import annotations

import copy
import json
import posixpath
from typing import Any

from sv_env_config_verification.inputs import InputError, check_text, file_kind, load_yaml_documents
from sv_shared.bounded import find_block
from sv_shared.parsing import MAX_JSON_DEPTH, json_nested_deeper_than

MAX_PATCH_CHARS = 200_000
MAX_DIFF_HUNKS = 100
"""A fix touches a few places; every hunk costs a search of the whole file."""
MAX_JSON_PATCH_OPERATIONS = 100
"""A fix changes a few fields; thousands of operations only cost time."""
MAX_JSON_PATCH_GROWTH = 65_536
"""How much larger (as JSON) a JSON patch may make the document: re-serialising YAML costs
about half a microsecond a character, and `copy` operations can double it each time."""


class PatchError(ValueError):
    """The patch is malformed, targets another file, or does not apply."""


def is_empty_patch(patch: Any) -> bool:
    if patch is None:
        return True
    if isinstance(patch, str):
        return not patch.strip()
    if isinstance(patch, (list, dict)):
        return len(patch) == 0
    return False


def apply_patch(filename: str, content: str, patch: str | list | dict) -> str:
    """The patched file text. `patch` is a unified diff, or a JSON patch (a list of
    operations, or its JSON text)."""
    if is_empty_patch(patch):
        raise PatchError("empty patch")
    if isinstance(patch, str) and len(patch) > MAX_PATCH_CHARS:
        raise PatchError(f"patch too large ({len(patch)} characters > {MAX_PATCH_CHARS})")
    operations = _json_patch_operations(patch)
    if operations is not None:
        patched = _apply_json_patch(filename, content, operations)
    elif isinstance(patch, str):
        patched = _apply_unified_diff(filename, content, patch)
    else:
        raise PatchError(f"patch must be a unified diff or a JSON patch list, got {type(patch).__name__}")
    try:
        return check_text(patched)
    except InputError as exc:
        raise PatchError(f"patched file rejected: {exc}") from exc


def _json_patch_operations(patch: Any) -> list | None:
    if isinstance(patch, dict):
        patch = [patch]
    if isinstance(patch, list):
        if len(patch) > MAX_JSON_PATCH_OPERATIONS:
            raise PatchError(f"JSON patch has {len(patch)} operations; the limit is {MAX_JSON_PATCH_OPERATIONS}")
        # Through its JSON text, like a patch sent as text: checked the same way, and a copy
        # (jsonpatch inserts values by reference, and a later operation would then change
        # the parsed answer that every reward shares).
        try:
            patch = json.dumps(patch)
        except (TypeError, ValueError, RecursionError) as exc:
            raise PatchError(f"JSON patch is not JSON: {exc}") from exc
    text = patch.strip()
    if not text.startswith("["):
        return None
    if json_nested_deeper_than(text, MAX_JSON_DEPTH):
        raise PatchError(f"JSON patch nests deeper than {MAX_JSON_DEPTH} levels")
    try:
        value = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise PatchError(f"patch looks like JSON but does not parse: {exc}") from exc
    if not isinstance(value, list):
        raise PatchError("JSON patch must be a list of operations")
    if len(value) > MAX_JSON_PATCH_OPERATIONS:
        raise PatchError(f"JSON patch has {len(value)} operations; the limit is {MAX_JSON_PATCH_OPERATIONS}")
    return value


def _json_size(value: Any) -> int:
    return len(json.dumps(value, default=str, skipkeys=True))


def _apply_json_patch(filename: str, content: str, operations: list) -> str:
    import jsonpatch
    import yaml

    if file_kind(filename) != "kubernetes":
        raise PatchError("JSON patches apply to YAML files only; send a unified diff for Terraform")
    if not all(isinstance(op, dict) for op in operations):
        raise PatchError("every JSON patch operation must be an object")
    try:
        documents = [doc.value for doc in load_yaml_documents(content)]
    except InputError as exc:
        raise PatchError(f"original file does not parse: {exc}") from exc
    target: Any = documents[0] if len(documents) == 1 else documents
    limit, grown = _json_size(target) + MAX_JSON_PATCH_GROWTH, False
    try:
        jsonpatch.JsonPatch(operations)  # every operation is checked before any applies
        patched = copy.deepcopy(target)
        for number, operation in enumerate(operations, start=1):
            patched = jsonpatch.JsonPatch([operation]).apply(patched, in_place=True)
            # Only `copy` multiplies what is there; added values are at most the reply's size.
            if operation.get("op") == "copy" or number == len(operations):
                if grown := _json_size(patched) > limit:
                    break
    except (jsonpatch.JsonPatchException, jsonpatch.JsonPointerException, TypeError, KeyError, ValueError) as exc:
        raise PatchError(f"JSON patch does not apply: {exc}") from exc
    if grown:
        raise PatchError(f"JSON patch grows the document by more than {MAX_JSON_PATCH_GROWTH} characters")
    if len(documents) == 1:
        return yaml.safe_dump(patched, sort_keys=False)
    if not isinstance(patched, list):
        raise PatchError("JSON patch on a multi-document file must keep the list of documents")
    return yaml.safe_dump_all(patched, sort_keys=False)


def _clean_path(path: str | None) -> str | None:
    if path is None:
        return None
    path = path.strip().split("\t")[0]
    if path == "/dev/null":
        return path
    if path.startswith(("a/", "b/")):
        path = path[2:]
    return path


def _check_target(filename: str, path: str | None) -> None:
    if path is None or path == "/dev/null":
        raise PatchError("diff creates or deletes a file; only edits to the task's file are allowed")
    if path.startswith("/") or ".." in path.split("/") or "\\" in path:
        raise PatchError(f"diff path {path!r} escapes the task's file")
    if posixpath.basename(path) != filename:
        raise PatchError(f"diff touches {path!r}; only {filename!r} may be patched")


def _apply_unified_diff(filename: str, content: str, diff: str) -> str:
    from unidiff import PatchSet
    from unidiff.errors import UnidiffParseError

    text = diff.strip("\n") + "\n"
    if text.lstrip().startswith("@@"):  # hunks without file headers: they mean the task's file
        text = f"--- a/{filename}\n+++ b/{filename}\n{text.lstrip()}"
    hunks = ("\n" + text).count("\n@@")
    if hunks > MAX_DIFF_HUNKS:
        raise PatchError(f"diff has {hunks} hunks; the limit is {MAX_DIFF_HUNKS}")
    try:
        patch_set = PatchSet(text)
    except (UnidiffParseError, ValueError, IndexError) as exc:
        raise PatchError(f"not a valid unified diff: {exc}") from exc
    if len(patch_set) == 0:
        raise PatchError("not a valid unified diff: no '--- / +++ / @@' hunks found")
    if len(patch_set) != 1:
        raise PatchError(f"diff must touch exactly one file ({filename}); it touches {len(patch_set)}")
    patched_file = patch_set[0]
    for path in (patched_file.source_file, patched_file.target_file):
        _check_target(filename, _clean_path(path))
    lines = content.splitlines(keepends=True)
    normed = [_norm(line) for line in lines]  # kept in step with `lines`, hunk by hunk
    offset = 0
    for number, hunk in enumerate(patched_file, start=1):
        source = [line.value for line in hunk if line.is_context or line.is_removed]
        target = [line.value for line in hunk if line.is_context or line.is_added]
        start = _locate(normed, [_norm(line) for line in source], max(hunk.source_start - 1 + offset, 0))
        if start is None:
            raise PatchError(f"hunk {number} (@@ -{hunk.source_start}) does not match the file")
        lines[start : start + len(source)] = target
        normed[start : start + len(source)] = [_norm(line) for line in target]
        offset += len(target) - len(source)
    return "".join(lines)


def _norm(line: str) -> str:
    return line.rstrip("\r\n")


def _locate(lines: list[str], block: list[str], expected: int) -> int | None:
    """Where `block` sits in `lines` (both without line ends): at `expected`, else the
    nearest match, the earlier one on a tie (models often get hunk line numbers wrong but
    the context right)."""
    size = len(block)
    if size == 0:
        return min(expected, len(lines))
    if lines[expected : expected + size] == block:
        return expected
    return find_block(lines, block, expected)
