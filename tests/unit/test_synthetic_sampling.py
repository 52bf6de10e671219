"""Seed models vary template rows at every temperature of a sweep, over real HTTP (the
loopback OpenAI-compatible server); their rows are validated and labelled like any other,
and what they get wrong is rejected with the model and temperature recorded."""

from __future__ import annotations

import json
import re
import socket
from pathlib import Path

import pytest

from sv_dagster.core.data.synthetic import BatchSpec, Upstream, build_batch
from sv_dagster.core.data.synthetic.sampling import SamplingConfigError, resolve_models
from sv_dagster.core.models.completion import BackendUnavailable
from sv_dagster.core.models.registry import ModelSpec, load_registry
from tests.support.openai_server import LoopbackOpenAIServer

TEMPERATURES = (0.2, 0.9)


def _spec(tmp_path: Path, env: str, env_id: str, model: ModelSpec, size: int, variations: int) -> BatchSpec:
    return BatchSpec(
        env=env,
        env_id=env_id,
        partition="2026-11-09",
        batch_id="m1",
        out_dir=tmp_path / env,
        size=size,
        seed=5,
        sample=True,
        seed_models=(model,),
        temperatures=TEMPERATURES,
        variations=variations,
    )


def _model(url: str) -> ModelSpec:
    return ModelSpec(name="loop", backend="openai", model="writer", base_url=url, max_concurrency=4)


def test_e4_rewrites_at_each_temperature_are_labelled_or_rejected(tmp_path):
    def reply(request: dict) -> str:
        prompt = request["messages"][-1]["content"]
        body = prompt.split("\n\n", 1)[1]
        if request["temperature"] > 0.5:  # the hotter sample forgets the links, or says nothing
            return re.sub(r"https?://\S+", "", body) if "http" in body else ""
        return "Hello again.\n" + body

    with LoopbackOpenAIServer(reply) as server:
        result = build_batch(
            _spec(tmp_path, "e4", "sv-env-phishing-detection", _model(server.base_url), 30, 6), Upstream()
        )
        requests = list(server.requests)
    assert sorted({r["temperature"] for r in requests}) == list(TEMPERATURES)
    assert len(requests) == 12 and all(r["model"] == "writer" for r in requests)
    meta = result.metadata
    assert meta["counts"]["model_calls"] == 12 and meta["seed_models"][0]["temperatures"] == list(TEMPERATURES)
    rows = [json.loads(line) for line in result.files["examples"].read_text().splitlines()]
    from_model = [r for r in rows if r["info"]["origin"] == "model"]
    assert len(from_model) == 6 and all(r["info"]["seed_model"]["temperature"] == 0.2 for r in from_model)
    assert all(r["info"]["email"]["body"].startswith("Hello again.") and r["info"]["varied_from"] for r in from_model)
    rejects = [json.loads(line) for line in result.files["rejects"].read_text().splitlines()]
    hot = [r for r in rejects if r.get("temperature") == 0.9]
    assert len(hot) == 6 and all(r["stage"] == "sampling" and r["model"] == "loop" for r in hot)
    assert all(
        "the rewrite dropped URL" in r["reason"] or r["reason"] == "unusable model reply: empty reply" for r in hot
    )
    assert any("dropped URL" in r["reason"] for r in hot)


def test_e1_flows_from_a_model_face_the_same_labeller(tmp_path):
    flow = {
        "id.orig_p": 41000,
        "id.resp_p": 22,
        "proto": "tcp",
        "service": "ssh",
        "duration": 2.5,
        "orig_bytes": 90,
        "resp_bytes": 140,
        "conn_state": "RSTO",
        "missed_bytes": 0,
        "history": "ShAdDaFr",
        "orig_pkts": 3,
        "orig_ip_bytes": 210,
        "resp_pkts": 2,
        "resp_ip_bytes": 220,
    }

    with LoopbackOpenAIServer(lambda request: "```json\n" + json.dumps(flow) + "\n```") as server:
        result = build_batch(_spec(tmp_path, "e1", "sv-env-network-logs", _model(server.base_url), 200, 4), Upstream())
        prompts = [r["messages"][-1]["content"] for r in server.requests]
    asked = {re.search(r"for this scenario: ([a-z0-9 ]+) \(", p).group(1).replace(" ", "_") for p in prompts}
    assert len(asked) == 4
    rows = [json.loads(line) for line in result.files["examples"].read_text().splitlines()]
    from_model = [r for r in rows if r["info"]["origin"] == "model"]
    rejects = [json.loads(line) for line in result.files["rejects"].read_text().splitlines() if '"model"' in line]
    # The same SSH flow stands as brute force and is refused for any other scenario it was asked for.
    assert {r["info"]["scenario"] for r in from_model} <= {"brute_force"}
    assert len(from_model) == 2 * ("brute_force" in asked)
    assert len(rejects) == 2 * len(asked - {"brute_force"}) and all(r["stage"] == "verification" for r in rejects)
    assert all(r["info"]["seed_model"]["name"] == "loop" for r in from_model)


def test_a_bad_sampling_config_fails_before_any_work(tmp_path):
    registry = load_registry()
    with pytest.raises(SamplingConfigError, match=r"\['nope'\] are not in the model registry"):
        resolve_models(["nope"], registry, [0.5])
    with pytest.raises(SamplingConfigError, match="embedded backend"):
        resolve_models(["heuristic"], registry, [0.5])
    with pytest.raises(SamplingConfigError, match="temperatures"):
        resolve_models(["gpt-5"], registry, [3.0])
    with socket.socket() as held:  # bound, never listening: connections are refused, and no one else gets the port
        held.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{held.getsockname()[1]}/v1"
        with pytest.raises(BackendUnavailable, match=re.escape(url)):
            build_batch(_spec(tmp_path, "e4", "sv-env-phishing-detection", _model(url), 10, 2), Upstream())
    assert not (tmp_path / "e4").exists()  # nothing written for a batch that could not sample
