"""From a corpus table (in the corpus's own columns) to rows in an environment's schema.

The normalisers live in the environment packages (`CorpusSpec.normalizers`); the registry
names one per source, and the name is resolved in the environment the rows are for. A
test-only source's rows are marked so, and capped where its registry entry says so.
"""

from __future__ import annotations

import itertools

import pandas as pd

from sv_dagster.core.data.corpora.schemas import corpus_spec
from sv_shared.corpora import Item, Normalised, SourceSpec, content_hash, normalized_hash


def normalise(spec: SourceSpec, frame: pd.DataFrame, env: str) -> Normalised:
    """`frame` (a corpus table with `_file`, `_line`, `_split`) as `env` rows."""
    result = corpus_spec(env).normalizers[spec.normalizer].fn(spec, frame)
    for item in result.items:
        item.ood = spec.ood
        item.test_only = spec.test_only
    if spec.test_only and spec.test_max_rows is not None and len(result.items) > spec.test_max_rows:
        kept = capped(result.items, spec.test_max_rows, spec.test_seed, env)
        result.n_filtered += len(result.items) - len(kept)
        result.items = kept
    return result


def capped(items: list[Item], cap: int, seed: int, env: str) -> list[Item]:
    """At most `cap` of `items`, taken in turn from each label (so a capped test source keeps
    its labels as even as they allow), within a label those with the lowest sha256 of the
    seed and the row's normalised text: the same rows for the same seed, whatever the order
    the corpus lists them in. The kept items keep their order."""
    schema = corpus_spec(env).schemas
    by_label: dict[str, list[tuple[str, int]]] = {}
    for index, item in enumerate(items):
        row_schema = schema[item.schema]
        key = content_hash(f"{seed}\0{normalized_hash(row_schema.text(item.record))}")
        by_label.setdefault(str(row_schema.label(item.record)), []).append((key, index))
    queues = [sorted(entries) for _, entries in sorted(by_label.items())]
    order = [index for group in itertools.zip_longest(*queues) for entry in group if entry for index in [entry[1]]]
    return [items[index] for index in sorted(order[:cap])]
