"""The loopback server speaks OpenAI's wire format, as seen by the official client."""

from __future__ import annotations

import asyncio

import httpx
import openai
import pytest

from tests.support.openai_server import LoopbackOpenAIServer


def test_plain_and_streaming_chat_with_usage():
    with LoopbackOpenAIServer(lambda req: "hello there world") as server:
        client = openai.OpenAI(base_url=server.base_url, api_key="k", max_retries=0)
        reply = client.chat.completions.create(model="m", messages=[{"role": "user", "content": "one two"}])
        assert reply.choices[0].message.content == "hello there world"
        assert (reply.usage.prompt_tokens, reply.usage.completion_tokens) == (2, 3)
        stream = client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "x"}], stream=True, stream_options={"include_usage": True}
        )
        chunks = list(stream)
        text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
        assert text == "hello there world"
        assert chunks[-1].usage.total_tokens == 4
        assert [m.id for m in client.models.list()] == ["loopback-model"]
        assert len(server.requests) == 2


def test_async_client_and_injected_rate_limit_with_retry_after():
    async def call(server):
        client = openai.AsyncOpenAI(base_url=server.base_url, api_key="k", max_retries=0)
        with pytest.raises(openai.RateLimitError) as info:
            await client.chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}])
        assert info.value.response.headers["retry-after"] == "0.25"
        ok = await client.chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}])
        await client.close()
        return ok

    with LoopbackOpenAIServer() as server:
        server.fail_next(1, status=429, retry_after=0.25)
        assert asyncio.run(call(server)).choices[0].finish_reason == "stop"


def test_api_key_is_enforced_when_required():
    with LoopbackOpenAIServer(require_api_key="right") as server:
        with pytest.raises(openai.AuthenticationError):
            openai.OpenAI(base_url=server.base_url, api_key="wrong", max_retries=0).models.list()
        assert httpx.get(f"{server.base_url}/models", headers={"Authorization": "Bearer right"}).status_code == 200
        assert httpx.get(f"{server.base_url}/nowhere").status_code == 404
