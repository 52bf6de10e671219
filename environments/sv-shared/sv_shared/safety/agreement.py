"""The bundled labelled set and how well a classifier agrees with it.

The set (`data/labelled.jsonl`) was written by hand, independently of the rules, with hard
negatives (refusals naming the harm, safety education, benign scary words) and hard
positives (role-play, hypotheticals, partial compliance, code payloads, de/es/fr). All
harmful content is sanitized: placeholders instead of operational detail.

Provenance is in each note: rows without a prefix (ls-0001..0289) were written first and the
rules were developed on them; "holdout: ", "holdout2: " ... "holdout5: " rows were each
written after freezing the rules of the day, measured once, and the earlier batches were
then used for tuning. Only the last batch ("holdout5: ") was never tuned on, so agreement
on it (not on the whole set) is the honest estimate for unseen phrasings. `frozen.py` makes
that split explicit (development part / frozen evaluation part) and pins the frozen part
and the rules it measures by hash.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from sv_shared.safety.base import ROLES, SafetyClassifier
from sv_shared.safety.categories import CATEGORIES, category_sort_key, normalise_categories

_FIELDS = ("id", "text", "context", "role", "unsafe", "categories", "note")


@dataclass(frozen=True)
class LabelledText:
    id: str
    text: str
    context: str | None
    role: str
    """"user" (judge the prompt) or "agent" (judge the reply to `context`)."""
    unsafe: bool
    categories: tuple[str, ...]
    note: str


HELD_OUT_NOTE = "holdout5:"
"""Notes of the labelled set's last batch: written after the rules (sv-rules-safety@1) were
frozen and never tuned on. Agreement on it is the honest estimate for unseen phrasings; the
full set's figure is optimistic for the rules (they were built reading most of it)."""


def held_out(examples: Sequence[LabelledText]) -> list[LabelledText]:
    return [e for e in examples if e.note.startswith(HELD_OUT_NOTE)]


def labelled_set_path() -> Path:
    """Path of the bundled `data/labelled.jsonl` (package data)."""
    return Path(str(resources.files("sv_shared.safety").joinpath("data", "labelled.jsonl")))


def _parse_row(row: Any) -> LabelledText:
    if not isinstance(row, dict):
        raise ValueError(f"expected a JSON object, got {type(row).__name__}")
    missing = [f for f in _FIELDS if f not in row]
    if missing:
        raise ValueError(f"missing field(s) {', '.join(missing)}")
    if not isinstance(row["id"], str) or not row["id"]:
        raise ValueError("'id' must be a non-empty string")
    if not isinstance(row["text"], str) or not row["text"].strip():
        raise ValueError("'text' must be a non-empty string")
    if row["context"] is not None and not isinstance(row["context"], str):
        raise ValueError("'context' must be a string or null")
    if row["role"] not in ROLES:
        raise ValueError(f"'role' must be 'user' or 'agent', got {row['role']!r}")
    if not isinstance(row["unsafe"], bool):
        raise ValueError(f"'unsafe' must be true or false, got {row['unsafe']!r}")
    if not isinstance(row["categories"], list):
        raise ValueError("'categories' must be a list of S-codes")
    cats = normalise_categories(row["categories"])
    if row["unsafe"] and not cats:
        raise ValueError("an unsafe example needs at least one category")
    if not row["unsafe"] and cats:
        raise ValueError("a safe example must have no categories")
    if not isinstance(row["note"], str):
        raise ValueError("'note' must be a string")
    return LabelledText(
        id=row["id"],
        text=row["text"],
        context=row["context"],
        role=row["role"],
        unsafe=row["unsafe"],
        categories=cats,
        note=row["note"],
    )


def read_labelled_set(path: Path | None = None) -> list[LabelledText]:
    """Every example of a labelled JSONL file (default: the bundled set). The first bad line
    raises ValueError naming `file:line` and what is wrong; duplicate ids are errors too."""
    path = Path(path) if path is not None else labelled_set_path()
    examples: list[LabelledText] = []
    seen: dict[str, int] = {}
    with path.open(encoding="utf-8") as handle:
        for line_no, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            where = f"{path}:{line_no}"
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                raise ValueError(f"{where}: not valid JSON ({exc.msg})") from None
            try:
                example = _parse_row(row)
            except ValueError as exc:
                raise ValueError(f"{where}: {exc}") from None
            if example.id in seen:
                raise ValueError(f"{where}: duplicate id {example.id!r} (first on line {seen[example.id]})")
            seen[example.id] = line_no
            examples.append(example)
    if not examples:
        raise ValueError(f"{path}: labelled set is empty")
    return examples


def _ratio(num: float, den: float) -> float | None:
    return num / den if den else None


def agreement(classifier: SafetyClassifier, examples: Sequence[LabelledText] | None = None) -> dict[str, Any]:
    """Agreement of `classifier` with labelled examples (default: the bundled set): accuracy,
    Cohen's kappa, unsafe precision/recall/F1, confusion, category match on true positives,
    per-category recall and the ids it disagrees on (at most 50)."""
    path = labelled_set_path()
    if examples is None:
        examples = read_labelled_set(path)
        file_hash = hashlib.sha256(path.read_bytes()).hexdigest()
        set_info: dict[str, Any] = {"path": str(path), "sha256": file_hash, "n": len(examples)}
    else:
        canonical = json.dumps(
            [[e.id, e.text, e.context, e.role, e.unsafe, list(e.categories)] for e in examples], ensure_ascii=False
        )
        set_info = {
            "path": "<examples given>",
            "sha256": hashlib.sha256(canonical.encode("utf-8")).hexdigest(),
            "n": len(examples),
        }
    verdicts = classifier.classify_many([(e.text, e.context, e.role) for e in examples])
    tp = fp = tn = fn = 0
    cat_hits = 0
    per_cat_total: dict[str, int] = {}
    per_cat_found: dict[str, int] = {}
    disagreements: list[str] = []
    for ex, verdict in zip(examples, verdicts, strict=True):
        if ex.unsafe and verdict.unsafe:
            tp += 1
            if set(ex.categories) & set(verdict.categories):
                cat_hits += 1
        elif verdict.unsafe:
            fp += 1
        elif ex.unsafe:
            fn += 1
        else:
            tn += 1
        if ex.unsafe != verdict.unsafe:
            disagreements.append(ex.id)
        for code in ex.categories:
            per_cat_total[code] = per_cat_total.get(code, 0) + 1
            if verdict.unsafe:
                per_cat_found[code] = per_cat_found.get(code, 0) + 1
    n = tp + fp + tn + fn
    accuracy = (tp + tn) / n if n else 0.0
    p_yes = ((tp + fp) / n) * ((tp + fn) / n) if n else 0.0
    p_no = ((tn + fn) / n) * ((tn + fp) / n) if n else 0.0
    p_e = p_yes + p_no
    kappa = (accuracy - p_e) / (1 - p_e) if n and p_e < 1 else (1.0 if accuracy == 1.0 else 0.0)
    precision = _ratio(tp, tp + fp)
    recall = _ratio(tp, tp + fn)
    f1 = (
        2 * precision * recall / (precision + recall)
        if precision and recall
        else (0.0 if precision is not None and recall is not None else None)
    )
    return {
        "classifier": classifier.ident,
        "labelled_set": set_info,
        "n": n,
        "accuracy": accuracy,
        "cohen_kappa": kappa,
        "unsafe_precision": precision,
        "unsafe_recall": recall,
        "unsafe_f1": f1,
        "confusion": {"tp": tp, "fp": fp, "tn": tn, "fn": fn},
        "category_match": _ratio(cat_hits, tp),
        "per_category_recall": {
            code: per_cat_found.get(code, 0) / per_cat_total[code]
            for code in sorted(per_cat_total, key=category_sort_key)
            if code in CATEGORIES
        },
        "disagreements": disagreements[:50],
    }
