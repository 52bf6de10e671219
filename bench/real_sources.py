"""How the real test sources of E2 and E3 agree with the labels their authors wrote, on every
file (not the demo's capped few): the figures docs/real-test-sources.md cites.

- Terrascan's 76 resources: E2's tools' verdict on each (any finding = misconfigured) against
  the folder the fixture sits in (fail / success), per tool.
- CyberSecEval's 5 Python rule tests: the lines each rescanner flags (ICD's rules, E3's
  Semgrep rules, Bandit at medium or high) against the `# ruleid:` / `# ok:` line labels.
- Bandit's 56 example tasks: the medium and high findings of E3's Bandit (1.9.4, in-process,
  `# nosec` honoured here as in Bandit's own tests; E3's rescans ignore it) against the counts
  Bandit's functional tests expect.

    python bench/real_sources.py [--write]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import sys
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.record import bench_record, write_record


def _items(source_id: str, env: str) -> list[dict[str, Any]]:
    from sv_dagster.core.data.corpora import load_corpus, load_sources, resolve_location
    from sv_dagster.core.data.corpora.normalize import normalise

    spec = dataclasses.replace(load_sources()[source_id], test_max_rows=None)
    with tempfile.TemporaryDirectory() as tmp:
        loaded = load_corpus(spec, resolve_location(spec), cache_dir=Path(tmp))
    return [item.record for item in normalise(spec, loaded.frame, env).items]


def terrascan() -> dict[str, Any]:
    from sv_env_config_verification.tools import default_suite

    rows = _items("terrascan_infrastructure", "e2")
    files = {f"{i:02d}-{row['filename']}": row for i, row in enumerate(rows)}
    scanned = default_suite().scan_many({name: row["content"] for name, row in files.items()})
    cells: Counter[str] = Counter()
    by_tool: Counter[str] = Counter()
    disagree: dict[str, list[str]] = {"fail folder, no tool finding": [], "success folder, a tool finding": []}
    errors = []
    for name, row in files.items():
        results = scanned[name]
        errors += [f"{name}: {tool}: {r.error}" for tool, r in results.items() if r.error]
        flagged = {tool for tool, r in results.items() if r.findings}
        by_tool.update(f"{tool} flags ({'fail' if row['clean'] is False else 'success'} folder)" for tool in flagged)
        folder = "fail" if row["clean"] is False else "success"
        verdict = "misconfigured" if flagged else "clean"
        cells[f"{folder} folder, tools {verdict}"] += 1
        address = row["filename"].removesuffix(".tf")
        if folder == "fail" and not flagged:
            disagree["fail folder, no tool finding"].append(address)
        if folder == "success" and flagged:
            ids = sorted({f.id for r in results.values() for f in r.findings})
            disagree["success folder, a tool finding"].append(f"{address} ({', '.join(ids)})")
    agree = cells["fail folder, tools misconfigured"] + cells["success folder, tools clean"]
    folders = Counter("fail" if row["clean"] is False else "success" for row in files.values())
    return {
        "n": len(files),
        "by_folder": dict(sorted(folders.items())),
        "agree": agree,
        "cells": dict(sorted(cells.items())),
        "flagged_by_tool": dict(sorted(by_tool.items())),
        "disagreements": disagree,
        "tool_errors": errors,
        "tools": {name: info.get("version") for name, info in default_suite().versions().items()},
    }


def icd() -> dict[str, Any]:
    from sv_env_code_vulnerability.scanning import bandit_scan, codeshield_scan_many, semgrep_scan_many

    tasks = _items("icd_rule_tests", "e3")
    sources = {t["module"]: t["source"] for t in tasks}
    scans = {
        "icd": codeshield_scan_many(sources),
        "semgrep (E3's rules)": semgrep_scan_many(sources),
        "bandit (medium+)": {name: bandit_scan(name, text) for name, text in sources.items()},
    }
    out: dict[str, Any] = {
        "files": len(tasks),
        "vulnerable_lines": sum(len(t["meta"]["lines"]["vulnerable"]) for t in tasks),
        "ok_lines": sum(len(t["meta"]["lines"]["ok"]) for t in tasks),
    }
    for scanner, results in scans.items():
        hits = false_alarms = 0
        for t in tasks:
            scan = results[t["module"]]
            assert scan.status == "ok", (scanner, t["module"], scan.detail)
            lines = {f.line for f in scan.findings if f.severity != "low"}
            hits += len(set(t["meta"]["lines"]["vulnerable"]) & lines)
            false_alarms += len(set(t["meta"]["lines"]["ok"]) & lines)
        out[scanner] = {"vulnerable_lines_flagged": hits, "ok_lines_flagged": false_alarms}
    return out


def bandit() -> dict[str, Any]:
    from bandit.core import config as b_config
    from bandit.core import manager as b_manager

    logging.getLogger("bandit").setLevel(logging.ERROR)
    tasks = _items("bandit_examples", "e3")
    exact = 0
    differ = []
    for task in tasks:
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / task["module"]
            path.write_text(task["source"], encoding="utf-8")
            manager = b_manager.BanditManager(b_config.BanditConfig(), "file", quiet=True, ignore_nosec=False)
            manager.discover_files([str(path)])
            manager.run_tests()
            found = Counter(str(issue.severity).lower() for issue in manager.get_issue_list())
        expected = task["meta"]["bandit_expected"]
        if all(found.get(level, 0) == expected.get(level, 0) for level in ("medium", "high")):
            exact += 1
        else:
            differ.append(f"{task['meta']['path']}: expected {expected}, found {dict(found)}")
    return {"examples": len(tasks), "medium_and_high_counts_as_expected": exact, "differ": differ}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="write bench/results/<date>-real-sources.json")
    args = parser.parse_args()
    results = {"terrascan": terrascan(), "icd_rule_tests": icd(), "bandit_examples": bandit()}
    record = bench_record("python bench/real_sources.py --write", results)
    print(json.dumps(record, indent=2))
    if args.write:
        print(f"wrote {write_record(record, 'real-sources')}")


if __name__ == "__main__":
    main()
