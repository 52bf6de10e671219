"""Flows from the network corpora (IoT-23, CIC-IDS-2017, UNSW-NB15 as OOD) normalised to Zeek
conn.log fields and curated into this environment's dataset ({id, question, answer, info}),
column-wise so a million flows curate in seconds rather than minutes.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from sv_env_network_logs.flows import FLOW_FIELD_NAMES, FLOW_FIELDS, GOLD_LABELS
from sv_shared.corpora import Curation, Normalised, SourceSpec, column, labels_of, normalize_text, refs, reject

SPLITS = ("train", "dev", "test")
_HEADER = "Classify this network flow (Zeek conn.log fields):"


def normalise_flows(spec: SourceSpec, frame: pd.DataFrame) -> Normalised:
    """Flows in the Zeek conn.log fields this environment renders (`columns`: Zeek field ->
    corpus column; fields a corpus does not have render as "-")."""
    out = pd.DataFrame(index=frame.index)
    for name in FLOW_FIELD_NAMES:
        values = column(frame, spec, name)
        if values is None:
            out[name] = None
            continue
        source_name = spec.columns[name]
        if source_name in spec.null_values:
            values = values.mask(values.astype(str).isin(spec.null_values[source_name]))
        if name in spec.scale:
            values = pd.to_numeric(values, errors="coerce") * spec.scale[name]
        out[name] = values
    assert spec.label is not None
    label_column = frame[spec.label.column] if spec.label.column else pd.Series(index=frame.index, dtype=object)
    label_list, dropped_list = labels_of(label_column, spec.label)
    labels = pd.Series(label_list, index=label_column.index, dtype=object)
    dropped = np.asarray(dropped_list, dtype=bool)
    out["label"] = labels
    scenario = frame[spec.scenario_column] if spec.scenario_column and spec.scenario_column in frame.columns else None
    out["scenario"] = scenario.astype(object).where(scenario.notna(), None) if scenario is not None else None
    out["_ref"] = refs(frame)
    unusable = labels.isna().to_numpy() & ~dropped
    no_fields = out[list(FLOW_FIELD_NAMES)].isna().all(axis=1).to_numpy()
    bad = unusable | no_fields
    rejects = [
        reject(spec.id, ref, f"unusable label {label_column.iloc[i]!r}" if unusable[i] else "no flow fields")
        for i, ref in zip(np.flatnonzero(bad), out["_ref"].to_numpy()[bad])
    ]
    keep = ~bad & ~dropped
    return Normalised(flows=out.loc[keep].reset_index(drop=True), rejects=rejects, n_filtered=int(dropped.sum()))


def _value_texts(values: pd.Series) -> list[str]:
    """`sv_env_network_logs.flows._format_value` over a column: None/NaN -> "-", floats in
    %.6g, anything else as str (integers of an int column stay integers)."""
    if values.isna().all():
        return ["-"] * len(values)
    if pd.api.types.is_bool_dtype(values.dtype) and values.dtype != object:
        return [str(v) for v in values.tolist()]
    if pd.api.types.is_integer_dtype(values.dtype):
        return ["-" if v is None or v is pd.NA else str(v) for v in values.astype(object).tolist()]
    if pd.api.types.is_float_dtype(values.dtype):
        return [f"{v:.6g}" if v == v else "-" for v in values.tolist()]
    out = []
    # pandas takes na_value=None; pandas-stubs admits no None
    for v in values.to_numpy(dtype=object, na_value=None).tolist():  # type: ignore[call-overload]
        if v is None or (isinstance(v, float) and v != v):
            out.append("-")
        elif isinstance(v, float):
            out.append(f"{v:.6g}")
        else:
            out.append(str(v))
    return out


def render_questions(flows: pd.DataFrame) -> list[str]:
    """`render_flow_question` for every row of `flows`, column by column (same text)."""
    questions = [_HEADER] * len(flows)
    for name, unit in FLOW_FIELDS:
        texts = _value_texts(flows[name]) if name in flows.columns else ["-"] * len(flows)
        suffix = f" {unit}" if unit else ""
        questions = [f"{q}\n{name}: {t}{suffix if suffix and t != '-' else ''}" for q, t in zip(questions, texts)]
    return questions


@dataclass
class FlowPart:
    """One corpus's flows, normalised (Zeek fields, `label` in Benign/Malicious, `scenario`, `_ref`)."""

    source: str
    flows: pd.DataFrame
    ood: bool = False


@dataclass
class CuratedFlows:
    splits: dict[str, pd.DataFrame]
    """train, dev, test (and ood): columns id, question, answer, info."""
    rejects: list[dict[str, Any]]
    n_input: int
    n_duplicates: int
    label_counts: dict[str, dict[str, int]] = field(default_factory=dict)
    bucket_counts: dict[str, int] = field(default_factory=dict)
    kept_by_source: dict[str, int] = field(default_factory=dict)


def _sha256_all(texts: Iterable[str]) -> list[str]:
    sha = hashlib.sha256
    return [sha(t.encode()).hexdigest() for t in texts]


def _objects(values: Any, n: int) -> np.ndarray:
    """A column as a numpy object array (None for missing): Python loops over pandas 3's
    Arrow-backed strings cost a microsecond per element more."""
    if values is None:
        return np.full(n, None, dtype=object)
    if isinstance(values, pd.Series):
        return values.to_numpy(dtype=object, na_value=None)  # type: ignore[call-overload]  # as above
    return np.asarray(values, dtype=object)


def curate_flows(
    parts: Sequence[FlowPart], *, sample: bool, dev_frac: float = 0.1, test_frac: float = 0.2
) -> CuratedFlows:
    """Render, de-duplicate (by the normalised text: exact copies and re-cased or re-spaced
    ones) and split the flows of every part; OOD parts go to `ood`. A duplicate with a
    different label is recorded as a reject; the first occurrence is kept."""
    questions: list[str] = []
    columns: dict[str, list[np.ndarray]] = {"answer": [], "scenario": [], "ref": [], "source": [], "ood": []}
    for part in parts:
        flows, n = part.flows, len(part.flows)
        questions.extend(render_questions(flows))
        columns["answer"].append(_objects(flows["label"], n))
        columns["scenario"].append(_objects(flows["scenario"] if "scenario" in flows else None, n))
        columns["ref"].append(_objects(flows["_ref"] if "_ref" in flows else None, n))
        columns["source"].append(np.full(n, part.source, dtype=object))
        columns["ood"].append(np.full(n, part.ood, dtype=bool))
    arrays = {name: np.concatenate(chunks) if chunks else np.empty(0, dtype=object) for name, chunks in columns.items()}
    answer, scenario, ref, source = arrays["answer"], arrays["scenario"], arrays["ref"], arrays["source"]
    n_input = len(questions)
    exact = np.asarray(_sha256_all(questions), dtype=object)
    norm = np.asarray(_sha256_all(normalize_text(q) for q in questions), dtype=object)
    codes, _ = pd.factorize(norm)  # one code per normalised text, in order of first appearance
    first_row = np.full(codes.max() + 1 if n_input else 0, -1, dtype=np.int64)
    order = np.arange(n_input)
    first_row[codes[::-1]] = order[::-1]  # the earliest row of each code wins (last write)
    first_of_row = first_row[codes] if n_input else order
    duplicate = first_of_row != order
    first_label = answer[first_of_row] if n_input else answer
    conflict = duplicate & (answer != first_label)
    rejects = [
        {"source": s, "ref": r, "reason": f"duplicate of an earlier flow with another label ({f!r} vs {a!r})"}
        for s, r, f, a in zip(source[conflict], ref[conflict], first_label[conflict], answer[conflict])
    ]
    keep = ~duplicate
    k_questions = [q for q, k in zip(questions, keep) if k]
    k_answer, k_scenario, k_source = answer[keep], scenario[keep], source[keep]
    k_exact, k_norm, ood = exact[keep], norm[keep], arrays["ood"][keep].astype(bool)
    buckets = np.array([int(h[:12], 16) for h in k_norm], dtype=np.float64) / float(16**12)
    split = np.where(buckets < test_frac, "test", np.where(buckets < test_frac + dev_frac, "dev", "train")).astype(
        object
    )
    bucket_counts = {name: int(((split == name) & ~ood).sum()) for name in SPLITS}
    split[ood] = "ood"
    ids = np.array([f"{s}-{h[:16]}" for s, h in zip(k_source, k_exact)], dtype=object)
    infos = np.empty(len(ids), dtype=object)
    for i, (src, h, nh, where, scen) in enumerate(zip(k_source, k_exact, k_norm, split, k_scenario)):
        info = {"source": src, "sample": sample, "content_hash": h, "normalized_hash": nh, "split": where}
        if scen is not None and scen == scen and str(scen).strip():
            info["scenario"] = str(scen)
        infos[i] = info
    k_questions_arr = np.asarray(k_questions, dtype=object)
    names = [*SPLITS, "ood"] if ood.any() else list(SPLITS)
    splits = {}
    for name in names:
        mask = split == name
        splits[name] = pd.DataFrame(
            {
                "id": pd.Series(ids[mask], dtype=object),
                "question": pd.Series(k_questions_arr[mask], dtype=object),
                "answer": pd.Series(k_answer[mask], dtype=object),
                "info": pd.Series(infos[mask], dtype=object),
            }
        )
    counts = {
        name: {label: int((rows["answer"] == label).sum()) for label in GOLD_LABELS} for name, rows in splits.items()
    }
    kept_by_source = {str(k): int(v) for k, v in zip(*np.unique(k_source.astype(str), return_counts=True))}
    return CuratedFlows(splits, rejects, n_input, int(duplicate.sum()), counts, bucket_counts, kept_by_source)


def write_rows(path: Path, rows: pd.DataFrame, chunk: int = 100_000) -> None:
    """JSONL, one example per line: pandas' C JSON writer, a chunk at a time (it builds each
    chunk's text in memory)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as handle:
        for start in range(0, len(rows), chunk):
            text = rows.iloc[start : start + chunk].to_json(orient="records", lines=True, force_ascii=False)
            handle.write(text if text.endswith("\n") else text + "\n")


def curate(
    parts: Sequence[tuple[SourceSpec, Normalised]], out: Path, *, sample: bool, dev_frac: float, test_frac: float
) -> Curation:
    """The dataset's curation (`CorpusSpec.curate`): every corpus's flows curated together,
    each non-empty split written as `<split>.jsonl` under `out`."""
    curated = curate_flows(
        [FlowPart(spec.id, result.flows, spec.ood) for spec, result in parts],
        sample=sample,
        dev_frac=dev_frac,
        test_frac=test_frac,
    )
    files: dict[str, Path] = {}
    for name, rows in curated.splits.items():
        if len(rows):
            files[name] = out / f"{name}.jsonl"
            write_rows(files[name], rows)
    return Curation(
        files=files,
        split_sizes={name: len(rows) for name, rows in curated.splits.items()},
        rejects=curated.rejects,
        label_counts=curated.label_counts,
        bucket_counts=curated.bucket_counts,
        n_corpus_rows=curated.n_input,
        n_duplicates_dropped=curated.n_duplicates,
        kept_by_source=curated.kept_by_source,
    )
