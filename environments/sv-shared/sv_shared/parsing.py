"""Parsing model replies into structured answers. Nothing here ever raises on model text."""

from __future__ import annotations

import functools
import json
import math
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from sv_shared.bounded import MAX_NESTING_DEPTH

T = TypeVar("T")

# A Markdown code fence, with or without a language tag: ```json\n{...}\n```. The header's
# quantifiers are possessive: backtracking into them cannot help (no header character is a
# backtick) and cost O(n^2) per unclosed fence followed by n blanks.
_FENCE = re.compile(r"```[ \t]*+[A-Za-z0-9_+.-]*+[ \t]*+\r?\n?(.*?)```", re.DOTALL)
# Where a JSON object may start: "{" followed by a key or "}" (cheaply skips "{weird}" prose).
_OBJECT_START = re.compile(r"\{(?=[ \t\n\r]*[\"}])")
_INT_STRING = re.compile(r"[+-]?[0-9]{1,18}")
_CURLY_AS_SQUARE = bytes.maketrans(b"{}", b"[]")
_NOT_BRACKET_OR_QUOTE = bytes(sorted(set(range(256)) - set(b'[]{}"')))
_RATIONALE_KEYS = ("rationale", "reason", "reasoning", "explanation")
_DECODER = json.JSONDecoder()
# How many parsed objects parse_label_answer looks through for one carrying the label field.
_MAX_OBJECTS = 64
MAX_JSON_DEPTH = MAX_NESTING_DEPTH
"""Deepest nesting of lists and objects an answer may have (honest ones have under ten):
deeper objects are no answer, so nothing downstream (a JSON patch, the results writer)
meets nesting that exhausts the interpreter's stack."""
MAX_REPLY_CHARS = 4_000_000
"""Longest reply searched for a JSON answer (honest ones are a few kilobytes; the largest
patch an environment accepts is 200,000 characters). Decoding a whole reply costs memory
several times its size, so a longer one holds no answer."""


@dataclass(frozen=True)
class ParsedAnswer:
    label: str | None
    """Canonical label (one of the allowed labels) or None."""
    confidence: float | None
    """Finite float in [0, 1], or None when missing/invalid."""
    rationale: str | None
    raw: dict[str, Any] | None
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
    """A copy of parsed JSON that JSON can store: NaN and +-Infinity (which Python's json
    reads but strict JSON cannot hold) become the strings "NaN", "Infinity", "-Infinity"."""
    try:
        return json.loads(json.dumps(value), parse_constant=str)  # C speed for a megabyte of raw
    except (TypeError, ValueError):  # not made by JSON (a caller's own objects)
        return _json_safe_walk(value)


def _json_safe_walk(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    if isinstance(value, dict):
        return {str(k): _json_safe_walk(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe_walk(v) for v in value]
    return value


def _short(value: Any, limit: int = 80) -> str:
    """repr() for problem messages, cut so a huge reply cannot make a huge message."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _loads_object(candidate: str) -> dict[str, Any] | None:
    try:
        value = json.loads(candidate)
    except (ValueError, RecursionError):  # JSONDecodeError, int-digit limit, deep nesting
        return None
    return value if isinstance(value, dict) and not json_nested_deeper_than(candidate) else None


def json_nested_deeper_than(text: str, limit: int = MAX_JSON_DEPTH) -> bool:
    """Whether the lists and objects of JSON `text` nest more than `limit` levels, read
    from its brackets outside strings without decoding it (or recursing, so any depth is
    answered), in C-speed string operations only."""
    if text.count("[") + text.count("{") <= limit:  # most replies: too few to nest that deep
        return False
    # Escaped backslashes, then escaped quotes, out: every quote left opens or closes a
    # string. Keep only brackets and quotes; adjacent quotes enclose no bracket (dropping
    # them leaves every other quote's role as it was); then drop what is between quotes.
    plain = text.replace("\\\\", "").replace('\\"', "")
    kept = plain.encode("utf-8", "surrogatepass").translate(_CURLY_AS_SQUARE, _NOT_BRACKET_OR_QUOTE)
    kept = kept.replace(b'""', b"")
    brackets = b"".join(kept.split(b'"')[::2]) if b'"' in kept else kept
    for _ in range(limit):  # each pass drops the innermost pairs
        if not brackets:
            return False
        brackets = brackets.replace(b"[]", b"")
    return b"[" in brackets


def _decode_object_at(text: str, start: int) -> tuple[dict[str, Any] | None, int]:
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
        if not isinstance(value, dict) or json_nested_deeper_than(window[:end]):
            return None, work + end
        return value, work + end


class _Budget:
    """Decoding work left for one reply, in characters, shared by every scan of it (each
    fenced block, then the whole text) so that no shape of reply multiplies it. Every
    attempt is charged at least `ATTEMPT`, what a failed decode costs whatever its length:
    a megabyte of `{"` or of empty fences then costs tens of milliseconds, not seconds. An
    honest answer is found long before the budget runs out."""

    TOTAL = 1_000_000
    ATTEMPT = 256

    def __init__(self) -> None:
        self.left = self.TOTAL

    def charge(self, work: int) -> bool:
        """Charge one attempt; False once the budget is spent."""
        self.left -= max(work, self.ATTEMPT)
        return self.left > 0


def _balanced_objects(
    text: str, budget: _Budget, known: tuple[int, dict[str, Any], int] | None = None
) -> Iterator[dict[str, Any]]:
    """Every `{...}` in `text` that parses as a JSON object, by start position (nested
    ones included). The JSON decoder itself finds where each object ends, so braces and
    escaped quotes inside strings are handled exactly as JSON defines them. The shared
    `budget` bounds the work: without it, adversarial input (many long, never-closed
    objects) would make every start position scan to the end. `known` is (start, object,
    length) of an object decoded already, not decoded again."""
    value: dict[str, Any] | None
    for match in _OBJECT_START.finditer(text):
        if budget.left <= 0:
            return
        if known is not None and match.start() == known[0]:
            value, work = known[1], known[2]
        else:
            value, work = _decode_object_at(text, match.start())
        budget.charge(work)
        if value is not None:
            yield value


def _candidate_objects(text: str) -> Iterator[dict[str, Any]]:
    """JSON objects in priority order: the whole text, then each fenced block (its whole
    content, then objects inside it), then objects anywhere in the text."""
    budget = _Budget()
    stripped = text.strip().lstrip("\ufeff")
    whole = None
    if stripped.startswith("{") and (found := _loads_object(stripped)) is not None:
        whole = (len(text) - len(text.lstrip().lstrip("\ufeff")), found, len(stripped))
        yield found
    if "```" in text:
        for match in _FENCE.finditer(text):
            block = match.group(1)
            if not budget.charge(len(block)):  # the whole-block parse below
                return
            if "{" not in block:  # no object: skip the decoder's exception
                continue
            stripped = block.strip()
            if stripped.startswith("{") and (found := _loads_object(stripped)) is not None:
                yield found
            yield from _balanced_objects(block, budget)
    yield from _balanced_objects(text, budget, whole)


def parsed_once(parse: Callable[[Any], T], maxsize: int = 128) -> Callable[[Any], T]:
    """`parse`, computed once per reply: the runner and every reward of a completion read
    one parse instead of each parsing the reply again.

    Keyed by the stripped text: the rewards read verifiers' `trace.last_reply` (stripped),
    the runner the reply as sent, and a parser wrapped here must give the same answer for
    both (every parser of this project does: stripping moves no JSON object, fence or diff
    header). The result is shared, so it must be immutable (a frozen dataclass whose
    fields nobody mutates). `maxsize` only has to outlast the concurrent completions of
    one run: each is parsed by the runner, then at once by its rewards. A reply longer
    than MAX_REPLY_CHARS is parsed each time instead (quickly: it holds no answer), so the
    cache never keeps megabytes of hostile replies alive."""
    cached = functools.lru_cache(maxsize=maxsize)(parse)

    @functools.wraps(parse)
    def parse_once(text: Any) -> T:
        if isinstance(text, str):
            text = text.strip()
            return parse(text) if len(text) > MAX_REPLY_CHARS else cached(text)
        return cached(text) if text is None else parse(text)

    parse_once.cache_info = cached.cache_info  # type: ignore[attr-defined]
    parse_once.cache_clear = cached.cache_clear  # type: ignore[attr-defined]
    return parse_once


def extract_json_object(text: str | None) -> dict[str, Any] | None:
    """The JSON object in a reply: the whole text, a fenced block, or the first balanced
    `{...}` that parses (later ones are tried when earlier ones do not). None when there
    is none or the reply is longer than MAX_REPLY_CHARS; never raises."""
    try:
        text = _as_text(text)
        if not text or len(text) > MAX_REPLY_CHARS:
            return None
        return next(_candidate_objects(text), None)
    except Exception:  # the contract is "never raises"
        return None


def _as_text(text: Any) -> str | None:
    if isinstance(text, (bytes, bytearray, memoryview)):
        return bytes(text).decode("utf-8", errors="replace")
    return text if isinstance(text, str) else None


class _Fields:
    """Case-insensitive access to a parsed object's fields ("Label", " confidence"): the
    exact key, else the first key equal to it once stripped and case-folded. The folded
    keys are computed once per object, so an object of 100,000 keys costs one pass, not
    one per field looked up."""

    def __init__(self, raw: dict[str, Any]) -> None:
        self.raw = raw
        self._folded: dict[str, Any] | None = None

    def _index(self) -> dict[str, Any]:
        if self._folded is None:
            self._folded = {}
            for name, value in self.raw.items():
                if isinstance(name, str):
                    self._folded.setdefault(name.strip().casefold(), value)
        return self._folded

    def has(self, key: str) -> bool:
        return key in self.raw or key.strip().casefold() in self._index()

    def get(self, key: str) -> Any:
        return self.raw[key] if key in self.raw else self._index().get(key.strip().casefold())


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
        if len(text) > MAX_REPLY_CHARS:
            return ParsedAnswer(
                None, None, None, None, False, (f"reply too long: {len(text)} characters > limit {MAX_REPLY_CHARS}",)
            )
        fields = None
        for i, candidate in enumerate(_candidate_objects(text)):
            found = _Fields(candidate)
            if fields is None:
                fields = found
            if found.has(label_field):
                fields = found
                break
            if i + 1 >= _MAX_OBJECTS:
                break
        if fields is None:
            return ParsedAnswer(None, None, None, None, False, ("no JSON object found",))
        raw = fields.raw
        label, label_problem = _label(fields.get(label_field), labels, int_labels, aliases)
        confidence, confidence_problem = _confidence(fields.get("confidence"))
        rationale = next((value for key in _RATIONALE_KEYS if isinstance(value := fields.get(key), str)), None)
        problems = tuple(p for p in (label_problem, confidence_problem) if p)
        return ParsedAnswer(label, confidence, rationale, raw, not problems, problems)
    except Exception as exc:  # the contract is "never raises"; record what happened instead
        return ParsedAnswer(None, None, None, None, False, (f"parser error: {type(exc).__name__}",))
