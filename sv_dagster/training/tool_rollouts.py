"""Tool-calling GRPO rollouts: each environment's own tools, called as its evals call them.

TRL's `environment_factory` builds one object per concurrent rollout and calls
`reset(**row)` before each; the object's public methods are the tools the model may call.
Here each environment gets one such class whose methods are the tools its tasks offer
(`task.tool_functions()`, the functions the eval runner offers a model), bound at `reset` to
the row's task. A call runs on the reward adapter's event loop, where scoring runs too, so
tools and rewards share the scanners' batching and cache. A tool the row's task does not
offer answers with an error, as in an eval; so does a call past the task's `tool_budget`
(an eval stops offering tools there; TRL cannot withdraw them mid-rollout). The
reward adapter then scores the whole conversation (tool calls and results included) with the
environment's own `task.score`.
"""

from __future__ import annotations

import inspect
import json
import typing
from collections.abc import Callable, Iterable
from typing import Any

from sv_dagster.training.rewards import EnvRewardAdapter
from sv_shared.capabilities import ToolTask


class TaskTools:
    """The tools of one row's task; subclasses add one method per tool name."""

    adapter: EnvRewardAdapter
    tool_names: tuple[str, ...] = ()

    def __init__(self) -> None:
        self.functions: dict[str, Callable[..., Any]] = {}
        self.budget: int | None = None
        self.calls = 0

    def reset(self, **row: Any) -> None:
        task = self.adapter.tasks[(row["env"], row["task_key"])]
        offers = isinstance(task, ToolTask)
        self.functions = {f.__name__: f for f in task.tool_functions()} if offers else {}
        self.budget = task.tool_budget if offers else None
        self.calls = 0

    def _call(self, name: str, arguments: dict[str, Any]) -> str:
        """The tool's result, or an error for a tool the task does not offer or a call past
        the task's budget of calls."""
        function = self.functions.get(name)
        if self.budget is not None and self.calls >= self.budget:
            return json.dumps({"tool": name, "error": f"tool budget of {self.budget} calls used up"})
        self.calls += 1
        self.adapter.tool_calls_made += 1
        if function is None:
            return json.dumps({"tool": name, "error": f"{name} is not available for this task"})
        return str(self.adapter.run(function(**arguments)))


def _method(name: str, function: Callable[..., Any]) -> Callable[..., str]:
    """A method with `function`'s name, parameters, types and docstring (TRL builds the
    tool's JSON schema from them) that calls the bound task's tool of that name."""
    signature = inspect.signature(function)
    hints = typing.get_type_hints(function)

    def method(self: TaskTools, **arguments: Any) -> str:
        return self._call(name, arguments)

    method.__name__ = method.__qualname__ = name
    method.__doc__ = function.__doc__
    method.__annotations__ = {**{k: v for k, v in hints.items() if k != "return"}, "return": str}
    self_parameter = inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)
    method.__signature__ = signature.replace(  # type: ignore[attr-defined]
        parameters=[self_parameter, *signature.parameters.values()], return_annotation=str
    )
    return method


def offered_tools(adapter: EnvRewardAdapter, env_short: str) -> dict[str, Callable[..., Any]]:
    """Every tool the environment's tasks offer, by name."""
    return _functions_by_name(task for (env, _), task in adapter.tasks.items() if env == env_short)


def _functions_by_name(tasks: Iterable[Any]) -> dict[str, Callable[..., Any]]:
    """The first task's function of each name stands for its schema: an environment's tools
    share one signature per name."""
    found: dict[str, Callable[..., Any]] = {}
    for task in tasks:
        for function in task.tool_functions() if isinstance(task, ToolTask) else ():
            found.setdefault(function.__name__, function)
    return found


def tool_schemas(tasks: Iterable[Any]) -> list[dict[str, Any]]:
    """The JSON schemas of the tools `tasks` offer, in the order and form a tool-calling GRPO
    prompt lists them (TRL: the methods by name, each through transformers' `get_json_schema`),
    so SFT rows that call tools are trained on the prompt GRPO samples from."""
    from transformers.utils import get_json_schema

    holder = TaskTools()
    return [
        get_json_schema(_method(name, function).__get__(holder))
        for name, function in sorted(_functions_by_name(tasks).items())
    ]


def environment_factories(adapter: EnvRewardAdapter, envs: Iterable[str]) -> dict[str, type[TaskTools]]:
    """TRL's `environment_factory` mapping: environment short name (each row's `environment`
    column) -> the class of its tools."""
    factories = {}
    for env_short in envs:
        methods = {name: _method(name, function) for name, function in offered_tools(adapter, env_short).items()}
        namespace = {"adapter": adapter, "tool_names": tuple(sorted(methods)), **methods}
        factories[env_short] = type(f"{env_short.upper()}Tools", (TaskTools,), namespace)
    return factories
