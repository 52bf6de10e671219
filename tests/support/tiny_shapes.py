"""The embedded model's shape the training tests use: one layer, a few thousand
parameters, so a stage trains in seconds."""

from __future__ import annotations


def small_tiny(vocab_size: int = 400, max_position_embeddings: int = 512) -> dict[str, int]:
    return {
        "vocab_size": vocab_size,
        "hidden_size": 32,
        "intermediate_size": 64,
        "num_hidden_layers": 1,
        "num_attention_heads": 2,
        "num_key_value_heads": 1,
        "max_position_embeddings": max_position_embeddings,
    }
