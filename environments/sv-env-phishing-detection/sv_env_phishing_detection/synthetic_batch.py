"""E4's daily synthetic batch for the pipeline: the row generator over `synthetic`
(campaign and transactional templates in several languages, some obfuscated), each row's
planted evidence verified by E4's evidence checker."""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from typing import Any

import tldextract

from sv_env_phishing_detection import synthetic
from sv_env_phishing_detection.emails import GOLD_LABELS
from sv_shared.synthetic import (
    Outcome,
    Reject,
    RowCandidates,
    Seeds,
    SyntheticInputs,
    SyntheticSpec,
    research_row_problem,
)


def read_seeds(inputs: SyntheticInputs) -> Seeds:
    """No seeds to read: the scenario templates are the package's own."""
    return Seeds(
        None,
        {
            "source": "scenario templates of sv_env_phishing_detection.samples",
            "note": "the bundled test emails come from the same templates (other seed)",
        },
    )


class EmailGenerator(RowCandidates):
    """Phishing and legitimate emails from the scenario templates."""

    verifier = synthetic.VERIFIER_ID
    generator_id = f"{synthetic.GENERATOR_ID}@{synthetic.GENERATOR_VERSION}"

    def __init__(self) -> None:
        self.s = synthetic

    def templates(self, n: int, rng: random.Random, id_prefix: str) -> tuple[list[Any], list[Reject]]:
        return self.s.generate(n, rng, id_prefix=id_prefix), []

    def check(self, candidates: Sequence[Any]) -> list[Outcome]:
        out = []
        for row in candidates:
            problem = research_row_problem(row, GOLD_LABELS)
            if problem:
                out.append(Outcome(None, "validation", problem))
                continue
            reason = self.s.label_row(row)
            out.append(Outcome(row) if reason is None else Outcome(None, "verification", reason))
        return out

    def tags_holder(self, row: dict[str, Any]) -> dict[str, Any]:
        return row["info"]

    def tags(self, row: dict[str, Any]) -> tuple[str, str, int]:
        return (row["answer"], f"{row['info']['scenario']}/{row['info']['language']}", row["info"]["difficulty"])

    def versions(self) -> dict[str, Any]:
        return {
            "evidence": self.verifier,
            "tldextract": getattr(tldextract, "__version__", "unknown"),
            "baseline": "sv_env_phishing_detection.baseline.classify_email",
        }


def make_generator(seeds: Seeds, options: Mapping[str, Any]) -> EmailGenerator:
    return EmailGenerator()


SYNTHETIC = SyntheticSpec(
    description="phishing campaigns (credential harvest, invoice fraud, delivery notice, CEO fraud) and benign "
    "transactional mail in en/de/es/fr, some obfuscated (punycode homoglyphs, URL shorteners); "
    "planted evidence verified by E4's evidence checker",
    batch_size=64,  # cheap to check, but the point is novelty: tens a day
    read_seeds=read_seeds,
    make_generator=make_generator,
)
