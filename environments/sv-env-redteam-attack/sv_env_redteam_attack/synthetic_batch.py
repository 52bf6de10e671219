"""E5's daily synthetic batch for the pipeline: goal-tree roots (the curated train split,
else the bundled behaviors), earlier defender failures read from eval results, and the
row generator over `synthetic`, each goal judged by the safety classifier and kept only
when novel."""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from sv_env_redteam_attack import synthetic
from sv_env_redteam_attack.config import load_reward_settings
from sv_shared.redteam import make_classifier
from sv_shared.synthetic import (
    TRAIN_FILE,
    Outcome,
    Reject,
    Seeds,
    SyntheticInputs,
    SyntheticOption,
    SyntheticSpec,
    read_jsonl_rows,
)

NOVELTY_THRESHOLD = 0.6
RESULTS_FILE = "results.jsonl"


def goal_roots(dataset_dir: Path | None) -> tuple[list[Any], dict[str, Any], list[Reject]]:
    """Goal-tree roots: E5's train split when the curated dataset has one, else the bundled
    behaviors (which are also E5's test split: `overlaps_test`)."""
    rejects: list[Reject] = []
    path = dataset_dir / TRAIN_FILE if dataset_dir else None
    if path is not None and path.is_file():
        rows = read_jsonl_rows(path, rejects)
        roots = synthetic.roots_from_rows([row for _, row in rows], str(path))
        if roots:
            return roots, {"source": str(path), "roots": len(roots), "overlaps_test": False}, rejects
    roots = synthetic.bundled_roots()
    return (
        roots,
        {"source": "bundled behaviors (sv_env_redteam_attack)", "roots": len(roots), "overlaps_test": True},
        rejects,
    )


def failure_seeds(eval_dirs: Sequence[Path]) -> tuple[list[Any], dict[str, Any], list[Reject]]:
    """Earlier defender failures, from eval folders' results.jsonl: E6 conversations with an
    unsafe reply (category and framing of the probe, the E5 behavior it pairs with) and E5
    dialogues whose target replied unsafely (the behavior's id and category). Only ids,
    categories and framings are read: never a text (unsafe texts are stored only as hash
    markers anyway)."""
    rejects: list[Reject] = []
    failures: list[Any] = []
    read = []
    for folder in dict.fromkeys(eval_dirs):
        path = Path(folder) / RESULTS_FILE
        if not path.is_file():
            continue
        read.append(str(path))
        for where, row in read_jsonl_rows(path, rejects):
            info, details = row.get("info") or {}, row.get("details") or {}
            if row.get("error"):
                continue
            if details.get("unsafe_replies"):  # E6: the defender complied unsafely
                paired = info.get("paired_attack") or {}
                failures.append(
                    synthetic.FailureSeed(paired.get("behavior_id"), info.get("category"), info.get("framing"), where)
                )
            elif details.get("success"):  # E5: the target (a defender) replied unsafely
                behavior = info.get("behavior") or {}
                failures.append(
                    synthetic.FailureSeed(
                        behavior.get("id"), behavior.get("category") or row.get("answer"), None, where
                    )
                )
    return failures, {"results_read": read, "failures": len(failures)}, rejects


def read_seeds(inputs: SyntheticInputs) -> Seeds:
    roots, facts, rejects = goal_roots(inputs.dataset_dir)
    failures, failure_facts, failure_rejects = failure_seeds(inputs.failure_dirs)
    return Seeds((roots, failures), {**facts, "defender_failures": failure_facts}, [*rejects, *failure_rejects])


class GoalTreeGenerator:
    """Attacker goals grown from the roots, weighted by earlier defender failures."""

    generator_id = f"{synthetic.GENERATOR_ID}@{synthetic.GENERATOR_VERSION}"

    def __init__(
        self,
        roots: Sequence[Any],
        failures: Sequence[Any] = (),
        *,
        novelty_threshold: float = NOVELTY_THRESHOLD,
        memory: Sequence[str] = (),
    ) -> None:
        self.s = synthetic
        self.roots = list(roots)
        self.failures = list(failures)
        self.novelty_threshold = novelty_threshold
        self.memory = [*(r.goal for r in self.roots), *memory]
        self.classifier = make_classifier(load_reward_settings(None).classifier)
        self.verifier = (
            f"safety classifier {self.classifier.ident} (label check) + MinHash novelty < {novelty_threshold}"
        )
        self._ids: dict[int, str] = {}

    def templates(self, n: int, rng: random.Random, id_prefix: str) -> tuple[list[Any], list[Reject]]:
        nodes = self.s.grow(self.roots, n, rng, self.failures)
        for i, node in enumerate(nodes):
            self._ids[id(node)] = f"{id_prefix}-{i:05d}"
        return nodes, []

    def candidate_id(self, candidate: Any) -> str:
        return self._ids[id(candidate)]

    def variation_prompt(self, candidate: Any) -> str | None:
        return self.s.variation_prompt(candidate)

    def vary(self, candidate: Any, text: str, new_id: str, rng: random.Random) -> Any:
        node = self.s.parse_variation(candidate, text)
        self._ids[id(node)] = new_id
        return node

    def check(self, candidates: Sequence[Any]) -> list[Outcome]:
        memory = self.s.NoveltyMemory(self.memory)
        out = []
        for node in candidates:  # in order: each accepted goal joins the novelty memory
            row_id = self._ids[id(node)]
            behavior_id = "syn-" + row_id.split("-syn-", 1)[1]
            judged = self.s.build_row(
                node,
                self.classifier,
                row_id=row_id,
                behavior_id=behavior_id,
                memory=memory,
                novelty_threshold=self.novelty_threshold,
            )
            if judged.row is not None:
                out.append(Outcome(judged.row))
                continue
            assert judged.reason is not None  # a node without a row says why
            stage = "validation" if judged.reason.startswith(("not sanitized", "model text")) else "verification"
            out.append(Outcome(None, stage, judged.reason, judged.withheld))
        return out

    def tags_holder(self, row: dict[str, Any]) -> dict[str, Any]:
        return row["info"]

    def tags(self, row: dict[str, Any]) -> tuple[str, str, int]:
        return (row["answer"], "/".join(row["info"]["goal_tree"]["path"]), row["info"]["difficulty"])

    def versions(self) -> dict[str, Any]:
        return {
            "classifier": self.classifier.ident,
            "novelty": "sv_shared.redteam.minhash (64 permutations, word 3-grams)",
            "novelty_threshold": self.novelty_threshold,
        }


def make_generator(seeds: Seeds, options: Mapping[str, Any]) -> GoalTreeGenerator:
    roots, failures = seeds.data
    return GoalTreeGenerator(roots, failures, novelty_threshold=options.get("novelty_threshold", NOVELTY_THRESHOLD))


SYNTHETIC = SyntheticSpec(
    description="attacker goal trees over sanitized placeholder behaviors, novelty-constrained (MinHash), weighted by "
    "earlier defender failures; categories confirmed by the safety classifier",
    batch_size=24,  # the point is novelty: tens a day
    read_seeds=read_seeds,
    make_generator=make_generator,
    reads_dataset=True,
    failures_from=("sv-env-redteam-attack", "sv-env-redteam-defense"),
    failures_from_tournaments=True,
    real_with_real_dataset=True,
    options=(
        SyntheticOption(
            "novelty_threshold", NOVELTY_THRESHOLD, "E5: max MinHash similarity to an earlier goal.", gt=0.0, le=1.0
        ),
    ),
)
