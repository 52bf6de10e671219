"""The eval runner against a real OpenAI-compatible server on loopback."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sv_dagster.core.envs import ENVS
from sv_dagster.core.evals.evaluation import evaluate
from sv_dagster.core.evals.runner import read_results
from sv_dagster.core.models.backends import BackendConfigError, BackendUnavailable, OpenAICompatibleBackend
from sv_dagster.core.models.registry import ModelSpec, Sampling
from sv_env_network_logs import heuristic_reply
from tests.support.openai_server import LoopbackOpenAIServer

E1 = ENVS["e1"]


def spec(server: LoopbackOpenAIServer, **extra) -> ModelSpec:
    return ModelSpec(name="loop/back:v1", backend="openai", model="loopback-model", base_url=server.base_url, **extra)


def fast_backend(model: ModelSpec) -> OpenAICompatibleBackend:
    return OpenAICompatibleBackend(model, max_attempts=3, backoff_initial_s=0.01, backoff_max_s=0.05)


def prose_reply(request: dict) -> str:
    """A chatty model: the baseline's JSON inside prose and a fence."""
    return f"Let me look.\n```json\n{heuristic_reply(request['messages'][-1]['content'])}\n```\nHope that helps."


def test_eval_over_http_records_completions_usage_and_rewards(tmp_path: Path):
    with LoopbackOpenAIServer(prose_reply) as server:
        model = spec(server)
        run = evaluate(E1, model, fast_backend(model), dataset_path=None, outputs_root=tmp_path, run_id="r1", limit=12)
        sent = list(server.requests)
    assert run.run_dir == tmp_path / "evals" / "sv-env-network-logs--loop_back_v1" / "r1"
    rows = read_results(run.results_path)
    assert len(rows) == 12 == len(sent)
    assert sent[0]["model"] == "loopback-model" and sent[0]["messages"][0]["role"] == "system"
    assert sent[0]["temperature"] == 0.0 and sent[0]["seed"] == 0
    for row in rows:
        assert row["error"] is None and row["usage"]["completion_tokens"] > 0
        assert row["parsed"]["format_ok"] and row["rewards"]["format"] == 1.0
    summary = json.loads(run.summary_path.read_text())
    assert summary["n_examples"] == 12 and summary["n_errors"] == 0
    assert run.metadata["model"]["base_url"] == server.base_url


def test_transient_errors_are_retried_and_counted(tmp_path: Path):
    with LoopbackOpenAIServer(prose_reply) as server:
        server.fail_next(2, status=503)
        model = spec(server, max_concurrency=1)
        run = evaluate(E1, model, fast_backend(model), dataset_path=None, outputs_root=tmp_path, run_id="r", limit=3)
    rows = read_results(run.results_path)
    assert all(row["error"] is None for row in rows)
    assert sorted(row["attempts"] for row in rows) == [1, 1, 3]


def test_rate_limit_retry_after_is_honoured(tmp_path: Path):
    with LoopbackOpenAIServer(prose_reply) as server:
        server.fail_next(1, status=429, retry_after=0.3)
        model = spec(server, max_concurrency=1)
        run = evaluate(E1, model, fast_backend(model), dataset_path=None, outputs_root=tmp_path, run_id="r", limit=1)
    (row,) = read_results(run.results_path)
    assert row["attempts"] == 2 and row["latency_s"] >= 0.3  # waited Retry-After, not the 0.05 s backoff


def test_a_request_that_keeps_failing_is_recorded_not_counted_wrong(tmp_path: Path):
    with LoopbackOpenAIServer(prose_reply) as server:
        server.fail_next(3, status=500)  # all three attempts of the first example
        model = spec(server, max_concurrency=1)
        run = evaluate(E1, model, fast_backend(model), dataset_path=None, outputs_root=tmp_path, run_id="r", limit=4)
    rows = read_results(run.results_path)
    failed = [row for row in rows if row["error"]]
    assert len(rows) == 4 and len(failed) == 1
    assert failed[0]["error_kind"] == "model" and failed[0]["attempts"] == 3 and failed[0]["reward"] is None
    assert server.base_url in failed[0]["error"]
    assert run.summary["n_model_errors"] == 1 and run.summary["n"] == 3  # metrics over the 3 answered


def test_non_transient_error_is_not_retried(tmp_path: Path):
    with LoopbackOpenAIServer(prose_reply) as server:
        server.fail_next(1, status=400)
        model = spec(server, max_concurrency=1)
        run = evaluate(E1, model, fast_backend(model), dataset_path=None, outputs_root=tmp_path, run_id="r", limit=2)
    rows = read_results(run.results_path)
    assert sorted((row["attempts"], row["error_kind"] or "") for row in rows) == [(1, ""), (1, "model")]


def test_unreachable_endpoint_fails_before_any_example_naming_the_url(tmp_path: Path):
    with LoopbackOpenAIServer() as server:
        url = server.base_url
    model = ModelSpec(name="gone", backend="openai", model="m", base_url=url)  # server stopped
    with pytest.raises(BackendUnavailable, match=f"cannot reach {url}/models"):
        evaluate(E1, model, fast_backend(model), dataset_path=None, outputs_root=tmp_path, run_id="r")
    assert not (tmp_path / "evals").exists()


def test_rejected_key_fails_before_any_example(tmp_path: Path, monkeypatch):
    monkeypatch.setenv("LOOP_KEY", "wrong-key-123456")
    with LoopbackOpenAIServer(require_api_key="right-key-123456") as server:
        model = spec(server, api_key_env="LOOP_KEY")
        with pytest.raises(BackendUnavailable, match="rejected the API key .*LOOP_KEY"):
            evaluate(E1, model, fast_backend(model), dataset_path=None, outputs_root=tmp_path, run_id="r")
        assert server.requests == []


def test_missing_api_key_is_a_config_error_before_any_request(monkeypatch):
    monkeypatch.delenv("NOT_SET_KEY", raising=False)
    with LoopbackOpenAIServer() as server:
        with pytest.raises(BackendConfigError, match="NOT_SET_KEY is not set"):
            OpenAICompatibleBackend(spec(server, api_key_env="NOT_SET_KEY"))
        assert server.requests == []


def test_bad_dataset_fails_before_any_model_call(tmp_path: Path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"question": "q"}\n')
    with LoopbackOpenAIServer() as server:
        model = spec(server)
        with pytest.raises(ValueError, match=f"{bad}:1: missing 'answer'"):
            evaluate(E1, model, fast_backend(model), dataset_path=bad, outputs_root=tmp_path, run_id="r")
        assert server.requests == []


def test_a_scoring_failure_is_recorded_and_the_run_goes_on(tmp_path: Path, monkeypatch):
    import sv_env_network_logs.taskset as taskset

    real = taskset.accuracy_reward

    def flaky(predicted, gold):
        if predicted == "Abstain":
            raise RuntimeError("verifier bug")
        return real(predicted, gold)

    monkeypatch.setattr(taskset, "accuracy_reward", flaky)
    with LoopbackOpenAIServer(
        lambda req: (
            '{"label": "Abstain", "confidence": 0.5}'
            if "id.resp_p: 23" in req["messages"][-1]["content"]
            else prose_reply(req)
        )
    ) as server:
        model = spec(server)
        run = evaluate(E1, model, fast_backend(model), dataset_path=None, outputs_root=tmp_path, run_id="r")
    rows = read_results(run.results_path)
    broken = [row for row in rows if row["error_kind"] == "scoring"]
    assert broken and len(rows) == 60
    assert all("verifier bug" in row["error"] and row["completion"] and row["reward"] is None for row in broken)
    assert run.summary["n_scoring_errors"] == len(broken) and run.summary["n"] == 60 - len(broken)


def test_response_cache_answers_a_repeated_run_without_calls(tmp_path: Path):
    from sv_dagster.core.models.cache import ResponseCache

    cache = ResponseCache(tmp_path / "cache.sqlite3")
    with LoopbackOpenAIServer(prose_reply) as server:
        model = spec(server)
        first = evaluate(
            E1, model, fast_backend(model), dataset_path=None, outputs_root=tmp_path, run_id="a", limit=6, cache=cache
        )
        asked = len(server.requests)
        second = evaluate(
            E1, model, fast_backend(model), dataset_path=None, outputs_root=tmp_path, run_id="b", limit=6, cache=cache
        )
        assert len(server.requests) == asked == 6  # no new calls
        hotter = ModelSpec(**{**model.__dict__, "sampling": Sampling(temperature=0.9)})
        evaluate(
            E1, hotter, fast_backend(hotter), dataset_path=None, outputs_root=tmp_path, run_id="c", limit=6, cache=cache
        )
        assert len(server.requests) == 12  # other sampling parameters: a different request
    rows_a, rows_b = read_results(first.results_path), read_results(second.results_path)
    assert {r["example_id"]: r["completion"] for r in rows_a} == {r["example_id"]: r["completion"] for r in rows_b}
    assert all(r["cached"] for r in rows_b) and not any(r["cached"] for r in rows_a)
    assert second.metadata["response_cache"]["hits"] == 6 and first.metadata["response_cache"]["misses"] == 6


def test_rescore_uses_stored_completions_and_the_new_reward_config(tmp_path: Path):
    from sv_dagster.core.evals.evaluation import rescore

    with LoopbackOpenAIServer(prose_reply) as server:
        model = spec(server)
        server.fail_next(3, status=500)  # one example ends as a model error
        first = evaluate(
            E1, model, fast_backend(model), dataset_path=None, outputs_root=tmp_path, run_id="a", limit=8, concurrency=1
        )
        asked = len(server.requests)
    heavier = tmp_path / "heavier.toml"
    heavier.write_text("[weights]\naccuracy = 4.0\n")
    again = rescore(E1, first.run_dir, outputs_root=tmp_path, run_id="a-rescored", reward_config=heavier)
    assert len(server.requests) == asked  # no model call
    old, new = read_results(first.results_path), read_results(again.results_path)
    assert [r["example_id"] for r in old] == [r["example_id"] for r in new]
    for before, after in zip(old, new):
        assert before["completion"] == after["completion"]
        if before["error_kind"] == "model":
            assert after["error_kind"] == "model" and after["reward"] is None
        else:
            assert after["reward_weights"]["accuracy"] == 4.0
            assert after["rewards"] == before["rewards"]  # same verifier, same scores
    assert again.metadata["rescored_from"]["run_id"] == "a"
    assert again.summary["accuracy"] == first.summary["accuracy"]
    assert again.run_dir.parent == first.run_dir.parent


def test_cost_per_example_from_the_price_table(tmp_path: Path):
    from sv_dagster.core.models.cache import ResponseCache
    from sv_dagster.core.models.pricing import load_price_table

    prices = load_price_table()
    cache = ResponseCache(tmp_path / "cache.sqlite3")
    with LoopbackOpenAIServer(prose_reply) as server:
        priced = ModelSpec(name="mini", backend="openai", model="gpt-5-mini", base_url=server.base_url)
        run = evaluate(
            E1, priced, fast_backend(priced), dataset_path=None, outputs_root=tmp_path, run_id="p", limit=5, cache=cache
        )
        again = evaluate(
            E1, priced, fast_backend(priced), dataset_path=None, outputs_root=tmp_path, run_id="q", limit=5, cache=cache
        )
        unpriced = spec(server)
        free = evaluate(
            E1, unpriced, fast_backend(unpriced), dataset_path=None, outputs_root=tmp_path, run_id="r", limit=5
        )
    rows = read_results(run.results_path)
    for row in rows:
        usage = row["usage"]
        assert row["cost_usd"] == pytest.approx(
            (usage["prompt_tokens"] * 0.25 + usage["completion_tokens"] * 2.0) / 1e6
        )
    assert run.summary["total_cost_usd"] == pytest.approx(sum(r["cost_usd"] for r in rows))
    assert run.summary["total_cost_usd"] > 0
    assert run.metadata["price_table"]["version"] == prices.version
    assert again.summary["total_cost_usd"] == 0.0  # all from the cache
    assert free.summary["total_cost_usd"] is None and free.summary["n_unpriced"] == 5


def test_concurrency_halves_on_429_and_never_exceeds_the_cap(tmp_path: Path):
    with LoopbackOpenAIServer(prose_reply, delay_s=0.03) as server:
        server.fail_next(6, status=429, retry_after=0.0)
        model = spec(server, max_concurrency=8)
        run = evaluate(
            E1, model, fast_backend(model), dataset_path=None, outputs_root=tmp_path, run_id="r", concurrency=16
        )
        peak = server.peak_in_flight
    limits = run.metadata["endpoint_limits"]
    assert peak <= 8 and limits["peak_in_flight"] <= 8
    assert limits["throttle_events"] >= 1 and limits["lowest_limit"] < 8
    assert run.summary["n_errors"] == 0 and run.summary["n_examples"] == 60


def test_requests_per_minute_cap(tmp_path: Path):
    import time

    with LoopbackOpenAIServer(prose_reply) as server:
        model = spec(server, requests_per_minute=240)  # 4 per second
        start = time.perf_counter()
        evaluate(E1, model, fast_backend(model), dataset_path=None, outputs_root=tmp_path, run_id="r", limit=12)
        elapsed = time.perf_counter() - start
    assert elapsed >= 1.5  # 12 requests at 4/s with a one-second burst need >= 2 s of bucket time


def test_twenty_percent_faults_every_example_ends_scored_or_recorded(tmp_path: Path):
    with LoopbackOpenAIServer(prose_reply, chaos=0.2, chaos_seed=7, hang_s=1.5) as server:
        model = spec(server, max_concurrency=8, sampling=Sampling(timeout_s=0.5))
        run = evaluate(E1, model, fast_backend(model), dataset_path=None, outputs_root=tmp_path, run_id="chaos")
        injected = list(server.injected)
    rows = read_results(run.results_path)
    assert len(rows) == 60 and len({r["example_id"] for r in rows}) == 60
    assert set(injected) == {"429", "500", "hang", "garbage"}
    for row in rows:
        assert (row["error"] is None and row["rewards"] is not None) or row["error_kind"] == "model"
    retried = [row for row in rows if row["error"] is None and row["attempts"] > 1]
    assert retried, "transient faults were retried"
    assert run.summary["n_examples"] == 60


def test_refusals_are_their_own_column(tmp_path: Path):
    def sometimes_refuses(request: dict) -> str:
        prompt = request["messages"][-1]["content"]
        return "I can't help with analysing network traffic." if "proto: udp" in prompt else prose_reply(request)

    with LoopbackOpenAIServer(sometimes_refuses) as server:
        model = spec(server)
        run = evaluate(E1, model, fast_backend(model), dataset_path=None, outputs_root=tmp_path, run_id="r")
    rows = read_results(run.results_path)
    refused = [row for row in rows if row["refusal"]]
    assert refused and all(row["error"] is None and row["rewards"]["format"] == 0.0 for row in refused)
    assert not any(row["refusal"] for row in rows if row not in refused)
    assert run.summary["n_refusals"] == len(refused)
