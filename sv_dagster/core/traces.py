"""Turn one model reply into a verifiers v1 `Trace`, so a task scores it exactly as it
would score a rollout under `vf-eval` (`await task.score(trace)`)."""

from __future__ import annotations

import verifiers.v1 as vf
from verifiers.v1.graph import MessageNode
from verifiers.v1.state import state_cls
from verifiers.v1.trace import AgentInfo, TraceTask


def chat_messages(task: vf.Task) -> list[dict[str, str]]:
    """OpenAI chat messages for a single-turn task: system prompt (if any) + user prompt."""
    messages = []
    if task.data.system_prompt:
        messages.append({"role": "system", "content": task.data.system_prompt})
    messages.append({"role": "user", "content": task.data.prompt_text})
    return messages


def completion_trace(task: vf.Task, completion: str, model: str | None = None) -> vf.Trace:
    """A completed single-turn trace: the prompt messages, then `completion` as the
    model-sampled assistant turn."""
    nodes: list[MessageNode] = []
    for message in chat_messages(task):
        cls = vf.SystemMessage if message["role"] == "system" else vf.UserMessage
        nodes.append(MessageNode(parent=len(nodes) - 1 if nodes else None, message=cls(content=message["content"])))
    nodes.append(
        MessageNode(parent=len(nodes) - 1, message=vf.AssistantMessage(content=completion), sampled=True)
    )
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
