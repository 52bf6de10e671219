"""E5 under verifiers' own `vf-eval`: an `Env` with two seats, the attacker (`agent`, the
policy under evaluation, `--env.agent.*` as in a plain eval) and the `target`
(`--env.target.*`; untrainable). Each attacker message goes to the target through the
task's own `respond`, as in the sv-dagster runner, and the target's reply comes back as the
attacker's next user turn. The null harness cannot add a message to a trace without a turn,
so the last reply is delivered with one more attacker turn, which the task's rewards ignore
(an attack counts once it was answered): vf-eval scores the same conversation, at the price
of one extra attacker call per rollout.
"""

from __future__ import annotations

from typing import Any

import verifiers.v1 as vf


class AttackEnvConfig(vf.EnvConfig):
    agent: vf.AgentConfig = vf.AgentConfig()
    """The attacker: the policy under evaluation."""
    target: vf.AgentConfig = vf.AgentConfig(harness={"id": "null"})
    """The model under attack."""


class AttackEnv(vf.Env[AttackEnvConfig]):
    async def setup(self, agents: Any) -> None:
        agents.target.trainable = False  # the world the attacker is evaluated against

    async def run(self, task: Any, agents: Any) -> None:
        conversation: list[dict[str, Any]] = [
            {"role": "system", "content": task.data.system_prompt or ""},
            {"role": "user", "content": task.data.prompt_text},
        ]
        target_task = vf.Task(
            vf.TaskData(idx=task.data.idx, prompt=None, system_prompt=task.target_messages([])[0]["content"])
        )
        async with agents.agent.interaction(task) as attacker, agents.target.interaction(target_task) as target:

            async def counterpart(messages: list[dict[str, Any]]) -> str:
                segment = await target.turn(str(messages[-1]["content"]))
                return segment.last_reply

            segment = await attacker.turn()
            for _ in range(task.max_turns):
                if segment.terminated:
                    break
                conversation.append({"role": "assistant", "content": segment.last_reply})
                answer, over = await task.respond(conversation, counterpart)
                conversation.append({"role": "user", "content": answer})
                segment = await attacker.turn(answer)
                if over:
                    break
