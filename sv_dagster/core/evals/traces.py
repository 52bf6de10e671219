"""Turn one model reply into a verifiers v1 `Trace`, so a task scores it exactly as it
would score a rollout under `vf-eval` (`await task.score(trace)`)."""

from __future__ import annotations

from typing import Any

import verifiers.v1 as vf
from verifiers.v1.graph import MessageNode
from verifiers.v1.state import state_cls
from verifiers.v1.trace import AgentInfo, TraceTask
from verifiers.v1.types import ToolCall

from sv_shared.sft import chat_messages


def _turn_message(turn: dict[str, Any]) -> tuple[Any, bool]:
    """A stored tool-calling turn as a verifiers message (and whether the model sampled it)."""
    if turn["role"] == "user":  # the other side of a dialogue
        return vf.UserMessage(content=str(turn.get("content") or "")), False
    if turn["role"] == "tool":
        return vf.ToolMessage(
            tool_call_id=turn.get("tool_call_id") or "", content=str(turn.get("content") or ""), name=turn.get("name")
        ), False
    calls = [
        ToolCall(
            id=call.get("id") or "",
            name=str((call.get("function") or {}).get("name")),
            arguments=str((call.get("function") or {}).get("arguments") or ""),
        )
        for call in turn.get("tool_calls") or []
    ]
    return vf.AssistantMessage(content=turn.get("content"), tool_calls=calls or None), True


def completion_trace(
    task: vf.Task, completion: str | None, model: str | None = None, turns: list[dict[str, Any]] | None = None
) -> vf.Trace:
    """A completed trace: the prompt messages, the `turns` as the runner stores them
    (assistant tool calls and tool results; a dialogue's assistant and user turns), then
    `completion` as the final model-sampled assistant turn (None: `turns` already hold
    the whole conversation, as for a dialogue)."""
    nodes: list[MessageNode] = []
    for message in chat_messages(task):
        cls = vf.SystemMessage if message["role"] == "system" else vf.UserMessage
        nodes.append(MessageNode(parent=len(nodes) - 1 if nodes else None, message=cls(content=message["content"])))
    for turn in turns or ():
        message, sampled = _turn_message(turn)
        nodes.append(MessageNode(parent=len(nodes) - 1, message=message, sampled=sampled))
    if completion is not None:
        nodes.append(MessageNode(parent=len(nodes) - 1, message=vf.AssistantMessage(content=completion), sampled=True))
    trace = vf.Trace(
        task=TraceTask(type=type(task).__name__, data=task.data, key=task.key, hash=task.hash),
        state=state_cls(type(task))(),  # the task's own State subclass, as a rollout has
        agent=AgentInfo(config=vf.AgentConfig(model=model) if model else vf.AgentConfig()),
        nodes=nodes,
        is_completed=True,
        ok=True,
    )
    trace.stop("agent_completed")
    return trace
