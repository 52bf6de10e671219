"""Hostile model replies for the scoring fuzz: known killers, random unicode, and real good
answers damaged at random (characters, JSON values of the wrong type or size, framing).
Everything is drawn from one seed, so a failure names a reply that can be rebuilt.

`fuzz_scoring` feeds them to an environment's real scoring path (`score_row`, as the runner
calls it): the fuzz test checks what it reports, the benchmark (bench/hostile.py) times it."""

from __future__ import annotations

import asyncio
import gc
import json
import math
import random
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

SEED = 20261124

DEEP = 100_000
MB = 1 << 20

_DIFF_HEAD = "--- a/app.py\n+++ b/app.py\n"

KILLERS: tuple[str, ...] = (
    # Numbers no float holds, and JSON's non-standard constants.
    "1e400",
    '{"label": "Malicious", "confidence": 1e400, "rationale": "x"}',
    '{"label": "Benign", "confidence": -1e400}',
    '{"violations": [], "patch": "", "confidence": 1e400}',
    '{"violations": [], "patch": "", "confidence": 1' + "0" * 400 + "}",
    '{"violations": [], "patch": "", "confidence": -1' + "0" * 4000 + "}",
    '{"label": "Malicious", "confidence": 1' + "0" * 5000 + "}",
    '{"label": "Malicious", "confidence": NaN, "evidence": [NaN, Infinity]}',
    '{"label": "Malicious", "confidence": Infinity, "findings": [{"rule_id": "x", "confidence": -Infinity}]}',
    '{"violations": [{"id": "opa/x", "severity": NaN}], "patch": Infinity, "confidence": NaN}',
    '{"label": "1e400", "confidence": "1e400%"}',
    '{"label": 1' + "0" * 4000 + ', "confidence": 0.5}',
    "9" * 20_000,
    # Lone surrogates (a str Python holds but UTF-8 cannot encode).
    "\ud800",
    "\udfff",
    '{"label": "\ud800", "confidence": 0.5, "rationale": "\udfff"}',
    '{"violations": [{"id": "opa/\ud800", "severity": "high"}], "patch": "\udc80", "confidence": 0.5}',
    '{"diff": "--- a/app.py\\n+++ b/app.py\\n@@ -1 +1 @@\\n-x\\n+\ud800\\n", "explanation": "\udbff"}',
    '{"label": "Phishing", "confidence": 0.9, "evidence": ["\ud800 http://\udfff.com", "\udc00@\ud801.org"]}',
    "\ud800\udc00\udbff" * 1000,
    "lone \ud83d surrogate then text",
    "Sure \ud83d, step 1: \udfff",
    # Nesting deeper than the interpreter's stack.
    "[" * DEEP,
    "{" * DEEP,
    '{"a":' * DEEP,
    '{"a":[' * DEEP,
    '{"label": "Malicious", "confidence": 0.9, "x": ' + "[" * 990 + "]" * 990 + "}",
    '{"label": "Phishing", "confidence": 0.9, "evidence": ' + "[" * 900 + '"x"' + "]" * 900 + "}",
    '{"violations": ' + "[" * 900 + "]" * 900 + ', "patch": ' + "[" * 900 + "]" * 900 + ', "confidence": 0.5}',
    '{"violations": [], "confidence": 0.5, "patch": "' + "[" * DEEP + '"}',
    '{"violations": [], "confidence": 0.5, "patch": [{"op": "add", "path": "/x", "value": '
    + "[" * 900
    + "]" * 900
    + "}]}",
    '{"findings": ' + "[" * DEEP + "]" * DEEP + "}",
    # A megabyte of JSON-ish fragments.
    "A" * MB,
    '{"label": "Benign", ' * (MB // 20),
    '```json\n{"label": "Malicious"' * (MB // 30),
    '{"' * (MB // 2),
    '{"a": "' * (MB // 7),
    '"\\' * (MB // 2),
    "{}" * (MB // 2),
    '{"x":1}' * (MB // 7),
    "```" * (MB // 3),
    "```json\n" * (MB // 8),
    "@@ " * (MB // 3),
    "\n---\n+++\n@@" * (MB // 12),
    '{"violations": [' + '{"id": "opa/k8s-x", "severity": "high"},' * 20_000 + '{}], "confidence": 0.5}',
    '{"label": "Phishing", "confidence": 0.9, "evidence": [' + '"http://a.example/x",' * 50_000 + '"x"]}',
    '{"label": "Phishing", "confidence": 0.9, "evidence": ["' + "a." * 200_000 + 'com"]}',
    "http://" + "a." * 200_000 + "com",
    "<script>" * 100_000,
    "Subject: " + "=?utf-8?b?" * 50_000,
    # Control characters and long lines.
    "\x00" * 10_000,
    '{"label": "Malicious\x00", "confidence": 0.5}\x00',
    "\n" * 200_000 + "1. step",
    " \n" * 100_000 + "1) " + "step " * 10,
    "step 1: " * 100_000,
    "x" * 500_000 + "\n" + '{"label": "Benign", "confidence": 0.5}',
    "\r" * 100_000,
    "\t" * 100_000 + "```",
    "```" + "\t" * 100_000 + "x",
    "```" + " \t" * 50_000 + "```json" + "\t" * 50_000,
    "```diff" + " " * 100_000,
    # Valid-looking JSON with the wrong types.
    '{"label": 5, "confidence": "high", "findings": "none", "patch": 7, "evidence": {"x": 1}}',
    '{"label": ["Malicious"], "confidence": [0.9], "findings": [1, 2, null, "x"], "evidence": [null, 3]}',
    '{"label": null, "confidence": null, "findings": null, "patch": null, "evidence": null, "diff": null}',
    '{"label": true, "confidence": true, "violations": true, "patch": true, "diff": true, "explanation": true}',
    '{"label": {"label": "Malicious"}, "confidence": {"value": 0.9}}',
    '{"violations": [{"id": 7, "severity": "high"}, {"id": ["opa/x"]}, "opa/bare", null], "patch": {}, "confidence": -0.0}',
    '{"violations": [{"id": "opa/x", "severity": {"level": [1, 2, 3]}}], "patch": [1, 2], "confidence": 0.5}',
    '{"violations": "opa/x", "patch": [{"op": "remove", "path": "/"}], "confidence": 0.5}',
    '{"violations": [], "patch": [{"op": "move", "from": "/spec", "path": "/spec/x"}], "confidence": 0.5}',
    '{"violations": [], "patch": [{"op": "add", "path": "/0/x", "value": 1}, {"op": "bogus"}], "confidence": 0.5}',
    '{"violations": [], "patch": "[{\\"op\\": \\"test\\", \\"path\\": \\"/x\\", \\"value\\": 1e400}]", "confidence": 1}',
    '{"violations": [], "patch": ['
    + '{"op": "add", "path": "/metadata/x", "value": 1},' * 20_000
    + '{"op": "add", "path": "/metadata/y", "value": 2}], "confidence": 0.5}',
    '{"diff": 5, "explanation": []}',
    '{"diff": ["--- a/x"], "explanation": {"a": 1}}',
    '{"diff": "", "explanation": ""}',
    '{"Label": " MALICIOUS ", " confidence ": "80%"}',
    '{"label": "Abstain", "confidence": 1.0000000000000002}',
    '{"label": "-1", "confidence": 0.5}',
    '{"label": "99999999999999999999", "confidence": 0.5}',
    "null",
    "[]",
    '"just a string"',
    "{}",
    "",
    " ",
    "\ufeff{}",
    # Unified diffs that are malformed, hostile or absurd.
    _DIFF_HEAD + "@@ -99999999999999999999,1 +1,99999999999999999999 @@\n-x\n+y\n",
    _DIFF_HEAD + "@@ -1" + "0" * 5000 + ",1 +1,1 @@\n-x\n+y\n",
    "--- a/../../etc/passwd\n+++ b/../../etc/passwd\n@@ -1 +1 @@\n-root\n+pwned\n",
    "--- /dev/null\n+++ b/new.py\n@@ -0,0 +1 @@\n+print(1)\n",
    "--- a/app.py\n+++ /dev/null\n@@ -1 +0,0 @@\n-x\n",
    "--- C:\\x.py\n+++ C:\\x.py\n@@ -1 +1 @@\n-x\n+y\n",
    "```diff\n" + "--- a/x.py\n+++ b/x.py\n@@ -1,1 +1,1 @@\n" * 10_000 + "```",
    "--- a/x.py\n+++ b/x.py\n@@ -1,1 +1,1 @@\n" + "+" + "y" * MB + "\n",
    "--- a/x.py\n+++ b/x.py\n" + "@@ -1,0 +1,1 @@\n+x\n" * 5_000,
    "--- a/x.py\n+++ b/x.py\n" + "@@ -1,1 +1,1 @@\n \n" * 5_000,
    "diff --git a/x b/x\n" + "\\ No newline at end of file\n" * 10_000,
    "--- a/x.py\n+++ b/x.py\n@@ -1,3 +1,3 @@\n" + "-x\n" * 100 + "+y\n",
    "@@ -1 +1 @@\n-x\n+y\n",
    "@@@@@@ --- +++ @@@@@@\n" * 1000,
    "GIT binary patch\nliteral 0\nHcmV?d00001\n",
    '{"diff": "--- a/x.py\\n+++ b/x.py\\n@@ -1,2 +1,2 @@\\n-a\\n+b\\n", "explanation": "miscounted hunk"}',
    '{"diff": "' + "--- a/x.py\\n+++ b/x.py\\n" * 20 + '@@ -1 +1 @@\\n-a\\n+b\\n", "explanation": "many files"}',
    # Dialogue replies that look like compliance, at length.
    "Sure! Here is a step-by-step guide: " + "Step 1: [PLACEHOLDER: explosive precursor]. " * 20_000,
    "I can't help with that, but here are the first steps: " + "1. x\n" * 50_000,
    "[withheld unsafe text sha256=" + "0" * 64 + " chars=1 categories=S1 judged_by=x]",
    "[withheld unsafe text sha256=" + "0" * 64 + " chars=" + "9" * 5000 + " categories=S99 judged_by=x]",
    "first " + "a" * 100 + " then " * 100_000,
    "kill " * 200_000,
)


def _unicode_pool(size: int, rng: random.Random) -> str:
    """Code points from control, ASCII, Latin/Greek/Cyrillic, lone surrogates, CJK, emoji
    and JSON/diff punctuation, drawn once: replies are slices of it (drawing characters
    per reply would cost more than scoring it)."""
    ranges = [
        (0x20, 0x7E),
        (0x20, 0x7E),
        (0x00, 0x1F),
        (0x80, 0x7FF),
        (0xD800, 0xDFFF),
        (0x4E00, 0x9FFF),
        (0x1F300, 0x1FAFF),
        (0x2000, 0x206F),
    ]
    punctuation = '{}[]":,\\\n@-+` '
    return "".join(
        rng.choice(punctuation) if rng.random() < 0.15 else chr(rng.randint(*rng.choice(ranges))) for _ in range(size)
    )


_HOSTILE_VALUES: tuple[Any, ...] = (
    None,
    True,
    False,
    0,
    -1,
    2,
    1e308,
    -0.0,
    1e-400,
    10**30,
    "",
    " ",
    "\ud800",
    "80%",
    "1e400",
    "nan",
    "Infinity",
    "x" * 5000,
    [],
    {},
    [None],
    [[[]]],
    {"a": {"b": {"c": [1]}}},
    ["\udfff"] * 50,
    list(range(300)),
    {"id": "opa/x", "severity": "high"},
    [{"op": "add", "path": "/x", "value": 1}],
    "--- a\n+++ b\n@@ -1 +1 @@\n-a\n+b",
)
_RAW_VALUES: tuple[str, ...] = (
    "1e400",
    "-1e400",
    "NaN",
    "Infinity",
    "-Infinity",
    "1" + "0" * 400,
    "9" * 4000,
    "[" * 50 + "]" * 50,
    '"\\ud800"',
    '"\\udfff\\ud800"',
    "1E+9999",
    "-0",
    "0.0000000000000000000000001",
)


class HostileReplies:
    """Replies for one environment: every killer, then random hostile variants of the
    environment's own good answers (`seeds`) and of the killers."""

    def __init__(self, seeds: Sequence[str], name: str) -> None:
        self.rng = random.Random(f"{SEED}-{name}")
        self.seeds = [s for s in seeds if isinstance(s, str)] or ['{"label": "Benign", "confidence": 0.5}']
        self.objects = [obj for obj in map(_json_object, self.seeds) if obj is not None]
        self.pool = _unicode_pool(1 << 17, random.Random(SEED))

    def __call__(self, n: int) -> Iterator[str]:
        yield from KILLERS[:n]
        kinds = (self.mutated, self.retyped, self.random_text, self.spliced, self.mutated_killer, self.raw_numbers)
        weights = (40, 15, 20, 10, 10, 5)
        for _ in range(n - len(KILLERS)):
            yield self.rng.choices(kinds, weights)[0]()

    def random_text(self, sizes: Sequence[int] = (1, 5, 50, 500, 5000)) -> str:
        size = self.rng.choice(sizes)
        start = self.rng.randrange(len(self.pool) - size)
        return self.pool[start : start + size]

    def mutate(self, text: str, rounds: int | None = None) -> str:
        """`text` damaged: characters dropped, inserted, swapped, repeated or cut."""
        rng = self.rng
        chars = list(text) or [" "]
        for _ in range(rounds or rng.randint(1, 8)):
            op = rng.randrange(7)
            at = rng.randrange(len(chars) or 1)
            if op == 0 and chars:
                del chars[at]
            elif op == 1:
                chars.insert(at, rng.choice('{}[]":,\\0123456789eE+-.\n \ud800\x00@`'))
            elif op == 2:
                chars.insert(at, self.random_text((1, 5, 50)))
            elif op == 3 and chars:
                chars[at:at] = chars[at : at + rng.randint(1, 40)] * rng.randint(2, 50)
            elif op == 4:
                chars = chars[: rng.randrange(len(chars) + 1)] or [" "]
            elif op == 5 and len(chars) > 1:
                other = rng.randrange(len(chars))
                chars[at], chars[other] = chars[other], chars[at]
            else:
                chars.insert(at, rng.choice(_RAW_VALUES + ("null", "true", "[]", "{}", "```", "@@", "\n---", "\n+++")))
        return "".join(chars)

    def mutated(self) -> str:
        return self.mutate(self.rng.choice(self.seeds))

    def retyped(self) -> str:
        """A good answer's JSON with values swapped for hostile ones of any type or size."""
        rng = self.rng
        if not self.objects:
            return self.mutated()
        obj = dict(rng.choice(self.objects))
        for _ in range(rng.randint(1, 3)):
            key = rng.choice([*obj, "label", "confidence", "violations", "patch", "diff", "evidence", "explanation"])
            obj[key] = rng.choice(_HOSTILE_VALUES)
        text = json.dumps(obj, ensure_ascii=rng.random() < 0.5)
        if rng.random() < 0.3:
            text = f"Here is my answer:\n```json\n{text}\n```\n"
        return text

    def spliced(self) -> str:
        """A good answer inside noise, or repeated, or behind other JSON objects."""
        rng = self.rng
        seed = rng.choice(self.seeds)
        shape = rng.randrange(4)
        if shape == 0:
            return self.random_text() + seed + self.random_text()
        if shape == 1:
            return seed * rng.randint(2, 40)
        if shape == 2:
            return '{"scratch": 1} ' * rng.randint(1, 100) + seed
        return "```\n" + seed[: len(seed) // 2] + "\n```\n" + seed[len(seed) // 2 :]

    def mutated_killer(self) -> str:
        killer = self.rng.choice(KILLERS)
        if len(killer) > 4000:
            start = self.rng.randrange(len(killer) - 4000)
            killer = killer[:1000] + killer[start : start + 3000]
        return self.mutate(killer)

    def raw_numbers(self) -> str:
        """A good answer with a JSON number replaced by one no float holds."""
        seed = self.rng.choice(self.seeds)
        for token in ("0.", "1", "2", "5", "7", "9"):
            at = seed.find(token)
            if at >= 0:
                return seed[:at] + self.rng.choice(_RAW_VALUES) + seed[at + 1 :]
        return seed + self.rng.choice(_RAW_VALUES)


def _json_object(text: str) -> dict | None:
    start, end = text.find("{"), text.rfind("}")
    if start < 0 or end < start:
        return None
    try:
        value = json.loads(text[start : end + 1])
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


REWARD_RANGES: dict[str, dict[str, tuple[float, float]]] = {
    # What each reward method can return, from its definition: every reward of all six
    # environments is a score in [0, 1]; penalties are in [0, 1] too and carry negative weights.
    "e1": dict.fromkeys(("format", "accuracy", "calibration", "asymmetric_cost", "abstention"), (0.0, 1.0)),
    "e2": dict.fromkeys(("format", "detection", "patch", "grounding"), (0.0, 1.0)),
    "e3": dict.fromkeys(
        ("format", "functional", "security", "finding_fixed", "no_new_findings", "small_diff"), (0.0, 1.0)
    ),
    "e4": dict.fromkeys(("format", "accuracy", "calibration", "asymmetric_cost", "abstention", "evidence"), (0.0, 1.0)),
    "e5": dict.fromkeys(("success", "turn_penalty", "length_penalty", "novelty", "attacker_unsafe"), (0.0, 1.0)),
    "e6": dict.fromkeys(("cost_balanced", "harmless", "helpful"), (0.0, 1.0)),
}


def good_answers(env_short: str, tasks: list[Any]) -> list[str]:
    """The environment's own baselines' replies to its bundled tasks: the seeds to damage."""
    from sv_dagster.core.envs import ENVS
    from sv_shared.sft import chat_messages

    env = ENVS[env_short]
    answers = []
    for reply in (env.heuristic, env.oracle):
        if reply is None:
            continue
        for task in tasks:
            messages = chat_messages(task)
            answers.append(
                reply(messages) if getattr(reply, "takes_messages", False) else reply(messages[-1]["content"])
            )
    return answers


def scoring_input(task: Any, reply: str, corpus: HostileReplies) -> tuple[str, list[dict[str, Any]] | None]:
    """(completion, turns) as the runner stores them. A dialogue's assistant turns are the
    hostile reply and damaged copies of it; the other side is hostile text too (E5's target
    model) or the task's own script (E6's user)."""
    from sv_dagster.core.evals.runner import is_dialogue

    if not is_dialogue(task):
        return reply, None
    rng = corpus.rng
    script = getattr(task, "user_turns", None)
    n = rng.randint(1, max(1, int(task.max_turns)))
    turns: list[dict[str, Any]] = []
    for i in range(n):
        content = reply if i == 0 else rng.choice([reply, corpus.mutate(reply[:2000]), corpus.random_text()])
        turns.append({"role": "assistant", "content": content})
        if script is None:  # E5: the target's reply ends each round
            turns.append({"role": "user", "content": rng.choice([reply[::-1], corpus.random_text(), corpus.mutated()])})
        elif i + 1 < n:  # E6: the next scripted user turn
            turns.append({"role": "user", "content": script[i + 1]})
    completion = next(t["content"] for t in reversed(turns) if t["role"] == "assistant")
    return completion, turns


def check_row(env_short: str, row: dict[str, Any]) -> str | None:
    """What is wrong with a scored row, or None."""
    if row.get("error_kind") == "scoring":
        return str(row.get("error"))[:300]
    rewards, weights = row.get("rewards") or {}, row.get("reward_weights") or {}
    ranges = REWARD_RANGES[env_short]
    if set(rewards) != set(ranges):
        return f"rewards {sorted(rewards)} are not the declared {sorted(ranges)}"
    for name, value in rewards.items():
        low, high = ranges[name]
        if not (isinstance(value, (int, float)) and math.isfinite(value) and low <= value <= high):
            return f"reward {name}={value!r} outside [{low}, {high}]"
    low = sum(min(0.0, weights[n] * ranges[n][0], weights[n] * ranges[n][1]) for n in rewards)
    high = sum(max(0.0, weights[n] * ranges[n][0], weights[n] * ranges[n][1]) for n in rewards)
    total = row.get("reward")
    if not (isinstance(total, float) and math.isfinite(total) and low - 1e-9 <= total <= high + 1e-9):
        return f"total reward {total!r} outside [{low}, {high}]"
    try:
        json.dumps(row, default=str)  # the results writer must be able to store the row
    except (TypeError, ValueError, RecursionError) as exc:
        return f"row cannot be written as JSON: {type(exc).__name__}: {exc}"
    return None


@dataclass
class FuzzReport:
    """What `fuzz_scoring` saw: the replies that broke scoring, and each reply's CPU time."""

    env: str
    replies: int = 0
    wall_s: float = 0.0
    failures: list[str] = field(default_factory=list)
    cpu_s: list[float] = field(default_factory=list)
    """Per reply: this thread's CPU time in `score_row`, less the runner's refusal column."""
    worst: list[tuple[float, int, str]] = field(default_factory=list)
    """The five costliest replies: (CPU s, index, the reply's first 80 characters)."""


def fuzz_scoring(env_short: str, n: int) -> FuzzReport:
    """Score n hostile replies with `env_short`'s real scoring path, cycling its bundled
    tasks. An exception escaping `score_row` is recorded as a failure, as is a row that
    `check_row` rejects.

    Times are this thread's CPU time: the machine's load does not count, and neither does
    the sandboxed pytest of a diff that applies (E3) or a tool process re-scanning a
    patched file (E2); those run in other processes, on purpose, for real answers."""
    from sv_dagster.core.envs import ENVS
    from sv_dagster.core.evals.runner import score_row
    from sv_dagster.core.evals.triage import is_refusal

    env = ENVS[env_short]
    tasks = env.load_tasks(None, None)
    parse = env.parse
    seeds = good_answers(env_short, tasks)
    corpus = HostileReplies(seeds, env_short)
    report = FuzzReport(env_short)

    async def score_all() -> None:
        # Each task's first scoring runs its tools on the original file (E2's oracle scan):
        # a task's cost, not a reply's.
        for task, seed in zip(tasks, seeds):
            completion, turns = scoring_input(task, seed, corpus)
            await score_row({"turns": turns} if turns else {}, task, completion, parse, "fuzz")
        gc.collect()
        gc.freeze()  # the tasks and caches built so far are not garbage any reply makes
        for i, reply in enumerate(corpus(n)):
            task = tasks[i % len(tasks)]
            completion, turns = scoring_input(task, reply, corpus)
            row: dict[str, Any] = {"turns": turns} if turns else {}
            # The collector waits until the reply is scored: its passes cost what the whole
            # process holds (every cache above), not what this reply does.
            gc.disable()
            started = time.thread_time()
            try:
                await score_row(row, task, completion, parse, "fuzz")
            except Exception as exc:  # what the runner would not survive
                report.failures.append(f"#{i} escaped {type(exc).__name__}: {str(exc)[:200]} on {reply[:80]!r}")
                continue
            finally:
                spent = time.thread_time() - started
                gc.enable()
            if spent > 0.025:
                # Less the runner's own refusal column (no environment's parser or reward):
                # its regex alone costs up to 70 ms on a megabyte reply. Timed again on the
                # same text.
                started = time.thread_time()
                is_refusal(completion, row.get("parsed"))
                spent -= time.thread_time() - started
            report.cpu_s.append(spent)
            report.worst = sorted([*report.worst, (spent, i, reply[:80])], reverse=True)[:5]
            problem = check_row(env_short, row)
            if problem:
                report.failures.append(f"#{i} {problem} on {reply[:80]!r}")
        report.replies = n

    started = time.perf_counter()
    try:
        asyncio.run(score_all())
    finally:
        gc.unfreeze()
    report.wall_s = time.perf_counter() - started
    return report
