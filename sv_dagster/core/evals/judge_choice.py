"""Choosing the judge that scores E5/E6 and the safety review: by agreement on development
data, never on the external test.

The development data are PyRIT's harm-scale rows with every external test duplicate removed
(`external_labels.external_development`, labelled by other people). Each candidate's Cohen's
kappa on them is measured the honest way for that candidate: as is for a judge never trained
on them (the rules, a learned judge trained on the labelled set alone, an LLM judge), and out of
fold for a judge trained on them (5 folds grouped by objective, so no objective is both
trained and judged on). The highest kappa is chosen (the first listed on a tie). Only then is
the chosen judge measured on the external test, once, and that figure recorded beside the
choice (`configs/safety/judge_choice.json`, written by `scripts/choose_judge.py`).

A candidate is a name, the `[classifier]` kind it becomes when chosen (None for a variant that
is only tried), and how to get its development verdicts. A new judge (the local LLM judge)
joins as one more `Candidate` whose `verdicts` classify the development rows.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sv_dagster.core.artifacts.paths import CONFIGS_DIR

CHOICE_PATH = CONFIGS_DIR / "safety" / "judge_choice.json"
FOLDS = 5

Verdicts = Callable[[Sequence[Any]], list[bool]]
"""development rows -> unsafe verdicts (in order)."""


@dataclass(frozen=True)
class Candidate:
    name: str
    kind: str | None
    """The `[classifier]` kind that scores with this judge when it is chosen (None: a variant
    tried on development data only)."""
    verdicts: Verdicts
    how: str
    """How its development verdicts were obtained ("as is", "out of fold ...")."""


def judge_verdicts(judge: Any) -> Verdicts:
    """A judge's verdicts on rows it was never trained on."""
    return lambda rows: [v.unsafe for v in judge.classify_many([(r.text, r.context, r.role) for r in rows])]


def out_of_fold(train: Callable[[Sequence[Any]], Any], base: Sequence[Any], folds: int = FOLDS) -> Verdicts:
    """Verdicts of judges trained on `base` plus the other folds of the development rows
    (folds grouped by objective, in a fixed order), each judging its own fold."""

    def verdicts(rows: Sequence[Any]) -> list[bool]:
        from sklearn.model_selection import GroupKFold

        out: list[bool | None] = [None] * len(rows)
        groups = [r.context or "" for r in rows]
        for train_index, judge_index in GroupKFold(n_splits=folds).split(rows, groups=groups):
            judge = train([*base, *(rows[i] for i in train_index)])
            found = judge.classify_many([(rows[i].text, rows[i].context, rows[i].role) for i in judge_index])
            for i, verdict in zip(judge_index, found, strict=True):
                out[i] = verdict.unsafe
        return [bool(v) for v in out]

    return verdicts


def choose(reports: Mapping[str, Mapping[str, Any]]) -> str:
    """The candidate with the highest development kappa (the first listed on a tie)."""
    best: str | None = None
    for name, report in reports.items():
        kappa = report.get("cohen_kappa")
        if kappa is not None and (best is None or kappa > reports[best]["cohen_kappa"]):
            best = name
    if best is None:
        raise ValueError("no candidate has a development kappa")
    return best


def development_reports(candidates: Sequence[Candidate], rows: Sequence[Any]) -> dict[str, dict[str, Any]]:
    """Each candidate's agreement with the development rows (with CIs), and how it was measured."""
    from sv_dagster.core.evals.judge_validation import measured

    gold = [r.unsafe for r in rows]
    return {c.name: measured(c.verdicts(rows), gold) | {"kind": c.kind, "how": c.how} for c in candidates}


def read_choice(path: Path | None = None) -> dict[str, Any]:
    """The recorded choice (`configs/safety/judge_choice.json`)."""
    path = path or CHOICE_PATH
    try:
        choice: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise ValueError(f"{path}: cannot read the recorded judge choice: {exc}") from exc
    return choice


def chosen_kind(path: Path | None = None) -> str:
    """The `[classifier]` kind chosen on development data."""
    choice = read_choice(path)
    kind = choice["candidates"][choice["chosen"]]["kind"]
    if not kind:
        raise ValueError(f"{path or CHOICE_PATH}: the chosen candidate {choice['chosen']!r} names no kind")
    return str(kind)


def chosen_block() -> dict[str, Any]:
    """The judge chosen on development data (`judge_choice.json`): its ident, kind and
    development figures (an error entry when the record cannot be read)."""
    from sv_dagster.core.evals.judge_validation import HEADLINE

    try:
        choice = read_choice()
        development = choice["candidates"][choice["chosen"]]
        return {
            "classifier": choice["classifier"],
            "kind": choice["kind"],
            "candidate": choice["chosen"],
            "development": {key: development.get(key) for key in (*HEADLINE, "ci95", "how")},
        }
    except (ValueError, KeyError, TypeError) as exc:
        return {"error": f"no recorded judge choice: {exc}"[:300]}
