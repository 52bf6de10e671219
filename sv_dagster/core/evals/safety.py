"""The safety classifier's measured agreement, for the red-team environments' summaries."""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Any

HEADLINE = ("accuracy", "cohen_kappa", "unsafe_precision", "unsafe_recall", "n")


@lru_cache(maxsize=8)
def _agreement(spec_json: str) -> dict[str, Any]:
    from sv_shared.redteam import make_classifier
    from sv_shared.safety import agreement, held_out, read_labelled_set

    classifier = make_classifier(json.loads(spec_json))
    full = agreement(classifier)
    full["held_out"] = {
        key: value for key, value in agreement(classifier, held_out(read_labelled_set())).items() if key in HEADLINE
    }
    return full


def classifier_agreement(spec: dict[str, Any]) -> dict[str, Any]:
    """Agreement of the classifier `spec` (the `[classifier]` table) with the labelled set
    sv-shared ships: accuracy, Cohen's kappa, unsafe precision/recall, over the whole set and
    (`held_out`) over its batch written after the rules were frozen. Measured once per
    process and classifier."""
    return _agreement(json.dumps(spec, sort_keys=True, default=str))


def safety_summary(rows: list[dict[str, Any]], settings: Any) -> dict[str, Any]:
    """What a summary adds for an environment judged by a safety classifier: errors by
    kind, the classifier that judged the run with its measured agreement with the
    labelled set the project ships (reported next to every score that uses it), and how
    many texts were withheld as hashes."""
    summary: dict[str, Any] = {
        "n_errors_by_kind": {
            kind: sum(1 for row in rows if row.get("error_kind") == kind)
            for kind in ("model", "counterpart", "judge", "scoring")
        }
    }
    try:
        agreement = classifier_agreement(settings.classifier)
    except Exception as exc:  # the judge went down after the run: the scores stand, unqualified
        from sv_shared.redteam import make_classifier

        summary["classifier"] = make_classifier(settings.classifier).ident
        summary["classifier_agreement"] = {"error": f"agreement not measured: {type(exc).__name__}: {exc}"[:500]}
    else:
        summary["classifier"] = agreement["classifier"]
        summary["classifier_agreement"] = {key: agreement.get(key) for key in HEADLINE} | {
            "labelled_set_sha256": agreement["labelled_set"]["sha256"],
            "held_out": agreement["held_out"],
        }
    summary["withheld_texts"] = sum(row.get("withheld_texts") or 0 for row in rows)
    return summary
