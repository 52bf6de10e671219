"""What every benchmark records: the command, the date, the machine (with its load at the
end: other work on a shared machine moves wall-clock figures) and the results, written as
bench/results/<date>-<name>.json."""

from __future__ import annotations

import json
import os
import platform
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results"


def bench_record(command: str, results: dict[str, Any], **extra: Any) -> dict[str, Any]:
    """The record of one run; `extra` (targets, met) follows the results."""
    return {
        "command": command,
        "date": datetime.now(UTC).isoformat(),
        "machine": {
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
            "platform": platform.platform(),
            "load_average_at_end": [round(x, 2) for x in os.getloadavg()],
        },
        "results": results,
        **extra,
    }


def write_record(record: dict[str, Any], name: str) -> Path:
    out = RESULTS / f"{datetime.now(UTC):%Y-%m-%d}-{name}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(record, indent=2) + "\n")
    return out
