"""Where things live: the project root, the outputs root and the config folder."""

from __future__ import annotations

import os
import re
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parents[2]
CONFIGS_DIR = PROJECT_ROOT / "configs"
SAMPLES_DIR = PROJECT_ROOT / "data" / "samples"


def outputs_root() -> Path:
    """`SV_OUTPUTS_DIR`, default `./outputs` under the project root (read at call time so
    tests and runs can point it elsewhere)."""
    return Path(os.environ.get("SV_OUTPUTS_DIR") or PROJECT_ROOT / "outputs").resolve()


def slug(name: str) -> str:
    """A name usable in Dagster asset keys and op names (letters, digits, underscore)."""
    return re.sub(r"[^A-Za-z0-9_]", "_", name)


def safe_path_part(name: str) -> str:
    """A name usable as one folder name: model ids like `org/model:tag` keep their
    characters except path separators and colons."""
    return re.sub(r"[/\\:\s]+", "_", name).strip("._") or "unnamed"
