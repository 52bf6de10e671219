"""E1: network-flow anomaly detection (verifiers v1 taskset `sv-env-network-logs`)."""

from sv_env_network_logs.baseline import classify_flow, heuristic_reply
from sv_env_network_logs.config import RewardConfigError, RewardSettings, load_reward_settings
from sv_env_network_logs.flows import LABELS, SYSTEM_PROMPT, render_flow_question

__version__ = "0.1.0"

# The taskset module imports verifiers (~3 s). It loads on first use, so code that only
# needs the flow schema or the baseline (the Dagster code location) starts fast.
_TASKSET_NAMES = {
    "ENV_ID",
    "NetworkLogData",
    "NetworkLogsTask",
    "NetworkLogsTaskConfig",
    "NetworkLogsTaskset",
    "NetworkLogsTasksetConfig",
    "bundled_dataset_path",
    "parse_completion",
}


def __getattr__(name: str):
    if name in _TASKSET_NAMES:
        from sv_env_network_logs import taskset

        return getattr(taskset, name)
    raise AttributeError(f"module 'sv_env_network_logs' has no attribute {name!r}")


# verifiers imports a taskset id as a module and wants exactly one Taskset in __all__.
__all__ = [
    "ENV_ID",
    "LABELS",
    "SYSTEM_PROMPT",
    "NetworkLogData",
    "NetworkLogsTask",
    "NetworkLogsTaskConfig",
    "NetworkLogsTaskset",
    "NetworkLogsTasksetConfig",
    "RewardConfigError",
    "RewardSettings",
    "bundled_dataset_path",
    "classify_flow",
    "heuristic_reply",
    "load_reward_settings",
    "parse_completion",
    "render_flow_question",
]
