"""Tools an environment offers the model, as OpenAI function tools.

An environment task lists its tools as plain async functions (`task.tool_functions()`)
with annotated parameters and a docstring; this module turns them into the JSON schemas
sent with a request and runs the calls the model makes. A bad call (unknown tool, arguments
that are not JSON or do not fit, a tool that raises) is answered with an error message the
model can read, and recorded: it never ends the rollout.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import pydantic

ToolFunction = Callable[..., Awaitable[str]]

MAX_TOOL_OUTPUT_CHARS = 20_000
"""Longer tool output is cut (the model's context is finite; the full result is the tool's)."""


def _arguments_model(fn: ToolFunction) -> type[pydantic.BaseModel]:
    fields: dict[str, Any] = {}
    for name, param in inspect.signature(fn, eval_str=True).parameters.items():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            continue
        annotation = param.annotation if param.annotation is not inspect.Parameter.empty else Any
        default = ... if param.default is inspect.Parameter.empty else param.default
        fields[name] = (annotation, default)
    return pydantic.create_model(f"{fn.__name__}_arguments", __config__=pydantic.ConfigDict(extra="forbid"), **fields)


@dataclass
class ToolBox:
    """The tools of one rollout, and a record of every call made."""

    functions: Sequence[ToolFunction]
    calls: list[dict[str, Any]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._by_name = {fn.__name__: fn for fn in self.functions}
        self._models = {fn.__name__: _arguments_model(fn) for fn in self.functions}

    @property
    def names(self) -> list[str]:
        return list(self._by_name)

    def schemas(self) -> list[dict[str, Any]]:
        out = []
        for name, fn in self._by_name.items():
            parameters = self._models[name].model_json_schema()
            parameters.pop("title", None)
            out.append(
                {
                    "type": "function",
                    "function": {
                        "name": name,
                        "description": inspect.cleandoc(fn.__doc__ or name),
                        "parameters": parameters,
                    },
                }
            )
        return out

    async def call(self, name: str, arguments: str) -> str:
        """Run one call; the text goes back to the model as the tool message."""
        record: dict[str, Any] = {"name": name, "arguments": arguments[:2000], "error": None}
        self.calls.append(record)
        fn = self._by_name.get(name)
        if fn is None:
            record["error"] = "unknown tool"
            return json.dumps({"error": f"unknown tool {name!r}; available: {self.names}"})
        try:
            args = self._models[name].model_validate_json(arguments or "{}")
        except pydantic.ValidationError as exc:
            record["error"] = "bad arguments"
            return json.dumps({"error": f"bad arguments for {name}: {exc.errors(include_url=False)[:3]}"}, default=str)
        try:
            result = await fn(**args.model_dump(exclude_unset=True))
        except Exception as exc:  # a tool bug is the tool's error, not the rollout's
            record["error"] = f"{type(exc).__name__}: {exc}"[:500]
            return json.dumps({"error": f"{name} failed: {type(exc).__name__}: {exc}"[:1000]})
        text = result if isinstance(result, str) else json.dumps(result, default=str)
        return text[:MAX_TOOL_OUTPUT_CHARS]
