"""Choose the safety judge that scores E5/E6 and the safety review, on development data only,
then measure the chosen judge once on the external test (see sv_dagster/core/evals/judge_choice.py).

The candidates: the rule judge; the learned judge as it was (trained on the labelled set's
development part alone); and the learned judge trained with PyRIT's development rows added,
with whole texts, with replies and requests cut to two lengths, and with one of its settings
changed at a time (`setting_variants`). Their kappa on the development rows decides; the
external test is read only for the judge chosen.

Usage: python scripts/choose_judge.py [--write]   (prints JSON; --write records it in
configs/safety/judge_choice.json). Takes ~4 minutes on 2 cores (56 trainings).
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
import time


def candidates() -> list:
    from sv_dagster.core.evals.judge_choice import Candidate, judge_verdicts, out_of_fold
    from sv_shared.safety import RuleSafetyClassifier, development_part
    from sv_shared.safety.learned import SETTINGS, train

    base = development_part()
    cut = ("max_reply_chars", "max_request_chars")
    before = {key: value for key, value in SETTINGS.items() if key not in cut}  # the judge's settings until now
    whole = {**SETTINGS, "max_reply_chars": None, "max_request_chars": None}
    short = {**SETTINGS, "max_reply_chars": 800, "max_request_chars": 300}
    oof = "out of fold (5 folds grouped by objective; each trained on the labelled set's development part and 4 folds)"
    return [
        Candidate("rules", "rules", judge_verdicts(RuleSafetyClassifier()), "as is (never trained on them)"),
        Candidate(
            "learned, labelled set only (as before)",
            None,
            judge_verdicts(train(base, before)),
            "as is (trained on the labelled set's development part only)",
        ),
        Candidate(
            "learned + PyRIT development rows, whole texts", None, out_of_fold(lambda r: train(r, whole), base), oof
        ),
        Candidate(
            f"learned + PyRIT development rows, reply cut to {SETTINGS['max_reply_chars']} and request to "
            f"{SETTINGS['max_request_chars']} characters",
            "learned",
            out_of_fold(lambda r: train(r), base),
            oof,
        ),
        Candidate(
            "learned + PyRIT development rows, reply cut to 800 and request to 300 characters",
            None,
            out_of_fold(lambda r: train(r, short), base),
            oof,
        ),
        *(
            Candidate(
                f"learned + PyRIT development rows, cut to {SETTINGS['max_reply_chars']}/"
                f"{SETTINGS['max_request_chars']}, {change}",
                None,
                out_of_fold(lambda r, settings=settings: train(r, settings), base),
                oof,
            )
            for change, settings in setting_variants(SETTINGS).items()
        ),
    ]


def setting_variants(settings: dict) -> dict[str, dict]:
    """The chosen judge's settings with one changed: tried on development data, in case the
    settings chosen on the labelled set alone no longer suit it with PyRIT's rows added."""
    changes = {
        "C=3": {"C": 3.0},
        "C=30": {"C": 30.0},
        "C=100": {"C": 100.0},
        "min_df=3": {"min_df": 3},
        "word 1-3-grams": {"word_ngrams": (1, 3)},
        "char 3-6-grams": {"char_ngrams": (3, 6)},
        "reply cut to 2,500": {"max_reply_chars": 2500},
        "request cut to 1 character (the reply alone)": {"max_request_chars": 1},
    }
    return {name: {**settings, **change} for name, change in changes.items()}


def choose_and_measure() -> dict:
    from sv_dagster.core.data.external_labels import external_development, external_test, training_problems
    from sv_dagster.core.evals.judge_choice import choose, development_reports
    from sv_dagster.core.evals.judge_validation import external_report, published_summary
    from sv_shared.redteam import make_classifier
    from sv_shared.safety.frozen import rows_sha256
    from sv_shared.safety.learned import THRESHOLD, training_rows

    started = time.perf_counter()
    dev = external_development()
    reports = development_reports(candidates(), dev.rows)
    chosen = choose(reports)
    kind = reports[chosen]["kind"]
    if not kind:
        raise SystemExit(f"the development data chose {chosen!r}, which no [classifier] kind builds yet: wire it first")
    judge = make_classifier({"kind": kind})
    record = {
        "chosen": chosen,
        "kind": kind,
        "classifier": judge.ident,
        "chosen_on": "Cohen's kappa on the development rows (the highest; never the external test)",
        "development": dev.provenance(),
        "candidates": reports,
    }
    if kind == "learned":
        rows = training_rows()
        problems = training_problems(rows)
        if problems:
            raise SystemExit(f"the learned judge's training rows reach the external test: {problems[:3]}")
        record["learned"] = {
            "n_training_rows": len(rows),
            "training_rows_sha256": rows_sha256(rows),
            "threshold": THRESHOLD,
        }
    # Measured once, after the choice.
    test = external_test()
    record["external"] = external_report(judge, test) | {"set": test.provenance()}
    record["published"] = published_summary()
    record["seconds"] = round(time.perf_counter() - started, 1)
    record["date"] = datetime.date.today().isoformat()
    record["command"] = "python scripts/choose_judge.py --write"
    return record


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--write", action="store_true", help="record the choice in configs/safety/judge_choice.json")
    args = parser.parse_args(argv)
    record = choose_and_measure()
    text = json.dumps(record, indent=1, sort_keys=True) + "\n"
    print(text)
    if args.write:
        from sv_dagster.core.evals.judge_choice import CHOICE_PATH

        CHOICE_PATH.write_text(text, encoding="utf-8")
        print(f"wrote {CHOICE_PATH}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
