"""The runner's tool-calling loop over real HTTP: tools offered as OpenAI function tools,
calls executed and answered, the budget enforced, bad calls recorded, and the whole
conversation scored by the task (tool results visible to its rewards)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import verifiers.v1 as vf

from sv_dagster.core.evals.runner import read_results, run_eval
from sv_dagster.core.models.backends import OpenAICompatibleBackend
from sv_dagster.core.models.registry import ModelSpec, Sampling
from tests.support.openai_server import LoopbackOpenAIServer

SECRET = "7319"


class VaultData(vf.TaskData):
    answer: str = SECRET


class VaultTask(vf.Task[VaultData, vf.State, vf.TaskConfig]):
    """Answer a code that only the `read_vault` tool knows."""

    tool_budget = 2

    @property
    def key(self) -> str:
        return self.data.id or self.hash

    def tool_functions(self):
        async def read_vault(shelf: str, verbose: bool = False) -> str:
            """Read one shelf of the vault."""
            if shelf == "boom":
                raise RuntimeError("shelf collapsed")
            return json.dumps({"shelf": shelf, "code": SECRET})

        return [read_vault]

    @vf.reward
    async def correct(self, trace: vf.Trace) -> float:
        return float(SECRET in trace.last_reply)

    @vf.reward
    async def grounded(self, trace: vf.Trace) -> float:
        tool_texts = [m.content for m in trace.messages if m.role == "tool"]
        return float(any(SECRET in str(text) for text in tool_texts))


def make_tasks(n: int) -> list[VaultTask]:
    return [VaultTask(VaultData(id=f"v{i}", prompt="What is the vault code?"), vf.TaskConfig()) for i in range(n)]


def backend_for(server: LoopbackOpenAIServer) -> OpenAICompatibleBackend:
    spec = ModelSpec(name="loop", backend="openai", model="m", base_url=server.base_url, sampling=Sampling(timeout_s=5))
    return OpenAICompatibleBackend(spec, backoff_initial_s=0.01, backoff_max_s=0.05)


def tool_results(request: dict) -> list[dict[str, Any]]:
    return [m for m in request["messages"] if m.get("role") == "tool"]


def run(tasks, server, tmp_path: Path, **kwargs) -> list[dict]:
    results = tmp_path / "results.jsonl"
    asyncio.run(run_eval(tasks, backend_for(server), results, concurrency=2, **kwargs))
    return read_results(results)


def test_model_calls_a_tool_reads_the_result_and_is_scored_on_it(tmp_path: Path):
    def reply(request: dict):
        seen = tool_results(request)
        if not seen:
            return {"tool_calls": [{"name": "read_vault", "arguments": json.dumps({"shelf": "top"})}]}
        return f"The code is {json.loads(seen[-1]['content'])['code']}."

    with LoopbackOpenAIServer(reply) as server:
        rows = run(make_tasks(3), server, tmp_path)
        first = server.requests[0]
        second = next(r for r in server.requests if tool_results(r))
    assert [t["function"]["name"] for t in first["tools"]] == ["read_vault"]
    schema = first["tools"][0]["function"]["parameters"]
    assert schema["required"] == ["shelf"] and set(schema["properties"]) == {"shelf", "verbose"}
    assert second["messages"][-2]["tool_calls"][0]["function"]["name"] == "read_vault"
    assert len(rows) == 3
    for row in rows:
        assert row["rewards"] == {"correct": 1.0, "grounded": 1.0}
        assert [t["role"] for t in row["turns"]] == ["assistant", "tool"]
        assert row["tool_calls"] == [{"name": "read_vault", "arguments": '{"shelf": "top"}', "error": None}]
        assert row["usage"]["completion_tokens"] >= 3  # both calls' usage added up


def test_budget_is_enforced_then_the_model_must_answer(tmp_path: Path):
    def reply(request: dict):
        if request.get("tools"):  # a model that would call tools forever
            return {
                "tool_calls": [
                    {"name": "read_vault", "arguments": '{"shelf": "a"}'},
                    {"name": "read_vault", "arguments": '{"shelf": "b"}'},
                    {"name": "read_vault", "arguments": '{"shelf": "c"}'},
                ]
            }
        return "I give up"

    with LoopbackOpenAIServer(reply) as server:
        rows = run(make_tasks(1), server, tmp_path)
        offered = [bool(r.get("tools")) for r in server.requests]
    assert offered == [True, False]  # budget 2: the first turn's 3 calls are cut to 2
    assert len(rows[0]["tool_calls"]) == 2
    assert rows[0]["completion"] == "I give up" and rows[0]["rewards"]["correct"] == 0.0
    assert rows[0]["rewards"]["grounded"] == 1.0


def test_bad_tool_calls_are_answered_with_errors_and_recorded(tmp_path: Path):
    calls = iter(
        [
            [{"name": "no_such_tool", "arguments": "{}"}],
            [
                {"name": "read_vault", "arguments": "not json"},
            ],
        ]
    )

    def reply(request: dict):
        if request.get("tools"):
            return {"tool_calls": next(calls)}
        return "unknown"

    with LoopbackOpenAIServer(reply) as server:
        rows = run(make_tasks(1), server, tmp_path)
        last = server.requests[-1]
    errors = [c["error"] for c in rows[0]["tool_calls"]]
    assert errors == ["unknown tool", "bad arguments"]
    answers = [json.loads(m["content"])["error"] for m in tool_results(last)]
    assert "unknown tool 'no_such_tool'" in answers[0] and "bad arguments for read_vault" in answers[1]
    assert rows[0]["error"] is None and rows[0]["rewards"]["grounded"] == 0.0


def test_a_tool_that_raises_is_an_error_message_not_a_crash(tmp_path: Path):
    def reply(request: dict):
        if not tool_results(request):
            return {"tool_calls": [{"name": "read_vault", "arguments": '{"shelf": "boom"}'}]}
        return "no code"

    with LoopbackOpenAIServer(reply) as server:
        rows = run(make_tasks(1), server, tmp_path)
    assert rows[0]["tool_calls"][0]["error"] == "RuntimeError: shelf collapsed"
    assert rows[0]["reward"] is not None


def test_tools_can_be_switched_off(tmp_path: Path):
    with LoopbackOpenAIServer(lambda request: "no tools here") as server:
        rows = run(make_tasks(1), server, tmp_path, use_tools=False)
        assert "tools" not in server.requests[0]
    assert "turns" not in rows[0] and rows[0]["rewards"]["grounded"] == 0.0
