"""Synthetic data for the six environments: the common pipeline, its spot-check review and
what downstream consumers read.

    from sv_dagster.core.synthetic import accepted_examples
    batch = accepted_examples(batch_dir)      # rows minus reviewer rejections, decision ids

See `batch` (the pipeline), `generators`/`e1` (the environments), `review` (the queue and
decisions), `seeds` (what generators start from), `sampling` (seed models).
"""

from sv_dagster.core.synthetic.batch import BatchResult, BatchSpec, Reject, derive_seed
from sv_dagster.core.synthetic.pipeline import DEFAULT_BATCH_SIZES, Options, Upstream, build_batch
from sv_dagster.core.synthetic.review import (
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

__all__ = [
    "DEFAULT_BATCH_SIZES",
    "AcceptedExamples",
    "BatchResult",
    "BatchSpec",
    "Decision",
    "Options",
    "Reject",
    "ReviewError",
    "ReviewStatus",
    "Upstream",
    "accepted_examples",
    "build_batch",
    "derive_seed",
    "read_decisions",
    "record_decision",
    "review_status",
    "write_accepted",
]
