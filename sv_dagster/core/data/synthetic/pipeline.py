"""One synthetic batch of any installed environment: what its `SyntheticSpec` reads (found by
the caller: `Upstream`) -> its `read_seeds` and `make_generator` -> the common pipeline
(`batch.run_batch`, or `columnar.run_columnar_batch` for a spec with a Parquet table)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, cast

from sv_dagster.core.data.synthetic.batch import BatchResult, BatchSpec, run_batch
from sv_dagster.core.data.synthetic.columnar import run_columnar_batch
from sv_dagster.core.data.synthetic.files import EXAMPLES_FILE, METADATA_FILE
from sv_dagster.core.data.synthetic.review import accepted_examples
from sv_dagster.core.envs import ENVS
from sv_shared import textrefs
from sv_shared.synthetic import PairedBatch, RowGenerator, SyntheticInputs, SyntheticSpec

TOURNAMENT_FILE = "tournament.json"


@dataclass
class Upstream:
    """Where a batch's seeds are (found by the caller, e.g. in the Dagster instance)."""

    dataset_dir: Path | None = None
    dataset_sample: bool | None = None
    """The curated dataset says it is SAMPLE data (None: unknown or none)."""
    paired_batch_dir: Path | None = None
    """The same partition's batch of the environment the spec pairs with."""
    failure_dirs: list[Path] = field(default_factory=list)
    tournament_dirs: list[Path] = field(default_factory=list)


def is_sample(synthetic: SyntheticSpec, upstream: Upstream) -> bool:
    """A batch is SAMPLE unless its spec says a real (non-sample) curated dataset makes it
    real and its seeds are one: the generators' templates are project-written."""
    return not (synthetic.real_with_real_dataset and upstream.dataset_sample is False)


def tournament_eval_dirs(folders: Sequence[Path]) -> list[Path]:
    """The eval folders of every round of the tournaments (their `tournament.json`)."""
    dirs: list[Path] = []
    for folder in folders:
        path = Path(folder) / TOURNAMENT_FILE
        if not path.is_file():
            continue
        for round_ in json.loads(path.read_text(encoding="utf-8")).get("rounds", []):
            dirs += [Path(p) for p in (round_.get("attack_eval"), round_.get("defense_eval")) if p]
    return dirs


def paired_batch(batch_dir: Path | None) -> PairedBatch | None:
    """A batch folder's accepted rows (reviewers' rejections excluded); None without a batch."""
    if batch_dir is None or not (Path(batch_dir) / METADATA_FILE).is_file():
        return None
    accepted = accepted_examples(Path(batch_dir))
    rows = [textrefs.hydrate_row(row, where=str(batch_dir)) for row in accepted.rows]
    return PairedBatch(f"synthetic/{accepted.env}", accepted.batch_id, rows, accepted.excluded, accepted.decision_ids)


def build_batch(
    spec: BatchSpec, upstream: Upstream, options: Mapping[str, Any] | None = None, *, write_jsonl: bool = True
) -> BatchResult:
    """`options`: the spec's run options by name (absent: the environment's defaults).
    `write_jsonl`: columnar batches also write examples.jsonl beside the Parquet table."""
    synthetic = ENVS[spec.env].synthetic
    if synthetic is None:
        raise ValueError(f"environment {spec.env!r} makes no synthetic data")
    options = dict(options or {})
    inputs = SyntheticInputs(
        dataset_dir=upstream.dataset_dir,
        failure_dirs=[*upstream.failure_dirs, *tournament_eval_dirs(upstream.tournament_dirs)],
        paired=paired_batch(upstream.paired_batch_dir),
        options=options,
    )
    seeds = synthetic.read_seeds(inputs)
    seed_files = [
        *(sorted(Path(upstream.dataset_dir).glob("*.jsonl")) if upstream.dataset_dir else []),
        *([Path(upstream.paired_batch_dir) / EXAMPLES_FILE] if upstream.paired_batch_dir else []),
    ]
    spec = replace(spec, by_reference=tuple(textrefs.texts_in_files(seed_files)))
    if synthetic.table:
        return run_columnar_batch(
            spec, seeds.data, seeds.sources, seeds.facts, seeds.rejects, options=options, write_jsonl=write_jsonl
        )
    # A spec without a table makes a RowGenerator (SyntheticSpec.make_generator).
    generator = cast(RowGenerator, synthetic.make_generator(seeds, options))
    return run_batch(spec, generator, seeds.facts, seeds.rejects)
