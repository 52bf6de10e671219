"""E1 taskset: data loading, reward configuration and scoring of good and bad replies."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from sv_dagster.core.evals.runner import score_completion
from sv_env_network_logs import (
    NetworkLogsTaskset,
    NetworkLogsTasksetConfig,
    RewardConfigError,
    classify_flow,
    heuristic_reply,
    load_reward_settings,
    render_flow_question,
)
from sv_env_network_logs.flows import parse_flow_question
from sv_env_network_logs.samples import SCENARIOS, sample_flows
from sv_shared.jsonl import DatasetError


def tasks(**config) -> list:
    return list(NetworkLogsTaskset(NetworkLogsTasksetConfig(id="sv-env-network-logs", **config)))


def score(task, completion: str) -> tuple[dict, dict, float]:
    return asyncio.run(score_completion(task, completion))


def test_flow_prompt_round_trips_every_field():
    flow = sample_flows(1, seed=5)[0]
    parsed = parse_flow_question(render_flow_question(flow))
    for name in ("id.resp_p", "proto", "conn_state", "orig_bytes", "orig_pkts", "history"):
        assert parsed[name] == flow[name], name
    assert parsed["duration"] == pytest.approx(flow["duration"], rel=1e-5)


def test_sample_covers_every_scenario_and_both_labels():
    flows = sample_flows(300, seed=23)
    assert {f["scenario"] for f in flows} == set(SCENARIOS)
    assert {f["label"] for f in flows} == {"Benign", "Malicious"}


def test_heuristic_rules_and_reply_schema():
    telnet = {"id.resp_p": 23, "conn_state": "S0", "orig_bytes": 0, "resp_bytes": 0}
    web = {"id.resp_p": 443, "conn_state": "SF", "orig_bytes": 900, "resp_bytes": 40000}
    assert classify_flow(telnet)[0] == "Malicious"
    assert classify_flow(web)[0] == "Benign"
    reply = json.loads(heuristic_reply(render_flow_question({**web, "proto": "tcp"})))
    assert reply["label"] == "Benign" and 0 <= reply["confidence"] <= 1


def test_bundled_dataset_loads_with_weights_from_packaged_toml():
    loaded = tasks()
    assert len(loaded) == 60
    assert {t.data.answer for t in loaded} == {"Benign", "Malicious"}
    weights = load_reward_settings().weights
    _, got, _ = score(loaded[0], '{"label": "Benign", "confidence": 0.5}')
    assert got == weights


def test_correct_confident_answer_beats_wrong_confident_answer():
    task = next(t for t in tasks() if t.data.answer == "Malicious")
    right, _, right_total = score(task, '{"label": "Malicious", "confidence": 0.9, "rationale": "scan"}')
    wrong, _, wrong_total = score(task, '{"label": "Benign", "confidence": 0.9}')
    assert right["accuracy"] == 1.0 and wrong["accuracy"] == 0.0
    assert right["calibration"] == pytest.approx(1 - 0.1**2)
    assert wrong["calibration"] == pytest.approx(1 - 0.9**2)
    assert right_total > wrong_total


def test_missing_an_attack_scores_lower_than_a_false_alarm():
    loaded = tasks()
    attack = next(t for t in loaded if t.data.answer == "Malicious")
    benign = next(t for t in loaded if t.data.answer == "Benign")
    missed, _, _ = score(attack, '{"label": "Benign", "confidence": 0.6}')
    alarm, _, _ = score(benign, '{"label": "Malicious", "confidence": 0.6}')
    assert missed["asymmetric_cost"] < alarm["asymmetric_cost"]


@pytest.mark.parametrize(
    "completion",
    [
        "",
        "I think this flow is malicious.",
        '{"label": "Evil", "confidence": 0.9}',
        '{"label": "Malicious", "confidence": "high"}',
        '{"label": "Malicious", "confidence": NaN}',
        '{"label": "Malicious", "confidence": 7}',
        "{not json at all",
    ],
)
def test_bad_completions_get_zero_format_and_are_still_scored(completion):
    task = tasks()[0]
    rewards, _, total = score(task, completion)
    assert rewards["format"] == 0.0
    assert all(value is not None and 0.0 <= value <= 1.0 for value in rewards.values())
    assert total == total  # not NaN


def test_fenced_reply_with_prose_and_int_label_is_understood():
    task = next(t for t in tasks() if t.data.answer == "Malicious")
    rewards, _, _ = score(task, 'Sure.\n```json\n{"label": 1, "confidence": 0.8}\n```\nDone.')
    assert rewards["accuracy"] == 1.0 and rewards["format"] == 1.0


def test_custom_reward_toml_changes_weights_and_costs(tmp_path: Path):
    custom = tmp_path / "rewards.toml"
    custom.write_text(
        "[weights]\naccuracy = 2.0\nformat = 0.0\ncalibration = 0.0\nasymmetric_cost = 1.0\n"
        "[costs]\nfn_cost = 10.0\nfp_cost = 1.0\nabstain_cost = 0.5\n"
    )
    task = next(t for t in tasks(task={"reward_config": custom}) if t.data.answer == "Malicious")
    rewards, weights, total = score(task, '{"label": "Benign", "confidence": 0.5}')
    assert weights["accuracy"] == 2.0 and weights["format"] == 0.0 and weights["abstention"] == 0.0
    assert rewards["asymmetric_cost"] == pytest.approx(0.0)  # the worst cost of this config
    assert total == pytest.approx(sum(rewards[n] * w for n, w in weights.items()))


@pytest.mark.parametrize(
    "text, message",
    [
        ("[weights]\nacuracy = 1.0\n", "unknown reward"),
        ("[weights]\naccuracy = 'lots'\n", "finite number"),
        ("[costs]\nfn_cost = -1.0\n", "[costs]"),
        ("[weights\n", "not valid TOML"),
    ],
)
def test_bad_reward_config_names_the_file(tmp_path: Path, text: str, message: str):
    path = tmp_path / "bad.toml"
    path.write_text(text)
    with pytest.raises(RewardConfigError) as info:
        load_reward_settings(path)
    assert str(path) in str(info.value) and message in str(info.value)


def test_user_jsonl_in_common_shape_with_meta_or_info(tmp_path: Path):
    path = tmp_path / "mine.jsonl"
    rows = [
        {"question": "id.resp_p: 23\nconn_state: S0", "answer": "Malicious", "meta": {"k": 1}},
        {"question": "id.resp_p: 443\nconn_state: SF", "answer": 0, "info": {"k": 2}},
    ]
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    loaded = tasks(dataset_path=path)
    assert [t.data.answer for t in loaded] == ["Malicious", "Benign"]
    assert loaded[0].data.info["k"] == 1 and loaded[1].data.info["source"] == f"{path}:2"


def test_row_without_answer_is_rejected_with_file_and_line(tmp_path: Path):
    path = tmp_path / "broken.jsonl"
    path.write_text('{"question": "a", "answer": "Benign"}\n\n{"question": "b"}\n')
    with pytest.raises(DatasetError, match=rf"{path}:3: missing 'answer'"):
        tasks(dataset_path=path)


def test_missing_dataset_file_is_a_clear_error(tmp_path: Path):
    with pytest.raises(DatasetError, match="dataset file not found: .*nope.jsonl"):
        tasks(dataset_path=tmp_path / "nope.jsonl")


def test_seeded_subset_is_stable_per_seed_and_differs_across_seeds():
    from sv_dagster.core.envs import ENVS

    def keys(seed):
        return [t.key for t in ENVS["e1"].load_tasks(None, None, limit=10, seed=seed)]

    assert keys(42) == keys(42) and len(set(keys(42))) == 10
    assert keys(42) != keys(1)
    assert [t.key for t in ENVS["e1"].load_tasks(None, None)] == [t.key for t in tasks()]
