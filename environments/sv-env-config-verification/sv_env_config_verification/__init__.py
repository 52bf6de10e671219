"""E2: security misconfiguration detection and repair in Kubernetes manifests and Terraform
(verifiers v1 taskset `sv-env-config-verification`), verified by OPA/Rego, Semgrep,
Checkov and KubeLinter."""

from sv_env_config_verification.answer import ANSWER_SCHEMA, ConfigAnswer, Violation, parse_completion
from sv_env_config_verification.baseline import BASELINE_LABEL, heuristic_reply, heuristic_violations
from sv_env_config_verification.config import RewardConfigError, RewardSettings, load_reward_settings
from sv_env_config_verification.dataset import (
    ConfigExample,
    DatasetError,
    bundled_examples,
    read_examples,
    write_bundled_dataset,
)
from sv_env_config_verification.inputs import InputError
from sv_env_config_verification.patching import PatchError, apply_patch
from sv_env_config_verification.prompts import SYSTEM_PROMPT, parse_prompt, render_prompt

__version__ = "0.1.0"

# The taskset imports verifiers (~3 s) and the tool layer loads regopy; both load on first
# use, so code that only needs parsing, patching or the heuristic baseline starts fast.
_LAZY = {
    "ENV_ID": "taskset",
    "ConfigVerificationData": "taskset",
    "ConfigVerificationTask": "taskset",
    "ConfigVerificationTaskConfig": "taskset",
    "ConfigVerificationTaskset": "taskset",
    "ConfigVerificationTasksetConfig": "taskset",
    "Verification": "taskset",
    "ConfigVerificationToolset": "toolset",
    "OpaEvaluator": "opa",
    "ToolSuite": "tools",
    "default_suite": "tools",
    "tool_versions": "tools",
    "tool_cache_stats": "tools",
    "oracle_reply": "baseline",
    "oracle_replies": "baseline",
}


def __getattr__(name: str):
    module = _LAZY.get(name)
    if module is not None:
        import importlib

        return getattr(importlib.import_module(f"sv_env_config_verification.{module}"), name)
    raise AttributeError(f"module 'sv_env_config_verification' has no attribute {name!r}")


# verifiers imports a taskset id as a module and wants exactly one Taskset in __all__
# (the MCP Toolset is reachable as an attribute but deliberately not listed).
__all__ = [
    "ANSWER_SCHEMA",
    "BASELINE_LABEL",
    "ENV_ID",
    "SYSTEM_PROMPT",
    "ConfigAnswer",
    "ConfigExample",
    "ConfigVerificationData",
    "ConfigVerificationTask",
    "ConfigVerificationTaskConfig",
    "ConfigVerificationTaskset",
    "ConfigVerificationTasksetConfig",
    "DatasetError",
    "InputError",
    "OpaEvaluator",
    "PatchError",
    "RewardConfigError",
    "RewardSettings",
    "ToolSuite",
    "Verification",
    "Violation",
    "apply_patch",
    "bundled_examples",
    "default_suite",
    "heuristic_reply",
    "heuristic_violations",
    "load_reward_settings",
    "oracle_reply",
    "oracle_replies",
    "parse_completion",
    "parse_prompt",
    "read_examples",
    "render_prompt",
    "tool_cache_stats",
    "tool_versions",
    "write_bundled_dataset",
]
