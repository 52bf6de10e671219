"""E1's synthetic batch: columnar, in chunks, written as Parquet.

Per chunk of `chunk_rows`: playbook flows and perturbed seed flows (numpy, in the
environment package) -> schema and range validation -> the scenario invariants (the
labeller) -> the rule baseline's verdict (difficulty) -> appended to `flows.parquet`
with pyarrow's ParquetWriter (and, for training-sized batches, to `examples.jsonl` in E1's
dataset schema). Memory stays bounded by the chunk, whatever the batch size.
"""

from __future__ import annotations

import json
import random
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from sv_dagster.core.synthetic.batch import (
    REJECTS_FILE,
    BatchResult,
    BatchSpec,
    Reject,
    build_metadata,
    spot_check_ids,
    write_queue,
)
from sv_dagster.core.synthetic.review import E1_PARQUET, EXAMPLES_FILE, METADATA_FILE, QUEUE_FILE
from sv_dagster.core.synthetic.sampling import sample_variations

DEFAULT_CHUNK_ROWS = 20_000


def _schema(with_hosts: bool) -> pa.Schema:
    from sv_env_network_logs.synthetic import INT_FIELDS, STR_FIELDS

    fields = [pa.field("id", pa.string())]
    fields += [pa.field(name, pa.int64()) for name in INT_FIELDS]
    fields += [pa.field("duration", pa.float64())]
    fields += [pa.field(name, pa.string()) for name in STR_FIELDS]
    if with_hosts:
        fields += [pa.field("id.orig_h", pa.string()), pa.field("id.resp_h", pa.string())]
    fields += [pa.field(name, pa.string()) for name in ("label", "scenario", "family", "origin", "seed_source", "seed_model")]
    fields += [pa.field("difficulty", pa.int64())]
    fields += [pa.field("temperature", pa.float64()), pa.field("synthetic", pa.bool_()), pa.field("sample", pa.bool_()),
               pa.field("partition", pa.string()), pa.field("batch_id", pa.string())]
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


def rows_from_table(table: pa.Table) -> Iterator[dict[str, Any]]:
    """E1 dataset rows ({id, question, answer, info}) from Parquet batch rows."""
    from sv_env_network_logs.flows import FLOW_FIELD_NAMES, render_flow_question
    from sv_env_network_logs.synthetic import GENERATOR_ID, GENERATOR_VERSION

    for record in table.to_pylist():
        info = {"synthetic": record["synthetic"], "sample": record["sample"], "scenario": record["scenario"],
                "family": record["family"], "origin": record["origin"], "difficulty": record["difficulty"],
                "difficulty_basis": "rule baseline wrong" if record["difficulty"] else "rule baseline right",
                "partition": record["partition"], "batch_id": record["batch_id"],
                "generator": f"{GENERATOR_ID}@{GENERATOR_VERSION}"}
        if record.get("seed_source"):
            info["seed_source"] = record["seed_source"]
        if record.get("seed_model"):
            info["seed_model"] = {"name": record["seed_model"], "temperature": record["temperature"]}
        yield {"id": record["id"], "question": render_flow_question({k: record[k] for k in FLOW_FIELD_NAMES}),
               "answer": record["label"], "info": info}


def rows_from_parquet(path: Path, ids: set[str] | None = None) -> Iterator[dict[str, Any]]:
    """The batch's rows in E1's schema (only `ids` when given), read batch by batch."""
    handle = pq.ParquetFile(path)
    for batch in handle.iter_batches(batch_size=DEFAULT_CHUNK_ROWS):
        table = pa.Table.from_batches([batch])
        if ids is not None:
            table = table.filter(pc.is_in(table["id"], value_set=pa.array(sorted(ids), pa.string())))
        yield from rows_from_table(table)


def _model_columns(spec: BatchSpec, rng: random.Random, rejects: list[Reject]) -> tuple[dict[str, np.ndarray] | None, int]:
    """Flows the seed models write for playbook scenarios, at each temperature."""
    from sv_env_network_logs import synthetic as s

    scenarios = rng.sample(sorted(s.PLAYBOOKS), min(spec.variations, len(s.PLAYBOOKS)))
    samples = sample_variations([(name, s.variation_prompt(name)) for name in scenarios], spec.seed_models,
                                spec.temperatures, spec.env_id, concurrency=spec.sampling_concurrency)
    flows, meta = [], []
    for j, sample in enumerate(samples):
        row_id = f"{spec.id_prefix}-m{j:05d}"
        common = {"origin": "model", "model": sample.model, "temperature": sample.temperature}
        if sample.error is not None:
            rejects.append(Reject(row_id, "sampling", f"model call failed: {sample.error}", **common))
            continue
        try:
            flows.append(s.parse_variation(sample.text or "", sample.key))
            meta.append((row_id, sample))
        except ValueError as exc:
            rejects.append(Reject(row_id, "sampling", f"unusable model reply: {exc}", **common))
    cols, problems = s.seed_columns(flows)
    bad = {i for i, _ in problems}
    for i, reason in problems:
        row_id, sample = meta[i]
        rejects.append(Reject(row_id, "validation", reason, origin="model", model=sample.model, temperature=sample.temperature))
    kept = [m for i, m in enumerate(meta) if i not in bad]
    if not kept:
        return None, len(samples)
    cols["origin"] = np.full(len(kept), "model", dtype=object)
    cols["id"] = np.array([row_id for row_id, _ in kept], dtype=object)
    cols["seed_model"] = np.array([sample.model for _, sample in kept], dtype=object)
    cols["temperature"] = np.array([sample.temperature for _, sample in kept], dtype=np.float64)
    return cols, len(samples)


def run_e1_batch(spec: BatchSpec, seed_cols: dict[str, np.ndarray] | None, seed_sources: Sequence[str], seeds: dict[str, Any],
                 seed_rejects: Sequence[Reject] = (), *, perturb_share: float = 0.5, attack_share: float = 0.5,
                 chunk_rows: int = DEFAULT_CHUNK_ROWS, write_jsonl: bool = True) -> BatchResult:
    """One E1 batch of `spec.size` candidate flows (see the module doc). `seed_cols` are the
    seed flows to perturb (`seed_sources[i]` names where row i came from: file:line)."""
    from sv_env_network_logs import synthetic as s

    started = time.perf_counter()
    out = spec.out_dir
    out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(spec.seed)
    with_hosts = seed_cols is not None and all(h in seed_cols for h in s.HOST_FIELDS)
    schema = _schema(with_hosts)
    rejects: list[Reject] = list(seed_rejects)
    labels, scenarios, difficulty, origins = Counter(), Counter(), Counter(), Counter()
    accepted_ids: list[str] = []
    n_seed = 0 if seed_cols is None else len(seed_cols["label"])
    jsonl = (out / EXAMPLES_FILE).open("w", encoding="utf-8") if write_jsonl else None
    writer = pq.ParquetWriter(out / E1_PARQUET, schema, compression="zstd")

    def emit(cols: dict[str, np.ndarray]) -> None:
        """Validate, label, write one chunk; rejects recorded with id, stage and reason."""
        invalid = s.validate_flows(cols)
        unverified = s.verify_labels(cols)
        for stage, reasons in (("validation", invalid), ("verification", unverified)):
            bad = np.flatnonzero(reasons != None)  # noqa: E711 - numpy elementwise
            for i in bad:
                if stage == "verification" and invalid[i] is not None:
                    continue  # one reason per row: the first stage that failed
                rejects.append(Reject(str(cols["id"][i]), stage, str(reasons[i]),
                                      source=str(cols["seed_source"][i]) if cols["seed_source"][i] else None,
                                      origin=str(cols["origin"][i]), model=cols["seed_model"][i] or None))
        keep = np.flatnonzero((invalid == None) & (unverified == None))  # noqa: E711
        if not len(keep):
            return
        kept = s.take(cols, keep)
        kept["difficulty"] = s.difficulty(kept)
        table = _table(kept, spec, schema)
        writer.write_table(table)
        accepted_ids.extend(kept["id"].tolist())
        labels.update(kept["label"].tolist())
        scenarios.update(kept["scenario"].tolist())
        difficulty.update(kept["difficulty"].tolist())
        origins.update(kept["origin"].tolist())
        if jsonl is not None:
            for row in rows_from_table(table):
                jsonl.write(json.dumps(row, ensure_ascii=False, sort_keys=True) + "\n")

    n_model_calls = n_model_rows = 0
    try:
        for start in range(0, spec.size, chunk_rows):
            n = min(chunk_rows, spec.size - start)
            n_pert = int(round(n * perturb_share)) if n_seed else 0
            parts = [s.playbook_flows(n - n_pert, rng, attack_share)]
            if n_pert:
                parts.append(s.perturb_flows(seed_cols, n_pert, rng))
            cols = s.concat(parts)
            m = len(cols["label"])
            cols["id"] = np.array([f"{spec.id_prefix}-{start + i:06d}" for i in range(m)], dtype=object)
            if "seed_index" in parts[-1] and n_pert:
                sources = np.full(m, None, dtype=object)
                sources[m - n_pert:] = np.asarray(seed_sources, dtype=object)[parts[-1]["seed_index"]]
                cols["seed_source"] = sources
            else:
                cols["seed_source"] = np.full(m, None, dtype=object)
            cols["seed_model"] = np.full(m, None, dtype=object)
            emit(cols)
        if spec.seed_models:
            model_cols, n_model_calls = _model_columns(spec, random.Random(spec.seed), rejects)
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
    write_queue(out / QUEUE_FILE, list(rows_from_parquet(out / E1_PARQUET, spot)), spec)
    with (out / REJECTS_FILE).open("w", encoding="utf-8") as handle:
        for reject in rejects:
            handle.write(json.dumps(reject.to_dict(), sort_keys=True) + "\n")
    files = {"flows": out / E1_PARQUET, "rejects": out / REJECTS_FILE, "spot_check": out / QUEUE_FILE,
             "metadata": out / METADATA_FILE}
    if write_jsonl:
        files["examples"] = out / EXAMPLES_FILE
    counts = {"candidates": spec.size + n_model_rows, "template_candidates": spec.size, "model_calls": n_model_calls,
              "model_candidates": n_model_rows, "accepted": len(accepted_ids), "rejected": len(rejects),
              "seed_rows_rejected": len(seed_rejects), "by_origin": dict(origins), "seed_flows": n_seed}
    metadata = build_metadata(
        spec, generator_id=f"{s.GENERATOR_ID}@{s.GENERATOR_VERSION}", verifier=s.VERIFIER_ID,
        versions={"labeller": s.VERIFIER_ID, "scenarios": {name: book.rule for name, book in s.PLAYBOOKS.items()},
                  "difficulty": "sv_env_network_logs.baseline.classify_flow"},
        counts=counts, labels=labels, scenarios=scenarios, difficulty=difficulty, rejects=rejects, spot=len(spot),
        seeds=seeds, files={name: path.name for name, path in files.items()},
    )
    metadata["options"] = {"perturb_share": perturb_share, "attack_share": attack_share, "chunk_rows": chunk_rows}
    (out / METADATA_FILE).write_text(json.dumps(metadata, indent=2, sort_keys=True, default=str) + "\n", encoding="utf-8")
    return BatchResult(out, metadata, files, {"generate_validate_write": generated, "total": time.perf_counter() - started})
