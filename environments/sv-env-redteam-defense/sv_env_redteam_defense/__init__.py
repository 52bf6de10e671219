"""E6: red-team defense (verifiers v1 taskset `sv-env-redteam-defense`)."""

from sv_env_redteam_defense.baseline import defender_reply, reference_reply
from sv_env_redteam_defense.config import RewardConfigError, RewardSettings, load_reward_settings
from sv_env_redteam_defense.conversations import SYSTEM_PROMPT
from sv_env_redteam_defense.scoring import ConversationReport, conversation_report, turn_outcome
from sv_shared.redteam import known_attacks_section, parse_known_attacks

__version__ = "0.1.0"

# The taskset module imports verifiers (~3 s); it loads on first use.
_TASKSET_NAMES = {
    "ENV_ID",
    "DefenseData",
    "DefenseTask",
    "DefenseTaskConfig",
    "DefenseTaskset",
    "DefenseTasksetConfig",
    "bundled_dataset_path",
    "write_bundled_dataset",
}


def __getattr__(name: str):
    if name in ("DefenseEnv", "DefenseEnvConfig"):  # vf-eval's dialogue env (imports verifiers)
        from sv_env_redteam_defense import vfenv

        return getattr(vfenv, name)
    if name in _TASKSET_NAMES:
        from sv_env_redteam_defense import taskset

        return getattr(taskset, name)
    raise AttributeError(f"module 'sv_env_redteam_defense' has no attribute {name!r}")


# verifiers imports a taskset id as a module and wants exactly one Taskset in __all__ (and
# uses the one Env there, the dialogue env, for the episode).
__all__ = [
    "ENV_ID",
    "DefenseEnv",
    "SYSTEM_PROMPT",
    "ConversationReport",
    "DefenseData",
    "DefenseTask",
    "DefenseTaskConfig",
    "DefenseTaskset",
    "DefenseTasksetConfig",
    "RewardConfigError",
    "RewardSettings",
    "bundled_dataset_path",
    "conversation_report",
    "defender_reply",
    "known_attacks_section",
    "load_reward_settings",
    "parse_known_attacks",
    "reference_reply",
    "turn_outcome",
    "write_bundled_dataset",
]
