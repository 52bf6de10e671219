"""Tool-calling GRPO: a rollout calls E2's own tool, TRL executes it through the
environment's task, and the reward scores the whole conversation, tool result included.

A random-init model never writes a tool call, so the embedded tiny model is first fitted
(a few seconds, plain PyTorch) to one E2 conversation in which it calls `run_opa` and then
answers; GRPO then samples its rollouts itself: nothing in the step is forced."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sv_dagster.core.envs import ENVS
from sv_dagster.training.config import load_training_config
from sv_dagster.training.rewards import EnvRewardAdapter, conversation_turns
from sv_dagster.training.sft_data import build_examples, sft_rows, write_rows
from sv_dagster.training.stages import StageError, StageSpec, run_stage
from sv_dagster.training.tool_rollouts import environment_factories
from sv_env_config_verification import oracle_reply
from tests.support.tiny_shapes import small_tiny

TASK = "e2-privileged-pod"
SMALL = small_tiny(vocab_size=600, max_position_embeddings=4096)


def _config(**grpo):
    return load_training_config(
        "e2",
        overrides={
            "model": {"base": "tiny", "name": "tiny", "tiny": SMALL},
            "grpo": {
                "max_steps": 1,
                "prompts_per_step": 1,
                "num_generations": 2,
                "max_completion_length": 512,
                "temperature": 0.7,
                **grpo,
            },
        },
    )


def _spec(stage: str, config, out: Path, model_dir: Path | None, data: dict[str, str]) -> StageSpec:
    return StageSpec(
        stage=stage,
        env="e2",
        config=config.model_dump(),
        out_dir=str(out),
        model_dir=str(model_dir) if model_dir else None,
        data=data,
    )


@pytest.fixture(scope="module")
def e2(tmp_path_factory):
    """E2's bundled tasks (OPA only: in-process, fast), the privileged pod's GRPO prompt, and
    the conversation the model is fitted to: call run_opa, read its findings, answer."""
    from sv_env_config_verification.dataset import write_bundled_dataset

    patch = pytest.MonkeyPatch()
    patch.setenv("SV_E2_TOOLS", "opa")
    folder = tmp_path_factory.mktemp("e2-tools")
    tasks_path = folder / "tasks.jsonl"
    write_bundled_dataset(tasks_path)
    tasks = {t.key: t for t in ENVS["e2"].load_tasks(tasks_path, None)}
    (example,) = [e for e in build_examples("e2", list(tasks.values())) if e.task_key == TASK]
    write_rows(folder / "grpo.jsonl", [example.grpo_row()])
    write_rows(folder / "sft.jsonl", [example.sft_row()])
    task = tasks[TASK]
    adapter = EnvRewardAdapter(task_files={"e2": tasks_path})
    yield {
        "folder": folder,
        "tasks": tasks_path,
        "all_tasks": tasks,
        "task": task,
        "prompt": example.grpo_row()["prompt"],
        "adapter": adapter,
    }
    patch.undo()


def test_each_environment_gets_its_tasks_tools_as_methods_with_schemas(e2):
    from transformers.utils import get_json_schema

    factories = environment_factories(e2["adapter"], ["e2"])
    tools = factories["e2"]()
    tools.reset(env="e2", task_key=TASK, prompt=e2["prompt"])
    assert factories["e2"].tool_names == ("run_opa",)
    schema = get_json_schema(tools.run_opa)
    assert schema["function"]["name"] == "run_opa" and "content" in schema["function"]["parameters"]["properties"]
    found = json.loads(tools.run_opa())
    assert found["scanned"] == "task file" and "opa/k8s-privileged-container" in {f["id"] for f in found["findings"]}
    unknown = json.loads(tools._call("run_semgrep", {}))  # a tool this task does not offer
    assert "not available" in unknown["error"]
    assert e2["adapter"].tool_calls_made == 2
    for _ in range(e2["task"].tool_budget - 2):
        json.loads(tools.run_opa())
    over = json.loads(tools.run_opa())  # one call past the task's budget, as in an eval
    assert over["error"] == f"tool budget of {e2['task'].tool_budget} calls used up"
    assert e2["adapter"].tool_calls_made == e2["task"].tool_budget
    tools.reset(env="e2", task_key=TASK, prompt=e2["prompt"])  # the next rollout starts afresh
    assert "findings" in json.loads(tools.run_opa())


def test_a_tool_calling_conversation_is_scored_with_its_tool_results(e2):
    """The reward reads the conversation: the same answer is grounded after a run_opa call
    and ungrounded without one."""
    answer = oracle_reply(e2["task"].data.prompt_text, tools=["opa"])
    scan = e2["adapter"].run(e2["task"].tool_functions()[0]())
    called = [
        {"role": "assistant", "content": "", "tool_calls": [{"function": {"name": "run_opa", "arguments": {}}}]},
        {"role": "tool", "name": "run_opa", "content": scan},
        {"role": "assistant", "content": answer},
    ]
    text, turns = conversation_turns(called)
    assert text == answer and [t["role"] for t in turns] == ["assistant", "tool"]
    assert turns[0]["tool_calls"][0]["function"] == {"name": "run_opa", "arguments": "{}"}
    with_tool = e2["adapter"].run(e2["adapter"].score_one("e2", TASK, text, None, turns))
    without = e2["adapter"].run(e2["adapter"].score_one("e2", TASK, answer, None, None))
    assert with_tool["scores"]["grounding"] == 1.0 and without["scores"]["grounding"] == 0.0
    assert with_tool["total"] > without["total"]


def _fit_tool_caller(model_dir: Path, conversation: list[dict], tools: list) -> None:
    """Fit the tiny model to `conversation` (loss on the assistant's tokens only)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch.manual_seed(0)
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    prompt = tokenizer.apply_chat_template(conversation[:-3], tools=tools, add_generation_prompt=True)
    full = tokenizer.apply_chat_template(conversation, tools=tools)
    prompt_ids = prompt if isinstance(prompt[0], int) else prompt["input_ids"]
    ids = torch.tensor([full if isinstance(full[0], int) else full["input_ids"]])
    labels = ids.clone()
    labels[0, : len(prompt_ids)] = -100
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    model.train()
    for _ in range(300):
        loss = model(input_ids=ids, labels=labels).loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if loss.item() < 0.01:
            break
    assert loss.item() < 0.05
    model.save_pretrained(model_dir)


def test_one_grpo_step_executes_a_tool_call_the_model_wrote(e2, tmp_path: Path):
    folder, task = e2["folder"], e2["task"]
    base = tmp_path / "base"
    run_stage(_spec("base", _config(), base, None, {"train": str(folder / "sft.jsonl")}), lambda *_: None)
    scan = e2["adapter"].run(task.tool_functions()[0]())
    call = {"type": "function", "function": {"name": "run_opa", "arguments": {}}}
    conversation = [
        *e2["prompt"],
        {"role": "assistant", "content": "", "tool_calls": [call]},
        {"role": "tool", "name": "run_opa", "content": scan},
        {"role": "assistant", "content": oracle_reply(task.data.prompt_text, tools=["opa"])},
    ]
    _fit_tool_caller(base, conversation, task.tool_functions())

    metrics: list[dict] = []
    data = {"train": str(folder / "grpo.jsonl"), "tasks/e2": str(e2["tasks"])}
    record = run_stage(
        _spec("grpo", _config(tool_calls=2), tmp_path / "grpo", base, data),
        lambda kind, payload: metrics.append(payload) if kind == "metrics" else None,
    )
    assert record["steps"] == 1 and record["tools_offered"] == {"e2": ["run_opa"]}
    assert record["tool_calls_made"] >= 1 and record["n_reward_errors"] == 0  # TRL ran the model's call
    logged = {k: v for m in metrics for k, v in m.items()}
    assert logged["tools/call_frequency"] > 0 and logged["tools/failure_frequency"] == 0
    # The reward read the tool's result: the findings the answer names are grounded in it.
    assert logged["e2/grounding"] > 0


def test_a_model_whose_template_renders_no_tool_calls_fails_before_any_step(e2, tmp_path: Path):
    from transformers import AutoTokenizer

    folder = e2["folder"]
    base = tmp_path / "base"
    run_stage(_spec("base", _config(), base, None, {"train": str(folder / "sft.jsonl")}), lambda *_: None)
    tokenizer = AutoTokenizer.from_pretrained(base)
    tokenizer.chat_template = (
        "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
        "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
    )
    tokenizer.save_pretrained(base)
    data = {"train": str(folder / "grpo.jsonl"), "tasks/e2": str(e2["tasks"])}
    with pytest.raises(StageError, match=r"grpo.tool_calls is 2 but the chat template of .* renders no tool calls"):
        run_stage(_spec("grpo", _config(tool_calls=2), tmp_path / "grpo", base, data), lambda *_: None)


def test_e2_sft_rows_that_call_tools_are_what_a_tool_calling_rollout_sees(e2):
    """Variant `tool_calls`: each reply calls the task's tools, gets what the tools return to
    a model, then answers as the oracle; the row's prompt lists the tools' schemas exactly as
    TRL lists them in a GRPO prompt."""
    from transformers.utils import get_json_schema

    tasks = e2["all_tasks"]
    examples = build_examples("e2", list(tasks.values()), variant="tool_calls")
    rows = sft_rows(examples, list(tasks.values()))
    factories = environment_factories(e2["adapter"], ["e2"])
    tools = factories["e2"]()
    offered = [get_json_schema(getattr(tools, name)) for name in factories["e2"].tool_names]
    assert len(rows) == len(tasks)
    for example, row in zip(examples, rows):
        task = tasks[example.task_key]
        call, *results, answer = row["completion"]
        functions = task.tool_functions()
        assert [c["function"]["name"] for c in call["tool_calls"]] == [f.__name__ for f in functions] == ["run_opa"]
        assert [r["content"] for r in results] == [e2["adapter"].run(f()) for f in functions]
        assert answer == {"role": "assistant", "content": oracle_reply(task.data.prompt_text, tools=["opa"])}
        assert json.loads(row["tools"]) == offered
    # The embedded model's prompt is one text whether the tools come from an eval's request,
    # TRL's methods in a GRPO rollout, or an SFT row.
    from transformers import AutoTokenizer

    from sv_dagster.core.evals.toolcalls import ToolBox
    from sv_dagster.training.tiny import TinySpec, build_tiny_model

    build_tiny_model(["a manifest"] * 4, e2["folder"] / "template", TinySpec(vocab_size=300))
    tokenizer = AutoTokenizer.from_pretrained(e2["folder"] / "template")
    task = tasks[TASK]
    prompts = {
        source: tokenizer.apply_chat_template(
            rows[0]["prompt"], tools=given, tokenize=False, add_generation_prompt=True
        )
        for source, given in (
            ("eval", ToolBox(task.tool_functions()).schemas()),
            ("grpo", [getattr(tools, name) for name in factories["e2"].tool_names]),
            ("sft", json.loads(rows[0]["tools"])),
        )
    }
    assert (
        prompts["eval"] == prompts["grpo"] == prompts["sft"] and "- run_opa(content): Scan the file" in prompts["sft"]
    )
    plain = sft_rows(build_examples("e2", list(tasks.values())), list(tasks.values()))
    assert all("tools" not in row and len(row["completion"]) == 1 for row in plain)


def test_sft_trains_tool_rows_with_their_tools_and_refuses_a_template_without_them(e2, tmp_path: Path):
    tasks = e2["all_tasks"]
    examples = [e for e in build_examples("e2", list(tasks.values()), variant="tool_calls") if e.task_key == TASK]
    with_tools, without = tmp_path / "tools.jsonl", tmp_path / "plain.jsonl"
    write_rows(with_tools, sft_rows(examples, list(tasks.values())))
    write_rows(without, [{k: v for k, v in row.items() if k != "tools"} for row in sft_rows(examples, [])])
    base = tmp_path / "base"
    run_stage(_spec("base", _config(), base, None, {"train": str(with_tools)}), lambda *_: None)
    one_step = _config().model_copy(update={"sft": _config().sft.model_copy(update={"max_steps": 1})})
    tokens = {
        name: run_stage(_spec("sft", one_step, tmp_path / name, base, {"train": str(path)}), lambda *_: None)["tokens"]
        for name, path in (("tools", with_tools), ("plain", without))
    }
    assert tokens["tools"] > tokens["plain"]  # the tools' schemas were rendered into the prompt it trained on
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(base)
    tokenizer.chat_template = (
        "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    )
    tokenizer.save_pretrained(base)
    with pytest.raises(StageError, match=r"call tools but the chat template of .* renders no tool calls"):
        run_stage(_spec("sft", one_step, tmp_path / "refused", base, {"train": str(with_tools)}), lambda *_: None)
