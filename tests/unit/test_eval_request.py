"""An eval request's mistakes, each one line naming the fix."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sv_dagster.core.eval_request import EvalRequestError, check_limit, check_models, check_split, parse_n, split_sizes
from sv_dagster.core.models.registry import ModelSpec

REGISTRY = {
    "heuristic": ModelSpec(name="heuristic", backend="heuristic", model="heuristic"),
    "tool-oracle": ModelSpec(name="tool-oracle", backend="oracle", model="oracle", envs=("e2", "e3")),
    "gpt-5-mini": ModelSpec(
        name="gpt-5-mini",
        backend="openai",
        model="gpt-5-mini",
        base_url="https://api.example/v1",
        api_key_env="SV_TEST_MISSING_KEY",
    ),
}


def message(call) -> str:
    with pytest.raises(EvalRequestError) as caught:
        call()
    text = str(caught.value)
    assert "\n" not in text
    return text


def test_models(monkeypatch):
    monkeypatch.delenv("SV_TEST_MISSING_KEY", raising=False)
    assert message(lambda: check_models("e1", ["heuristc"], REGISTRY)) == (
        "unknown model 'heuristc' (did you mean 'heuristic'?); the models for e1: gpt-5-mini, heuristic"
    )
    assert message(lambda: check_models("e1", ["tool-oracle"], REGISTRY)).startswith(
        "model 'tool-oracle' is registered for e2, e3, not e1;"
    )
    assert message(lambda: check_models("e1", ["heuristic", "gpt-5-mini"], REGISTRY)) == (
        "model 'gpt-5-mini' needs the environment variable SV_TEST_MISSING_KEY (put it in .env or export it); "
        "nothing was run"
    )
    monkeypatch.setenv("SV_TEST_MISSING_KEY", "sk-test")
    check_models("e1", ["heuristic", "gpt-5-mini"], REGISTRY)
    check_models("e2", ["tool-oracle"], REGISTRY)


def test_split_and_limit(tmp_path: Path):
    report = tmp_path / "metadata.json"
    report.write_text(json.dumps({"split_sizes": {"train": 262, "dev": 28, "test": 56}}))
    sizes = split_sizes(report)
    assert message(lambda: check_split("validation", sizes, "dataset/e1")) == (
        "dataset/e1 has no split 'validation'; its splits: dev, test, train"
    )
    assert "(did you mean 'test'?)" in message(lambda: check_split("tset", sizes, "dataset/e1"))
    assert message(lambda: check_limit(50, "dev", sizes["dev"], "dataset/e1")) == (
        "--n 50 is more than the 28 examples of split 'dev' of dataset/e1; ask for at most 28, or `--n all`"
    )
    check_limit(28, "dev", sizes["dev"], "dataset/e1")
    check_limit(None, "dev", sizes["dev"], "dataset/e1")


def test_n_is_a_positive_number_or_all():
    assert parse_n("7") == 7 and parse_n("all") == parse_n("ALL") == "all"
    assert message(lambda: parse_n("0")) == "--n must be at least 1, not 0"
    assert message(lambda: parse_n("ten")) == "--n takes a number of examples or 'all', not 'ten'"
