"""sft_data/<env>: curated (and synthetic) rows as chat examples for TRL.

Every row is built from the environment's own task (loaded through its taskset, as an
eval would), so the prompt a model trains on is byte for byte the prompt it is evaluated
on. The target is the reply the environment's verifier rewards most, built by the
environment's own `sft` builder (its `Environment.sft`), which also names its variants.

Rows for GRPO are the same prompts without targets, plus what the reward adapter needs to
rebuild the task (`task_key`) and, for dialogues, the conversation before the sampled turn.
"""

from __future__ import annotations

import json
import random
from collections import Counter
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from sv_dagster.core.data import leakage
from sv_dagster.core.envs import ENVS, EnvSpec
from sv_shared import textrefs
from sv_shared.sft import SftExample


class SftDataError(ValueError):
    """Data that cannot become SFT rows; the message names the file or example."""


def load_tasks(env: EnvSpec, path: Path) -> list[Any]:
    try:
        return env.load_tasks(path, None)
    except Exception as exc:
        raise SftDataError(f"{env.short}: cannot load tasks from {path}: {type(exc).__name__}: {exc}") from exc


def mix_by_source(examples: list[SftExample], seed: int) -> list[SftExample]:
    """A cross-corpus mix: as many rows from each source as the smallest one has, so no
    corpus dominates the style the model learns."""
    by_source: dict[str, list[SftExample]] = {}
    for example in examples:
        by_source.setdefault(example.source, []).append(example)
    if len(by_source) < 2:
        return examples
    size = min(len(rows) for rows in by_source.values())
    rng = random.Random(seed)
    mixed = [row for rows in by_source.values() for row in rng.sample(rows, size)]
    rng.shuffle(mixed)
    return mixed


def build_examples(
    env_short: str,
    tasks: list[Any],
    *,
    variant: str | None = None,
    seed: int = 0,
    context: dict[str, Any] | None = None,
) -> list[SftExample]:
    sft = env_spec(env_short).sft
    if sft is None:
        raise SftDataError(f"{env_short}: the environment declares no SFT targets")
    if variant is not None and variant not in sft.variants:
        raise SftDataError(f"{env_short}: unknown sft variant {variant!r} (known: {list(sft.variants)})")
    examples = list(sft.build(tasks, variant, context or {}))
    for example in examples:
        example.env = env_short
    if variant is not None and variant == sft.mix_variant:
        examples = mix_by_source(examples, seed)
    return examples


def sft_rows(examples: list[SftExample], tasks: list[Any]) -> list[dict[str, Any]]:
    """The SFT rows of `examples`. When their targets call tools, every row also carries the
    schemas of the tools `tasks` offer (`tools`, a JSON string TRL's SFTTrainer renders in the
    prompt), as a tool-calling GRPO rollout of the same task is prompted."""
    rows = [example.sft_row() for example in examples]
    if any(example.tool_turns for example in examples):
        from sv_dagster.training.tool_rollouts import tool_schemas

        tools = json.dumps(tool_schemas(tasks))
        for row in rows:
            row["tools"] = tools
    return rows


def mix_rows(own: Path, others: Mapping[str, tuple[Path, int]], target: Path, seed: int) -> dict[str, int]:
    """`own`'s rows and, for each other environment, `rows` of its rows drawn with `seed`
    (all of them when it has fewer), written to `target` in a seeded shuffle; returns how
    many rows came from each file's environment (`own` under "own"). Lines are copied as
    stored, text-store markers included, so `read_rows` hydrates them as it does `own`'s."""
    rng = random.Random(seed)
    lines = [line for line in own.read_text(encoding="utf-8").splitlines() if line.strip()]
    counts = {"own": len(lines)}
    for env_short, (path, rows) in sorted(others.items()):
        theirs = [line for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
        drawn = rng.sample(theirs, min(rows, len(theirs)))
        counts[env_short] = len(drawn)
        lines += drawn
    rng.shuffle(lines)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return counts


def referenced_texts(tasks: Iterable[Any]) -> list[str]:
    """The harmful request texts `tasks` were built from by reference (`sv_shared.textrefs`):
    rows written from those tasks carry them as markers again."""
    digests = {
        digest for task in tasks for digest in (getattr(task.data, "info", None) or {}).get(textrefs.REFS_FIELD) or []
    }
    return [textrefs.get(digest) for digest in sorted(digests)]


def write_rows(path: Path, rows: Iterable[dict[str, Any]], *, by_reference: Iterable[str] = ()) -> int:
    """Write `rows` as JSONL, each of the `by_reference` texts as its text-store marker."""
    references = textrefs.References(by_reference)
    path.parent.mkdir(parents=True, exist_ok=True)
    count = 0
    with path.open("w", encoding="utf-8") as handle:
        for row in rows:
            handle.write(json.dumps(references(row), sort_keys=True) + "\n")
            count += 1
    return count


def read_rows(path: Path) -> list[dict[str, Any]]:
    """The rows of a JSONL file, markers replaced by their texts."""
    with path.open(encoding="utf-8") as handle:
        return [
            textrefs.hydrate_row(json.loads(line), where=f"{path}:{number}")
            for number, line in enumerate(handle, 1)
            if line.strip()
        ]


def summarize(examples: list[SftExample]) -> dict[str, Any]:
    return {
        "n": len(examples),
        "by_source": dict(Counter(e.source for e in examples)),
        "by_difficulty": dict(Counter(str(e.difficulty) for e in examples)),
        "n_tasks": len({e.task_key for e in examples}),
    }


def screen_leakage(
    env: EnvSpec,
    sources: list[Path],
    dataset_files: Mapping[str, Path | str],
    counterparts: Iterable[tuple[EnvSpec, Mapping[str, Path | str]]],
    report_path: Path,
    policy: leakage.Policy,
) -> leakage.LeakReport:
    """The training rows (of `sources`) that duplicate or nearly duplicate a dev/test row of
    `env`'s dataset or a test row of a counterpart's, written to `report_path` (file:line of
    each); the caller leaves them out."""
    reference, others = leakage.held_out_files(dataset_files, counterparts)
    report = leakage.check_files(sources, reference, leakage.canonical_fn(env), policy, counterpart=others)
    report_path.parent.mkdir(parents=True, exist_ok=True)
    report_path.write_text(
        json.dumps(report.as_dict([*reference, *(path for path, _ in others)]), indent=2) + "\n", encoding="utf-8"
    )
    return report


def env_spec(env_short: str) -> EnvSpec:
    if env_short not in ENVS:
        raise SftDataError(f"unknown environment {env_short!r} (known: {sorted(ENVS)})")
    return ENVS[env_short]
