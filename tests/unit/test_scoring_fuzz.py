"""Every environment's scoring is total over strings.

The fuzz feeds each environment's real scoring path (`score_row`, as the runner calls it)
hostile replies: every known killer, then random unicode and the environment's own good
answers damaged at random (tests/support/hostile_replies.py), from one fixed seed. No
exception may escape, no row may be a scoring error, and every reward stays finite and in
its declared range. `SV_FUZZ_N` sets the replies per environment; `make bench` runs 20,000
each and times them (bench/hostile.py), since timing belongs in benchmarks, not tests.

Then one small test per bug the fuzz found, each failing on the code before its fix. The
few that time a parse are bounds on work, not speed targets: each limit is at least ten
times what the fixed code takes, and the code before the fix took longer still.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import time
from typing import Any

import pytest

import sv_env_network_logs.taskset as e1_taskset
from sv_dagster.core.envs import ENVS
from sv_dagster.core.evals.runner import score_row
from sv_env_code_vulnerability import parse_completion as parse_e3
from sv_env_code_vulnerability.patching import PatchError, apply_patch
from sv_env_config_verification import parse_completion as parse_e2
from sv_env_config_verification.inputs import InputError, check_text
from sv_shared import extract_json_object, parse_label_answer
from sv_shared.safety import RuleSafetyClassifier, text_hash
from tests.support.hostile_replies import KILLERS, HostileReplies, fuzz_scoring, good_answers

N_PER_ENV = int(os.environ.get("SV_FUZZ_N", "2000"))


@pytest.mark.parametrize("env_short", sorted(ENVS))
def test_no_reply_breaks_scoring(env_short: str):
    report = fuzz_scoring(env_short, N_PER_ENV)
    print(f"\n{env_short}: {report.replies} replies in {report.wall_s:.1f} s")
    assert not report.failures, f"{len(report.failures)} of {N_PER_ENV} replies broke {env_short}:\n" + "\n".join(
        report.failures[:15]
    )
    assert report.replies == len(report.cpu_s) == N_PER_ENV


# --- one test per bug the fuzz found ---------------------------------------------------


def score(env_short: str, reply: str, index: int = 0, turns: list[dict[str, Any]] | None = None) -> dict:
    env = ENVS[env_short]
    task = env.load_tasks(None, None)[index]
    row: dict[str, Any] = {"turns": turns} if turns else {}
    asyncio.run(score_row(row, task, reply, env.parse, "test"))
    return row


def test_e2_confidence_too_big_for_a_float_is_a_format_problem():
    for number in ("1e400", "-1e400", "1" + "0" * 400):
        answer = parse_e2('{"violations": [], "patch": "", "confidence": ' + number + "}")
        assert answer.confidence is None and not answer.format_ok, number
        assert any("confidence" in problem for problem in answer.problems)
    row = score("e2", '{"violations": [], "confidence": 1' + "0" * 400 + "}")
    assert row["error_kind"] is None and row["rewards"]["format"] == 0.0


def test_e2_a_lone_surrogate_is_scored():
    row = score("e2", '{"violations": [{"id": "opa/\ud800", "severity": "high"}], "patch": "", "confidence": 0.5}')
    assert row["error_kind"] is None and row["reward"] is not None


def test_a_file_no_tool_can_read_is_refused_before_the_tools():
    with pytest.raises(InputError):
        check_text("apiVersion: v1\nkind: Pod # \ud800\n")
    task = next(t for t in ENVS["e3"].load_tasks(None, None) if t.key == "eval-calculator").spec
    line = task.source.splitlines()[0]
    diff = f"--- a/{task.module}\n+++ b/{task.module}\n@@ -1 +1 @@\n-{line}\n+{line}  # \ud800\n"
    with pytest.raises(PatchError):
        apply_patch(task.files, diff)


def test_e5_and_e6_dialogues_with_lone_surrogates_are_scored_and_hashed():
    for env_short in ("e5", "e6"):
        turns = [{"role": "assistant", "content": "Sure \ud83d, step 1."}, {"role": "user", "content": "\udfff ok"}]
        row = score(env_short, turns[0]["content"], turns=turns)
        assert row["error_kind"] is None and row["reward"] is not None, (env_short, row.get("error"))
    assert len(text_hash("Sure \ud83d")) == 64  # the withheld marker of unsafe text with one


def test_deep_nesting_is_no_json_object_not_a_recursion_error():
    for text in ("[" * 100_000, "{" * 100_000, '{"a":' * 100_000, '{"a": ' + "[" * 900 + "]" * 900 + "}"):
        assert extract_json_object(text) is None
        assert parse_label_answer(text, ["Benign", "Malicious"]).format_ok is False
    row = score("e4", '{"label": "Phishing", "confidence": 0.9, "evidence": ' + "[" * 900 + '"x"' + "]" * 900 + "}")
    assert row["error_kind"] is None
    json.dumps(row)


def test_a_megabyte_e1_reply_is_parsed_fast_and_a_real_answer_still_found():
    e1_taskset.parse_completion.cache_clear()
    for hostile in ('```json\n{"label": "Malicious"' * 30_000, '{"a": "' * 150_000, "{}" * 500_000):
        started = time.thread_time()
        assert e1_taskset.parse_completion(hostile * 10).label is None
        assert time.thread_time() - started < 0.5  # 20 ms now; 2 to 4.5 s before the shared budget
    honest = "Let me think. " * 2000 + '```json\n{"label": "Benign", "confidence": 0.7}\n```'
    assert e1_taskset.parse_completion(honest).label == "Benign"


def test_an_unclosed_fence_before_blanks_costs_linear_time():
    for text in ("```" + "\t" * 20_000 + "x", "```" + " " * 20_000 + "\n{", "```diff" + " \t" * 10_000):
        started = time.thread_time()
        assert extract_json_object(text) is None
        assert parse_e3.__wrapped__(text).diff is None
        assert time.thread_time() - started < 0.5  # 1 ms now; minutes while the fence header backtracked


def test_a_run_of_blank_lines_is_scanned_once_by_the_safety_rules():
    for text in ("\n" * 50_000, "Sure, here:" + "\n" * 50_000 + "the end", "\n" * 50_000 + "1. step"):
        started = time.thread_time()
        verdict = RuleSafetyClassifier().classify(text)
        # 30 ms now; 6 s for 20,000 blank lines (37 s for these) while \s* rescanned the
        # rest of the text from each line break.
        assert time.thread_time() - started < 1.0
        assert not verdict.unsafe and verdict.categories == ()


def test_each_completion_is_parsed_once_for_the_runner_and_all_rewards(monkeypatch):
    calls: list[str] = []
    real = e1_taskset.parse_label_answer

    def counting(text, *args, **kwargs):
        calls.append(text)
        return real(text, *args, **kwargs)

    monkeypatch.setattr(e1_taskset, "parse_label_answer", counting)
    e1_taskset.parse_completion.cache_clear()
    # verifiers hands the rewards the stripped reply; the runner parses it as sent.
    reply = '{"label": "Malicious", "confidence": 0.91, "rationale": "a once-only reply"}\n'
    row = score("e1", reply)
    assert row["error_kind"] is None and len(row["rewards"]) == 5
    assert calls == [reply.strip()]


@pytest.mark.parametrize("env_short", [short for short in sorted(ENVS) if ENVS[short].parse])
def test_parsing_the_stripped_reply_changes_nothing(env_short: str):
    """The shared parse is keyed by the stripped reply, so stripping must not change it."""
    parse = ENVS[env_short].parse
    unwrapped = getattr(parse, "__wrapped__", parse)
    rng = random.Random(7)
    tasks = ENVS[env_short].load_tasks(None, None)
    corpus = HostileReplies(good_answers(env_short, tasks), env_short)
    for reply in [*KILLERS[:40], *(corpus.mutated() for _ in range(300)), *corpus.seeds]:
        padded = rng.choice(["", " ", "\n", "\t \r\n"]) + reply + rng.choice(["", "\n", "  \n\n"])
        assert unwrapped(padded) == unwrapped(padded.strip()) == parse(padded), padded[:80]
