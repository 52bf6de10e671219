"""Batched generation over prompts that share their leading tokens: an eval's prompts share
their system prompt, a GRPO group's completions share their whole prompt. The shared tokens
are computed once and their cache repeated for every row (`prefill_shared`); the rest of each
row is laid out after them (`pad_batch`). The model server (`serving.py`) and the local
backend (`local_backend.py`) generate through `generate_shared`; the training stages' GRPO
(`sv_dagster.training.shared_prompt`) uses the parts.
"""

from __future__ import annotations

from typing import Any

MIN_SHARED_PREFIX = 32
"""Leading tokens all prompts of a batch must share for them to be computed once."""


def shared_prefix(rows: list[Any], model: Any, gen_config: Any, minimum: int = MIN_SHARED_PREFIX) -> int:
    """How many leading tokens every prompt of a batch shares (an eval's prompts share their
    system prompt), when that is worth computing once: at least `minimum` tokens, a
    model whose every layer is attention with the default cache (mid-sequence padding is
    then only masked out). 0 otherwise. At least one token of each prompt is left to run."""
    if len(rows) < 2 or gen_config.cache_implementation is not None or gen_config.use_cache is False:
        return 0
    if not model._supports_default_dynamic_cache():
        return 0
    layer_types = getattr(model.config, "layer_types", None) or ()
    if set(layer_types) - {"full_attention", "sliding_attention"}:
        return 0
    shortest = min(len(row) for row in rows)
    first = rows[0][:shortest]
    shared = shortest
    for row in rows[1:]:
        differ = (row[:shortest] != first).nonzero()
        if len(differ):
            shared = min(shared, int(differ[0]))
    shared = min(shared, shortest - 1)
    return shared if shared >= minimum else 0


def pad_batch(rows: list[Any], masks: list[Any], pad: int, shared: int = 0) -> tuple[Any, Any]:
    """The rows as one batch: left-padded, or with `shared` leading tokens kept in place and
    the rest of each row right-aligned after them (the padding between is masked; position
    ids follow the mask, so every row's tokens keep the positions they have alone)."""
    import torch

    width = shared + max(len(row) - shared for row in rows)
    device = rows[0].device
    input_ids = torch.full((len(rows), width), pad, dtype=rows[0].dtype, device=device)
    attention_mask = torch.zeros((len(rows), width), dtype=masks[0].dtype, device=device)
    for i, (row, mask) in enumerate(zip(rows, masks)):
        input_ids[i, :shared], attention_mask[i, :shared] = row[:shared], mask[:shared]
        tail = len(row) - shared
        input_ids[i, width - tail :], attention_mask[i, width - tail :] = row[shared:], mask[shared:]
    return input_ids, attention_mask


def prefill_shared(model: Any, prefix: Any, rows: int) -> Any:
    """A cache of `prefix` (1-D token ids) computed once and repeated for `rows` rows, for
    `generate(past_key_values=...)` over inputs that begin with it."""
    from transformers import DynamicCache

    cache = DynamicCache(config=model.config)
    # Only the cache is wanted: no logits for the prefix (a vocabulary-wide matmul per token).
    keep = {"logits_to_keep": 1} if model._supports_logits_to_keep() else {}
    model(input_ids=prefix[None, :], past_key_values=cache, use_cache=True, **keep)
    cache.batch_repeat_interleave(rows)
    return cache


def generate_shared(
    model: Any, rows: list[Any], masks: list[Any], pad: int, gen_config: Any, **kwargs: Any
) -> tuple[Any, int]:
    """One `generate` over `rows` (1-D token ids, with their masks), the prefix they share
    computed once when it is worth it (`shared_prefix`); (the sequences, the width every
    row's new tokens start at)."""
    import torch

    with torch.no_grad():
        shared = shared_prefix(rows, model, gen_config)
        input_ids, attention_mask = pad_batch(rows, masks, pad, shared)
        if shared:
            kwargs["past_key_values"] = prefill_shared(model, rows[0][:shared], len(rows))
        sequences = model.generate(
            input_ids=input_ids, attention_mask=attention_mask, generation_config=gen_config, **kwargs
        )
    return sequences, input_ids.shape[1]
