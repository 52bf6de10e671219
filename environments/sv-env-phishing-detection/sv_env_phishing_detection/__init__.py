"""E4: phishing email detection (verifiers v1 taskset `sv-env-phishing-detection`)."""

from sv_env_phishing_detection.baseline import classify_email, heuristic_reply
from sv_env_phishing_detection.config import RewardConfigError, RewardSettings, load_reward_settings
from sv_env_phishing_detection.emails import LABELS, SYSTEM_PROMPT, normalize_email, render_email_question
from sv_env_phishing_detection.evidence import build_index, evidence_report, evidence_score
from sv_env_phishing_detection.urltools import check_url, url_report

__version__ = "0.1.0"

# The taskset module imports verifiers (~3 s). It loads on first use, so code that only
# needs the email schema, the evidence rule or the baseline starts fast.
_TASKSET_NAMES = {
    "ENV_ID",
    "PhishingAnswer",
    "PhishingData",
    "PhishingTask",
    "PhishingTaskConfig",
    "PhishingTaskset",
    "PhishingTasksetConfig",
    "bundled_dataset_path",
    "parse_completion",
    "write_bundled_dataset",
}


def __getattr__(name: str):
    if name in _TASKSET_NAMES:
        from sv_env_phishing_detection import taskset

        return getattr(taskset, name)
    raise AttributeError(f"module 'sv_env_phishing_detection' has no attribute {name!r}")


# verifiers imports a taskset id as a module and wants exactly one Taskset in __all__.
__all__ = [
    "ENV_ID",
    "LABELS",
    "SYSTEM_PROMPT",
    "PhishingAnswer",
    "PhishingData",
    "PhishingTask",
    "PhishingTaskConfig",
    "PhishingTaskset",
    "PhishingTasksetConfig",
    "RewardConfigError",
    "RewardSettings",
    "build_index",
    "bundled_dataset_path",
    "check_url",
    "classify_email",
    "evidence_report",
    "evidence_score",
    "heuristic_reply",
    "load_reward_settings",
    "normalize_email",
    "parse_completion",
    "render_email_question",
    "url_report",
    "write_bundled_dataset",
]
