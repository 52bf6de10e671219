"""Data-pipeline benchmark: curation of a 1M-row E1 corpus, target <= 5 minutes on
this 2-core machine, with the peak RSS of the curating process.

Each step runs in its own process (peak RSS is per process; `bench/run.py --only curation`
starts them):

  generate  N flows in IoT-23's columns (vectorised, seeded; ~1% exact duplicates and
            re-cased near-duplicates, a few unusable labels) -> corpus.parquet. Not timed.
  load      the corpus loader on that file as a local copy (per-row schema checks). Timed apart.
  curate    dataset/e1's recipe: read the corpus table, normalise, render every flow, hash
            (content and normalised text), de-duplicate, split, write train/dev/test JSONL
            and rejects. THE TIMED STEP the target is about.
  validate  the dataset's Great Expectations suite on the written files (hashes recomputed).

Usage: python bench/data.py MODE --data DIR [--n N]   (prints one JSON line)
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

# (scenario, label, proto, service, destination ports, conn_state, history, orig bytes, resp bytes, duration s, weight)
SCENARIOS = [
    (
        "benign_web",
        "Benign",
        "tcp",
        "http",
        (80, 8080),
        "SF",
        "ShADadfF",
        (200, 3_000),
        (500, 60_000),
        (0.01, 5.0),
        0.30,
    ),
    (
        "benign_tls",
        "Benign",
        "tcp",
        "ssl",
        (443, 8883),
        "SF",
        "ShADadFf",
        (300, 5_000),
        (1_000, 90_000),
        (0.05, 120.0),
        0.20,
    ),
    ("benign_dns", "Benign", "udp", "dns", (53,), "SF", "Dd", (30, 80), (60, 300), (0.0, 0.1), 0.15),
    (
        "port_scan",
        "Malicious",
        "tcp",
        "-",
        (21, 22, 23, 25, 80, 443, 2323, 8080),
        "S0",
        "S",
        (0, 0),
        (0, 0),
        (0.0, 0.0),
        0.15,
    ),
    (
        "telnet_bruteforce",
        "Malicious",
        "tcp",
        "-",
        (23, 2323),
        "RSTO",
        "ShAdDaR",
        (20, 200),
        (20, 400),
        (0.5, 10.0),
        0.08,
    ),
    ("cc_beacon", "Malicious", "tcp", "ssl", (443, 6667), "SF", "ShADadFf", (100, 800), (100, 800), (0.1, 2.0), 0.07),
    ("udp_flood", "Malicious", "udp", "-", (53, 123, 1900), "S0", "D", (10_000, 500_000), (0, 0), (0.5, 5.0), 0.05),
]


def generate(path: Path, n: int, seed: int = 5) -> dict:
    import numpy as np
    import pandas as pd

    rng = np.random.default_rng(seed)
    weights = np.array([s[-1] for s in SCENARIOS])
    which = rng.choice(len(SCENARIOS), size=n, p=weights / weights.sum())
    columns: dict[str, object] = {}
    pick = {
        name: np.empty(n, dtype=object) for name in ("scenario", "label", "proto", "service", "conn_state", "history")
    }
    resp_p = np.zeros(n, dtype=np.int64)
    orig_bytes = np.zeros(n, dtype=np.int64)
    resp_bytes = np.zeros(n, dtype=np.int64)
    duration = np.zeros(n, dtype=np.float64)
    for index, (scenario, label, proto, service, ports, state, history, ob, rb, dur, _) in enumerate(SCENARIOS):
        mask = which == index
        m = int(mask.sum())
        for name, value in (
            ("scenario", scenario),
            ("label", label),
            ("proto", proto),
            ("service", service),
            ("conn_state", state),
            ("history", history),
        ):
            pick[name][mask] = value
        resp_p[mask] = rng.choice(ports, size=m)
        orig_bytes[mask] = rng.integers(ob[0], ob[1] + 1, size=m)
        resp_bytes[mask] = rng.integers(rb[0], rb[1] + 1, size=m)
        duration[mask] = np.round(rng.uniform(dur[0], dur[1], size=m), 6)
    orig_pkts = np.maximum(1, orig_bytes // 500 + rng.integers(1, 5, size=n))
    resp_pkts = np.where(resp_bytes > 0, np.maximum(1, resp_bytes // 1000 + rng.integers(1, 5, size=n)), 0)
    columns.update(
        {
            "conn_state": pick["conn_state"],
            "duration": duration,
            "history": pick["history"],
            "id.orig_p": rng.integers(1024, 65535, size=n),
            "id.resp_p": resp_p,
            "label": pick["label"],
            "missed_bytes": np.zeros(n, dtype=np.int64),
            "orig_bytes": orig_bytes,
            "orig_ip_bytes": orig_bytes + 40 * orig_pkts,
            "orig_pkts": orig_pkts,
            "proto": pick["proto"],
            "resp_bytes": resp_bytes,
            "resp_ip_bytes": resp_bytes + 40 * resp_pkts,
            "resp_pkts": resp_pkts,
            "scenario": pick["scenario"],
            "service": pick["service"],
        }
    )
    frame = pd.DataFrame(columns)
    copies = frame.sample(n=n // 100, random_state=seed)  # ~1% exact duplicates...
    recased = frame.sample(n=n // 200, random_state=seed + 1).assign(
        proto=lambda f: f["proto"].str.upper()
    )  # ...and near ones
    frame = pd.concat([frame, copies, recased], ignore_index=True).sample(frac=1.0, random_state=seed).head(n)
    frame.loc[frame.index[:: max(1, n // 50)], "label"] = "-"  # a few unusable labels, rejected with file:line
    frame.reset_index(drop=True).to_parquet(path, index=False)
    return {"generated_rows": len(frame), "corpus_bytes": path.stat().st_size}


def _peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def load(data: Path) -> dict:
    from sv_dagster.core.data.corpora import load_corpus, load_sources, resolve_location

    spec = load_sources()["iot23"]
    start = time.perf_counter()
    loaded = load_corpus(spec, resolve_location(spec, str(data / "corpus.parquet")), cache_dir=data / "cache")
    seconds = time.perf_counter() - start
    loaded.frame.to_parquet(data / "rows.parquet", index=False)  # what corpus/iot23 writes (not timed)
    return {
        "load_s": seconds,
        "load_rows": len(loaded.frame),
        "load_malformed": loaded.n_malformed,
        "load_peak_rss_mib": _peak_rss_mib(),
    }


def curate(data: Path) -> dict:
    """dataset/e1's recipe minus Dagster: the parquet the corpus asset wrote in, split files out."""
    import pandas as pd

    from sv_dagster.core.data.corpora import load_sources
    from sv_dagster.core.data.corpora.build import CorpusInput, build_dataset

    spec = load_sources()["iot23"]
    start = time.perf_counter()
    frame = pd.read_parquet(data / "rows.parquet")
    build = build_dataset("e1", [CorpusInput(spec, frame, False)], data / "dataset")
    seconds = time.perf_counter() - start
    (data / "report.json").write_text(json.dumps(build.report))
    report = build.report
    return {
        "curation_s": seconds,
        "curation_rows_in": report["n_corpus_rows"],
        "curation_rows_out": sum(report["split_sizes"].values()),
        "curation_duplicates": report["n_duplicates_dropped"],
        "curation_rejects": report["n_rejected"],
        "curation_split_sizes": report["split_sizes"],
        "curation_rows_per_s": report["n_corpus_rows"] / seconds,
        "curation_peak_rss_mib": _peak_rss_mib(),
    }


def validate(data: Path) -> dict:
    from sv_dagster.core.data.validation import dataset_suite

    start = time.perf_counter()
    import great_expectations  # noqa: F401 - once per process (~3-10 s here); timed apart

    import_s = time.perf_counter() - start
    report = json.loads((data / "report.json").read_text())
    files = {name: data / "dataset" / file for name, file in report["files"].items() if name != "rejects"}
    start = time.perf_counter()
    result = dataset_suite("e1", files, report)
    seconds = time.perf_counter() - start
    return {
        "validation_s": seconds,
        "validation_gx_import_s": import_s,
        "validation_rows": result.n_rows,
        "validation_expectations": len(result.outcomes),
        "validation_passed": result.success,
        "validation_peak_rss_mib": _peak_rss_mib(),
    }


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=["generate", "load", "curate", "validate"])
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--n", type=int, default=1_000_000)
    args = parser.parse_args()
    args.data.mkdir(parents=True, exist_ok=True)
    result = {
        "generate": lambda: generate(args.data / "corpus.parquet", args.n),
        "load": lambda: load(args.data),
        "curate": lambda: curate(args.data),
        "validate": lambda: validate(args.data),
    }[args.mode]()
    print(json.dumps({"mode": args.mode, **result}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
