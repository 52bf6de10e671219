"""One synthetic batch per environment: seeds -> the environment's generator -> the common
pipeline (`batch.run_batch`, or `e1.run_e1_batch` for E1's Parquet batch)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from sv_dagster.core.synthetic import seeds as seed_readers
from sv_dagster.core.synthetic.batch import BatchResult, BatchSpec, run_batch

DEFAULT_BATCH_SIZES = {"e1": 2000, "e2": 24, "e3": 8, "e4": 64, "e5": 24, "e6": 24}
"""Template candidates per daily batch: E1 feeds training; the others run real tools
(E2's scanners, E3's sandbox) or need novelty, so tens per day."""


@dataclass
class Upstream:
    """Where a batch's seeds are (found by the caller, e.g. in the Dagster instance)."""

    dataset_dir: Path | None = None
    dataset_sample: bool | None = None
    """The curated dataset says it is SAMPLE data (None: unknown or none)."""
    e5_batch_dir: Path | None = None
    failure_dirs: list[Path] = field(default_factory=list)
    tournament_dirs: list[Path] = field(default_factory=list)


@dataclass
class Options:
    seed_from_test: bool = False
    """E2: mutate the bundled clean files too (they are E2's test split)."""
    novelty_threshold: float = 0.6
    """E5: highest MinHash similarity to an earlier goal a new goal may have."""
    perturb_share: float = 0.5
    """E1: share of each chunk made by perturbing seed flows (when there are seeds)."""
    attack_share: float = 0.5
    """E1: share of playbook flows that are attacks (label balance)."""
    write_jsonl: bool = True
    """E1: also write examples.jsonl (the taskset's format) beside flows.parquet."""


def is_sample(env: str, upstream: Upstream) -> bool:
    """A batch is SAMPLE unless its seeds are a real (non-sample) curated dataset: the
    generators' templates are project-written. E1 with no seeds is playbooks only."""
    if env in ("e1", "e2", "e5") and upstream.dataset_sample is False:
        return False
    return True


def build_batch(spec: BatchSpec, upstream: Upstream, options: Options | None = None) -> BatchResult:
    from sv_dagster.core.synthetic import generators as g

    options = options or Options()
    if spec.env == "e1":
        from sv_dagster.core.synthetic.e1 import run_e1_batch

        cols, sources, facts, rejects = seed_readers.e1_seeds(upstream.dataset_dir)
        return run_e1_batch(spec, cols, sources, facts, rejects, perturb_share=options.perturb_share,
                            attack_share=options.attack_share, write_jsonl=options.write_jsonl)
    if spec.env == "e2":
        seeds, facts, rejects = seed_readers.e2_seeds(upstream.dataset_dir, options.seed_from_test)
        return run_batch(spec, g.E2Generator(seeds), facts, rejects)
    if spec.env == "e3":
        return run_batch(spec, g.E3Generator(), {"source": "clean templates of sv_env_code_vulnerability.synthetic",
                                                 "overlaps_test": False})
    if spec.env == "e4":
        return run_batch(spec, g.E4Generator(), {"source": "scenario templates of sv_env_phishing_detection.samples",
                                                 "note": "the bundled test emails come from the same templates (other seed)"})
    if spec.env == "e5":
        roots, facts, rejects = seed_readers.e5_roots(upstream.dataset_dir)
        failures, failure_facts, failure_rejects = seed_readers.failure_seeds(upstream.failure_dirs, upstream.tournament_dirs)
        facts = {**facts, "defender_failures": failure_facts}
        return run_batch(spec, g.E5Generator(roots, failures, novelty_threshold=options.novelty_threshold), facts,
                         [*rejects, *failure_rejects])
    if spec.env == "e6":
        attacks, facts = seed_readers.e6_attacks(upstream.e5_batch_dir)
        return run_batch(spec, g.E6Generator(attacks), facts)
    raise ValueError(f"no synthetic generator for environment {spec.env!r}")
