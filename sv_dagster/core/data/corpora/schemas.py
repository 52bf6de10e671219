"""What each installed environment says about its corpora and dataset rows (its
`Environment.corpora`, an `sv_shared.corpora.CorpusSpec`), looked up by short name."""

from __future__ import annotations

from sv_dagster.core.envs import ENVS
from sv_shared.corpora import CorpusSpec, Normalizer, RowSchema


def corpus_spec(env: str) -> CorpusSpec:
    """The corpus spec of the installed environment `env`."""
    spec = ENVS[env].corpora
    if spec is None:
        raise KeyError(f"environment {env} ({ENVS[env].env_id}) reads no corpora")
    return spec


def corpus_envs() -> list[str]:
    """The installed environments that read corpora, in short-name order."""
    return [short for short, env in ENVS.items() if env.corpora is not None]


def row_schemas() -> dict[str, RowSchema]:
    """Every environment's row schemas by name: its tasks' rows and its other corpus files."""
    return {name: schema for env in corpus_envs() for name, schema in corpus_spec(env).schemas.items()}


def normalizers_for(env: str) -> dict[str, Normalizer]:
    """The normalisers of the installed environment `env` by name ({} if it reads no corpora)."""
    corpora = ENVS[env].corpora
    return dict(corpora.normalizers) if corpora is not None else {}
