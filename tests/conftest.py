"""Shared fixtures: every test gets its own outputs root and Dagster instance folder."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh SV_OUTPUTS_DIR and DAGSTER_HOME under tmp_path; returns tmp_path."""
    outputs = tmp_path / "outputs"
    home = tmp_path / "dagster_home"
    home.mkdir()
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    monkeypatch.setenv("SV_OUTPUTS_DIR", str(outputs))
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    monkeypatch.delenv("SV_MODEL_REGISTRY", raising=False)
    monkeypatch.delenv("SV_IOT23_SOURCE", raising=False)
    # Deployment and training choices a developer's shell may hold must not change the tests.
    names = ["SV_EXECUTOR", "SV_EXECUTOR_CONFIG", "SV_STAGING_DIR", "SV_TRAINING_PROFILE", "SV_SAFETY_REVIEW_CONFIG",
             "SV_CORPORA", *(name for name in os.environ if name.startswith("SV_SOURCE_"))]
    for name in names:
        monkeypatch.delenv(name, raising=False)
    return tmp_path


@pytest.fixture
def offline_sources(monkeypatch: pytest.MonkeyPatch) -> None:
    """A developer's shell may point corpora elsewhere (SV_CORPORA=online, SV_SOURCE_<ID>): not here."""
    from sv_dagster.core.corpora import load_sources

    for name in ("SV_CORPORA", "SV_IOT23_SOURCE", "SV_SOURCES_FILE", *(s.env_var for s in load_sources().values())):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture(scope="module")
def sources():
    """The source registry (configs/sources.yaml)."""
    from sv_dagster.core.corpora import load_sources

    return load_sources()
