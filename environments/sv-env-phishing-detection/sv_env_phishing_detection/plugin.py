"""E4 as the pipeline sees it (entry point `sv_dagster.environments`)."""

import re
from typing import Any

from sv_env_phishing_detection.baseline import constant_reply, heuristic_reply
from sv_env_phishing_detection.config import load_reward_settings
from sv_env_phishing_detection.corpora import CORPORA
from sv_env_phishing_detection.emails import GOLD_LABELS, INT_LABELS, canonical_text
from sv_env_phishing_detection.sft import SFT
from sv_env_phishing_detection.synthetic_batch import SYNTHETIC
from sv_shared.environment import Environment, LazyFunction, ReferencePolicies, Row, common_row, detail


def canonical_email(row: Row) -> str:
    """Subject and body, digits masked (`emails.canonical_text`): the same email with another
    sender, link, order or invoice number is the same example."""
    email = (row.get("info") or {}).get("email") or {}
    return canonical_text(email) if email else re.sub(r"\d+", "0", str(row.get("question") or ""))


HARD_HAM = "hard_ham"
"""SpamAssassin's legitimate mail that looks like spam: where false alarms are tested."""


def false_alarms_by_group(scored: list[Row]) -> dict[str, dict[str, Any]]:
    """Per corpus group with legitimate emails: how many were scored, how many were called
    Phishing, and that share (the group's false-positive rate; an abstention is no alarm)."""
    counts: dict[str, list[int]] = {}
    for row in scored:
        group = detail(row, "group")
        if not group or row.get("answer") != "Legitimate":
            continue
        tally = counts.setdefault(str(group), [0, 0])
        tally[0] += 1
        tally[1] += (row.get("parsed") or {}).get("label") == "Phishing"
    return {group: {"n": n, "false_alarms": alarms, "fpr": alarms / n} for group, (n, alarms) in sorted(counts.items())}


def evidence_summary(rows: list[Row], summary: dict[str, Any]) -> dict[str, Any]:
    """Evidence precision: verified items over all evidence items given, pooled over the
    scored examples that gave any; the mean evidence reward; and false alarms per corpus
    group, with the hard-ham group's rate as a key of its own (None without such rows)."""
    scored = [row for row in rows if row.get("error") is None]
    verified = sum(detail(row, "evidence", "verified") or 0 for row in scored)
    given = verified + sum(detail(row, "evidence", "invented") or 0 for row in scored)
    by_group = false_alarms_by_group(scored)
    hard = by_group.get(HARD_HAM) or {}
    return {
        "evidence_precision": verified / given if given else None,
        "mean_evidence_reward": summary["mean_rewards"].get("evidence"),
        "false_alarms_by_group": by_group,
        "hard_ham_fpr": hard.get("fpr"),
        "n_hard_ham": hard.get("n", 0),
    }


def user_email_row(row: Row) -> Row:
    """A user's row (the dataset's own shape is the common one; `info.email` is optional: the
    taskset parses the email out of the question without it). A gold `Abstain` (an email its
    labeller could not decide) is named as such: the rewards score a reply against a
    Phishing or Legitimate gold label, so such a row cannot be scored."""
    answer = row.get("answer")
    if isinstance(answer, str) and answer.strip().lower() == "abstain":
        raise ValueError("gold answer 'Abstain' (undecided) cannot be scored; E4 scores against Phishing/Legitimate")
    out = common_row(row, GOLD_LABELS, INT_LABELS)
    email = out["info"].get("email")
    if email is not None and not isinstance(email, dict):
        raise ValueError("'info.email' must be an object of from/subject/body/... fields")
    return out


ENVIRONMENT = Environment(
    short="e4",
    env_id="sv-env-phishing-detection",
    module="sv_env_phishing_detection",
    description="Phishing detection (verifiable evidence, abstention, asymmetric cost)",
    heuristic=heuristic_reply,
    parse=LazyFunction("sv_env_phishing_detection.taskset:parse_completion"),
    positive_label="Phishing",
    reference=ReferencePolicies(labels=GOLD_LABELS, positive="Phishing", abstain="Abstain", reply=constant_reply),
    summary_extra=evidence_summary,
    columns=(
        ("accuracy", "accuracy"),
        ("ECE", "ece"),
        ("cost-wtd acc", "cost_weighted_accuracy"),
        ("F1", "f1"),
        ("evidence prec", "evidence_precision"),
        ("hard-ham FPR", "hard_ham_fpr"),
        ("abstain", "abstain_rate"),
        ("errors", "n_errors"),
    ),
    sample_note="generated emails in English, German, Spanish and French",
    load_reward_settings=load_reward_settings,
    write_bundled_dataset=LazyFunction("sv_env_phishing_detection.taskset:write_bundled_dataset"),
    synthetic=SYNTHETIC,
    corpora=CORPORA,
    sft=SFT,
    canonical_text=canonical_email,
    user_row=user_email_row,
    user_shapes='{"question": "<email>", "answer": "Phishing"|"Legitimate"|1|0, "info"|"meta": {"email"?: {...}}}',
)
