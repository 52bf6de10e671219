"""Corpora: the source registry, loaders, normalisation to each environment's schema (by the
normalisers its package declares), and curation into datasets. Plain functions; the Dagster
assets (corpus/<id>, dataset/<env>) only call them."""

from __future__ import annotations

from pathlib import Path

from sv_dagster.core.artifacts.paths import outputs_root
from sv_dagster.core.data.corpora.loaders import (
    LOADER_VERSION,
    CorpusInfo,
    LoadedCorpus,
    download,
    load_corpus,
    source_change,
)
from sv_dagster.core.data.corpora.readers import CorpusError
from sv_dagster.core.data.corpora.registry import (
    Location,
    SourceRegistryError,
    load_sources,
    resolve_location,
    sources_for,
    sources_path,
)
from sv_shared.corpora import SourceSpec


def corpus_cache_dir(source_id: str) -> Path:
    """Downloads of a URL source, kept between runs (`outputs/cache/corpora/<id>/`)."""
    return outputs_root() / "cache" / "corpora" / source_id


def load_source(
    source_id: str,
    value: str = "sample",
    *,
    revision: str | None = None,
    max_rows: int | None = None,
    columns: tuple[str, ...] = (),
) -> LoadedCorpus:
    """One source of the registry read from `value` (as `resolve_location` takes it; "hf" also
    means online); a copy that lacks any of `columns` fails, naming them."""
    spec = load_sources()[source_id]
    location = resolve_location(spec, "online" if value == "hf" else value, revision)
    loaded = load_corpus(spec, location, cache_dir=corpus_cache_dir(source_id), max_rows=max_rows)
    missing = [name for name in columns if name not in loaded.frame.columns]
    if missing:
        raise CorpusError(f"corpus {source_id}: {loaded.info.location} lacks column(s) {missing}")
    return loaded


__all__ = [
    "LOADER_VERSION",
    "CorpusError",
    "CorpusInfo",
    "LoadedCorpus",
    "Location",
    "SourceRegistryError",
    "SourceSpec",
    "corpus_cache_dir",
    "download",
    "load_corpus",
    "load_source",
    "load_sources",
    "resolve_location",
    "source_change",
    "sources_for",
    "sources_path",
]
