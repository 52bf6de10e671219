"""Shared helpers for the Security Verifiers environments: parsing, rewards, metrics
(and `jsonl`, the common dataset reader)."""

from sv_shared.jsonl import DatasetError, Example, read_examples
from sv_shared.metrics import Prediction, aurc, brier_score, classification_metrics, expected_calibration_error
from sv_shared.parsing import ParsedAnswer, extract_json_object, parse_label_answer, parsed_once
from sv_shared.rewardconfig import RewardConfigError, RewardToml, read_reward_toml
from sv_shared.rewards import (
    CostConfig,
    abstention_reward,
    accuracy_reward,
    asymmetric_cost_reward,
    calibration_reward,
    decision_cost,
    format_reward,
)

__version__ = "0.1.0"

__all__ = [
    "CostConfig",
    "DatasetError",
    "Example",
    "ParsedAnswer",
    "Prediction",
    "RewardConfigError",
    "RewardToml",
    "__version__",
    "read_reward_toml",
    "abstention_reward",
    "accuracy_reward",
    "asymmetric_cost_reward",
    "aurc",
    "brier_score",
    "calibration_reward",
    "classification_metrics",
    "decision_cost",
    "expected_calibration_error",
    "extract_json_object",
    "format_reward",
    "parse_label_answer",
    "parsed_once",
    "read_examples",
]
