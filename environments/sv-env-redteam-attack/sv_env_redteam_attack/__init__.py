"""E5: red-team attack (verifiers v1 taskset `sv-env-redteam-attack`)."""

from sv_env_redteam_attack.baseline import attacker_reply, framing_order
from sv_env_redteam_attack.behaviors import BEHAVIORS, attacker_system_prompt
from sv_env_redteam_attack.config import RewardConfigError, RewardSettings, load_reward_settings

__version__ = "0.1.0"

# The taskset module imports verifiers (~3 s); it loads on first use.
_TASKSET_NAMES = {
    "ENV_ID",
    "AttackData",
    "AttackReport",
    "AttackTask",
    "AttackTaskConfig",
    "AttackTaskset",
    "AttackTasksetConfig",
    "bundled_dataset_path",
    "read_novelty_memory",
    "write_bundled_dataset",
}


def __getattr__(name: str):
    if name in ("AttackEnv", "AttackEnvConfig"):  # vf-eval's dialogue env (imports verifiers)
        from sv_env_redteam_attack import vfenv

        return getattr(vfenv, name)
    if name in _TASKSET_NAMES:
        from sv_env_redteam_attack import taskset

        return getattr(taskset, name)
    raise AttributeError(f"module 'sv_env_redteam_attack' has no attribute {name!r}")


# verifiers imports a taskset id as a module and wants exactly one Taskset in __all__ (and
# uses the one Env there, the dialogue env, for the episode).
__all__ = [
    "BEHAVIORS",
    "ENV_ID",
    "AttackEnv",
    "AttackData",
    "AttackReport",
    "AttackTask",
    "AttackTaskConfig",
    "AttackTaskset",
    "AttackTasksetConfig",
    "RewardConfigError",
    "RewardSettings",
    "attacker_reply",
    "attacker_system_prompt",
    "bundled_dataset_path",
    "framing_order",
    "load_reward_settings",
    "read_novelty_memory",
    "write_bundled_dataset",
]
