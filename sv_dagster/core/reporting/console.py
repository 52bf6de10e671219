"""What the command line prints of finished runs, from plain summaries and records: an
environment's eval table, the safety judge's agreement, a tournament's rounds and a training
chain's stages. No instance reads here (sv_dagster.instance.outcome turns a run into these)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from sv_dagster.core.artifacts.paths import PROJECT_ROOT
from sv_dagster.core.reporting.figures import CONSOLE_CI_DIGITS, ci_text, fmt, format_table, with_ci
from sv_dagster.core.reporting.judges import classifier_line, refusal_line


def shown(path: Path) -> Path:
    """A path as printed: relative to the project when it is inside it."""
    return path.relative_to(PROJECT_ROOT) if path.is_relative_to(PROJECT_ROOT) else path


def subset_note(run_dir: Path) -> str:
    """` (24 of the 49 test examples, drawn with seed 42)` for an eval of a subset, else ''."""
    metadata = json.loads((run_dir / "metadata.json").read_text())
    dataset = metadata["dataset"]
    n, size = dataset["n_examples"], dataset.get("split_size")
    if size is None or n >= size:
        return ""
    return f" ({n} of the {size} {dataset.get('split', '?')} examples, drawn with seed {metadata.get('seed')})"


def eval_table(env: Any, entries: list[tuple[dict[str, Any], Path]]) -> str:
    """An environment's eval table: a row per model, or where some test rows come from a
    test-only corpus, a row per model and source (`by_source`); for an environment with
    reference policies, their rows after the models' and each model's margin over the best of
    them; then the tables' notes (a source's from the model that scored most of its rows)."""
    from sv_dagster.core.evals.references import margin_text, table_rows

    models = [{**summary, "vs_ref": margin_text(summary)} for summary, _ in entries]
    titles = {key: title for title, key in env.columns} | {"mean_reward": "mean reward"}
    references, notes = table_rows(((summary, subset_note(path)) for summary, path in entries), titles)
    by: tuple[tuple[str, str], ...] = ()
    if any(summary.get("by_source") for summary in models):
        models, source_notes = _rows_by_source(models)
        by, notes = (("source", "source"),), [*notes, *source_notes]
    columns = (*env.columns, ("vs best ref", "vs_ref")) if references else env.columns
    table = format_table([*models, *references], columns, by=by)
    return "\n".join([table, *(f"  {note}" for note in notes)])


def _rows_by_source(summaries: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[str]]:
    """A row per model and test source (the bundled task set first), and each source's notes
    from the model that scored most of its rows."""
    from sv_dagster.core.evals.summary import BUNDLED_SOURCE

    rows: list[dict[str, Any]] = []
    notes: dict[str, tuple[int, list[str]]] = {}
    for summary in summaries:
        groups = summary.get("by_source") or {BUNDLED_SOURCE: summary}
        for source, group in sorted(groups.items(), key=lambda item: (item[0] != BUNDLED_SOURCE, item[0])):
            rows.append({**group, "model": summary.get("model"), "source": source})
            if group.get("table_notes") and group.get("n_examples", 0) > notes.get(source, (0, []))[0]:
                notes[source] = (group["n_examples"], list(group["table_notes"]))
    return rows, [f"{source}: {note}" for source, (_, texts) in notes.items() for note in texts]


def tournament_text(path: Path) -> str:
    data = json.loads((path / "tournament.json").read_text())
    attack, _, defense = (data.get("pair") or "<->").partition("<->")
    lines = [
        f"\n== tournament: {attack} attacker {data['attacker']['name']} vs {defense} defender "
        f"{data['defender']['name']}" + (" (SAMPLE data)" if data.get("sample", True) else "")
    ]
    rows = [
        {
            "round": r["round"],
            "n_examples": r["n_behaviors"],
            "success": r["attacker_success_rate"],
            "ci": ci_text(r["attacker_success_ci95"], CONSOLE_CI_DIGITS) if r["attacker_success_ci95"] else "-",
            "known": r["known_attacks"],
            "unsafe": r["defender_unsafe_rate"],
            "over": r["defender_over_refusal_rate"],
        }
        for r in data["rounds"]
    ]
    lines.append(
        format_table(
            rows,
            (
                ("attacker success", "success"),
                ("95% CI", "ci"),
                ("known attacks", "known"),
                ("defender unsafe", "unsafe"),
                ("over-refusal", "over"),
            ),
            first=("round", "round"),
        )
    )
    lines.append(f"  {shown(path)}/{{tournament.json,success_curve.png}}")
    lines.append("  " + classifier_line(data.get("classifier"), data.get("classifier_agreement") or {}))
    refusals = refusal_line(data.get("refusal_detector"))
    if refusals:
        lines.append("  " + refusals)
    return "\n".join(lines)


LABEL_TRAINING_COLUMNS = (("valid JSON", "format_rate"), ("accuracy", "accuracy"), ("ECE", "ece"))
"""What training moves in a labelling environment: the answer's format, its label, its confidence."""


def training_columns(env_short: str) -> tuple[tuple[str, str], ...]:
    """Mean reward, then valid JSON, accuracy and ECE for a labelling environment, and for any
    other its eval table's own headline metrics (a dialogue has no JSON or label to count)."""
    from sv_dagster.core.envs import ENVS
    from sv_dagster.core.reporting.reports import headline_columns

    rest = LABEL_TRAINING_COLUMNS if ENVS[env_short].positive_label else tuple(headline_columns(env_short))
    return (("mean reward", "mean_reward"), *rest)


def training_row(summary: dict[str, Any], name: str, columns: tuple[tuple[str, str], ...]) -> dict[str, Any]:
    def cell(key: str) -> str:
        value = summary.get(key)
        return with_ci(value, (summary.get("ci95") or {}).get(key) if value is not None else None, CONSOLE_CI_DIGITS)

    return {"model": name, "n_examples": summary["n_examples"], **{key: cell(key) for _, key in columns}}


def training_text(
    env_short: str,
    rows: list[dict[str, Any]],
    stages: list[tuple[str, dict[str, Any]]],
    review: dict[str, Any] | None,
) -> str:
    """Each trained stage on the dev split as it finished, then base -> SFT -> RLFT on the
    held-out test split, with 95% bootstrap CIs; what each stage cost; the review's verdict
    and how to sign off. `rows`: the test evals' summaries in stage order; `stages`: each
    checkpoint's name and recorded values; `review`: the safety review's recorded values."""
    from sv_dagster.core.evals.references import REFERENCE_PREFIX

    lines = [f"\n== training: {env_short} base -> SFT -> RLFT (GRPO), 95% bootstrap CIs"]
    base = next((values.get("base_model") for _, values in stages), None)
    model = {"tiny": "the tiny model built here (random init)"}.get(str(base), base)
    if any(r.get("sample") for r in rows):
        lines.append(f"DATA: SAMPLE corpus rows plus the synthetic batch; the model: {model}")
    elif model:
        lines.append(f"the model: {model}")
    columns = training_columns(env_short)
    dev = [
        training_row(json.loads(Path(evaluated["summary"]).read_text()), stage, columns)
        for stage, values in stages
        if (evaluated := values.get("dev_eval")) and evaluated.get("summary")
    ]
    if dev:
        lines += ["dev split, each stage as it finished (training settings are judged on these):"]
        lines.append(format_table(dev, columns, first=("stage", "model")))
    lines.append("held-out test split, evaluated once at the end of the chain:")
    references: list[dict[str, Any]] = next(
        (r["reference_policies"]["policies"] for r in rows if r.get("reference_policies")), []
    )
    lines.append(
        format_table(
            [training_row(r, r["model"], columns) for r in rows]
            + [training_row(p, REFERENCE_PREFIX + p["policy"], columns) for p in references],
            columns,
        )
    )
    if references:
        lines.append(
            f"  {REFERENCE_PREFIX}reference policies (constant answers), scored as the models on their examples"
        )
    for stage, values in stages:
        steps = f"{values.get('steps')} steps, " if values.get("steps") is not None else "built, no training steps, "
        lines.append(
            f"  {stage}: {fmt(values.get('wall_seconds'))} s, {steps}"
            f"{fmt(values.get('cpu_hours'))} CPU h, {fmt(values.get('gpu_hours'))} GPU h -> "
            f"{shown(Path(str(values.get('checkpoint_path'))))}"
        )
    if review is not None:
        passed = review["review_passed"]
        lines.append(
            f"  safety review: {'passed' if passed else 'FAILED (' + review['reasons'] + ')'}"
            + (f"; promote with `sv-dagster signoff {env_short} --reviewer NAME --verdict approve`" if passed else "")
        )
    return "\n".join(lines)
