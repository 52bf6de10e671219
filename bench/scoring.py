"""E2 and E3 scoring throughput, without model time: completions are prepared
first, then scored the way an eval scores them (`await task.score(trace)` through the
runner's `score_row`, many rollouts at once). Each measurement runs in its own process so
its tool-result cache (SV_TOOL_CACHE) and in-memory memos start as stated:

  e2-cold   every file new to the cache: OPA, Semgrep and Checkov really run (batched)
  e2-warm   the same rollouts again in a new process: tools answered from the disk cache
  e2-naive  one tool process per tool per file, no cache, no batching (original + patched)
  e3        pytest in the sandbox for every rollout, Bandit + Semgrep re-scan (batched, cached)
  e3-naive  one rollout at a time, a fresh Semgrep process each (no cache)
  e4        E4 (phishing) on ONE core, target 5,000 rollouts/s: (a) full `score_completion`
            (trace + verifiers `task.score` + rewards) and (b) the environment's six rewards
            alone on prepared traces, plus the parts of (a) (see `e4_scoring`)

Usage: python bench/scoring.py MODE --n N --data DIR   (prints one JSON line)
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
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
    from sv_dagster.core.envs import ENVS
    from sv_env_config_verification import bundled_examples, oracle_reply

    examples = bundled_examples()
    dataset, completions = data / "e2.jsonl", data / "e2-completions.jsonl"
    with dataset.open("w") as out:
        for i in range(n):
            ex = examples[i % len(examples)]
            record = {
                "id": f"v{i}-{ex.id}",
                "filename": f"v{i}-{ex.filename}",
                "sample": True,
                "content": f"# bench variant {i} {uuid.uuid4().hex}\n" + ex.content,
            }
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
    from sv_dagster.core.evals.runner import score_row

    env = ENVS[env_short]
    tasks = env.load_tasks(dataset, None)
    jobs = [(task, completion) for task in tasks for completion in completions.get(task.key, [])]
    parse = env.parse
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
    stats = env.tool_cache_now() or {}
    return {
        "rollouts": len(jobs),
        "seconds": seconds,
        "rollouts_per_hour": len(jobs) / seconds * 3600,
        "scoring_errors": errors,
        "tool_cache": stats,
    }


def e2_naive(data: Path, n: int) -> dict:
    """What a per-rollout tool run costs: every tool started for the original file and again
    for the patched one, no cache, no batching."""
    from sv_env_config_verification import apply_patch, parse_completion
    from sv_env_config_verification.opa import OpaEvaluator
    from sv_env_config_verification.tools import checkov_checks, semgrep_rules_dir
    from sv_shared.tools import Scanner

    records = [json.loads(line) for line in (data / "e2.jsonl").read_text().splitlines()][:n]
    answers = {
        json.loads(line)["id"]: json.loads(line)["completion"]
        for line in (data / "e2-completions.jsonl").read_text().splitlines()
    }
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
    return {
        "rollouts": len(records),
        "seconds": seconds,
        "rollouts_per_hour": len(records) / seconds * 3600,
        "tool_processes": semgrep.processes_run + checkov.processes_run,
    }


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


E4_TARGET_PER_S = 5_000
E4_REWARDS = ("format", "accuracy", "calibration", "asymmetric_cost", "abstention", "evidence")


def e4_completions(tasks: list, n: int, tag: str) -> list[tuple[object, str]]:
    """n (task, completion) jobs over the bundled sample: the rule baseline's reply, the same
    with invented evidence, JSON inside prose, a plain-text label, an evidence-free
    Legitimate answer, and unparsable text. Every completion is unique (rollout number in
    it), so no memo is hit across rollouts."""
    from sv_env_phishing_detection import heuristic_reply

    replies = {}
    jobs = []
    for i in range(n):
        task = tasks[i % len(tasks)]
        if task.key not in replies:
            replies[task.key] = json.loads(heuristic_reply(task.data.prompt_text))
        base, kind = replies[task.key], (i // len(tasks)) % 6
        note = f"{tag} rollout {i}"
        if kind == 0:
            text = json.dumps({**base, "note": note}, ensure_ascii=False)
        elif kind == 1:
            evidence = [
                *base["evidence"],
                "www.secure-login-verify.com",
                f'Quote: "please act now {i}"',
                "Reply-To mismatch",
                "invoice.exe attachment",
            ]
            text = json.dumps({**base, "evidence": evidence, "note": note}, ensure_ascii=False)
        elif kind == 2:
            fenced = json.dumps(base, ensure_ascii=False)
            text = f"Looking at the headers ({note}), my answer is:\n```json\n{fenced}\n```"
        elif kind == 3:
            text = f"Label: {base['label']}\nConfidence: {base['confidence']}\n({note})"
        elif kind == 4:
            text = json.dumps({"label": "Legitimate", "confidence": 0.7, "evidence": [], "note": note})
        else:
            text = f"I cannot tell {{label: maybe ({note})"
        jobs.append((task, text))
    return jobs


def e4_scoring(n: int = 2000, cpu: int | None = None) -> dict:
    """E4 scoring throughput without model time, on ONE core (`cpu`, default the lowest
    allowed), against the target of 5,000 rollouts/s:

      full_per_s      (a) `score_completion(task, completion)`: trace construction,
                      verifiers' `task.score` and the six rewards, as the pipeline scores
      rewards_per_s   (b) the environment's reward computation alone: the six @vf.reward
                      methods awaited on a trace built beforehand (a trainer scoring
                      rollouts it already holds)
      trace_per_s     `completion_trace` alone (part of (a), sv_dagster + verifiers models)
      score_row_per_s the runner's whole row: (a) plus answer parse, refusal check, details
      fast_score_per_s  `task.fast_score(completion)`: (a)'s (scores, weights, total) computed
                      by the environment without a trace or verifiers' `task.score` (a
                      shortcut the runner may take; `fast_score_mismatches` counts rollouts
                      whose numbers differ from (a)'s, checked outside the timing)

    Each figure uses freshly loaded tasks (per-task memos empty; email indexes built inside
    the timing) and unique completions, after one warm-up pass (imports, lru caches)."""
    from sv_dagster.core.envs import ENVS
    from sv_dagster.core.evals.runner import score_completion, score_row
    from sv_dagster.core.evals.traces import completion_trace

    env = ENVS["e4"]
    allowed = os.sched_getaffinity(0)
    cpu = min(allowed) if cpu is None else cpu
    os.sched_setaffinity(0, {cpu})
    try:

        def fresh(tag: str) -> list[tuple[object, str]]:
            return e4_completions(env.load_tasks(None, None), n, tag)

        def timed(jobs, fn) -> float:
            start = time.perf_counter()
            fn(jobs)
            return len(jobs) / (time.perf_counter() - start)

        async def full(jobs):
            for task, completion in jobs:
                await score_completion(task, completion)

        async def rows(jobs):
            parse = env.parse
            for task, completion in jobs:
                await score_row({}, task, completion, parse, "bench")

        async def rewards(prepared):
            for task, trace in prepared:
                for name in E4_REWARDS:
                    await getattr(task, name)(trace)

        asyncio.run(full(fresh("warm-up")))
        full_per_s = timed(fresh("full"), lambda jobs: asyncio.run(full(jobs)))
        trace_per_s = timed(fresh("trace"), lambda jobs: [completion_trace(t, c) and None for t, c in jobs])
        prepared = [(t, completion_trace(t, c)) for t, c in fresh("rewards")]
        rewards_per_s = timed(prepared, lambda jobs: asyncio.run(rewards(jobs)))
        row_per_s = timed(fresh("row"), lambda jobs: asyncio.run(rows(jobs)))
        fast_jobs = fresh("fast")
        fast_per_s = timed(fast_jobs, lambda jobs: [task.fast_score(c) and None for task, c in jobs])

        async def mismatches() -> int:
            bad = 0  # separate task objects, so neither side reads the other's memo
            for (task, completion), (twin, _) in zip(fresh("check")[:500], fresh("check")[:500]):
                expected = await score_completion(task, completion)
                got = twin.fast_score(completion)
                bad += got is None or got != expected or list(got[0]) != list(expected[0])
            return bad

        fast_mismatches = asyncio.run(mismatches())
    finally:
        os.sched_setaffinity(0, allowed)
    us = {k: 1e6 / v for k, v in (("full", full_per_s), ("trace", trace_per_s), ("rewards", rewards_per_s))}
    return {
        "rollouts": n,
        "cpu": cpu,
        "target_per_s": E4_TARGET_PER_S,
        "full_per_s": round(full_per_s),
        "full_meets_target": full_per_s >= E4_TARGET_PER_S,
        "rewards_per_s": round(rewards_per_s),
        "rewards_meets_target": rewards_per_s >= E4_TARGET_PER_S,
        "trace_per_s": round(trace_per_s),
        "score_row_per_s": round(row_per_s),
        "fast_score_per_s": round(fast_per_s),
        "fast_score_meets_target": fast_per_s >= E4_TARGET_PER_S,
        "fast_score_mismatches": fast_mismatches,
        # (a) per rollout split: trace construction, verifiers' task.score bookkeeping
        # (what is left of (a) after the trace and the rewards), the rewards themselves
        "us_per_rollout": {
            "full": round(us["full"], 1),
            "trace": round(us["trace"], 1),
            "verifiers_score_overhead": round(us["full"] - us["trace"] - us["rewards"], 1),
            "rewards": round(us["rewards"], 1),
        },
    }


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=["e2-prepare", "e2-cold", "e2-warm", "e2-naive", "e3", "e3-naive", "e4"])
    parser.add_argument("--n", type=int, default=200)
    parser.add_argument("--data", type=Path, required=True, help="work directory (e4: unused)")
    parser.add_argument("--cpu", type=int, default=None, help="e4: the one core to pin to")
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
    elif args.mode == "e4":
        result = e4_scoring(args.n, args.cpu)
    else:
        result = e3_naive(args.n)
    print(json.dumps({"mode": args.mode, **result}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
