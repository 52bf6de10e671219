"""E2 examples: the bundled SAMPLE corpus, or a JSONL file in the same schema.

One record per file: {"id", "filename", "content", "expected": {"opa": [ids]}, "clean",
"sample", "description", "test_source"?}. `expected` documents what the project's Rego
policies report; scoring does not read it (the oracle is recomputed from the tools at scoring
time). `clean` is what the file's source says of it (the tools may disagree: each scored row
records both). `test_source` names a test-only corpus the row came from (eval tables give
such rows a line of their own).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from sv_env_config_verification.inputs import InputError, file_kind

MAX_LINE_BYTES = 5_000_000


class DatasetError(ValueError):
    """A dataset record that cannot be used; the message names the file and line."""


@dataclass(frozen=True)
class ConfigExample:
    id: str
    filename: str
    content: str
    expected: dict[str, list[str]] = field(default_factory=dict)
    clean: bool | None = None
    sample: bool = False
    description: str = ""
    test_source: str | None = None

    @property
    def kind(self) -> str:
        return file_kind(self.filename)

    def to_record(self) -> dict[str, Any]:
        record = {
            "id": self.id,
            "filename": self.filename,
            "content": self.content,
            "expected": self.expected,
            "clean": self.clean,
            "sample": self.sample,
            "description": self.description,
        }
        if self.test_source is not None:
            record["test_source"] = self.test_source
        return record


def corpus_dir() -> Path:
    return Path(str(resources.files("sv_env_config_verification") / "corpus"))


def bundled_examples() -> list[ConfigExample]:
    """The package's SAMPLE corpus (hand-written manifests and Terraform, not real configs)."""
    root = corpus_dir()
    index = json.loads((root / "index.json").read_text(encoding="utf-8"))
    return [
        ConfigExample(
            id=entry["id"],
            filename=Path(entry["file"]).name,
            content=(root / entry["file"]).read_text(encoding="utf-8"),
            expected=entry.get("expected", {}),
            clean=entry.get("clean"),
            sample=bool(entry.get("sample", True)),
            description=entry.get("description", ""),
        )
        for entry in index["files"]
    ]


def _example(record: Any, where: str) -> ConfigExample:
    if not isinstance(record, dict):
        raise DatasetError(f"{where}: record must be a JSON object")
    for key in ("id", "filename", "content"):
        if not isinstance(record.get(key), str) or not record[key]:
            raise DatasetError(f"{where}: '{key}' must be a non-empty string")
    filename = record["filename"]
    if "/" in filename or "\\" in filename or filename.startswith("."):
        raise DatasetError(f"{where}: 'filename' must be a bare file name, got {filename!r}")
    try:
        file_kind(filename)
    except InputError as exc:
        raise DatasetError(f"{where}: {exc}") from exc
    expected = record.get("expected") or {}
    if not isinstance(expected, dict):
        raise DatasetError(f"{where}: 'expected' must be an object of tool -> [ids]")
    test_source = record.get("test_source")
    if test_source is not None and (not isinstance(test_source, str) or not test_source):
        raise DatasetError(f"{where}: 'test_source' must be a non-empty string")
    return ConfigExample(
        id=record["id"],
        filename=filename,
        content=record["content"],
        expected={str(k): [str(i) for i in v] for k, v in expected.items()},
        clean=record.get("clean"),
        sample=bool(record.get("sample", False)),
        description=str(record.get("description", "")),
        test_source=test_source,
    )


def read_examples(path: Path | str) -> list[ConfigExample]:
    """Examples from a JSONL file; ids must be unique."""
    path = Path(path)
    if not path.is_file():
        raise DatasetError(f"dataset not found: {path}")
    examples: list[ConfigExample] = []
    seen: set[str] = set()
    with path.open("rb") as handle:
        for number, raw in enumerate(handle, start=1):
            where = f"{path}:{number}"
            if len(raw) > MAX_LINE_BYTES:
                raise DatasetError(f"{where}: line longer than {MAX_LINE_BYTES} bytes")
            if not raw.strip():
                continue
            try:
                record = json.loads(raw)
            except (ValueError, RecursionError) as exc:
                raise DatasetError(f"{where}: not valid JSON ({exc})") from exc
            example = _example(record, where)
            if example.id in seen:
                raise DatasetError(f"{where}: duplicate id {example.id!r}")
            seen.add(example.id)
            examples.append(example)
    return examples


def write_bundled_dataset(path: Path) -> dict[str, Any]:
    """The bundled SAMPLE corpus as a JSONL dataset (the schema `read_examples` reads)."""
    examples = bundled_examples()
    with path.open("w", encoding="utf-8") as out:
        for example in examples:
            out.write(json.dumps(example.to_record()) + "\n")
    kinds: dict[str, int] = {}
    for example in examples:
        key = f"{example.kind}/{'clean' if example.clean else 'misconfigured'}"
        kinds[key] = kinds.get(key, 0) + 1
    return {"n_examples": len(examples), "by_kind": dict(sorted(kinds.items()))}
