"""Dialogue GRPO rollouts: the model plays a whole conversation of a dialogue environment
(E5's attacker against its target, E6's defender through its attacker's turns), as the
eval runner plays it, and is trained on its own turns only.

TRL's `rollout_func` receives the batch's prompts (each a task's opening messages) and
returns token ids. Here every rollout of the batch advances one turn at a time: one batched
`generate` writes the model's next turn in each open conversation, then the task's own
`respond` gives the counterpart's answer (E5: the target, the reward adapter's counterpart;
E6: the next scripted user turn) and says whether the dialogue is over, up to the task's
`max_turns`. A rollout's completion is the model's turns and the counterpart's turns between
them, as the chat template renders them; `env_mask` marks the model's own tokens (1) and the
counterpart's (0), so the loss never trains the model to write the counterpart's words.
Each conversation goes to the reward adapter beside the ids (`dialogue`), which scores it
with the environment's own `task.score`, as an eval scores a played dialogue.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from typing import Any

from sv_dagster.training.rewards import EnvRewardAdapter

Messages = list[dict[str, Any]]


class DialogueRolloutError(RuntimeError):
    """A prompt whose task cannot be found, or a chat template that does not extend a
    conversation by appending to its rendering."""


def prompt_key(prompt: Messages) -> str:
    return json.dumps([{"role": m.get("role"), "content": m.get("content")} for m in prompt], sort_keys=True)


@dataclass
class _Rollout:
    env: str
    task_key: str
    task: Any
    messages: Messages
    context: list[int]
    """What the model conditions its next turn on: the prompt's ids, then the completion's."""
    prompt_len: int
    completion: list[int] = field(default_factory=list)
    mask: list[int] = field(default_factory=list)
    done: bool = False


class DialogueRollouts:
    """TRL's `rollout_func` for dialogue environments; `rows` are the GRPO rows (prompt,
    env, task_key), by which a prompt finds the task it opens."""

    def __init__(
        self,
        adapter: EnvRewardAdapter,
        tokenizer: Any,
        rows: list[dict[str, Any]],
        *,
        max_new_tokens: int,
        temperature: float,
        top_p: float = 1.0,
    ) -> None:
        self.adapter, self.tokenizer = adapter, tokenizer
        self.max_new_tokens, self.temperature, self.top_p = max_new_tokens, temperature, top_p
        self.tasks: dict[str, tuple[str, str]] = {}
        for row in rows:  # prompts several tasks share: the first row's task is played
            self.tasks.setdefault(prompt_key(row["prompt"]), (row["env"], row["task_key"]))
        self.turns_played = 0
        """Model turns written over the run (each rollout's first turn included)."""

    def __call__(self, prompts: list[Messages], trainer: Any) -> dict[str, Any]:
        rollouts = [self._start(prompt) for prompt in prompts]
        model = trainer.accelerator.unwrap_model(trainer.model)
        for _ in range(max(r.task.max_turns for r in rollouts)):
            active = [r for r in rollouts if not r.done]
            if not active:
                break
            turns = self._generate(model, [r.context for r in active])
            for rollout, turn in zip(active, turns):
                self._write(rollout, turn)
            answers = self.adapter.run(self._answers(active))  # concurrently: a served target batches them
            for rollout, turn, (answer, done) in zip(active, turns, answers):
                self._answer(rollout, turn, answer, done)
        return {
            "prompt_ids": [r.context[: r.prompt_len] for r in rollouts],
            "completion_ids": [r.completion for r in rollouts],
            "logprobs": None,
            "env_mask": [r.mask for r in rollouts],
            "dialogue": [r.messages[len(prompt) :] for r, prompt in zip(rollouts, prompts)],
            "dialogue_task": [f"{r.env}/{r.task_key}" for r in rollouts],
        }

    def _start(self, prompt: Messages) -> _Rollout:
        found = self.tasks.get(prompt_key(prompt))
        if found is None:
            raise DialogueRolloutError(f"no GRPO row opens with the prompt {prompt_key(prompt)[:120]}")
        env, key = found
        ids = self._render(prompt, generation=True)
        return _Rollout(env, key, self.adapter.tasks[(env, key)], list(prompt), list(ids), len(ids))

    def _render(self, messages: Messages, generation: bool) -> list[int]:
        text = self.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=generation)
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def _generate(self, model: Any, contexts: list[list[int]]) -> list[list[int]]:
        """One sampled turn per context (left-padded into one batch), up to and including the
        end-of-turn token when the model writes it."""
        import torch

        pad = self.tokenizer.pad_token_id
        width = max(len(c) for c in contexts)
        ids = torch.tensor([[pad] * (width - len(c)) + c for c in contexts])
        attention = torch.tensor([[0] * (width - len(c)) + [1] * len(c) for c in contexts])
        was_training = model.training
        model.eval()
        try:
            with torch.no_grad():
                out = model.generate(
                    input_ids=ids,
                    attention_mask=attention,
                    do_sample=True,
                    temperature=self.temperature,
                    top_p=self.top_p,
                    max_new_tokens=self.max_new_tokens,
                    pad_token_id=pad,
                    eos_token_id=self.tokenizer.eos_token_id,
                )
        finally:
            model.train(was_training)
        eos, turns = self.tokenizer.eos_token_id, []
        for row in out[:, width:].tolist():
            if eos in row:
                turns.append(row[: row.index(eos) + 1])
                continue
            while row and row[-1] == pad:  # a generate that pads a row it stopped early
                row.pop()
            turns.append(row)
        return turns

    def _write(self, rollout: _Rollout, turn: list[int]) -> None:
        """Append the model's turn (its tokens are the ones trained)."""
        self.turns_played += 1
        rollout.completion += turn
        rollout.mask += [1] * len(turn)
        text = self.tokenizer.decode(turn, skip_special_tokens=True)
        rollout.messages.append({"role": "assistant", "content": text})

    async def _answers(self, rollouts: list[_Rollout]) -> list[tuple[str | None, bool]]:
        """Each task's own answer to its latest turn: (the counterpart's message or None, over)."""
        targets = [await self.adapter.target(r.env) for r in rollouts]
        return list(await asyncio.gather(*(r.task.respond(r.messages, t) for r, t in zip(rollouts, targets))))

    def _answer(self, rollout: _Rollout, turn: list[int], answer: str | None, done: bool) -> None:
        """Append the counterpart's answer (as the template renders it after the model's
        turn) unless the dialogue is over."""
        if answer is not None:
            rollout.messages.append({"role": "user", "content": answer})
        played = sum(1 for m in rollout.messages if m["role"] == "assistant")
        rollout.done = done or answer is None or played >= rollout.task.max_turns
        if rollout.done:
            return
        # The counterpart's tokens: the rendering of the conversation with its answer, past
        # the rendering up to the model's turn (the end of that turn included when the model
        # stopped before writing it).
        before = self.tokenizer.apply_chat_template(rollout.messages[:-1], tokenize=False)
        after = self.tokenizer.apply_chat_template(rollout.messages, tokenize=False, add_generation_prompt=True)
        if not after.startswith(before):
            raise DialogueRolloutError("the chat template does not render a conversation as a prefix of its extension")
        eos = self.tokenizer.eos_token
        closing = before[before.rfind(eos) + len(eos) :] if eos and before.rfind(eos) >= 0 else ""
        wrote_eos = bool(turn) and turn[-1] == self.tokenizer.eos_token_id
        between = ("" if wrote_eos else (eos or "")) + closing + after[len(before) :]
        ids = list(self.tokenizer(between, add_special_tokens=False)["input_ids"])
        rollout.completion += ids
        rollout.mask += [0] * len(ids)
        rollout.context = rollout.context[: rollout.prompt_len] + rollout.completion


def dialogue_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per task, prompted with the task's opening messages only (a row's earlier
    turns are what a dialogue rollout plays itself)."""
    seen, out = set(), []
    for row in rows:
        if (row["env"], row["task_key"]) in seen:
            continue
        seen.add((row["env"], row["task_key"]))
        before = len(row.get("turns_before") or [])
        out.append({**row, "prompt": row["prompt"][: len(row["prompt"]) - before], "turns_before": []})
    return out


def is_dialogue_stage(adapter: EnvRewardAdapter) -> bool:
    """Every task of the stage is a dialogue (E5, E6): its rollouts are played as dialogues."""
    from sv_dagster.core.evals.runner import is_dialogue

    return bool(adapter.tasks) and all(is_dialogue(task) for task in adapter.tasks.values())
