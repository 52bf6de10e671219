"""Synthetic data for the installed environments: the common pipeline, its spot-check review
and what downstream consumers read.

    from sv_dagster.core.data.synthetic import accepted_examples
    batch = accepted_examples(batch_dir)      # rows minus reviewer rejections, decision ids

See `pipeline` (one batch of an environment, through its `SyntheticSpec`), `batch` (the
common pipeline), `columnar` (Parquet batches), `review` (the queue and decisions),
`sampling` (seed models).
"""

from sv_dagster.core.data.synthetic.batch import BatchResult, BatchSpec, derive_seed
from sv_dagster.core.data.synthetic.pipeline import Upstream, build_batch, is_sample
from sv_dagster.core.data.synthetic.review import (
    AcceptedExamples,
    Decision,
    ReviewError,
    ReviewStatus,
    accepted_examples,
    read_decisions,
    record_decision,
    review_status,
    write_accepted,
)
from sv_shared.synthetic import Reject

__all__ = [
    "AcceptedExamples",
    "BatchResult",
    "BatchSpec",
    "Decision",
    "Reject",
    "ReviewError",
    "ReviewStatus",
    "Upstream",
    "accepted_examples",
    "build_batch",
    "derive_seed",
    "is_sample",
    "read_decisions",
    "record_decision",
    "review_status",
    "write_accepted",
]
