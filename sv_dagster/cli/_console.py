"""Runs as the command line starts them: in-process on the project's instance, with a console
that shows progress and results (a failed step as one line, its stack with --verbose), and the
run's eval tables printed at the end."""

from __future__ import annotations

import functools
import sys
import time
from typing import Any

from sv_dagster.cli._context import CommandError
from sv_dagster.core.reporting.console import eval_table, shown, subset_note, tournament_text
from sv_dagster.core.reporting.judges import classifier_line, refusal_line


def console_logs(verbose: bool = False) -> dict[str, Any]:
    """Run config of the in-process runs: the console shows our INFO lines (progress, results);
    Dagster's step-by-step events are DEBUG, shown with `--verbose` (all stay in the instance)."""
    return {"loggers": {"console": {"config": {"log_level": "DEBUG" if verbose else "INFO"}}}}


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
        shown_error = getattr(data, "error_display_string", None) or error.to_string()
        text = record.getMessage()
        if text.endswith(shown_error):
            record.msg = f"{text[: -len(shown_error)].rstrip()} {_innermost(error)} (stack trace: --verbose)"
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


def console_job(job, verbose: bool):
    """`job` as this command runs it: stack traces of failed steps on the console only with
    `--verbose` (where DEBUG events are shown as well)."""
    return job if verbose else job.with_logger_defs({"console": _brief_console_logger()})


def instance(reap: bool = True):
    """The project's instance, after reaping runs whose process died (so a killed run's pool
    slot never blocks this command)."""
    import dagster as dg

    from sv_dagster.runs import reap_dead_runs

    found = dg.DagsterInstance.get()
    if reap:
        for run in reap_dead_runs(found):
            print(
                f"run {run.run_id} ({run.job_name}) was left running by a process that is gone ({run.owner}): "
                f"marked failed; `sv-dagster resume {run.run_id}` continues it",
                file=sys.stderr,
            )
    return found


def execute(job, verbose: bool, run_config: dict[str, Any] | None = None, tags: dict[str, str] | None = None, on=None):
    """`job` in-process on the project's instance (or `on`), never raising on a failed step."""
    from sv_dagster.runs import owner_tags

    return console_job(job, verbose).execute_in_process(
        instance=on if on is not None else instance(),
        run_config=run_config if run_config is not None else console_logs(verbose),
        raise_on_error=False,
        tags={**(tags or {}), **owner_tags()},
    )


def known_job(defs, job_name: str):
    """The named job, or a CommandError naming the close names and every job."""
    import difflib

    names = sorted(job.name for job in defs.resolve_all_job_defs() if not job.name.startswith("__"))
    if job_name not in names:
        close = difflib.get_close_matches(job_name, names, n=3)
        hint = f" (did you mean {' or '.join(repr(name) for name in close)}?)" if close else ""
        raise CommandError(f"no job {job_name!r}{hint}; the jobs: {', '.join(names)}")
    return defs.resolve_job_def(job_name)


def report(result, title: str, started: float, data_note: str | None = None) -> int:
    """Print the eval table of an executed run (or its step failures); `data_note` names the
    data when it is not the environment's own (a user's file)."""
    if not result.success:
        for event in result.all_events:
            if event.is_step_failure:
                print(f"FAILED {event.step_key}: {_failure_line(event.step_failure_data)}", file=sys.stderr)
        return 1
    import dagster as dg

    from sv_dagster.core.envs import ENVS
    from sv_dagster.instance.datasets import latest_corpus_note
    from sv_dagster.instance.outcome import run_outcome

    outcome = run_outcome(result)
    on = dg.DagsterInstance.get()
    print(f"\n{title}: run {result.run_id} on instance {on.root_directory}")
    for short, env in ENVS.items():
        if short not in outcome.evals:
            continue
        entries = outcome.evals[short]
        sample = any(summary.get("sample") for summary, _ in entries)
        print(f"\n== {short}: {env.description}")
        note = data_note or latest_corpus_note(on, short, env.sample_note)
        if note:
            print(f"DATA: {note}")
        elif sample:
            print(f"DATA: bundled SAMPLE ({env.sample_note}), not a real corpus")
        print(eval_table(env, entries))
        for summary, path in entries:
            print(
                f"  {summary['model']}{subset_note(path)}: "
                f"{shown(path)}/{{metadata.json,results.jsonl,summary.json,provenance.json}}"
            )
        for summary, _ in entries[:1]:
            if summary.get("classifier"):
                print("  " + classifier_line(summary["classifier"], summary.get("classifier_agreement") or {}))
            refusals = refusal_line(summary.get("refusal_detector"))
            if refusals:
                print("  " + refusals)
    for path in outcome.tournaments:
        print(tournament_text(path))
    print(f"\nwall time {time.perf_counter() - started:.1f} s; open the UI with `make ui` (same instance)")
    return 0
