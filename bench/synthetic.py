"""Synthetic E1 generation throughput: 100,000 rows generated, validated, labelled
and written as Parquet, in chunks, in a fresh process; wall time and that process's peak RSS.

The batch is what `synthetic/e1` makes, at benchmark size: half playbook flows, half
perturbed seed flows (the bundled IoT-23-schema sample as the train split), schema and
range validation, the scenario-invariant labeller, the rule baseline's difficulty tag,
zstd Parquet through pyarrow's ParquetWriter (no JSONL beside it at this size). The timer
starts after the imports and stops when the batch's files are closed.

Usage: python bench/synthetic.py [--n 100000] [--chunk 20000]   (prints one JSON line)
Targets (bench/run.py --only synthetic): <= 60 s, peak RSS <= 1 GiB, on this 2-core machine.
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def seed_split(folder: Path) -> Path:
    """The bundled sample corpus as a curated train split (E1's dataset schema)."""
    from sv_env_network_logs.flows import render_flow_question

    folder.mkdir(parents=True, exist_ok=True)
    corpus = ROOT / "data" / "samples" / "iot23-preprocessed.sample.jsonl"
    with (folder / "train.jsonl").open("w") as out:
        for i, line in enumerate(corpus.read_text().splitlines()):
            flow = json.loads(line)
            out.write(
                json.dumps(
                    {
                        "id": f"seed-{i}",
                        "question": render_flow_question(flow),
                        "answer": flow["label"],
                        "info": {"scenario": flow["scenario"]},
                    }
                )
                + "\n"
            )
    return folder


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--chunk", type=int, default=20_000)
    args = parser.parse_args()

    import pyarrow.parquet as pq

    from sv_dagster.core.data.synthetic import BatchSpec, derive_seed
    from sv_dagster.core.data.synthetic.columnar import run_columnar_batch
    from sv_dagster.core.envs import ENVS
    from sv_shared.synthetic import SyntheticInputs

    # The columnar environment: the one whose batches are sized for training.
    env = next(env for env in ENVS.values() if env.synthetic is not None and env.synthetic.table)

    rss_after_imports = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    with tempfile.TemporaryDirectory(prefix="sv-bench-synthetic-") as tmp:
        start = time.perf_counter()
        seeds = env.synthetic.read_seeds(SyntheticInputs(dataset_dir=seed_split(Path(tmp) / "dataset")))
        spec = BatchSpec(
            env=env.short,
            env_id=env.env_id,
            partition="2026-11-23",
            batch_id="bench",
            out_dir=Path(tmp) / "batch",
            size=args.n,
            seed=derive_seed(42, env.short, "2026-11-23"),
            sample=True,
        )
        result = run_columnar_batch(
            spec, seeds.data, seeds.sources, seeds.facts, seeds.rejects, chunk_rows=args.chunk, write_jsonl=False
        )
        seconds = time.perf_counter() - start
        parquet = result.files[env.synthetic.table]
        rows = pq.ParquetFile(parquet).metadata.num_rows
        size_mib = parquet.stat().st_size / 2**20
    meta = result.metadata
    print(
        json.dumps(
            {
                "rows_requested": args.n,
                "chunk_rows": args.chunk,
                "rows_written": rows,
                "accepted": meta["counts"]["accepted"],
                "rejected": meta["counts"]["rejected"],
                "by_origin": meta["counts"]["by_origin"],
                "label_balance": meta["label_balance"],
                "spot_check_rows": meta["spot_check"]["rows"],
                "seconds": seconds,
                "rows_per_s": args.n / seconds,
                "parquet_mib": size_mib,
                "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                "rss_after_imports_mib": rss_after_imports,
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
