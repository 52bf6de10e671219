"""Blocking Great Expectations checks: `great_expectations` on every corpus/<id> and
dataset/<env>. A failed suite is an ERROR, so nothing downstream of the asset materializes in
the same run; the failing expectations (name, column, unexpected count, examples) are in the
check's metadata. The suites themselves are plain functions in `sv_dagster.core.data.validation`."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from contextlib import contextmanager

import dagster as dg

from sv_dagster.assets.common import LONG_WORK_ROWS
from sv_dagster.core.data.corpora import SourceSpec
from sv_dagster.core.data.corpora.build import read_corpus_rows
from sv_dagster.core.envs import EnvSpec
from sv_dagster.instance import local_artifact_path

CHECK_NAME = "great_expectations"


def check_result(result) -> dg.AssetCheckResult:
    outcomes = [o.as_dict() for o in result.outcomes]
    failing = [o for o in result.outcomes if not o.success]
    return dg.AssetCheckResult(
        passed=result.success,
        severity=dg.AssetCheckSeverity.ERROR,
        description=result.summary()[:2000],
        metadata={
            "suite": result.suite,
            "rows_validated": result.n_rows,
            "expectations": len(outcomes),
            "failed": len(failing),
            "failing_expectations": dg.MetadataValue.json([o.as_dict() for o in failing]),
            "results": dg.MetadataValue.md(result.markdown()),
            "outcomes": dg.MetadataValue.json(outcomes),
        },
    )


@contextmanager
def _announced(context, name: str, n_rows: int) -> Iterator[None]:
    """A suite over many rows runs for a minute: say when it starts and how long it took."""
    if n_rows < LONG_WORK_ROWS:
        yield
        return
    context.log.info(f"{name}: checking {n_rows:,} rows with Great Expectations")
    started = time.perf_counter()
    yield
    context.log.info(f"{name}: Great Expectations suite done in {time.perf_counter() - started:.1f} s")


def _latest_dir(context, key: dg.AssetKey):
    entry = context.instance.get_latest_materialization_event(key)
    if entry is None or entry.asset_materialization is None:
        raise dg.Failure(description=f"{key.to_user_string()} has no materialization to check")
    return local_artifact_path(entry.asset_materialization.metadata)


def build_corpus_check(spec: SourceSpec) -> dg.AssetChecksDefinition:
    key = dg.AssetKey(["corpus", spec.id])

    @dg.asset_check(
        asset=key,
        name=CHECK_NAME,
        blocking=True,
        description=f"Great Expectations suite on corpus/{spec.id}: rows present, required columns "
        f"{list(spec.required)} exist and are filled, labels map to the environment's, malformed rows "
        f"at most {spec.max_bad_fraction:.0%}. Blocks {', '.join(f'dataset/{e}' for e in spec.envs)} when it fails.",
    )
    def corpus_check(context) -> dg.AssetCheckResult:  # dagster rejects a string annotation here
        from sv_dagster.core.data.validation import corpus_suite

        folder = _latest_dir(context, key)
        facts = json.loads((folder / "metadata.json").read_text(encoding="utf-8"))
        frame = read_corpus_rows(spec, folder / "rows.parquet")
        with _announced(context, f"corpus/{spec.id}", len(frame)):
            result = corpus_suite(
                spec,
                frame,
                n_malformed=int(facts.get("n_malformed", 0)),
                malformed_examples=list(facts.get("malformed_examples") or []),
            )
        return check_result(result)

    return corpus_check


def build_dataset_check(env: EnvSpec) -> dg.AssetChecksDefinition:
    key = dg.AssetKey(["dataset", env.short])

    @dg.asset_check(
        asset=key,
        name=CHECK_NAME,
        blocking=True,
        description=f"Great Expectations suite on dataset/{env.short}: required fields present and non-null, "
        "allowed labels, unique ids, sample flag on every row of a sample dataset, no test/OOD item in "
        "train or dev (exact and normalised text), hash-bucket proportions within tolerance. Blocks the "
        f"{env.short} evals when it fails.",
    )
    def dataset_check(context) -> dg.AssetCheckResult:  # dagster rejects a string annotation here
        from sv_dagster.core.data.validation import dataset_suite

        folder = _latest_dir(context, key)
        report = json.loads((folder / "metadata.json").read_text(encoding="utf-8"))
        files = {name: folder / file for name, file in report["files"].items() if name != "rejects"}
        with _announced(context, f"dataset/{env.short}", sum(report["split_sizes"].values())):
            result = dataset_suite(env.short, files, report)
        return check_result(result)

    return dataset_check
