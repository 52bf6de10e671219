"""A batch folder's files: their names, and reading a columnar batch's Parquet table (the
runner writes them, the review and training read them)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

QUEUE_FILE = "spot_check.jsonl"
METADATA_FILE = "metadata.json"
EXAMPLES_FILE = "examples.jsonl"
DEFAULT_CHUNK_ROWS = 20_000
"""Rows per chunk a columnar batch is generated, checked and read in."""
TableRows = Callable[[Iterable[Mapping[str, Any]]], Iterator[dict[str, Any]]]


def rows_from_parquet(path: Path, table_rows: TableRows, ids: set[str] | None = None) -> Iterator[dict[str, Any]]:
    """A batch table's rows in the environment's schema (only `ids` when given), read batch by batch."""
    handle = pq.ParquetFile(path)
    for batch in handle.iter_batches(batch_size=DEFAULT_CHUNK_ROWS):
        table = pa.Table.from_batches([batch])
        if ids is not None:
            table = table.filter(pc.is_in(table["id"], value_set=pa.array(sorted(ids), pa.string())))
        yield from table_rows(table.to_pylist())
