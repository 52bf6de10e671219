"""E2's daily synthetic batch for the pipeline: seed files (the generator's clean
templates, the clean rows of the curated train split, optionally the bundled test files)
and the row generator over `synthetic`, validated by E2's own record check and labelled by
its tools (OPA/Rego, KubeLinter's default checks as Rego, Semgrep, Checkov)."""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from sv_env_config_verification import synthetic
from sv_env_config_verification.dataset import DatasetError, _example
from sv_env_config_verification.tools import default_suite
from sv_shared.synthetic import (
    TRAIN_FILE,
    Outcome,
    Reject,
    Seeds,
    SyntheticInputs,
    SyntheticOption,
    SyntheticSpec,
    seed_reject,
)


def seed_files(dataset_dir: Path | None, include_bundled: bool) -> tuple[list[Any], dict[str, Any], list[Reject]]:
    """The generator's clean templates, the clean rows of E2's train split, and (only when
    asked) the bundled clean files, which are E2's test split."""
    rejects: list[Reject] = []
    seeds = synthetic.default_seeds(include_bundled=include_bundled)
    path = dataset_dir / TRAIN_FILE if dataset_dir else None
    if path is not None and path.is_file():
        errors: list[str] = []
        seeds += synthetic.dataset_seeds([str(path)], errors)
        rejects += [seed_reject(str(path), error) for error in errors]
    return (
        seeds,
        {
            "source": str(path) if path is not None and path.is_file() else None,
            "seed_files": len(seeds),
            "includes_bundled_test_files": include_bundled,
            "overlaps_test": include_bundled,
        },
        rejects,
    )


def read_seeds(inputs: SyntheticInputs) -> Seeds:
    seeds, facts, rejects = seed_files(inputs.dataset_dir, bool(inputs.options.get("seed_from_test", False)))
    return Seeds(seeds, facts, rejects)


class MutantGenerator:
    """Clean seed files and their mutated (vulnerable) variants with the fixing diff."""

    verifier = "E2 tools: OPA/Rego and kubelinter_rego (in-process), Semgrep and Checkov (batched)"
    generator_id = f"{synthetic.GENERATOR_ID}@{synthetic.GENERATOR_VERSION}"

    def __init__(self, seeds: Sequence[Any], *, clean_share: float = 0.25, tools: Sequence[str] | None = None) -> None:
        self.s = synthetic
        self.seeds = list(seeds)
        self.clean_share = clean_share
        self.tools = tools

    def templates(self, n: int, rng: random.Random, id_prefix: str) -> tuple[list[Any], list[Reject]]:
        candidates, rejects = self.s.generate(n, rng, self.seeds, id_prefix=id_prefix, clean_share=self.clean_share)
        return candidates, [Reject(r["id"], r["stage"], r["reason"], source=r.get("source")) for r in rejects]

    def candidate_id(self, candidate: Any) -> str:
        return candidate.row["id"]

    def variation_prompt(self, candidate: Any) -> str | None:
        return self.s.variation_prompt(candidate.row)

    def vary(self, candidate: Any, text: str, new_id: str, rng: random.Random) -> Any:
        row = self.s.parse_variation(candidate.row, text, f"{rng.randrange(16**4):04x}")
        row["id"] = new_id
        return self.s.Candidate(row, None, candidate.mutation)

    def check(self, candidates: Sequence[Any]) -> list[Outcome]:
        outcomes: list[Outcome | None] = []
        valid = []
        for candidate in candidates:
            try:
                _example(candidate.row, candidate.row.get("id", "?"))  # E2's own record check
            except DatasetError as exc:
                outcomes.append(Outcome(None, "validation", str(exc)))
                continue
            outcomes.append(None)
            valid.append(candidate)
        verdicts = iter(self.s.label_pairs(valid, default_suite(self.tools)))
        return [o if o is not None else self._verdict(c, next(verdicts)) for c, o in zip(candidates, outcomes)]

    @staticmethod
    def _verdict(candidate: Any, reason: str | None) -> Outcome:
        return Outcome(candidate.row, None, None) if reason is None else Outcome(None, "verification", reason)

    def tags_holder(self, row: dict[str, Any]) -> dict[str, Any]:
        return row["info"]

    def tags(self, row: dict[str, Any]) -> tuple[str, str, int]:
        return ("clean" if row["clean"] else "vulnerable", row["info"]["scenario"], row["info"]["difficulty"])

    def versions(self) -> dict[str, Any]:
        return default_suite(self.tools).versions()


def make_generator(seeds: Seeds, options: Mapping[str, Any]) -> MutantGenerator:
    return MutantGenerator(seeds.data)


SYNTHETIC = SyntheticSpec(
    description="clean manifests/Terraform mutated into vulnerable variants (privileged, hostNetwork, runAsRoot, RBAC "
    "wildcards, disabled encryption, public ACLs, open ingress) with vulnerable->fixed diffs; labelled by "
    "running OPA, Semgrep and Checkov",
    batch_size=24,  # every row runs the real scanners: tens a day
    read_seeds=read_seeds,
    make_generator=make_generator,
    reads_dataset=True,
    real_with_real_dataset=True,
    options=(SyntheticOption("seed_from_test", False, "E2: also mutate the bundled clean files (E2's test split)."),),
)
