"""Model backends: turn chat messages into a completion.

`heuristic` runs an environment's rule baseline in-process; `openai` talks to any
OpenAI-compatible endpoint (OpenAI, vLLM's server, gateways, local servers), and with
`serve:` a checkpoint of ours on a loopback server it starts and stops itself. Transient
errors are retried with backoff (Retry-After honoured); an endpoint that cannot be
reached at all fails in `preflight`, before any example runs.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field, replace
from typing import Any, cast

import httpx
import openai
from openai.types.chat import ChatCompletion
from tenacity import (
    AsyncRetrying,
    RetryCallState,
    retry_if_exception,
    stop_after_attempt,
    wait_exponential_jitter,
)

from sv_dagster.core.artifacts.redaction import redact_text, register_secret
from sv_dagster.core.envs import env_by_id
from sv_dagster.core.models.completion import (
    Backend,
    BackendConfigError,
    BackendUnavailable,
    Completion,
    CompletionFailed,
)
from sv_dagster.core.models.limits import AdaptiveConcurrency
from sv_dagster.core.models.registry import ModelSpec

POOL_SIZE = 8
"""Connections per HTTP pool of an OpenAI-compatible backend."""


class UnusableReply(RuntimeError):
    """A 200 reply that carries no answer: no choices, a choice without a message, or more
    text than the model's `max_reply_bytes`. It is the endpoint's fault, not the model's
    answer, so it is retried like a 5xx and, if it persists, recorded as a model error."""


ERROR_TEXT_CHARS = 2000
"""An error stored on a results row keeps this much of the endpoint's message (an error
body can be megabytes)."""


@dataclass
class HeuristicBackend:
    """An environment's rule baseline in-process (`oracle`: its oracle): `heuristic`
    answers without tools; the oracle answers with what the environment's own verifier
    knows (E2: the tools' findings; E3: the reference fix), an upper bound to read model
    scores against."""

    spec: ModelSpec
    env_id: str
    oracle: bool = False
    reply: Callable[..., str] = field(init=False)

    def __post_init__(self) -> None:
        try:
            env = env_by_id(self.env_id)
        except KeyError as exc:
            raise BackendConfigError(exc.args[0]) from None
        reply = env.oracle if self.oracle else env.heuristic
        if reply is None:
            raise BackendConfigError(f"no {self.spec.backend} baseline for environment {self.env_id!r}")
        self.reply = reply

    async def preflight(self) -> None:
        return None

    async def complete(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None) -> Completion:
        start = time.perf_counter()
        if tools and self.oracle and not any(m.get("role") == "tool" for m in messages):
            # The oracle consults every tool it is offered first, as a model should, so its
            # answer is grounded in the tool results of its own conversation.
            calls = tuple(
                {"id": f"call_{i}", "type": "function", "function": {"name": t["function"]["name"], "arguments": "{}"}}
                for i, t in enumerate(tools)
            )
            return Completion(
                text="", usage=None, latency_s=time.perf_counter() - start, finish_reason="tool_calls", tool_calls=calls
            )
        if getattr(self.reply, "takes_messages", False):  # a dialogue baseline reads the conversation
            return Completion(
                text=self.reply(messages), usage=None, latency_s=time.perf_counter() - start, finish_reason="stop"
            )
        prompt = next((m["content"] for m in reversed(messages) if m["role"] == "user"), "")
        # A baseline may do real work (the oracle runs the tools): keep the event loop free.
        text = await asyncio.to_thread(self.reply, prompt) if self.oracle else self.reply(prompt)
        return Completion(text=text, usage=None, latency_s=time.perf_counter() - start, finish_reason="stop")

    async def aclose(self) -> None:
        return None


def _is_transient(exc: BaseException) -> bool:
    if isinstance(exc, (openai.APIConnectionError, openai.APITimeoutError, openai.RateLimitError)):
        return True
    if isinstance(exc, (json.JSONDecodeError, openai.APIResponseValidationError, UnusableReply)):
        return True  # a garbled or empty body (a proxy's error page) is worth another try
    return isinstance(exc, openai.APIStatusError) and exc.status_code >= 500


def _retry_after(exc: BaseException) -> float | None:
    response = getattr(exc, "response", None)
    value = response.headers.get("retry-after") if response is not None else None
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None


class _WaitRetryAfter:
    """Exponential backoff with jitter, or the server's Retry-After when it sends one
    (capped, so a bogus header cannot stall a run)."""

    def __init__(self, initial: float, maximum: float, retry_after_cap: float = 120.0) -> None:
        self.backoff = wait_exponential_jitter(initial=initial, max=maximum)
        self.retry_after_cap = retry_after_cap

    def __call__(self, retry_state: RetryCallState) -> float:
        exc = retry_state.outcome.exception() if retry_state.outcome else None
        hinted = _retry_after(exc) if exc else None
        return min(hinted, self.retry_after_cap) if hinted is not None else self.backoff(retry_state)


def _failure_text(exc: BaseException, base_url: str, attempts: int) -> str:
    """One line for a results row: what failed, cut to ERROR_TEXT_CHARS and redacted (an
    error body may echo the API key)."""
    cause = exc.__cause__ if isinstance(exc.__cause__, UnusableReply) else exc  # raised inside httpx
    text = f"{type(cause).__name__} from {base_url} after {attempts} attempt(s): {cause}"
    if len(text) > ERROR_TEXT_CHARS:
        text = text[:ERROR_TEXT_CHARS] + f"... [{len(text) - ERROR_TEXT_CHARS:,} more characters]"
    return redact_text(text)


class _CappedStream(httpx.AsyncByteStream):
    """A response body that stops being read once it passes `limit` bytes."""

    def __init__(self, inner: httpx.AsyncByteStream, limit: int) -> None:
        self.inner, self.limit = inner, limit

    async def __aiter__(self) -> AsyncIterator[bytes]:
        seen = 0
        async for chunk in self.inner:
            seen += len(chunk)
            if seen > self.limit:
                raise UnusableReply(f"the reply body passed {self.limit:,} bytes; it was not read further")
            yield chunk

    async def aclose(self) -> None:
        await self.inner.aclose()


class CappedTransport(httpx.AsyncBaseTransport):
    """An HTTP transport that refuses response bodies over `limit` bytes before they are
    held in memory: by Content-Length when the server sends it, else while reading."""

    def __init__(self, inner: httpx.AsyncBaseTransport, limit: int) -> None:
        self.inner, self.limit = inner, limit

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await self.inner.handle_async_request(request)
        length = response.headers.get("content-length", "")
        if length.isdigit() and int(length) > self.limit:
            await response.aclose()
            raise UnusableReply(f"the reply body is {int(length):,} bytes, over the limit of {self.limit:,}")
        # An async transport's response streams asynchronously (httpx types it as either).
        response.stream = _CappedStream(cast(httpx.AsyncByteStream, response.stream), self.limit)
        return response

    async def aclose(self) -> None:
        await self.inner.aclose()


class OpenAICompatibleBackend:
    def __init__(
        self,
        spec: ModelSpec,
        *,
        max_attempts: int = 4,
        backoff_initial_s: float = 0.5,
        backoff_max_s: float = 30.0,
    ) -> None:
        if not spec.base_url:
            raise BackendConfigError(f"model {spec.name!r}: openai backend needs base_url")
        api_key = "EMPTY"  # local servers (vLLM without --api-key) accept any key
        if spec.api_key_env:
            api_key = os.environ.get(spec.api_key_env, "")
            if not api_key:
                raise BackendConfigError(
                    f"model {spec.name!r}: environment variable {spec.api_key_env} is not set "
                    f"(put it in .env or export it); no request was sent to {spec.base_url}"
                )
        register_secret(api_key)  # whatever its variable is called, it is never written anywhere
        self.spec = spec
        self.base_url = spec.base_url.rstrip("/")
        self._api_key = api_key
        self.max_attempts = max_attempts
        self._wait = _WaitRetryAfter(backoff_initial_s, backoff_max_s)
        self.limits = AdaptiveConcurrency(spec.max_concurrency, requests_per_minute=spec.requests_per_minute)
        # Several small connection pools, used in turn: httpcore scans its whole pool on
        # every request, so one pool of 64 connections made that scan the runner's main
        # cost (8 ms per request here); pools of 8 keep it small.
        pools = max(1, -(-spec.max_concurrency // POOL_SIZE))
        per_pool = -(-spec.max_concurrency // pools)
        body_limit = 4 * spec.max_reply_bytes + 65536  # JSON escapes a character in at most 4x its UTF-8 bytes
        self.clients = [
            openai.AsyncOpenAI(
                base_url=self.base_url,
                api_key=api_key,
                max_retries=0,  # retries are ours (tenacity), so they are counted and recorded
                timeout=spec.sampling.timeout_s,
                http_client=openai.DefaultAsyncHttpxClient(
                    transport=CappedTransport(
                        httpx.AsyncHTTPTransport(
                            limits=httpx.Limits(max_connections=per_pool, max_keepalive_connections=per_pool)
                        ),
                        body_limit,
                    )
                ),
            )
            for _ in range(pools)
        ]
        self._next_client = itertools.cycle(self.clients)

    async def preflight(self) -> None:
        """Fail early, naming the URL, when the endpoint is unreachable or rejects the key."""
        url = f"{self.base_url}/models"
        try:
            async with httpx.AsyncClient(timeout=10.0) as http:
                response = await http.get(url, headers={"Authorization": f"Bearer {self._api_key}"})
        except httpx.HTTPError as exc:
            raise BackendUnavailable(
                f"model {self.spec.name!r}: cannot reach {url} ({type(exc).__name__}: {exc})"
            ) from exc
        if response.status_code in (401, 403):
            raise BackendUnavailable(
                f"model {self.spec.name!r}: {url} rejected the API key "
                f"(HTTP {response.status_code}; key from {self.spec.api_key_env or 'no env var'})"
            )
        # Other statuses (e.g. 404 on gateways without /models) still prove it is reachable.

    def _request(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None) -> dict[str, Any]:
        s = self.spec.sampling
        request: dict[str, Any] = {"model": self.spec.model, "messages": messages}
        if tools:
            request["tools"] = tools
        if s.temperature is not None:
            request["temperature"] = s.temperature
        if s.top_p is not None and s.top_p != 1.0:
            request["top_p"] = s.top_p
        if s.max_tokens:
            request["max_completion_tokens"] = s.max_tokens
        if s.seed is not None:
            request["seed"] = s.seed
        return request

    async def complete(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None) -> Completion:
        start = time.perf_counter()
        attempts = 0
        try:
            async for attempt in AsyncRetrying(
                retry=retry_if_exception(_is_transient),
                stop=stop_after_attempt(self.max_attempts),
                wait=self._wait,
                reraise=True,
            ):
                with attempt:
                    attempts += 1
                    async with self.limits.slot():
                        try:
                            # `post` rather than `chat.completions.create`: the request is already
                            # plain JSON, and create()'s TypedDict transform cost ~1.7 ms a call.
                            response = await next(self._next_client).post(
                                "/chat/completions", body=self._request(messages, tools), cast_to=ChatCompletion
                            )
                        except openai.RateLimitError:
                            self.limits.throttled()
                            raise
                    completion = self._completion(response)  # an unusable reply is retried like a 5xx
                    self.limits.succeeded()
        except (openai.OpenAIError, json.JSONDecodeError, UnusableReply) as exc:
            raise CompletionFailed(_failure_text(exc, self.base_url, attempts), attempts) from exc
        return replace(completion, latency_s=time.perf_counter() - start, attempts=attempts)

    def _completion(self, response: ChatCompletion) -> Completion:
        """The model's turn in `response`, or UnusableReply when it carries none."""
        choice = response.choices[0] if response.choices else None
        if choice is None or choice.message is None:
            raise UnusableReply("the reply has no choices" if choice is None else "the reply's choice has no message")
        calls: tuple[dict[str, Any], ...] = tuple(
            {
                "id": call.id,
                "type": "function",
                "function": {"name": function.name, "arguments": function.arguments or ""},
            }
            for call in (choice.message.tool_calls or [])
            if (function := getattr(call, "function", None)) is not None
        )
        if choice.message.content is None and not calls:
            raise UnusableReply("the reply's message has neither content nor tool calls")
        text = choice.message.content or ""
        size = len(text.encode("utf-8", "surrogatepass")) + sum(
            len(c["function"]["arguments"].encode("utf-8", "surrogatepass")) for c in calls
        )
        if size > self.spec.max_reply_bytes:
            raise UnusableReply(
                f"the reply holds {size:,} bytes of text, over max_reply_bytes {self.spec.max_reply_bytes:,}"
            )
        usage = (
            response.usage.model_dump(include={"prompt_tokens", "completion_tokens", "total_tokens"})
            if response.usage
            else None
        )
        return Completion(text=text, usage=usage, latency_s=0.0, finish_reason=choice.finish_reason, tool_calls=calls)

    async def aclose(self) -> None:
        for client in self.clients:
            await client.close()


class ServedBackend:
    """A model served here (`serve:` in the registry): its loopback server starts in
    `preflight`, the OpenAI-compatible backend above then asks it over HTTP like any hosted
    model, and `aclose` stops it. `checkpoint`, when given, is the folder served instead of
    the entry's (a trained checkpoint); `server_options` go to `ModelServer`; `resolve` turns
    `serve:` into a folder (default `serving.resolve_checkpoint`, which serves a catalog base
    model from its cached conversion; the `serving` resource's converts it on first use).
    With a `pool` (`serving.ServerPool`), the server comes from the pool and outlives the
    backend: the pool's owner stops it."""

    def __init__(
        self,
        spec: ModelSpec,
        checkpoint: str | os.PathLike[str] | None = None,
        server_options: dict[str, Any] | None = None,
        resolve: Callable[[str], str | os.PathLike[str]] | None = None,
        pool: Any = None,
        **backend_options: Any,
    ) -> None:
        if not spec.serve and not checkpoint:
            raise BackendConfigError(f"model {spec.name!r}: nothing to serve (no 'serve' and no checkpoint)")
        self.spec = spec
        self.checkpoint = checkpoint
        self.server_options = server_options or {}
        self.resolve = resolve
        self.pool = pool
        self.backend_options = backend_options
        self.server: Any = None
        """The server this backend started and stops (None with a pool)."""
        self.served: Any = None
        """The last server's `ServedModel` (folder, URL, pid), kept after it stops."""
        self.inner: OpenAICompatibleBackend | None = None
        self.closed = False
        self._identity: dict[str, Any] | None = None

    @property
    def limits(self) -> AdaptiveConcurrency | None:
        return self.inner.limits if self.inner is not None else None

    @property
    def cache_identity(self) -> dict[str, Any] | None:
        """The served checkpoint, for response-cache keys (`serving.checkpoint_identity`, read
        once when the server starts); None until then."""
        return self._identity

    def _start(self) -> OpenAICompatibleBackend:
        from sv_dagster.core.models.serving import ModelServer, checkpoint_identity, resolve_checkpoint

        folder = self.checkpoint or (self.resolve or resolve_checkpoint)(str(self.spec.serve))
        if self.pool is not None:
            served = self.pool.serve(folder, **self.server_options)
        else:
            server = ModelServer(folder, **self.server_options)
            served = server.start()
            self.server = server
        self.served, self._identity = served, checkpoint_identity(served.folder)
        try:  # the server answers to the folder's path as the model id
            return OpenAICompatibleBackend(
                replace(self.spec, base_url=served.base_url, model=served.model), **self.backend_options
            )
        except BaseException:
            if self.server is not None:
                server, self.server = self.server, None
                server.stop()
            raise

    async def preflight(self) -> None:
        if self.inner is None:
            self.inner = await asyncio.to_thread(self._start)
        await self.inner.preflight()

    async def complete(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None) -> Completion:
        if self.inner is None or self.closed:
            raise BackendUnavailable(f"model {self.spec.name!r}: its server is not running (call preflight first)")
        return await self.inner.complete(messages, tools)

    async def aclose(self) -> None:
        self.closed = True
        if self.inner is not None:
            await self.inner.aclose()
        if self.server is not None:
            server, self.server = self.server, None
            await asyncio.to_thread(server.stop)


def make_backend(
    spec: ModelSpec,
    env_id: str,
    checkpoint: str | os.PathLike[str] | None = None,
    server_options: dict[str, Any] | None = None,
    resolve: Callable[[str], str | os.PathLike[str]] | None = None,
    pool: Any = None,
) -> Backend:
    """The backend for a registry entry; configuration errors raise here, before any call.
    `checkpoint` is the weights folder of a `local` model trained here, or the folder a
    served (`serve:`) model serves instead of its own; `server_options`, `resolve` and
    `pool` are the served model's (`ServedBackend`)."""
    if spec.backend == "heuristic":
        return HeuristicBackend(spec, env_id)
    if spec.backend == "oracle":
        return HeuristicBackend(spec, env_id, oracle=True)
    if spec.served:
        return ServedBackend(spec, checkpoint, server_options, resolve, pool)
    if spec.backend == "openai":
        return OpenAICompatibleBackend(spec)
    if spec.backend == "local":
        from sv_dagster.core.models.local_backend import LocalTransformersBackend  # torch: only when used

        return LocalTransformersBackend(spec, checkpoint)
    raise BackendConfigError(f"model {spec.name!r}: unknown backend {spec.backend!r}")
