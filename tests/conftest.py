"""Shared fixtures: every test gets its own outputs root and Dagster instance folder."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, offline_sources: None) -> Path:
    """A fresh SV_OUTPUTS_DIR and DAGSTER_HOME under tmp_path; returns tmp_path."""
    outputs = tmp_path / "outputs"
    home = tmp_path / "dagster_home"
    home.mkdir()
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    monkeypatch.setenv("SV_OUTPUTS_DIR", str(outputs))
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    monkeypatch.delenv("SV_MODEL_REGISTRY", raising=False)
    # Deployment and training choices a developer's shell may hold must not change the tests.
    for name in (
        "SV_EXECUTOR",
        "SV_EXECUTOR_CONFIG",
        "SV_STAGING_DIR",
        "SV_TRAINING_PROFILE",
        "SV_SAFETY_REVIEW_CONFIG",
    ):
        monkeypatch.delenv(name, raising=False)
    return tmp_path


def clear_source_overrides(monkeypatch: pytest.MonkeyPatch) -> None:
    """A developer's shell may point corpora elsewhere (SV_CORPORA=online, SV_SOURCE_<ID>,
    another registry file): not in the tests."""
    from sv_dagster.core.data.corpora.registry import LEGACY_ENV_VARS

    sources = [name for name in os.environ if name.startswith("SV_SOURCE_")]  # every source's SourceSpec.env_var
    for name in ("SV_CORPORA", "SV_SOURCES_FILE", *LEGACY_ENV_VARS.values(), *sources):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def offline_sources(monkeypatch: pytest.MonkeyPatch) -> None:
    clear_source_overrides(monkeypatch)


@pytest.fixture(scope="module")
def sources():
    """The source registry (configs/sources.yaml)."""
    from sv_dagster.core.data.corpora import load_sources

    return load_sources()


@pytest.fixture(scope="session")
def full_demo(tmp_path_factory: pytest.TempPathFactory):
    """One `sv-dagster demo` for the session (tests/support/full_demo.py): the demo's output
    test and the key scan read the same run instead of running the whole demo twice."""
    from tests.support.full_demo import run_full_demo

    return run_full_demo(tmp_path_factory.mktemp("full-demo"), REPO_ROOT)
