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


def test_async_streaming_and_tools_requests_get_plain_text():
    tools = [{"type": "function", "function": {"name": "lookup", "parameters": {"type": "object", "properties": {}}}}]

    async def call(server):
        client = openai.AsyncOpenAI(base_url=server.base_url, api_key="k", max_retries=0)
        stream = await client.chat.completions.create(
            model="m",
            messages=[{"role": "user", "content": "a b c"}],
            tools=tools,
            stream=True,
            stream_options={"include_usage": True},
        )
        chunks = [chunk async for chunk in stream]
        await client.close()
        return chunks

    reply = "  two  spaces\nand a newline  "
    with LoopbackOpenAIServer(lambda req: reply) as server:
        chunks = asyncio.run(call(server))
        assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == reply
        assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"
        assert not any(c.choices[0].delta.tool_calls for c in chunks if c.choices)
        assert chunks[-1].usage.prompt_tokens == 3 and chunks[-1].usage.completion_tokens == 5
        assert server.requests[0]["tools"] == tools and server.requests[0]["stream"] is True


def test_fail_next_defaults_to_500_then_recovers_and_errors_are_openai_shaped():
    with LoopbackOpenAIServer(require_api_key="key") as server:
        client = openai.OpenAI(base_url=server.base_url, api_key="key", max_retries=0)
        server.fail_next(2)
        for _ in range(2):
            with pytest.raises(openai.InternalServerError):
                client.chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}])
        reply = client.chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}])
        assert reply.object == "chat.completion" and reply.choices[0].message.role == "assistant"
        assert reply.usage.total_tokens == reply.usage.prompt_tokens + reply.usage.completion_tokens
        unauthorized = httpx.post(f"{server.base_url}/chat/completions", json={"messages": []})
        assert unauthorized.status_code == 401 and "message" in unauthorized.json()["error"]
        missing = httpx.post(f"{server.base_url}/completions", json={}, headers={"Authorization": "Bearer key"})
        assert missing.status_code == 404 and missing.json()["error"]["message"]
        assert len(server.requests) == 3  # failed attempts are recorded too
