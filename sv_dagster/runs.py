"""Runs on the instance: who owns them, reaping the dead ones, resuming a killed eval.

`sv-dagster eval`, `demo` and the other CLI commands execute their run in their own process.
A kill -9 of that process leaves the run STARTED for ever and its step holding a slot of
the endpoint's concurrency pool, so every later eval of that endpoint, and Dagster's own
re-execution, would wait. The daemon's run monitoring cannot health-check an in-process run,
so each run records its owner process (host, pid, start time) in its tags, and
`reap_dead_runs` does what run monitoring does for runs whose owner is gone: it marks them
failed and frees their pool slots. Every CLI command reaps first, so a crash never blocks
the next command.

Owner tags are copied onto runs the CLI did not execute: a re-execution from the UI (and the
daemon's automatic retries) inherits its parent's tags, and the launchpad copies a run's tags.
Those runs are launched through the workspace (they carry a remote job origin, or a parent
run id), their worker is not the named process, and the reaper never touches them.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import dagster as dg

from sv_shared.errors import UserError

OWNER_HOST, OWNER_PID, OWNER_START = "sv/owner_host", "sv/owner_pid", "sv/owner_start"
RESUMES_TAG = "sv/resumes"
# NOT_STARTED too: a CLI process can die between creating its run and starting it.
UNFINISHED = [
    dg.DagsterRunStatus.NOT_STARTED,
    dg.DagsterRunStatus.STARTING,
    dg.DagsterRunStatus.STARTED,
    dg.DagsterRunStatus.CANCELING,
]
FINISHED_STATUSES = (dg.DagsterRunStatus.SUCCESS, dg.DagsterRunStatus.FAILURE, dg.DagsterRunStatus.CANCELED)


class RunCommandError(UserError, ValueError):
    """A run cannot be resumed as asked; the message says why in one line."""


def _start_time(pid: int) -> str | None:
    """The process's start time in clock ticks since boot (/proc/PID/stat field 22): with the
    pid, it names one process even after the pid is reused."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[19]  # fields after the command name, which may hold spaces


def owner_tags(pid: int | None = None) -> dict[str, str]:
    """Tags naming this process (or process `pid` of this host) as the owner of a run."""
    pid = os.getpid() if pid is None else pid
    return {OWNER_HOST: socket.gethostname(), OWNER_PID: str(pid), OWNER_START: _start_time(pid) or ""}


def executed_by_owner(run: dg.DagsterRun) -> bool:
    """Whether the process its owner tags name executed this run: a run of the CLI's own
    process (execute_in_process), not one launched through the workspace with inherited tags."""
    return OWNER_PID in run.tags and run.remote_job_origin is None and run.parent_run_id is None


def owner_alive(tags: Mapping[str, str]) -> bool | None:
    """Whether the process that owns a run still runs; None when that cannot be told here (no
    owner tags, or another host)."""
    host, pid = tags.get(OWNER_HOST), tags.get(OWNER_PID)
    if not host or not pid or not pid.isdigit() or host != socket.gethostname():
        return None
    started = _start_time(int(pid))
    if started is None:
        return False
    return not tags.get(OWNER_START) or started == tags[OWNER_START]


@dataclass(frozen=True)
class Reaped:
    run_id: str
    job_name: str
    owner: str


def reap_dead_runs(instance: dg.DagsterInstance) -> list[Reaped]:
    """Mark failed every unfinished run whose owner process on this host is gone, and free
    the pool slots that finished runs still hold. Runs of live processes, of other hosts and
    of the daemon's run launcher are left alone."""
    reaped = []
    for record in instance.get_run_records(filters=dg.RunsFilter(statuses=UNFINISHED)):
        run = record.dagster_run
        if not executed_by_owner(run) or owner_alive(run.tags) is not False:
            continue
        owner = f"pid {run.tags[OWNER_PID]} on {run.tags[OWNER_HOST]}"
        why = (
            f"The process that executed this run ({owner}, started at tick {run.tags.get(OWNER_START) or '?'}) "
            f"is gone; sv-dagster's run monitor marks the run failed and frees its concurrency pool slots. "
            f"`sv-dagster resume {run.run_id}` continues an eval run."
        )
        instance.report_engine_event(why, run)
        instance.report_run_failed(
            run, message=f"the process that ran it ({owner}) is gone; marked failed by sv-dagster's run monitor"
        )
        reaped.append(Reaped(run.run_id, run.job_name, owner))
    storage = instance.event_log_storage
    if storage.supports_global_concurrency_limits:
        for run_id in storage.get_concurrency_run_ids():
            holder = instance.get_run_by_id(run_id)
            if holder is None or holder.status in FINISHED_STATUSES:
                storage.free_concurrency_slots_for_run(run_id)
    return reaped


def _asset_keys(instance: dg.DagsterInstance, run: dg.DagsterRun) -> set[dg.AssetKey]:
    """The assets a run set out to materialize: its asset selection, or (a subset executed in
    process records none) the steps of its execution plan, whose op names join the key's parts
    with "__"."""
    if run.asset_selection:
        return set(run.asset_selection)
    plan = (
        instance.get_execution_plan_snapshot(run.execution_plan_snapshot_id) if run.execution_plan_snapshot_id else None
    )
    steps = plan.step_keys_to_execute if plan is not None else []
    return {dg.AssetKey(step.split("__")) for step in steps}


@dataclass(frozen=True)
class Resumption:
    """What re-executing a killed eval run needs: its eval assets and its config, each eval
    pointed at the killed run's results folder."""

    eval_keys: tuple[dg.AssetKey, ...]
    run_config: dict
    tags: dict[str, str]


def plan_resume(instance: dg.DagsterInstance, run_id: str, assets: Collection[dg.AssetKey]) -> Resumption:
    """Reap, then check that `run_id` is a finished (failed, killed or canceled) eval run of
    the `assets` defined now and build its re-execution. Raises RunCommandError with a
    one-line reason otherwise."""
    reap_dead_runs(instance)
    run = instance.get_run_by_id(run_id)
    if run is None:
        raise RunCommandError(f"no run {run_id} on the instance at {instance.root_directory}")
    # Step keys include asset checks ("eval__e1__x_regression_gate"): only defined assets count.
    eval_keys = tuple(
        sorted(
            (k for k in _asset_keys(instance, run) if k.path[0] == "eval" and k in assets), key=lambda k: list(k.path)
        )
    )
    if not eval_keys:
        raise RunCommandError(f"run {run_id} ({run.job_name}) materialized no eval asset; only eval runs resume")
    if run.status not in FINISHED_STATUSES:
        owner = f"pid {run.tags.get(OWNER_PID, '?')} on {run.tags.get(OWNER_HOST, '?')}"
        raise RunCommandError(
            f"run {run_id} is still {run.status.value} ({owner} is alive); wait for it or stop it first"
        )
    if run.status == dg.DagsterRunStatus.SUCCESS:
        raise RunCommandError(f"run {run_id} succeeded; there is nothing to resume")
    run_config: Mapping[str, Any] = run.run_config or {}
    ops = dict(run_config.get("ops") or {})
    for key in eval_keys:
        op = "__".join(key.path)
        config = dict((ops.get(op) or {}).get("config") or {})
        # A resumed run's own resume target is the folder it continued, not its run id.
        config["resume_run_id"] = config.get("resume_run_id") or run.run_id
        ops[op] = {**(ops.get(op) or {}), "config": config}
    tags = {k: v for k, v in run.tags.items() if k.startswith("sv/") and k not in (OWNER_HOST, OWNER_PID, OWNER_START)}
    return Resumption(eval_keys, {**(run.run_config or {}), "ops": ops}, {**tags, RESUMES_TAG: run.run_id})
