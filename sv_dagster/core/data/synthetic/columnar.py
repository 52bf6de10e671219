"""Columnar synthetic batches: made in chunks and written as Parquet.

For an environment whose `SyntheticSpec` names a `table`. Per chunk of `chunk_rows`: the
generator's template candidates (numpy columns) -> its validation and verification ->
its difficulty tag -> appended to `<table>.parquet` with pyarrow's ParquetWriter (and,
for training-sized batches, to `examples.jsonl` in the environment's dataset schema).
Memory stays bounded by the chunk, whatever the batch size. The spot-check, reject and
metadata code is the common pipeline's (`batch`).
"""

from __future__ import annotations

import json
import random
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any, cast

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from sv_dagster.core.data.synthetic.batch import (
    REJECTS_FILE,
    BatchResult,
    BatchSpec,
    build_metadata,
    screen_held_out,
    spot_check_ids,
    write_queue,
)
from sv_dagster.core.data.synthetic.files import (
    DEFAULT_CHUNK_ROWS,
    EXAMPLES_FILE,
    METADATA_FILE,
    QUEUE_FILE,
    rows_from_parquet,
)
from sv_dagster.core.data.synthetic.sampling import sample_variations
from sv_dagster.core.envs import ENVS
from sv_shared.synthetic import ColumnarGenerator, Reject, Seeds

ARROW_TYPES = {"string": pa.string(), "int64": pa.int64(), "float64": pa.float64(), "bool": pa.bool_()}


def _schema(generator: ColumnarGenerator) -> pa.Schema:
    """The generator's columns, then the batch's own tags."""
    fields = [pa.field(name, ARROW_TYPES[kind]) for name, kind in generator.columns()]
    fields += [
        pa.field("synthetic", pa.bool_()),
        pa.field("sample", pa.bool_()),
        pa.field("partition", pa.string()),
        pa.field("batch_id", pa.string()),
    ]
    return pa.schema(fields)


def _table(cols: dict[str, np.ndarray], spec: BatchSpec, schema: pa.Schema) -> pa.Table:
    n = len(cols["label"])
    data = {}
    for field in schema:
        if field.name in cols:
            values = cols[field.name]
            data[field.name] = values.tolist() if values.dtype == object else values
        elif field.name == "synthetic":
            data[field.name] = [True] * n
        elif field.name == "sample":
            data[field.name] = [spec.sample] * n
        elif field.name == "partition":
            data[field.name] = [spec.partition] * n
        elif field.name == "batch_id":
            data[field.name] = [spec.batch_id] * n
        else:
            data[field.name] = [None] * n
    return pa.table(data, schema=schema)


def _model_columns(
    spec: BatchSpec, generator: ColumnarGenerator, rng: random.Random, rejects: list[Reject]
) -> tuple[dict[str, np.ndarray] | None, int]:
    """Rows the seed models write from the generator's prompts, at each temperature."""
    samples = sample_variations(
        generator.variation_prompts(rng, spec.variations),
        spec.seed_models,
        spec.temperatures,
        spec.env_id,
        concurrency=spec.sampling_concurrency,
    )
    parsed, meta = [], []
    for j, sample in enumerate(samples):
        row_id = f"{spec.id_prefix}-m{j:05d}"
        common: dict[str, Any] = {"origin": "model", "model": sample.model, "temperature": sample.temperature}
        if sample.error is not None:
            rejects.append(Reject(row_id, "sampling", f"model call failed: {sample.error}", **common))
            continue
        try:
            parsed.append(generator.parse_variation(sample.text or "", sample.key))
            meta.append((row_id, sample))
        except ValueError as exc:
            rejects.append(Reject(row_id, "sampling", f"unusable model reply: {exc}", **common))
    cols, problems = generator.columns_from(parsed)
    bad = {i for i, _ in problems}
    for i, reason in problems:
        row_id, sample = meta[i]
        rejects.append(
            Reject(row_id, "validation", reason, origin="model", model=sample.model, temperature=sample.temperature)
        )
    kept = [m for i, m in enumerate(meta) if i not in bad]
    if not kept:
        return None, len(samples)
    cols["origin"] = np.full(len(kept), "model", dtype=object)
    cols["id"] = np.array([row_id for row_id, _ in kept], dtype=object)
    cols["seed_model"] = np.array([sample.model for _, sample in kept], dtype=object)
    cols["temperature"] = np.array([sample.temperature for _, sample in kept], dtype=np.float64)
    return cols, len(samples)


def run_columnar_batch(
    spec: BatchSpec,
    seed_cols: Any,
    seed_sources: Sequence[str],
    seeds: dict[str, Any],
    seed_rejects: Sequence[Reject] = (),
    *,
    options: Mapping[str, Any] | None = None,
    chunk_rows: int = DEFAULT_CHUNK_ROWS,
    write_jsonl: bool = True,
) -> BatchResult:
    """One batch of `spec.size` candidate rows of `spec.env` (see the module doc), from what
    its `read_seeds` returned: `seed_cols` the seed rows to vary (`seed_sources[i]` names
    where row i came from: file:line), `seeds` the facts, `seed_rejects` the unusable ones."""
    synthetic = ENVS[spec.env].synthetic
    if synthetic is None or synthetic.table is None or synthetic.table_rows is None:
        raise ValueError(f"{spec.env} declares no columnar synthetic batches (a table and its table_rows)")
    table_name, table_rows = synthetic.table, synthetic.table_rows
    # A spec with a table makes a ColumnarGenerator (SyntheticSpec.make_generator).
    generator = cast(
        ColumnarGenerator,
        synthetic.make_generator(Seeds(seed_cols, dict(seeds), list(seed_rejects), list(seed_sources)), options or {}),
    )
    started = time.perf_counter()
    out = spec.out_dir
    out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(spec.seed)
    schema = _schema(generator)
    table_path = out / f"{table_name}.parquet"
    rejects: list[Reject] = list(seed_rejects)
    labels: Counter[Any] = Counter()
    scenarios: Counter[Any] = Counter()
    difficulty: Counter[Any] = Counter()
    origins: Counter[Any] = Counter()
    accepted_ids: list[str] = []
    jsonl = (out / EXAMPLES_FILE).open("w", encoding="utf-8") if write_jsonl else None
    writer = pq.ParquetWriter(table_path, schema, compression="zstd")

    def emit(cols: dict[str, np.ndarray]) -> None:
        """Validate, label, write one chunk; rejects recorded with id, stage and reason."""
        invalid, unverified = generator.check(cols)
        for stage, reasons in (("validation", invalid), ("verification", unverified)):
            bad = np.flatnonzero(reasons != None)  # noqa: E711 - numpy elementwise
            for i in bad:
                if stage == "verification" and invalid[i] is not None:
                    continue  # one reason per row: the first stage that failed
                rejects.append(
                    Reject(
                        str(cols["id"][i]),
                        stage,
                        str(reasons[i]),
                        source=str(cols["seed_source"][i]) if cols["seed_source"][i] else None,
                        origin=str(cols["origin"][i]),
                        model=cols["seed_model"][i] or None,
                    )
                )
        keep = np.flatnonzero((invalid == None) & (unverified == None))  # noqa: E711
        if not len(keep):
            return
        kept = generator.take(cols, keep)
        kept["difficulty"] = generator.difficulty(kept)
        table = _table(kept, spec, schema)
        if spec.held_out is not None:  # rows duplicating a dev/test row are rejects too
            rows = list(table_rows(table.to_pylist()))
            clean = screen_held_out(spec, rows, rejects)
            if len(clean) < len(rows):
                clean_ids = {row["id"] for row in clean}
                keep = np.array([i for i, row_id in enumerate(kept["id"]) if row_id in clean_ids], dtype=np.int64)
                if not len(keep):
                    return
                kept = generator.take(kept, keep)
                table = _table(kept, spec, schema)
        writer.write_table(table)
        accepted_ids.extend(kept["id"].tolist())
        labels.update(kept["label"].tolist())
        scenarios.update(kept["scenario"].tolist())
        difficulty.update(kept["difficulty"].tolist())
        origins.update(kept["origin"].tolist())
        if jsonl is not None:
            for row in table_rows(table.to_pylist()):
                jsonl.write(json.dumps(row, ensure_ascii=False, sort_keys=True) + "\n")

    n_model_calls = n_model_rows = 0
    try:
        for start in range(0, spec.size, chunk_rows):
            cols = generator.templates(min(chunk_rows, spec.size - start), rng)
            m = len(cols["label"])
            cols["id"] = np.array([f"{spec.id_prefix}-{start + i:06d}" for i in range(m)], dtype=object)
            cols["seed_model"] = np.full(m, None, dtype=object)
            emit(cols)
        if spec.seed_models:
            model_cols, n_model_calls = _model_columns(spec, generator, random.Random(spec.seed), rejects)
            if model_cols is not None:
                n_model_rows = len(model_cols["label"])
                model_cols["seed_source"] = np.full(n_model_rows, None, dtype=object)
                emit(model_cols)
    finally:
        writer.close()
        if jsonl is not None:
            jsonl.close()
    generated = time.perf_counter() - started

    spot = set(spot_check_ids(accepted_ids, spec.spot_fraction, spec.seed))
    write_queue(out / QUEUE_FILE, list(rows_from_parquet(table_path, table_rows, spot)), spec)
    with (out / REJECTS_FILE).open("w", encoding="utf-8") as handle:
        for reject in rejects:
            handle.write(json.dumps(reject.to_dict(), sort_keys=True) + "\n")
    files = {
        table_name: table_path,
        "rejects": out / REJECTS_FILE,
        "spot_check": out / QUEUE_FILE,
        "metadata": out / METADATA_FILE,
    }
    if write_jsonl:
        files["examples"] = out / EXAMPLES_FILE
    counts = {
        "candidates": spec.size + n_model_rows,
        "template_candidates": spec.size,
        "model_calls": n_model_calls,
        "model_candidates": n_model_rows,
        "accepted": len(accepted_ids),
        "rejected": len(rejects),
        "seed_rows_rejected": len(seed_rejects),
        "by_origin": dict(origins),
        **generator.counts(),
    }
    metadata = build_metadata(
        spec,
        generator_id=generator.generator_id,
        verifier=generator.verifier,
        versions=generator.versions(),
        counts=counts,
        labels=labels,
        scenarios=scenarios,
        difficulty=difficulty,
        rejects=rejects,
        spot=len(spot),
        seeds=seeds,
        files={name: path.name for name, path in files.items()},
    )
    metadata["options"] = {**generator.settings(), "chunk_rows": chunk_rows}
    (out / METADATA_FILE).write_text(
        json.dumps(metadata, indent=2, sort_keys=True, default=str) + "\n", encoding="utf-8"
    )
    return BatchResult(
        out, metadata, files, {"generate_validate_write": generated, "total": time.perf_counter() - started}
    )
