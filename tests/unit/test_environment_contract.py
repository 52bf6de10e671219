"""The environment contract: the pipeline finds the installed environments through their
entry points, refuses a broken one with a line that names it, and names no environment
itself: no environment's short name, taskset id or package name in sv_dagster/ outside
comments (configs/ may name them)."""

from __future__ import annotations

import re
import tomllib
from importlib.metadata import EntryPoint
from pathlib import Path

import pytest

from sv_dagster.core import envs as envs_module
from sv_dagster.core.envs import ENVS, EnvironmentPluginError, discover
from sv_shared.environment import ENTRY_POINT_GROUP, Environment, LazyFunction

ROOT = Path(__file__).resolve().parents[2]

ENV_NAME = re.compile(r"""["'](e[1-9]|sv-env-[a-z-]+)["']|\bsv_env_[a-z_]+""")


def _entry(name: str, value: str) -> EntryPoint:
    return EntryPoint(name=name, value=value, group=ENTRY_POINT_GROUP)


def test_the_installed_environments_are_found_through_their_entry_points() -> None:
    assert list(ENVS) == sorted(ENVS)
    assert len(ENVS) >= 6
    for short, env in ENVS.items():
        assert isinstance(env, Environment)
        assert env.short == short
        assert env.module.replace("_", "-") == env.env_id
        assert env.heuristic is not None and env.columns


def test_a_broken_entry_point_is_refused_by_name(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(envs_module, "entry_points", lambda group: [_entry("e9", "no_such_module.plugin:ENVIRONMENT")])
    with pytest.raises(EnvironmentPluginError, match=r"e9 = no_such_module\.plugin:ENVIRONMENT: ModuleNotFoundError"):
        discover()
    monkeypatch.setattr(envs_module, "entry_points", lambda group: [_entry("e9", "json:dumps")])
    with pytest.raises(EnvironmentPluginError, match="is a function, not an sv_shared Environment"):
        discover()


def test_two_environments_with_one_short_name_are_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    twice = [
        _entry("e1", "sv_env_network_logs.plugin:ENVIRONMENT"),
        _entry("e1b", "sv_env_network_logs.plugin:ENVIRONMENT"),
    ]
    monkeypatch.setattr(envs_module, "entry_points", lambda group: twice)
    with pytest.raises(EnvironmentPluginError, match="two installed environments call themselves 'e1'"):
        discover()


def test_lazy_functions_import_on_first_use_and_carry_the_function_attributes() -> None:
    lazy = LazyFunction("sv_env_redteam_attack.baseline:attacker_reply")
    assert lazy.takes_messages is True
    assert lazy([{"role": "user", "content": "hello"}])
    with pytest.raises(ValueError, match="not 'package.module:function'"):
        LazyFunction("no_colon")


def test_every_environment_package_is_under_the_import_contracts() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["importlinter"]
    forbidden = next(
        c for c in config["contracts"] if c["type"] == "forbidden" and "sv_dagster" in c["forbidden_modules"]
    )
    for env in ENVS.values():
        assert env.module in config["root_packages"], f"{env.module} is not in [tool.importlinter] root_packages"
        assert env.module in forbidden["source_modules"], f"{env.module} may import the pipeline"


def test_the_pipeline_names_no_environment() -> None:
    naming = []
    for path in sorted((ROOT / "sv_dagster").rglob("*.py")):
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if not line.lstrip().startswith("#") and ENV_NAME.search(line):
                naming.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert naming == [], "read these from ENVS (or a config) instead:\n" + "\n".join(naming)


def test_the_check_sees_an_environment_name() -> None:
    assert ENV_NAME.search('    if env.short == "e5":') and ENV_NAME.search("from sv_env_redteam_defense import X")
    assert not ENV_NAME.search("for env in ENVS.values():")


def test_each_environment_offers_through_the_task_protocols_what_it_declares() -> None:
    from sv_shared.capabilities import DetailedTask, DialogueTask, ToolTask, WithholdingTask

    for short, env in ENVS.items():
        task = next(env.iter_tasks(None, None, limit=1, seed=0))  # the package's bundled sample
        if env.counterpart_env is not None:  # the runner plays the other side through respond
            assert isinstance(task, DialogueTask), short
        if env.positive_label is not None:  # a labelling task answers once
            assert not isinstance(task, DialogueTask), short
        assert isinstance(task, WithholdingTask) == env.withholds_unsafe, short
        if env.tool_reward is not None:
            assert isinstance(task, ToolTask) and task.tool_budget > 0, short
        if isinstance(task, ToolTask | DialogueTask):  # what happened is worth a look in results
            assert isinstance(task, DetailedTask), short


def test_a_task_with_tools_but_no_budget_is_refused_by_name() -> None:
    from sv_dagster.core.evals.runner import task_tools

    class HalfToolTask:
        def tool_functions(self) -> list:
            return []

    with pytest.raises(TypeError, match="HalfToolTask offers tool_functions but no tool_budget"):
        task_tools(HalfToolTask())  # type: ignore[arg-type]
    assert task_tools(object()) == ([], 0)  # type: ignore[arg-type]
