"""The bounds that keep scoring one hostile reply cheap, each checked for what it allows and
what it refuses: JSON nesting read without recursion, E2's JSON patch limits, E3's search
for fenced diffs, and the memos that spare a reply's scoring work done for an earlier one."""

from __future__ import annotations

import asyncio
import copy
import importlib
import json
import random

import pytest

import sv_env_code_vulnerability as e3
from sv_dagster.core.evals.traces import completion_trace
from sv_env_config_verification import PatchError, apply_patch, bundled_examples
from sv_shared.parsing import MAX_JSON_DEPTH, extract_json_object, json_nested_deeper_than

e3_verify = importlib.import_module("sv_env_code_vulnerability.verify")  # the package exports a `verify` function
PRIV = {e.filename: e.content for e in bundled_examples()}["privileged-pod.yaml"]


def depth(value) -> int:
    if isinstance(value, dict):
        return 1 + max(map(depth, value.values()), default=0)
    if isinstance(value, list):
        return 1 + max(map(depth, value), default=0)
    return 0


def random_json(rng: random.Random, levels: int):
    strings = ["[", "]", "{", "}", '"', "\\", '\\"[', "x", "\ud800[", "", "a\\\\"]
    if levels == 0 or rng.random() < 0.2:
        return rng.choice([rng.choice(strings) * rng.randint(0, 3), 1, None, 2.5])
    if rng.random() < 0.5:
        return [random_json(rng, levels - 1) for _ in range(rng.randint(0, 3))]
    return {rng.choice(strings) + str(i): random_json(rng, levels - 1) for i in range(rng.randint(0, 3))}


def test_nesting_depth_is_read_from_brackets_outside_strings():
    rng = random.Random(5)
    for _ in range(3000):
        value = random_json(rng, rng.randint(0, 9))
        for ensure_ascii in (True, False):
            text = json.dumps(value, ensure_ascii=ensure_ascii)
            for limit in (0, 1, 2, 3, 5, 8):
                assert json_nested_deeper_than(text, limit) == (depth(value) > limit), (text, limit)


def test_an_object_nested_past_the_limit_is_no_answer_but_one_at_it_is():
    at_limit = '{"label": "Benign", "x": ' + "[" * (MAX_JSON_DEPTH - 1) + "]" * (MAX_JSON_DEPTH - 1) + "}"
    assert extract_json_object(at_limit)["label"] == "Benign"
    assert extract_json_object(at_limit.replace("[", "[[", 1).replace("]", "]]", 1)) is None


def test_a_json_patch_of_too_many_operations_is_refused_as_list_or_text():
    operations = [{"op": "add", "path": f"/metadata/labels/l{i}", "value": "x"} for i in range(101)]
    for patch in (operations, json.dumps(operations)):
        with pytest.raises(PatchError, match="101 operations"):
            apply_patch("privileged-pod.yaml", PRIV, patch)
    assert "l99" in apply_patch("privileged-pod.yaml", PRIV, operations[:100])


def test_a_json_patch_that_copies_the_document_into_itself_is_refused():
    doubling = [{"op": "copy", "from": "/spec", "path": f"/spec/copy{i}"} for i in range(40)]
    with pytest.raises(PatchError, match="grows the document"):
        apply_patch("privileged-pod.yaml", PRIV, doubling)
    assert "copy0:" in apply_patch("privileged-pod.yaml", PRIV, doubling[:1])


def test_applying_a_json_patch_leaves_the_parsed_answer_as_it_was():
    patch = [
        {"op": "add", "path": "/metadata/labels", "value": {"team": "a"}},
        {"op": "add", "path": "/metadata/labels/tier", "value": "b"},
    ]
    before = copy.deepcopy(patch)
    patched = apply_patch("privileged-pod.yaml", PRIV, patch)
    assert "tier: b" in patched and patch == before  # jsonpatch inserts values by reference


def test_e3_finds_a_fenced_diff_among_the_first_fences_only():
    spec = e3.bundled_tasks()[0]
    fenced = f"```diff\n{spec.fix_diff}```"
    prose = "```text\nnot a diff\n```\n"
    assert e3.parse_completion(prose * 10 + fenced).diff == spec.fix_diff
    assert e3.parse_completion(prose * 100 + fenced).diff is None  # past the first 64 blocks


def test_e3_replies_with_the_same_patched_files_share_one_sandbox_run(monkeypatch):
    task = list(e3.CodeVulnTaskset(e3.CodeVulnTasksetConfig()).load())[3]
    runs: list[str] = []
    real = e3_verify._run_checks

    async def counted(task_spec, prep, settings, semgrep):
        runs.append(task_spec.id)
        return await real(task_spec, prep, settings, semgrep)

    monkeypatch.setattr(e3_verify, "_run_checks", counted)
    monkeypatch.setattr(e3_verify, "_CHECKS", e3_verify._ChecksCache())
    answer = json.loads(e3.oracle_reply(task.data.prompt_text))
    scores = []
    for explanation in ("first wording", "second wording"):
        trace = completion_trace(task, json.dumps({**answer, "explanation": explanation}))
        asyncio.run(task.score(trace))
        scores.append({name: reward.score for name, reward in trace.rewards.items()})
    assert runs == [task.spec.id]
    assert scores[0] == scores[1] and scores[0]["functional"] == 1.0
