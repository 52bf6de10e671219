"""Parsing an E2 reply: violations found, a patch, and a confidence. Never raises."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from sv_shared import extract_json_object
from sv_shared.parsing import MAX_REPLY_CHARS, parsed_once
from sv_shared.tools import SEVERITIES

ANSWER_SCHEMA = (
    '{"violations": [{"id": "<tool>/<rule>", "severity": "low|medium|high"}], '
    '"patch": "<unified diff or JSON patch, may be empty>", "confidence": 0.0-1.0}'
)
MAX_VIOLATIONS = 200


@dataclass(frozen=True)
class Violation:
    id: str
    severity: str


@dataclass(frozen=True)
class ConfigAnswer:
    violations: tuple[Violation, ...]
    patch: str | list[Any] | dict[str, Any] | None
    """A unified diff (text) or a JSON patch (list, one operation, or its JSON text); None
    when absent."""
    confidence: float | None
    raw: dict | None
    format_ok: bool
    problems: tuple[str, ...]

    @property
    def ids(self) -> set[str]:
        return {v.id for v in self.violations}

    @property
    def states_findings(self) -> bool:
        """The reply gave a violations list (possibly empty): only then does finding
        nothing count as a verdict of "clean"."""
        return isinstance(self.raw, dict) and isinstance(self.raw.get("violations"), list)

    @property
    def says_clean(self) -> bool:
        """A stated, empty violations list: the verdict "clean"."""
        return self.states_findings and not self.violations

    def to_dict(self) -> dict[str, Any]:
        return {
            "violations": [{"id": v.id, "severity": v.severity} for v in self.violations],
            "patch": self.patch,
            "confidence": self.confidence,
            "format_ok": self.format_ok,
            "problems": list(self.problems),
        }


def _short(value: Any, limit: int = 80) -> str:
    """repr() for a problem message, cut: a reply's value can be a megabyte."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


@parsed_once
def parse_completion(text: str | None) -> ConfigAnswer:
    """The answer in `text` (bare JSON, fenced, or embedded in prose). `format_ok` needs a
    violations list of {id: "tool/rule", severity: low|medium|high}, a string or list patch
    (or none) and a confidence in [0, 1]; usable parts are kept even when it is False."""
    problems: list[str] = []
    if isinstance(text, str) and len(text) > MAX_REPLY_CHARS:
        return ConfigAnswer(
            (), None, None, None, False, (f"reply too long: {len(text)} characters > limit {MAX_REPLY_CHARS}",)
        )
    raw = extract_json_object(text) if isinstance(text, str) else None
    if raw is None:
        return ConfigAnswer((), None, None, None, False, ("no JSON object found",))
    violations: list[Violation] = []
    items = raw.get("violations")
    if not isinstance(items, list):
        problems.append("'violations' missing or not a list")
        items = []
    seen: set[str] = set()
    for item in items[:MAX_VIOLATIONS]:
        if isinstance(item, str):
            vid, severity = item, "medium"
            problems.append(f"violation {vid[:60]!r} is a bare string; severity assumed medium")
        elif isinstance(item, dict) and isinstance(item.get("id"), str):
            vid = item["id"]
            severity = str(item.get("severity", "")).strip().lower()
            if severity not in SEVERITIES:
                problems.append(f"violation {vid[:60]!r}: severity {_short(item.get('severity'))} not low|medium|high")
                severity = "medium"
        else:
            problems.append("violation entry without a string 'id'")
            continue
        vid = vid.strip()
        if "/" not in vid:
            problems.append(f"violation id {vid[:60]!r} is not '<tool>/<rule>'")
        if vid and vid not in seen:
            seen.add(vid)
            violations.append(Violation(vid, severity))
    if len(items) > MAX_VIOLATIONS:
        problems.append(f"more than {MAX_VIOLATIONS} violations; the rest ignored")
    patch = raw.get("patch")
    if patch is not None and not isinstance(patch, (str, list, dict)):
        problems.append("'patch' must be a string (unified diff / JSON patch text) or a JSON patch list")
        patch = None
    confidence = raw.get("confidence")
    # An int is checked by range before any float conversion: 10**400 does not fit a float.
    if (
        isinstance(confidence, bool)
        or not isinstance(confidence, (int, float))
        or (isinstance(confidence, float) and not math.isfinite(confidence))
        or not 0 <= confidence <= 1
    ):
        problems.append(f"'confidence' must be a number in [0, 1], got {str(confidence)[:40]}")
        confidence = None
    else:
        confidence = float(confidence)
    return ConfigAnswer(tuple(violations), patch, confidence, raw, not problems, tuple(problems))
