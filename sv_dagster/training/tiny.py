"""The embedded model: a tiny causal LM built here, with no download.

A byte-level BPE tokenizer is trained with `tokenizers` on the texts the model will see
(the SFT prompts and targets), and a small Qwen3-shape model is initialised at random.
Both are saved as an ordinary Hugging Face folder, so every later stage (TRL's trainers,
the `local` eval backend, a GPU host) loads it with `from_pretrained` like a real model.

The tokenizer keeps each digit a token of its own and never merges across a line break:
field names and phrases become single tokens (short sequences, fast on a CPU) while
numbers stay composable (so the model can read a port or a byte count it never saw).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from sv_dagster.core.models.chat_templates import chatml_with_tools

PAD, BOS_TURN, EOS_TURN = "<|pad|>", "<|im_start|>", "<|im_end|>"
SPECIAL_TOKENS = (PAD, BOS_TURN, EOS_TURN)

# ChatML, as Qwen models use it, with tools and Qwen's tool calls (see chat_templates). The
# end-of-turn token is the tokenizer's eos, so generation stops at the end of the assistant's turn.
CHAT_TEMPLATE = chatml_with_tools()


@dataclass(frozen=True)
class TinySpec:
    """Shape of the embedded model (defaults: ~190k parameters with a 1,024-token vocabulary)."""

    vocab_size: int = 1024
    hidden_size: int = 64
    intermediate_size: int = 256
    num_hidden_layers: int = 2
    num_attention_heads: int = 4
    num_key_value_heads: int = 2
    max_position_embeddings: int = 1024
    seed: int = 0


def train_tokenizer(texts: Iterable[str], vocab_size: int):
    """A byte-level BPE tokenizer trained on `texts`, wrapped for transformers."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(r"\d|\n"), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),  # any text stays encodable
        show_progress=False,
    )
    tokenizer.train_from_iterator(texts, trainer)
    wrapped = PreTrainedTokenizerFast(
        tokenizer_object=tokenizer, pad_token=PAD, eos_token=EOS_TURN, chat_template=CHAT_TEMPLATE
    )
    wrapped.padding_side = "left"  # decoder-only generation pads on the left
    return wrapped


def build_tiny_model(texts: Iterable[str], out_dir: Path, spec: TinySpec = TinySpec()) -> dict[str, Any]:
    """Train the tokenizer on `texts`, initialise the model at random, save both to
    `out_dir`. Returns the facts recorded with the checkpoint."""
    import torch
    from transformers import GenerationConfig, Qwen3Config, Qwen3ForCausalLM

    tokenizer = train_tokenizer(texts, spec.vocab_size)
    # Qwen3's shape (the program's open models); also, transformers maps a qwen2 config to
    # Qwen2's own tokenizer class on load, which would drop this tokenizer's pre-tokenizer.
    config = Qwen3Config(
        # At least the spec's size: a benchmark shape (e.g. Qwen's 151,936) keeps its parameter
        # count even where this data trains fewer merges; the extra rows are never used.
        vocab_size=max(len(tokenizer), spec.vocab_size),
        hidden_size=spec.hidden_size,
        intermediate_size=spec.intermediate_size,
        num_hidden_layers=spec.num_hidden_layers,
        num_attention_heads=spec.num_attention_heads,
        num_key_value_heads=spec.num_key_value_heads,
        head_dim=spec.hidden_size // spec.num_attention_heads,
        max_position_embeddings=spec.max_position_embeddings,
        tie_word_embeddings=True,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
        bos_token_id=None,
    )
    torch.manual_seed(spec.seed)
    model = Qwen3ForCausalLM(config)
    model.generation_config = GenerationConfig(
        eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id, do_sample=False
    )
    out_dir.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out_dir)
    tokenizer.save_pretrained(out_dir)
    facts = {
        "kind": "tiny-random-init",
        "architecture": "Qwen3ForCausalLM",
        "parameters": sum(p.numel() for p in model.parameters()),
        "vocab_size": len(tokenizer),
        **asdict(spec),
    }
    (out_dir / "tiny_spec.json").write_text(json.dumps(facts, indent=2, sort_keys=True) + "\n")
    return facts
