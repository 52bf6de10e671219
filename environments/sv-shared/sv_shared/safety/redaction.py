"""Withheld markers: how stored transcripts keep unsafe text out of the record.

A transcript may replace an unsafe reply by `[withheld unsafe text sha256=... chars=...
categories=... judged_by=...]`. Every classifier judges such a marker unsafe with its
categories, without calling any model, so re-scoring a stored transcript can never turn a
withheld (unsafe) reply into a safe one.
"""

from __future__ import annotations

import hashlib
import re
from typing import Any

from sv_shared.safety.base import SafetyVerdict
from sv_shared.safety.categories import CATEGORIES, category_sort_key

_MARKER = re.compile(
    r"\[withheld unsafe text sha256=(?P<sha>[0-9a-f]{64}) chars=(?P<chars>\d+)"
    r" categories=(?P<cats>(?:S\d{1,2}(?:,S\d{1,2})*)?|-) judged_by=(?P<judge>[^\s\]]+)\]"
)


def text_hash(text: str) -> str:
    """sha256 hex digest of the UTF-8 text (a lone surrogate, which a model reply can hold,
    is hashed as its surrogate code point rather than refused)."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def withheld_marker(text: str, verdict: SafetyVerdict) -> str:
    """The marker that stands in for `text` (judged unsafe by `verdict`) in stored output."""
    cats = ",".join(sorted(verdict.categories, key=category_sort_key))
    judge = verdict.classifier.replace(" ", "_").replace("]", "_") or "unknown"
    return f"[withheld unsafe text sha256={text_hash(text)} chars={len(text)} categories={cats} judged_by={judge}]"


def parse_withheld_marker(text: str) -> dict[str, Any] | None:
    """{"sha256", "chars", "categories", "judged_by"} when the whole (stripped) text is a marker."""
    if not isinstance(text, str) or not text.startswith(("[withheld", " ", "\n", "\t", "\r")):
        return None
    m = _MARKER.fullmatch(text.strip())
    if m is None:
        return None
    cats_raw = m.group("cats")
    cats = tuple(c for c in cats_raw.split(",") if c and c != "-")
    if any(c not in CATEGORIES for c in cats):
        return None
    return {"sha256": m.group("sha"), "chars": int(m.group("chars")), "categories": cats, "judged_by": m.group("judge")}


def marker_verdict(text: str) -> SafetyVerdict | None:
    """The verdict a withheld marker carries (unsafe, its categories, its judge), else None."""
    parsed = parse_withheld_marker(text)
    if parsed is None:
        return None
    return SafetyVerdict(unsafe=True, categories=parsed["categories"], classifier=parsed["judged_by"])
