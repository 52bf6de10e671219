"""sv_shared.tools: findings, the content-addressed cache, and the batched scanners run as
the real CLIs from the project's tool environment (.venv-tools, installed by `make setup`)."""

from __future__ import annotations

import asyncio
import functools
import json
from pathlib import Path

import pytest

from sv_shared.tools import Finding, Scanner, ToolCache, ToolResult, cache_key, find_tool, normalize_severity

RULES = """
rules:
- id: k8s-privileged
  languages: [yaml]
  severity: ERROR
  message: privileged container
  pattern: "privileged: true"
- id: py-shell-true
  languages: [python]
  severity: WARNING
  message: shell=True
  pattern: subprocess.$F(..., shell=True, ...)
"""
PRIVILEGED = "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n  - name: c\n    image: nginx:1.25\n    securityContext: {privileged: true}\n"
CLEAN = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\ndata: {a: b}\n"
SHELL = "import subprocess\n\ndef run(cmd):\n    return subprocess.run(cmd, shell=True)\n"


def needs_tools(test):
    """The real CLIs must be there (`make setup` installs .venv-tools): a missing tool
    environment fails these tests instead of skipping them unnoticed."""

    @functools.wraps(test)
    def run(*args, **kwargs):
        assert find_tool("semgrep") is not None, "the tool environment is missing: run `make setup` (.venv-tools)"
        return test(*args, **kwargs)

    return run


@pytest.fixture
def rules(tmp_path: Path) -> Path:
    path = tmp_path / "rules" / "rules.yaml"
    path.parent.mkdir()
    path.write_text(RULES)
    return path.parent


def test_severity_words_of_every_tool_map_onto_three_levels():
    assert [normalize_severity(w) for w in ("ERROR", "WARNING", "INFO", "HIGH", "Medium", "low", "CRITICAL")] == [
        "high",
        "medium",
        "low",
        "high",
        "medium",
        "low",
        "high",
    ]
    assert normalize_severity(None) == "medium" and normalize_severity("weird", "low") == "low"


def test_cache_keys_change_with_tool_version_rules_suffix_and_content(tmp_path: Path):
    base = cache_key("semgrep", "1.0", "abc", ".yaml", "x: 1")
    assert base == cache_key("semgrep", "1.0", "abc", ".yaml", "x: 1")
    others = [
        cache_key("checkov", "1.0", "abc", ".yaml", "x: 1"),
        cache_key("semgrep", "1.1", "abc", ".yaml", "x: 1"),
        cache_key("semgrep", "1.0", "abd", ".yaml", "x: 1"),
        cache_key("semgrep", "1.0", "abc", ".yml", "x: 1"),
        cache_key("semgrep", "1.0", "abc", ".yaml", "x: 2"),
    ]
    assert len({base, *others}) == 6


def test_cache_round_trip_and_hit_rate(tmp_path: Path):
    cache = ToolCache(tmp_path)
    result = ToolResult("opa", "1", "h", (Finding("opa", "r1", "high", 3, "m"),))
    assert cache.lookup("opa", "1", "h", ".yaml", "doc") is None
    cache.store(result, ".yaml", "doc")
    hit = cache.lookup("opa", "1", "h", ".yaml", "doc")
    assert hit == result and hit.cached and hit.findings[0].id == "opa/r1"
    assert cache.stats() == {"hits": 1, "misses": 1, "hit_rate": 0.5}
    assert ToolCache(tmp_path).lookup("opa", "1", "h", ".yaml", "doc") == result  # another handle, same file


def test_a_missing_tool_is_reported_unavailable_never_replaced(tmp_path: Path, monkeypatch):
    monkeypatch.setenv("SV_TOOLS_BIN", str(tmp_path))
    monkeypatch.setenv("PATH", str(tmp_path))
    scanner = Scanner("kubelinter")
    assert not scanner.available and scanner.version == "unavailable"
    result = scanner.scan_many({"a.yaml": PRIVILEGED})["a.yaml"]
    assert not result.ok and "kube-linter" in result.error and result.findings == ()


def test_semgrep_without_local_rules_is_refused():
    with pytest.raises(ValueError, match="online registry"):
        Scanner("semgrep")


@needs_tools
def test_semgrep_scans_a_batch_in_one_process_and_caches_each_file(tmp_path: Path, rules: Path):
    cache = ToolCache(tmp_path / "cache")
    scanner = Scanner("semgrep", rules=rules, cache=cache)
    files = {"pod.yaml": PRIVILEGED, "cm.yaml": CLEAN, "run.py": SHELL}
    results = scanner.scan_many(files)
    assert scanner.processes_run == 1
    assert [f.id for f in results["pod.yaml"].findings] == ["semgrep/k8s-privileged"]
    assert results["pod.yaml"].findings[0].severity == "high" and results["pod.yaml"].findings[0].line == 8
    assert results["cm.yaml"].ok and results["cm.yaml"].findings == ()
    assert [(f.id, f.severity) for f in results["run.py"].findings] == [("semgrep/py-shell-true", "medium")]
    again = scanner.scan_many(files)
    assert scanner.processes_run == 1 and all(r.cached for r in again.values())
    assert {k: r.findings for k, r in again.items()} == {k: r.findings for k, r in results.items()}
    # An edited rule file is a new rule set: nothing cached applies.
    (rules / "rules.yaml").write_text(RULES.replace("privileged container", "privileged!"))
    edited = Scanner("semgrep", rules=rules, cache=cache)
    assert edited.ruleset_hash != scanner.ruleset_hash
    assert not any(r.cached for r in edited.scan_many({"pod.yaml": PRIVILEGED}).values())


@needs_tools
def test_concurrent_async_callers_share_one_process(tmp_path: Path, rules: Path):
    scanner = Scanner("semgrep", rules=rules, cache=ToolCache(tmp_path))

    async def many():
        return await asyncio.gather(*(scanner.scan(f"f{i}.yaml", PRIVILEGED + f"# {i}\n") for i in range(12)))

    results = asyncio.run(many())
    assert scanner.processes_run == 1
    assert all([f.id for f in r.findings] == ["semgrep/k8s-privileged"] for r in results)
    # Same content twice in one batch is fine, and a second loop reuses the cache.
    assert asyncio.run(scanner.scan("g.yaml", PRIVILEGED + "# 3\n")).cached


@needs_tools
def test_bandit_and_checkov_findings(tmp_path: Path):
    bandit = Scanner("bandit", cache=ToolCache(tmp_path))
    out = bandit.scan_many({"run.py": SHELL, "broken.py": "def (:\n"})
    assert "bandit/B602" in out["run.py"].ids
    assert out["broken.py"].error and "bandit" in out["broken.py"].error
    checkov = Scanner("checkov")
    pod = checkov.scan_many({"pod.yaml": PRIVILEGED})["pod.yaml"]
    assert "checkov/CKV_K8S_16" in pod.ids  # privileged container
    assert {f.severity for f in pod.findings if f.rule == "CKV_K8S_16"} == {"high"}
    assert checkov.version[0].isdigit()


@needs_tools
def test_oversized_files_are_refused_without_running_the_tool(tmp_path: Path, rules: Path):
    scanner = Scanner("semgrep", rules=rules)
    result = scanner.scan_many({"huge.yaml": "a: b\n" * 600_000})["huge.yaml"]
    assert scanner.processes_run == 0 and "larger than" in result.error


def test_results_serialise_for_provenance():
    result = ToolResult("semgrep", "1.2", "h", (Finding("semgrep", "r", "low", 1, "m"),), None)
    assert ToolResult.from_dict(json.loads(json.dumps(result.to_dict()))) == result


@needs_tools
def test_threads_with_their_own_event_loops_share_a_scanner(tmp_path: Path, rules: Path):
    """A baseline running `asyncio.run` in a worker thread while the eval's loop scans too:
    each loop's callers are batched apart, so every caller is answered (no lost wake-ups)."""
    import concurrent.futures

    scanner = Scanner("semgrep", rules=rules, cache=ToolCache(tmp_path), batch_window_s=0.2)

    def in_own_loop(i: int):
        async def two():
            return await asyncio.gather(
                *(scanner.scan(f"t{i}-{j}.yaml", PRIVILEGED + f"# {i}-{j}\n") for j in range(2))
            )

        return asyncio.run(two())

    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        results = [r for batch in pool.map(in_own_loop, range(4)) for r in batch]
    assert len(results) == 8 and all("semgrep/k8s-privileged" in r.ids for r in results)
