"""E2 synthetic pairs, labelled by the real tools (OPA in-process, Semgrep and Checkov from
.venv-tools): a mutated file triggers the Rego and Semgrep rules its operator targets and
the fixed file passes every tool; what the tools do not confirm is rejected."""

from __future__ import annotations

import random

import pytest

from sv_env_config_verification import synthetic as s
from sv_env_config_verification.patching import apply_patch
from sv_env_config_verification.tools import ToolSuite, default_suite

SEEDS = {seed.id: seed for seed in s.default_seeds()}
CASES = [  # (seed, operator): Kubernetes and Terraform, each class of misconfiguration the generator makes
    ("template-statefulset", "privileged"),
    ("template-worker-pod", "host_network"),
    ("template-daemonset", "run_as_root"),
    ("template-clusterrole", "rbac_wildcard"),
    ("template-volume-policy", "ebs_unencrypted"),
    ("template-bucket-block", "s3_public_acl"),
    ("template-office-ssh", "open_ssh_ingress"),
    ("template-aurora", "rds_unencrypted"),
]


@pytest.fixture(scope="module")
def suite() -> ToolSuite:
    suite = default_suite()
    assert {"opa", "semgrep", "checkov"} <= set(suite.available), suite.available  # the real tools, not stand-ins
    return suite


def _candidate(seed_id: str, operator: str | None, n: int) -> s.Candidate:
    mutation = s.MUTATIONS[operator] if operator else None
    content, fixed = s.make_pair(SEEDS[seed_id], mutation, f"{n:04x}", random.Random(n))
    row = {
        "id": f"t{n}",
        "filename": f"case{n}-{SEEDS[seed_id].filename}",
        "content": content,
        "expected": {},
        "clean": mutation is None,
        "info": {"scenario": operator or "clean"},
    }
    return s.Candidate(row, fixed, mutation)


@pytest.fixture(scope="module")
def labelled(suite):
    candidates = [_candidate(seed, op, i) for i, (seed, op) in enumerate(CASES)]
    candidates.append(_candidate("template-statefulset", None, 99))  # a clean row
    verdicts = s.label_pairs(candidates, suite)
    return candidates, verdicts, suite


def test_mutants_fail_their_target_rules_and_fixes_pass_every_tool(labelled):
    candidates, verdicts, suite = labelled
    assert verdicts == [None] * len(candidates)
    for c in candidates[:-1]:
        # Independently of label_pairs: scan the two files again and compare.
        vuln = suite.scan_many({c.row["filename"]: c.row["content"]})[c.row["filename"]]
        fixed = suite.scan_many({c.row["filename"]: c.fixed})[c.row["filename"]]
        assert c.mutation.target in vuln["opa"].ids, c.mutation.name
        if c.mutation.semgrep:
            assert c.mutation.semgrep in vuln["semgrep"].ids, c.mutation.name
        assert not any(r.ids for r in fixed.values()), (c.mutation.name, {t: r.ids for t, r in fixed.items()})
        assert c.row["expected"]["opa"] == sorted(vuln["opa"].ids)
        every = set(c.row["info"]["tools_flagging"]) == set(c.row["expected"])
        assert c.row["info"]["difficulty"] == (1 if every else 2)


def test_the_pair_diff_turns_the_vulnerable_file_into_the_fixed_one(labelled):
    candidates, _, _ = labelled
    for c in candidates[:-1]:
        diff = s.unified_diff(c.row["content"], c.fixed, c.row["filename"])
        assert apply_patch(c.row["filename"], c.row["content"], diff) == c.fixed
        assert "SAMPLE" not in c.row["content"] and "clean" not in c.row["content"].lower()  # no label leaks


def test_clean_rows_stand_only_when_no_tool_flags_them(labelled):
    candidates, verdicts, suite = labelled
    assert candidates[-1].row["clean"] and verdicts[-1] is None and candidates[-1].row["info"]["difficulty"] == 0
    aes = s.Seed("aes", "bucket.tf", s.TEMPLATES["bucket-acl.tf"].replace("aws:kms", "AES256"), "test")
    content, _ = s.make_pair(aes, None, "beef", random.Random(1))
    row = {"id": "c1", "filename": "bucket-beef.tf", "content": content, "expected": {}, "clean": True, "info": {}}
    [reason] = s.label_pairs([s.Candidate(row, None, None)], suite)
    assert reason == "clean seed flagged by the tools: ['checkov/CKV_AWS_145']"


def test_a_mutation_the_tools_do_not_confirm_is_rejected(suite):
    # An operator that claims privileged but only renames: the tools see nothing.
    c = _candidate("template-statefulset", "privileged", 7)
    c.row["content"] = c.fixed
    [reason] = s.label_pairs([c], suite)
    assert reason.startswith("privileged: vulnerable file does not trigger opa/k8s-privileged-container")


def test_generation_is_balanced_renamed_and_seeded():
    seeds = s.default_seeds()
    a, rejects = s.generate(40, random.Random(5), seeds, id_prefix="e2-t", clean_share=0.25)
    b, _ = s.generate(40, random.Random(5), seeds, id_prefix="e2-t", clean_share=0.25)
    assert [c.row for c in a] == [c.row for c in b] and rejects == []
    assert 4 <= sum(c.mutation is None for c in a) <= 18
    assert len({c.row["filename"] for c in a}) == 40
    assert len({c.mutation.name for c in a if c.mutation}) >= 8
    for c in a:  # every vulnerable row carries its fix as a diff that applies
        if c.mutation:
            assert (
                apply_patch(c.row["filename"], c.row["content"], c.row["fix"]["diff"])
                == c.row["fix"]["content"]
                == c.fixed
            )
        else:
            assert "fix" not in c.row and c.row["clean"] is True
    assert not any(seed.source.startswith("bundled:") for seed in seeds)  # the test split stays out by default
    assert any(seed.source.startswith("bundled:") for seed in s.default_seeds(include_bundled=True))
