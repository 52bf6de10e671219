"""From a corpus table (in the corpus's own columns) to rows in an environment's schema.

The normalisers live in the environment packages (`CorpusSpec.normalizers`); the registry
names one per source, and the name is resolved in the environment the rows are for.
"""

from __future__ import annotations

import pandas as pd

from sv_dagster.core.data.corpora.schemas import corpus_spec
from sv_shared.corpora import Normalised, SourceSpec


def normalise(spec: SourceSpec, frame: pd.DataFrame, env: str) -> Normalised:
    """`frame` (a corpus table with `_file`, `_line`, `_split`) as `env` rows."""
    result = corpus_spec(env).normalizers[spec.normalizer].fn(spec, frame)
    for item in result.items:
        item.ood = spec.ood
    return result
