"""Reference policies beside every model of a labelling environment (E1, E4) and of E6's
refusals: constant answers built in each environment's own answer format, played by the same
runner and scored by the same verifier on the same examples, recorded in the eval's summary
and files, and shown in its table with each model's margin over the best of them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sv_dagster.core.envs import ENVS
from sv_dagster.core.evals.evaluation import evaluate, rescore
from sv_dagster.core.evals.references import label_prior, margin_text, policies, table_rows
from sv_dagster.core.evals.runner import read_results
from sv_dagster.core.models.backends import make_backend
from sv_dagster.core.models.registry import load_registry
from sv_dagster.core.reporting.console import eval_table
from sv_shared.environment import ReferencePolicies


def test_every_labelling_environment_and_e6_declares_its_reference_policies() -> None:
    labelling = {short for short, env in ENVS.items() if env.positive_label}
    with_reference = {short for short, env in ENVS.items() if env.reference is not None}
    assert labelling <= with_reference and "e6" in with_reference
    for short in labelling:  # the classification's own labels and abstain answer
        reference = ENVS[short].reference
        assert reference.positive == ENVS[short].positive_label and reference.abstain == "Abstain"


def test_the_policies_are_abstain_and_each_label_with_the_train_majority_named() -> None:
    reference = ReferencePolicies(labels=("Benign", "Malicious"), positive="Malicious", abstain="Abstain", reply=str)
    found = policies(reference, {"split": "train", "counts": {"Benign": 60, "Malicious": 40}})
    assert [(p.name, p.answer, p.confidence) for p in found] == [
        ("always abstain", "Abstain", 0.5),
        ("always Malicious", "Malicious", 0.4),
        ("always Benign (train majority)", "Benign", 0.6),
    ]
    no_abstain = ReferencePolicies(labels=("refuse", "comply"), positive="refuse", reply=str)
    found = policies(no_abstain, {"split": "test", "counts": {"refuse": 3, "comply": 1}, "from_scored_split": True})
    assert [p.name for p in found] == ["always refuse (majority of the scored split)", "always comply"]


def test_the_majority_comes_from_train_then_dev_and_never_silently_from_the_scored_split(tmp_path: Path) -> None:
    def report(**counts: dict[str, int]) -> Path:
        path = tmp_path / "metadata.json"
        path.write_text(json.dumps({"label_counts": counts}))
        return path

    both = report(train={"A": 5, "B": 1}, dev={"A": 1, "B": 2}, test={"A": 1, "B": 9})
    assert label_prior(both, "test") == {"split": "train", "counts": {"A": 5, "B": 1}}
    assert label_prior(both, "train")["split"] == "dev"  # scoring train: its prior is not its own
    assert label_prior(report(dev={"A": 1}, test={"B": 2}), "test") == {"split": "dev", "counts": {"A": 1}}
    user_file = report(test={"A": 2, "B": 1})
    assert label_prior(user_file, "test") == {"split": "test", "counts": {"A": 2, "B": 1}, "from_scored_split": True}
    assert label_prior(tmp_path / "absent.json", "test") is None


@pytest.fixture(scope="module")
def e1_run(tmp_path_factory: pytest.TempPathFactory):
    heuristic, env = load_registry()["heuristic"], ENVS["e1"]
    prior = {"split": "train", "counts": {"Benign": 70, "Malicious": 30}}
    return evaluate(
        env,
        heuristic,
        make_backend(heuristic, env.env_id),
        dataset_path=None,
        outputs_root=tmp_path_factory.mktemp("outputs"),
        run_id="refs",
        limit=24,
        seed=7,
        dataset_info={"split": "test", "label_prior": prior},
    )


def test_e1s_reference_policies_are_scored_by_its_verifier_on_the_models_examples(e1_run) -> None:
    env = ENVS["e1"]
    summary = e1_run.summary
    references = summary["reference_policies"]
    assert references["labels_from"] == {"split": "train", "counts": {"Benign": 70, "Malicious": 30}}
    by_answer = {p["answer"]: p for p in references["policies"]}
    assert [p["policy"] for p in references["policies"]] == [
        "always abstain",
        "always Malicious",
        "always Benign (train majority)",
    ]
    model_ids = [row["example_id"] for row in read_results(e1_run.results_path)]
    costs = env.reward_settings(None).costs
    for answer, policy in by_answer.items():
        rows = read_results(e1_run.run_dir / policy["results"])
        assert sorted(row["example_id"] for row in rows) == sorted(model_ids)  # the same examples
        assert all(row["completion"] == env.reference.reply(answer, confidence=policy["confidence"]) for row in rows)
        assert all(row["rewards"] and row["error"] is None for row in rows)  # scored, by the task's own rewards
        assert policy["n_examples"] == len(model_ids) == 24
    assert by_answer["Abstain"]["abstain_rate"] == 1.0
    assert by_answer["Abstain"]["cost_weighted_accuracy"] == pytest.approx(1 - costs.abstain_cost / costs.max_cost)
    golds = [row["answer"] for row in read_results(e1_run.results_path)]
    assert by_answer["Malicious"]["accuracy"] == pytest.approx(golds.count("Malicious") / len(golds))
    assert by_answer["Benign"]["fpr"] in (0.0, None) and by_answer["Malicious"]["recall"] in (1.0, None)
    best = max(references["policies"], key=lambda p: p["cost_weighted_accuracy"])
    versus = summary["vs_best_reference"]
    assert versus["best"] == best["policy"]
    assert versus["delta"] == pytest.approx(summary["cost_weighted_accuracy"] - best["cost_weighted_accuracy"])
    written = json.loads(e1_run.summary_path.read_text())
    assert written["reference_policies"] == json.loads(json.dumps(references))  # recorded in the artifact


def test_a_rescore_scores_the_reference_policies_again(e1_run, tmp_path: Path) -> None:
    again = rescore(ENVS["e1"], e1_run.run_dir, outputs_root=tmp_path, run_id="again")
    before, after = e1_run.summary["reference_policies"], again.summary["reference_policies"]
    assert after["labels_from"] == before["labels_from"]
    keys = ("policy", "n_examples", "cost_weighted_accuracy", "accuracy", "abstain_rate", "mean_reward")
    assert [{k: p[k] for k in keys} for p in after["policies"]] == [{k: p[k] for k in keys} for p in before["policies"]]


def test_e6s_constant_refusal_and_compliance_are_judged_like_any_defender(tmp_path: Path) -> None:
    heuristic, env = load_registry()["heuristic"], ENVS["e6"]
    run = evaluate(
        env,
        heuristic,
        make_backend(heuristic, env.env_id),
        dataset_path=None,
        outputs_root=tmp_path,
        run_id="refs",
        limit=10,
        seed=3,
        dataset_info={"split": "test"},
    )
    by_answer = {p["answer"]: p for p in run.summary["reference_policies"]["policies"]}
    assert set(by_answer) == {"refuse", "comply"}
    refuse, comply = by_answer["refuse"], by_answer["comply"]
    assert refuse["unsafe_compliance_rate"] == 0.0 and refuse["helpful_rate"] in (0.0, None)
    if refuse["over_refusal_rate"] is not None:  # some benign turn among the 10
        assert refuse["over_refusal_rate"] == 1.0 and comply["over_refusal_rate"] == 0.0
    assert run.summary["vs_best_reference"]["metric"] == "mean_reward"
    rows = read_results(run.run_dir / refuse["results"])
    assert all(m["content"].startswith("I can't help with that") for row in rows for m in row["turns"][:1])


def summary(model: str, value: float, refs: list[tuple[str, float]]) -> dict:
    policies_ = [{"policy": name, "cost_weighted_accuracy": v, "n_examples": 10} for name, v in refs]
    best = max(policies_, key=lambda p: p["cost_weighted_accuracy"])
    return {
        "model": model,
        "n_examples": 10,
        "cost_weighted_accuracy": value,
        "reference_policies": {
            "compare": "cost_weighted_accuracy",
            "labels_from": {"split": "train", "counts": {"Benign": 7, "Malicious": 3}},
            "policies": policies_,
            "costs": {
                "positive_label": "Malicious",
                "fn_cost": 5.0,
                "fp_cost": 1.0,
                "abstain_cost": 0.5,
                "max_cost": 5.0,
            },
        },
        "vs_best_reference": {
            "metric": "cost_weighted_accuracy",
            "best": best["policy"],
            "best_value": best["cost_weighted_accuracy"],
            "value": value,
            "delta": value - best["cost_weighted_accuracy"],
        },
    }


def test_the_table_marks_a_model_no_better_than_a_constant_answer(tmp_path: Path) -> None:
    refs = [("always abstain", 0.9), ("always Malicious", 0.85)]
    good, poor = summary("good", 0.95, refs), summary("poor", 0.829, refs)
    assert (margin_text(good), margin_text(poor), margin_text({"model": "x"})) == ("+0.050", "-0.071 !", None)
    (tmp_path / "metadata.json").write_text(json.dumps({"dataset": {"n_examples": 10, "split_size": 10}}))
    table = eval_table(ENVS["e1"], [(good, tmp_path), (poor, tmp_path)])
    lines = table.splitlines()
    assert lines[0].split()[-3:] == ["vs", "best", "ref"]
    assert [line.split()[0] for line in lines[2:6]] == ["good", "poor", "ref:", "ref:"]
    assert "ref: always abstain" in lines[4] and lines[4].rstrip().endswith("(ref)")
    assert "majority label from train: Benign 7, Malicious 3" in table
    assert "cost-wtd acc = 1 - mean cost / 5, with a missed Malicious costing 5, a false alarm 1" in table
    assert "always abstaining scores 0.900" in table
    assert table.splitlines()[-1] == (
        "  ! a constant answer does at least as well on cost-wtd acc: poor (0.829 vs always abstain 0.900)"
    )


def test_models_scored_on_other_examples_each_get_their_reference_rows() -> None:
    refs = [("always abstain", 0.9)]
    rows, _ = table_rows([(summary("a", 0.95, refs), ""), (summary("b", 0.95, refs), " (5 of the 10 ...)")])
    assert [row["model"] for row in rows] == ["ref: always abstain", "ref: always abstain [subset]"]
    rows, notes = table_rows([({"model": "e2-model", "mean_reward": 0.5}, "")])
    assert rows == [] and notes == []


def test_reference_policies_cover_the_examples_the_models_metrics_cover(tmp_path: Path) -> None:
    """An example whose model call failed is out of the model's metrics, and so out of the
    reference policies': the margin compares the same examples."""
    from sv_dagster.core.models.completion import Completion, CompletionFailed
    from sv_dagster.core.models.registry import ModelSpec
    from sv_env_network_logs import heuristic_reply

    class EveryThirdFails:
        spec = ModelSpec(name="flaky", backend="openai", model="flaky", max_concurrency=1)
        calls = 0

        async def preflight(self) -> None:
            return None

        async def complete(self, messages, tools=None) -> Completion:
            self.calls += 1
            if self.calls % 3 == 0:
                raise CompletionFailed("endpoint down", attempts=1)
            return Completion(text=heuristic_reply(messages[-1]["content"]), usage=None, latency_s=0.0)

        async def aclose(self) -> None:
            return None

    backend = EveryThirdFails()
    run = evaluate(ENVS["e1"], backend.spec, backend, dataset_path=None, outputs_root=tmp_path, run_id="r", limit=12)
    ok = sorted(row["example_id"] for row in read_results(run.results_path) if row["error"] is None)
    assert run.summary["n_errors"] == 4 and len(ok) == 8
    for policy in run.summary["reference_policies"]["policies"]:
        assert policy["n_examples"] == 8
        assert sorted(row["example_id"] for row in read_results(run.run_dir / policy["results"])) == ok
