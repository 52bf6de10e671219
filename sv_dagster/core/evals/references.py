"""Reference policies: the trivial answers a labelling environment's table shows beside its
models (always abstain, always the positive label, always the majority label), each played
through the same runner and scored by the same verifier as a model, on the same examples.

Each eval writes them beside its own results (`references/<policy>.jsonl`) and records their
summaries in its `summary.json` (`reference_policies`), with the model's margin over the best
of them on the environment's comparison metric (`vs_best_reference`): a model that does no
better than a constant answer is seen as such in every table.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sv_dagster.core.evals.runner import SUMMARY_DROP, read_results, run_eval
from sv_dagster.core.evals.summary import summarize
from sv_dagster.core.models.completion import Completion
from sv_dagster.core.models.registry import ModelSpec

REFERENCE_DIR = "references"
LABEL_SPLITS = ("train", "dev")
"""Where the majority label is taken from, first found first: never the scored split when
the dataset has another (a label prior read off the test split is a look at its answers)."""
ABSTAIN_CONFIDENCE = 0.5
"""The confidence an always-abstain reply states, where the format asks for one (abstentions
are left out of ECE and accuracy)."""
KEPT_KEYS = ("policy", "answer", "confidence")


@dataclass(frozen=True)
class Policy:
    name: str
    """As the tables show it, e.g. `always Benign (train majority)`."""
    answer: str
    confidence: float


def label_prior(dataset_report: Path | None, scored_split: str) -> dict[str, Any] | None:
    """`{"split", "counts"}`: the label counts of the dataset's train split (else dev), from
    its report; the scored split's own when the dataset has no other (a user's file), and
    then `"from_scored_split": True`. None without a report or counts."""
    if dataset_report is None or not Path(dataset_report).is_file():
        return None
    counts = json.loads(Path(dataset_report).read_text(encoding="utf-8")).get("label_counts") or {}
    for split in (*[s for s in LABEL_SPLITS if s != scored_split], scored_split):
        if counts.get(split):
            prior = {"split": split, "counts": {str(k): int(v) for k, v in counts[split].items()}}
            return {**prior, "from_scored_split": True} if split == scored_split else prior
    return None


def rows_prior(rows: Iterable[Mapping[str, Any]], split: str) -> dict[str, Any]:
    """The label counts of the scored rows themselves (an eval run without its dataset's
    report: a test or a rescore of an older folder)."""
    counts: dict[str, int] = {}
    for row in rows:
        if row.get("answer") is not None:
            counts[str(row["answer"])] = counts.get(str(row["answer"]), 0) + 1
    return {"split": split, "counts": dict(sorted(counts.items())), "from_scored_split": True}


def policies(reference: Any, prior: Mapping[str, Any]) -> list[Policy]:
    """Always abstain (where the environment has an abstain answer), then always each gold
    label, the positive one first: with two labels that is always the positive label and
    always the other, one of which is the majority of `prior` and named so (ties: the first
    label in the environment's order). A label's confidence is its share of `prior`'s counts."""
    counts = {label: int(prior["counts"].get(label, 0)) for label in reference.labels}
    total = sum(counts.values())
    majority = max(reference.labels, key=lambda label: (counts[label], -reference.labels.index(label)))
    where = "majority of the scored split" if prior.get("from_scored_split") else f"{prior['split']} majority"
    found = [Policy("always abstain", reference.abstain, ABSTAIN_CONFIDENCE)] if reference.abstain is not None else []
    for label in sorted(reference.labels, key=lambda label: label != reference.positive):
        name = f"always {label}" + (f" ({where})" if total and label == majority else "")
        found.append(Policy(name, label, round(counts[label] / total, 3) if total else 0.5))
    return found


def slug(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")


@dataclass
class ConstantBackend:
    """A policy as a model backend: the same reply builder for every request, so the runner
    plays it (dialogues included) and scores it exactly as it does a model."""

    spec: ModelSpec
    reply: Callable[..., str]
    policy: Policy
    takes_messages: bool = False

    async def preflight(self) -> None:
        return None

    async def complete(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None) -> Completion:
        start = time.perf_counter()
        request: Any = messages
        if not self.takes_messages:
            request = next((m.get("content") or "" for m in reversed(messages) if m.get("role") == "user"), "")
        text = self.reply(self.policy.answer, confidence=self.policy.confidence, request=request)
        return Completion(text=text, usage=None, latency_s=time.perf_counter() - start, finish_reason="stop")

    async def aclose(self) -> None:
        return None


def score_references(
    env: Any,
    tasks: Callable[[], Iterable[Any]],
    settings: Any,
    run_dir: Path,
    prior: Mapping[str, Any],
) -> dict[str, Any]:
    """Play every reference policy of `env` over `tasks()` (a fresh iterator, per policy, of the
    tasks the model's metrics cover: those its call and scoring did not fail on) into
    `run_dir/references/`, and summarise each with the model's own summary function. Returns
    the summary's `reference_policies` entry."""
    reference = env.reference
    out: list[dict[str, Any]] = []
    for policy in policies(reference, prior):
        spec = ModelSpec(name=f"reference: {policy.name}", backend="reference", model=f"reference/{slug(policy.name)}")
        backend = ConstantBackend(spec, reference.reply, policy, reference.takes_messages)
        path = run_dir / REFERENCE_DIR / f"{slug(policy.name)}.jsonl"
        asyncio.run(run_eval(tasks(), backend, path, concurrency=4, parse=env.parse, use_tools=False))
        summary = summarize(env, read_results(path, drop=SUMMARY_DROP), settings)
        out.append(
            {
                "policy": policy.name,
                "answer": policy.answer,
                "confidence": policy.confidence,
                "results": f"{REFERENCE_DIR}/{path.name}",
                **{k: v for k, v in summary.items() if k not in ("tokens", "total_cost_usd", "n_unpriced")},
            }
        )
    costs = getattr(settings, "costs", None)
    return {
        "compare": reference.compare,
        "labels_from": dict(prior),
        "policies": out,
        **({"costs": _costs(costs)} if costs is not None and hasattr(costs, "fn_cost") else {}),
    }


def _costs(costs: Any) -> dict[str, Any]:
    """The decision costs the comparison metric is computed with, as the table's note states them."""
    worst = getattr(costs, "max_cost", max(costs.fn_cost, costs.fp_cost))
    return {
        "positive_label": costs.positive_label,
        "fn_cost": costs.fn_cost,
        "fp_cost": costs.fp_cost,
        "abstain_cost": costs.abstain_cost,
        "max_cost": worst,
    }


def versus_best(summary: Mapping[str, Any], references: Mapping[str, Any]) -> dict[str, Any]:
    """The model's margin over the best reference policy on the comparison metric (higher is
    better): `delta` > 0 beats every trivial policy; <= 0 means one does at least as well.
    `delta` is None when the model or every reference lacks the metric."""
    key = references["compare"]
    scored = [p for p in references["policies"] if p.get(key) is not None]
    top = max(scored, key=lambda p: p[key], default=None)  # the first listed wins a tie
    best_value, best = (top[key], top["policy"]) if top else (None, None)
    value = summary.get(key)
    delta = None if value is None or best_value is None else value - best_value
    return {"metric": key, "best": best, "best_value": best_value, "value": value, "delta": delta}


REFERENCE_PREFIX = "ref: "
"""How a reference policy's row is named in a table (`ref: always abstain`)."""
NO_BETTER = "!"
"""The mark beside a model's margin when a reference policy does at least as well."""


def margin_text(summary: Mapping[str, Any]) -> str | None:
    """A model row's `vs best ref` cell: its margin over the best reference, marked `!` when
    that is not above 0 (None where the eval has no reference policies)."""
    versus = summary.get("vs_best_reference")
    if not versus:
        return None
    delta = versus.get("delta")
    if delta is None:
        return "-"
    return f"{delta:+.3f}" + (f" {NO_BETTER}" if delta <= 0 else "")


def table_rows(
    entries: Iterable[tuple[Mapping[str, Any], str]], titles: Mapping[str, str] | None = None
) -> tuple[list[dict[str, Any]], list[str]]:
    """The rows and notes an eval table adds for its evals' reference policies: `entries` are
    (summary, example set) of each model's eval; each policy's row is shown once per example
    set (models scored on different subsets each get theirs). The notes say what the rows
    are, where the majority label came from, the costs behind a cost metric, and which
    models a trivial policy matches or beats. `titles`: column titles by summary key."""
    rows: dict[tuple[str, str], dict[str, Any]] = {}
    priors: dict[str, Mapping[str, Any]] = {}
    costs: Mapping[str, Any] | None = None
    compare, matched = None, []
    for summary, examples in entries:
        references = summary.get("reference_policies")
        if not references:
            continue
        compare = (titles or {}).get(references["compare"], references["compare"])
        costs = references.get("costs") or costs
        priors.setdefault(json.dumps(references["labels_from"], sort_keys=True), references["labels_from"])
        for policy in references["policies"]:
            name = REFERENCE_PREFIX + policy["policy"] + (" [subset]" if examples else "")
            rows.setdefault((policy["policy"], examples), {**policy, "model": name, "vs_ref": "(ref)"})
        versus = summary.get("vs_best_reference") or {}
        if versus.get("delta") is not None and versus["delta"] <= 0:
            matched.append(
                f"{summary.get('model')} ({versus['value']:.3f} vs {versus['best']} {versus['best_value']:.3f})"
            )
    if not rows:
        return [], []
    sources = "; ".join(
        ("the scored split's own (the dataset has no train or dev split)" if p.get("from_scored_split") else p["split"])
        + ": "
        + ", ".join(f"{label} {count}" for label, count in p["counts"].items())
        for p in priors.values()
    )
    notes = [
        f"{REFERENCE_PREFIX}reference policies, one constant answer for every example, scored by the same verifier on "
        f"the same examples; majority label from {sources}",
        f"vs best ref: {compare} minus the best reference policy's; {NO_BETTER} = no better than a constant answer",
    ]
    if any(examples for _, examples in rows):
        notes.append("[subset]: on the examples drawn for the models scored on a subset (their n)")
    if costs:
        notes.append(
            f"{compare} = 1 - mean cost / {costs['max_cost']:g}, with a missed {costs['positive_label']} costing "
            f"{costs['fn_cost']:g}, a false alarm {costs['fp_cost']:g} and an abstention {costs['abstain_cost']:g}: "
            f"always abstaining scores {1 - costs['abstain_cost'] / costs['max_cost']:.3f}"
            if costs["max_cost"]
            else f"{compare}: no decision costs anything under these costs"
        )
    if matched:
        notes.append(f"{NO_BETTER} a constant answer does at least as well on {compare}: {'; '.join(matched)}")
    return list(rows.values()), notes
