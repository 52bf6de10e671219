"""The environments' own rewards as TRL reward functions, through one adapter.

A completion sampled during GRPO is scored exactly as an eval scores a reply: the task is
rebuilt from the environment's taskset (same dataset row, same reward TOML), the reply is
wrapped in a verifiers trace and `await task.score(trace)` computes every reward component
and the weighted total with the environment's weights (or an experiment's overrides).
Dialogue environments play the sampled turn into the conversation first: E5's target
answers the attack (the rule defender unless another counterpart is given), E6's earlier
turns come from the row.

A completion whose scoring raises is recorded (`errors`) and scored 0; the run goes on,
and the stage fails at its end when such completions exceed `max_scoring_error_rate`.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sv_dagster.core.envs import ENVS, env_by_id


@dataclass
class ScoringError:
    env: str
    task_key: str
    completion: str
    error: str

    def as_dict(self) -> dict[str, Any]:
        return {
            "env": self.env,
            "task_key": self.task_key,
            "completion": self.completion[:500],
            "error": self.error[:1000],
        }


class _LoopThread:
    """One event loop in a thread for all scoring: the tool scanners batch concurrent
    callers per event loop, and TRL calls reward functions synchronously."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="sv-reward-loop", daemon=True)
        self.thread.start()

    def run(self, coro: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result()


@dataclass
class EnvRewardAdapter:
    """TRL-style reward function over one or more environments' tasks.

    `task_files` maps env short name -> the JSONL of that env's tasks (the rows `sft_data`
    copied); `reward_configs` optional reward TOML per env (ablations)."""

    task_files: dict[str, Path]
    reward_configs: dict[str, Path | None] = field(default_factory=dict)
    counterpart: Any = None
    """E5's target: an async chat function (messages -> text); None: the rule defender."""
    log_metric: Callable[[str, float], None] | None = None
    errors: list[ScoringError] = field(default_factory=list)
    scored: int = 0
    tool_calls_made: int = 0
    """Tool calls executed during rollouts (tool-calling GRPO)."""
    tasks: dict[tuple[str, str], Any] = field(init=False)

    def __post_init__(self) -> None:
        self.tasks = {}
        for env_short, path in self.task_files.items():
            env = ENVS[env_short]
            for task in env.load_tasks(Path(path), self.reward_configs.get(env_short)):
                self.tasks[(env_short, task.key)] = task
        self._loop = _LoopThread()
        self.__name__ = "env_reward"  # TRL logs rewards under the function's name

    def weights(self, env_short: str) -> dict[str, float]:
        return dict(ENVS[env_short].reward_settings(self.reward_configs.get(env_short)).weights)

    async def target(self, env_short: str) -> Any:
        """The counterpart a dialogue of `env_short` talks to: the given one, else the rule baseline of the other side."""
        if self.counterpart is not None:
            return self.counterpart
        counterpart_env = ENVS[env_short].counterpart_env
        if counterpart_env is None:  # E6: its task scripts the other side
            return None
        rule_reply = env_by_id(counterpart_env).heuristic

        async def rule_counterpart(messages: list[dict[str, Any]]) -> str:
            return rule_reply(messages)

        return rule_counterpart

    def run(self, coro: Any) -> Any:
        """Run a coroutine on the scoring loop (tool calls during rollouts use it too)."""
        return self._loop.run(coro)

    async def score_one(
        self,
        env_short: str,
        task_key: str,
        completion: str,
        turns_before: list[dict[str, Any]] | None,
        tool_turns: list[dict[str, Any]] | None = None,
    ) -> dict[str, Any]:
        """`tool_turns`: the rollout's tool calls and results before `completion`."""
        from sv_dagster.core.evals.runner import is_dialogue, score_completion
        from sv_shared.sft import chat_messages

        task = self.tasks.get((env_short, task_key))
        if task is None:
            raise KeyError(f"no {env_short} task {task_key!r} in {self.task_files.get(env_short)}")
        if not is_dialogue(task):
            scores, _, total = await score_completion(task, completion, None, tool_turns or None)
            return {"total": total, "scores": scores}
        prompt = chat_messages(task)
        conversation = [*prompt, *(turns_before or []), {"role": "assistant", "content": completion}]
        if ENVS[env_short].counterpart_env is not None:  # E5: the target answers the attack
            answer, _ = await task.respond(conversation, await self.target(env_short))
            if answer is not None:
                conversation.append({"role": "user", "content": answer})
        scores, _, total = await score_completion(task, completion, None, conversation[len(prompt) :])
        return {"total": total, "scores": scores}

    async def score_dialogue(self, env_short: str, task_key: str, dialogue: list[dict[str, Any]]) -> dict[str, Any]:
        """A conversation a dialogue rollout played (every turn after the task's prompt),
        scored as the eval runner scores a played dialogue."""
        from sv_dagster.core.evals.runner import score_completion

        task = self.tasks.get((env_short, task_key))
        if task is None:
            raise KeyError(f"no {env_short} task {task_key!r} in {self.task_files.get(env_short)}")
        scores, _, total = await score_completion(task, "", None, dialogue)
        return {"total": total, "scores": scores}

    async def _score_all(self, items: list[tuple[str, str, str, Any]]) -> list[float]:
        """`items`: (env, task key, the completion's text, the coroutine that scores it)."""

        async def guarded(env_short: str, key: str, text: str, scoring: Any) -> float:
            try:
                result = await scoring
            except Exception as exc:  # one bad completion or verifier bug never stops training
                self.errors.append(ScoringError(env_short, key, text, f"{type(exc).__name__}: {exc}"))
                return 0.0
            for name, value in result["scores"].items():
                if self.log_metric is not None and value is not None:
                    self.log_metric(f"{env_short}/{name}", float(value))
            total = result["total"]
            return float(total) if total is not None and total == total else 0.0

        return list(await asyncio.gather(*(guarded(*item) for item in items)))

    def __call__(
        self,
        prompts: list[Any],
        completions: list[Any],
        task_key: list[str],
        env: list[str],
        turns_before: list[Any] | None = None,
        log_metric: Callable[..., None] | None = None,
        dialogue: list[Any] | None = None,
        dialogue_task: list[str] | None = None,
        **_: Any,
    ) -> list[float | None]:  # TRL's reward-function type; every entry is a float
        """`dialogue`, `dialogue_task`: the conversations dialogue rollouts played and the
        task each played ("env/task_key"), scored in place of the completions."""
        if log_metric is not None:
            self.log_metric = log_metric

        async def score() -> list[float]:  # the coroutines are made on the loop that runs them
            if dialogue is not None and dialogue_task is not None:
                played = [name.split("/", 1) for name in dialogue_task]
                items = [
                    (e, key, json.dumps(turns)[:2000], self.score_dialogue(e, key, turns))
                    for (e, key), turns in zip(played, dialogue)
                ]
            else:
                split = [conversation_turns(c) if isinstance(c, list) else (str(c), []) for c in completions]
                befores = turns_before or [None] * len(split)
                items = [
                    (e, key, text, self.score_one(e, key, text, before, turns))
                    for e, key, (text, turns), before in zip(env, task_key, split, befores)
                ]
            return await self._score_all(items)

        rewards = self._loop.run(score())
        self.scored += len(rewards)
        return rewards


def conversation_turns(completion: list[dict[str, Any]]) -> tuple[str, list[dict[str, Any]]]:
    """A TRL completion as messages (with tool calling: assistant turns with `tool_calls`,
    tool results, a last assistant reply) as (final reply, the turns before it) in the eval
    runner's stored shape. A rollout that ended on a tool result has no final reply ("")."""
    turns = []
    for message in completion:
        if message.get("role") == "assistant" and message.get("tool_calls"):
            calls = [
                {
                    "id": call.get("id") or f"call_{i}",
                    "type": "function",
                    "function": {
                        "name": (call.get("function") or {}).get("name"),
                        "arguments": _arguments_text((call.get("function") or {}).get("arguments")),
                    },
                }
                for i, call in enumerate(message["tool_calls"])
            ]
            turns.append({"role": "assistant", "content": message.get("content") or "", "tool_calls": calls})
        else:
            turns.append({k: v for k, v in message.items() if k in ("role", "content", "name", "tool_call_id")})
    if turns and turns[-1]["role"] == "assistant" and not turns[-1].get("tool_calls"):
        return str(turns[-1].get("content") or ""), turns[:-1]
    return "", turns


def _arguments_text(arguments: Any) -> str:
    return arguments if isinstance(arguments, str) else json.dumps(arguments if arguments is not None else {})
