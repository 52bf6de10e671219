"""The labelled set split into a development part and a frozen evaluation part.

The frozen part is the batch of the labelled set named by the last entry of `FREEZES`
(`frozen_record.py`): rows written after the judge's rules were frozen and never tuned on.
Every other row is the development part (the rules were written reading it, and a learned
judge may be trained on it). Agreement worth printing is agreement on the frozen part.

The record rule (checked by `check_frozen_record`, run by the tests):

1. Content: the frozen rows hash (`frozen_sha256`, canonical JSON of every field, sorted
   by id) to the last entry's `sha256`, with its `n`. Editing, adding or dropping a frozen
   row fails until the record says so.
2. Rules pinned to the freeze: the rule and lexicon files (`RULE_FILES`) hash to the last
   entry's `rules_sha256`. A rule edit after the freeze fails: whoever edited the rules may
   have read the frozen rows' disagreements, so those rows stop being unseen. The way out is
   a NEW entry appended to `FREEZES`: a new batch written after the edit (a new note prefix),
   with the new rules hash; the old frozen batch then joins the development part.
3. Append-only: every entry names a different batch, every earlier entry's batch still
   hashes to its recorded `sha256`, and every labelled row whose note names a batch at or
   after the first frozen one ("holdout5:", "holdout6:", ...) belongs to an entry. So the
   frozen part cannot be swapped for another batch by rewriting the last entry in place
   (the replaced batch would be left without an entry), and a rule edit cannot come with a
   re-frozen part unless both are recorded as a new entry.

Standard library only.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from importlib import resources
from typing import Any

from sv_shared.safety.agreement import LabelledText, read_labelled_set
from sv_shared.safety.frozen_record import FREEZES

RULE_FILES = ("rules.py", "categories.py")
"""The files whose content decides the rule judge's verdicts (patterns, lexicons, the
category taxonomy), relative to `sv_shared/safety/`."""

_BATCH = re.compile(r"^holdout(\d*):")


def canonical_rows(examples: Sequence[LabelledText]) -> str:
    """One canonical JSON line per row (every field), sorted by id: what the hash covers."""
    lines = [
        json.dumps(
            {
                "id": e.id,
                "text": e.text,
                "context": e.context,
                "role": e.role,
                "unsafe": e.unsafe,
                "categories": list(e.categories),
                "note": e.note,
            },
            ensure_ascii=False,
            sort_keys=True,
            separators=(",", ":"),
        )
        for e in sorted(examples, key=lambda e: e.id)
    ]
    return "\n".join(lines) + "\n"


def rows_sha256(examples: Sequence[LabelledText]) -> str:
    return hashlib.sha256(canonical_rows(examples).encode("utf-8")).hexdigest()


def rules_sha256() -> str:
    """sha256 over the rule and lexicon files (name and bytes of each, in `RULE_FILES` order)."""
    digest = hashlib.sha256()
    for name in RULE_FILES:
        digest.update(name.encode() + b"\0")
        digest.update(resources.files("sv_shared.safety").joinpath(name).read_bytes())
        digest.update(b"\0")
    return digest.hexdigest()


def frozen_batch(freezes: Sequence[Mapping[str, Any]] = FREEZES) -> str:
    """The note prefix of the frozen part (the last freeze's batch)."""
    return str(freezes[-1]["batch"])


def _in_batch(example: LabelledText, batch: str) -> bool:
    return example.note.startswith(batch)


def frozen_part(
    examples: Sequence[LabelledText] | None = None, freezes: Sequence[Mapping[str, Any]] = FREEZES
) -> list[LabelledText]:
    """The rows never tuned on (default: of the bundled set)."""
    examples = read_labelled_set() if examples is None else examples
    batch = frozen_batch(freezes)
    return [e for e in examples if _in_batch(e, batch)]


def development_part(
    examples: Sequence[LabelledText] | None = None, freezes: Sequence[Mapping[str, Any]] = FREEZES
) -> list[LabelledText]:
    """Every other row: the rules were developed on these; a learned judge trains on them."""
    examples = read_labelled_set() if examples is None else examples
    batch = frozen_batch(freezes)
    return [e for e in examples if not _in_batch(e, batch)]


def freeze_entry(batch: str, examples: Sequence[LabelledText] | None = None) -> dict[str, Any]:
    """The entry to append to `FREEZES` when a new batch is frozen against today's rules."""
    examples = read_labelled_set() if examples is None else examples
    rows = [e for e in examples if _in_batch(e, batch)]
    return {"batch": batch, "n": len(rows), "sha256": rows_sha256(rows), "rules_sha256": rules_sha256()}


def _batch_number(note: str) -> int | None:
    match = _BATCH.match(note)
    if match is None:
        return None
    return int(match.group(1) or 1)  # "holdout:" is the first batch


def check_frozen_record(
    examples: Sequence[LabelledText] | None = None,
    freezes: Sequence[Mapping[str, Any]] = FREEZES,
    rules_hash: str | None = None,
) -> list[str]:
    """Every way the record and the files disagree (empty: consistent). See the module
    docstring for the rule."""
    examples = read_labelled_set() if examples is None else examples
    rules_hash = rules_sha256() if rules_hash is None else rules_hash
    if not freezes:
        return ["no freeze recorded"]
    problems: list[str] = []
    batches = [str(entry["batch"]) for entry in freezes]
    if len(set(batches)) != len(batches):
        problems.append(f"a batch is frozen twice: {batches}")
    for entry in freezes:
        rows = [e for e in examples if _in_batch(e, str(entry["batch"]))]
        if not rows:
            problems.append(f"batch {entry['batch']!r}: no labelled row has that note prefix")
            continue
        if len(rows) != entry["n"] or rows_sha256(rows) != entry["sha256"]:
            problems.append(
                f"batch {entry['batch']!r}: content changed since it was frozen "
                f"(n={len(rows)} sha256={rows_sha256(rows)[:12]}, recorded n={entry['n']} "
                f"sha256={str(entry['sha256'])[:12]}); freeze a new batch instead"
            )
    if freezes[-1]["rules_sha256"] != rules_hash:
        problems.append(
            f"the rule/lexicon files ({', '.join(RULE_FILES)}) changed after batch "
            f"{freezes[-1]['batch']!r} was frozen (rules sha256 {rules_hash[:12]}, recorded "
            f"{str(freezes[-1]['rules_sha256'])[:12]}): the frozen rows may have been tuned on; "
            "append a freeze of a new batch written after the change"
        )
    first = min((n for n in map(_batch_number, batches) if n is not None), default=None)
    if first is not None:
        unrecorded = sorted(
            {
                e.note.split(":", 1)[0] + ":"
                for e in examples
                if (number := _batch_number(e.note)) is not None
                and number >= first
                and not any(_in_batch(e, b) for b in batches)
            }
        )
        if unrecorded:
            problems.append(f"batch(es) {unrecorded} written after the first freeze have no entry in the record")
    return problems
