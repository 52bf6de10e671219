"""Shared fixtures: every test gets its own outputs root and Dagster instance folder."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]

# The tests train the tiny model built here (configs/training/profiles/tiny.yaml), the whole
# chain in about a minute. E1's default profile trains SmolLM2 for minutes: the tests that
# mean it name that profile, and bench/demo.py times the demo that trains it.
TRAINING_PROFILE = "tiny"
os.environ["SV_TRAINING_PROFILE"] = TRAINING_PROFILE


@pytest.fixture(scope="session")
def rule_baselines_registry(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from tests.support.registry import rule_baselines_registry

    return rule_baselines_registry(tmp_path_factory.mktemp("registry") / "models.yaml")


@pytest.fixture
def isolated(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, offline_sources: None, rule_baselines_registry: Path
) -> Path:
    """A fresh SV_OUTPUTS_DIR and DAGSTER_HOME under tmp_path, and the project's registry
    without its served models' defaults (tests/support/registry.py); returns tmp_path."""
    outputs = tmp_path / "outputs"
    home = tmp_path / "dagster_home"
    home.mkdir()
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    monkeypatch.setenv("SV_OUTPUTS_DIR", str(outputs))
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    monkeypatch.setenv("SV_MODEL_REGISTRY", str(rule_baselines_registry))
    monkeypatch.setenv("SV_TRAINING_PROFILE", TRAINING_PROFILE)
    # Deployment choices a developer's shell may hold must not change the tests.
    for name in ("SV_EXECUTOR", "SV_EXECUTOR_CONFIG", "SV_STAGING_DIR", "SV_SAFETY_REVIEW_CONFIG"):
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


# The modules that read the session's one demo (`full_demo`). Under pytest-xdist they run on
# one worker, so the demo runs once; collection fails if another module asks for it unlisted.
SHARED_DEMO_MODULES = (
    "tests/integration/test_cli.py",
    "tests/integration/test_security_scan.py",
    "tests/integration/test_training_pipeline.py",
)
SHARED_DEMO_GROUP = "full_demo"


def _module_path(item: pytest.Item) -> str:
    return item.nodeid.split("::", 1)[0]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The demo's modules go first: on one worker they are the longest unit of work."""
    unlisted = sorted(
        {_module_path(item) for item in items if "full_demo" in item.fixturenames} - set(SHARED_DEMO_MODULES)
    )
    if unlisted:
        raise pytest.UsageError(f"tests/conftest.py: add {', '.join(unlisted)} to SHARED_DEMO_MODULES (uses full_demo)")
    items.sort(key=lambda item: _module_path(item) not in SHARED_DEMO_MODULES)  # stable: module order is kept


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log):
    """`make test` runs `-n 2 --dist loadfile`: each module whole on one worker (its module
    fixtures built once), and the demo's modules together on one."""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class DemoModulesTogether(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            module = super()._split_scope(nodeid)
            return SHARED_DEMO_GROUP if module in SHARED_DEMO_MODULES else module

    return DemoModulesTogether(config, log)
