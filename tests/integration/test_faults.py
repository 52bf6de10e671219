"""Endpoint faults are the endpoint's, never the model's answer: a fault server on loopback
(every kind in FAULTS) against the runner, the response cache and the redaction step."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sv_dagster.core.envs import ENVS
from sv_dagster.core.evals.evaluation import evaluate
from sv_dagster.core.evals.runner import read_results
from sv_dagster.core.models.backends import CompletionFailed, OpenAICompatibleBackend
from sv_dagster.core.models.cache import ResponseCache
from sv_dagster.core.models.registry import ModelSpec, Sampling
from sv_shared.sft import chat_messages
from tests.support.openai_server import FAULTS, LoopbackOpenAIServer

E1 = ENVS["e1"]
GOLD = {chat_messages(task)[-1]["content"]: task.data.answer for task in E1.load_tasks(None, None)}
SEED_WITH_EVERY_FAULT = 30
"""With chaos 0.2, this seed's first 60 draws hold all eight fault kinds (10 faults)."""


def right_answer(request: dict) -> str:
    """A model that is always right, so any wrong answer in a summary is a fault scored as one."""
    label = GOLD[request["messages"][-1]["content"]]
    return json.dumps({"label": label, "confidence": 0.99, "rationale": "loopback knows the label"})


def loop_spec(server: LoopbackOpenAIServer, **extra) -> ModelSpec:
    return ModelSpec(
        name="faulty",
        backend="openai",
        model="m",
        base_url=server.base_url,
        max_concurrency=1,
        sampling=Sampling(timeout_s=0.3),
        **extra,
    )


def backend(spec: ModelSpec, attempts: int) -> OpenAICompatibleBackend:
    return OpenAICompatibleBackend(spec, max_attempts=attempts, backoff_initial_s=0.01, backoff_max_s=0.02)


def faulted_prompts(server: LoopbackOpenAIServer, attempts: int) -> set[str]:
    """Prompts whose every attempt hit a fault (requests arrive one at a time)."""
    outcomes: dict[str, list[str | None]] = {}
    for kind, request in server.fault_log:
        outcomes.setdefault(request["messages"][-1]["content"], []).append(kind)
    return {prompt for prompt, kinds in outcomes.items() if len(kinds) == attempts and all(kinds)}


def test_every_fault_kind_is_a_model_error_and_the_rerun_asks_only_for_those(tmp_path: Path):
    cache = ResponseCache(tmp_path / "cache.sqlite3")
    with LoopbackOpenAIServer(
        right_answer, chaos=0.2, chaos_seed=SEED_WITH_EVERY_FAULT, faults=FAULTS, hang_s=1.0
    ) as server:
        spec = loop_spec(server)
        run = evaluate(
            E1, spec, backend(spec, attempts=1), dataset_path=None, outputs_root=tmp_path, run_id="faults", cache=cache
        )
        injected = list(server.injected)
        faulted = faulted_prompts(server, attempts=1)

        # Only scored replies were cached: the endpoint healed, the faulted ten are asked again.
        server.chaos, asked_before = 0.0, len(server.requests)
        again = evaluate(
            E1, spec, backend(spec, attempts=1), dataset_path=None, outputs_root=tmp_path, run_id="healed", cache=cache
        )
        asked = {request["messages"][-1]["content"] for request in server.requests[asked_before:]}
    assert set(injected) == set(FAULTS) and len(faulted) == len(injected) == 10
    rows = read_results(run.results_path)
    errors = [row for row in rows if row["error_kind"] == "model"]
    assert {row["prompt"][-1]["content"] for row in errors} == faulted
    for row in errors:  # recorded, never scored
        assert row["completion"] is None and row["rewards"] is None and row["parsed"] is None
    assert any("no choices" in row["error"] for row in errors)
    assert any("over the limit" in row["error"] for row in errors)
    summary = run.summary
    assert summary["accuracy"] == 1.0 and summary["n_model_errors"] == summary["n_errors"] == 10
    assert summary["n_examples"] == 60
    assert run.results_path.stat().st_size < 200_000  # a 5 MB body never reaches the row
    assert asked == faulted
    assert again.summary["accuracy"] == 1.0 and again.summary["n_errors"] == 0


def test_faults_are_retried_like_server_errors(tmp_path: Path):
    with LoopbackOpenAIServer(
        right_answer, chaos=0.2, chaos_seed=SEED_WITH_EVERY_FAULT, faults=FAULTS, hang_s=1.0
    ) as server:
        spec = loop_spec(server)
        run = evaluate(E1, spec, backend(spec, attempts=3), dataset_path=None, outputs_root=tmp_path, run_id="retry")
        lost = faulted_prompts(server, attempts=3)
        kinds_retried = {kind for kind, _ in server.fault_log if kind}
    rows = read_results(run.results_path)
    assert kinds_retried == set(FAULTS)
    assert sum(row["attempts"] > 1 for row in rows if row["error"] is None) >= 8
    assert run.summary["n_model_errors"] == len(lost)
    assert run.summary["accuracy"] == 1.0


def test_a_body_without_content_length_is_cut_off_while_read(tmp_path: Path):
    import asyncio

    with LoopbackOpenAIServer(right_answer, chaos=1.0, faults=("huge_unsized",), huge_bytes=20_000_000) as server:
        spec = loop_spec(server, max_reply_bytes=10_000)
        with pytest.raises(CompletionFailed, match="passed 105,536 bytes"):
            asyncio.run(backend(spec, attempts=1).complete([{"role": "user", "content": "hi"}]))


def test_a_reply_over_max_reply_bytes_is_not_an_answer(tmp_path: Path):
    import asyncio

    with LoopbackOpenAIServer(lambda request: "x" * 5000) as server:
        spec = loop_spec(server, max_reply_bytes=4096)
        with pytest.raises(CompletionFailed, match="5,000 bytes of text, over max_reply_bytes 4,096"):
            asyncio.run(backend(spec, attempts=2).complete([{"role": "user", "content": "hi"}]))
        assert len(server.requests) == 2  # retried like a 5xx


def test_a_key_echoed_in_a_401_body_is_redacted_everywhere(tmp_path: Path, monkeypatch):
    # The variable's name does not look secret: the backend registers the value it read.
    key = "loopkey-DONOTLEAK-0123456789abcdef"
    other = "sk-proj-DONOTLEAK0123456789abcdefghij"  # a key shape nobody configured
    monkeypatch.setenv("LOOP_PROVIDER", key)

    with LoopbackOpenAIServer(right_answer, require_api_key=key, reject_chat_echoing_key=True) as server:
        spec = loop_spec(server, api_key_env="LOOP_PROVIDER")
        run = evaluate(
            E1,
            spec,
            backend(spec, attempts=1),
            dataset_path=None,
            outputs_root=tmp_path,
            run_id="echo",
            limit=3,
            dataset_info={"note": f"copied from a ticket: {other}"},
        )
    rows = read_results(run.results_path)
    assert all(row["error_kind"] == "model" and "Incorrect API key provided" in row["error"] for row in rows)
    assert all("<redacted>" in row["error"] for row in rows)
    for path in (p for p in run.run_dir.rglob("*") if p.is_file()):  # references/ included
        text = path.read_text()
        assert key not in text and other not in text, path.name
