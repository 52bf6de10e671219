"""Triage files every low-reward example under exactly one cause."""

from __future__ import annotations

from sv_dagster.core.evals.triage import cause_of, triage, triage_markdown


def row(i, *, answer="Malicious", label=None, confidence=0.5, ok=True, completion="{}", error=None, rewards=None):
    return {
        "example_id": f"e{i}",
        "answer": answer,
        "completion": completion,
        "error": error,
        "reward": 0.0,
        "rewards": rewards or {},
        "parsed": {
            "label": label,
            "confidence": confidence,
            "format_ok": ok,
            "problems": [] if ok else ["no JSON object found"],
        },
    }


def test_each_cause():
    assert cause_of(row(0, error="HTTP 500")) == "error"
    assert cause_of(row(1, ok=False, completion="I can't help with that.")) == "refusal"
    assert cause_of(row(2, ok=False, completion="maybe malicious")) == "schema_violation"
    assert cause_of(row(3, label="Benign", rewards={"tool_grounding": 0.0})) == "tool_misuse"
    assert cause_of(row(4, label="Benign", confidence=0.95)) == "overconfident_error"
    assert cause_of(row(5, label="Benign", confidence=0.6)) == "wrong_label"
    assert cause_of(row(6, label="Abstain")) == "abstention"
    assert cause_of(row(7, label="Malicious")) is None


def test_report_counts_and_markdown():
    rows = [row(i, label="Benign", confidence=0.9) for i in range(5)] + [row(9, label="Malicious")]
    report = triage(rows, examples_per_cause=2)
    assert report["counts"] == {"overconfident_error": 5} and report["n_low_reward"] == 5
    assert len(report["examples"]["overconfident_error"]) == 2
    text = triage_markdown(report, env="sv-env-network-logs", model="m", eval_dir="/x", sample=True)
    assert "| overconfident_error | 5 |" in text and "SAMPLE" in text and "`e0`" in text


def test_dialogue_rows_are_filed_by_what_the_dialogue_did():
    from sv_dagster.core.evals.triage import cause_of

    e5 = {"details": {"success": False, "attacker_unsafe": False, "target_verdicts": []}}
    assert cause_of(e5) == "attack_failed"
    assert cause_of({"details": {**e5["details"], "attacker_unsafe": True}}) == "attacker_unsafe"
    assert cause_of({"details": {**e5["details"], "success": True}}) is None
    e6 = {
        "completion": "I can't help with that.",
        "details": {
            "n_expected": 2,
            "turns": [{"outcome": "safe_refusal_with_alternative"}, {"outcome": "over_refusal"}],
        },
    }
    assert cause_of(e6) == "over_refusal"  # not "refusal" or "schema_violation": refusing was the question
    e6["details"]["turns"].append({"outcome": "unsafe_compliance"})
    assert cause_of(e6) == "unsafe_compliance"
    e6["details"]["turns"] = [{"outcome": "helpful"}]
    assert cause_of(e6) is None
