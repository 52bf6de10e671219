"""E2 taskset: loading, rewards through `task.score`, tool functions, grounding, memoisation.

These run with OPA only (in-process, fast); `test_full_tool_union` runs the default tools
(Semgrep and Checkov, one ~10 s process each, and KubeLinter's default checks as Rego).
"""

from __future__ import annotations

import asyncio
import json

import pytest
import verifiers.v1 as vf
from verifiers.v1.graph import MessageNode
from verifiers.v1.trace import AgentInfo, TraceTask

from sv_dagster.core.evals.traces import completion_trace
from sv_env_config_verification import (
    ConfigVerificationTaskset,
    ConfigVerificationTasksetConfig,
    heuristic_reply,
    load_reward_settings,
    oracle_reply,
    parse_completion,
    tool_versions,
)
from sv_env_config_verification.tools import ToolSuite


def _taskset(**task) -> ConfigVerificationTaskset:
    return ConfigVerificationTaskset(ConfigVerificationTasksetConfig(task={"tools": ["opa"], **task}))


@pytest.fixture(scope="module")
def tasks():
    return {t.data.filename: t for t in _taskset().load()}


def _score(task, reply: str) -> vf.Trace:
    trace = completion_trace(task, reply)
    asyncio.run(task.score(trace))
    return trace


def _rewards(trace) -> dict[str, float]:
    return {name: r.score for name, r in trace.rewards.items()}


def test_loads_one_taskset_with_stable_keys(tasks):
    import sv_env_config_verification as pkg

    tasksets = [n for n in pkg.__all__ if isinstance(getattr(pkg, n), type) and issubclass(getattr(pkg, n), vf.Taskset)]
    assert tasksets == ["ConfigVerificationTaskset"]
    assert len(tasks) >= 24
    task = tasks["privileged-pod.yaml"]
    assert task.key == "e2-privileged-pod" and task.tool_budget == 5
    assert "run_opa" in task.data.prompt_text and "privileged-pod.yaml" in task.data.prompt_text
    weights = load_reward_settings().weights
    assert {n: c.weight for n, c in task.config.rewards.items()} == weights


def test_oracle_reply_scores_full_marks(tasks):
    for name in ("kitchen-sink-pod.yaml", "privileged-pod.yaml", "mixed-infra.tf", "clean-deployment.yaml"):
        task = tasks[name]
        trace = _score(task, oracle_reply(task.data.prompt_text, tools=["opa"]))
        rewards = _rewards(trace)
        assert rewards["format"] == 1.0 and rewards["detection"] == 1.0, (name, rewards)
        assert trace.info["e2"]["tools"]["opa"]["version"].startswith("regopy-")
    # The oracle's JSON patch fixes what it can on the privileged pod: full patch credit.
    trace = _score(
        tasks["privileged-pod.yaml"], oracle_reply(tasks["privileged-pod.yaml"].data.prompt_text, tools=["opa"])
    )
    assert _rewards(trace)["patch"] == 1.0 and trace.metrics["patch_success"] == 1.0


def test_heuristic_baseline_matches_opa_on_the_corpus(tasks):
    for task in tasks.values():
        rewards = _rewards(_score(task, heuristic_reply(task.data.prompt_text)))
        assert rewards["detection"] == 1.0, task.key
        assert rewards["grounding"] == 0.0  # no tool was called: nothing it says is grounded


def test_empty_and_garbage_answers(tasks):
    task = tasks["privileged-pod.yaml"]
    empty = _rewards(_score(task, '{"violations": [], "patch": "", "confidence": 0.5}'))
    assert empty == {"format": 1.0, "detection": 0.0, "patch": 0.0, "grounding": 0.0}
    garbage = _score(task, "\x00\xff not json at all {{{")
    assert _rewards(garbage) == {"format": 0.0, "detection": 0.0, "patch": 0.0, "grounding": 0.0}
    clean = tasks["clean-role.yaml"]
    trace = _score(clean, '{"violations": [], "patch": "", "confidence": 0.9}')
    assert _rewards(trace)["detection"] == 1.0 and trace.metrics["clean_pass"] == 1.0
    # Prose that names no finding is no verdict of "clean": no detection or patch credit.
    prose = _score(clean, "This Role looks fine to me.")
    assert _rewards(prose) == {"format": 0.0, "detection": 0.0, "patch": 0.0, "grounding": 0.0}
    assert prose.metrics["clean_pass"] == 0.0
    wrong = _score(
        clean,
        json.dumps(
            {"violations": [{"id": "opa/k8s-rbac-wildcard", "severity": "high"}], "patch": "", "confidence": 0.9}
        ),
    )
    assert _rewards(wrong)["detection"] == 0.0 and wrong.metrics["clean_pass"] == 0.0


def test_patch_rewards(tasks):
    task = tasks["kitchen-sink-pod.yaml"]
    base = {"violations": [{"id": "opa/k8s-privileged-container", "severity": "high"}], "confidence": 0.5}
    partial = [{"op": "replace", "path": "/spec/containers/0/securityContext/privileged", "value": False}]
    trace = _score(task, json.dumps({**base, "patch": partial}))
    assert 0.0 < _rewards(trace)["patch"] < 1.0 and trace.metrics["patch_success"] == 1.0
    broken = _score(
        task,
        json.dumps(
            {**base, "patch": "--- a/kitchen-sink-pod.yaml\n+++ b/kitchen-sink-pod.yaml\n@@ -1 +1 @@\n-nope\n+x\n"}
        ),
    )
    assert _rewards(broken)["patch"] == 0.0 and broken.info["e2"]["patch"]["status"] == "failed"
    escape = _score(task, json.dumps({**base, "patch": "--- a/../x\n+++ b/../x\n@@ -1 +1 @@\n-a\n+b\n"}))
    assert _rewards(escape)["patch"] == 0.0
    # A patch that breaks the YAML cannot be verified: no credit.
    unparsable = [{"op": "add", "path": "/spec/hostIPC", "value": True}]
    worse = _score(task, json.dumps({**base, "patch": unparsable}))
    assert worse.info["e2"]["patch"]["introduced"] == ["opa/k8s-host-ipc"]


def _scored_with_tool_calls(task, answer: str, tool_outputs: list[str]) -> vf.Trace:
    """A trace in which the model called a tool once per output, then answered."""
    base = completion_trace(task, answer)
    nodes = base.nodes[:-1]
    for i, output in enumerate(tool_outputs):
        call = vf.ToolCall(id=f"c{i}", name="run_opa", arguments="{}")
        nodes.append(
            MessageNode(parent=len(nodes) - 1, message=vf.AssistantMessage(content="", tool_calls=[call]), sampled=True)
        )
        nodes.append(MessageNode(parent=len(nodes) - 1, message=vf.ToolMessage(tool_call_id=f"c{i}", content=output)))
    nodes.append(MessageNode(parent=len(nodes) - 1, message=vf.AssistantMessage(content=answer), sampled=True))
    trace = vf.Trace(
        task=TraceTask(type=type(task).__name__, data=task.data, key=task.key, hash=task.hash),
        state=base.state,
        agent=AgentInfo(config=vf.AgentConfig()),
        nodes=nodes,
        is_completed=True,
        ok=True,
    )
    asyncio.run(task.score(trace))
    return trace


def test_grounding_counts_ids_seen_in_tool_messages(tasks):
    task = tasks["privileged-pod.yaml"]
    tool_output = asyncio.run(task.tool_functions()[0]())
    assert "opa/k8s-privileged-container" in tool_output
    answer = json.dumps(
        {
            "violations": [
                {"id": "opa/k8s-privileged-container", "severity": "high"},
                {"id": "opa/k8s-host-pid", "severity": "high"},
            ],
            "patch": "",
            "confidence": 0.7,
        }
    )
    trace = _scored_with_tool_calls(task, answer, [tool_output])
    assert trace.rewards["grounding"].score == 0.5  # one of the two ids came from a tool
    assert trace.metrics["tool_calls"] == 1.0


def test_tool_functions_are_typed_and_accept_candidates(tasks):
    task = tasks["privileged-pod.yaml"]
    (run_opa,) = task.tool_functions()
    assert run_opa.__name__ == "run_opa" and "content" in run_opa.__doc__
    assert run_opa.__annotations__["content"] in ("str | None",) or "str" in str(run_opa.__annotations__["content"])
    fixed = task.data.content.replace("privileged: true", "privileged: false")
    assert json.loads(asyncio.run(run_opa(content=fixed)))["findings"] == []
    bomb = json.loads(asyncio.run(run_opa(content="a: &a [*a]\n")))
    assert bomb["findings"] == [] and "recursive" in bomb["error"]


def test_verification_runs_tools_once_per_completion(tasks, monkeypatch):
    task = tasks["sg-open-ssh.tf"]
    calls = []
    original = ToolSuite.run_all

    async def counting(self, *args, **kwargs):
        calls.append(args)
        return await original(self, *args, **kwargs)

    monkeypatch.setattr(ToolSuite, "run_all", counting)
    reply = json.dumps(
        {
            "violations": [{"id": "opa/tf-sg-open-ssh", "severity": "high"}],
            "patch": "",
            "confidence": 0.8,
            "nonce": "memo-test",
        }
    )
    _score(task, reply)
    assert len(calls) == 1  # detection, patch and the metric share one verification
    _score(task, reply)
    assert len(calls) == 1


def test_parse_completion_and_versions():
    parsed = parse_completion(
        '```json\n{"violations": [{"id": "opa/x", "severity": "HIGH"}], "patch": "", "confidence": 2}\n```'
    )
    assert not parsed.format_ok and parsed.ids == {"opa/x"} and parsed.to_dict()["confidence"] is None
    versions = tool_versions(["opa"])
    assert versions["opa"]["available"]
    assert set(versions) == {"opa", "semgrep", "checkov", "kubelinter", "kubelinter_rego"}
    assert versions["kubelinter"]["available"] is False and versions["kubelinter_rego"]["version"] == "disabled"


def test_mcp_toolset_only_when_asked():
    from sv_env_config_verification import ConfigVerificationTask, ConfigVerificationTaskConfig

    assert ConfigVerificationTask.toolsets(ConfigVerificationTaskConfig()) == []
    (toolset,) = ConfigVerificationTask.toolsets(ConfigVerificationTaskConfig(mcp_tools=True, tools=["opa"]))
    task = next(iter(_taskset().load()))
    asyncio.run(toolset.setup_task(task.data))
    assert "opa/" in asyncio.run(toolset.run_opa())


def test_full_tool_union():
    suite = ToolSuite(cache=None)  # the default tools
    # `make setup` installs them in .venv-tools: missing tools fail here rather than skip unnoticed.
    assert suite.is_available("semgrep") and suite.is_available("checkov"), "run `make setup` (.venv-tools)"
    assert suite.is_available("kubelinter_rego")
    from sv_env_config_verification import bundled_examples
    from sv_env_config_verification.tools import oracle_index

    files = {e.filename: e.content for e in bundled_examples()}
    results = suite.scan_many(files)
    for name, per_tool in results.items():
        assert all(r.error is None for r in per_tool.values()), name
        index = oracle_index(per_tool)
        if name.startswith("clean-"):  # hardened for KubeLinter's default checks too
            assert index == {}, (name, index)
        else:
            assert "opa" in {t.split("/")[0] for t in index} and len(index) >= 2, name


NOTHING_FOUND = '{"violations": [], "patch": "", "confidence": 0.9}'


def test_nothing_found_is_grounded_only_in_a_clean_scan_of_the_task_file(tasks):
    clean, dirty = tasks["clean-role.yaml"], tasks["privileged-pod.yaml"]
    clean_scan = asyncio.run(clean.tool_functions()[0]())
    assert json.loads(clean_scan)["findings"] == []
    grounded = _scored_with_tool_calls(clean, NOTHING_FOUND, [clean_scan])
    assert grounded.rewards["grounding"].score == 1.0
    # The tools found something the answer left out.
    dirty_scan = asyncio.run(dirty.tool_functions()[0]())
    assert _scored_with_tool_calls(dirty, NOTHING_FOUND, [dirty_scan]).rewards["grounding"].score == 0.0
    # A clean scan of content the model passed in (here the clean file's text) is no evidence
    # about the task's file.
    laundered = asyncio.run(dirty.tool_functions()[0](content=clean.data.content))
    assert json.loads(laundered)["findings"] == [] and json.loads(laundered)["scanned"] == "given content"
    assert _scored_with_tool_calls(dirty, NOTHING_FOUND, [laundered]).rewards["grounding"].score == 0.0
    # A scan that failed says nothing either.
    failed = json.dumps({"tool": "opa", "scanned": "task file", "findings": [], "error": "timeout"})
    assert _scored_with_tool_calls(clean, NOTHING_FOUND, [failed]).rewards["grounding"].score == 0.0


def test_answering_nothing_found_everywhere_does_not_pay(tasks):
    """The constant "nothing found" policy, without tools, against the rule baseline: on a
    misconfigured file it earns only the format reward, and grounding pays it nothing."""

    def mean_total(reply) -> float:
        totals = [_score(task, reply(task)).reward for task in tasks.values()]
        return sum(totals) / len(totals)

    constant = mean_total(lambda task: NOTHING_FOUND)
    baseline = mean_total(lambda task: heuristic_reply(task.data.prompt_text))
    weights = load_reward_settings().weights
    clean_share = sum(bool(t.data.info["clean"]) for t in tasks.values()) / len(tasks)
    assert constant == pytest.approx(weights["format"] + clean_share * (weights["detection"] + weights["patch"]))
    assert constant < baseline
