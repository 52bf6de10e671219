"""Helpers shared by the asset recipes."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import dagster as dg

from sv_dagster.core.artifacts.paths import outputs_root
from sv_dagster.core.artifacts.redaction import write_redacted


def artifact_dir(context: dg.AssetExecutionContext, *parts: str) -> Path:
    """`outputs/<parts>/<date>_<run>`: dated, and unique per run so an older
    materialization's files are never overwritten under its recorded hash."""
    stamp = f"{datetime.now(UTC):%Y-%m-%d}_{context.run_id[:8]}"
    path = outputs_root().joinpath(*parts, stamp)
    path.mkdir(parents=True, exist_ok=True)
    return path


def write_json(path: Path, data: dict[str, Any]) -> Path:
    return write_redacted(path, json.dumps(data, indent=2, sort_keys=True, default=str) + "\n")
