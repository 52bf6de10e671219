"""Write the bundled SAMPLE data (synthetic, deterministic; never mistaken for real corpora).

    python scripts/make_samples.py

Re-running it rewrites the same bytes; the files are committed so the demo needs no network.
"""

from __future__ import annotations

import json
from pathlib import Path

from sv_env_network_logs.flows import render_flow_question
from sv_env_network_logs.samples import sample_flows

ROOT = Path(__file__).resolve().parents[1]
IOT23_SAMPLE = ROOT / "data" / "samples" / "iot23-preprocessed.sample.jsonl"
E1_BUNDLED = ROOT / "environments" / "sv-env-network-logs" / "sv_env_network_logs" / "data" / "sample.jsonl"


def write_jsonl(path: Path, rows: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as handle:
        for row in rows:
            handle.write(json.dumps(row, sort_keys=True) + "\n")
    print(f"wrote {len(rows)} rows to {path.relative_to(ROOT)}")


def main() -> None:
    # Corpus sample: IoT-23 preprocessed columns (+ scenario), with 6 exact duplicates.
    write_jsonl(IOT23_SAMPLE, sample_flows(300, seed=23, duplicates=6))
    # The E1 package's own data, in the common {"question","answer","info"} shape.
    rows = [
        {
            "id": f"e1-sample-{i:04d}",
            "question": render_flow_question(flow),
            "answer": flow["label"],
            "info": {"scenario": flow["scenario"], "sample": True},
        }
        for i, flow in enumerate(sample_flows(60, seed=1))
    ]
    write_jsonl(E1_BUNDLED, rows)


if __name__ == "__main__":
    main()
