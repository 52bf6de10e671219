"""E2's tools as a verifiers MCP `Toolset`, for verifiers' own harnesses (`vf-eval`).

verifiers serves a Toolset in its own process (`python -m sv_env_config_verification.toolset`)
and hands it the rollout's task data through `setup_task`, so the server scans the task's
file itself. Only installed tools are advertised; calls beyond `max_calls` are refused.
Enable with the task config's `mcp_tools = true`.
"""

from __future__ import annotations

import json
from typing import Any

import verifiers.v1 as vf
from verifiers.v1.utils.decorators import discover_decorated

from sv_env_config_verification.tools import default_suite


class ConfigToolsConfig(vf.ToolsetConfig):
    tools: list[str] | None = None
    max_calls: int = 4


class ConfigVerificationToolset(vf.Toolset[ConfigToolsConfig]):
    TOOL_PREFIX = None  # advertise run_opa, not config_verification_toolset_run_opa

    def __init__(self, config: ConfigToolsConfig) -> None:
        super().__init__(config)
        self.filename: str | None = None
        self.content: str | None = None
        self.calls = 0

    async def setup_task(self, task: Any) -> None:
        data = getattr(task, "data", task)
        self.filename, self.content, self.calls = data.filename, data.content, 0

    def register(self, mcp: Any) -> None:
        suite = default_suite(self.config.tools)
        for fn in discover_decorated(self, "tool"):
            tool = fn.__name__.removeprefix("run_")
            if suite.is_available(tool):
                mcp.add_tool(self._with_state(fn), name=fn.__name__, description=(fn.__doc__ or "").strip() or None)

    async def _run(self, tool: str, content: str | None) -> str:
        if self.filename is None or self.content is None:
            return json.dumps({"tool": tool, "error": "no task file loaded"})
        if self.calls >= self.config.max_calls:
            return json.dumps({"tool": tool, "error": f"tool budget of {self.config.max_calls} calls used up"})
        self.calls += 1
        suite = default_suite(self.config.tools)
        if tool not in suite.applicable(self.filename):
            return json.dumps({"tool": tool, "error": f"{tool} does not scan this file"})
        return await suite.scan_for_model(tool, self.filename, self.content, content)

    @vf.tool
    async def run_opa(self, content: str | None = None) -> str:
        """Scan the file (or `content`, a candidate patched version) with the project's OPA policies; findings as JSON."""
        return await self._run("opa", content)

    @vf.tool
    async def run_semgrep(self, content: str | None = None) -> str:
        """Scan the file (or `content`, a candidate patched version) with Semgrep's local rules; findings as JSON."""
        return await self._run("semgrep", content)

    @vf.tool
    async def run_checkov(self, content: str | None = None) -> str:
        """Scan the file (or `content`, a candidate patched version) with Checkov; findings as JSON."""
        return await self._run("checkov", content)

    @vf.tool
    async def run_kubelinter(self, content: str | None = None) -> str:
        """Scan the file (or `content`, a candidate patched version) with KubeLinter; findings as JSON."""
        return await self._run("kubelinter", content)

    @vf.tool
    async def run_kubelinter_rego(self, content: str | None = None) -> str:
        """Scan the file (or `content`, a candidate patched version) with the project's Rego versions of KubeLinter's default checks; findings as JSON."""
        return await self._run("kubelinter_rego", content)


if __name__ == "__main__":
    ConfigVerificationToolset.run()
