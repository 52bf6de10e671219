"""E2 and E3 scoring throughput (issue 3), without model time: completions are prepared
first, then scored the way an eval scores them (`await task.score(trace)` through the
runner's `score_row`, many rollouts at once). Each measurement runs in its own process so
its tool-result cache (SV_TOOL_CACHE) and in-memory memos start as stated:

  e2-cold   every file new to the cache: OPA, Semgrep and Checkov really run (batched)
  e2-warm   the same rollouts again in a new process: tools answered from the disk cache
  e2-naive  one tool process per tool per file, no cache, no batching (original + patched)
  e3        pytest in the sandbox for every rollout, Bandit + Semgrep re-scan (batched, cached)
  e3-naive  one rollout at a time, a fresh Semgrep process each (no cache)

Usage: python bench/scoring.py MODE --n N --data DIR   (prints one JSON line)
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def e2_dataset(data: Path, n: int) -> Path:
    """n distinct files: the bundled corpus, each copy made unique by a comment line (so
    nothing is in any cache), with completions from the tool oracle (computed here, in a
    cache the measured process never sees)."""
    from sv_env_config_verification import bundled_examples, oracle_reply

    from sv_dagster.core.envs import ENVS

    examples = bundled_examples()
    dataset, completions = data / "e2.jsonl", data / "e2-completions.jsonl"
    with dataset.open("w") as out:
        for i in range(n):
            ex = examples[i % len(examples)]
            record = {"id": f"v{i}-{ex.id}", "filename": f"v{i}-{ex.filename}", "sample": True,
                      "content": f"# bench variant {i} {uuid.uuid4().hex}\n" + ex.content}
            out.write(json.dumps(record) + "\n")
    from sv_env_config_verification.tools import default_suite

    records = [json.loads(line) for line in dataset.read_text().splitlines()]
    default_suite().scan_many({r["filename"]: r["content"] for r in records})  # one process per tool
    with completions.open("w") as answers:
        for task in ENVS["e2"].load_tasks(dataset, None):
            answers.write(json.dumps({"id": task.key, "completion": oracle_reply(task.data.prompt_text)}) + "\n")
    return dataset


async def score_all(env_short: str, dataset: Path | None, completions: dict[str, list[str]], concurrency: int) -> dict:
    from sv_dagster.core.envs import ENVS
    from sv_dagster.core.runner import score_row

    env = ENVS[env_short]
    tasks = env.load_tasks(dataset, None)
    jobs = [(task, completion) for task in tasks for completion in completions.get(task.key, [])]
    parse = env.parser()
    semaphore = asyncio.Semaphore(concurrency)
    errors = 0

    async def one(task, completion):
        nonlocal errors
        async with semaphore:
            row: dict = {}
            if await score_row(row, task, completion, parse, "bench") != "scored":
                errors += 1

    start = time.perf_counter()
    await asyncio.gather(*(one(task, completion) for task, completion in jobs))
    seconds = time.perf_counter() - start
    stats = env.tool_cache_stats() or {}
    return {"rollouts": len(jobs), "seconds": seconds, "rollouts_per_hour": len(jobs) / seconds * 3600,
            "scoring_errors": errors, "tool_cache": stats}


def e2_naive(data: Path, n: int) -> dict:
    """What a per-rollout tool run costs: every tool started for the original file and again
    for the patched one, no cache, no batching."""
    from sv_env_config_verification import apply_patch, parse_completion
    from sv_env_config_verification.opa import OpaEvaluator
    from sv_env_config_verification.tools import checkov_checks, semgrep_rules_dir
    from sv_shared.tools import Scanner

    records = [json.loads(line) for line in (data / "e2.jsonl").read_text().splitlines()][:n]
    answers = {json.loads(line)["id"]: json.loads(line)["completion"] for line in (data / "e2-completions.jsonl").read_text().splitlines()}
    opa = OpaEvaluator(None)
    semgrep, checkov = Scanner("semgrep", rules=semgrep_rules_dir()), Scanner("checkov")
    checkov_checks()
    start = time.perf_counter()
    for record in records:
        name, content = record["filename"], record["content"]
        files = [content]
        answer = parse_completion(answers[record["id"]])
        if answer.patch:
            try:
                files.append(apply_patch(name, content, answer.patch))
            except Exception:
                pass
        for text in files:
            opa.evaluate(name, text)
            semgrep.scan_many({name: text})
            checkov.scan_many({name: text})
    seconds = time.perf_counter() - start
    return {"rollouts": len(records), "seconds": seconds, "rollouts_per_hour": len(records) / seconds * 3600,
            "tool_processes": semgrep.processes_run + checkov.processes_run}


def e3_completions(n: int, unique: bool = True) -> dict[str, list[str]]:
    """Oracle and heuristic repairs, alternately; each completion made unique by its
    explanation, so every rollout really runs the tests (no memo hit)."""
    from sv_env_code_vulnerability import bundled_tasks, heuristic_reply, oracle_reply, render_prompt

    tasks = bundled_tasks()
    out: dict[str, list[str]] = {}
    for i in range(n):
        task = tasks[i % len(tasks)]
        reply = json.loads((oracle_reply if i % 2 == 0 else heuristic_reply)(render_prompt(task)))
        reply["explanation"] = f"{reply.get('explanation', '')} (rollout {i} {uuid.uuid4().hex if unique else ''})"
        out.setdefault(task.id, []).append(json.dumps(reply))
    return out


def e3_naive(n: int) -> dict:
    from sv_env_code_vulnerability import bundled_tasks, verify

    by_id = {task.id: task for task in bundled_tasks()}
    jobs = [(by_id[key], c) for key, cs in e3_completions(n).items() for c in cs]
    start = time.perf_counter()
    for task, completion in jobs:
        # A fresh cache directory per rollout: a Semgrep process for every rollout.
        verify(task, completion, semgrep=True)
    seconds = time.perf_counter() - start
    return {"rollouts": len(jobs), "seconds": seconds, "rollouts_per_hour": len(jobs) / seconds * 3600}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=["e2-prepare", "e2-cold", "e2-warm", "e2-naive", "e3", "e3-naive"])
    parser.add_argument("--n", type=int, default=200)
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--variants", type=int, default=5, help="e2-warm: answers per file")
    args = parser.parse_args()
    args.data.mkdir(parents=True, exist_ok=True)
    if args.mode == "e2-prepare":
        e2_dataset(args.data, args.n)
        result = {"prepared": args.n}
    elif args.mode in ("e2-cold", "e2-warm"):
        # Warm: several answers per file (other confidences), so each rollout is a new
        # completion (no memo hit) whose tool results are all in the disk cache.
        variants = 1 if args.mode == "e2-cold" else args.variants
        answers: dict[str, list[str]] = {}
        for line in (args.data / "e2-completions.jsonl").read_text().splitlines():
            record = json.loads(line)
            for k in range(variants):
                reply = json.loads(record["completion"])
                reply["confidence"] = round(0.5 + k / (2 * variants), 4)
                answers.setdefault(record["id"], []).append(json.dumps(reply))
        result = asyncio.run(score_all("e2", args.data / "e2.jsonl", answers, args.concurrency))
    elif args.mode == "e2-naive":
        result = e2_naive(args.data, args.n)
    elif args.mode == "e3":
        result = asyncio.run(score_all("e3", None, e3_completions(args.n), args.concurrency))
    else:
        result = e3_naive(args.n)
    print(json.dumps({"mode": args.mode, **result}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
