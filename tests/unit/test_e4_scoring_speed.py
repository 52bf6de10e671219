"""E4's scoring memos and shortcuts change no number: every reward (through verifiers'
`task.score`, the task's `reward_values` and `fast_score`, and `details`) equals what the
plain functions compute for the same reply, with the memo cold, warm, overflowing, shared
between rollouts and after the data or the reward TOML changes. (Speed is measured in
bench/scoring.py `e4_scoring`, not here.)"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
import verifiers.v1 as vf

from sv_dagster.core.evals.runner import score_completion
from sv_env_phishing_detection import (
    PhishingTaskConfig,
    PhishingTaskset,
    PhishingTasksetConfig,
    heuristic_reply,
    load_reward_settings,
)
from sv_env_phishing_detection.evidence import build_index, evidence_report
from sv_env_phishing_detection.taskset import _MEMO_REPLIES, parse_completion
from sv_shared import (
    abstention_reward,
    accuracy_reward,
    asymmetric_cost_reward,
    calibration_reward,
    format_reward,
)

DEFAULT_TOML = (
    Path(__file__).resolve().parents[2]
    / "environments/sv-env-phishing-detection/sv_env_phishing_detection/rewards.toml"
)


def load(reward_config: Path | None = None, **task) -> list:
    config = PhishingTasksetConfig(
        id="sv-env-phishing-detection", task=PhishingTaskConfig(reward_config=reward_config, **task)
    )
    return list(PhishingTaskset(config))


@pytest.fixture(scope="module")
def tasks():
    return load()


def completions(task) -> list[str]:
    """Realistic, malformed and adversarial replies for one task."""
    base = json.loads(heuristic_reply(task.data.prompt_text))
    invented = [
        *base["evidence"],
        "www.secure-login-verify.com",
        'Quote: "please act now"',
        "Reply-To mismatch",
        "invoice.exe attachment",
        "punycode domain",
        "shortened link",
        "lookalike of paypal.com",
    ]
    return [
        json.dumps(base, ensure_ascii=False),
        "  \n" + json.dumps(base, ensure_ascii=False) + "\n\n",
        json.dumps({**base, "evidence": invented}, ensure_ascii=False),
        json.dumps({**base, "evidence": invented * 3}, ensure_ascii=False),  # past max_items
        json.dumps({**base, "evidence": "a single string item"}),
        json.dumps({**base, "evidence": [1, None, {"x": 1}, "", "  "]}),
        json.dumps({**base, "Evidence": base["evidence"], "evidence": None}),
        f"Here is my answer:\n```json\n{json.dumps(base, ensure_ascii=False)}\n```",
        f"Label: {base['label']}\nConfidence: {base['confidence']}",
        json.dumps({"label": "Legitimate", "confidence": 0.7, "evidence": []}),
        json.dumps({"label": "Abstain", "confidence": 0.5}),
        json.dumps({"label": "Phishing", "confidence": 1.7, "evidence": ["urgent"]}),
        json.dumps({"label": "phishing", "confidence": "0.8"}),
        json.dumps({"label": "Spam", "confidence": 0.9}),
        "I cannot tell {label: maybe",
        "",
        "   ",
    ]


def expected(task, completion: str | None) -> dict[str, float]:
    """The six rewards from the plain functions, no task memo involved."""
    reply = (completion or "").strip()
    answer = parse_completion(reply)
    settings = load_reward_settings(task.config.reward_config)
    gold = task.data.answer
    report = evidence_report(
        answer.evidence,
        build_index(task.data.info["email"]),
        answer.label,
        penalty=settings.evidence_penalty,
        max_items=settings.evidence_max_items,
    )
    return {
        "format": format_reward(answer.parsed),
        "accuracy": accuracy_reward(answer.label, gold),
        "calibration": calibration_reward(answer.label, answer.confidence, gold),
        "asymmetric_cost": asymmetric_cost_reward(answer.label, gold, settings.costs),
        "abstention": abstention_reward(answer.label, gold, abstain_credit=settings.abstain_credit),
        "evidence": report.score,
    }


def plain_report(task, completion: str):
    answer = parse_completion(completion)
    settings = load_reward_settings(task.config.reward_config)
    return evidence_report(
        answer.evidence,
        build_index(task.data.info["email"]),
        answer.label,
        penalty=settings.evidence_penalty,
        max_items=settings.evidence_max_items,
    )


def verifiers_scores(task, completion: str) -> tuple[dict, dict, float]:
    return asyncio.run(score_completion(task, completion))


def test_every_reward_equals_the_plain_functions(tasks):
    checked = 0
    for task in tasks:
        for completion in completions(task):
            want = expected(task, completion)
            scores, weights, total = verifiers_scores(task, completion)
            assert scores == want, (task.key, completion)
            assert task.reward_values(completion) == want  # warm memo
            assert task.fast_score(completion) == (scores, weights, total)
            assert list(task.fast_score(completion)[0]) == list(scores)  # same order, same sum
            stripped = completion.strip()
            assert task.details(completion) == {"evidence": plain_report(task, stripped).to_dict()}
            checked += 1
    assert checked >= 160 * 15


def test_cold_task_shortcuts_equal_verifiers(tasks):
    """fast_score and reward_values on tasks that never saw the reply (memo cold)."""
    fresh = load()
    for task, twin in list(zip(tasks, fresh))[::7]:
        for completion in completions(task)[::2]:
            assert twin.fast_score(completion) == verifiers_scores(task, completion)
    again = load()
    for task in again[::11]:
        for completion in completions(task):
            assert task.reward_values(completion) == expected(task, completion)


def test_memo_overflow_and_interleaving_keep_values(tasks):
    task = tasks[3]
    replies = completions(task) + [
        json.dumps({"label": "Phishing", "confidence": i / 50, "evidence": [f"x{i}.com"]})
        for i in range(3 * _MEMO_REPLIES)
    ]
    assert len(replies) > 2 * _MEMO_REPLIES
    for _ in range(2):  # second round: every entry was evicted at least once
        for reply in replies:
            assert task.reward_values(reply) == expected(task, reply)
    memo = task.__dict__["_reply_memo"][3]
    assert len(memo) <= _MEMO_REPLIES

    async def concurrently():
        return await asyncio.gather(*(score_completion(task, r) for r in replies * 2))

    for reply, (scores, _, _) in zip(replies * 2, asyncio.run(concurrently())):
        assert scores == expected(task, reply)


def test_changed_data_does_not_reuse_the_memo(tasks):
    task = tasks[0]
    reply = json.dumps({"label": task.data.answer, "confidence": 0.9, "evidence": []})
    assert task.reward_values(reply)["accuracy"] == 1.0
    other = "Legitimate" if task.data.answer == "Phishing" else "Phishing"
    clone = task.with_data(answer=other)
    assert clone.reward_values(reply) == expected(clone, reply)
    assert clone.reward_values(reply)["accuracy"] == 0.0
    assert task.reward_values(reply)["accuracy"] == 1.0


def test_custom_reward_toml_and_reload(tmp_path):
    path = tmp_path / "rewards.toml"
    text = DEFAULT_TOML.read_text(encoding="utf-8")
    path.write_text(
        text.replace("invented_penalty = 0.25", "invented_penalty = 0.1")
        .replace("abstention = 0.0", "abstention = 0.7")
        .replace("credit = 0.5", "credit = 0.3"),
        encoding="utf-8",
    )
    tasks = load(path)
    for task in tasks[::9]:
        for completion in completions(task):
            want = expected(task, completion)
            scores, weights, total = verifiers_scores(task, completion)
            assert scores == want and weights["abstention"] == 0.7
            assert task.fast_score(completion) == (scores, weights, total)

    # The TOML changes and its cached settings are dropped: the same task and reply score anew.
    task = tasks[0]
    reply = completions(task)[2]  # invented evidence
    before = task.reward_values(reply)["evidence"]
    path.write_text(text.replace("invented_penalty = 0.25", "invented_penalty = 1.0"), encoding="utf-8")
    load_reward_settings.cache_clear()
    try:
        after = task.reward_values(reply)
        assert after == expected(task, reply)
        assert after["evidence"] <= before
    finally:
        load_reward_settings.cache_clear()


def test_fast_score_follows_plugged_weights_and_priorities():
    tasks = load(
        rewards={
            "format": vf.RewardFunctionConfig(weight=2.5, priority=3),
            "evidence": vf.RewardFunctionConfig(priority=-1),
        }
    )
    for task in tasks[::13]:
        for completion in completions(task):
            fast = task.fast_score(completion)
            assert fast == verifiers_scores(task, completion)
            assert list(fast[0])[0] == "format" and list(fast[0])[-1] == "evidence"
            assert fast[1]["format"] == 2.5


def test_fast_score_declines_what_it_does_not_model():
    plugged = load(rewards={"accuracy": vf.RewardFunctionConfig(fn="sv_shared:accuracy_reward")})
    assert plugged[0].fast_score("{}") is None
    deferred = load()[0].defer_scoring()
    assert deferred.fast_score("{}") is None
