"""Parsing model replies into structured answers. Nothing here ever raises on model text."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

# A Markdown code fence, with or without a language tag: ```json\n{...}\n```
_FENCE = re.compile(r"```[ \t]*[A-Za-z0-9_+.-]*[ \t]*\r?\n?(.*?)```", re.DOTALL)
# Where a JSON object may start: "{" followed by a key or "}" (cheaply skips "{weird}" prose).
_OBJECT_START = re.compile(r"\{(?=[ \t\n\r]*[\"}])")
_INT_STRING = re.compile(r"[+-]?[0-9]{1,18}")
_RATIONALE_KEYS = ("rationale", "reason", "reasoning", "explanation")
_DECODER = json.JSONDecoder()
# How many parsed objects parse_label_answer looks through for one carrying the label field.
_MAX_OBJECTS = 64


@dataclass(frozen=True)
class ParsedAnswer:
    label: str | None
    """Canonical label (one of the allowed labels) or None."""
    confidence: float | None
    """Finite float in [0, 1], or None when missing/invalid."""
    rationale: str | None
    raw: dict | None
    """The JSON object the answer was read from, if any."""
    format_ok: bool
    """True only when an object was found, its label is allowed and its confidence is in [0, 1]."""
    problems: tuple[str, ...]
    """Why `format_ok` is False (empty when it is True)."""

    def to_dict(self) -> dict[str, Any]:
        """A strictly JSON-serialisable copy (non-finite floats in `raw` become strings)."""
        try:
            raw = _json_safe(self.raw)
        except RecursionError:  # absurdly deep `raw`; the parsed fields still say what matters
            raw = None
        return {
            "label": self.label,
            "confidence": self.confidence,
            "rationale": self.rationale,
            "raw": raw,
            "format_ok": self.format_ok,
            "problems": list(self.problems),
        }


def _json_safe(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    if isinstance(value, dict):
        return {str(k): _json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    return value


def _short(value: Any, limit: int = 80) -> str:
    """repr() for problem messages, cut so a huge reply cannot make a huge message."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _loads_object(candidate: str) -> dict | None:
    try:
        value = json.loads(candidate)
    except (ValueError, RecursionError):  # JSONDecodeError, int-digit limit, deep nesting
        return None
    return value if isinstance(value, dict) else None


def _decode_object_at(text: str, start: int) -> tuple[dict | None, int]:
    """The JSON object starting at text[start] (or None), and roughly how many characters
    it took to find out.

    The decoder only ever sees a window of the text, grown while the failure could be
    the window cutting the object short: json's error messages count lines up to the
    error position, so decoding `text` itself from every `{` would cost O(len(text))
    per failure, O(n^2) in all."""
    size, work = 1024, 0
    while True:
        window = text[start : start + size]
        try:
            value, end = _DECODER.raw_decode(window)
        except json.JSONDecodeError as exc:
            # Errors at the very end (or an unclosed string) may just be the window's edge.
            truncated = exc.pos >= len(window) - 10 or exc.msg.startswith("Unterminated string")
            if truncated and start + size < len(text):
                work += len(window)
                size *= 4
                continue
            return None, work + exc.pos + 1
        except (ValueError, RecursionError):  # int-digit limit; nesting deeper than the stack
            return None, work + len(window)
        return (value if isinstance(value, dict) else None), work + end


def _balanced_objects(text: str) -> Iterator[dict]:
    """Every `{...}` in `text` that parses as a JSON object, by start position (nested
    ones included). The JSON decoder itself finds where each object ends, so braces and
    escaped quotes inside strings are handled exactly as JSON defines them.

    A work budget keeps this linear in len(text): without it, adversarial input (many
    long, never-closed objects) would make every start position scan to the end."""
    budget = 20 * len(text) + 1_000_000
    for match in _OBJECT_START.finditer(text):
        value, work = _decode_object_at(text, match.start())
        if value is not None:
            yield value
        budget -= work
        if budget <= 0:
            return


def _candidate_objects(text: str) -> Iterator[dict]:
    """JSON objects in priority order: the whole text, then each fenced block (its whole
    content, then objects inside it), then objects anywhere in the text."""
    stripped = text.strip().lstrip("\ufeff")
    if stripped.startswith("{") and (found := _loads_object(stripped)) is not None:
        yield found
    if "```" in text:
        for block in _FENCE.findall(text):
            if (found := _loads_object(block.strip())) is not None:
                yield found
            yield from _balanced_objects(block)
    yield from _balanced_objects(text)


def extract_json_object(text: str | None) -> dict | None:
    """The JSON object in a reply: the whole text, a fenced block, or the first balanced
    `{...}` that parses (later ones are tried when earlier ones do not). None when there
    is none; never raises."""
    try:
        text = _as_text(text)
        if not text:
            return None
        return next(_candidate_objects(text), None)
    except Exception:  # the contract is "never raises"
        return None


def _as_text(text: Any) -> str | None:
    if isinstance(text, (bytes, bytearray, memoryview)):
        return bytes(text).decode("utf-8", errors="replace")
    return text if isinstance(text, str) else None


def _field(raw: dict, key: str) -> Any:
    """raw[key], falling back to a case-insensitive key match ("Label", " confidence")."""
    if key in raw:
        return raw[key]
    wanted = key.strip().casefold()
    for name, value in raw.items():
        if isinstance(name, str) and name.strip().casefold() == wanted:
            return value
    return None


def _has_field(raw: dict, key: str) -> bool:
    wanted = key.strip().casefold()
    return key in raw or any(isinstance(n, str) and n.strip().casefold() == wanted for n in raw)


def _confidence(value: Any) -> tuple[float | None, str | None]:
    if value is None:
        return None, "missing confidence"
    if isinstance(value, bool):  # bool is an int subclass; True is not "confidence 1"
        return None, f"confidence {value!r} is not a number"
    if isinstance(value, str):
        text = value.strip()
        try:
            number = float(text[:-1]) / 100.0 if text.endswith("%") else float(text)
        except ValueError:
            return None, f"confidence {_short(value)} is not a number"
    elif isinstance(value, (int, float)):
        try:
            number = float(value)
        except OverflowError:  # a JSON integer too big for a float
            return None, f"confidence {_short(value)} outside [0,1]"
    else:
        return None, f"confidence {_short(value)} is not a number"
    if math.isnan(number):
        return None, "confidence is NaN"
    if math.isinf(number):
        return None, "confidence is infinite"
    if not 0.0 <= number <= 1.0:
        return None, f"confidence {number} outside [0,1]"
    return number, None


def _label(
    value: Any,
    labels: Sequence[str],
    int_labels: Mapping[int, str] | None,
    aliases: Mapping[str, str] | None,
) -> tuple[str | None, str | None]:
    canonical = {label.strip().casefold(): label for label in labels if isinstance(label, str)}

    def allowed(name: Any) -> str | None:
        return canonical.get(name.strip().casefold()) if isinstance(name, str) else None

    if value is None:
        return None, "missing label"
    # bool before int: JSON true/false must not become labels 1/0.
    if isinstance(value, int) and not isinstance(value, bool) and int_labels:
        label = allowed(int_labels.get(value))
        return (label, None) if label else (None, f"unknown label {_short(value)}")
    if not isinstance(value, str):
        return None, f"unknown label {_short(value)}"
    text = value.strip().casefold()
    if label := canonical.get(text):
        return label, None
    for alias, target in (aliases or {}).items():
        if isinstance(alias, str) and alias.strip().casefold() == text and (label := allowed(target)):
            return label, None
    if int_labels and _INT_STRING.fullmatch(text) and (label := allowed(int_labels.get(int(text)))):
        return label, None
    return None, f"unknown label {_short(value)}"


def parse_label_answer(
    text: str | None,
    labels: Sequence[str],
    *,
    label_field: str = "label",
    int_labels: Mapping[int, str] | None = None,
    aliases: Mapping[str, str] | None = None,
) -> ParsedAnswer:
    """A `{"label", "confidence", "rationale"}` reply, parsed; never raises.

    Labels match case-insensitively (surrounding whitespace ignored) and come back in the
    spelling of `labels`; `int_labels` maps JSON integers and digit strings (not booleans)
    to labels; `aliases` adds extra spellings. `format_ok` only when the label is allowed
    and the confidence is a number in [0, 1] ("80%" reads as 0.8).

    Of the JSON objects in the reply (see `extract_json_object` for the order), the first
    one that has `label_field` is used, else the first one (so echoed scratch objects
    before the answer do not hide it)."""
    try:
        if text is not None and _as_text(text) is None:
            return ParsedAnswer(None, None, None, None, False, (f"completion is not text ({type(text).__name__})",))
        text = _as_text(text)
        if not text or not text.strip():
            return ParsedAnswer(None, None, None, None, False, ("empty completion",))
        raw = None
        for i, candidate in enumerate(_candidate_objects(text)):
            if raw is None:
                raw = candidate
            if _has_field(candidate, label_field):
                raw = candidate
                break
            if i + 1 >= _MAX_OBJECTS:
                break
        if raw is None:
            return ParsedAnswer(None, None, None, None, False, ("no JSON object found",))
        label, label_problem = _label(_field(raw, label_field), labels, int_labels, aliases)
        confidence, confidence_problem = _confidence(_field(raw, "confidence"))
        rationale = next(
            (value for key in _RATIONALE_KEYS if isinstance(value := _field(raw, key), str)), None
        )
        problems = tuple(p for p in (label_problem, confidence_problem) if p)
        return ParsedAnswer(label, confidence, rationale, raw, not problems, problems)
    except Exception as exc:  # the contract is "never raises"; record what happened instead
        return ParsedAnswer(None, None, None, None, False, (f"parser error: {type(exc).__name__}",))
