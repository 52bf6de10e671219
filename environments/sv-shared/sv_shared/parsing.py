"""Parsing model replies into structured answers. Nothing here ever raises on model text."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

_FENCE = re.compile(r"```(?:[A-Za-z0-9_+-]*)[ \t]*\n?(.*?)```", re.DOTALL)
_RATIONALE_KEYS = ("rationale", "reason", "explanation")


@dataclass(frozen=True)
class ParsedAnswer:
    label: str | None
    confidence: float | None
    rationale: str | None
    raw: dict | None
    format_ok: bool
    problems: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["problems"] = list(self.problems)
        return data


def _balanced_objects(text: str):
    """Yield every top-level balanced `{...}` substring, skipping braces inside strings."""
    start, depth, in_string, escaped = -1, 0, False, False
    for i, char in enumerate(text):
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
            continue
        if char == '"' and depth > 0:
            in_string = True
        elif char == "{":
            if depth == 0:
                start = i
            depth += 1
        elif char == "}" and depth > 0:
            depth -= 1
            if depth == 0:
                yield text[start : i + 1]


def _loads_object(candidate: str) -> dict | None:
    try:
        value = json.loads(candidate)
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


def extract_json_object(text: str | None) -> dict | None:
    """The JSON object in a reply: the whole text, a fenced block, or the first balanced
    `{...}` that parses. None when there is none."""
    if not isinstance(text, str) or not text.strip():
        return None
    stripped = text.strip()
    if (found := _loads_object(stripped)) is not None:
        return found
    for block in _FENCE.findall(text):
        if (found := _loads_object(block.strip())) is not None:
            return found
        for candidate in _balanced_objects(block):
            if (found := _loads_object(candidate)) is not None:
                return found
    for candidate in _balanced_objects(text):
        if (found := _loads_object(candidate)) is not None:
            return found
    return None


def _confidence(value: Any) -> tuple[float | None, str | None]:
    if value is None:
        return None, "missing confidence"
    if isinstance(value, bool):
        return None, f"confidence {value!r} is not a number"
    if isinstance(value, str):
        text = value.strip()
        try:
            number = float(text[:-1]) / 100.0 if text.endswith("%") else float(text)
        except ValueError:
            return None, f"confidence {value!r} is not a number"
    elif isinstance(value, (int, float)):
        number = float(value)
    else:
        return None, f"confidence {value!r} is not a number"
    if math.isnan(number):
        return None, "confidence is NaN"
    if not 0.0 <= number <= 1.0:
        return None, f"confidence {number} outside [0,1]"
    return number, None


def _label(
    value: Any,
    labels: Sequence[str],
    int_labels: Mapping[int, str] | None,
    aliases: Mapping[str, str] | None,
) -> tuple[str | None, str | None]:
    if value is None:
        return None, "missing label"
    if isinstance(value, bool):
        return None, f"unknown label {value!r}"
    if isinstance(value, int) and int_labels is not None:
        label = int_labels.get(value)
        return (label, None) if label is not None else (None, f"unknown label {value!r}")
    if not isinstance(value, str):
        return None, f"unknown label {value!r}"
    text = value.strip()
    if int_labels is not None and text.isdigit() and int(text) in int_labels:
        return int_labels[int(text)], None
    by_lower = {label.lower(): label for label in labels}
    by_lower.update({alias.lower(): target for alias, target in (aliases or {}).items() if target in labels})
    label = by_lower.get(text.lower())
    return (label, None) if label is not None else (None, f"unknown label {value!r}")


def parse_label_answer(
    text: str | None,
    labels: Sequence[str],
    *,
    label_field: str = "label",
    int_labels: Mapping[int, str] | None = None,
    aliases: Mapping[str, str] | None = None,
) -> ParsedAnswer:
    """A `{"label", "confidence", "rationale"}` reply, parsed; `format_ok` only when the
    label is allowed and the confidence is a number in [0, 1]."""
    try:
        if not isinstance(text, str) or not text.strip():
            return ParsedAnswer(None, None, None, None, False, ("empty completion",))
        raw = extract_json_object(text)
        if raw is None:
            return ParsedAnswer(None, None, None, None, False, ("no JSON object found",))
        label, label_problem = _label(raw.get(label_field), labels, int_labels, aliases)
        confidence, confidence_problem = _confidence(raw.get("confidence"))
        rationale = next((raw[k] for k in _RATIONALE_KEYS if isinstance(raw.get(k), str)), None)
        problems = tuple(p for p in (label_problem, confidence_problem) if p)
        return ParsedAnswer(label, confidence, rationale, raw, not problems, problems)
    except Exception as exc:  # the contract is "never raises"; record what happened instead
        return ParsedAnswer(None, None, None, None, False, (f"parser error: {type(exc).__name__}",))
