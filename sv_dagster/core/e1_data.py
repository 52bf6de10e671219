"""E1 data: the IoT-23 corpus loader and the curated, split E1 dataset.

Corpus sources:
  "sample"              the bundled SAMPLE (synthetic flows in the IoT-23 schema; offline default)
  "hf" | "hf:<repo>"    the real Hugging Face dataset (default repo 19kmunz/iot-23-preprocessed)
  <path>                a local copy: .parquet, .jsonl or .csv with the same columns
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
from sv_env_network_logs.flows import FLOW_FIELD_NAMES, GOLD_LABELS, INT_LABELS, render_flow_question

from sv_dagster.core.paths import SAMPLES_DIR

IOT23_HF_REPO = "19kmunz/iot-23-preprocessed"
IOT23_SAMPLE_PATH = SAMPLES_DIR / "iot23-preprocessed.sample.jsonl"
SPLITS = ("train", "dev", "test")


class CorpusError(ValueError):
    """A corpus source that cannot be read; the message names the source."""


@dataclass(frozen=True)
class CorpusInfo:
    source_id: str
    location: str
    revision: str | None
    license: str
    sample: bool
    loader: str


def load_iot23(source: str = "sample", *, revision: str = "main", max_rows: int | None = None) -> tuple[pd.DataFrame, CorpusInfo]:
    """The flows of one IoT-23 source, validated to have every column E1 needs."""
    if source == "sample":
        frame = pd.read_json(IOT23_SAMPLE_PATH, lines=True)
        info = CorpusInfo("iot23", str(IOT23_SAMPLE_PATH), None, "synthetic sample (project-written)", True, "jsonl")
    elif source == "hf" or source.startswith("hf:"):
        repo = source.partition(":")[2] or IOT23_HF_REPO
        import datasets  # imported here: heavy, and only the online path needs it

        try:
            split = "train" if max_rows is None else f"train[:{max_rows}]"
            frame = datasets.load_dataset(repo, revision=revision, split=split).to_pandas()
        except Exception as exc:  # network, auth, missing revision: all name the repo
            raise CorpusError(f"cannot load Hugging Face dataset {repo}@{revision}: {type(exc).__name__}: {exc}") from exc
        info = CorpusInfo("iot23", f"hf://{repo}", revision, "see dataset card (IoT-23: CC BY 4.0)", False, "datasets")
    else:
        path = Path(source).expanduser()
        if not path.is_file():
            raise CorpusError(f"IoT-23 source file not found: {path}")
        readers = {".parquet": pd.read_parquet, ".jsonl": lambda p: pd.read_json(p, lines=True), ".csv": pd.read_csv}
        reader = readers.get(path.suffix.lower())
        if reader is None:
            raise CorpusError(f"{path}: unsupported file type {path.suffix!r} (use .parquet, .jsonl or .csv)")
        frame = reader(path)
        info = CorpusInfo("iot23", str(path), None, "local copy (see its source)", False, path.suffix.lstrip("."))
    missing = [name for name in (*FLOW_FIELD_NAMES, "label") if name not in frame.columns]
    if missing:
        raise CorpusError(f"IoT-23 source {info.location} lacks column(s) {missing}")
    if max_rows is not None:
        frame = frame.head(max_rows)
    return frame.reset_index(drop=True), info


def _label(value: Any) -> str | None:
    if isinstance(value, (int, float)) and not isinstance(value, bool) and value in INT_LABELS:
        return INT_LABELS[int(value)]
    if isinstance(value, str):
        by_lower = {label.lower(): label for label in GOLD_LABELS}
        # IoT-23 detailed labels read like "Malicious   PartOfAHorizontalPortScan".
        return by_lower.get(value.strip().split()[0].lower()) if value.strip() else None
    return None


def _bucket(content_hash: str) -> float:
    return int(content_hash[:12], 16) / float(16**12)


def split_for(content_hash: str, dev_frac: float, test_frac: float) -> str:
    """Stable split from the content hash: an example never changes split when rows are
    added or removed elsewhere."""
    bucket = _bucket(content_hash)
    return "test" if bucket < test_frac else "dev" if bucket < test_frac + dev_frac else "train"


@dataclass
class CuratedE1:
    splits: dict[str, list[dict[str, Any]]]
    rejects: list[dict[str, Any]]
    n_input: int
    n_duplicates: int
    label_counts: dict[str, dict[str, int]] = field(default_factory=dict)


def curate_e1(flows: pd.DataFrame, *, sample: bool, dev_frac: float = 0.1, test_frac: float = 0.2) -> CuratedE1:
    """Normalise flows to the E1 schema ({id, question, answer, info}), drop exact
    duplicates by content hash, split by hash. Unusable rows are recorded, not fatal."""
    splits: dict[str, list[dict[str, Any]]] = {name: [] for name in SPLITS}
    rejects: list[dict[str, Any]] = []
    seen: dict[str, str] = {}
    duplicates = 0
    for index, record in enumerate(flows.to_dict(orient="records")):
        record = {k: (None if isinstance(v, float) and pd.isna(v) else v) for k, v in record.items()}
        label = _label(record.get("label"))
        if label is None:
            rejects.append({"row": index, "reason": f"unusable label {record.get('label')!r}"})
            continue
        if all(record.get(name) is None for name in FLOW_FIELD_NAMES):
            rejects.append({"row": index, "reason": "no flow fields"})
            continue
        question = render_flow_question(record)
        content_hash = hashlib.sha256(question.encode()).hexdigest()
        if content_hash in seen:
            duplicates += 1
            if seen[content_hash] != label:
                rejects.append({"row": index, "reason": f"duplicate flow with conflicting label {label}"})
            continue
        seen[content_hash] = label
        split = split_for(content_hash, dev_frac, test_frac)
        info = {"source": "iot23", "sample": sample, "content_hash": content_hash, "split": split}
        if record.get("scenario"):
            info["scenario"] = record["scenario"]
        splits[split].append({"id": f"iot23-{content_hash[:12]}", "question": question, "answer": label, "info": info})
    counts = {
        name: {label: sum(1 for row in rows if row["answer"] == label) for label in GOLD_LABELS}
        for name, rows in splits.items()
    }
    return CuratedE1(splits, rejects, len(flows), duplicates, counts)


def write_jsonl(path: Path, rows: list[dict[str, Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as handle:
        for row in rows:
            handle.write(json.dumps(row, sort_keys=True, default=str) + "\n")
