"""dataset/<env> as a plain function: corpora in (each in its own layout), the environment's
dataset files out, with the curation report the asset shows.

Which rows form the `test` split (`test_source`, among the environment's
`CorpusSpec.test_sources`, the first by default):
- "corpora": the corpus rows in the test hash bucket.
- "bundled": the environment package's own task set, what the demo, `vf-eval` and the
  regression baselines score. Corpus rows then fill train and dev, and those in the test
  bucket are written as `corpus_test` (never trained on either way).
Either way the rows of a test-only source (`test_only` in the registry: real files kept
for testing, e.g. Terrascan's Terraform fixtures) join `test` under their source's name.
Corpus rows that are not tasks (`CorpusSpec.extra_schemas`) go to files of their own, each
row tagged with its bucket. An environment with its own `curate` writes its files itself.
"""

from __future__ import annotations

import json
import tempfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from sv_dagster.core.data.corpora.curate import balance_table, curate_items
from sv_dagster.core.data.corpora.normalize import normalise
from sv_dagster.core.data.corpora.schemas import corpus_spec
from sv_dagster.core.data.user_dataset import UserRows
from sv_dagster.core.envs import ENVS
from sv_shared import textrefs
from sv_shared.corpora import Curation, Item, Normalised, RowSchema, SourceSpec
from sv_shared.errors import UserError


class DatasetConfigError(UserError, ValueError):
    """A dataset configuration that cannot be built; raised before any work."""


@dataclass
class CorpusInput:
    spec: SourceSpec
    frame: pd.DataFrame
    sample: bool
    data_version: str | None = None


@dataclass
class DatasetBuild:
    files: dict[str, Path]
    report: dict[str, Any]
    rejects: list[dict[str, Any]] = field(default_factory=list)
    balance_markdown: str = ""


def check_config(env: str, *, dev_frac: float, test_frac: float, test_source: str | None) -> str:
    choices = corpus_spec(env).test_sources
    choice = test_source or choices[0]
    if choice not in choices:
        raise DatasetConfigError(f"dataset/{env}: test_source must be one of {choices}, got {choice!r}")
    if dev_frac < 0 or test_frac < 0 or dev_frac + test_frac >= 1:
        raise DatasetConfigError(f"dataset/{env}: dev_frac + test_frac must be below 1 (got {dev_frac} + {test_frac})")
    return choice


def write_jsonl(path: Path, rows: list[dict[str, Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as handle:
        for row in rows:
            handle.write(json.dumps(row, sort_keys=True, default=str) + "\n")


def _bundled_rows(env: str) -> list[dict[str, Any]]:
    write = ENVS[env].write_bundled_dataset
    if write is None:
        raise DatasetConfigError(f"{env}: the environment ships no bundled dataset; choose test_source 'corpora'")
    with tempfile.TemporaryDirectory(prefix="sv-bundled-") as tmp:
        path = Path(tmp) / "bundled.jsonl"
        write(path)
        return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def _text_columns(spec: SourceSpec, frame: pd.DataFrame) -> list[str]:
    """The columns holding a harmful source's request texts (those `columns` maps an
    environment field to); none for other sources."""
    if not spec.text_by_reference:
        return []
    return [c for c in dict.fromkeys(spec.columns.values()) if c in frame.columns]


def corpus_rows_by_reference(spec: SourceSpec, frame: pd.DataFrame) -> pd.DataFrame:
    """What `corpus/<id>` stores of a source whose texts are harmful: its text columns as
    text-store markers. Other sources as read."""
    columns = _text_columns(spec, frame)
    if not columns:
        return frame
    frame = frame.copy()
    for column in columns:
        frame[column] = frame[column].map(lambda v: textrefs.put(v) if isinstance(v, str) and v.strip() else v)
    return frame


def read_corpus_rows(spec: SourceSpec, path: Path) -> pd.DataFrame:
    """`spec`'s stored corpus table, its text columns' markers replaced by their texts (only a
    harmful source's text columns hold any: a large corpus is not scanned)."""
    frame = pd.read_parquet(path)
    for column in _text_columns(spec, frame):
        frame[column] = frame[column].map(lambda v: textrefs.hydrate(v, where=str(path)) if isinstance(v, str) else v)
    return frame


def _texts_by_reference(row: dict[str, Any], sources: set[str], schema: RowSchema) -> dict[str, Any]:
    """`row` with its request texts (the question, each turn, and the text its environment's
    schema names, e.g. E5's goal) as text-store markers wherever they occur, when it comes
    from a source whose texts are harmful; other rows as they are."""
    info = row.get("info")
    if not isinstance(info, dict) or info.get("source") not in sources:
        return row
    turns = info.get("turns")
    texts = [row.get("question"), *(turns if isinstance(turns, list) else []), schema.text(row)]
    referenced: dict[str, Any] = textrefs.by_reference(row, texts)
    return referenced


def _curate_items(
    env: str,
    parts: list[tuple[SourceSpec, Normalised]],
    out: Path,
    *,
    bundled: list[dict[str, Any]] | None,
    sample: bool,
    dev_frac: float,
    test_frac: float,
) -> Curation:
    """The pipeline's curation of `Normalised.items`, written as JSONL."""
    items: list[Item] = [item for _, result in parts for item in result.items]
    curated = curate_items(
        items,
        bundled_test=bundled,
        test_schema=corpus_spec(env).schema.name,
        sample=sample,
        dev_frac=dev_frac,
        test_frac=test_frac,
    )
    by_reference = {spec.id for spec, _ in parts if spec.text_by_reference}
    schema = corpus_spec(env).schema
    files: dict[str, Path] = {}
    for name, rows in curated.files.items():
        if rows:
            files[name] = out / f"{name}.jsonl"
            write_jsonl(files[name], [_texts_by_reference(row, by_reference, schema) for row in rows])
    return Curation(
        files,
        {name: len(rows) for name, rows in curated.files.items()},
        curated.rejects,
        curated.label_counts,
        curated.bucket_counts,
        **curated.stats,
    )


def build_user_dataset(env: str, user: UserRows, out: Path) -> DatasetBuild:
    """`env`'s dataset whose one split, `test`, is the usable rows of a user's file (what
    `sv-dagster eval --dataset FILE` evaluates); its left-out lines are its rejects. No corpus
    row is mixed in: the eval scores the file and nothing else. The report records the file's
    path and sha256, so a changed file is a new data version."""
    out.mkdir(parents=True, exist_ok=True)
    files = {"test": out / "test.jsonl", "rejects": out / "rejects.jsonl"}
    write_jsonl(files["test"], user.rows)
    write_jsonl(files["rejects"], user.rejects)
    schema = corpus_spec(env).schema
    labels = {"test": dict(sorted(Counter(str(schema.label(row)) for row in user.rows).items()))}
    report = {
        "env": env,
        "sample": False,
        "sample_inputs": [],
        "test_source": "user_file",
        "user_file": user.describe(),
        "corpora": {},
        "n_rejected": len(user.rejects),
        "n_filtered_by_design": {},
        "n_corpus_rows": 0,
        "n_duplicates_dropped": 0,
        "n_duplicates_of_test_dropped": 0,
        "kept_by_source": {user.path.name: len(user.rows)},
        "split_sizes": {"test": len(user.rows)},
        "bucket_counts": {},
        "label_counts": labels,
        "files": {name: path.name for name, path in files.items()},
    }
    rejects = [{"source": user.path.name, "ref": f"line {r['where'].rsplit(':', 1)[1]}", **r} for r in user.rejects]
    return DatasetBuild(files, report, rejects, balance_table(labels))


class NoUsableRowsError(ValueError):
    """A corpus read from real data (a file, a download) of which no row became an item: the
    dataset is not built from the other corpora in its place."""


def _no_usable_rows(env: str, corpus: CorpusInput, result: Normalised) -> str:
    first = f"; first: {result.rejects[0]['ref']}: {result.rejects[0]['reason']}" if result.rejects else ""
    return (
        f"dataset/{env}: corpus {corpus.spec.id} has no usable row ({len(corpus.frame)} read, "
        f"{len(result.rejects)} rejected{first}); nothing is built from the other corpora in its place"
    )


def build_dataset(
    env: str,
    corpora: list[CorpusInput],
    out: Path,
    *,
    dev_frac: float = 0.1,
    test_frac: float = 0.2,
    test_source: str | None = None,
) -> DatasetBuild:
    """Normalise, de-duplicate, split and write `env`'s dataset under `out`."""
    choice = check_config(env, dev_frac=dev_frac, test_frac=test_frac, test_source=test_source)
    rejects: list[dict[str, Any]] = []
    filtered: dict[str, int] = {}
    sample_inputs = [c.spec.id for c in corpora if c.sample]
    sample = bool(sample_inputs) or choice == "bundled"  # the bundled task sets are project-written samples
    out.mkdir(parents=True, exist_ok=True)
    parts: list[tuple[SourceSpec, Normalised]] = []
    for corpus in corpora:
        result = normalise(corpus.spec, corpus.frame, env)
        usable = len(result.flows) if result.flows is not None else len(result.items)
        if not corpus.sample and not usable and not result.n_filtered:
            raise NoUsableRowsError(_no_usable_rows(env, corpus, result))
        rejects.extend(result.rejects)
        filtered[corpus.spec.id] = result.n_filtered
        parts.append((corpus.spec, result))
    own_curation = corpus_spec(env).curate
    if own_curation is not None:
        curation = own_curation(parts, out, sample=sample, dev_frac=dev_frac, test_frac=test_frac)
    else:
        bundled = _bundled_rows(env) if choice == "bundled" else None
        curation = _curate_items(
            env, parts, out, bundled=bundled, sample=sample, dev_frac=dev_frac, test_frac=test_frac
        )
    rejects.extend(curation.rejects)
    files = dict(curation.files)
    files["rejects"] = out / "rejects.jsonl"
    write_jsonl(files["rejects"], rejects)
    report = {
        "env": env,
        "sample": sample,
        "sample_inputs": sample_inputs + (["bundled task set"] if choice == "bundled" else []),
        "test_source": choice,
        "dev_frac": dev_frac,
        "test_frac": test_frac,
        "corpora": {
            c.spec.id: {"sample": c.sample, "rows": len(c.frame), "ood": c.spec.ood, "data_version": c.data_version}
            for c in corpora
        },
        "n_rejected": len(rejects),
        "n_filtered_by_design": filtered,
        "n_corpus_rows": curation.n_corpus_rows,
        "n_duplicates_dropped": curation.n_duplicates_dropped,
        "n_duplicates_of_test_dropped": curation.n_duplicates_of_test_dropped,
        "kept_by_source": curation.kept_by_source,
        "test_only_by_source": curation.test_only_by_source,
        "split_sizes": curation.split_sizes,
        "bucket_counts": curation.bucket_counts,
        "label_counts": curation.label_counts,
        "files": {name: path.name for name, path in files.items()},
    }
    return DatasetBuild(files, report, rejects, balance_table(curation.label_counts))
