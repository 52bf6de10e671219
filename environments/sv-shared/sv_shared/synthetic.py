"""The synthetic-data contract: how an environment package makes its daily synthetic batch.

An environment's `SyntheticSpec` (its `Environment.synthetic`) says what its
`synthetic/<short>` asset is (description, default size, kinds), what it reads (its own
curated dataset, earlier defender failures in other environments' eval results and the
tournaments, another environment's batch of the same day), when a batch is SAMPLE data,
and how its generator is built: `read_seeds(inputs) -> Seeds`, then
`make_generator(seeds, options)`. The pipeline does the rest the same way for every
environment: optional model sampling, validation through the generator, the spot-check
queue, the files and metadata.json.

A generator is a `RowGenerator` (candidates checked one by one, written as examples.jsonl)
or, for a spec with a `table`, a `ColumnarGenerator` (numpy columns made, checked and
written as Parquet in chunks). Every candidate ends as a row or as a `Reject` with its
stage and reason. Plain types only: the contract knows nothing of the pipeline.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol

from sv_shared.jsonl import json_objects

Row = dict[str, Any]
TRAIN_FILE = "train.jsonl"
"""A curated dataset folder's train split: seeds come from it only (a synthetic variant of
a test example in training data would leak into the evaluation)."""


@dataclass
class Reject:
    """A candidate (or seed row) that did not become a row, and why."""

    id: str
    stage: str
    """template | sampling | validation | verification | seed | leakage"""
    reason: str
    source: str | None = None
    origin: str = "template"
    model: str | None = None
    temperature: float | None = None
    withheld: str | None = None
    """Hash marker of model text judged unsafe (the red-team environments): the text itself is never stored."""

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v is not None}


@dataclass
class Outcome:
    """A checked candidate: its row, or the stage and reason it was rejected at."""

    row: Row | None
    stage: str | None = None
    reason: str | None = None
    withheld: str | None = None


class RowGenerator(Protocol):
    """A generator whose candidates become rows one by one (written as examples.jsonl)."""

    generator_id: str
    verifier: str

    def templates(self, n: int, rng: random.Random, id_prefix: str) -> tuple[list[Any], list[Reject]]: ...

    def candidate_id(self, candidate: Any) -> str: ...

    def variation_prompt(self, candidate: Any) -> str | None: ...

    def vary(self, candidate: Any, text: str, new_id: str, rng: random.Random) -> Any: ...

    def check(self, candidates: Sequence[Any]) -> list[Outcome]: ...

    def tags_holder(self, row: Row) -> dict[str, Any]: ...

    def tags(self, row: Row) -> tuple[str, str, int]:
        """(label, scenario, difficulty 0..2) for the counts in metadata.json."""
        ...

    def versions(self) -> dict[str, Any]: ...


class ColumnarGenerator(Protocol):
    """A generator whose candidates are columns (numpy arrays by column name), made,
    checked and written in chunks. Candidate columns hold at least `label`, `scenario`,
    `origin` and `seed_source`; the pipeline adds `id`, `seed_model` and (kept rows)
    `difficulty`, and sets `origin`, `seed_model` and `temperature` on model rows."""

    generator_id: str
    verifier: str

    def columns(self) -> list[tuple[str, str]]:
        """The table's columns in order, (name, type) with type one of string, int64,
        float64, bool; the pipeline appends synthetic, sample, partition and batch_id."""
        ...

    def templates(self, n: int, rng: Any) -> Any:
        """`n` template candidates (`rng` is a numpy Generator)."""
        ...

    def check(self, cols: Any) -> tuple[Any, Any]:
        """(validation, verification) reasons per row, None where the row passes."""
        ...

    def take(self, cols: Any, index: Any) -> Any: ...

    def difficulty(self, cols: Any) -> Any:
        """Difficulty 0..2 per kept row."""
        ...

    def variation_prompts(self, rng: random.Random, k: int) -> list[tuple[Any, str]]:
        """(key, prompt) for up to `k` model variations."""
        ...

    def parse_variation(self, text: str, key: Any) -> Row:
        """A model's reply as one candidate (ValueError: unusable)."""
        ...

    def columns_from(self, rows: Sequence[Row]) -> tuple[Any, list[tuple[int, str]]]:
        """Parsed variations as columns, and (index, reason) for those that cannot be."""
        ...

    def counts(self) -> dict[str, Any]:
        """The generator's own counts for metadata.json (e.g. the seed rows it varies)."""
        ...

    def settings(self) -> dict[str, Any]:
        """Its knobs, recorded in metadata.json as `options`."""
        ...

    def versions(self) -> dict[str, Any]: ...


@dataclass
class PairedBatch:
    """Another environment's synthetic batch of the same partition, as reviewers left it."""

    asset: str
    """Its asset key as a string (`synthetic/<short>`)."""
    batch_id: str
    rows: list[Row]
    """Its accepted rows: reviewers' rejections excluded."""
    excluded: list[str] = field(default_factory=list)
    decision_ids: list[str] = field(default_factory=list)


@dataclass
class SyntheticInputs:
    """What the pipeline found for a batch to start from (what the spec says it reads)."""

    dataset_dir: Path | None = None
    """The environment's curated dataset folder (seeds come from its `TRAIN_FILE`)."""
    failure_dirs: list[Path] = field(default_factory=list)
    """Eval folders (`results.jsonl`) that may hold earlier defender failures: those of the
    environments in `failures_from`, then the rounds of the tournaments."""
    paired: PairedBatch | None = None
    """The same partition's batch of the environment in `pairs_with` (None: none yet)."""
    options: Mapping[str, Any] = field(default_factory=dict)
    """Run options (the spec's `options` and the pipeline's own knobs), by name."""


@dataclass
class Seeds:
    """What a generator starts from, as read by the environment's `read_seeds`."""

    data: Any = None
    """In the environment's own terms (seed files, goal-tree roots, columns of seed rows)."""
    facts: dict[str, Any] = field(default_factory=dict)
    """Where the seeds came from, for metadata.json (`seeds`)."""
    rejects: list[Reject] = field(default_factory=list)
    """Unusable seed rows, each naming its file and line."""
    sources: list[str] = field(default_factory=list)
    """Columnar seeds: where each seed row came from (file:line)."""


@dataclass(frozen=True)
class SyntheticOption:
    """A run-config option of the synthetic assets that this environment reads."""

    name: str
    default: bool | int | float | str
    description: str
    gt: float | None = None
    """Exclusive lower bound, checked on the run config."""
    le: float | None = None
    """Inclusive upper bound, checked on the run config."""


@dataclass(frozen=True)
class SyntheticSpec:
    """How an environment makes its daily synthetic batch."""

    description: str
    """What the generator makes and how it is labelled (the asset's description)."""
    batch_size: int
    """Template candidates per daily batch unless the run config says otherwise."""
    read_seeds: Callable[[SyntheticInputs], Seeds]
    """What the pipeline found -> the seeds, where they came from, the unusable seed rows."""
    make_generator: Callable[[Seeds, Mapping[str, Any]], RowGenerator | ColumnarGenerator]
    """(seeds, run options) -> the generator: a `ColumnarGenerator` when `table` is set."""
    kinds: tuple[str, ...] = ("json",)
    """What the asset writes (Dagster kinds)."""
    reads_dataset: bool = False
    """Seeds from its own curated dataset (`SyntheticInputs.dataset_dir`)."""
    failures_from: tuple[str, ...] = ()
    """env_ids whose eval results may hold earlier defender failures it reads."""
    failures_from_tournaments: bool = False
    """Also the tournaments' rounds."""
    pairs_with: str | None = None
    """env_id of the environment whose batch of the same partition it pairs with."""
    real_with_real_dataset: bool = False
    """A batch is SAMPLE data (its templates are project-written) unless this is set and
    the curated dataset it seeds from is not SAMPLE data."""
    options: tuple[SyntheticOption, ...] = ()
    """Its run-config options (passed to `read_seeds` and `make_generator` by name)."""
    table: str | None = None
    """Columnar batches: the Parquet table's name (`<table>.parquet`, beside examples.jsonl)."""
    table_rows: Callable[[Iterable[Mapping[str, Any]]], Iterator[Row]] | None = None
    """Columnar batches: table records -> rows in the environment's dataset schema."""


def seed_reject(where: str, reason: str) -> Reject:
    """An unusable seed row, named by its `file:line` (or file)."""
    return Reject(id=f"seed:{where}", stage="seed", reason=reason, source=where)


def read_jsonl_rows(path: Path, rejects: list[Reject]) -> list[tuple[str, Row]]:
    """(path:line, row) for every JSON object line; other lines become rejects."""
    errors: list[str] = []
    rows = [(where, row) for _, where, row in json_objects(path, errors)]
    for error in errors:
        where, _, reason = error.partition(": ")
        rejects.append(seed_reject(where, reason))
    return rows


def research_row_problem(row: Row, allowed: Sequence[str]) -> str | None:
    """What is wrong with a common research-JSONL row ({id, question, answer, info}) as
    sv_shared's reader checks it (None: nothing)."""
    if not isinstance(row.get("id"), str) or not row["id"]:
        return "'id' must be a non-empty string"
    if not isinstance(row.get("question"), str) or not row["question"].strip():
        return "missing or empty 'question'"
    if row.get("answer") not in allowed:
        return f"answer {row.get('answer')!r} not one of {list(allowed)}"
    if not isinstance(row.get("info"), dict):
        return "'info' must be an object"
    return None


class RowCandidates:
    """For a `RowGenerator` whose candidates are already research-JSONL rows: the
    package's synthetic module (`self.s`) words and parses the model's variation."""

    s: Any

    def candidate_id(self, candidate: Any) -> str:
        candidate_id: str = candidate["id"]
        return candidate_id

    def variation_prompt(self, candidate: Any) -> str | None:
        prompt: str | None = self.s.variation_prompt(candidate)
        return prompt

    def vary(self, candidate: Any, text: str, new_id: str, rng: random.Random) -> Any:
        return self.s.parse_variation(candidate, text, new_id)
