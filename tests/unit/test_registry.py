"""Model registry parsing and validation."""

from __future__ import annotations

from pathlib import Path

import pytest

from sv_dagster.core.models.registry import RegistryError, load_registry


def registry(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "models.yaml"
    path.write_text(text)
    return path


def test_project_registry_has_a_default_heuristic_and_closed_models():
    specs = load_registry()
    assert specs["heuristic"].default and specs["heuristic"].backend == "heuristic"
    assert specs["gpt-5-mini"].backend == "openai" and specs["gpt-5-mini"].api_key_env == "OPENAI_API_KEY"
    assert specs["gpt-5-mini"].key == "gpt_5_mini"


def test_env_references_expand_with_defaults(tmp_path: Path, monkeypatch):
    path = registry(
        tmp_path, "models:\n  m:\n    backend: openai\n    model: x\n    base_url: ${MY_URL:-http://127.0.0.1:9/v1}\n"
    )
    monkeypatch.delenv("MY_URL", raising=False)
    assert load_registry(path)["m"].base_url == "http://127.0.0.1:9/v1"
    monkeypatch.setenv("MY_URL", "http://127.0.0.1:7/v1")
    assert load_registry(path)["m"].base_url == "http://127.0.0.1:7/v1"


@pytest.mark.parametrize(
    "text, message",
    [
        ("models: {}\n", "non-empty 'models:'"),
        ("models:\n  m:\n    backend: telepathy\n", "backend 'telepathy'"),
        ("models:\n  m:\n    backend: openai\n    model: x\n", "needs 'base_url'"),
        ("models:\n  m:\n    backend: heuristic\n    sampling: {temp: 1}\n", "sampling"),
        ("models:\n  a-b:\n    backend: heuristic\n  a_b:\n    backend: heuristic\n", "same asset key"),
        ("models: [\n", "not valid YAML"),
        ("models:\n  m:\n    backend: heuristic\n    limit: 8\n", "limit must map environments to N"),
        ("models:\n  m:\n    backend: heuristic\n    limit: {e1: 0}\n", "limit of e1 must be a positive integer"),
        ("models:\n  m:\n    backend: heuristic\n    limit: {e1: ten}\n", "limit of e1 must be a positive integer"),
        (
            "models:\n  m:\n    backend: heuristic\n    envs: [e2]\n    limit: {e1: 4}\n",
            "limit names 'e1', which is not in its envs ['e2']",
        ),
    ],
)
def test_bad_registry_names_file_and_model(tmp_path: Path, text: str, message: str):
    path = registry(tmp_path, text)
    with pytest.raises(RegistryError) as info:
        load_registry(path)
    assert str(path) in str(info.value) and message in str(info.value)


def test_missing_registry_file(tmp_path: Path):
    with pytest.raises(RegistryError, match="model registry not found"):
        load_registry(tmp_path / "none.yaml")


def test_price_table_validation(tmp_path: Path):
    from sv_dagster.core.models.pricing import PriceTableError, load_price_table

    table = load_price_table()
    assert table.cost("gpt-5", {"prompt_tokens": 1_000_000, "completion_tokens": 100_000}) == pytest.approx(2.25)
    assert table.cost("unknown-model", {"prompt_tokens": 5}) is None
    bad = tmp_path / "prices.yaml"
    bad.write_text('version: "1"\nmodels:\n  m: {input: cheap}\n')
    with pytest.raises(PriceTableError, match=f"{bad}: model 'm'"):
        load_price_table(bad)
    bad.write_text("models: {}\n")
    with pytest.raises(PriceTableError, match="needs a 'version'"):
        load_price_table(bad)


def test_a_models_limit_is_its_n_per_environment_and_is_recorded(tmp_path: Path):
    path = registry(tmp_path, "models:\n  m:\n    backend: heuristic\n    limit: {e5: 8, e1: 24}\n")
    spec = load_registry(path)["m"]
    assert (spec.limit_for("e1"), spec.limit_for("e5"), spec.limit_for("e2")) == (24, 8, None)
    assert spec.public_dict()["limits"] == {"e1": 24, "e5": 8}
    unlimited = load_registry(registry(tmp_path, "models:\n  m:\n    backend: heuristic\n"))["m"]
    assert unlimited.limit_for("e1") is None and "limits" not in unlimited.public_dict()


def test_a_models_max_tokens_per_environment_overrides_its_sampling_there_only(tmp_path: Path):
    text = "models:\n  m:\n    backend: heuristic\n    sampling: {max_tokens: 128}\n    max_tokens: {e2: 512}\n"
    spec = load_registry(registry(tmp_path, text))["m"]
    assert spec.for_env("e2").sampling.max_tokens == 512
    assert spec.for_env("e1").sampling.max_tokens == 128 and spec.for_env("e1") is spec
    assert spec.for_env("e2").sampling.temperature == spec.sampling.temperature
    assert spec.public_dict()["max_tokens_by_env"] == {"e2": 512}
    with pytest.raises(RegistryError, match="max_tokens of e3 must be a positive integer"):
        load_registry(registry(tmp_path, "models:\n  m:\n    backend: heuristic\n    max_tokens: {e3: 0}\n"))
