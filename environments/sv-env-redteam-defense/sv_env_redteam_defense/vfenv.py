"""E6 under verifiers' own `vf-eval`: an `Env` that plays the scripted user turns.

A plain taskset runs one turn under vf-eval; this env keeps the defender's rollout open
and sends each next user turn the task's `respond` gives, as the sv-dagster runner does,
so the trace vf-eval scores is the whole conversation. The defender's seat is `agent`
(`--env.agent.*`, the same flags as a plain eval).
"""

from __future__ import annotations

from typing import Any

import verifiers.v1 as vf


class DefenseEnvConfig(vf.EnvConfig):
    agent: vf.AgentConfig = vf.AgentConfig()
    """The defender: the policy under evaluation."""


class DefenseEnv(vf.Env[DefenseEnvConfig]):
    async def run(self, task: Any, agents: Any) -> None:
        conversation: list[dict[str, Any]] = [
            {"role": "system", "content": task.data.system_prompt or ""},
            {"role": "user", "content": task.data.prompt_text},
        ]
        async with agents.agent.interaction(task) as defender:
            segment = await defender.turn()  # a prompted task: the defender answers the first turn
            for _ in range(task.max_turns):
                if segment.terminated:
                    break
                conversation.append({"role": "assistant", "content": segment.last_reply})
                answer, _ = await task.respond(conversation)
                if answer is None:
                    break
                conversation.append({"role": "user", "content": answer})
                segment = await defender.turn(answer)
