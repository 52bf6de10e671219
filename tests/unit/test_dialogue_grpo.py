"""Dialogue GRPO rollouts: the model plays E5's and E6's whole conversations against the
counterpart, as the eval runner plays them; only the model's own tokens are trained
(`env_mask`), and the reward scores the conversation that was played.

The rollout mechanics are checked with a scripted model (its turns are known, so the ids
can be compared with the chat template's rendering of the conversation); one real GRPO
step with the embedded tiny model checks that TRL takes the rollouts and scores them."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from sv_dagster.core.envs import ENVS
from sv_dagster.training.config import load_training_config
from sv_dagster.training.dialogue_rollouts import DialogueRollouts, dialogue_rows, is_dialogue_stage
from sv_dagster.training.rewards import EnvRewardAdapter
from sv_dagster.training.sft_data import build_examples, sft_rows, write_rows
from sv_dagster.training.stages import StageSpec, run_stage
from tests.support.tiny_shapes import small_tiny

SMALL = small_tiny(max_position_embeddings=2048)


def _setup(env: str, folder: Path) -> dict:
    tasks_path = folder / f"{env}.jsonl"
    ENVS[env].package.write_bundled_dataset(tasks_path)
    adapter = EnvRewardAdapter(task_files={env: tasks_path})
    tasks = list(ENVS[env].load_tasks(tasks_path, None))
    examples = build_examples(env, tasks)
    rows = [e.grpo_row() for e in examples if e.task_key]
    write_rows(folder / "grpo.jsonl", rows)
    write_rows(folder / "sft.jsonl", sft_rows(examples, tasks))
    return {"adapter": adapter, "rows": rows, "tasks_path": tasks_path, "folder": folder}


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory):
    from transformers import AutoTokenizer

    from sv_dagster.training.tiny import TinySpec, build_tiny_model

    folder = tmp_path_factory.mktemp("tok")
    build_tiny_model(["an attack", "a refusal", "Sure, here is"] * 4, folder, TinySpec(vocab_size=300))
    return AutoTokenizer.from_pretrained(folder)


class ScriptedModel:
    """Writes `turn {n} of rollout {i}` as each turn (n from 1), with its end-of-turn token,
    except rollout 1's second turn, cut off before it (as at max_new_tokens)."""

    def __init__(self, tokenizer) -> None:
        self.tokenizer, self.training, self.calls = tokenizer, True, 0

    def eval(self):
        self.training = False

    def train(self, mode: bool = True):
        self.training = mode

    def generate(self, input_ids, attention_mask, **_):
        import torch

        self.calls += 1
        turns = []
        for i in range(input_ids.shape[0]):
            ids = self.tokenizer(f"turn {self.calls} of rollout {i}", add_special_tokens=False)["input_ids"]
            turns.append(ids if (i, self.calls) == (1, 2) else [*ids, self.tokenizer.eos_token_id])
        width = max(len(t) for t in turns)
        pad = self.tokenizer.pad_token_id
        return torch.cat([input_ids, torch.tensor([t + [pad] * (width - len(t)) for t in turns])], dim=1)


def _trainer(model):
    return SimpleNamespace(model=model, accelerator=SimpleNamespace(unwrap_model=lambda m: m))


def test_e5_rollouts_play_the_dialogue_against_the_target_and_mask_its_turns(tokenizer, tmp_path: Path):
    e5 = _setup("e5", tmp_path)
    adapter = e5["adapter"]
    assert is_dialogue_stage(adapter)
    rows = dialogue_rows(e5["rows"])
    rollouts = DialogueRollouts(adapter, tokenizer, rows, max_new_tokens=16, temperature=1.0)
    prompts = [rows[0]["prompt"], rows[1]["prompt"]]
    model = ScriptedModel(tokenizer)
    out = rollouts(prompts, _trainer(model))
    assert out["dialogue_task"] == [f"e5/{rows[0]['task_key']}", f"e5/{rows[1]['task_key']}"]
    target = adapter.run(adapter.target("e5"))
    for i, (prompt, dialogue) in enumerate(zip(prompts, out["dialogue"])):
        task = adapter.tasks[("e5", rows[i]["task_key"])]
        attacks = [m["content"] for m in dialogue if m["role"] == "assistant"]
        assert attacks == [f"turn {n} of rollout {i}" for n in range(1, len(attacks) + 1)]
        assert 1 <= len(attacks) <= task.max_turns
        # Each answer is the rule defender's reply to the attack, as the task's respond gives it.
        for n, answer in enumerate(m["content"] for m in dialogue if m["role"] == "user"):
            view = task.target_messages([*prompt, *dialogue[: 2 * n + 1]])
            assert answer == adapter.run(target(view))
        # The ids are the chat template's rendering of the played turns after the prompt; the
        # target's turns (and the end of a turn the model was cut off in) are masked out.
        ids, mask = out["completion_ids"][i], out["env_mask"][i]
        assert (
            out["prompt_ids"][i]
            == tokenizer(
                tokenizer.apply_chat_template(prompt, tokenize=False, add_generation_prompt=True),
                add_special_tokens=False,
            )["input_ids"]
        )
        played = dialogue[: max(j for j, m in enumerate(dialogue) if m["role"] == "assistant") + 1]
        rendered = tokenizer.apply_chat_template([*prompt, *played], tokenize=False)
        opening = tokenizer.apply_chat_template(prompt, tokenize=False, add_generation_prompt=True)
        assert tokenizer.decode(ids).removesuffix("<|im_end|>") == rendered[len(opening) :].removesuffix("<|im_end|>\n")
        own = tokenizer.decode([t for t, m in zip(ids, mask) if m], skip_special_tokens=True)
        assert own == "".join(attacks) and len(ids) == len(mask)
        assert all(answer["content"] in tokenizer.decode(ids) for answer in played if answer["role"] == "user")
    assert rollouts.turns_played == sum(1 for dialogue in out["dialogue"] for m in dialogue if m["role"] == "assistant")
    # The reward is the task's own score of the conversation played, as an eval scores it.
    rewards = adapter(
        [None] * 2,
        [None] * 2,
        task_key=["x", "x"],
        env=["e5", "e5"],
        **{k: out[k] for k in ("dialogue", "dialogue_task")},
    )
    expected = [adapter.run(adapter.score_dialogue("e5", rows[i]["task_key"], out["dialogue"][i])) for i in (0, 1)]
    assert rewards == [e["total"] for e in expected] and not adapter.errors


def test_e6_rollouts_answer_every_scripted_turn_from_the_first(tokenizer, tmp_path: Path):
    e6 = _setup("e6", tmp_path)
    rows = dialogue_rows(e6["rows"])
    assert len(rows) == len({r["task_key"] for r in e6["rows"]})  # one row per task
    by_key = {r["task_key"]: r for r in rows}
    task_key = next(k for (_, k), t in e6["adapter"].tasks.items() if t.max_turns >= 2 and k in by_key)
    task = e6["adapter"].tasks[("e6", task_key)]
    prompt = by_key[task_key]["prompt"]
    assert prompt[-1] == {"role": "user", "content": task.user_turns[0]}  # no earlier turns from the row
    out = DialogueRollouts(e6["adapter"], tokenizer, rows, max_new_tokens=16, temperature=1.0)(
        [prompt], _trainer(ScriptedModel(tokenizer))
    )
    (dialogue,) = out["dialogue"]
    assert [m["content"] for m in dialogue if m["role"] == "user"] == list(task.user_turns[1:])
    assert sum(m["role"] == "assistant" for m in dialogue) == task.max_turns


def test_one_grpo_step_plays_dialogues_and_trains_on_them(tmp_path: Path):
    """E5 with the embedded tiny model: TRL takes the played dialogues, every rollout is
    scored, and no reward errors."""
    e5 = _setup("e5", tmp_path)
    config = load_training_config(
        "e5",
        overrides={
            "model": {"base": "tiny", "name": "tiny", "tiny": SMALL},
            "grpo": {"max_steps": 1, "prompts_per_step": 2, "num_generations": 2, "max_completion_length": 12},
        },
    )

    def spec(stage: str, out: Path, model_dir: Path | None, data: dict[str, str]) -> StageSpec:
        return StageSpec(
            stage=stage,
            env="e5",
            config=config.model_dump(),
            out_dir=str(out),
            model_dir=str(model_dir) if model_dir else None,
            data=data,
        )

    base = tmp_path / "base"
    run_stage(spec("base", base, None, {"train": str(tmp_path / "sft.jsonl")}), lambda *_: None)
    data = {"train": str(tmp_path / "grpo.jsonl"), "tasks/e5": str(e5["tasks_path"])}
    record = run_stage(spec("grpo", tmp_path / "grpo", base, data), lambda *_: None)
    assert record["steps"] == 1 and record["n_reward_errors"] == 0 and record["completions_scored"] == 4
    assert record["dialogue_turns_played"] >= 4  # each of the 4 rollouts wrote at least its first attack
    single = config.model_copy(update={"grpo": config.grpo.model_copy(update={"dialogues": False})})
    plain = run_stage(
        StageSpec(
            stage="grpo",
            env="e5",
            config=single.model_dump(),
            out_dir=str(tmp_path / "single"),
            model_dir=str(base),
            data=data,
        ),
        lambda *_: None,
    )
    assert plain["dialogue_turns_played"] is None and plain["completions_scored"] == 4
    assert json.loads(json.dumps(record["reward_weights"]))["e5"]
