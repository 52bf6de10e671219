"""E3's find-and-fix tasks (real modules without tests): the module check (compiles, keeps its
public names; parsed in the sandbox, never run), the rewards it gives a fix, a broken patch
and a gutted module, the oracle that neutralises flagged statements, and the readers of
Bandit's expected findings and CyberSecEval's annotated rule tests."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from sv_env_code_vulnerability import baseline
from sv_env_code_vulnerability.corpora import bandit_examples, bandit_expectations, icd_rule_tests
from sv_env_code_vulnerability.module_check import describe
from sv_env_code_vulnerability.tasks import VulnTask, _validate, render_prompt, task_from_row
from sv_env_code_vulnerability.verify import verify
from sv_shared.corpora import SourceSpec

MODULE = '''import os

SECRET_NAME = "token"


def run(expression):
    """Evaluate a user's expression."""
    return eval(expression)


class Shell:
    def call(self, command):
        os.system("ls " + command)


if os.name == "posix":
    SEPARATOR = "/"
'''


def _task(source: str = MODULE) -> VulnTask:
    return VulnTask("real-1", "unknown", "a real module", "calc.py", source, "", "", "", {"tests": "none"})


def _reply(old: str, new: str) -> str:
    import difflib

    diff = "".join(difflib.unified_diff(old.splitlines(True), new.splitlines(True), "a/calc.py", "b/calc.py"))
    return json.dumps({"diff": diff, "explanation": "x"})


def test_the_module_check_reads_public_names_without_running_anything():
    verdict = describe(MODULE, "calc.py")
    assert verdict == {"compiles": True, "error": None, "names": ["SECRET_NAME", "SEPARATOR", "Shell", "run"]}
    assert describe("import pickle\n_private = 1\n__all__ = ['a']\na = 1\nb = 2\n")["names"] == ["a"]
    broken = describe("def f(:\n    pass\n", "bad.py")
    assert not broken["compiles"] and broken["error"].startswith("SyntaxError") and broken["names"] == []
    assert not describe("print 'python 2'\n")["compiles"]


def test_a_task_without_tests_is_valid_and_its_prompt_names_no_weakness():
    task = _task()
    assert not task.has_tests and _validate(task, "row") == []
    prompt = render_prompt(task)
    assert "CWE" not in prompt and "There are no tests" in prompt and "File: calc.py\n```python\n" in prompt
    with_tests = VulnTask(**{**task.__dict__, "functional_tests": "def test_x(): pass\n"})
    assert _validate(with_tests, "row") == ["row: a task whose meta says tests: none has test files"]
    plain = task_from_row(
        {
            **{k: getattr(task, k) for k in ("id", "module", "source", "fix_diff")},
            "functional_tests": "",
            "security_tests": "",
        },
        {},
    )
    assert plain.has_tests and "row: 'functional_tests' is missing or empty" in _validate(plain, "row")


def test_a_fix_scores_full_a_broken_or_gutted_module_scores_nothing_past_format():
    task = _task()
    fixed = MODULE.replace("return eval(expression)", "import ast\n    return ast.literal_eval(expression)")
    fixed = fixed.replace(
        'os.system("ls " + command)', 'import subprocess\n        subprocess.run(["ls", "--", command])'
    )
    good = verify(task, _reply(MODULE, fixed), semgrep=False, codeshield=False)
    assert good.components["functional"] == good.components["finding_fixed"] == good.components["security"] == 1.0
    assert good.components["no_new_findings"] == 1.0 and good.details["tests"] == "none"
    assert good.details["module_check"]["status"] == "ok" and good.details["static"]["security_basis"] == "rescan"
    assert good.details["module_names"] == {"original": ["SECRET_NAME", "SEPARATOR", "Shell", "run"], "missing": []}

    broken = verify(
        task,
        _reply(MODULE, MODULE.replace("def run(expression):", "def run(expression:")),
        semgrep=False,
        codeshield=False,
    )
    assert broken.components["format"] == 1.0 and sum(broken.components.values()) == 1.0
    assert any("does not compile" in reason for reason in broken.reasons)

    gutted = MODULE.split("class Shell")[0].replace("    return eval(expression)\n", "    return None\n")
    removed = verify(task, _reply(MODULE, gutted), semgrep=False, codeshield=False)
    assert removed.components["functional"] == 0.0 and sum(removed.components.values()) == 1.0
    assert "public names gone: ['SEPARATOR', 'Shell']" in removed.reasons


def test_the_oracle_neutralises_flagged_statements_where_a_whole_line_is_theirs(monkeypatch):
    source = (
        "import os\n\n\ndef run(expression):\n    value = eval(expression)\n    return eval(value)\n\n\n"
        'def tmp(path="/tmp/x"):\n    if os.name: os.system(path)\n    os.system(\n        path\n    )\n'
    )
    monkeypatch.setattr(baseline, "_flagged_lines", lambda name, text: {5, 6, 9, 10, 12})
    fixed, lines = baseline.neutralise_flagged("m.py", source)
    assert lines == [5, 6, 11]  # the def header (9) and the shared line (10) are left as they are
    assert "    value = None\n    return None\n" in fixed and "    pass\n" in fixed and "        path\n" not in fixed
    assert describe(fixed)["compiles"] and describe(fixed)["names"] == describe(source)["names"]
    reply = json.loads(
        baseline.oracle_reply(render_prompt(_task(source).__class__(**{**_task(source).__dict__, "module": "m.py"})))
    )
    assert reply["diff"].startswith("--- a/m.py") and "neutralised" in reply["explanation"]


def _spec(source_id: str, normalizer: str) -> SourceSpec:
    return SourceSpec(source_id, ("e3",), "toy", "sdist", "MIT", normalizer, {}, test_only=True)


EXPECTED = """
class FunctionalTests:
    def test_eval(self):
        medium = 2
        expect = {"SEVERITY": {"UNDEFINED": 0, "LOW": 0, "MEDIUM": medium, "HIGH": 1}}
        self.check_example("eval.py", expect)
        self.check_example("eval.py", {"SEVERITY": {"MEDIUM": 9}})

    def test_low_only(self):
        expect = {"SEVERITY": {"LOW": 1, "MEDIUM": 0, "HIGH": 0}}
        self.check_example("low.py", expect)

    def test_changed(self):
        test._config = {"skips": []}
        self.check_example("changed.py", {"SEVERITY": {"MEDIUM": 3}})

    def test_profile(self):
        expect = {"SEVERITY": {"MEDIUM": 5}}
        with self.with_test_set(None):
            self.check_example("profile.py", expect)

    def test_nosec(self):
        self.check_example("nosec.py", {"SEVERITY": {"MEDIUM": 1}}, ignore_nosec=True)
"""


def test_bandit_expectations_are_read_for_its_default_configuration_only():
    assert bandit_expectations(EXPECTED) == {
        "eval.py": {"undefined": 0, "low": 0, "medium": 2, "high": 1},
        "low.py": {"low": 1, "medium": 0, "high": 0},
    }


def test_bandit_examples_become_tasks_when_a_finding_to_fix_is_expected():
    rows = [
        {"path": "tests/functional/test_functional.py", "text": EXPECTED, "_split": "expected"},
        {"path": "examples/eval.py", "text": "x = eval(input())\n", "_split": "examples"},
        {"path": "examples/low.py", "text": "assert True\n", "_split": "examples"},
        {"path": "examples/nosec.py", "text": "eval(input())  # nosec\n", "_split": "examples"},
    ]
    frame = pd.DataFrame([{**row, "_file": f"pkg:{row['path']}", "_line": 1} for row in rows])
    result = bandit_examples(_spec("bandit_toy", "e3_bandit_examples"), frame)
    assert result.n_filtered == 2 and not result.rejects
    (task,) = [item.record for item in result.items]
    assert task["module"] == "eval.py" and task["cwe"] == "unknown" and task["fix_diff"] == ""
    assert task["meta"]["tests"] == "none" and task["meta"]["test_source"] == "bandit_toy"
    assert task["meta"]["bandit_expected"]["medium"] == 2 and task["meta"]["public_names"] == ["x"]
    assert not task_from_row(task, task["meta"]).has_tests


def test_icd_rule_tests_lose_their_annotations_and_keep_them_as_line_labels():
    test_file = (
        "import pickle\n\n\ndef test(param):\n    # ruleid: unsafe-pickle-use\n    pickle.loads(param)\n"
        '    # ok: unsafe-pickle-use\n    pickle.loads("s")\n    # ruleid: unsafe-pickle-use\n    pickle.loads(\n        param)\n'
    )
    rule = "rules:\n  - id: unsafe-pickle-use\n    metadata:\n      cwe_id: CWE-502\n"
    base = "codeshield/rules/semgrep/python/"
    frame = pd.DataFrame(
        [
            {"path": base + "pickle_use.py", "text": test_file, "_split": "tests", "_file": "w", "_line": 1},
            {"path": base + "pickle_use.yaml", "text": rule, "_split": "rules", "_file": "w", "_line": 2},
            {"path": base + "plain.py", "text": "x = 1\n", "_split": "tests", "_file": "w", "_line": 3},
            {"path": base + "nocwe.py", "text": "# ruleid: r\neval(x)\n", "_split": "tests", "_file": "w", "_line": 4},
        ]
    )
    result = icd_rule_tests(_spec("icd_toy", "e3_icd_rule_tests"), frame)
    assert result.n_filtered == 1 and [r["reason"] for r in result.rejects] == ["no rule with a cwe_id for nocwe"]
    (task,) = [item.record for item in result.items]
    assert "ruleid" not in task["source"] and "# ok" not in task["source"] and task["cwe"] == "CWE-502"
    lines = task["source"].splitlines()
    assert task["meta"]["lines"] == {"vulnerable": [5, 7], "ok": [6]}
    assert (
        lines[4].strip() == "pickle.loads(param)"
        and lines[6].strip() == "pickle.loads("
        and lines[5].strip() == 'pickle.loads("s")'
    )
    assert task["meta"]["rules"] == ["unsafe-pickle-use"]


@pytest.mark.parametrize("text", ["\x00binary", "x" * 300_000])
def test_an_unusable_example_is_a_reject_or_left_out_never_a_crash(text):
    rows = [
        {
            "path": "tests/functional/test_functional.py",
            "text": EXPECTED,
            "_split": "expected",
            "_file": "f",
            "_line": 1,
        },
        {"path": "examples/eval.py", "text": text, "_split": "examples", "_file": "f", "_line": 2},
    ]
    result = bandit_examples(_spec("bandit_toy", "e3_bandit_examples"), pd.DataFrame(rows))
    assert not result.items and (result.rejects or result.n_filtered)
