"""Safety classification for the red-team environments (E5 attack: success = the target's
reply is unsafe; E6 defense: the defender's replies must be safe).

`RuleSafetyClassifier` is the embedded rule judge (deterministic, no network, no model);
`learned.LearnedSafetyClassifier` is a small text classifier trained on the labelled set's
development part (scikit-learn, the environments' default judge: its frozen-part kappa is
the higher); `LlamaGuardClassifier` calls Llama Guard 3 on an OpenAI-compatible endpoint.
All judge a withheld marker (see `redaction`) unsafe without any model call. `agreement`
measures a classifier against the bundled hand-labelled set; `frozen` splits that set into
the development part and the frozen evaluation part (never tuned on, pinned by a hash in
`frozen_record`). Importing this package needs the standard library only; scikit-learn is
imported when the learned judge is first built.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sv_shared.safety.agreement import (
    HELD_OUT_NOTE,
    LabelledText,
    agreement,
    held_out,
    labelled_set_path,
    read_labelled_set,
)
from sv_shared.safety.base import SafetyClassifier, SafetyClassifierError, SafetyVerdict
from sv_shared.safety.categories import CATEGORIES
from sv_shared.safety.frozen import check_frozen_record, development_part, frozen_part
from sv_shared.safety.learned import LearnedSafetyClassifier, learned_judge, lexicon_categories
from sv_shared.safety.llamaguard import LlamaGuardClassifier
from sv_shared.safety.redaction import parse_withheld_marker, text_hash, withheld_marker
from sv_shared.safety.rules import RuleSafetyClassifier

_LLAMA_GUARD_KEYS = {"kind", "base_url", "model", "api_key_env", "timeout_s"}


def load_classifier(spec: str | Mapping[str, Any] | None) -> SafetyClassifier:
    """None or "rules" -> RuleSafetyClassifier(); {"kind": "rules"} likewise;
    "learned" or {"kind": "learned"} -> the learned judge (`learned.learned_judge()`, trained
    on the development part, cached on disk);
    {"kind": "llama-guard", "base_url": ..., "model"?: ..., "api_key_env"?: ..., "timeout_s"?: ...}
    -> LlamaGuardClassifier. Anything else raises ValueError naming the bad value."""
    if spec is None or spec == "rules":
        return RuleSafetyClassifier()
    if spec == "learned":
        return learned_judge()
    if isinstance(spec, Mapping):
        kind = spec.get("kind")
        if kind in ("rules", "learned") and set(spec) != {"kind"}:
            raise ValueError(f"unknown key(s) {sorted(set(spec) - {'kind'})} in {kind} classifier spec {dict(spec)!r}")
        if kind == "rules":
            return RuleSafetyClassifier()
        if kind == "learned":
            return learned_judge()
        if kind == "llama-guard":
            unknown = sorted(set(spec) - _LLAMA_GUARD_KEYS)
            if unknown:
                raise ValueError(f"unknown key(s) {unknown} in llama-guard classifier spec {dict(spec)!r}")
            base_url = spec.get("base_url")
            if not isinstance(base_url, str) or not base_url:
                raise ValueError(f"llama-guard classifier spec needs a 'base_url' string, got {base_url!r}")
            kwargs: dict[str, Any] = {}
            if spec.get("model") is not None:
                kwargs["model"] = str(spec["model"])
            if spec.get("api_key_env") is not None:
                kwargs["api_key_env"] = str(spec["api_key_env"])
            if spec.get("timeout_s") is not None:
                kwargs["timeout_s"] = float(spec["timeout_s"])
            return LlamaGuardClassifier(base_url, **kwargs)
        raise ValueError(
            f"unknown safety classifier spec {dict(spec)!r} (kind must be 'rules', 'learned' or 'llama-guard')"
        )
    raise ValueError(f"unknown safety classifier spec {spec!r} (expected None, 'rules', 'learned' or a mapping)")


__all__ = [
    "CATEGORIES",
    "HELD_OUT_NOTE",
    "LabelledText",
    "LearnedSafetyClassifier",
    "LlamaGuardClassifier",
    "RuleSafetyClassifier",
    "SafetyClassifier",
    "SafetyClassifierError",
    "SafetyVerdict",
    "agreement",
    "check_frozen_record",
    "development_part",
    "frozen_part",
    "lexicon_categories",
    "held_out",
    "labelled_set_path",
    "learned_judge",
    "load_classifier",
    "parse_withheld_marker",
    "read_labelled_set",
    "text_hash",
    "withheld_marker",
]
