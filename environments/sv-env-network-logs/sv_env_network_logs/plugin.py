"""E1 as the pipeline sees it (entry point `sv_dagster.environments`)."""

from sv_env_network_logs.baseline import constant_reply, heuristic_reply
from sv_env_network_logs.config import load_reward_settings
from sv_env_network_logs.corpora import CORPORA
from sv_env_network_logs.flows import FLOW_FIELD_NAMES, GOLD_LABELS, INT_LABELS, POSITIVE_LABEL, parse_flow_question
from sv_env_network_logs.sft import SFT
from sv_env_network_logs.synthetic_batch import SYNTHETIC
from sv_shared.environment import Environment, LazyFunction, ReferencePolicies, Row, common_row

# Source port and duration vary between otherwise identical flows (a re-run of one connection).
_NOT_IDENTITY = ("id.orig_p", "duration")


def canonical_flow(row: Row) -> str:
    """A flow's fields as `name=value` tokens, less its source port and duration."""
    question = str(row.get("question") or "")
    flow = parse_flow_question(question)
    if not flow:
        return question
    return " ".join(f"{name}={flow.get(name)}" for name in FLOW_FIELD_NAMES if name not in _NOT_IDENTITY)


def user_flow_row(row: Row) -> Row:
    """A user's row (the dataset's own shape is the common one): the flow fields the question
    states, as `field: value` lines or in words ("a TCP connection to port 23 lasting 0.3 s,
    0 bytes sent", `flow_words`), are recorded in `info.flow`, so the results show what the
    rule baseline read from it. The question itself is kept as written: a model reads that."""
    out = common_row(row, GOLD_LABELS, INT_LABELS)
    flow = parse_flow_question(out["question"])
    if flow:
        out["info"].setdefault("flow", flow)
    else:
        out["info"].setdefault("notes", []).append("no flow fields parsed from the question; shown as written")
    return out


ENVIRONMENT = Environment(
    short="e1",
    env_id="sv-env-network-logs",
    module="sv_env_network_logs",
    description="Network-flow anomaly detection (calibrated labels, abstention, asymmetric cost)",
    heuristic=heuristic_reply,
    parse=LazyFunction("sv_env_network_logs.taskset:parse_completion"),
    positive_label=POSITIVE_LABEL,
    reference=ReferencePolicies(labels=GOLD_LABELS, positive=POSITIVE_LABEL, abstain="Abstain", reply=constant_reply),
    columns=(
        ("accuracy", "accuracy"),
        ("ECE", "ece"),
        ("cost-wtd acc", "cost_weighted_accuracy"),
        ("F1", "f1"),
        ("abstain", "abstain_rate"),
        ("errors", "n_errors"),
    ),
    sample_note="synthetic flows in the IoT-23 layout; those in the CIC-IDS-2017 and UNSW-NB15 layouts form the OOD split",
    load_reward_settings=load_reward_settings,
    synthetic=SYNTHETIC,
    corpora=CORPORA,
    sft=SFT,
    canonical_text=canonical_flow,
    user_row=user_flow_row,
    user_shapes='{"question": "<flow as field: value lines, or in words>", "answer": "Benign"|"Malicious"|0|1, '
    '"info"|"meta": {...}}',
)
