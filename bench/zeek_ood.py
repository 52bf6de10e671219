"""E1 on real, unlabelled Zeek logs: the conn.log files of the `zat==0.4.9` sdist (360
connections tab-separated, 50 as JSON lines; traffic from zat's example captures, nothing
labelled), read through the corpus reader's Zeek format out of the pinned sdist, each flow
rendered as E1's prompt and answered by a registry model (default: the rule baseline).

Without labels nothing here is a score. What it records:
- the parser check: rows read, rows left out, and flows whose rendered prompt reads back to
  the same fields (`parse_flow_question`);
- the policy's answers on these out-of-distribution flows (a home network's captures, not
  IoT-23's): label counts and the abstention rate, beside the same policy's abstention rate
  on E1's bundled sample (in distribution), so a reader sees whether it abstains more where
  it knows less.

Usage: python bench/zeek_ood.py [--model heuristic]   (writes bench/results/<date>-e1-zeek-ood.json)
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.record import bench_record, write_record  # noqa: E402

ZAT = ("zat", "0.4.9", "ffd6155b55d4c253e91793c75870afdf2ccc3792c3a32fec4b32ea4184b415aa")
MEMBERS = {
    "data/conn.log": "059569c79e483cc35b683d7ef48b9c7a5ca03f3f21a1f90c86b30d953dcb00e7",
    "data/json/conn.log": "0e9616983ccc7a4e983f5e2c75aa612da2bb6bcae5f9ac44890bbb9f18b4dc00",
}


def _flows(frame: Any) -> list[dict[str, Any]]:
    import pandas as pd

    from sv_env_network_logs.flows import FLOW_FIELD_NAMES

    return [
        {name: (None if name not in record or pd.isna(record[name]) else record[name]) for name in FLOW_FIELD_NAMES}
        for record in frame.to_dict("records")
    ]


async def _answers(model: str, prompts: list[str]) -> Counter[str]:
    """The label of the model's parsed reply to each prompt (`invalid` when it has none)."""
    from sv_dagster.core.envs import ENVS
    from sv_dagster.core.models.backends import make_backend
    from sv_dagster.core.models.registry import load_registry
    from sv_env_network_logs.flows import SYSTEM_PROMPT

    env = ENVS["e1"]
    backend = make_backend(load_registry()[model], env.env_id)
    await backend.preflight()
    labels: Counter[str] = Counter()
    try:
        for prompt in prompts:
            messages = [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": prompt}]
            parsed = env.parse((await backend.complete(messages)).text)
            labels[parsed.label or "invalid"] += 1
    finally:
        await backend.aclose()
    return labels


def _rates(labels: Counter[str], n: int) -> dict[str, Any]:
    return {"n": n, "labels": dict(sorted(labels.items())), "abstain_rate": labels["Abstain"] / n if n else None}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="heuristic", help="registry model answering E1's prompts")
    args = parser.parse_args(argv)

    from sv_dagster.core.data.corpora.readers import read_blob
    from sv_dagster.core.data.sdists import fetch_sdist
    from sv_dagster.core.envs import ENVS
    from sv_env_network_logs.flows import parse_flow_question, render_flow_question

    sdist = fetch_sdist(*ZAT)
    files, everything = [], []
    for member, sha in MEMBERS.items():
        blob, facts = sdist.read(member, sha)
        table = read_blob(blob, split="unlabelled", fmt=None, display=f"zat==0.4.9:{member}")
        flows = _flows(table.frame)
        prompts = [render_flow_question(flow) for flow in flows]
        round_trip = sum(
            all(
                parse_flow_question(p).get(k) == (None if v == "" else v)
                or (isinstance(v, float) and abs(parse_flow_question(p)[k] - v) <= 1e-5 * abs(v))
                for k, v in f.items()
            )
            for f, p in zip(flows, prompts)
        )
        labels = asyncio.run(_answers(args.model, prompts))
        everything.append(labels)
        files.append(
            {
                **facts.provenance(),
                "rows_read": len(flows),
                "rows_left_out": table.n_malformed,
                "flows_read_back_the_same": round_trip,
                **_rates(labels, len(flows)),
            }
        )
    total = sum(everything, Counter())
    bundled = [task.data.prompt_text for task in ENVS["e1"].load_tasks(None, None)]
    results = {
        "model": args.model,
        "sdist": sdist.provenance(),
        "files": files,
        "ood_all": _rates(total, sum(total.values())),
        "bundled_sample_in_distribution": _rates(asyncio.run(_answers(args.model, bundled)), len(bundled)),
    }
    out = write_record(bench_record(f"python bench/zeek_ood.py --model {args.model}", results), "e1-zeek-ood")
    ood, ind = results["ood_all"], results["bundled_sample_in_distribution"]
    for entry in files:
        print(
            f"{entry['member']}: {entry['rows_read']} flows read ({entry['rows_left_out']} left out), "
            f"{entry['flows_read_back_the_same']} read back the same from E1's prompt; "
            f"{args.model}: {entry['labels']}, abstains on {entry['abstain_rate']:.3f}"
        )
    print(
        f"{args.model} abstains on {ood['abstain_rate']:.3f} of the {ood['n']} zat flows (unlabelled, OOD) and on "
        f"{ind['abstain_rate']:.3f} of the {ind['n']} bundled E1 flows; {out.relative_to(ROOT)}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
