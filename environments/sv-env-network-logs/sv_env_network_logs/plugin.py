"""E1 as the pipeline sees it (entry point `sv_dagster.environments`)."""

from sv_env_network_logs.baseline import heuristic_reply
from sv_env_network_logs.config import load_reward_settings
from sv_env_network_logs.corpora import CORPORA
from sv_env_network_logs.sft import SFT
from sv_env_network_logs.synthetic_batch import SYNTHETIC
from sv_shared.environment import Environment, LazyFunction

ENVIRONMENT = Environment(
    short="e1",
    env_id="sv-env-network-logs",
    module="sv_env_network_logs",
    description="Network-flow anomaly detection (calibrated labels, abstention, asymmetric cost)",
    heuristic=heuristic_reply,
    parse=LazyFunction("sv_env_network_logs.taskset:parse_completion"),
    positive_label="Malicious",
    columns=(
        ("accuracy", "accuracy"),
        ("ECE", "ece"),
        ("cost-wtd acc", "cost_weighted_accuracy"),
        ("F1", "f1"),
        ("abstain", "abstain_rate"),
        ("errors", "n_errors"),
    ),
    sample_note="synthetic flows in the IoT-23 and CIC-IDS-2017 layouts",
    load_reward_settings=load_reward_settings,
    synthetic=SYNTHETIC,
    corpora=CORPORA,
    sft=SFT,
)
