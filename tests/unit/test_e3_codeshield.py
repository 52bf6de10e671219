"""E3's third rescan: CyberSecEval's Insecure Code Detector (codeshield==1.0.1 in the tool
environment). Its findings have the Bandit/Semgrep shape, a missing codeshield is recorded as
unavailable, its Semgrep half is cached by content, and a patch can neither keep an ICD
finding nor break the scanner and be paid for it."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import pytest
import regex

from sv_env_code_vulnerability import provenance, scanning
from sv_env_code_vulnerability.sandbox import detect_sandbox
from sv_env_code_vulnerability.scanning import (
    CodeShieldRules,
    IcdRegexRule,
    ScanResult,
    StaticFinding,
    codeshield_scan,
    codeshield_scan_many,
    codeshield_setup,
)
from sv_env_code_vulnerability.tasks import bundled_tasks
from sv_env_code_vulnerability.verify import static_components, verify
from sv_shared.tools import ToolResult, find_tool

INSECURE = """import hashlib
import os


def archive(folder):
    os.system("tar czf backup.tgz " + folder)


def fingerprint(data):
    return hashlib.md5(data).hexdigest()
"""
FIXED = """import hashlib
import subprocess


def archive(folder):
    subprocess.run(["tar", "czf", "backup.tgz", "--", folder], check=True)


def fingerprint(data):
    return hashlib.sha256(data).hexdigest()
"""


@pytest.fixture
def fresh(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """A private result cache, and the scanners set up again under this test's environment."""
    monkeypatch.setenv("SV_TOOL_CACHE", str(tmp_path / "cache"))
    scanning._tool_cache.cache_clear()
    scanning.semgrep_scanner.cache_clear()
    codeshield_setup.cache_clear()
    scanning._icd_regex_findings.cache_clear()
    yield tmp_path
    # Set up under this test's PATH and cache: later tests must set them up again.
    scanning._tool_cache.cache_clear()
    scanning.semgrep_scanner.cache_clear()
    codeshield_setup.cache_clear()
    detect_sandbox.cache_clear()


def _needs_codeshield():
    """The pinned codeshield must be in the tool environment (`make setup`): a missing one
    fails here instead of skipping unnoticed."""
    rules, _, why = codeshield_setup()
    assert rules is not None, f"codeshield unavailable ({why}): run `make setup` (.venv-tools)"
    return rules


def test_icd_flags_the_insecure_fixture_with_rule_ids_and_not_its_fix(fresh):
    rules = _needs_codeshield()
    assert rules.version == "1.0.1"
    found = codeshield_scan_many({"insecure.py": INSECURE, "fixed.py": FIXED})
    insecure, fixed = found["insecure.py"], found["fixed.py"]
    assert insecure.status == "ok" and insecure.version == "1.0.1"
    by_id = {f.id: f for f in insecure.findings}
    # One from ICD's Semgrep rules, one from its regex rules, both in the shared shape.
    assert set(by_id) == {"codeshield/insecure-os-system-use", "codeshield/insecure-md5-hash-usage"}
    assert by_id["codeshield/insecure-os-system-use"].line == 6
    assert by_id["codeshield/insecure-os-system-use"].message.startswith("CWE-78: ")
    assert by_id["codeshield/insecure-md5-hash-usage"].line == 10
    assert by_id["codeshield/insecure-md5-hash-usage"].severity == "medium"
    assert fixed.status == "ok" and fixed.findings == ()
    assert insecure.to_dict()["findings"][0]["id"].startswith("codeshield/")


def test_every_regex_match_counts_and_a_commented_copy_hides_nothing(fresh):
    _needs_codeshield()
    # ICD stops at a rule's first match and drops it when it is a comment: here that would
    # report nothing at all.
    source = "import hashlib\n# hashlib.md5( is weak\na = hashlib.md5(b'a')\nb = hashlib.md5(b'b')\n"
    scan = codeshield_scan_many({"m.py": source})["m.py"]
    assert [(f.id, f.line) for f in scan.findings] == [
        ("codeshield/insecure-md5-hash-usage", 3),
        ("codeshield/insecure-md5-hash-usage", 4),
    ]


def test_second_scan_of_the_same_content_is_a_cache_hit(fresh):
    _needs_codeshield()
    _, scanner, _ = codeshield_setup()
    first = asyncio.run(codeshield_scan("app.py", INSECURE))
    runs, hits = scanner.processes_run, scanner.cache.stats()["hits"]
    second = asyncio.run(codeshield_scan("other_name.py", INSECURE))
    assert second == first
    assert scanner.processes_run == runs, "the cached verdict must not start semgrep again"
    assert scanner.cache.stats()["hits"] == hits + 1
    assert codeshield_scan_many({"x.py": INSECURE})["x.py"] == first
    assert scanner.processes_run == runs


def test_missing_tool_environment_is_recorded_unavailable(fresh, monkeypatch: pytest.MonkeyPatch):
    empty = fresh / "empty-bin"
    empty.mkdir()
    monkeypatch.setenv("SV_TOOLS_BIN", str(empty))
    monkeypatch.setenv("PATH", str(empty))
    scan = codeshield_scan_many({"m.py": INSECURE})["m.py"]
    assert scan.status == "unavailable" and scan.findings == ()
    assert "semgrep binary not found" in scan.detail
    assert asyncio.run(codeshield_scan("m.py", INSECURE)) == scan
    info = provenance.tool_versions()["codeshield"]
    assert info == {"available": False, "why": scan.detail}


def test_semgrep_without_codeshield_beside_it_is_recorded_unavailable(fresh, monkeypatch: pytest.MonkeyPatch):
    real = find_tool("semgrep")
    assert real is not None, "the tool environment is missing: run `make setup` (.venv-tools)"
    folder = fresh / "bin"
    folder.mkdir()
    (folder / "semgrep").symlink_to(real)
    (folder / "python").symlink_to(sys.executable)  # this venv: no codeshield in it
    monkeypatch.setenv("SV_TOOLS_BIN", str(folder))
    scan = codeshield_scan_many({"m.py": INSECURE})["m.py"]
    assert scan.status == "unavailable"
    assert "codeshield is not installed" in scan.detail


def test_regex_rules_are_time_bounded_per_file(monkeypatch: pytest.MonkeyPatch):
    catastrophic = IcdRegexRule("slow", "CWE-1333", "medium", "backtracks", regex.compile(r"(a|aa)+$"))
    rules = CodeShieldRules("1.0.1", Path("."), (catastrophic,), Path("x.json"), {}, "h")
    monkeypatch.setattr(scanning, "ICD_REGEX_TIMEOUT_S", 0.2)
    clean_semgrep = ToolResult("semgrep", "1.182.0", "h")
    result = scanning._codeshield_result(rules, "a" * 64 + "!", clean_semgrep)
    assert result.status == "error" and "ran past" in result.detail
    semgrep_failed = ToolResult("semgrep", "1.182.0", "h", error="semgrep timed out after 120 s")
    assert scanning._codeshield_result(rules, "x = 1\n", semgrep_failed).status == "error"


def _scan(*ids: str, status: str = "ok") -> ScanResult:
    findings = tuple(StaticFinding("codeshield", i, "medium", n + 1, "") for n, i in enumerate(ids))
    return ScanResult("codeshield", status, findings, "1.0.1", "" if status == "ok" else "why")


BANDIT_CLEAN = ScanResult("bandit", "ok", (), "1.9.4")


def test_an_icd_finding_the_patch_keeps_costs_finding_fixed():
    fixed, no_new, reasons, detail = static_components(
        [BANDIT_CLEAN, _scan("insecure-md5-hash-usage")], [BANDIT_CLEAN, _scan("insecure-md5-hash-usage")], 1.0
    )
    assert (fixed, no_new) == (0.0, 1.0)
    assert detail["targets"] == ["codeshield/insecure-md5-hash-usage"]
    assert any("original findings remain" in r and "codeshield/insecure-md5-hash-usage" in r for r in reasons)
    # A new ICD finding on the patched module fails no_new_findings.
    _, no_new, reasons, _ = static_components([BANDIT_CLEAN, _scan()], [BANDIT_CLEAN, _scan("insecure-eval-use")], 1.0)
    assert no_new == 0.0 and any("new codeshield findings" in r for r in reasons)


def test_breaking_the_scanner_on_the_patched_module_gains_nothing():
    before = [BANDIT_CLEAN, _scan("insecure-os-system-use")]
    kept = static_components(before, [BANDIT_CLEAN, _scan("insecure-os-system-use")], 1.0)
    broken = static_components(before, [BANDIT_CLEAN, _scan(status="error")], 1.0)
    # The original's finding still counts (it is not dropped and replaced by the tests' 1.0).
    assert broken[0] == 0.0 and broken[1] == 0.0
    assert broken[0] + broken[1] <= kept[0] + kept[1]
    assert broken[3]["finding_fixed_basis"] == "static"


def test_an_unavailable_icd_neither_helps_nor_hurts():
    with_icd = static_components(
        [BANDIT_CLEAN, _scan(status="unavailable")], [BANDIT_CLEAN, _scan(status="unavailable")], 0.5
    )
    without = static_components([BANDIT_CLEAN], [BANDIT_CLEAN], 0.5)
    assert with_icd == without


def test_verify_records_icd_and_scores_a_patch_that_keeps_its_finding(fresh):
    _needs_codeshield()
    task = next(t for t in bundled_tasks() if t.id == "md5-password-hash")
    first = task.source.splitlines(keepends=True)[0]
    # A patch that only adds a comment: every test result stays, ICD's md5 finding remains.
    diff = f"--- a/{task.module}\n+++ b/{task.module}\n@@ -1 +1,2 @@\n+# reviewed\n {first}"
    result = verify(task, json.dumps({"diff": diff, "explanation": "comment"}), semgrep=False)
    icd = result.details["codeshield"]
    assert icd["original"]["status"] == "ok" and icd["patched"]["status"] == "ok"
    assert "codeshield/insecure-md5-hash-usage" in {f["id"] for f in icd["patched"]["findings"]}
    assert "codeshield/insecure-md5-hash-usage" in result.details["static"]["targets"]
    assert result.components["finding_fixed"] < 1.0
    assert any("codeshield/insecure-md5-hash-usage" in r for r in result.reasons)
