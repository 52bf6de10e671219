"""How the safety judges' and the refusal detector's agreement reads, wherever it is printed
(under E5/E6 tables and tournaments, in reports and the safety review's record): each judge's
figures with 95% CIs, "NOT VALIDATED" beside a judge below the external kappa threshold, PyRIT's
published figures on the same rows, and the judge chosen on development data."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sv_dagster.core.evals.judge_validation import VALIDATED_KAPPA, external_of, is_validated
from sv_dagster.core.reporting.figures import CONSOLE_CI_DIGITS, fmt, with_ci

HEADLINE_FIGURES = (("accuracy", "accuracy"), ("kappa", "cohen_kappa"), ("unsafe recall", "unsafe_recall"))


def agreement_with_ci(report: Mapping[str, Any], key: str) -> str:
    """One agreement figure with its CI; key "inter" reads a between-judges block."""
    ci = (report.get("ci95") or {}).get(key) if key != "inter" else report.get("ci95")
    return with_ci(report.get("cohen_kappa" if key == "inter" else key), ci, CONSOLE_CI_DIGITS)


def agreement_figures(report: Mapping[str, Any], shown: tuple[tuple[str, str], ...] = HEADLINE_FIGURES) -> str:
    return " ".join(f"{title} {agreement_with_ci(report, key)}" for title, key in shown)


def validation_label(report: Mapping[str, Any]) -> str:
    """ "validated: external kappa 0.62 >= 0.4" or "NOT VALIDATED: ...why..."."""
    if "error" in report:
        return f"NOT VALIDATED: {report['error']}"
    kappa = report.get("cohen_kappa")
    if is_validated(report):
        return f"validated: external kappa {kappa:.3f} >= {VALIDATED_KAPPA}"
    return f"NOT VALIDATED: external kappa {fmt(kappa)} < {VALIDATED_KAPPA}"


def judge_name(ident: str, block: Mapping[str, Any] | None) -> str:
    """The judge's ident, with "[NOT VALIDATED: ...]" when it is not."""
    report = external_of(block, ident)
    return ident if is_validated(report) else f"{ident} [{validation_label(report)}]"


def external_line(block: Mapping[str, Any] | None, ident: str) -> str:
    report = external_of(block, ident)
    if "error" in report:
        return f"{ident} on the external test: {validation_label(report)}"
    return (
        f"{ident} on the external test (PyRIT's human labels, never tuned on, n={report.get('n')}, 95% CI): "
        f"{agreement_figures(report)}; {validation_label(report)}"
    )


def published_line(block: Mapping[str, Any] | None) -> str | None:
    published = ((block or {}).get("external") or {}).get("published")
    if not published:
        return None
    if "error" in published:
        return f"PyRIT's published scorer figures: not read ({published['error']})"
    best = published["best"]
    return (
        f"PyRIT's own {published['n_scorers']} scorers on the same rows (objective_achieved_metrics.jsonl): "
        f"accuracy {published['accuracy_min']:.3f}-{published['accuracy_max']:.3f}; best {best['chain']} "
        f"accuracy {best['accuracy']:.3f}, unsafe recall {best['recall']:.3f}"
    )


def chosen_line(block: Mapping[str, Any] | None, scoring: str) -> str | None:
    chosen = (block or {}).get("chosen")
    if not chosen:
        return None
    if "error" in chosen:
        return f"judge chosen on development data: {chosen['error']}"
    development = chosen["development"]
    note = "" if chosen["classifier"] == scoring else f" (not the judge that scored here, {scoring})"
    return (
        f"judge chosen on development data (PyRIT harm rows, test duplicates removed, n={development.get('n')}): "
        f"{chosen['classifier']}, development kappa {agreement_with_ci(development, 'cohen_kappa')}{note}"
    )


def refusal_line(block: Mapping[str, Any] | None) -> str | None:
    """The line under E6's tables naming the refusal detector and its held-out agreement."""
    if not block:
        return None
    if "error" in block:
        return f"refusals detected by {block.get('detector', 'sv_shared.redteam.is_refusal')}: {block['error']}"
    held = block["held_out"]
    shown = agreement_figures(
        held,
        (
            ("accuracy", "accuracy"),
            ("kappa", "cohen_kappa"),
            ("refusal recall", "refusal_recall"),
            ("refusal precision", "refusal_precision"),
        ),
    )
    return (
        f"refusals detected by {block['detector']}; agreement on held-out hand labels of this project's replies "
        f"(n={held['n']}, {held['n_refusals']} refusals, 95% CI): {shown}"
    )


def classifier_line(classifier: str, agreement: dict[str, Any]) -> str:
    """Agreement on the labelled set's frozen part only (never tuned on), 95% CIs, then on the
    external test (PyRIT's human labels; "NOT VALIDATED" below kappa 0.4); the judge measured
    beside it (the rules beside the learned default, the learned judge beside any other) with
    its own figures; PyRIT's published scorer figures on the same rows; the judge chosen on
    development data, with its development kappa."""
    if "error" in agreement:
        return f"judged by {classifier}: {agreement['error']}"
    lines = [
        f"judged by {judge_name(classifier, agreement)}; agreement on the labelled set's frozen part (never tuned "
        f"on, n={agreement.get('n')}, 95% CI): {agreement_figures(agreement)}"
    ]
    if agreement.get("frozen_record_problems"):
        lines[0] += " (WARNING: frozen record inconsistent, see frozen_record_problems)"
    lines.append(external_line(agreement, classifier))
    others = [(name, r) for name, r in (agreement.get("judges") or {}).items() if name != classifier]
    if others:
        name, other = others[0]
        inter = agreement.get("inter_judge") or {}
        side = (
            f"{name} (not scoring): {agreement_figures(other)}" if "error" not in other else f"{name}: {other['error']}"
        )
        lines.append(f"{side}; between the judges kappa {agreement_with_ci(inter, 'inter')}")
        lines.append(external_line(agreement, name))
    lines += [line for line in (published_line(agreement), chosen_line(agreement, classifier)) if line]
    return "\n  ".join(lines)


def review_validation_lines(classifier: str, validation: dict[str, Any]) -> list[str]:
    """The safety review record's lines on how far its judge can be trusted (a record's
    `classifier_validation`; none when it has none)."""
    if not validation:
        return []
    if "error" in validation:
        return [f"- judge validation: NOT VALIDATED: {validation['error']}"]
    lines = [
        f"- judge validation: {validation['status']}",
        f"  - labelled set's frozen part (never tuned on, n={validation['frozen'].get('n')}, 95% CI): "
        f"{agreement_figures(validation['frozen'])}",
    ]
    external = validation["external"]
    if "error" not in external:
        lines.append(
            f"  - external test (PyRIT's human labels, never tuned on, n={external.get('n')}, 95% CI): "
            f"{agreement_figures(external)}"
        )
    published = validation.get("published") or {}
    if "best" in published:
        lines.append(
            f"  - PyRIT's own {published['n_scorers']} scorers on the same rows: accuracy "
            f"{published['accuracy_min']:.3f}-{published['accuracy_max']:.3f}"
        )
    if not validation["validated"]:
        lines.append(f"  - the rates below were judged by {classifier}, which is NOT VALIDATED: read them as such")
    return lines
