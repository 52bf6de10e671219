"""Score a completion in-process the way `vf-eval` does, and read `vf-eval`'s traces.

`completion_trace` builds the same trace shape the v1 rollout records for one chat turn
(prompt nodes, then one sampled assistant node), so `await task.score(trace)` fills
`trace.rewards` exactly as `vf-eval` does for the same reply (rewards that need a
runtime are skipped offline). See tests/support/VF_EVAL_NOTES.md.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import verifiers.v1 as vf
from verifiers.v1.state import state_cls


def completion_trace(task: vf.Task, completion: str, prompt: str | None = None) -> vf.Trace:
    """A finished one-turn trace for `task` whose assistant reply is `completion`.

    `prompt` overrides the task's own prompt (`task.data.prompt`, a string or messages);
    the task's system prompt, if any, comes first as the null harness sends it.
    """
    data = task.data
    messages: list[Any] = []
    if data.system_prompt:
        messages.append(vf.SystemMessage(content=data.system_prompt))
    user_prompt = prompt if prompt is not None else data.prompt
    if isinstance(user_prompt, str):
        messages.append(vf.UserMessage(content=user_prompt))
    elif user_prompt:
        messages.extend(user_prompt)
    nodes = [vf.MessageNode(parent=i - 1 if i else None, message=m) for i, m in enumerate(messages)]
    nodes.append(
        vf.MessageNode(
            parent=len(nodes) - 1 if nodes else None,
            message=vf.AssistantMessage(content=completion),
            sampled=True,
        )
    )
    trace = vf.Trace(
        task=vf.TraceTask(type=type(task).__name__, data=data, key=task.key, hash=task.hash),
        state=state_cls(type(task))(),
        agent=vf.AgentInfo(config=vf.AgentConfig(), name="offline", trainable=False),
        nodes=nodes,
    )
    trace.stop("agent_completed")
    trace.ok = True
    return trace


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
                        "reward": sum(s * weights[n] for n, s in scores.items() if s is not None),
                        "ok": bool(episode.get("ok")) and bool(trace.get("ok")),
                        "errors": episode_errors + [e["message"] for e in trace.get("errors", [])],
                        "stop_condition": trace.get("stop_condition"),
                    }
                )
    return rows
