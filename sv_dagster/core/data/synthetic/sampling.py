"""Optional model sampling for the synthetic generators: registry models vary template
rows at each temperature of a sweep.

Each (model, temperature) pair is its own backend (the registry entry with its sampling
temperature replaced), so the request, the response cache key and the recorded
provenance all carry the temperature. Only OpenAI-compatible entries can sample: the
embedded `heuristic`/`oracle` backends are an environment's answerer, not a writer, and a
config naming one fails before any work. Every endpoint is reached once (`preflight`)
before the first request, so an unreachable URL fails the batch up front, naming it.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sv_dagster.core.models.registry import ModelSpec
from sv_shared.errors import UserError

SYSTEM = (
    "You write varied, realistic training data for security research tools. Follow the format you are asked "
    "for exactly and add nothing else."
)


class SamplingConfigError(UserError, ValueError):
    """Seed models that cannot sample (unknown name, embedded backend, bad temperature)."""


def resolve_models(
    names: Sequence[str], registry: dict[str, ModelSpec], temperatures: Sequence[float]
) -> list[ModelSpec]:
    """The registry entries named in `seed_models`, checked before any work."""
    unknown = [name for name in names if name not in registry]
    if unknown:
        raise SamplingConfigError(f"seed_models {unknown} are not in the model registry (known: {sorted(registry)})")
    embedded = [name for name in names if registry[name].backend != "openai"]
    if embedded:
        raise SamplingConfigError(
            f"seed_models {embedded} use an embedded backend; only OpenAI-compatible models can sample"
        )
    bad = [t for t in temperatures if not 0.0 <= t <= 2.0]
    if names and (not temperatures or bad):
        raise SamplingConfigError(f"temperatures must be a non-empty list in [0, 2], got {list(temperatures)}")
    return [registry[name] for name in names]


def at_temperature(spec: ModelSpec, temperature: float) -> ModelSpec:
    return dataclasses.replace(spec, sampling=dataclasses.replace(spec.sampling, temperature=temperature))


@dataclass(frozen=True)
class Sample:
    key: Any
    """The caller's handle for the template row that was varied."""
    model: str
    temperature: float
    text: str | None
    error: str | None


async def _sample(
    requests: Sequence[tuple[Any, str]],
    models: Sequence[ModelSpec],
    temperatures: Sequence[float],
    env_id: str,
    concurrency: int,
) -> list[Sample]:
    from sv_dagster.core.models.backends import make_backend
    from sv_dagster.core.models.completion import CompletionFailed

    backends = {(m.name, t): make_backend(at_temperature(m, t), env_id) for m in models for t in temperatures}
    try:
        for backend in {id(b): b for b in backends.values()}.values():
            await backend.preflight()
        gate = asyncio.Semaphore(concurrency)

        async def one(key: Any, prompt: str, model: str, temperature: float) -> Sample:
            messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": prompt}]
            async with gate:
                try:
                    completion = await backends[(model, temperature)].complete(messages)
                except CompletionFailed as exc:
                    return Sample(key, model, temperature, None, str(exc)[:300])
            return Sample(key, model, temperature, completion.text, None)

        return await asyncio.gather(
            *(one(key, prompt, m.name, t) for key, prompt in requests for m in models for t in temperatures)
        )
    finally:
        for backend in backends.values():
            await backend.aclose()


def sample_variations(
    requests: Sequence[tuple[Any, str]],
    models: Sequence[ModelSpec],
    temperatures: Sequence[float],
    env_id: str,
    *,
    concurrency: int = 8,
) -> list[Sample]:
    """Every request (key, prompt) to every model at every temperature. A request that fails
    after the backend's retries is a Sample with `error` (recorded as a rejected row); an
    endpoint that cannot be reached raises BackendUnavailable before any request."""
    if not requests or not models:
        return []
    return asyncio.run(_sample(requests, models, temperatures, env_id, concurrency))
