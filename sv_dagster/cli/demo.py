"""`sv-dagster demo`: a job in-process (the whole demo by default: its evals, then the
synthetic batches, then the training chains), printing each phase's tables."""

from __future__ import annotations

import time

import click

from sv_dagster.cli._console import console_job, console_logs, execute, known_job, report
from sv_dagster.cli._context import session, verbose_option

DEMO_PHASES = 3


@click.command(help="run a job in-process and print its eval table")
@click.option("--job", "job_name", default="demo")
@verbose_option
def demo(job_name: str) -> int:
    return run_demo(job_name, session().verbose)


def run_demo(job_name: str, verbose: bool = False) -> int:
    started = time.perf_counter()
    full = job_name == "demo"
    if full:  # loading the definitions takes seconds: say what is coming before it
        print(f"demo 1/{DEMO_PHASES}: corpora, datasets, evals, tournament and reports (job demo)", flush=True)
    defs = session().definitions()
    result = execute(known_job(defs, job_name), verbose)
    code = report(result, job_name, started)
    if full and code == 0:  # the synthetic batches are daily partitions: a run of their own
        import dagster as dg

        from sv_dagster.jobs.synthetic import DEMO_PARTITION, SYNTHETIC_JOB, run_synthetic_demo

        print(
            f"\ndemo 2/{DEMO_PHASES}: synthetic batches, partition {DEMO_PARTITION} (job {SYNTHETIC_JOB})", flush=True
        )
        ok, text = run_synthetic_demo(
            dg.DagsterInstance.get(),
            console_job(defs.resolve_job_def(SYNTHETIC_JOB), verbose),
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
            code = code or run_training_demo(env_short, verbose)
    if full and code == 0:
        print(f"\ndemo finished in {time.perf_counter() - started:.0f} s")
    return code


def run_training_demo(env_short: str, verbose: bool = False) -> int:
    """Job `rlft_<env>` in-process, then its training table; a chain its safety review
    stopped prints what it made and the review's reasons, and is not an error."""
    from sv_dagster.core.reporting.console import training_text
    from sv_dagster.instance.outcome import training_outcome

    started = time.perf_counter()
    result = execute(session().definitions().resolve_job_def(f"rlft_{env_short}"), verbose)
    outcome = training_outcome(result)
    if not result.success and not outcome.blocked_by_review:
        return report(result, f"rlft_{env_short}", started)
    print(training_text(env_short, outcome.rows, outcome.stages, outcome.review))
    if outcome.blocked_by_review:  # the gate doing its job is a result of the demo, not a failure of it
        print("  the chain stopped at its safety review: the reviewed checkpoint is not evaluated on test or promoted")
    print(f"\ntraining wall time {time.perf_counter() - started:.1f} s (run {result.run_id})")
    return 0
