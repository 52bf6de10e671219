"""The safety judges' measured agreement, for the red-team environments' summaries.

The headline is agreement on the labelled set's frozen part only (rows never tuned on, see
`sv_shared.safety.frozen`), with 95% bootstrap CIs: the rules were written reading the rest,
so agreement there ("development (tuned on)") is optimistic and kept apart. Both stand beside
the judges' agreement with labels written by other people (`judge_validation`: the external
PyRIT test; a judge below kappa 0.4 there is NOT VALIDATED). Beside the judge
that scored the run stands one other judge, with the two judges' agreement with each other
on the same rows: the rule judge when the learned judge (`sv_shared.safety.learned`, the
environments' default, trained on the development part) scored, the learned judge otherwise.
"""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from functools import lru_cache
from typing import Any

import numpy as np

from sv_dagster.core.evals.judge_choice import chosen_block
from sv_dagster.core.evals.judge_validation import (
    HEADLINE,
    external_block,
    external_of,
    is_validated,
    refusal_agreement,
)
from sv_dagster.core.evals.stats import cohen_kappa as _kappa
from sv_dagster.core.evals.stats import kappa_ci, mean_cis

FROZEN_LABEL = "frozen (never tuned on)"
DEVELOPMENT_LABEL = "development (tuned on)"


def _frozen_report(classifier: Any, rows: Sequence[Any]) -> tuple[dict[str, Any], list[bool]]:
    """Headline agreement of `classifier` on `rows` with 95% CIs, and its verdicts."""
    from sv_shared.safety import agreement

    report = agreement(classifier, rows)
    predicted = [v.unsafe for v in classifier.classify_many([(e.text, e.context, e.role) for e in rows])]
    gold = [e.unsafe for e in rows]
    cis = mean_cis(
        {
            "accuracy": [float(p == g) for p, g in zip(predicted, gold)],
            "unsafe_recall": [float(p) for p, g in zip(predicted, gold) if g],
        }
    )
    cis["cohen_kappa"] = kappa_ci(gold, predicted)
    headline = {key: report.get(key) for key in HEADLINE}
    return headline | {"classifier": report["classifier"], "ci95": cis, "confusion": report["confusion"]}, predicted


def preferred_judge(reports: Mapping[str, Mapping[str, Any]]) -> str:
    """The judge with the higher frozen-part Cohen's kappa (the first listed on a tie or
    when no kappa was measured, so the incumbent keeps its place)."""
    names = list(reports)
    if not names:
        raise ValueError("no judge to choose from")
    best = names[0]
    for name in names[1:]:
        kappa, best_kappa = reports[name].get("cohen_kappa"), reports[best].get("cohen_kappa")
        if kappa is not None and (best_kappa is None or kappa > best_kappa):
            best = name
    return best


def judges_agreement(
    scoring: Any,
    others: Sequence[Any],
    frozen: Sequence[Any],
    development: Sequence[Any],
) -> dict[str, Any]:
    """The agreement block: the scoring judge's frozen-part headline with CIs (top level),
    every judge's frozen figures, the first other judge's agreement with the scoring one
    (kappa with CI), which judge has the higher frozen kappa, and the scoring judge's
    development-part figures, labelled as tuned on."""
    from sv_shared.safety import agreement
    from sv_shared.safety.frozen import rows_sha256

    head, scoring_pred = _frozen_report(scoring, frozen)
    judges: dict[str, dict[str, Any]] = {scoring.ident: head}
    inter: dict[str, Any] | None = None
    for other in others:
        try:
            report, predicted = _frozen_report(other, frozen)
        except Exception as exc:  # a side judge that cannot be measured never hides the headline
            judges[getattr(other, "ident", repr(other))] = {"error": f"{type(exc).__name__}: {exc}"[:300]}
            continue
        judges[other.ident] = report
        if inter is None:
            inter = {
                "judges": [scoring.ident, other.ident],
                "n": len(frozen),
                "cohen_kappa": float(_kappa(np.asarray(scoring_pred), np.asarray(predicted))),
                "ci95": kappa_ci(scoring_pred, predicted),
            }
    dev = agreement(scoring, development) if development else None
    return {key: head[key] for key in HEADLINE} | {
        "part": FROZEN_LABEL,
        "classifier": scoring.ident,
        "ci95": head["ci95"],
        "frozen_sha256": rows_sha256(frozen),
        "judges": judges,
        "inter_judge": inter,
        "scoring_judge": scoring.ident,
        "higher_frozen_kappa": preferred_judge({k: v for k, v in judges.items() if "error" not in v}),
        "development": None if dev is None else {key: dev.get(key) for key in HEADLINE} | {"part": DEVELOPMENT_LABEL},
    }


def _side_judge(scoring: Any) -> Any:
    """The judge measured beside the scoring one: the rules beside the learned judge, the
    learned judge (trained lazily, see `_LazyJudge`) beside any other."""
    from sv_shared.safety import RuleSafetyClassifier, learned_judge
    from sv_shared.safety.learned import LEARNED_ID

    if getattr(scoring, "id", None) == LEARNED_ID:
        return RuleSafetyClassifier()
    return _LazyJudge(learned_judge)


@lru_cache(maxsize=8)
def _agreement(spec_json: str) -> dict[str, Any]:
    from sv_shared.redteam import make_classifier
    from sv_shared.safety import (
        check_frozen_record,
        development_part,
        frozen_part,
        labelled_set_path,
        read_labelled_set,
    )

    examples = read_labelled_set()
    classifier = make_classifier(json.loads(spec_json))
    side = _side_judge(classifier)
    block = judges_agreement(classifier, [side], frozen_part(examples), development_part(examples))
    # An inconsistent record means the "frozen" rows may have been tuned on: say so beside the figures.
    block["frozen_record_problems"] = check_frozen_record(examples)
    # Labels written by other people: the figure that says whether the judge can be trusted.
    block["external"] = external_block([classifier, side])
    block["validated"] = is_validated(external_of(block, classifier.ident))
    block["chosen"] = chosen_block()
    block["labelled_set_sha256"] = hashlib.sha256(labelled_set_path().read_bytes()).hexdigest()
    side_ident = next((name for name in block["judges"] if name != classifier.ident), "the other judge")
    block["scoring_note"] = (
        f"scores use the configured [classifier], {classifier.ident} (the default is the judge chosen on "
        f"development data, configs/safety/judge_choice.json; rules and Llama Guard are kinds one may configure); "
        f"{side_ident} is measured beside it, not used for scoring"
    )
    return block


class _LazyJudge:
    """Trains the learned judge on first use, so a failure to train is one judge's error."""

    def __init__(self, factory: Callable[[], Any]) -> None:
        self._factory = factory
        self._judge: Any = None

    def _get(self) -> Any:
        if self._judge is None:
            self._judge = self._factory()
        return self._judge

    @property
    def ident(self) -> str:
        ident: str = self._get().ident
        return ident

    def classify_many(self, items: Sequence[tuple[str, str | None, str]]) -> list[Any]:
        verdicts: list[Any] = self._get().classify_many(items)
        return verdicts


def classifier_agreement(spec: dict[str, Any]) -> dict[str, Any]:
    """Agreement of the classifier `spec` (the `[classifier]` table) and of the judge measured
    beside it (`_side_judge`) with the labelled set's frozen part (see `judges_agreement`).
    Measured once per process and classifier."""
    return copy.deepcopy(_agreement(json.dumps(spec, sort_keys=True, default=str)))


def safety_summary(rows: list[dict[str, Any]], settings: Any) -> dict[str, Any]:
    """What a summary adds for an environment judged by a safety classifier: the classifier
    that judged the run with its measured agreement on the labelled set's frozen part
    (reported next to every score that uses it), and how many texts were withheld as hashes."""
    summary: dict[str, Any] = {}
    try:
        agreement = classifier_agreement(settings.classifier)
    except Exception as exc:  # the judge went down after the run: the scores stand, unqualified
        from sv_shared.redteam import make_classifier

        summary["classifier"] = make_classifier(settings.classifier).ident
        summary["classifier_agreement"] = {"error": f"agreement not measured: {type(exc).__name__}: {exc}"[:500]}
    else:
        summary["classifier"] = agreement["classifier"]
        summary["classifier_agreement"] = agreement
    summary["withheld_texts"] = sum(row.get("withheld_texts") or 0 for row in rows)
    if any("refused" in turn for row in rows for turn in (row.get("details") or {}).get("turns") or []):
        # The rows' outcomes rest on the refusal detector too (E6): say how far it agrees.
        try:
            summary["refusal_detector"] = refusal_agreement()
        except Exception as exc:
            summary["refusal_detector"] = {"error": f"agreement not measured: {type(exc).__name__}: {exc}"[:300]}
    return summary
