"""E2 as a verifiers v1 taskset: one Kubernetes/Terraform file in; violations (by tool
id), a patch and a confidence out. Scored against the union of the available tools'
findings, recomputed at scoring time through the shared tool cache."""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import verifiers.v1 as vf
from pydantic import Field
from verifiers.v1.types import content_text

from sv_env_config_verification.answer import ConfigAnswer, parse_completion
from sv_env_config_verification.config import RewardSettings, load_reward_settings
from sv_env_config_verification.dataset import ConfigExample, bundled_examples, read_examples
from sv_env_config_verification.inputs import InputError
from sv_env_config_verification.patching import PatchError, apply_patch, is_empty_patch
from sv_env_config_verification.prompts import SYSTEM_PROMPT, render_prompt
from sv_env_config_verification.scoring import (
    DetectionScore,
    PatchOutcome,
    detection_score,
    grounding_score,
    patch_outcome,
    patch_score,
    patch_success,
)
from sv_env_config_verification.tools import ToolSuite, default_suite, oracle_index
from sv_shared.rewardconfig import with_reward_weights
from sv_shared.tools import ToolResult

ENV_ID = "sv-env-config-verification"
_MEMO_SIZE = 256

ToolFunction = Callable[..., Awaitable[str]]


class ConfigVerificationData(vf.TaskData):
    filename: str
    """Bare file name; its suffix (.yaml/.yml or .tf) selects the parser and the tools."""
    content: str
    """The file under review (also shown in the prompt)."""
    kind: str
    """"kubernetes" or "terraform"."""
    expected: dict[str, list[str]] = Field(default_factory=dict)
    """Documentation only (e.g. the OPA ids the corpus was written to trigger); scoring
    recomputes the oracle from the tools."""
    info: dict[str, Any] = Field(default_factory=dict)


class ConfigVerificationTaskConfig(vf.TaskConfig):
    reward_config: Path | None = None
    """TOML with reward weights and severity weights; unset uses the packaged rewards.toml."""
    max_tool_calls: int = Field(5, ge=0)
    """Tool calls a model may make per rollout (`task.tool_budget`): by default one for each
    tool that can scan a Kubernetes file (opa, semgrep, checkov, kubelinter, kubelinter_rego)."""
    tools: list[str] | None = None
    """Tools to use (subset of opa, semgrep, checkov, kubelinter, kubelinter_rego); unset:
    $SV_E2_TOOLS, else every tool that is installed (kubelinter_rego, KubeLinter's default
    checks as the project's Rego, included; list the others to leave it out)."""
    mcp_tools: bool = False
    """Also serve the tools to verifiers' own harness as an MCP `vf.Toolset` (a server
    process per rollout); off by default, our runner calls `task.tool_functions()`."""


@dataclass(frozen=True)
class Verification:
    """Everything scoring needs about one completion, computed once."""

    answer: ConfigAnswer
    oracle: dict[str, str]
    """Violation id -> severity, union over the tools that scanned the original file."""
    oracle_tools: dict[str, dict[str, Any]]
    detection: DetectionScore
    patch: PatchOutcome
    after: dict[str, str] = field(default_factory=dict)
    patch_reward: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "oracle": dict(sorted(self.oracle.items())),
            "tools": self.oracle_tools,
            "detection": {
                "precision": self.detection.precision,
                "recall": self.detection.recall,
                "f1": self.detection.f1,
            },
            "patch": {
                "status": self.patch.status,
                "error": self.patch.error,
                "removed": sorted(self.patch.removed),
                "introduced": sorted(self.patch.introduced),
                "reward": self.patch_reward,
            },
        }


def _tool_summary(results: dict[str, ToolResult]) -> dict[str, dict[str, Any]]:
    return {
        name: {
            "version": r.version,
            "ruleset_hash": r.ruleset_hash,
            "error": r.error,
            "cached": r.cached,
            "findings": len(r.findings),
        }
        for name, r in sorted(results.items())
    }


class ConfigVerificationTask(vf.Task[ConfigVerificationData, vf.State, ConfigVerificationTaskConfig]):
    """Rewards read the model's last reply (and, for grounding, the trace's tool messages);
    weights come from the task config, which the taskset fills from the reward TOML."""

    @property
    def key(self) -> str:
        return self.data.id or self.hash

    @property
    def settings(self) -> RewardSettings:
        return load_reward_settings(self.config.reward_config)

    @property
    def suite(self) -> ToolSuite:
        return default_suite(self.config.tools)

    @property
    def tool_budget(self) -> int:
        return self.config.max_tool_calls

    @property
    def tool_names(self) -> tuple[str, ...]:
        return self.suite.applicable(self.data.filename)

    # --- tools for the model ----------------------------------------------------------

    async def call_tool(self, tool: str, content: str | None = None) -> str:
        """Run `tool` on the task's file, or on `content` (a candidate patched version)."""
        if tool not in self.tool_names:
            return json.dumps({"tool": tool, "error": f"{tool} is not available for this task"})
        return await self.suite.scan_for_model(tool, self.data.filename, self.data.content, content)

    def tool_functions(self) -> list[ToolFunction]:
        """One async function per available tool (`run_opa`, `run_semgrep`, ...), typed and
        documented so a runner can build OpenAI tool schemas from them."""
        return [_tool_function(self, name) for name in self.tool_names]

    @classmethod
    def toolsets(cls, config: ConfigVerificationTaskConfig) -> list[vf.Toolset]:
        if not config.mcp_tools:
            return []
        from sv_env_config_verification.toolset import ConfigToolsConfig, ConfigVerificationToolset

        return [ConfigVerificationToolset(ConfigToolsConfig(tools=config.tools, max_calls=config.max_tool_calls))]

    # --- verification, once per completion --------------------------------------------

    def _memo(self) -> OrderedDict[str, asyncio.Future]:
        memo = self.__dict__.get("_verifications")
        if memo is None:
            memo = self.__dict__["_verifications"] = OrderedDict()
        return memo

    def _memo_key(self, reply: str | None) -> str:
        digest = hashlib.sha256()
        for part in (self.data.filename, self.data.content, reply or "", ",".join(self.tool_names)):
            digest.update(part.encode("utf-8", "surrogatepass") + b"\0")  # any str, lone surrogates too
        return digest.hexdigest()

    def details(self, completion: str | None, turns: list[dict[str, Any]] | None = None) -> dict[str, Any] | None:
        """The finished verification of `completion` (as the rewards saw it: the stripped
        last reply), for the results row: oracle, tools, detection scores, patch outcome."""
        entry = self._memo().get(self._memo_key((completion or "").strip()))
        if entry is None or not entry.done() or entry.cancelled() or entry.exception() is not None:
            return None
        v: Verification = entry.result()
        return {
            **v.to_dict(),
            "clean": not v.oracle,
            "source_clean": self.data.info.get("clean"),  # what the file's source says (None: it says nothing)
            "patch_success": patch_success(v.patch),
            "answered_clean": v.answer.says_clean,
        }

    async def verify(self, reply: str | None) -> Verification:
        """Oracle scan + patched re-scan for one reply, memoised by (file, reply) hash so
        the rewards and metrics of one completion run the tools once."""
        key = self._memo_key(reply)
        memo = self._memo()
        entry = memo.get(key)
        loop = asyncio.get_running_loop()
        if entry is not None:
            if entry.done():
                if not entry.cancelled() and entry.exception() is None:
                    memo.move_to_end(key)
                    return entry.result()
            elif entry.get_loop() is loop:  # a concurrent reward is computing it right now
                return await entry
        future = loop.create_task(self._verify(reply))
        memo[key] = future
        while len(memo) > _MEMO_SIZE:
            memo.popitem(last=False)
        return await future

    async def oracle_results(self) -> dict[str, ToolResult]:
        return await self.suite.run_all(self.data.filename, self.data.content, self.tool_names)

    async def _verify(self, reply: str | None) -> Verification:
        settings = self.settings
        answer = parse_completion(reply)
        results = await self.oracle_results()
        if not results or all(r.error for r in results.values()):
            # No tool could judge the file (binary, bomb, unparsable): the example is unscored,
            # never "clean" by default.
            problems = "; ".join(sorted({str(r.error) for r in results.values()})) or "no tool applies"
            raise InputError(f"{self.data.id} ({self.data.filename}): no tool could scan the file: {problems}")
        oracle = oracle_index(results)
        predicted = {v.id: v.severity for v in answer.violations}
        detection = detection_score(predicted, oracle, settings.severity_weights)
        if not answer.states_findings:
            # No violations list (prose, no JSON): it claims nothing, not that the file is clean.
            detection = DetectionScore(0.0, 0.0, 0.0)
        after: dict[str, str] = {}
        if is_empty_patch(answer.patch):
            outcome = PatchOutcome("empty")
        else:
            try:
                # Parsing and applying a model's patch is CPU work: off the event loop, so other
                # examples are scored meanwhile.
                patched = await asyncio.to_thread(apply_patch, self.data.filename, self.data.content, answer.patch)  # type: ignore[arg-type]
            except PatchError as exc:
                outcome = PatchOutcome("failed", error=str(exc))
            else:
                tools = [name for name, r in results.items() if r.error is None]
                rescanned = await self.suite.run_all(self.data.filename, patched, tools)
                errors = sorted(f"{name}: {r.error}" for name, r in rescanned.items() if r.error)
                if errors:
                    outcome = PatchOutcome("failed", error="patched file could not be scanned: " + "; ".join(errors))
                else:
                    after = oracle_index(rescanned)
                    outcome = patch_outcome(oracle, after)
        reward = patch_score(outcome, oracle, after, settings.severity_weights, settings.new_finding_penalty)
        if outcome.status == "empty" and not answer.states_findings:
            reward = 0.0  # "nothing to fix" is a verdict only a stated answer gives
        return Verification(answer, oracle, _tool_summary(results), detection, outcome, after, reward)

    # --- rewards and metrics ----------------------------------------------------------

    @vf.reward
    async def format(self, trace: vf.Trace) -> float:
        return 1.0 if parse_completion(trace.last_reply).format_ok else 0.0

    @vf.reward
    async def detection(self, trace: vf.Trace) -> float:
        return (await self.verify(trace.last_reply)).detection.f1

    @vf.reward
    async def patch(self, trace: vf.Trace) -> float:
        return (await self.verify(trace.last_reply)).patch_reward

    @vf.reward
    async def grounding(self, trace: vf.Trace) -> float:
        answer = parse_completion(trace.last_reply)
        return grounding_score((v.id for v in answer.violations), tool_messages(trace))

    @vf.metric
    async def verification(self, trace: vf.Trace) -> dict[str, float]:
        """Finding precision/recall/F1, patch success, clean pass (clean files only), tool
        errors; the full verification (oracle, tool versions, patch outcome) goes to
        `trace.info["e2"]`."""
        v = await self.verify(trace.last_reply)
        trace.info["e2"] = v.to_dict()
        out = {
            "finding_precision": v.detection.precision,
            "finding_recall": v.detection.recall,
            "finding_f1": v.detection.f1,
            "patch_success": 1.0 if patch_success(v.patch) else 0.0,
            "patch_applied": 1.0 if v.patch.status == "applied" else 0.0,
            "tool_errors": float(sum(1 for t in v.oracle_tools.values() if t["error"])),
            "tool_calls": float(len(tool_messages(trace))),
        }
        if not v.oracle:
            out["clean_pass"] = 1.0 if v.answer.says_clean else 0.0
        return out


def tool_messages(trace: vf.Trace) -> list[str]:
    """Text of every tool-role message in the trace."""
    texts = []
    for node in trace.nodes:
        message = node.message
        if getattr(message, "role", None) == "tool":
            texts.append(content_text(message.content))
    return texts


_TOOL_DOCS = {
    "opa": "the project's OPA/Rego policies",
    "semgrep": "Semgrep with the project's local rules",
    "checkov": "Checkov's built-in Kubernetes/Terraform checks",
    "kubelinter": "KubeLinter's built-in checks",
    "kubelinter_rego": "the project's Rego versions of KubeLinter's default checks",
}


def _tool_function(task: ConfigVerificationTask, tool: str) -> ToolFunction:
    async def run(content: str | None = None) -> str:
        return await task.call_tool(tool, content)

    run.__name__ = run.__qualname__ = f"run_{tool}"
    run.__doc__ = (
        f"Scan the file under review with {_TOOL_DOCS[tool]} and return its findings as JSON "
        '({"tool", "version", "scanned": "task file" or "given content", '
        '"findings": [{"id", "severity", "line", "message"}], "error"?}).\n\n'
        "Args:\n    content: optional full text of a candidate patched version of the file to scan "
        "instead of the original (to check that a fix removes findings)."
    )
    return run


class ConfigVerificationTasksetConfig(vf.TasksetConfig):
    task: ConfigVerificationTaskConfig = ConfigVerificationTaskConfig()
    dataset_path: Path | None = None
    """JSONL of {"id", "filename", "content", "expected"?, "clean"?, "sample"?, "description"?};
    unset uses the bundled SAMPLE corpus."""


class ConfigVerificationTaskset(vf.Taskset[ConfigVerificationTask, ConfigVerificationTasksetConfig]):
    def task_config(self) -> ConfigVerificationTaskConfig:
        """The task config with reward weights from the TOML (explicit ones win)."""
        base = self.config.task
        return with_reward_weights(base, load_reward_settings(base.reward_config).weights)

    def examples(self) -> list[ConfigExample]:
        path = self.config.dataset_path
        return read_examples(path) if path else bundled_examples()

    def load(self):
        task_config = self.task_config()
        suite = default_suite(task_config.tools)
        catalogue = suite.opa.catalogue()
        for example in self.examples():
            kind = example.kind
            tools = suite.applicable(example.filename)
            rules = {rid: meta for rid, meta in catalogue.items() if meta["kind"] == kind} if "opa" in tools else {}
            data = ConfigVerificationData(
                id=example.id,
                prompt=render_prompt(example.filename, example.content, kind, tools, rules, task_config.max_tool_calls),
                system_prompt=SYSTEM_PROMPT,
                filename=example.filename,
                content=example.content,
                kind=kind,
                expected=example.expected,
                info={
                    "clean": example.clean,
                    "sample": example.sample,
                    "description": example.description,
                    **({"test_source": example.test_source} if example.test_source else {}),
                },
            )
            yield ConfigVerificationTask(data, task_config)
