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
    full["held_out"] = {key: value for key, value in agreement(classifier, held_out(read_labelled_set())).items()
                        if key in HEADLINE}
    return full


def classifier_agreement(spec: dict[str, Any]) -> dict[str, Any]:
    """Agreement of the classifier `spec` (the `[classifier]` table) with the labelled set
    sv-shared ships: accuracy, Cohen's kappa, unsafe precision/recall, over the whole set and
    (`held_out`) over its batch written after the rules were frozen. Measured once per
    process and classifier."""
    return _agreement(json.dumps(spec, sort_keys=True, default=str))
