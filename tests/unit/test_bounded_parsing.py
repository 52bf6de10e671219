"""Every parser of untrusted input is bounded: hostile YAML, HCL, JSON, diffs and emails are
refused by a pre-check before the expensive parser sees them, or by a worker process's
deadline, and refusing one never costs the example scored beside it its reward.

No timings are asserted: each refusal is shown to come from the bound itself (the parser it
guards is never called, or the error names the limit), which is what keeps it fast."""

from __future__ import annotations

import asyncio
import json
import os
import random
import time
from pathlib import Path

import pandas as pd
import pytest
import yaml

import sv_env_code_vulnerability.patching as e3_patching
import sv_env_config_verification.inputs as e2_inputs
import sv_env_config_verification.patching as e2_patching
import sv_env_config_verification.synthetic as e2_synthetic
import sv_env_phishing_detection.corpora as e4_corpora
import sv_env_phishing_detection.rfc822 as e4_rfc822
from sv_dagster.core.evals.runner import score_row
from sv_env_config_verification import (
    ConfigVerificationTaskset,
    ConfigVerificationTasksetConfig,
    bundled_examples,
    oracle_reply,
    parse_completion,
)
from sv_env_config_verification.dataset import ConfigExample
from sv_env_config_verification.inputs import InputError, load_terraform, load_yaml_documents
from sv_shared.bounded import InputRefused, ParserFailed, find_block, run_bounded
from sv_shared.corpora import LabelSpec, SourceSpec
from sv_shared.jsonl import DatasetError, json_objects, read_examples
from sv_shared.parsing import MAX_REPLY_CHARS, extract_json_object, parse_label_answer

DEPTH = 100_000
FLOW_YAML = "[" * DEPTH + "]" * DEPTH
BLOCK_YAML = "- " * DEPTH + "x\n"  # each "- " opens a block sequence one column deeper
INDENTED_YAML = "".join(f"{'  ' * i}k{i}:\n" for i in range(150)) + "  " * 150 + "v\n"
FIFTY_MB = 50 * 1024 * 1024


@pytest.fixture
def pure_yaml_never_sees(monkeypatch):
    """Fail if PyYAML's pure-Python loader (quadratic on deep flow nesting) is handed a
    document holding any of the texts registered here; libyaml's C parser may read them."""
    forbidden: set[str] = {"[" * 1_000, "- " * 1_000, "{a: " * 1_000}
    original = yaml.SafeLoader.__init__

    def guarded(self, stream):
        if isinstance(stream, str) and any(text in stream for text in forbidden):
            raise AssertionError("the pure-Python YAML parser was handed a hostile document")
        original(self, stream)

    monkeypatch.setattr(yaml.SafeLoader, "__init__", guarded)
    return forbidden


# --- YAML ----------------------------------------------------------------------------------


@pytest.mark.parametrize("text", [FLOW_YAML, BLOCK_YAML, "{a: " * DEPTH + "}" * DEPTH, INDENTED_YAML])
def test_deep_yaml_is_refused_by_the_depth_precheck(text, pure_yaml_never_sees):
    pure_yaml_never_sees.add(text)
    with pytest.raises(InputError, match=r"YAML nested deeper than 100 levels \(line \d+\)"):
        load_yaml_documents(text)


def test_yaml_at_the_depth_limit_still_parses():
    value = load_yaml_documents("a: " + "[" * 99 + "]" * 99)[0].value
    depth = 0
    while isinstance(value, (dict, list)):
        depth += 1
        if not value:
            break
        value = next(iter(value.values())) if isinstance(value, dict) else value[0]
    assert depth == 100


def test_yaml_libyaml_rejects_is_judged_by_the_pure_parser_within_the_same_limit():
    # libyaml refuses unknown directives, PyYAML skips them: such a file is read as before,
    # and the depth limit holds on that path too.
    assert load_yaml_documents("%FOO bar\n---\na: [1, 2]\n")[0].value == {"a": [1, 2]}
    with pytest.raises(InputError, match="nested deeper than 100 levels"):
        load_yaml_documents("%FOO bar\n--- " + FLOW_YAML)


def test_many_yaml_documents_parse_like_one_loader_per_document():
    text = "".join(f"---\nkind: Pod\nmetadata: {{name: p{i}, at: 2024-01-0{1 + i % 9}}}\n" for i in range(300))
    docs = load_yaml_documents(text)
    assert [d.value for d in docs] == list(yaml.safe_load_all(text))
    assert [d.line for d in docs] == [2 + 3 * i for i in range(300)]


# --- E2 scoring: a hostile file or reply next to a normal example ----------------------------


class _Taskset(ConfigVerificationTaskset):
    extra: list[ConfigExample] = []

    def examples(self) -> list[ConfigExample]:
        return [*self.extra, *bundled_examples()]


def _tasks(*extra: ConfigExample) -> dict[str, object]:
    _Taskset.extra = list(extra)
    taskset = _Taskset(ConfigVerificationTasksetConfig(task={"tools": ["opa"]}))
    return {task.data.id: task for task in taskset.load()}


def _score_together(jobs: list[tuple[object, str]]) -> list[dict]:
    """Score every (task, reply) at once, through the runner's own per-example path."""
    rows: list[dict] = [{} for _ in jobs]

    async def run() -> None:
        await asyncio.gather(
            *(score_row(row, task, reply, parse_completion, "test") for row, (task, reply) in zip(rows, jobs))
        )

    asyncio.run(run())
    return rows


def test_a_depth_100k_yaml_is_refused_while_the_example_beside_it_is_scored(pure_yaml_never_sees):
    hostile = [
        ConfigExample(id=f"hostile-{name}", filename=f"{name}.yaml", content=text)
        for name, text in (("flow", FLOW_YAML), ("block", BLOCK_YAML))
    ]
    tasks = _tasks(*hostile)
    normal = tasks["e2-privileged-pod"]
    reply = oracle_reply(normal.data.prompt_text, tools=["opa"])
    alone = _score_together([(normal, reply)])[0]
    empty = '{"violations": [], "patch": "", "confidence": 0.5}'
    rows = _score_together([(tasks["hostile-flow"], empty), (normal, reply), (tasks["hostile-block"], empty)])
    for row in (rows[0], rows[2]):
        assert row["error_kind"] == "scoring" and "nested deeper than 100 levels" in row["error"]
    assert rows[1]["error"] is None and rows[1]["rewards"] == alone["rewards"]
    assert rows[1]["rewards"]["detection"] == 1.0 and rows[1]["reward"] == alone["reward"]


def test_a_patch_or_tool_call_that_builds_deep_yaml_fails_only_that_patch(pure_yaml_never_sees):
    task = _tasks()["e2-privileged-pod"]
    deep = "spec: " + "[" * 50_000 + "]" * 50_000 + "\n"
    diff = "--- a/privileged-pod.yaml\n+++ b/privileged-pod.yaml\n@@ -1,0 +1,1 @@\n+" + deep
    assert len(diff) < e2_patching.MAX_PATCH_CHARS
    reply = json.dumps(
        {"violations": [{"id": "opa/k8s-privileged-container", "severity": "high"}], "patch": diff, "confidence": 1}
    )
    row = _score_together([(task, reply)])[0]
    assert row["error"] is None and row["rewards"]["patch"] == 0.0 and row["rewards"]["detection"] > 0
    assert "nested deeper than 100 levels" in row["details"]["patch"]["error"]
    found = json.loads(asyncio.run(task.call_tool("opa", FLOW_YAML)))
    assert "nested deeper than 100 levels" in found["error"] and found["findings"] == []


@pytest.mark.parametrize("text", [FLOW_YAML, BLOCK_YAML])
def test_a_deep_e2_variation_reply_is_refused_before_pyyaml_loads_it(text, pure_yaml_never_sees, monkeypatch):
    pure_yaml_never_sees.add(text)
    monkeypatch.setattr(yaml, "safe_load_all", lambda *_a, **_k: pytest.fail("yaml.safe_load_all ran"))
    row = {"id": "e2-syn-1", "filename": "pod.yaml", "content": "kind: Pod\n"}
    with pytest.raises(
        ValueError, match=r"^reply is not valid kubernetes: YAML nested deeper than 100 levels \(line 1\)$"
    ):
        e2_synthetic.parse_variation(row, f"Here it is:\n```yaml\n{text}\n```\n", "v1")
    honest = e2_synthetic.TEMPLATES["worker-pod.yaml"]
    varied = e2_synthetic.parse_variation(row, f"```yaml\n{honest}```", "v2")
    assert varied["filename"] == "pod-v2.yaml" and varied["content"] == honest


def test_a_deep_e2_dataset_seed_is_a_rejected_draw(pure_yaml_never_sees):
    seed = e2_synthetic.Seed("deep", "deep.yaml", FLOW_YAML, "rows.jsonl#1")
    candidates, rejects = e2_synthetic.generate(1, random.Random(0), [seed], id_prefix="t")
    assert candidates == [] and rejects
    assert all("YAML nested deeper than 100 levels (line 1)" in reject["reason"] for reject in rejects)


def test_a_50_mb_file_and_a_50_mb_reply_are_refused_by_size_beside_a_normal_example():
    """50 MB is refused by size, never parsed: E2's files are capped at 1 MB and replies at
    MAX_REPLY_CHARS, both checked by length before anything reads the text."""
    big_file = ConfigExample(id="hostile-big", filename="big.yaml", content="a: " + "x" * FIFTY_MB + "\n")
    tasks = _tasks(big_file)
    normal = tasks["e2-privileged-pod"]
    reply = oracle_reply(normal.data.prompt_text, tools=["opa"])
    big_reply = '{"violations": [], "patch": "", "confidence": 0.5, "x": "' + "y" * FIFTY_MB + '"}'
    alone = _score_together([(normal, reply)])[0]
    rows = _score_together([(tasks["hostile-big"], reply), (normal, reply), (normal, big_reply)])
    assert rows[0]["error_kind"] == "scoring" and "file too large" in rows[0]["error"]
    assert rows[1]["error"] is None and rows[1]["rewards"] == alone["rewards"]
    assert rows[2]["error"] is None and rows[2]["rewards"]["format"] == 0.0
    assert rows[2]["parsed"]["problems"] == [f"reply too long: {len(big_reply)} characters > limit {MAX_REPLY_CHARS}"]


# --- JSON ----------------------------------------------------------------------------------


def test_deep_and_huge_json_replies_hold_no_answer():
    deep = '{"label": "Benign", "confidence": 0.9, "x": ' + "[" * DEPTH + "]" * DEPTH + "}"
    assert extract_json_object(deep) is None
    honest = '{"label": "Benign", "confidence": 0.9}'
    huge = honest + " " * MAX_REPLY_CHARS
    assert extract_json_object(huge) is None and extract_json_object(honest) == {"label": "Benign", "confidence": 0.9}
    parsed = parse_label_answer(huge, ["Benign", "Malicious"])
    assert not parsed.format_ok and parsed.problems[0].startswith("reply too long")


def test_a_jsonl_row_nested_too_deeply_is_a_reported_line_not_a_crash(tmp_path: Path):
    path = tmp_path / "rows.jsonl"
    deep = '{"question": "q", "answer": "Benign", "x": ' + "[" * DEPTH + "]" * DEPTH + "}"
    path.write_text(deep + "\n" + '{"question": "q", "answer": "Benign"}\n', encoding="utf-8")
    with pytest.raises(DatasetError, match=rf"{path}:1: JSON nested deeper than 100 levels"):
        read_examples(path, allowed_answers=["Benign"])


def test_an_overlong_jsonl_line_is_reported_and_the_next_line_still_read(tmp_path: Path, monkeypatch):
    monkeypatch.setattr("sv_shared.jsonl.MAX_LINE_CHARS", 1_000)
    path = tmp_path / "rows.jsonl"
    rows = ['{"a": 1}', '{"pad": "' + "x" * 5_000 + '"}', "", '{"b": 2}', '{"n": ' + "9" * 5_000 + "}"]
    path.write_text("\n".join(rows), encoding="utf-8")
    errors: list[str] = []
    found = [(line, row) for line, _, row in json_objects(path, errors)]
    assert found == [(1, {"a": 1}), (4, {"b": 2})]
    assert errors == [f"{path}:2: line longer than 1000 characters", f"{path}:5: line longer than 1000 characters"]


def test_a_jsonl_integer_past_pythons_digit_limit_is_a_reported_line(tmp_path: Path):
    path = tmp_path / "rows.jsonl"
    path.write_text('{"n": ' + "9" * 5_000 + "}\n", encoding="utf-8")
    errors: list[str] = []
    assert list(json_objects(path, errors)) == [] and errors[0].startswith(f"{path}:1: not valid JSON")


# --- diffs ---------------------------------------------------------------------------------


def test_find_block_is_the_nearest_match_of_a_full_scan():
    rng = random.Random(7)

    def scan(lines, block, hint, lo):
        if not block:
            return min(max(hint, lo), len(lines))
        found = [s for s in range(lo, len(lines) - len(block) + 1) if lines[s : s + len(block)] == block]
        return min(found, key=lambda s: (abs(s - hint), s)) if found else None

    for _ in range(5_000):
        lines = [rng.choice(["a", "b", "", "a b"]) for _ in range(rng.randint(0, 14))]
        block = [rng.choice(["a", "b", "", "a b"]) for _ in range(rng.randint(0, 3))]
        hint, lo = rng.randint(-2, 17), rng.randint(0, len(lines))
        assert find_block(lines, block, hint, lo) == scan(lines, block, hint, lo), (lines, block, hint, lo)


def test_an_e3_diff_of_thousands_of_hunks_is_refused_before_parsing(monkeypatch):
    files = {"app.py": "x = 1\n" * 2_000}
    hunk = "@@ -1 +1 @@\n x = 1\n+y\n"
    diff = "--- a/app.py\n+++ b/app.py\n" + hunk * ((e3_patching.MAX_DIFF_CHARS - 30) // len(hunk))
    monkeypatch.setattr(e3_patching, "PatchSet", lambda *_: pytest.fail("unidiff ran"))
    with pytest.raises(e3_patching.PatchError, match=r"diff has 4\d{3} hunks; the limit is 100"):
        e3_patching.apply_patch(files, diff)


def test_an_e3_diff_with_one_huge_line_still_applies():
    files = {"app.py": "a = 1\nb = 2\n"}
    line = "c = '" + "x" * (e3_patching.MAX_DIFF_CHARS - 100) + "'"
    diff = f"--- a/app.py\n+++ b/app.py\n@@ -1,2 +1,2 @@\n a = 1\n-b = 2\n+{line}\n"
    assert e3_patching.apply_patch(files, diff).files["app.py"] == f"a = 1\n{line}\n"


def test_an_e2_diff_of_thousands_of_hunks_is_refused_before_parsing(monkeypatch):
    import unidiff

    monkeypatch.setattr(unidiff, "PatchSet", lambda *_: pytest.fail("unidiff ran"))
    hunk = "@@ -1,1 +1,2 @@\n a: 1\n+b: 2\n"
    diff = "--- a/x.yaml\n+++ b/x.yaml\n" + hunk * 7_000
    with pytest.raises(e2_patching.PatchError, match="diff has 7000 hunks; the limit is 100"):
        e2_patching.apply_patch("x.yaml", "a: 1\n" * 1_000, diff)


def test_e2_hunks_with_wrong_line_numbers_land_on_the_nearest_match():
    content = "".join(f"k{i % 3}: {i}\n" for i in range(3_000))
    # Each hunk claims line 1; its context is found nearest there, after the hunks before it.
    hunks = "".join(f"@@ -1,1 +1,2 @@\n k1: {i}\n+added{i}: x\n" for i in range(1, 3_000, 30))
    patched = e2_patching.apply_patch("x.yaml", content, "--- a/x.yaml\n+++ b/x.yaml\n" + hunks)
    lines = patched.splitlines()
    assert len(lines) == 3_100 and all(
        lines[lines.index(f"k1: {i}") + 1] == f"added{i}: x" for i in range(1, 3_000, 30)
    )


# --- HCL -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "locals {\n  a = " + "[" * DEPTH + "]" * DEPTH + "\n}\n",
        'resource "a" "b" ' + "x {\n" * DEPTH + "}\n" * DEPTH,
        'locals {\n  a = "' + '${"' * DEPTH + "\n}\n",
    ],
)
def test_deep_hcl_is_refused_before_the_parser_runs(text, monkeypatch):
    monkeypatch.setattr(e2_inputs, "run_bounded", lambda *_a, **_k: pytest.fail("python-hcl2 ran"))
    with pytest.raises(InputError, match="HCL nested deeper than 100 levels"):
        load_terraform(text)


def test_hcl_depth_ignores_brackets_in_strings_and_comments():
    # Four levels at most: the block, the string, its interpolation, the string inside that.
    quiet = '# [[[[\n// ((((\n/* {{{{ */\nlocals {\n  a = "[[[[${"x"}\\"[[ $${ %%{"\n}\n'
    assert not e2_inputs.hcl_nested_deeper_than(quiet * 200, 4)
    assert e2_inputs.hcl_nested_deeper_than(quiet + "a = [[[[[]]]]]", 4)


def test_an_hcl_file_too_slow_to_parse_is_refused_at_the_deadline_and_the_next_parses(monkeypatch):
    # python-hcl2's heredoc regex is quadratic in a run of blank lines: minutes for this one.
    monkeypatch.setattr(e2_inputs, "HCL_DEADLINE_S", 1.0)
    with pytest.raises(InputError, match="HCL took longer than 1 s to parse; refused"):
        load_terraform("a = <<A\n" + " \n" * 200_000 + "x\n")
    tf = load_terraform('resource "aws_ebs_volume" "v" {\n  encrypted = true\n}\n')
    assert tf["resources"][0]["config"] == {"encrypted": True}


def test_hcl_parses_in_the_worker_exactly_as_in_process():
    import hcl2

    for example in bundled_examples():
        if example.filename.endswith(".tf"):
            worker = run_bounded("hcl2:loads", example.content)
            assert json.dumps(worker) == json.dumps(hcl2.loads(example.content)), example.filename


# --- the worker itself ---------------------------------------------------------------------


def test_the_worker_reports_parser_errors_deadlines_and_memory():
    with pytest.raises(ParserFailed) as failed:
        run_bounded("json:loads", "{nope")
    assert failed.value.kind == "JSONDecodeError"
    with pytest.raises(InputRefused, match="sleeper took longer than 0.5 s to parse"):
        run_bounded("time:sleep", 30, deadline_s=0.5, what="sleeper")
    with pytest.raises(InputRefused, match="needs more than 2048 MB"):
        run_bounded("builtins:bytearray", 3 * 1024**3, what="hog")
    assert run_bounded("json:loads", '["\\ud800", 1.5]') == ["\ud800", 1.5]  # lone surrogates travel


def test_a_worker_kept_off_the_cpu_by_other_work_is_not_refused():
    """The deadline is the parser's CPU time while the machine is busy: a worker that other
    processes starve (here: stopped for 1.5 s) finishes an honest parse past the wall-clock
    deadline; a parse that sleeps, using no CPU, is still refused at the wall-clock cap."""
    import signal
    import threading

    from sv_shared.bounded import STARVED_WALL_FACTOR, WorkerPool

    pool = WorkerPool(size=1)
    assert pool.call("json:loads", "[1]") == [1]  # the worker is up and has imported json
    (worker,) = pool._idle
    threading.Timer(0.05, os.kill, (worker.proc.pid, signal.SIGSTOP)).start()
    threading.Timer(1.5, os.kill, (worker.proc.pid, signal.SIGCONT)).start()
    assert pool.call("time:sleep", 0.3, deadline_s=0.5) is None  # ~0 s of CPU, over 1.5 s of wall
    started = time.monotonic()
    with pytest.raises(InputRefused, match="took longer than 0.2 s"):
        pool.call("time:sleep", 30, deadline_s=0.2)
    assert time.monotonic() - started < 0.2 * STARVED_WALL_FACTOR + 1.0


# --- E4 emails -----------------------------------------------------------------------------


def _eml_frame(texts: list[str]) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "path": [f"m{i}.eml" for i in range(len(texts))],
            "text": texts,
            "_file": ["reports.zip"] * len(texts),
            "_line": list(range(1, len(texts) + 1)),
        }
    )


def test_hostile_emails_are_bounded_and_the_normal_one_beside_them_kept(monkeypatch):
    """A 50 MB email is refused for its size; a 100,000-address header and 1,000-deep comments
    parse within the deadline (the parser is linear on both); a deadline no email meets refuses
    each in one line, and nothing raises."""
    monkeypatch.setattr(e4_rfc822, "EML_DEADLINE_S", 2.0)
    spec = SourceSpec(
        id="apwg_phishing",
        envs=("e4",),
        title="t",
        loader="local",
        license="l",
        normalizer="e4_eml",
        sample={},
        label=LabelSpec(value="Phishing"),
    )
    normal = "From: Bank <alerts@bank.example>\nSubject: Verify now\n\nClick https://bank.example.evil/login\n"
    header_bomb = "From: a@b.example\nTo: " + "a@b.c, " * 100_000 + "\nSubject: x\n\nbody\n"
    huge = "From: a@b.example\nSubject: x\n\n" + "x" * FIFTY_MB
    deep_comments = "From: " + "(" * DEPTH + "a@b.example\nSubject: x\n\nbody\n"
    frame = _eml_frame([header_bomb, normal, huge, deep_comments])
    result = e4_corpora.eml(spec, frame)
    assert [r["reason"] for r in result.rejects] == [
        f"email refused: email too large: {len(huge)} characters > limit {e4_rfc822.MAX_EML_CHARS}"
    ]
    assert [item.ref for item in result.items] == [
        "reports.zip:1 (m0.eml)",
        "reports.zip:2 (m1.eml)",
        "reports.zip:4 (m3.eml)",
    ]
    item = result.items[1]
    assert item.record["info"]["email"]["links"] == ["https://bank.example.evil/login"]
    assert item.record["answer"] == "Phishing"

    monkeypatch.setattr(e4_rfc822, "EML_DEADLINE_S", 1e-6)
    timed_out = e4_corpora.eml(spec, frame.iloc[[0, 1]])
    assert not timed_out.items
    assert [r["reason"] for r in timed_out.rejects] == [
        "email refused: email took longer than 1e-06 s to parse; refused"
    ] * 2
