"""E3 synthetic tasks, proved with E3's own harness: each operator's mutant fails its
generated security tests in the bubblewrap sandbox while the clean module (the reference
fix applied) passes everything; Bandit/Semgrep see the weaknesses they can see."""

from __future__ import annotations

import dataclasses
import random
import shutil

import pytest

from sv_env_code_vulnerability import load_reward_settings
from sv_env_code_vulnerability import synthetic as s
from sv_env_code_vulnerability.patching import apply_patch
from sv_env_code_vulnerability.verify import run_tests

CASES = [(op, template.name) for op in s.OPERATORS for template in s.TEMPLATES.values() if op in template.operators]


@pytest.fixture(scope="module")
def tasks():
    rng = random.Random(1)
    out = []
    for i, (op, name) in enumerate(CASES):
        template = s.TEMPLATES[name]
        out.append(s.make_task(template, s.OPERATORS[op], rng.choice(template.variants), f"t{i}-{op}", rng))
    return out


@pytest.fixture(scope="module")
def checks(tasks):
    assert shutil.which("bwrap"), "bubblewrap is installed by `make setup`; E3's sandbox needs it"
    return s.validate_tasks(tasks)


def test_every_operator_yields_a_task_the_harness_proves(tasks, checks):
    assert {t.meta["scenario"] for t in tasks} == set(s.OPERATORS)
    for task, check in zip(tasks, checks):
        assert check.reason is None, (task.id, check.reason, check.detail)
        functional, security = check.detail["mutant_tests"]["functional"], check.detail["mutant_tests"]["security"]
        assert functional.split("/")[0] == functional.split("/")[1]  # the mutant still works ...
        assert security.split("/")[0] != security.split("/")[1]  # ... but fails a security test
        assert check.detail["reference_fix"] == dict.fromkeys(check.detail["reference_fix"], 1.0)
        assert check.detail["sandbox"] == "bwrap"


def test_mutant_fails_and_original_passes_in_the_sandbox(tasks):
    settings = load_reward_settings()
    task = next(t for t in tasks if t.meta["scenario"] == "shell_true")
    clean = apply_patch(task.files, task.fix_diff).files[task.module]
    mutant_run = run_tests(task, task.files, settings)
    clean_run = run_tests(task, {task.module: clean}, settings)
    assert mutant_run.status == clean_run.status == "ok"
    assert mutant_run.security_passed == 0 and mutant_run.functional_passed == mutant_run.functional_total
    assert clean_run.security_passed == clean_run.security_total > 0
    assert "shell=True" in task.source and "shell=True" not in clean


def test_scanners_see_injection_but_not_logic_bugs(tasks, checks):
    for task, check in zip(tasks, checks):
        if task.meta["scenario"] == "string_built_sql":
            assert {"bandit/B608", "semgrep/e3-sql-string-build"} <= set(check.detail["mutant_findings"])
        if task.meta["scenario"] == "shell_true":
            assert {"bandit/B602", "semgrep/e3-shell-true"} <= set(check.detail["mutant_findings"])
        row = s.task_row(task, check)
        assert row["meta"]["difficulty"] == (1 if task.meta["scenario"] in ("string_built_sql", "shell_true") else 2)


def test_a_task_whose_tests_miss_the_weakness_is_rejected(tasks):
    task = next(t for t in tasks if t.meta["scenario"] == "off_by_one")
    toothless = dataclasses.replace(task, id="toothless", security_tests="def test_nothing():\n    assert True\n")
    [check] = s.validate_tasks([toothless], semgrep=False)
    assert check.reason == "mutant passes every security test: the tests do not catch the weakness"


def test_operators_rewrite_only_the_targeted_function():
    template = s.TEMPLATES["sql_lookup"]
    variant = template.variants[0]
    task = s.make_task(template, s.OPERATORS["string_built_sql"], variant, "x", random.Random(3))
    changed = [
        line
        for line in task.fix_diff.splitlines()
        if line.startswith(("+", "-")) and not line.startswith(("+++", "---"))
    ]
    assert len(changed) == 2 and all("SELECT" in line for line in changed)  # the INSERT keeps its parameters
    with pytest.raises(s.NotApplicable):
        s.mutate("def f(x):\n    return x\n", "f", s.OPERATORS["shell_true"], random.Random(0))
