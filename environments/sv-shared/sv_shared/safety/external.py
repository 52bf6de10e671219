"""Third-party development rows for the learned judge, kept by reference.

PyRIT's harm-scale labels (`pyrit/datasets/scorer_evals/harm/`, human raters, MIT) with every
row whose response duplicates or nearly duplicates an external test response removed (the
pipeline's `sv_dagster.core.data.external_labels.development_rows`). The package ships only
`data/external_development.jsonl`: each row's labels with `[[sv-text sha256:...]]` markers in
place of the objective and the response (harmful text is never copied into the repository).
The texts come from the text store (`sv_shared.textrefs`), which the pipeline fills when it
reads the pinned wheel; on a machine where it has not yet, the store asks the pipeline's
registered text source to read it. The rows are checked against the frozen record's
`EXTERNAL_DEVELOPMENT` entry (count and content hash) once hydrated.

Standard library only.
"""

from __future__ import annotations

import dataclasses
from functools import lru_cache
from importlib import resources
from pathlib import Path

from sv_shared import textrefs
from sv_shared.safety.agreement import LabelledText, read_labelled_set
from sv_shared.safety.frozen import rows_sha256
from sv_shared.safety.frozen_record import EXTERNAL_DEVELOPMENT


def manifest_path() -> Path:
    return Path(str(resources.files("sv_shared.safety").joinpath("data", "external_development.jsonl")))


def hydrate_rows(rows: list[LabelledText], where: str) -> list[LabelledText]:
    """The rows with their markers replaced by the texts they name."""
    return [
        dataclasses.replace(
            row,
            text=textrefs.hydrate(row.text, where=f"{where} {row.id}"),
            context=None if row.context is None else textrefs.hydrate(row.context, where=f"{where} {row.id}"),
        )
        for row in rows
    ]


@lru_cache(maxsize=1)
def external_development_part() -> tuple[LabelledText, ...]:
    """The manifest's rows with their texts; ValueError when they are not the rows the frozen
    record pins, MissingTextError when the store lacks a text and no source could read it."""
    path = manifest_path()
    rows = hydrate_rows(read_labelled_set(path), str(path))
    found = (len(rows), rows_sha256(rows))
    if found != (EXTERNAL_DEVELOPMENT["n"], EXTERNAL_DEVELOPMENT["rows_sha256"]):
        raise ValueError(
            f"{path}: n={found[0]} sha256={found[1][:12]}, but the frozen record pins "
            f"n={EXTERNAL_DEVELOPMENT['n']} sha256={str(EXTERNAL_DEVELOPMENT['rows_sha256'])[:12]}"
        )
    return tuple(rows)
