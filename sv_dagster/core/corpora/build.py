"""dataset/<env> as a plain function: corpora in (each in its own layout), the environment's
dataset files out, with the curation report the asset shows.

Which rows form the `test` split (`test_source`):
- "corpora": the corpus rows in the test hash bucket (E1 always; E2, E4, E5, E6 on request).
- "bundled": the environment package's own task set, what the demo, `vf-eval` and the
  regression baselines score (E2-E6 by default; E3 always: its corpora are C/C++ functions
  without tests, which cannot be executable tasks). Corpus rows then fill train and dev, and
  those in the test bucket are written as `corpus_test` (never trained on either way).
E3's corpora become `fix_pairs` (vulnerable -> fixed code, for retrieval into SFT prompts)
and `functions` (functions labelled vulnerable or clean), each row tagged with its bucket.
"""

from __future__ import annotations

import json
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from sv_dagster.core.corpora.curate import balance_table, curate_items
from sv_dagster.core.corpora.normalize import Item, normalise
from sv_dagster.core.corpora.registry import SourceSpec
from sv_dagster.core.e1_data import FlowPart, curate_e1, write_jsonl, write_rows

TEST_SOURCES = {"e1": ("corpora",), "e2": ("bundled", "corpora"), "e3": ("bundled",), "e4": ("bundled", "corpora"),
                "e5": ("bundled", "corpora"), "e6": ("bundled", "corpora")}
DEFAULT_TEST_SOURCE = {env: choices[0] for env, choices in TEST_SOURCES.items()}


class DatasetConfigError(ValueError):
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
    choice = test_source or DEFAULT_TEST_SOURCE[env]
    if choice not in TEST_SOURCES[env]:
        raise DatasetConfigError(f"dataset/{env}: test_source must be one of {TEST_SOURCES[env]}, got {choice!r}")
    if dev_frac < 0 or test_frac < 0 or dev_frac + test_frac >= 1:
        raise DatasetConfigError(f"dataset/{env}: dev_frac + test_frac must be below 1 (got {dev_frac} + {test_frac})")
    return choice


def _bundled_rows(env_package: Any) -> list[dict[str, Any]]:
    with tempfile.TemporaryDirectory(prefix="sv-bundled-") as tmp:
        path = Path(tmp) / "bundled.jsonl"
        env_package.write_bundled_dataset(path)
        return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def build_dataset(
    env: str,
    corpora: list[CorpusInput],
    out: Path,
    *,
    env_package: Any = None,
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
    files: dict[str, Path] = {}
    if env == "e1":
        parts = []
        for corpus in corpora:
            result = normalise(corpus.spec, corpus.frame, env)
            rejects.extend(result.rejects)
            filtered[corpus.spec.id] = result.n_filtered
            parts.append(FlowPart(corpus.spec.id, result.flows, corpus.spec.ood))
        curated = curate_e1(parts, sample=sample, dev_frac=dev_frac, test_frac=test_frac)
        rejects.extend(curated.rejects)
        for name, rows in curated.splits.items():
            if len(rows):
                files[name] = out / f"{name}.jsonl"
                write_rows(files[name], rows)
        label_counts, bucket_counts = curated.label_counts, curated.bucket_counts
        stats = {"n_corpus_rows": curated.n_input, "n_duplicates_dropped": curated.n_duplicates,
                 "n_duplicates_of_test_dropped": 0, "kept_by_source": curated.kept_by_source}
        sizes = {name: len(rows) for name, rows in curated.splits.items()}
    else:
        items: list[Item] = []
        for corpus in corpora:
            result = normalise(corpus.spec, corpus.frame, env)
            rejects.extend(result.rejects)
            filtered[corpus.spec.id] = result.n_filtered
            items.extend(result.items)
        bundled = _bundled_rows(env_package) if choice == "bundled" else None
        curated = curate_items(items, bundled_test=bundled, test_schema=env, sample=sample,
                               dev_frac=dev_frac, test_frac=test_frac)
        rejects.extend(curated.rejects)
        for name, rows in curated.files.items():
            if rows:
                files[name] = out / f"{name}.jsonl"
                write_jsonl(files[name], rows)
        label_counts, bucket_counts, stats = curated.label_counts, curated.bucket_counts, curated.stats
        sizes = {name: len(rows) for name, rows in curated.files.items()}
    files["rejects"] = out / "rejects.jsonl"
    write_jsonl(files["rejects"], rejects)
    report = {
        "env": env,
        "sample": sample,
        "sample_inputs": sample_inputs + (["bundled task set"] if choice == "bundled" else []),
        "test_source": choice,
        "dev_frac": dev_frac,
        "test_frac": test_frac,
        "corpora": {c.spec.id: {"sample": c.sample, "rows": len(c.frame), "ood": c.spec.ood, "data_version": c.data_version}
                    for c in corpora},
        "n_rejected": len(rejects),
        "n_filtered_by_design": filtered,
        **stats,
        "split_sizes": sizes,
        "bucket_counts": bucket_counts,
        "label_counts": label_counts,
        "files": {name: path.name for name, path in files.items()},
    }
    return DatasetBuild(files, report, rejects, balance_table(label_counts))
