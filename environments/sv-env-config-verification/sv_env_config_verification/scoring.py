"""Reward arithmetic for E2, as pure functions of violation ids and severities.

Violations are compared by id ("<tool>/<rule>"); each id counts with the weight of its
severity (low 1, medium 2, high 3 by default), so missing a privileged container costs
more than missing a resource limit.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from sv_env_config_verification.tools import SCANNED_TASK_FILE

DEFAULT_SEVERITY_WEIGHTS = {"low": 1.0, "medium": 2.0, "high": 3.0}


def _weight(severity: str, weights: Mapping[str, float]) -> float:
    return weights.get(severity, weights.get("medium", 2.0))


@dataclass(frozen=True)
class DetectionScore:
    precision: float
    recall: float
    f1: float


def detection_score(
    predicted: Mapping[str, str],
    oracle: Mapping[str, str],
    weights: Mapping[str, float] = DEFAULT_SEVERITY_WEIGHTS,
) -> DetectionScore:
    """Severity-weighted precision/recall/F1 of predicted ids against the oracle's.

    A true positive counts with the oracle's severity; a false positive with the severity
    the answer claimed. Nothing predicted gives precision 1; an empty oracle gives recall 1;
    a clean file answered with no violations scores F1 = 1.
    """
    if not predicted and not oracle:
        return DetectionScore(1.0, 1.0, 1.0)
    tp = sum(_weight(sev, weights) for vid, sev in oracle.items() if vid in predicted)
    fp = sum(_weight(sev, weights) for vid, sev in predicted.items() if vid not in oracle)
    total = sum(_weight(sev, weights) for sev in oracle.values())
    precision = tp / (tp + fp) if tp + fp > 0 else 1.0
    recall = tp / total if total > 0 else 1.0
    f1 = 2 * precision * recall / (precision + recall) if tp > 0 else 0.0
    return DetectionScore(precision, recall, f1)


@dataclass(frozen=True)
class PatchOutcome:
    status: str
    """"empty", "failed" (did not apply / patched file unscannable) or "applied"."""
    removed: frozenset[str] = frozenset()
    introduced: frozenset[str] = frozenset()
    error: str | None = None


def patch_outcome(oracle: Iterable[str], after: Iterable[str]) -> PatchOutcome:
    before, remaining = set(oracle), set(after)
    return PatchOutcome("applied", frozenset(before - remaining), frozenset(remaining - before))


def patch_score(
    outcome: PatchOutcome,
    oracle: Mapping[str, str],
    after: Mapping[str, str],
    weights: Mapping[str, float] = DEFAULT_SEVERITY_WEIGHTS,
    new_finding_penalty: float = 1.0,
) -> float:
    """Weight of oracle violations the patch removed, minus `new_finding_penalty` x weight
    of findings it introduced, over the oracle's total weight, clipped to [0, 1].

    A patch that fails scores 0. An empty patch scores 0 when there was something to fix,
    and 1 on a clean file (nothing to fix, nothing broken); a non-empty patch on a clean
    file scores 1 unless it introduces findings.
    """
    if outcome.status == "failed":
        return 0.0
    total = sum(_weight(sev, weights) for sev in oracle.values())
    if outcome.status == "empty":
        return 1.0 if total == 0 else 0.0
    added = sum(_weight(after[vid], weights) for vid in outcome.introduced)
    if total == 0:
        return 0.0 if added > 0 else 1.0
    gained = sum(_weight(oracle[vid], weights) for vid in outcome.removed)
    return min(1.0, max(0.0, (gained - new_finding_penalty * added) / total))


def patch_success(outcome: PatchOutcome) -> bool:
    """Applied, removed at least one violation, introduced none."""
    return outcome.status == "applied" and bool(outcome.removed) and not outcome.introduced


def _task_file_scans(tool_texts: Iterable[str]) -> list[dict]:
    """The tool messages that report a scan of the task's file as given (not of content the
    model passed in), parsed; anything else (errors, other shapes) is left out."""
    scans = []
    for text in tool_texts:
        try:
            body = json.loads(text)
        except ValueError:
            continue
        if isinstance(body, dict) and body.get("scanned") == SCANNED_TASK_FILE and not body.get("error"):
            scans.append(body)
    return scans


def grounding_score(answer_ids: Iterable[str], tool_texts: Iterable[str]) -> float:
    """Share of the answer's violation ids that appear verbatim in the tool messages of
    the trace; claims made without any tool message score 0.0. An answer that claims
    nothing is grounded (1.0) only when a tool scanned the task's file and no scan of it
    reported a finding: "nothing found" must be what the tools said, not a way to collect
    this reward without calling one."""
    ids = list(dict.fromkeys(answer_ids))
    texts = [t for t in tool_texts if t]
    if not ids:
        scans = _task_file_scans(texts)
        return 1.0 if scans and not any(scan.get("findings") for scan in scans) else 0.0
    if not texts:
        return 0.0

    def cited(vid: str) -> bool:
        # A substring test first: an id no tool message contains (a reply's id can be a
        # megabyte) is never compiled into a regex.
        if not any(vid in text for text in texts):
            return False
        # Whole ids only: "opa/k8s-host-path" is not cited by "opa/k8s-host-path-volume".
        pattern = re.compile(r"(?<![\w/.-])" + re.escape(vid) + r"(?![\w/.-])")
        return any(pattern.search(text) for text in texts)

    return sum(1 for vid in ids if cited(vid)) / len(ids)
