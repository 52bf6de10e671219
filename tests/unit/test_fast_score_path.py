"""The runner scores a reply through the task's own `fast_score` where the task offers one,
and the row it stores is the row the full path (a verifiers trace and `task.score`) stores:
the same rewards, weights, total, parsed answer, refusal, details and error, in the same
order, for E4's real tasks and for replies built to break parsers (empty, None, megabytes,
broken JSON, lone surrogates, the fuzz corpus of tests/support/hostile_replies.py).
Where the shortcut declines or fails, or turns precede the reply, the full path scores."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
import verifiers.v1 as vf

from sv_dagster.core.envs import ENVS
from sv_dagster.core.evals import runner
from sv_dagster.core.evals.runner import score_row
from sv_env_phishing_detection import PhishingTaskConfig, PhishingTaskset, PhishingTasksetConfig
from tests.support.hostile_replies import KILLERS, HostileReplies, good_answers

FUZZ = 600
"""Random hostile replies beyond the fixed killers."""

ODD: tuple[Any, ...] = (
    None,
    "",
    "   ",
    "\n\n\t",
    "null",
    "[]",
    "{}",
    '{"label": "Phishing", "confidence": 0.9, "evidence": ["urgent"',  # cut off mid-JSON
    "{'label': 'Phishing', 'confidence': 0.9}",  # Python, not JSON
    '{"label": "Phishing", "confidence": NaN, "evidence": [Infinity, null, 3, {"x": 1}]}',
    '{"label": "Legitimate", "confidence": 1e400, "evidence": []}',
    '{"label": "Phishing", "confidence": 0.8, "evidence": "one string, not a list"}',
    '{"Label": " phishing ", "Confidence": "80%", "Evidence": ["Reply-To mismatch"]}',
    "Réponse : hameçonnage ⚠️ 🎣 釣魚 \u202eLABEL\u202c — confiance 0,9",
    '{"label": "Phishing", "confidence": 0.9, "evidence": ["\ud800 http://\udfff.com"]}',
    "\ufeff" + '{"label": "Abstain", "confidence": 0.5}',
    "Label: Phishing\nConfidence: 0.95\nEvidence: the link",
    '{"label": "Phishing", "confidence": 0.9, "evidence": [' + '"http://a.example/x",' * 20_000 + '"x"]}',
    "x" * (1 << 20),
)


def load(**task: Any) -> list:
    config = PhishingTasksetConfig(id="sv-env-phishing-detection", task=PhishingTaskConfig(**task))
    return list(PhishingTaskset(config))


def replies(tasks: list) -> list[Any]:
    """Every task's baseline answers (heuristic and oracle), the odd replies, the killers and
    the fuzz corpus built from those answers."""
    good = good_answers("e4", tasks)
    return [*good, *ODD, *HostileReplies(good, "e4")(len(KILLERS) + FUZZ)]


def rows(tasks: list, jobs: list[tuple[int, Any]], shortcut: bool, turns: list | None = None) -> list[dict]:
    parse = ENVS["e4"].parse

    async def score_all() -> list[dict]:
        out = []
        for index, reply in jobs:
            row: dict[str, Any] = {"turns": turns} if turns else {}
            await score_row(row, tasks[index], reply, parse, "m", shortcut=shortcut)
            out.append(row)
        return out

    return asyncio.run(score_all())


def assert_same_rows(fast: list[dict], full: list[dict], jobs: list[tuple[int, Any]]) -> None:
    for (index, reply), got, want in zip(jobs, fast, full, strict=True):
        # As the results writer stores them: values, key order and float spelling alike.
        assert json.dumps(got, default=str) == json.dumps(want, default=str), (index, repr(reply)[:120])
        assert got == want


@pytest.fixture
def count_full_path(monkeypatch) -> list[int]:
    """How many times the runner scores through verifiers (`score_completion`)."""
    calls = [0]
    full = runner.score_completion

    async def counted(*args, **kwargs):
        calls[0] += 1
        return await full(*args, **kwargs)

    monkeypatch.setattr(runner, "score_completion", counted)
    return calls


def test_e4_rows_are_the_full_path_rows_for_every_reply(count_full_path):
    # Two loads, so neither path reads a parse or evidence check the other memoised.
    tasks, twins = load(), load()
    jobs = [(i % len(tasks), reply) for i, reply in enumerate(replies(tasks))]
    fast = rows(tasks, jobs, shortcut=True)
    assert count_full_path[0] == 0  # every row took the shortcut
    full = rows(twins, jobs, shortcut=False)
    assert count_full_path[0] == len(jobs)
    assert_same_rows(fast, full, jobs)
    # The comparison covers scored rows with details, across the range of totals.
    scored = [row for row in fast if row["error_kind"] is None]
    assert len(scored) == len(jobs) and all("details" in row for row in scored)
    assert len({row["reward"] for row in scored}) >= 10
    assert any(row["details"]["evidence"]["items"] for row in scored)


async def reply_length_reward(trace) -> float:
    """A reward plugged in by config (`fn`), which `fast_score` does not model."""
    return len(trace.last_reply or "") % 7 / 6


def test_e4_rows_when_the_shortcut_declines_are_the_full_path_rows(count_full_path):
    """A reward function plugged in by config, and deferred scoring: fast_score returns None."""
    plugged = load(rewards={"accuracy": vf.RewardFunctionConfig(fn=f"{__name__}:reply_length_reward")})
    deferred = [task.defer_scoring() for task in load()[:20]]
    for tasks in (plugged[:20], deferred):
        assert tasks[0].fast_score("{}") is None
        jobs = [(i % len(tasks), reply) for i, reply in enumerate([*good_answers("e4", tasks), *ODD])]
        before = count_full_path[0]
        got = rows(tasks, jobs, shortcut=True)
        assert count_full_path[0] - before == len(jobs)
        assert all(row["error_kind"] is None for row in got)
        assert_same_rows(got, rows(tasks, jobs, shortcut=False), jobs)


def test_turns_before_the_reply_take_the_full_path(count_full_path):
    tasks = load()[:10]
    turns = [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "c1", "function": {"name": "check_url", "arguments": '{"url": "http://secure-login.example"}'}}
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "name": "check_url", "content": '{"reachable": false}'},
    ]
    jobs = [(i, reply) for i, reply in enumerate(good_answers("e4", tasks)[:10])]
    got = rows(tasks, jobs, shortcut=True, turns=turns)
    assert count_full_path[0] == len(jobs)
    assert all(row["error_kind"] is None for row in got)


def test_a_failing_shortcut_falls_back_to_the_full_path(count_full_path):
    tasks, twins = load()[:5], load()[:5]

    def broken(completion):
        raise RuntimeError("shortcut bug")

    for task in tasks:
        task.__dict__["fast_score"] = broken
    jobs = [(i, reply) for i, reply in enumerate(good_answers("e4", tasks))]
    got = rows(tasks, jobs, shortcut=True)
    assert count_full_path[0] == len(jobs)
    assert all(row["error_kind"] is None for row in got)
    assert_same_rows(got, rows(twins, jobs, shortcut=False), jobs)


class _ShortcutOnly:
    """Any environment's task may offer `fast_score`; nothing else of a verifiers task here."""

    key = "stub"

    def fast_score(self, completion):
        return {"a": 1.0, "b": 0.5}, {"a": 2.0, "b": -1.0}, 1.5


def test_any_task_offering_fast_score_is_scored_by_it(count_full_path):
    row: dict[str, Any] = {}
    assert asyncio.run(score_row(row, _ShortcutOnly(), "reply", None, "m")) == "scored"
    assert count_full_path[0] == 0
    assert row["rewards"] == {"a": 1.0, "b": 0.5} and row["reward_weights"] == {"a": 2.0, "b": -1.0}
    assert row["reward"] == 1.5 and row["error_kind"] is None


def test_the_bench_checks_e4_on_the_path_the_runner_takes():
    from bench.run import REDTEAM_TARGETS

    # The target is the runner's row (bench/scoring.py `e4_scoring`), not the rewards alone.
    assert REDTEAM_TARGETS["e4_score_row_per_s"] == 5_000 and REDTEAM_TARGETS["e4_score_row_mismatches"] == 0
    assert "e4_rewards_per_s" not in REDTEAM_TARGETS
