"""Throughput of the embedded safety classifier (RuleSafetyClassifier) on ONE core.

The E5/E6 environments score every rollout with it, so it must keep up with the scorer:
target >= 2,000 texts/s for typical 300-1000-character replies. The bundled labelled texts
are short (~150 chars), so each is repeated to ~600-700 characters (the typical reply size)
before timing; the figure for the texts as they are is reported too.

Usage: python bench/safety.py   (prints JSON)
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "environments" / "sv-shared"))


def _pin_to_one_core() -> int | None:
    """Pin this process to its first allowed CPU (Linux); returns it, or None if unsupported."""
    if not hasattr(os, "sched_getaffinity"):
        return None
    cpu = min(os.sched_getaffinity(0))
    os.sched_setaffinity(0, {cpu})
    return cpu


def _rate(classifier, items, seconds: float) -> tuple[float, int]:
    done = 0
    start = time.perf_counter()
    while True:
        classifier.classify_many(items)
        done += len(items)
        elapsed = time.perf_counter() - start
        if elapsed >= seconds:
            return done / elapsed, done


def classifier_throughput(seconds: float = 3.0) -> dict:
    """Texts per second of RuleSafetyClassifier on one core, over the labelled texts repeated
    to typical reply length (agent texts keep their context, as in scoring)."""
    from sv_shared.safety import RuleSafetyClassifier, read_labelled_set

    cpu = _pin_to_one_core()
    classifier = RuleSafetyClassifier()
    examples = read_labelled_set()
    typical = []
    for e in examples:
        text = e.text
        while len(text) < 600:
            text = text + "\n" + e.text
        typical.append((text[:1000], e.context, e.role))
    raw = [(e.text, e.context, e.role) for e in examples]
    classifier.classify_many(typical)  # warm-up
    rate, done = _rate(classifier, typical, seconds)
    raw_rate, _ = _rate(classifier, raw, max(0.5, seconds / 3))
    return {
        "classifier": classifier.ident,
        "texts_per_s": round(rate, 1),
        "n_texts": len(typical),
        "texts_classified": done,
        "mean_chars": round(sum(len(t) for t, _, _ in typical) / len(typical), 1),
        "texts_per_s_unpadded": round(raw_rate, 1),
        "mean_chars_unpadded": round(sum(len(e.text) for e in examples) / len(examples), 1),
        "pinned_cpu": cpu,
        "target_texts_per_s": 2000,
    }


if __name__ == "__main__":
    print(json.dumps(classifier_throughput(), indent=2))
