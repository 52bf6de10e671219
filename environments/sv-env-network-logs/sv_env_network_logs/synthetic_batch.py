"""E1's daily synthetic batch for the pipeline: seed flows from the curated train split and
a columnar generator over `synthetic` (playbooks and perturbed seed flows, validated,
labelled by each scenario's invariants, difficulty from the rule baseline). The pipeline
writes the chunks as `flows.parquet` (and examples.jsonl in E1's dataset schema)."""

from __future__ import annotations

import random
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from sv_env_network_logs import synthetic as s
from sv_env_network_logs.flows import FLOW_FIELD_NAMES, INT_LABELS, parse_flow_question, render_flow_question
from sv_shared.synthetic import (
    TRAIN_FILE,
    Reject,
    Row,
    Seeds,
    SyntheticInputs,
    SyntheticSpec,
    read_jsonl_rows,
    seed_reject,
)

GENERATOR = f"{s.GENERATOR_ID}@{s.GENERATOR_VERSION}"


def seed_flows(dataset_dir: Path | None) -> tuple[s.Columns | None, list[str], dict[str, Any], list[Reject]]:
    """Seed flows for perturbation from E1's train split: each row's question parsed back to
    its flow fields (`parse_flow_question`), its answer as the label, its `info.scenario`.
    (columns or None, source per row, facts, rejects)."""
    rejects: list[Reject] = []
    path = dataset_dir / TRAIN_FILE if dataset_dir else None
    if path is None or not path.is_file():
        return None, [], {"source": None, "note": "no curated E1 train split: playbook flows only"}, rejects
    flows, sources = [], []
    for where, row in read_jsonl_rows(path, rejects):
        flow = parse_flow_question(row.get("question") or "")
        answer = row.get("answer")
        flow["label"] = INT_LABELS.get(answer, answer) if isinstance(answer, int) else answer
        flow["scenario"] = (row.get("info") or {}).get("scenario")
        flows.append(flow)
        sources.append(where)
    cols, problems = s.seed_columns(flows)
    bad = {i for i, _ in problems}
    for i, reason in problems:
        rejects.append(seed_reject(sources[i], reason))
    kept = [src for i, src in enumerate(sources) if i not in bad]
    return (cols if kept else None), kept, {"source": str(path), "seed_flows": len(kept)}, rejects


def read_seeds(inputs: SyntheticInputs) -> Seeds:
    cols, sources, facts, rejects = seed_flows(inputs.dataset_dir)
    return Seeds(cols, facts, rejects, sources)


class FlowGenerator:
    """Playbook flows and perturbed seed flows, `perturb_share` of each chunk perturbed
    (when there are seeds), `attack_share` of the playbook flows attacks."""

    generator_id = GENERATOR
    verifier = s.VERIFIER_ID

    def __init__(
        self,
        seed_cols: s.Columns | None,
        seed_sources: Sequence[str],
        *,
        perturb_share: float = 0.5,
        attack_share: float = 0.5,
    ) -> None:
        self.seed_cols = seed_cols
        self.seed_sources = np.asarray(seed_sources, dtype=object)
        self.n_seed = 0 if seed_cols is None else len(seed_cols["label"])
        self.perturb_share = perturb_share
        self.attack_share = attack_share

    def columns(self) -> list[tuple[str, str]]:
        with_hosts = self.seed_cols is not None and all(h in self.seed_cols for h in s.HOST_FIELDS)
        return [
            ("id", "string"),
            *((name, "int64") for name in s.INT_FIELDS),
            ("duration", "float64"),
            *((name, "string") for name in s.STR_FIELDS),
            *((host, "string") for host in s.HOST_FIELDS if with_hosts),
            *((name, "string") for name in ("label", "scenario", "family", "origin", "seed_source", "seed_model")),
            ("difficulty", "int64"),
            ("temperature", "float64"),
        ]

    def templates(self, n: int, rng: np.random.Generator) -> s.Columns:
        n_pert = int(round(n * self.perturb_share)) if self.n_seed else 0
        parts = [s.playbook_flows(n - n_pert, rng, self.attack_share)]
        if n_pert:
            assert self.seed_cols is not None  # n_pert is 0 without seeds
            parts.append(s.perturb_flows(self.seed_cols, n_pert, rng))
        cols = s.concat(parts)
        m = len(cols["label"])
        sources = np.full(m, None, dtype=object)
        if "seed_index" in parts[-1] and n_pert:
            sources[m - n_pert :] = self.seed_sources[parts[-1]["seed_index"]]
        cols["seed_source"] = sources
        return cols

    def check(self, cols: s.Columns) -> tuple[np.ndarray, np.ndarray]:
        return s.validate_flows(cols), s.verify_labels(cols)

    def take(self, cols: s.Columns, index: np.ndarray) -> s.Columns:
        return s.take(cols, index)

    def difficulty(self, cols: s.Columns) -> np.ndarray:
        return s.difficulty(cols)

    def variation_prompts(self, rng: random.Random, k: int) -> list[tuple[str, str]]:
        scenarios = rng.sample(sorted(s.PLAYBOOKS), min(k, len(s.PLAYBOOKS)))
        return [(name, s.variation_prompt(name)) for name in scenarios]

    def parse_variation(self, text: str, key: str) -> Row:
        return s.parse_variation(text, key)

    def columns_from(self, rows: Sequence[Row]) -> tuple[s.Columns, list[tuple[int, str]]]:
        return s.seed_columns(list(rows))

    def counts(self) -> dict[str, Any]:
        return {"seed_flows": self.n_seed}

    def settings(self) -> dict[str, Any]:
        return {"perturb_share": self.perturb_share, "attack_share": self.attack_share}

    def versions(self) -> dict[str, Any]:
        return {
            "labeller": s.VERIFIER_ID,
            "scenarios": {name: book.rule for name, book in s.PLAYBOOKS.items()},
            "difficulty": "sv_env_network_logs.baseline.classify_flow",
        }


def make_generator(seeds: Seeds, options: Mapping[str, Any]) -> FlowGenerator:
    return FlowGenerator(
        seeds.data,
        seeds.sources,
        perturb_share=options.get("perturb_share", 0.5),
        attack_share=options.get("attack_share", 0.5),
    )


def table_rows(records: Iterable[Mapping[str, Any]]) -> Iterator[Row]:
    """E1 dataset rows ({id, question, answer, info}) from the batch table's records."""
    for record in records:
        info = {
            "synthetic": record["synthetic"],
            "sample": record["sample"],
            "scenario": record["scenario"],
            "family": record["family"],
            "origin": record["origin"],
            "difficulty": record["difficulty"],
            "difficulty_basis": "rule baseline wrong" if record["difficulty"] else "rule baseline right",
            "partition": record["partition"],
            "batch_id": record["batch_id"],
            "generator": GENERATOR,
        }
        if record.get("seed_source"):
            info["seed_source"] = record["seed_source"]
        if record.get("seed_model"):
            info["seed_model"] = {"name": record["seed_model"], "temperature": record["temperature"]}
        yield {
            "id": record["id"],
            "question": render_flow_question({k: record[k] for k in FLOW_FIELD_NAMES}),
            "answer": record["label"],
            "info": info,
        }


SYNTHETIC = SyntheticSpec(
    description="attack playbooks (port scan, brute force, C&C beaconing, exfiltration, DDoS) and benign IoT flows, "
    "plus perturbed flows of dataset/e1's train split; labels checked against each scenario's invariants; "
    "Parquet",
    batch_size=2000,  # feeds training: thousands a day
    read_seeds=read_seeds,
    make_generator=make_generator,
    kinds=("parquet", "json"),
    reads_dataset=True,
    real_with_real_dataset=True,
    table="flows",
    table_rows=table_rows,
)
