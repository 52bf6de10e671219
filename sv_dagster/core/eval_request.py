"""What is wrong with an eval request, said in one line before anything runs: a model name
the registry lacks (with the close ones), a model not registered for the environment, an
endpoint model whose key is not set, and a limit larger than the split."""

from __future__ import annotations

import difflib
import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path

from sv_dagster.core.models.registry import ModelSpec
from sv_shared.errors import UserError

OOD_SPLIT = "ood"
"""The dataset split of the sources marked `ood: true` (configs/sources.yaml): scored by the
eval_ood/<env>/<model> assets and reported apart from the in-distribution test split."""


class EvalRequestError(UserError, ValueError):
    """A mistake in what was asked for; its message is the one line a person needs."""


def _close(name: str, names: Sequence[str]) -> str:
    """' (did you mean ...?)' for the names like `name`, ignoring case (`GPT-5-mini`)."""
    by_folded = {candidate.casefold(): candidate for candidate in names}
    close = difflib.get_close_matches(name.casefold(), list(by_folded), n=3, cutoff=0.6)
    return f" (did you mean {' or '.join(repr(by_folded[c]) for c in close)}?)" if close else ""


def check_models(
    env_short: str, names: Sequence[str], registry: Mapping[str, ModelSpec], label: str = "model", side: str = ""
) -> None:
    """Every name is a registry model that serves `env_short` and, for an endpoint, has its
    API key set (the environment and .env are read by then). `label` and `side` say which
    flag a name came from (`--target model`, ` (the side e5 talks to)`), so a mistake in
    the model on the other side of a dialogue names that side, not the one typed."""
    serving = _serving(env_short, registry)
    for name in names:
        if name not in registry:
            # A name close to one this environment has is the likelier meant than one it lacks.
            close = _close(name, serving) or _close(name, sorted(registry))
            raise EvalRequestError(
                f"unknown {label} {name!r}{close}; the models for {env_short}{side}: {', '.join(serving)}"
            )
        spec = registry[name]
        if not spec.supports(env_short):
            raise EvalRequestError(
                f"{label} {name!r} is registered for {', '.join(spec.envs)}, not {env_short}{side}; "
                f"the models for {env_short}: {', '.join(serving)}"
            )
        if spec.api_key_env and not os.environ.get(spec.api_key_env):
            raise EvalRequestError(
                f"{label} {name!r} needs the environment variable {spec.api_key_env} (put it in .env "
                f"or export it); nothing was run"
            )


def _serving(env_short: str, registry: Mapping[str, ModelSpec]) -> list[str]:
    return sorted(name for name, spec in registry.items() if spec.supports(env_short))


def split_sizes(dataset_report: Path) -> dict[str, int]:
    """Examples per split, from a built dataset's report (its `metadata.json`)."""
    return {name: int(size) for name, size in json.loads(dataset_report.read_text())["split_sizes"].items()}


ALL = "all"
"""`--n all`: every example of the split, whatever a model's registry `limit` says."""


def parse_n(text: str) -> int | str:
    """`--n`: a positive number of examples, or `ALL` (the whole split, for every model)."""
    if text.strip().lower() == ALL:
        return ALL
    try:
        n = int(text)
    except ValueError:
        raise EvalRequestError(f"--n takes a number of examples or 'all', not {text!r}") from None
    if n < 1:
        raise EvalRequestError(f"--n must be at least 1, not {n}")
    return n


def check_split(split: str, sizes: Mapping[str, int], dataset: str) -> None:
    if split not in sizes:
        raise EvalRequestError(
            f"{dataset} has no split {split!r}{_close(split, sorted(sizes))}; its splits: {', '.join(sorted(sizes))}"
        )


def check_limit(limit: int | None, split: str, size: int, dataset: str) -> None:
    """A limit is a number of examples to draw; more than the split holds is a mistake, not
    a request for all of them (that is no limit: `--n all`)."""
    if limit is not None and limit > size:
        raise EvalRequestError(
            f"--n {limit} is more than the {size} examples of split {split!r} of {dataset}; "
            f"ask for at most {size}, or `--n all`"
        )
