"""GRPO with a group's prompt computed once (sv_dagster/training/shared_prompt.py) gives what
TRL's own path gives, on a small model built here: the completions' log-probabilities and
their gradients (full fine-tuning and LoRA), and greedy completions; rows that share nothing
go through TRL's path."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from sv_dagster.training.shared_prompt import SharedPromptGRPOTrainer, prompt_groups
from sv_dagster.training.tiny import TinySpec, build_tiny_model
from tests.support.tiny_shapes import small_tiny

TEXTS = [f"flow {i} proto tcp port {1000 + i} bytes {i * 37} label Benign Malicious" for i in range(200)]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("tiny")
    build_tiny_model(TEXTS, folder, TinySpec(**{**small_tiny(), "num_hidden_layers": 2}))
    return folder


def trainer(folder: Path, tmp: Path, lora: bool = False) -> SharedPromptGRPOTrainer:
    from datasets import Dataset
    from peft import LoraConfig
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOConfig

    tokenizer = AutoTokenizer.from_pretrained(folder)
    tokenizer.padding_side = "left"
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32)
    args = GRPOConfig(
        output_dir=str(tmp),
        use_cpu=True,
        bf16=False,  # as the training stages set it on a CPU (TRL's default autocasts to bfloat16)
        per_device_train_batch_size=4,
        num_generations=4,
        max_completion_length=6,
        report_to=[],
        disable_dropout=True,
    )
    peft = LoraConfig(r=4, lora_alpha=8, lora_dropout=0.0, target_modules="all-linear") if lora else None
    return SharedPromptGRPOTrainer(
        model=model,
        reward_funcs=lambda completions, **kw: [0.0] * len(completions),
        args=args,
        train_dataset=Dataset.from_list([{"prompt": "flow 1 proto tcp"}] * 4),
        processing_class=tokenizer,
        peft_config=peft,
    )


def batch(tokenizer, prompts: list[str], completions: list[str], pad: int):
    """Left-padded prompts and right-padded completions, as TRL lays them out."""
    p = [tokenizer(text)["input_ids"] for text in prompts]
    c = [tokenizer(text)["input_ids"] for text in completions]
    width, length = max(map(len, p)), max(map(len, c))
    ids = torch.tensor([[pad] * (width - len(a)) + a + b + [pad] * (length - len(b)) for a, b in zip(p, c)])
    mask = torch.tensor(
        [[0] * (width - len(a)) + [1] * (len(a) + len(b)) + [0] * (length - len(b)) for a, b in zip(p, c)]
    )
    return ids, mask, length


def whole_rows(t, model, ids, mask, keep, compute_entropy=False):
    """The reference: every row forwarded whole, the exact log-softmax of its logits."""
    logits = model(input_ids=ids, attention_mask=mask).logits[:, -keep - 1 : -1].float() / t.temperature
    return logits.log_softmax(-1).gather(-1, ids[:, -keep:, None]).squeeze(-1), None, None


def paths(t: SharedPromptGRPOTrainer, ids, mask, keep):
    """{path: (log-probs, gradient of their masked sum)} for ours, whole rows, and TRL's."""
    from trl import GRPOTrainer

    model, results = t.model, {}
    for name, method in (
        ("shared", SharedPromptGRPOTrainer._get_per_token_logps_and_entropies),
        ("whole", whole_rows),
        ("trl", GRPOTrainer._get_per_token_logps_and_entropies),
    ):
        model.zero_grad()
        logps, _, _ = method(t, model, ids, mask, keep)
        (logps * mask[:, -keep:]).sum().backward()
        grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.requires_grad and p.grad is not None}
        results[name] = (logps.detach(), grads)
    return results


@pytest.mark.parametrize("lora", [False, True])
def test_log_probs_and_gradients_equal_whole_rows_for_grouped_prompts(tiny: Path, tmp_path: Path, lora: bool) -> None:
    t = trainer(tiny, tmp_path, lora)
    pad = t.processing_class.pad_token_id
    prompts = ["flow 1 proto tcp port 1001"] * 3 + ["flow 7 proto tcp"] * 3  # two groups, padded differently
    completions = ["label Benign", "label Malicious bytes 37", "Benign", "label", "Malicious Malicious", "bytes 259"]
    ids, mask, keep = batch(t.processing_class, prompts, completions, pad)
    before = t.shared_prompt_rows
    results = paths(t, ids, mask, keep)
    assert t.shared_prompt_rows == before + 6  # the shared path ran
    scored = mask[:, -keep:].bool()
    (shared, shared_grads), (whole, whole_grads) = results["shared"], results["whole"]
    assert torch.allclose(shared[scored], whole[scored], atol=1e-5)
    assert shared_grads.keys() == whole_grads.keys() and shared_grads
    for name in whole_grads:
        assert torch.allclose(shared_grads[name], whole_grads[name], atol=1e-5, rtol=1e-4), name
    # TRL's own path (a fused, chunked LM head) gives the same numbers and gradients.
    trl, trl_grads = results["trl"]
    assert torch.allclose(trl[scored], whole[scored], atol=1e-5)
    for name in whole_grads:
        assert torch.allclose(trl_grads[name], whole_grads[name], atol=1e-5, rtol=1e-4), name


def test_rows_that_share_nothing_take_trls_path(tiny: Path, tmp_path: Path) -> None:
    t = trainer(tiny, tmp_path)
    ids, mask, keep = batch(t.processing_class, ["flow 1", "flow 2 proto"], ["Benign", "Malicious"], 0)
    assert prompt_groups(ids[:, :-keep], mask[:, :-keep]) is None
    before = t.shared_prompt_rows
    results = paths(t, ids, mask, keep)
    assert t.shared_prompt_rows == before and torch.equal(results["shared"][0], results["trl"][0])


def test_greedy_completions_equal_trls(tiny: Path, tmp_path: Path) -> None:
    from trl import GRPOTrainer

    t = trainer(tiny, tmp_path)
    t.generation_config.do_sample = False  # greedy: the two paths must write the same tokens
    prompt = t.processing_class("flow 12 proto tcp port 1012 bytes 444 label")["input_ids"]
    ours, _ = t._generate_single_turn([prompt] * 4, None, {}, 4)
    assert t.shared_generation_rows == 4  # the prompt was computed once for the four rows
    theirs, _ = GRPOTrainer._generate_single_turn(t, [prompt] * 4, None, {}, 4)
    assert ours == theirs and all(len(c) >= 1 for c in ours)
