"""E2 and E3 scoring throughput, without model time: completions are prepared
first, then scored the way an eval scores them (`await task.score(trace)` through the
runner's `score_row`, many rollouts at once). Each measurement runs in its own process so
its tool-result cache (SV_TOOL_CACHE) and in-memory memos start as stated:

  e2-cold   every file new to the cache: OPA, Semgrep and Checkov really run (batched)
  e2-warm   the same rollouts again in a new process: tools answered from the disk cache
  e2-naive  one tool process per tool per file, no cache, no batching (original + patched)
  e3        pytest in the sandbox for every rollout, Bandit + Semgrep re-scan (batched, cached)
  e3-naive  one rollout at a time, a fresh Semgrep process each (no cache)
  e4        E4 (phishing) on ONE core, target 5,000 rollouts/s on the runner's row path
            (`score_row`, which takes the task's `fast_score`), beside that path forced
            through verifiers' trace and `task.score`, the six rewards alone, and the parts
            of each (see `e4_scoring`)

Usage: python bench/scoring.py MODE --n N --data DIR   (prints one JSON line)
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import statistics
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
E4_REPEATS = 3
"""Passes per E4 figure; the median is recorded."""
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
    allowed), against the target of 5,000 rollouts/s on `score_row_per_s`:

      score_row_per_s  the runner's whole row as the pipeline scores it (`score_row`:
                      answer parse, refusal check, the task's `fast_score`, details)
      score_row_full_per_s  the same row forced through verifiers (`shortcut=False`: trace
                      construction and `task.score`), what the runner did before the shortcut
      full_per_s      `score_completion(task, completion)`: trace, verifiers' `task.score`
                      and the six rewards (no parse column, refusal or details)
      rewards_per_s   the six @vf.reward methods awaited on a trace built beforehand (a
                      trainer scoring rollouts it already holds)
      trace_per_s     `completion_trace` alone (part of the full path)
      fast_score_per_s  `task.fast_score(completion)` alone: the full path's (scores,
                      weights, total) without a trace or verifiers' `task.score`

    Outside the timings, 500 rollouts are scored both ways on twin tasks: `fast_score_mismatches`
    counts (scores, weights, total) that differ from `score_completion`'s, and
    `score_row_mismatches` rows (as the results writer stores them) that differ between
    the two row paths. `us_per_rollout["score_row"]` splits the row path: parsing the reply,
    checking its evidence against the email (with building each task's email index), the
    other five rewards and the weights, and the runner's own part (parse columns, refusal,
    details from the memo).

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

        def timed(tag: str, fn, prepare=lambda jobs: jobs) -> float:
            """Rollouts per second of this process's CPU time on the pinned core, the median
            of `E4_REPEATS` passes, each over fresh tasks and new completions, with the
            collector emptied first. CPU time, not wall time: on a shared machine another
            process on the same core would otherwise count as scoring time."""
            rates = []
            for k in range(E4_REPEATS):
                jobs = prepare(fresh(f"{tag} {k}"))
                gc.collect()
                start = time.process_time()
                fn(jobs)
                rates.append(len(jobs) / (time.process_time() - start))
            return statistics.median(rates)

        async def full(jobs):
            for task, completion in jobs:
                await score_completion(task, completion)

        async def rows(jobs, shortcut: bool = True) -> list[dict]:
            parse, out = env.parse, []
            for task, completion in jobs:
                row: dict = {}
                await score_row(row, task, completion, parse, "bench", shortcut=shortcut)
                out.append(row)
            return out

        async def rewards(prepared):
            for task, trace in prepared:
                for name in E4_REWARDS:
                    await getattr(task, name)(trace)

        asyncio.run(full(fresh("warm-up")))
        asyncio.run(rows(fresh("warm-up")))
        row_per_s = timed("row", lambda jobs: asyncio.run(rows(jobs)))
        row_full_per_s = timed("row-full", lambda jobs: asyncio.run(rows(jobs, shortcut=False)))
        full_per_s = timed("full", lambda jobs: asyncio.run(full(jobs)))
        trace_per_s = timed("trace", lambda jobs: [completion_trace(t, c) and None for t, c in jobs])
        rewards_per_s = timed(
            "rewards",
            lambda jobs: asyncio.run(rewards(jobs)),
            prepare=lambda jobs: [(t, completion_trace(t, c)) for t, c in jobs],
        )
        fast_per_s = timed("fast", lambda jobs: [task.fast_score(c) and None for task, c in jobs])
        parse_per_s = timed("parse", lambda jobs: [env.parse(c) and None for _, c in jobs])
        # Parse included (the reply is new): the evidence check's share is this less parse.
        evidence_per_s = timed("evidence", lambda jobs: [t.evidence_report(c.strip()) and None for t, c in jobs])

        async def mismatches() -> tuple[int, int]:
            bad_scores = bad_rows = 0  # separate task objects, so neither side reads the other's memo
            for (task, completion), (twin, _) in zip(fresh("check")[:500], fresh("check")[:500]):
                expected = await score_completion(task, completion)
                got = twin.fast_score(completion)
                bad_scores += got is None or got != expected or list(got[0]) != list(expected[0])
            jobs, twins = fresh("check-rows")[:500], fresh("check-rows")[:500]
            for got, want in zip(await rows(jobs), await rows(twins, shortcut=False)):
                bad_rows += json.dumps(got, default=str) != json.dumps(want, default=str)
            return bad_scores, bad_rows

        fast_mismatches, row_mismatches = asyncio.run(mismatches())
    finally:
        os.sched_setaffinity(0, allowed)
    us = {
        k: 1e6 / v
        for k, v in (
            ("row", row_per_s),
            ("row_full", row_full_per_s),
            ("full", full_per_s),
            ("trace", trace_per_s),
            ("rewards", rewards_per_s),
            ("fast", fast_per_s),
            ("parse", parse_per_s),
            ("evidence", evidence_per_s),
        )
    }
    return {
        "rollouts": n,
        "cpu": cpu,
        "target_per_s": E4_TARGET_PER_S,
        "score_row_per_s": round(row_per_s),
        "score_row_meets_target": row_per_s >= E4_TARGET_PER_S,
        "score_row_full_per_s": round(row_full_per_s),
        "score_row_mismatches": row_mismatches,
        "full_per_s": round(full_per_s),
        "full_meets_target": full_per_s >= E4_TARGET_PER_S,
        "rewards_per_s": round(rewards_per_s),
        "rewards_meets_target": rewards_per_s >= E4_TARGET_PER_S,
        "trace_per_s": round(trace_per_s),
        "fast_score_per_s": round(fast_per_s),
        "fast_score_meets_target": fast_per_s >= E4_TARGET_PER_S,
        "fast_score_mismatches": fast_mismatches,
        "us_per_rollout": {
            # the full path split: trace construction, verifiers' task.score bookkeeping
            # (what is left after the trace and the rewards), the rewards themselves
            "full": round(us["full"], 1),
            "trace": round(us["trace"], 1),
            "verifiers_score_overhead": round(us["full"] - us["trace"] - us["rewards"], 1),
            "rewards": round(us["rewards"], 1),
            # the row path the pipeline runs, split (each part timed on its own fresh tasks)
            "score_row": {
                "total": round(us["row"], 1),
                "parse": round(us["parse"], 1),
                "evidence_check": round(us["evidence"] - us["parse"], 1),
                "other_rewards_and_weights": round(us["fast"] - us["evidence"], 1),
                "runner_row": round(us["row"] - us["fast"], 1),
            },
            "score_row_full": round(us["row_full"], 1),
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
