"""Great Expectations suites for corpora and curated datasets, as plain functions.

`corpus_suite` checks one corpus table as fetched; `dataset_suite` checks the files a
dataset asset wrote (read back from disk, hashes recomputed: the check trusts nothing the
curation step recorded). Both return a `SuiteResult` whose failures name the expectation,
the column, the unexpected count and a few examples; the Dagster asset checks
(`sv_dagster.assets.data_checks`) turn it into a blocking check result.

Great Expectations 1.24 runs on pandas 3.1 here (its pandas execution engine); one ephemeral
context per suite, no project folder, no progress bars.
"""

from __future__ import annotations

import json
import math
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from sv_dagster.core.data.corpora.schemas import corpus_spec
from sv_shared import textrefs
from sv_shared.corpora import RowSchema, content_hash, labels_of, normalized_hash

TASK_FILES = ("train", "dev", "test", "corpus_test", "ood")
EXAMPLES_SHOWN = 5


@dataclass
class Outcome:
    """One expectation's result."""

    expectation: str
    column: str | None
    success: bool
    group: str = ""
    unexpected_count: int | None = None
    unexpected_percent: float | None = None
    examples: list[Any] = field(default_factory=list)
    observed: Any = None
    note: str = ""

    @property
    def name(self) -> str:
        where = f"{self.group}." if self.group else ""
        return f"{where}{self.expectation}({self.column or ''})"

    def as_dict(self) -> dict[str, Any]:
        return {
            "expectation": self.expectation,
            "column": self.column,
            "group": self.group,
            "success": self.success,
            "unexpected_count": self.unexpected_count,
            "unexpected_percent": self.unexpected_percent,
            "examples": [str(e)[:200] for e in self.examples[:EXAMPLES_SHOWN]],
            "observed": self.observed
            if isinstance(self.observed, (int, float, str, bool, type(None)))
            else str(self.observed)[:300],
            "note": self.note,
        }


@dataclass
class SuiteResult:
    suite: str
    outcomes: list[Outcome]
    n_rows: int

    @property
    def success(self) -> bool:
        return all(o.success for o in self.outcomes)

    @property
    def failures(self) -> list[Outcome]:
        return [o for o in self.outcomes if not o.success]

    def markdown(self) -> str:
        lines = ["| expectation | column | ok | unexpected | examples |", "|---|---|---|---|---|"]
        for o in self.outcomes:
            examples = ", ".join(str(e)[:40].replace("|", "/").replace("\n", " ") for e in o.examples[:3])
            count = "" if o.unexpected_count is None else f"{o.unexpected_count} ({(o.unexpected_percent or 0):.2f}%)"
            observed = f" observed {o.observed}" if o.observed is not None and o.unexpected_count is None else ""
            lines.append(
                f"| {o.group + '.' if o.group else ''}{o.expectation} | {o.column or ''} | "
                f"{'yes' if o.success else '**NO**'} | {count}{observed} | {examples} |"
            )
        return "\n".join(lines)

    def summary(self) -> str:
        if self.success:
            return f"{self.suite}: all {len(self.outcomes)} expectations met on {self.n_rows} rows"
        return f"{self.suite}: {len(self.failures)} of {len(self.outcomes)} expectations failed: " + "; ".join(
            f"{o.name} unexpected={o.unexpected_count}" + (f" ({o.note})" if o.note else "") for o in self.failures
        )


def _context() -> Any:
    """An in-memory context: no project folder, no data-docs site, no analytics, no progress bars."""
    import great_expectations as gx
    from great_expectations.data_context.types.base import (
        DataContextConfig,
        InMemoryStoreBackendDefaults,
        ProgressBarsConfig,
    )

    config = DataContextConfig(
        store_backend_defaults=InMemoryStoreBackendDefaults(init_temp_docs_sites=False),
        analytics_enabled=False,
        progress_bars=ProgressBarsConfig(globally=False),
    )
    return gx.get_context(mode="ephemeral", project_config=config)


def run_expectations(
    frame: pd.DataFrame,
    expectations: list[Any],
    *,
    group: str = "",
    notes: dict[int, str] | None = None,
    index_column: str | None = "id",
    with_values: bool = False,
) -> list[Outcome]:
    """Validate `frame` against `expectations` (Great Expectations objects) in one batch; the
    examples of a failure are the `index_column` values (ids) of unexpected rows where the
    frame has one, else the unexpected values."""
    import great_expectations as gx

    if not expectations:
        return []
    context = _context()
    source = context.data_sources.add_pandas("frames")
    batch = (
        source.add_dataframe_asset("rows")
        .add_batch_definition_whole_dataframe("all")
        .get_batch(batch_parameters={"dataframe": frame})
    )
    suite = gx.ExpectationSuite(name=group or "suite", expectations=list(expectations))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result_format: dict[str, Any] = {"result_format": "SUMMARY", "partial_unexpected_count": EXAMPLES_SHOWN}
        if index_column and index_column in frame.columns:
            result_format["unexpected_index_column_names"] = [index_column]
        result = batch.validate(suite, result_format=result_format)
    outcomes: list[Outcome] = []
    for index, item in enumerate(result.results):
        config = item.expectation_config
        details = item.result or {}
        exception = (
            (item.exception_info or {}).get("exception_message") if isinstance(item.exception_info, dict) else None
        )
        outcomes.append(
            Outcome(
                expectation=config.type,
                column=config.kwargs.get("column"),
                success=bool(item.success),
                group=group,
                unexpected_count=details.get("unexpected_count"),
                unexpected_percent=details.get("unexpected_percent"),
                examples=_examples(details, index_column, with_values),
                observed=details.get("observed_value"),
                note=(notes or {}).get(index, "") or (exception or ""),
            )
        )
    return outcomes


def _examples(details: dict[str, Any], index_column: str | None, with_values: bool) -> list[Any]:
    """A few unexpected rows: their `index_column` value (an id, or file:line with the value
    when `with_values`) where Great Expectations returned it, else the unexpected values."""
    indexed = details.get("partial_unexpected_index_list") or []
    if indexed and index_column and all(isinstance(e, dict) and index_column in e for e in indexed):
        if with_values:
            return [
                f"{e[index_column]}: " + ", ".join(f"{k}={v!r}" for k, v in e.items() if k != index_column)
                for e in indexed[:EXAMPLES_SHOWN]
            ]
        return [entry[index_column] for entry in indexed[:EXAMPLES_SHOWN]]
    return list(details.get("partial_unexpected_list") or [])[:EXAMPLES_SHOWN]


def _plain(
    expectation: str,
    success: bool,
    *,
    column: str | None = None,
    count: int | None = None,
    total: int | None = None,
    examples: list[Any] | None = None,
    note: str = "",
    group: str = "",
) -> Outcome:
    """A check Great Expectations cannot express on the table (e.g. rows the reader could not
    parse never reach it), reported in the same shape."""
    percent = None if count is None or not total else 100.0 * count / total
    return Outcome(expectation, column, success, group, count, percent, list(examples or []), note=note)


# --- corpora ---------------------------------------------------------------------------------


def corpus_suite(spec: Any, frame: pd.DataFrame, *, n_malformed: int, malformed_examples: list[str]) -> SuiteResult:
    """Basic suite on a corpus as fetched: its required columns exist and are filled, its
    labels map to the environment's, and few rows were malformed; `max_bad_fraction` (from
    the registry) is how much of each is tolerated before the corpus blocks its dataset."""
    import great_expectations.expectations as gxe

    mostly = 1.0 - spec.max_bad_fraction
    frame = frame.copy()
    expectations: list[Any] = [gxe.ExpectTableRowCountToBeBetween(min_value=1)]
    notes: dict[int, str] = {}
    for column in spec.required:
        expectations.append(gxe.ExpectColumnToExist(column=column))
        if column in frame.columns:
            expectations.append(gxe.ExpectColumnValuesToNotBeNull(column=column, mostly=mostly))
    if spec.label is not None and spec.label.column and spec.label.column in frame.columns:
        labels, dropped = labels_of(frame[spec.label.column], spec.label)
        allowed = sorted({*spec.label.map.values(), *([spec.label.default] if spec.label.default else [])})
        # The raw label, where it maps to none of the environment's labels (kept for the examples).
        frame["label_unmapped"] = frame[spec.label.column].where(
            [label is None and not drop for label, drop in zip(labels, dropped)]
        )
        notes[len(expectations)] = f"raw values of {spec.label.column!r} that map to none of {allowed}"
        expectations.append(gxe.ExpectColumnValuesToBeNull(column="label_unmapped", mostly=mostly))
    if "_file" in frame.columns and "_line" in frame.columns:
        frame["row"] = frame["_file"].astype(str) + ":" + frame["_line"].astype(str)
    outcomes = run_expectations(frame, expectations, group="corpus", notes=notes, index_column="row", with_values=True)
    total = len(frame) + n_malformed
    ok = total > 0 and n_malformed <= spec.max_bad_fraction * total
    outcomes.append(
        _plain(
            "malformed_rows_within_limit",
            ok,
            count=n_malformed,
            total=total,
            examples=malformed_examples,
            note=f"rows the reader could not use; at most {spec.max_bad_fraction:.0%} tolerated",
            group="corpus",
        )
    )
    return SuiteResult(f"corpus/{spec.id}", outcomes, len(frame))


# --- datasets --------------------------------------------------------------------------------


def _read_rows(path: Path) -> Iterator[dict[str, Any]]:
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            if line.strip():
                try:
                    row = json.loads(line)
                    row = textrefs.hydrate_row(row, where=f"{path.name}:{number}") if isinstance(row, dict) else None
                except (ValueError, textrefs.MissingTextError):
                    row = None
                yield row if isinstance(row, dict) else {"__unparsable__": f"{path.name}:{number}"}


def _bucket_of(file: str, row: dict[str, Any], schema: RowSchema, corpus_test: bool) -> str | None:
    """The hash bucket of a corpus-derived row; None for the bundled test set and OOD rows."""
    if schema.file is not None:  # a file of its own: each row records its bucket
        return row.get("split")
    if file in ("train", "dev"):
        return file
    if file == "corpus_test" or (file == "test" and corpus_test):
        return "test"
    return None


def dataset_frame(
    files: dict[str, Path], schema: RowSchema, names: tuple[str, ...], *, corpus_test: bool
) -> pd.DataFrame:
    """One row per example of the named files: its file, id, label, the required fields
    (True where present and non-empty, None otherwise), sample flag, recomputed content and
    normalised-text hashes, and the hash bucket. Built column by column (a million rows)."""
    fixed = ("file", "id", "label", "sample", "content_hash", "normalized_hash", "bucket", "unparsable")
    columns: dict[str, list[Any]] = {key: [] for key in fixed}
    present: dict[str, list[Any]] = {key: [] for key in schema.required if key not in fixed}
    seen: set[str] = set()
    for name in names:
        if name not in files:
            continue
        for row in _read_rows(files[name]):
            broken = row.get("__unparsable__")
            text = schema.text(row) if broken is None else ""
            columns["file"].append(name)
            columns["id"].append(row.get("id"))
            columns["label"].append(schema.label(row) if broken is None else None)
            columns["sample"].append(schema.sample_flag(row) if broken is None else None)
            columns["content_hash"].append(content_hash(text))
            columns["normalized_hash"].append(normalized_hash(text))
            columns["bucket"].append(_bucket_of(name, row, schema, corpus_test))
            columns["unparsable"].append(broken)
            for key, values in present.items():  # id and label are there already, as values
                if key in row:
                    seen.add(key)
                values.append(True if row.get(key) not in (None, "", [], {}) else None)
    frame = pd.DataFrame({key: pd.Series(values, dtype=object) for key, values in columns.items()})
    for key, values in present.items():
        if key in seen:  # a field no row has stays absent: the schema check names it
            frame[key] = pd.Series(values, dtype=object)
    return frame


def proportion_bounds(n: int, fraction: float) -> tuple[int, int]:
    """Row-count bounds for a hash bucket of `n` rows expected to hold `fraction`: the
    binomial 4-sigma band, at least 2% of n and 2 rows wide, so only a broken split fails."""
    tolerance = max(4.0 * math.sqrt(n * fraction * (1 - fraction)), 0.02 * n, 2.0)
    return max(0, math.floor(n * fraction - tolerance)), math.ceil(n * fraction + tolerance)


def _group_expectations(frame: pd.DataFrame, schema: RowSchema, *, sample: bool, group: str) -> list[Outcome]:
    import great_expectations.expectations as gxe

    expectations: list[Any] = [gxe.ExpectColumnValuesToBeNull(column="unparsable")]
    for key in schema.required:
        expectations.append(gxe.ExpectColumnToExist(column=key))
        if key in frame.columns:
            expectations.append(gxe.ExpectColumnValuesToNotBeNull(column=key))
    expectations.append(gxe.ExpectColumnValuesToBeUnique(column="id"))
    if schema.allowed_labels is not None:
        expectations.append(gxe.ExpectColumnValuesToBeInSet(column="label", value_set=list(schema.allowed_labels)))
    if schema.label_pattern is not None:
        expectations.append(gxe.ExpectColumnValuesToMatchRegex(column="label", regex=schema.label_pattern))
    expectations.append(gxe.ExpectColumnValuesToNotBeNull(column="label"))
    if sample:
        expectations.append(gxe.ExpectColumnValuesToBeInSet(column="sample", value_set=[True]))
    outcomes = run_expectations(frame, expectations, group=group)
    held = frame[frame["file"].isin(("test", "corpus_test", "ood")) | (frame["bucket"] == "test")]
    trained = frame[frame["bucket"].isin(("train", "dev"))].reset_index(drop=True)
    if len(trained):
        # Membership is computed here (a set lookup per row); Great Expectations asserts it. Handing
        # GE the test hashes as a value_set instead costs minutes: it re-serialises the set per metric.
        trained["in_test_exact"] = trained["content_hash"].isin(set(held["content_hash"]))
        trained["in_test_normalized"] = trained["normalized_hash"].isin(set(held["normalized_hash"]))
        leak = [
            gxe.ExpectColumnValuesToBeInSet(column="in_test_exact", value_set=[False]),
            gxe.ExpectColumnValuesToBeInSet(column="in_test_normalized", value_set=[False]),
        ]
        notes = {
            0: "train/dev rows whose text is a test/OOD row's (exact)",
            1: "train/dev rows whose normalised text is a test/OOD row's",
        }
        outcomes += run_expectations(trained, leak, group=f"{group}.train_dev", notes=notes)
    return outcomes


def dataset_suite(env: str, files: dict[str, Path], report: dict[str, Any]) -> SuiteResult:
    """The dataset suite: schema (required fields present), no nulls in required fields,
    allowed labels, unique ids, the sample flag on every row of a sample dataset, no test or
    OOD item in train/dev (exact and normalised text), and each hash bucket's share of the
    corpus rows within tolerance of the configured fraction."""
    import great_expectations.expectations as gxe

    spec = corpus_spec(env)
    sample = bool(report.get("sample"))
    corpus_test = report.get("test_source") == "corpora"
    groups: list[tuple[str, RowSchema, tuple[str, ...]]] = [("tasks", spec.schema, TASK_FILES)]
    for schema in spec.extra_schemas:
        assert schema.file is not None  # CorpusSpec makes every extra schema name its file
        groups.append((schema.file, schema, (schema.file,)))
    outcomes: list[Outcome] = []
    n_rows = 0
    buckets: list[pd.Series] = []
    for group, schema, names in groups:
        frame = dataset_frame(files, schema, names, corpus_test=corpus_test)
        if not len(frame):
            continue
        n_rows += len(frame)
        outcomes += _group_expectations(frame, schema, sample=sample, group=group)
        buckets.append(frame["bucket"].dropna())
    if not n_rows:
        outcomes.append(_plain("dataset_has_rows", False, note="no file of the dataset holds a row"))
    counted = pd.concat(buckets, ignore_index=True) if buckets else pd.Series(dtype=object)
    n = len(counted)
    if n:
        dev_frac, test_frac = float(report.get("dev_frac", 0.1)), float(report.get("test_frac", 0.2))
        fractions = {"train": 1.0 - dev_frac - test_frac, "dev": dev_frac, "test": test_frac}
        shares = pd.DataFrame({"bucket": counted.to_numpy()})
        for name, fraction in fractions.items():
            lo, hi = proportion_bounds(n, fraction)
            outcomes += run_expectations(
                shares[shares["bucket"] == name].reset_index(drop=True),
                [gxe.ExpectTableRowCountToBeBetween(min_value=lo, max_value=hi)],
                group=f"split_{name}",
                notes={0: f"{fraction:.0%} of {n} corpus rows expected, within [{lo}, {hi}]"},
            )
    return SuiteResult(f"dataset/{env}", outcomes, n_rows)
