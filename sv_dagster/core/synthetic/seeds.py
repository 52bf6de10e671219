"""What the generators start from, read from files: a curated dataset's train split, an
earlier synthetic batch, eval results holding defender failures. Every unusable line is a
`Reject` naming its file and line; the batch goes on without it.

Seeds come from TRAIN splits only: a synthetic variant of a test example in training data
would leak into the evaluation. Where a generator's seeds are the bundled set that is also
an environment's test split (E5's behaviors, E6's pairing with them), metadata says so
(`overlaps_test`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from sv_dagster.core.synthetic.batch import Reject

TRAIN = "train.jsonl"


def _seed_reject(where: str, reason: str) -> Reject:
    return Reject(id=f"seed:{where}", stage="seed", reason=reason, source=where)


def read_jsonl_rows(path: Path, rejects: list[Reject]) -> list[tuple[str, dict[str, Any]]]:
    """(path:line, row) for every JSON object line; other lines become rejects."""
    from sv_shared.jsonl import json_objects

    errors: list[str] = []
    rows = [(where, row) for _, where, row in json_objects(path, errors)]
    for error in errors:
        where, _, reason = error.partition(": ")
        rejects.append(_seed_reject(where, reason))
    return rows


def e1_seeds(dataset_dir: Path | None) -> tuple[Any, list[str], dict[str, Any], list[Reject]]:
    """Seed flows for perturbation from E1's train split: each row's question parsed back to
    its flow fields (`parse_flow_question`), its answer as the label, its `info.scenario`.
    (columns or None, source per row, facts, rejects)."""
    from sv_env_network_logs.flows import INT_LABELS, parse_flow_question
    from sv_env_network_logs.synthetic import seed_columns

    rejects: list[Reject] = []
    path = dataset_dir / TRAIN if dataset_dir else None
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
    cols, problems = seed_columns(flows)
    bad = {i for i, _ in problems}
    for i, reason in problems:
        rejects.append(_seed_reject(sources[i], reason))
    kept = [src for i, src in enumerate(sources) if i not in bad]
    return (cols if kept else None), kept, {"source": str(path), "seed_flows": len(kept)}, rejects


def e2_seeds(dataset_dir: Path | None, include_bundled: bool) -> tuple[list[Any], dict[str, Any], list[Reject]]:
    """The generator's clean templates, the clean rows of E2's train split, and (only when
    asked) the bundled clean files, which are E2's test split."""
    from sv_env_config_verification.synthetic import dataset_seeds, default_seeds

    rejects: list[Reject] = []
    seeds = default_seeds(include_bundled=include_bundled)
    path = dataset_dir / TRAIN if dataset_dir else None
    if path is not None and path.is_file():
        errors: list[str] = []
        seeds += dataset_seeds([str(path)], errors)
        rejects += [_seed_reject(str(path), error) for error in errors]
    return seeds, {"source": str(path) if path is not None and path.is_file() else None, "seed_files": len(seeds),
                   "includes_bundled_test_files": include_bundled, "overlaps_test": include_bundled}, rejects


def e5_roots(dataset_dir: Path | None) -> tuple[list[Any], dict[str, Any], list[Reject]]:
    """Goal-tree roots: E5's train split when the curated dataset has one, else the bundled
    behaviors (which are also E5's test split: `overlaps_test`)."""
    from sv_env_redteam_attack.synthetic import bundled_roots, roots_from_rows

    rejects: list[Reject] = []
    path = dataset_dir / TRAIN if dataset_dir else None
    if path is not None and path.is_file():
        rows = read_jsonl_rows(path, rejects)
        roots = roots_from_rows([row for _, row in rows], str(path))
        if roots:
            return roots, {"source": str(path), "roots": len(roots), "overlaps_test": False}, rejects
    roots = bundled_roots()
    return roots, {"source": "bundled behaviors (sv_env_redteam_attack)", "roots": len(roots), "overlaps_test": True}, rejects


def failure_seeds(eval_dirs: Sequence[Path], tournament_dirs: Sequence[Path] = ()) -> tuple[list[Any], dict[str, Any], list[Reject]]:
    """Earlier defender failures, from eval folders' results.jsonl: E6 conversations with an
    unsafe reply (category and framing of the probe, the E5 behavior it pairs with) and E5
    dialogues whose target replied unsafely (the behavior's id and category). Tournament
    folders contribute the evals of their rounds. Only ids, categories and framings are
    read: never a text (unsafe texts are stored only as hash markers anyway)."""
    from sv_env_redteam_attack.synthetic import FailureSeed

    rejects: list[Reject] = []
    dirs = list(eval_dirs)
    for folder in tournament_dirs:
        path = Path(folder) / "tournament.json"
        if not path.is_file():
            continue
        for round_ in json.loads(path.read_text(encoding="utf-8")).get("rounds", []):
            dirs += [Path(p) for p in (round_.get("attack_eval"), round_.get("defense_eval")) if p]
    failures: list[Any] = []
    read = []
    for folder in dict.fromkeys(dirs):
        path = Path(folder) / "results.jsonl"
        if not path.is_file():
            continue
        read.append(str(path))
        for where, row in read_jsonl_rows(path, rejects):
            info, details = row.get("info") or {}, row.get("details") or {}
            if row.get("error"):
                continue
            if details.get("unsafe_replies"):  # E6: the defender complied unsafely
                paired = info.get("paired_attack") or {}
                failures.append(FailureSeed(paired.get("behavior_id"), info.get("category"), info.get("framing"), where))
            elif details.get("success"):  # E5: the target (a defender) replied unsafely
                behavior = info.get("behavior") or {}
                failures.append(FailureSeed(behavior.get("id"), behavior.get("category") or row.get("answer"), None, where))
    return failures, {"results_read": read, "failures": len(failures)}, rejects


def e6_attacks(e5_batch_dir: Path | None) -> tuple[list[Any], dict[str, Any]]:
    """What E6's probes pair with: the accepted rows of the same partition's synthetic E5
    batch (reviewers' rejections excluded), else the bundled E5 behaviors."""
    from sv_env_redteam_attack.behaviors import generate as bundled_behaviors
    from sv_env_redteam_defense.synthetic import attacks_from_rows

    from sv_dagster.core.synthetic.review import accepted_examples

    if e5_batch_dir is not None and (Path(e5_batch_dir) / "metadata.json").is_file():
        accepted = accepted_examples(Path(e5_batch_dir))
        attacks = attacks_from_rows(accepted.rows, f"synthetic/e5:{accepted.batch_id}")
        if attacks:
            return attacks, {"source": f"synthetic/e5 batch {accepted.batch_id}", "attacks": len(attacks),
                             "excluded_by_review": accepted.excluded, "decisions": accepted.decision_ids,
                             "overlaps_test": False}
    attacks = attacks_from_rows(bundled_behaviors(), "bundled:e5")
    return attacks, {"source": "bundled E5 behaviors", "attacks": len(attacks), "overlaps_test": True}
