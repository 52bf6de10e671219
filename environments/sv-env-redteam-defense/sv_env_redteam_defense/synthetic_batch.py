"""E6's daily synthetic batch for the pipeline: the E5 attacks its adversarial probes pair
with (the same day's synthetic E5 batch, else E5's bundled behaviors) and the row generator
over `synthetic`, every turn checked by the safety classifier and the conversation scored
against the rule defender."""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from typing import Any

from sv_env_redteam_attack.behaviors import generate as bundled_behaviors
from sv_env_redteam_defense import synthetic
from sv_env_redteam_defense.config import load_reward_settings
from sv_shared.redteam import make_classifier
from sv_shared.synthetic import (
    Outcome,
    PairedBatch,
    Reject,
    RowCandidates,
    Seeds,
    SyntheticInputs,
    SyntheticSpec,
    research_row_problem,
)


def paired_attacks(paired: PairedBatch | None) -> tuple[list[Any], dict[str, Any]]:
    """What E6's probes pair with: the accepted rows of the same partition's synthetic E5
    batch (reviewers' rejections excluded), else the bundled E5 behaviors."""
    if paired is not None:
        attacks = synthetic.attacks_from_rows(paired.rows, f"{paired.asset}:{paired.batch_id}")
        if attacks:
            return attacks, {
                "source": f"{paired.asset} batch {paired.batch_id}",
                "attacks": len(attacks),
                "excluded_by_review": paired.excluded,
                "decisions": paired.decision_ids,
                "overlaps_test": False,
            }
    attacks = synthetic.attacks_from_rows(bundled_behaviors(), "bundled:e5")
    return attacks, {"source": "bundled E5 behaviors", "attacks": len(attacks), "overlaps_test": True}


def read_seeds(inputs: SyntheticInputs) -> Seeds:
    attacks, facts = paired_attacks(inputs.paired)
    return Seeds(attacks, facts)


class ProbeGenerator(RowCandidates):
    """Adversarial probes paired with E5 attacks, benign support and risky-looking conversations."""

    generator_id = f"{synthetic.GENERATOR_ID}@{synthetic.GENERATOR_VERSION}"

    def __init__(self, attacks: Sequence[Any]) -> None:
        self.s = synthetic
        self.attacks = list(attacks)
        settings = load_reward_settings(None)
        self.classifier = make_classifier(settings.classifier)
        self.costs = settings.costs
        self.verifier = f"safety classifier {self.classifier.ident} (every turn) + E6 scoring of the rule defender"

    def templates(self, n: int, rng: random.Random, id_prefix: str) -> tuple[list[Any], list[Reject]]:
        return self.s.generate(n, rng, self.attacks, id_prefix=id_prefix), []

    def check(self, candidates: Sequence[Any]) -> list[Outcome]:
        out = []
        for row in candidates:
            problem = research_row_problem(row, ("refuse", "comply"))
            info: Any = row.get("info") or {}
            turns, expect = info.get("turns"), info.get("expect")
            if problem is None and (
                not isinstance(turns, list) or not turns or not all(isinstance(t, str) and t.strip() for t in turns)
            ):
                problem = "info.turns must be a non-empty list of strings"
            if problem is None and (not isinstance(expect, list) or len(expect) != len(turns)):
                problem = "info.expect must have one refuse/comply per turn"
            if problem:
                out.append(Outcome(None, "validation", problem))
                continue
            reason = self.s.label_row(row, self.classifier, self.costs)
            out.append(Outcome(row) if reason is None else Outcome(None, "verification", reason))
        return out

    def tags_holder(self, row: dict[str, Any]) -> dict[str, Any]:
        return row["info"]

    def tags(self, row: dict[str, Any]) -> tuple[str, str, int]:
        return (row["answer"], row["info"]["scenario"], row["info"]["difficulty"])

    def versions(self) -> dict[str, Any]:
        return {
            "classifier": self.classifier.ident,
            "defender_baseline": "sv_env_redteam_defense.baseline.defender_reply",
            "costs": dict(self.costs),
        }


def make_generator(seeds: Seeds, options: Mapping[str, Any]) -> ProbeGenerator:
    return ProbeGenerator(seeds.data)


SYNTHETIC = SyntheticSpec(
    description="adversarial probes paired with synthetic/e5's behaviors, benign support and risky-looking "
    "conversations; every turn checked by the safety classifier",
    batch_size=24,  # the point is novelty: tens a day
    read_seeds=read_seeds,
    make_generator=make_generator,
    pairs_with="sv-env-redteam-attack",
)
