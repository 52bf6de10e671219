"""E1 synthetic flows: playbooks in valid ranges, the labeller's invariants, perturbation of
seed flows, and the chunked Parquet batch (bad seed rows reported with file and line)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from sv_dagster.core.data.synthetic import BatchSpec, accepted_examples
from sv_dagster.core.data.synthetic.columnar import run_columnar_batch as run_e1_batch
from sv_dagster.core.envs import ENVS
from sv_env_network_logs import synthetic as s
from sv_env_network_logs.baseline import classify_flow
from sv_env_network_logs.synthetic_batch import seed_flows as e1_seeds
from tests.conftest import REPO_ROOT

SAMPLE_CORPUS = REPO_ROOT / "data" / "samples" / "iot23-preprocessed.sample.jsonl"


@pytest.fixture(scope="module")
def flows() -> dict[str, np.ndarray]:
    return s.playbook_flows(6000, np.random.default_rng(7), attack_share=0.3)


def test_playbook_flows_are_valid_balanced_and_cover_every_attack_family(flows):
    assert all(reason is None for reason in s.validate_flows(flows))
    assert all(reason is None for reason in s.verify_labels(flows))
    share = float(np.mean(flows["label"] == "Malicious"))
    assert 0.27 < share < 0.33  # the requested label balance
    assert {"port_scan", "brute_force", "c2_beaconing", "exfiltration", "ddos", "benign"} <= set(flows["family"])
    assert ((flows["id.resp_p"] >= 0) & (flows["id.resp_p"] <= 65535)).all()
    for side in ("orig", "resp"):  # IP-level bytes = payload + a 40 (TCP) / 28 (UDP) byte header per packet
        header = np.where(flows["proto"] == "tcp", 40, 28)
        assert (flows[f"{side}_ip_bytes"] == flows[f"{side}_bytes"] + header * flows[f"{side}_pkts"]).all()
    for name in s.PLAYBOOKS:
        assert (flows["scenario"] == name).any(), name


def test_the_labeller_rejects_flows_that_break_their_scenario(flows):
    scans = s.take(flows, np.flatnonzero(flows["scenario"] == "port_scan")[:5])
    scans["orig_bytes"] = scans["orig_bytes"] + 5000  # a "port scan" that carries a payload
    floods = s.take(flows, np.flatnonzero(flows["scenario"] == "udp_flood")[:3])
    floods["label"] = np.full(3, "Benign", dtype=object)  # a flood labelled benign
    reasons = s.verify_labels(s.concat([scans, floods]))
    assert all("port_scan invariant broken: no payload" in r for r in reasons[:5])
    assert all("scenario udp_flood is Malicious" in r for r in reasons[5:])


def test_validation_names_what_is_out_of_range(flows):
    with_response = int(np.flatnonzero(flows["resp_bytes"] > 100)[0])
    bad = s.take(flows, np.array([0, 1, 2, with_response, 4]))
    bad["id.resp_p"][0] = 70000
    bad["orig_bytes"][1] = -3
    bad["conn_state"][2] = "XX"
    bad["resp_ip_bytes"][3] = bad["resp_bytes"][3] - 1
    bad["history"][4] = "not a history"
    reasons = list(s.validate_flows(bad))
    assert reasons[0] == "id.resp_p outside 0..65535"
    assert reasons[1].startswith("orig_bytes not in")
    assert reasons[2] == "conn_state is not a Zeek connection state"
    assert reasons[3] == "resp_ip_bytes smaller than resp_bytes"
    assert reasons[4] == "history is not a Zeek history string"


def test_difficulty_is_the_rule_baselines_mistakes(flows):
    tags = s.difficulty(flows)
    for i in range(0, 6000, 97):
        wrong = classify_flow(s.flow_dict(flows, i))[0] != flows["label"][i]
        assert (tags[i] == 2) == wrong and tags[i] in (0, 2)
    beacons = flows["scenario"] == "c2_beacon_https"  # beaconing over 443 fools the baseline
    assert np.mean(tags[beacons] == 2) > 0.9


def _seed_flows() -> list[dict]:
    return [json.loads(line) for line in SAMPLE_CORPUS.read_text().splitlines()]


def test_perturbation_stays_in_range_keeps_labels_and_moves_hosts():
    seeds = _seed_flows()
    for i, flow in enumerate(seeds):
        flow["id.orig_h"], flow["id.resp_h"] = f"192.168.1.{i % 250 + 1}", "203.0.113.7"
    cols, problems = s.seed_columns(seeds)
    assert problems == []
    rng = np.random.default_rng(3)
    out = s.perturb_flows(cols, 3000, rng)
    assert all(r is None for r in s.validate_flows(out))
    assert (out["label"] == cols["label"][out["seed_index"]]).all()
    assert (out["scenario"] == cols["scenario"][out["seed_index"]]).all()
    assert (out["id.orig_p"] != cols["id.orig_p"][out["seed_index"]]).mean() > 0.9
    assert not np.allclose(out["duration"], cols["duration"][out["seed_index"]])
    zero = cols["orig_bytes"][out["seed_index"]] == 0
    assert (out["orig_bytes"][zero] == 0).all()  # no payload stays no payload
    assert all(h.startswith("192.168.1.") for h in out["id.orig_h"])  # moved within its /24
    assert len(set(out["id.orig_h"])) > 100
    broken = [r for r in s.verify_labels(out) if r]
    assert len(broken) < 0.1 * len(out["label"])  # most variants keep their scenario's invariant


def test_seed_rows_that_cannot_be_used_are_reported_not_used():
    seeds = _seed_flows()[:3]
    seeds[0] = {**seeds[0], "label": "Suspicious"}
    seeds[1] = {k: v for k, v in seeds[1].items() if k != "duration"}
    cols, problems = s.seed_columns(seeds)
    assert len(cols["label"]) == 1
    assert [i for i, _ in problems] == [0, 1]
    assert "label 'Suspicious'" in problems[0][1] and "duration" in problems[1][1]


def test_a_models_flow_is_parsed_and_checked_like_any_other():
    reply = (
        '```json\n{"id.orig_p": 40000, "id.resp_p": 23, "proto": "tcp", "service": "-", "duration": 1.2, '
        '"orig_bytes": 80, "resp_bytes": 120, "conn_state": "SF", "missed_bytes": 0, "history": "ShAdDaFr", '
        '"orig_pkts": 3, "orig_ip_bytes": 200, "resp_pkts": 2, "resp_ip_bytes": 200}\n```'
    )
    flow = s.parse_variation(reply, "brute_force")
    cols, problems = s.seed_columns([flow])
    assert problems == [] and cols["label"][0] == "Malicious"
    assert s.validate_flows(cols)[0] is None and s.verify_labels(cols)[0] is None
    with pytest.raises(ValueError, match="no JSON object"):
        s.parse_variation("I cannot do that.", "brute_force")


def _train_split(tmp_path: Path) -> Path:
    """A curated-dataset folder whose train split has two broken lines."""
    from sv_env_network_logs.flows import render_flow_question

    folder = tmp_path / "dataset-e1"
    folder.mkdir()
    lines = [
        json.dumps(
            {
                "id": f"t{i}",
                "question": render_flow_question(f),
                "answer": f["label"],
                "info": {"scenario": f["scenario"]},
            }
        )
        for i, f in enumerate(_seed_flows())
    ]
    lines.insert(4, "{not json")
    lines.insert(9, json.dumps({"id": "x", "question": "hello", "answer": "Benign"}))
    (folder / "train.jsonl").write_text("\n".join(lines) + "\n")
    return folder


def test_e1_batch_is_chunked_parquet_loadable_with_rejects_and_a_spot_check(tmp_path):
    seed_cols, sources, facts, rejects = e1_seeds(_train_split(tmp_path))
    assert {r.source.rsplit(":", 1)[1] for r in rejects} == {"5", "10"}  # file:line of the two bad lines
    assert any("not valid JSON" in r.reason for r in rejects) and any("missing flow field" in r.reason for r in rejects)
    spec = BatchSpec(
        env="e1",
        env_id="sv-env-network-logs",
        partition="2026-11-05",
        batch_id="b1",
        out_dir=tmp_path / "batch",
        size=3000,
        seed=11,
        sample=True,
    )
    result = run_e1_batch(spec, seed_cols, sources, facts, rejects, chunk_rows=1000)
    meta = result.metadata
    table = pq.read_table(result.files["flows"])
    assert table.num_rows == meta["counts"]["accepted"] > 2500
    assert meta["counts"]["accepted"] + meta["counts"]["rejected"] - meta["counts"]["seed_rows_rejected"] == 3000
    assert meta["counts"]["by_origin"]["perturbed"] > 1000 and meta["counts"]["by_origin"]["playbook"] > 1000
    assert sum(meta["label_balance"].values()) == table.num_rows and set(meta["label_balance"]) == {
        "Benign",
        "Malicious",
    }
    assert meta["rejected"]["by_stage"]["seed"] == 2
    written = [json.loads(line) for line in (result.out_dir / "rejects.jsonl").read_text().splitlines()]
    assert len(written) == meta["counts"]["rejected"] and all(r["reason"] for r in written)
    perturbed = [r for r in written if r.get("origin") == "perturbed"]
    assert all(r["source"].startswith(str(tmp_path / "dataset-e1" / "train.jsonl")) for r in perturbed)
    queue = (result.out_dir / "spot_check.jsonl").read_text().splitlines()
    assert len(queue) == round(0.05 * table.num_rows)
    # The taskset loads the batch, and the Parquet batch reads back as the same rows.
    tasks = list(ENVS["e1"].iter_tasks(result.files["examples"], None))
    assert len(tasks) == table.num_rows
    assert tasks[0].data.info["synthetic"] is True and tasks[0].data.info["sample"] is True
    assert tasks[0].data.prompt_text == json.loads(result.files["examples"].read_text().splitlines()[0])["question"]
    from_jsonl = accepted_examples(result.out_dir, root=tmp_path).rows
    (result.out_dir / "examples.jsonl").unlink()
    rows = accepted_examples(result.out_dir, root=tmp_path).rows  # now read from flows.parquet
    assert rows == from_jsonl
    assert Counter(r["info"]["difficulty"] for r in rows)[2] > 0


def test_a_screened_e1_batch_rejects_the_flows_that_duplicate_a_held_out_row(tmp_path):
    from sv_dagster.core.data import leakage

    seed_cols, sources, facts, rejects = e1_seeds(_train_split(tmp_path))

    def spec(name: str, held_out=None) -> BatchSpec:
        return BatchSpec(
            env="e1",
            env_id="sv-env-network-logs",
            partition="2026-11-05",
            batch_id=name,
            out_dir=tmp_path / name,
            size=1500,
            seed=11,
            sample=True,
            held_out=held_out,
        )

    plain = run_e1_batch(spec("plain"), seed_cols, sources, facts, rejects, chunk_rows=500)
    held_out_file = tmp_path / "test.jsonl"  # stands in for a test split: 40 of the batch's own flows
    held_out_file.write_text("".join(plain.files["examples"].read_text().splitlines(keepends=True)[:40]))
    canonical = leakage.canonical_fn(ENVS["e1"])
    policy = leakage.policy_for("e1")
    screen = leakage.held_out_screen(leakage.reference_rows([held_out_file], canonical), canonical, policy)
    screened = run_e1_batch(spec("screened", screen), seed_cols, sources, facts, rejects, chunk_rows=500)
    written = [json.loads(line) for line in (screened.out_dir / "rejects.jsonl").read_text().splitlines()]
    leaked = [r for r in written if r["stage"] == "leakage"]
    assert len(leaked) >= 40 and all(f"{held_out_file}:" in r["reason"] for r in leaked)
    table = pq.read_table(screened.files["flows"])
    assert (
        table.num_rows == screened.metadata["counts"]["accepted"] == plain.metadata["counts"]["accepted"] - len(leaked)
    )
    report = leakage.check_files([screened.files["examples"]], [held_out_file], canonical, policy)
    assert report.n_train == table.num_rows and not report.leaks  # what is written leaks nothing
