"""Read `vf-eval`'s traces.jsonl (see docs/vf-eval.md). The in-process counterpart,
a reply turned into a trace and scored, is `sv_dagster.core.evals.traces.completion_trace`."""

from __future__ import annotations

import json
from pathlib import Path


def _completion(trace: dict) -> str | None:
    if trace.get("root_reply") is not None:
        return trace["root_reply"]
    sampled = [n["message"] for n in trace.get("nodes", []) if n.get("sampled")]
    replies = [m.get("content") for m in sampled if m.get("role") == "assistant"]
    return replies[-1] if replies else None


def read_vf_eval_traces(output_dir: str | Path) -> list[dict]:
    """One dict per recorded trace (an episode without traces gives one, completion None).

    `output_dir` is a run dir (holding `traces.jsonl`) or the `-o` dir above run dirs.
    Keys: key, idx, id, completion, rewards {name: score or None}, weights {name: weight},
    reward (sum of score * weight), ok (episode and trace), errors (messages),
    stop_condition.
    """
    root = Path(output_dir)
    files = [root / "traces.jsonl"] if (root / "traces.jsonl").exists() else sorted(root.glob("*/traces.jsonl"))
    rows = []
    for path in files:
        for line in path.read_text().splitlines():
            if not line.strip():
                continue
            episode = json.loads(line)
            task = episode["task"]
            base = {"key": task.get("key"), "idx": task["data"].get("idx"), "id": task["data"].get("id")}
            episode_errors = [e["message"] for e in episode.get("errors", [])]
            for trace in episode.get("traces") or [None]:
                trace = trace or {}
                rewards = trace.get("rewards") or {}
                scores = {name: (r or {}).get("score") for name, r in rewards.items()}
                weights = {name: (r or {}).get("weight", 1.0) for name, r in rewards.items()}
                rows.append(
                    {
                        **base,
                        "completion": _completion(trace),
                        "rewards": scores,
                        "weights": weights,
                        "reward": sum((s * weights[n] for n, s in scores.items() if s is not None), 0.0),
                        "ok": bool(episode.get("ok")) and bool(trace.get("ok")),
                        "errors": episode_errors + [e["message"] for e in trace.get("errors", [])],
                        "stop_condition": trace.get("stop_condition"),
                    }
                )
    return rows
