"""E3 bundled tasks: each vulnerable module passes its functional tests and FAILS its
security tests; with the reference fix.diff applied, both pass (in the sandbox)."""

from __future__ import annotations

import concurrent.futures
import json
import re
import subprocess
import sys

from sv_env_code_vulnerability.config import load_reward_settings
from sv_env_code_vulnerability.patching import apply_diff
from sv_env_code_vulnerability.scanning import bandit_scan
from sv_env_code_vulnerability.tasks import (
    SYSTEM_PROMPT,
    bundled_tasks,
    load_tasks,
    prompt_file,
    render_prompt,
    task_to_row,
)
from sv_env_code_vulnerability.verify import count_tests, run_tests

CWES = {"CWE-89", "CWE-78", "CWE-22", "CWE-502", "CWE-330", "CWE-798", "CWE-327", "CWE-95", "CWE-377"}


def test_bundled_tasks_cover_the_cwes_and_are_marked_samples():
    tasks = bundled_tasks()
    assert len(tasks) >= 12
    assert CWES <= {t.cwe for t in tasks}
    assert len({t.id for t in tasks}) == len(tasks)
    for task in tasks:
        assert task.meta["sample"] is True
        assert count_tests(task.functional_tests) >= 1 and count_tests(task.security_tests) >= 1
        prompt = render_prompt(task)
        assert task.module in prompt and task.source in prompt and task.cwe in prompt
        assert "test_security" not in prompt  # the hidden tests are never shown


def test_the_answer_format_is_described_not_shown_with_placeholders():
    """A schema shown as `{"diff": "<unified diff>", ...}` was copied verbatim by small models;
    the prompt describes the fields instead and shows only the diff's real first line."""
    task = bundled_tasks()[0]
    prompt = render_prompt(task)
    outside_file = prompt.replace(task.source, "")
    for text in (SYSTEM_PROMPT, outside_file):
        assert not re.search(r'"<[^"<>]*>"', text), text
        assert '"diff"' in text and '"explanation"' in text
    assert f'"--- a/{task.module}\\n+++ b/{task.module}\\n@@ "' in prompt
    assert prompt_file(prompt) == (task.module, task.source)  # what the baselines read back


def test_every_task_vulnerable_fails_security_and_fix_passes_everything():
    settings = load_reward_settings()
    tasks = bundled_tasks()

    def both(task):
        fixed = apply_diff(task.files, task.fix_diff)
        return run_tests(task, task.files, settings), run_tests(task, fixed, settings)

    with concurrent.futures.ThreadPoolExecutor(max_workers=4) as pool:
        outcomes = list(pool.map(both, tasks))
    for task, (before, after) in zip(tasks, outcomes):
        assert before.status == "ok", (task.id, before.run.output_tail)
        assert before.functional_passed == before.functional_total, (task.id, "functional on original")
        assert before.security_passed < before.security_total, (task.id, "security must fail on original")
        assert after.status == "ok", (task.id, after.run.output_tail)
        assert after.functional_passed == after.functional_total, (task.id, after.run.output_tail)
        assert after.security_passed == after.security_total, (task.id, after.run.output_tail)


def test_expected_bandit_findings_are_on_the_original():
    for task in bundled_tasks():
        found = bandit_scan(task.module, task.source).counts
        for finding_id in task.meta["expected_findings"]:
            assert found[finding_id] >= 1, (task.id, finding_id)


def test_jsonl_dataset_roundtrip_and_errors(tmp_path):
    path = tmp_path / "tasks.jsonl"
    path.write_text("".join(json.dumps(task_to_row(t)) + "\n" for t in bundled_tasks()[:2]))
    assert [t.id for t in load_tasks(path)] == [t.id for t in bundled_tasks()[:2]]
    bad = tmp_path / "bad.jsonl"
    bad.write_text(
        '{"id": "x"}\nnot json\n' + json.dumps({**task_to_row(bundled_tasks()[0]), "module": "../x.py"}) + "\n"
    )
    import pytest

    from sv_shared.jsonl import DatasetError

    with pytest.raises(DatasetError) as info:
        load_tasks(bad)
    assert "bad.jsonl:1" in str(info.value) and "bad.jsonl:2" in str(info.value) and "bad.jsonl:3" in str(info.value)


def test_bandit_is_first_imported_under_the_lock_that_serializes_its_scans(tmp_path):
    # A fresh interpreter, so that bandit's first import happens inside bandit_scan. A
    # finder notes whether the importing thread holds the lock when bandit loads: an import
    # outside it can compile modules while another thread's scan runs ast.parse.
    script = tmp_path / "probe.py"
    script.write_text(
        "import sys\n"
        "from sv_env_code_vulnerability import scanning\n"
        "held = []\n"
        "class Probe:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'bandit.core.manager':\n"
        "            held.append(scanning.AST_LOCK._is_owned())\n"
        "        return None\n"
        "sys.meta_path.insert(0, Probe())\n"
        "assert 'bandit' not in sys.modules\n"
        "result = scanning.bandit_scan('m.py', 'import subprocess\\nsubprocess.call(\"ls\", shell=True)\\n')\n"
        "print(held, result.status, sorted(result.counts))\n"
    )
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split()[0] == "[True]", done.stdout
    assert " ok " in done.stdout and "B602" in done.stdout, done.stdout
