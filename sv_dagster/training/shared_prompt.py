"""GRPO whose group of completions shares its prompt in the compute, not only in the data.

TRL's GRPOTrainer repeats each prompt once per completion (`num_generations` rows) and runs
every row whole: the prompt is prefilled G times when sampling and forwarded (and
back-propagated) G times when scoring the completions' log-probabilities. On E1 a prompt is
~250 tokens and a completion ~32, so ~7/8 of that work recomputes the same prompt. Here:

- sampling: the rows' common leading tokens (the whole prompt, for one prompt per step; the
  system prompt across several) are computed once and their cache repeated for every row
  (`sv_dagster.core.models.batching`), as the model server batches an eval's requests;
- scoring: each distinct prompt but its last token is forwarded once, with gradients, its
  cache repeated to the rows that share it, and only the last prompt token and the
  completion are forwarded per row. Gradients reach the shared prompt's computation through
  the cache, summed over its rows.

The log-probabilities are those of a whole-row forward and of TRL's own path up to float
rounding (a test compares them, and their gradients, on a small model), positions included:
like TRL's forward, the rows take positions 0..T-1 whatever their left padding. Anything else (vision inputs, vLLM, continuous batching,
a MoE aux loss, rows that share nothing) goes to TRL's own path.
"""

from __future__ import annotations

from typing import Any

from trl import GRPOTrainer


def prompt_groups(prompt_ids: Any, prompt_mask: Any) -> tuple[list[int], Any] | None:
    """(the first row of each distinct prompt, each row's group number), or None when no two
    rows share a prompt (nothing to save)."""
    import torch

    firsts: list[int] = []
    group_of_row = []
    for row in range(prompt_ids.size(0)):
        for group, first in enumerate(firsts):
            if torch.equal(prompt_ids[row], prompt_ids[first]) and torch.equal(prompt_mask[row], prompt_mask[first]):
                group_of_row.append(group)
                break
        else:
            firsts.append(row)
            group_of_row.append(len(firsts) - 1)
    if len(firsts) == prompt_ids.size(0):
        return None
    return firsts, torch.tensor(group_of_row, device=prompt_ids.device)


class SharedPromptGRPOTrainer(GRPOTrainer):
    """`trl.GRPOTrainer` with a group's prompt computed once when sampling and scoring."""

    shared_prompt_rows = 0
    """Rows scored through a shared prompt so far (the rest went through TRL's own path)."""
    shared_generation_rows = 0
    """Rows sampled after a shared prefix computed once."""

    def _get_per_token_logps_and_entropies(
        self,
        model,
        input_ids,
        attention_mask,
        logits_to_keep,
        batch_size=None,
        compute_entropy=False,
        compute_aux_loss=False,
        **multimodal,
    ):
        if compute_aux_loss or any(value is not None for value in multimodal.values()):
            return super()._get_per_token_logps_and_entropies(
                model,
                input_ids,
                attention_mask,
                logits_to_keep,
                batch_size,
                compute_entropy,
                compute_aux_loss,
                **multimodal,
            )
        import torch

        batch_size = batch_size or input_ids.size(0)
        all_logps, all_entropies = [], []
        for start in range(0, input_ids.size(0), batch_size):
            ids, mask = input_ids[start : start + batch_size], attention_mask[start : start + batch_size]
            width = ids.size(1) - logits_to_keep  # the prompt's columns (left-padded alike)
            groups = prompt_groups(ids[:, :width], mask[:, :width]) if width > 1 else None
            if groups is None:
                logps, entropies, _ = super()._get_per_token_logps_and_entropies(
                    model, ids, mask, logits_to_keep, None, compute_entropy
                )
            else:
                logps, entropies = self._shared_prompt_logps(
                    model, ids, mask, width, logits_to_keep, groups, compute_entropy
                )
                self.shared_prompt_rows += ids.size(0)
            all_logps.append(logps)
            if compute_entropy:
                all_entropies.append(entropies)
        entropies = torch.cat(all_entropies, dim=0) if compute_entropy else None
        return torch.cat(all_logps, dim=0), entropies, None

    def _shared_prompt_logps(self, model, ids, mask, width, logits_to_keep, groups, compute_entropy):
        from transformers import DynamicCache

        firsts, group_of_row = groups
        config = getattr(model, "config", None) or self.model.config
        cache = DynamicCache(config=config)
        with self.accelerator.autocast():
            # Every distinct prompt but its last token, once; only the cache is kept.
            model(
                input_ids=ids[firsts, : width - 1],
                attention_mask=mask[firsts, : width - 1],
                past_key_values=cache,
                use_cache=True,
                logits_to_keep=1,
            )
            cache.batch_select_indices(group_of_row)
            # Per row: the prompt's last token (whose logits score the first completion token)
            # and the completion, positions continuing after the cache as in TRL's forward.
            outputs = model(input_ids=ids[:, width - 1 :], attention_mask=mask, past_key_values=cache, use_cache=True)
        # The log-softmax of the tail's logits: a row's completion positions only.
        logits = outputs.logits[:, :-1].float() / self.temperature
        logps_all = logits.log_softmax(dim=-1)
        logps = logps_all.gather(-1, ids[:, width:, None]).squeeze(-1)
        entropy = -(logps_all.exp() * logps_all).sum(-1) if compute_entropy else None
        return logps[:, -logits_to_keep:], entropy

    def _generate_single_turn(self, prompt_ids, images, multimodal_fields, num_generations, has_tool_images=False):
        if self.use_vllm or self.use_transformers_continuous_batching or images is not None or multimodal_fields:
            return super()._generate_single_turn(
                prompt_ids, images, multimodal_fields, num_generations, has_tool_images
            )
        import torch
        from trl.models.utils import unwrap_model_for_generation

        from sv_dagster.core.models.batching import pad_batch, prefill_shared, shared_prefix

        device = self.accelerator.device
        rows = [torch.tensor(ids, device=device) for ids in prompt_ids]
        masks = [torch.ones_like(row) for row in rows]
        with (
            unwrap_model_for_generation(
                self.model_wrapped,
                self.accelerator,
                gather_deepspeed3_params=self.args.ds3_gather_for_generation,
                generation_kwargs=self.generation_kwargs,
                gradient_checkpointing_kwargs=self.args.gradient_checkpointing_kwargs,
            ) as unwrapped_model,
            torch.no_grad(),
        ):
            # Any shared token is worth sharing here: a group shares its whole prompt.
            shared = shared_prefix(rows, unwrapped_model, self.generation_config, minimum=1)
            if not shared:
                return super()._generate_single_turn(
                    prompt_ids, images, multimodal_fields, num_generations, has_tool_images
                )
            input_ids, attention_mask = pad_batch(rows, masks, self._tokenizer.pad_token_id, shared)
            cache = prefill_shared(unwrapped_model, rows[0][:shared], len(rows))
            sequences = unwrapped_model.generate(
                input_ids=input_ids,
                attention_mask=attention_mask,
                past_key_values=cache,
                generation_config=self.generation_config,
            )
        self.shared_generation_rows += len(rows)
        completions = sequences[:, input_ids.size(1) :]
        ends = torch.tensor(self.eos_token_ids, device=completions.device)
        completion_ids = []
        for row in completions.cpu():
            at = torch.isin(row, ends.cpu()).nonzero()
            completion_ids.append(row[: int(at[0]) + 1].tolist() if len(at) else row.tolist())
        return completion_ids, None
