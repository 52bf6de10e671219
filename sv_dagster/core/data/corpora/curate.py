"""Curating normalised corpus rows into an environment's dataset files.

De-duplication by content hash and by normalised-text hash (near-duplicates: re-cased,
re-spaced, re-punctuated copies), first occurrence kept, a duplicate with another label
recorded as a reject; stable hash splits (the normalised hash picks the bucket, so an item
never moves and near-duplicates share a split); OOD sources kept apart. When the
environment's bundled task set is the `test` split, corpus rows identical (exactly or after
normalisation) to a test item are dropped, and the corpus rows that hash into the test
bucket are written as `corpus_test` rather than entering train. A test-only source's rows
(`Item.test_only`) join `test` whatever their hash, and corpus rows equal to one of them are
dropped like duplicates of the bundled test set. Rows of a schema with a file of its own
(`RowSchema.file`) go to that file, each with its bucket as `split`.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from sv_dagster.core.data.corpora.schemas import row_schemas
from sv_shared.corpora import Item, RowSchema, content_hash, normalized_hash, split_for

SPLITS = ("train", "dev", "test")


@dataclass
class Curated:
    files: dict[str, list[dict[str, Any]]]
    """File name (train, dev, test, corpus_test, ood, or a schema's own file) -> rows."""
    rejects: list[dict[str, Any]]
    stats: dict[str, Any] = field(default_factory=dict)
    label_counts: dict[str, dict[str, int]] = field(default_factory=dict)
    bucket_counts: dict[str, int] = field(default_factory=dict)
    """Corpus rows (not OOD) per hash bucket: what the split-proportion check reads."""


def held_out_hashes(rows: list[dict[str, Any]], schema: RowSchema) -> tuple[set[str], set[str]]:
    exact, norm = set(), set()
    for row in rows:
        text = schema.text(row)
        exact.add(content_hash(text))
        norm.add(normalized_hash(text))
    return exact, norm


def curate_items(
    items: list[Item],
    *,
    bundled_test: list[dict[str, Any]] | None,
    test_schema: str,
    sample: bool,
    dev_frac: float = 0.1,
    test_frac: float = 0.2,
) -> Curated:
    schemas = row_schemas()
    files: dict[str, list[dict[str, Any]]] = {}
    rejects: list[dict[str, Any]] = []
    held_exact: set[str] = set()
    held_norm: set[str] = set()
    if bundled_test is not None:
        held_exact, held_norm = held_out_hashes(bundled_test, schemas[test_schema])
        for row in bundled_test:
            schemas[test_schema].mark_sample(row, sample or bool(schemas[test_schema].sample_flag(row)))
        files["test"] = bundled_test
    seen: dict[str, Any] = {}
    counts: Counter[str] = Counter()
    buckets: Counter[str] = Counter()
    # Test-only sources first: their rows are held out, so a corpus row equal to one of them
    # is dropped like a duplicate of the bundled test set, wherever it comes in the list.
    items = sorted(items, key=lambda item: not item.test_only)
    for item in items:
        schema = schemas[item.schema]
        text = schema.text(item.record)
        exact, norm = content_hash(text), normalized_hash(text)
        if exact in held_exact or norm in held_norm:
            counts["duplicates_of_test"] += 1
            continue
        if item.test_only:
            held_exact.add(exact)
            held_norm.add(norm)
        label = schema.label(item.record)
        key = f"{item.schema}:{norm}"
        if key in seen:
            counts["duplicates"] += 1
            if seen[key] != label:
                rejects.append(
                    {
                        "source": item.source,
                        "ref": item.ref,
                        "reason": f"duplicate of an earlier row with another label ({seen[key]!r} vs {label!r})",
                    }
                )
            continue
        seen[key] = label
        bucket = split_for(norm, dev_frac, test_frac)
        split = "ood" if item.ood else "test" if item.test_only else bucket
        if not item.ood and not item.test_only:
            buckets[bucket] += 1
        record = dict(item.record)
        schema.mark_sample(record, sample)
        schema.annotate(record, split=split, content_hash=exact, normalized_hash=norm)
        if schema.file is not None:
            name = schema.file
        elif split == "test" and bundled_test is not None and not item.test_only:
            name = "corpus_test"
        else:
            name = split
        if item.test_only:
            counts[f"test_only:{item.source}"] += 1
        files.setdefault(name, []).append(record)
        counts[f"kept:{item.source}"] += 1
    own_files = {schema.file: schema for schema in schemas.values() if schema.file is not None}
    label_counts = {
        name: dict(sorted(Counter(str(own_files.get(name, schemas[test_schema]).label(row)) for row in rows).items()))
        for name, rows in files.items()
    }
    stats = {
        "n_corpus_rows": len(items),
        "n_duplicates_dropped": counts["duplicates"],
        "n_duplicates_of_test_dropped": counts["duplicates_of_test"],
        "kept_by_source": {k.split(":", 1)[1]: v for k, v in counts.items() if k.startswith("kept:")},
        "test_only_by_source": {k.split(":", 1)[1]: v for k, v in counts.items() if k.startswith("test_only:")},
    }
    return Curated(files, rejects, stats, label_counts, {b: buckets.get(b, 0) for b in SPLITS})


def balance_table(counts: dict[str, dict[str, int]]) -> str:
    """Markdown: one row per split/file, one column per label."""
    labels = sorted({label for row in counts.values() for label in row})
    lines = ["| split | " + " | ".join(labels) + " | total |", "|---" * (len(labels) + 2) + "|"]
    for split, row in counts.items():
        lines.append(
            f"| {split} | " + " | ".join(str(row.get(label, 0)) for label in labels) + f" | {sum(row.values())} |"
        )
    return "\n".join(lines)
