"""Helpers shared by the asset recipes."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import dagster as dg

from sv_dagster.core.artifacts.paths import outputs_root
from sv_dagster.core.artifacts.redaction import write_redacted


def env_group(env_short: str, stage: str) -> str:
    """The asset group of one environment's assets of one stage (`e1_evals`, `e1_training`).

    The UI labels an asset node by the last part of its key only (`heuristic`, `sft`), so
    each group holds one environment's assets of one kind, whose last parts differ."""
    return f"{env_short}_{stage}"


def artifact_dir(context: dg.AssetExecutionContext, *parts: str) -> Path:
    """`outputs/<parts>/<date>_<run>`: dated, and unique per run so an older
    materialization's files are never overwritten under its recorded hash."""
    stamp = f"{datetime.now(UTC):%Y-%m-%d}_{context.run_id[:8]}"
    path = outputs_root().joinpath(*parts, stamp)
    path.mkdir(parents=True, exist_ok=True)
    return path


def write_json(path: Path, data: dict[str, Any]) -> Path:
    return write_redacted(path, json.dumps(data, indent=2, sort_keys=True, default=str) + "\n")


LONG_WORK_ROWS = 50_000
"""Row count from which curating or checking data says on the console that it has started:
a million rows take tens of seconds (bench/results, curation), a sample a few milliseconds."""
