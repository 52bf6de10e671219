"""Reading the project's YAML configs with errors that name the file."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml


def read_yaml_mapping(path: Path, error: type[Exception], what: str) -> dict[str, Any]:
    """The mapping at the top of `path`; `error(message naming the file)` when it is missing,
    not YAML, or not a mapping."""
    if not path.is_file():
        raise error(f"{what} not found: {path}")
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as exc:
        raise error(f"{path}: not valid YAML ({exc})") from exc
    if not isinstance(data, dict):
        raise error(f"{path}: expected a mapping at the top level")
    return data
