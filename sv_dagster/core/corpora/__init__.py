"""Corpora: the source registry, loaders, normalisers to each environment's schema, and
curation into datasets. Plain functions; the Dagster assets (corpus/<id>, dataset/<env>)
only call them."""

from __future__ import annotations

from pathlib import Path

from sv_dagster.core.corpora.loaders import LOADER_VERSION, CorpusInfo, LoadedCorpus, download, load_corpus
from sv_dagster.core.corpora.readers import CorpusError
from sv_dagster.core.corpora.registry import (
    Location,
    SourceRegistryError,
    SourceSpec,
    load_sources,
    resolve_location,
    sources_for,
    sources_path,
)
from sv_dagster.core.paths import outputs_root


def corpus_cache_dir(source_id: str) -> Path:
    """Downloads of a URL source, kept between runs (`outputs/cache/corpora/<id>/`)."""
    return outputs_root() / "cache" / "corpora" / source_id


__all__ = [
    "LOADER_VERSION", "CorpusError", "CorpusInfo", "LoadedCorpus", "Location", "SourceRegistryError", "SourceSpec",
    "corpus_cache_dir", "download", "load_corpus", "load_sources", "resolve_location", "sources_for", "sources_path",
]
