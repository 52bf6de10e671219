"""The synthetic rows a training run may use: the latest materialized batch of an
environment (any daily partition), minus every row a spot-check reviewer rejected (all of
it when the batch was rejected). The decisions applied are returned, so `sft_data` records
them in its provenance: a rejection is visible in the lineage of every checkpoint after it.
A batch whose review is still pending is used and marked so."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import dagster as dg


def accepted_batch(instance: dg.DagsterInstance, env: str, into: Path) -> dict[str, Any] | None:
    from sv_dagster.core.synthetic.events import latest_record, record_path, record_version, synthetic_key
    from sv_dagster.core.synthetic.review import batch_metadata, write_accepted

    record = latest_record(instance, synthetic_key(env))
    path = record_path(record)
    if path is None or not (path / "metadata.json").is_file():
        return None
    accepted = write_accepted(path, into)
    meta = batch_metadata(path)
    return {
        "path": str(into),
        "batch_dir": str(path),
        "partition": accepted.partition,
        "batch_id": accepted.batch_id,
        "data_version": record_version(record),
        "n_rows": len(accepted.rows),
        "n_excluded": len(accepted.excluded),
        "review_state": accepted.review.state,
        "decision_ids": accepted.decision_ids,
        "sample": bool(meta.get("sample", True)),
    }
