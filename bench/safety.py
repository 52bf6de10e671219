"""Throughput of the safety judge the red-team environments score with, on ONE core.

The judge is built the way E5 builds it: `make_classifier(classifier_spec(...))` of
sv_env_redteam_attack's rewards.toml (the learned judge by default). E5/E6 score every
rollout with it, so it must keep up with the scorer: target >= 2,000 texts/s for typical
300-1000-character replies. The bundled labelled texts are short (~150 chars), so each is
repeated to 600-1000 characters (the typical reply size) before timing; the figure for the
texts as they are is reported too. Timed two ways: batched (`classify_many`) and one text per
call (`classify`, as the dialogues' `Judge.judge` calls it). The rule judge is timed beside it
(`rules_*`) on the same texts, in the same process, so the two figures share the machine's load.

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
    """Texts per second of `classify_many` over `items`, repeated for `seconds` at least."""
    done = 0
    start = time.perf_counter()
    while True:
        classifier.classify_many(items)
        done += len(items)
        elapsed = time.perf_counter() - start
        if elapsed >= seconds:
            return done / elapsed, done


def _rate_single(classifier, items, seconds: float) -> float:
    """Texts per second of `classify`, one text per call."""
    done = 0
    start = time.perf_counter()
    while True:
        for text, context, role in items:
            classifier.classify(text, context=context, role=role)
        done += len(items)
        elapsed = time.perf_counter() - start
        if elapsed >= seconds:
            return done / elapsed


def scoring_judge():
    """(the judge E5 scores with, the reward file that names it)."""
    from importlib import resources

    from sv_shared.redteam import classifier_spec, make_classifier
    from sv_shared.rewardconfig import read_reward_toml

    path = resources.files("sv_env_redteam_attack") / "rewards.toml"
    return make_classifier(classifier_spec(read_reward_toml(path))), path


def _shown(path: Path) -> str:
    """`path` relative to the repository when it lies inside it (an editable install)."""
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def typical_items(examples) -> list[tuple[str, str | None, str]]:
    """The labelled texts repeated to 600-1000 characters, a typical reply's length (agent
    texts keep their context, as in scoring)."""
    typical = []
    for e in examples:
        text = e.text
        while len(text) < 600:
            text = text + "\n" + e.text
        typical.append((text[:1000], e.context, e.role))
    return typical


def classifier_throughput(seconds: float = 3.0) -> dict:
    """Texts per second of the scoring judge and of the rule judge on one core, over the
    labelled texts repeated to typical reply length (agent texts keep their context, as in
    scoring), batched and one per call."""
    from sv_shared.safety import RuleSafetyClassifier, read_labelled_set

    cpu = _pin_to_one_core()
    classifier, reward_file = scoring_judge()
    rules = RuleSafetyClassifier()
    examples = read_labelled_set()
    typical = typical_items(examples)
    raw = [(e.text, e.context, e.role) for e in examples]
    verdicts = classifier.classify_many(typical)  # warm-up (and the learned judge's compiled form)
    rules.classify_many(typical)
    rate, done = _rate(classifier, typical, seconds)
    single = _rate_single(classifier, typical, seconds)
    raw_rate, _ = _rate(classifier, raw, max(0.5, seconds / 3))
    rules_rate, _ = _rate(rules, typical, seconds)
    rules_single = _rate_single(rules, typical, seconds)
    return {
        "classifier": classifier.ident,
        "reward_file": _shown(Path(str(reward_file))),
        "texts_per_s": round(rate, 1),
        "texts_per_s_single": round(single, 1),
        "n_texts": len(typical),
        "texts_classified": done,
        "mean_chars": round(sum(len(t) for t, _, _ in typical) / len(typical), 1),
        # unsafe verdicts also name their hazard (the lexicon, else a category model): slower
        "unsafe_share": round(sum(v.unsafe for v in verdicts) / len(verdicts), 3),
        "texts_per_s_unpadded": round(raw_rate, 1),
        "mean_chars_unpadded": round(sum(len(e.text) for e in examples) / len(examples), 1),
        "rules_classifier": rules.ident,
        "rules_texts_per_s": round(rules_rate, 1),
        "rules_texts_per_s_single": round(rules_single, 1),
        "pinned_cpu": cpu,
        "load_average": [round(x, 2) for x in os.getloadavg()],
        "target_texts_per_s": 2000,
    }


if __name__ == "__main__":
    print(json.dumps(classifier_throughput(), indent=2))
