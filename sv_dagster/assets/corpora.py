"""corpus/<source>: raw corpora as fetched (or the bundled samples, labelled as such)."""

from __future__ import annotations

import os
from dataclasses import asdict
from datetime import UTC, datetime

import dagster as dg
from pydantic import Field

from sv_dagster.assets.common import artifact_dir, write_json
from sv_dagster.assets.recipe import Artifact, provenance_asset
from sv_dagster.core.e1_data import load_iot23


class IoT23Config(dg.Config):
    source: str | None = Field(
        default=None,
        description='"sample" (bundled, offline), "hf" / "hf:<repo>" (Hugging Face), or a local '
        ".parquet/.jsonl/.csv path. Unset: $SV_IOT23_SOURCE, else \"sample\".",
    )
    revision: str = Field(default="main", description="Hugging Face dataset revision (online mode).")
    max_rows: int | None = Field(default=None, description="Keep only the first N rows.")


@provenance_asset(
    key=["corpus", "iot23"],
    group_name="corpora",
    kinds={"parquet"},
    description="IoT-23 network flows (19kmunz/iot-23-preprocessed online; a bundled synthetic SAMPLE offline).",
)
def corpus_iot23(context: dg.AssetExecutionContext, config: IoT23Config) -> Artifact:
    source = config.source or os.environ.get("SV_IOT23_SOURCE") or "sample"
    flows, info = load_iot23(source, revision=config.revision, max_rows=config.max_rows)
    out = artifact_dir(context, "corpora", "iot23")
    flows.to_parquet(out / "flows.parquet", index=False)
    facts = {**asdict(info), "row_count": len(flows)}
    write_json(out / "metadata.json", facts)  # no timestamp in the file: same data, same hash
    facts["fetched_at"] = datetime.now(UTC).isoformat()
    if info.sample:
        context.log.warning("corpus/iot23 is the bundled SAMPLE (synthetic flows), not IoT-23")
    return Artifact(
        path=out,
        config={"source": source, "revision": config.revision, "max_rows": config.max_rows},
        facts=facts,
        metadata={"sample": info.sample, "row_count": len(flows), "label_counts": flows["label"].astype(str).value_counts().to_dict()},
        files={"flows": out / "flows.parquet"},
    )
