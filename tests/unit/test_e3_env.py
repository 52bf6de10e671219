"""E3 as a verifiers taskset: rewards via `await task.score(trace)` for oracle, heuristic,
empty and garbage answers; one verification per completion; pool determinism."""

from __future__ import annotations

import asyncio
import json

import pytest

import sv_env_code_vulnerability as e3
from sv_dagster.core.evals.traces import completion_trace
from sv_env_code_vulnerability.config import REWARD_NAMES
from sv_env_code_vulnerability.verify import VERIFICATIONS, verify, verify_many


@pytest.fixture(scope="module")
def tasks():
    return list(e3.CodeVulnTaskset(e3.CodeVulnTasksetConfig()).load())


def test_exactly_one_taskset_exported():
    import verifiers.v1 as vf

    tasksets = [n for n in e3.__all__ if isinstance(getattr(e3, n), type) and issubclass(getattr(e3, n), vf.Taskset)]
    assert tasksets == ["CodeVulnTaskset"]


def test_keys_are_task_ids_and_weights_come_from_toml(tasks):
    assert [t.key for t in tasks] == [t.id for t in e3.bundled_tasks()]
    weights = e3.load_reward_settings().weights
    assert {k: v.weight for k, v in tasks[0].config.rewards.items()} == weights
    assert set(weights) == set(REWARD_NAMES)


def _score(task, completion):
    trace = completion_trace(task, completion)
    asyncio.run(task.score(trace))
    return {name: reward.score for name, reward in trace.rewards.items()}, trace


def test_oracle_gets_full_functional_security_and_static(tasks):
    for task in tasks[:4]:
        scores, _ = _score(task, e3.oracle_reply(task.data.prompt_text))
        assert scores["format"] == 1.0
        assert scores["functional"] == scores["security"] == 1.0, task.key
        assert scores["finding_fixed"] == scores["no_new_findings"] == 1.0, task.key


def test_heuristic_fixes_some_tasks_honestly(tasks):
    by_key = {t.key: t for t in tasks}
    scores, _ = _score(by_key["yaml-load-config"], e3.heuristic_reply(by_key["yaml-load-config"].data.prompt_text))
    assert scores["security"] == 1.0 and scores["functional"] == 1.0
    # No rule for path traversal: an empty diff, scored 0 everywhere.
    reply = e3.heuristic_reply(by_key["path-traversal-download"].data.prompt_text)
    assert json.loads(reply)["diff"] == ""
    scores, _ = _score(by_key["path-traversal-download"], reply)
    assert all(v == 0.0 for v in scores.values())


@pytest.mark.parametrize("completion", ["", "I cannot help with that.", '{"diff": 12}', "```diff\nnot a diff\n```"])
def test_empty_and_garbage_answers_score_zero(tasks, completion):
    scores, _ = _score(tasks[0], completion)
    assert all(v == 0.0 for v in scores.values())


def test_fenced_fallback_is_labelled_and_costs_format(tasks):
    task = tasks[0]
    spec = task.spec
    scores, trace = _score(task, f"Here you go:\n```diff\n{spec.fix_diff}```")
    assert scores["format"] == 0.5 and scores["security"] == 1.0
    assert e3.parse_completion(trace.last_reply).to_dict()["source"] == "fenced_diff"


def test_rewards_share_one_verification(tasks):
    task = tasks[1]
    completion = "Answer: " + e3.oracle_reply(task.data.prompt_text)  # a fresh completion text
    before = VERIFICATIONS.computed
    _score(task, completion)
    _score(task, completion)
    assert VERIFICATIONS.computed - before == 1


def test_pool_results_equal_a_fresh_sequential_run(tasks):
    specs = e3.bundled_tasks()
    items = [(s, e3.oracle_reply(e3.render_prompt(s))) for s in specs[:6]]
    items += [(s, e3.heuristic_reply(e3.render_prompt(s))) for s in specs[:6]]
    pooled = verify_many(items, semgrep=False)
    sequential = [verify(t, c, semgrep=False) for t, c in items]
    assert [v.components for v in pooled] == [v.components for v in sequential]
    assert [v.reasons for v in pooled] == [v.reasons for v in sequential]


def test_sandbox_protections_are_recorded(tasks):
    task = tasks[2]
    v = verify(task.spec, e3.oracle_reply(task.data.prompt_text), semgrep=False)
    box = v.details["sandbox"]
    caps = e3.detect_sandbox()
    assert box["mode"] == caps.mode and box["netns"] == caps.netns and box["readonly_root"] == caps.readonly_root
    assert isinstance(box["uid"], int) and box["limits"]["cpu_s"] > 0


def test_scan_code_shows_the_findings_that_grade_a_fix(tasks):
    """E3's one tool: the scanners on the module, or on a candidate fix (the reference fix
    clears what they flag); a huge candidate is refused; a budget of 0 offers no tool."""
    from sv_dagster.core.evals.toolcalls import ToolBox
    from sv_env_code_vulnerability.patching import apply_diff

    task = tasks[0]
    spec = task.spec
    box = ToolBox(task.tool_functions())
    assert box.names == ["scan_code"] and task.tool_budget == 3
    fixed = apply_diff({spec.module: spec.source}, spec.fix_diff)[spec.module]

    async def scans():
        return [
            json.loads(await box.call("scan_code", arguments))
            for arguments in ("{}", json.dumps({"content": fixed}), json.dumps({"content": "x" * 100_001}))
        ]

    original, candidate, huge = asyncio.run(scans())
    assert original["scanned"] == "task module" and candidate["scanned"] == "given content"
    assert [r["tool"] for r in original["results"]] == ["bandit", "semgrep", "codeshield"]
    flagged = {f["id"] for r in original["results"] for f in r["findings"] if f["severity"] in ("medium", "high")}
    still = {f["id"] for r in candidate["results"] for f in r["findings"] if f["severity"] in ("medium", "high")}
    assert flagged and not flagged & still
    assert huge == {"scanned": "given content", "error": "content of 100001 characters is over the 100000 a scan takes"}
    assert not any("truncated" in r for r in original["results"])
    # More findings than a result lists: it says how many it left out.
    noisy = "import subprocess\n\n" + "".join(f"subprocess.call(cmd{i}, shell=True)\n" for i in range(60))
    (scan_code,) = task.tool_functions()
    (bandit, *_) = json.loads(asyncio.run(scan_code(content=noisy)))["results"]
    assert bandit["tool"] == "bandit" and len(bandit["findings"]) == 50 and bandit["truncated"] >= 11
    no_tools = e3.CodeVulnTaskset(e3.CodeVulnTasksetConfig(task=e3.CodeVulnTaskConfig(max_tool_calls=0))).load()
    assert next(iter(no_tools)).tool_functions() == []


def test_sft_rows_that_call_scan_code_get_what_the_tool_returns(tasks):
    """Variant `tool_calls`: scan the module, scan it with the reference fix applied, then
    answer the reference diff; each result is what `scan_code` returns to a model, and the
    calls stay within the task's budget."""
    from sv_dagster.training.sft_data import build_examples
    from sv_env_code_vulnerability.patching import apply_diff

    plain = {e.task_key: e for e in build_examples("e3", tasks)}
    examples = build_examples("e3", tasks, variant="tool_calls")
    assert len(examples) == len(tasks) and all(not e.tool_turns for e in plain.values())
    by_key = {t.key: t for t in tasks}
    for example in examples:
        task = by_key[example.task_key]
        (scan_code,) = task.tool_functions()
        spec = task.spec
        fixed = apply_diff({spec.module: spec.source}, spec.fix_diff)[spec.module]
        first, first_result, second, second_result = example.tool_turns
        assert first["tool_calls"][0]["function"] == {"name": "scan_code", "arguments": "{}"}
        assert json.loads(second["tool_calls"][0]["function"]["arguments"]) == {"content": fixed}
        assert first_result == {"role": "tool", "name": "scan_code", "content": asyncio.run(scan_code())}
        assert second_result["content"] == asyncio.run(scan_code(content=fixed))
        assert json.loads(second_result["content"])["scanned"] == "given content"
        assert example.completion == plain[task.key].completion  # the answer is the reference fix either way
    one = e3.CodeVulnTaskset(e3.CodeVulnTasksetConfig(task=e3.CodeVulnTaskConfig(max_tool_calls=1))).load()
    none = e3.CodeVulnTaskset(e3.CodeVulnTasksetConfig(task=e3.CodeVulnTaskConfig(max_tool_calls=0))).load()
    assert all(len(e.tool_turns) == 2 for e in build_examples("e3", list(one), variant="tool_calls"))
    assert all(not e.tool_turns for e in build_examples("e3", list(none), variant="tool_calls"))
