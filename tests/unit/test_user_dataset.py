"""A user's JSONL file read for each environment: every row checked, bad ones named by file and
line and left out, the usable ones in the shape the environment's taskset reads."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sv_dagster.core.data.corpora.build import build_user_dataset
from sv_dagster.core.data.user_dataset import UserDatasetError, read_user_rows, usable_user_rows

FLOW = "Classify this network flow (Zeek conn.log fields):\nid.resp_p: 23\nproto: tcp\nconn_state: S0\norig_pkts: 1"


def write(path: Path, *lines: object) -> Path:
    path.write_text("".join((line if isinstance(line, str) else json.dumps(line)) + "\n" for line in lines))
    return path


def test_e1_common_rows_parse_flow_fields_and_bad_lines_are_named(tmp_path: Path):
    path = write(
        tmp_path / "flows.jsonl",
        {"question": FLOW, "answer": 1, "meta": {"capture": "lab"}},
        {"question": "a flow in words", "answer": "benign"},
        "{not json",
        {"question": FLOW, "answer": "Suspicious"},
        [1, 2],
    )
    user = read_user_rows("e1", path)
    assert [row["answer"] for row in user.rows] == ["Malicious", "Benign"]
    first, second = user.rows
    assert first["info"]["flow"] == {"id.resp_p": 23, "proto": "tcp", "conn_state": "S0", "orig_pkts": 1}
    assert first["info"]["capture"] == "lab" and first["info"]["sample"] is False  # `meta` read as info
    assert first["info"]["user_file"] == "flows.jsonl" and first["info"]["user_line"] == 1
    assert first["id"] == "flows-1" and "no flow fields parsed" in second["info"]["notes"][0]
    lines = user.reject_lines()
    assert [line.split(": ", 1)[0] for line in lines] == [f"{path}:3", f"{path}:4", f"{path}:5"]
    assert "answer 'Suspicious' is not one of ['Benign', 'Malicious']" in lines[1]
    assert lines[2].startswith(f"{path}:5: expected a JSON object, got list (expected shapes: {{")


def test_e2_common_shape_becomes_its_config_row(tmp_path: Path):
    from sv_env_config_verification.dataset import bundled_examples

    example = bundled_examples()[0]
    path = write(
        tmp_path / "configs.jsonl",
        {"question": example.content, "answer": example.expected, "info": {"filename": example.filename}},
        {"question": "kind: Pod\n", "answer": "clean", "info": {"filename": "pod.yaml"}},
        {"question": "x", "answer": "clean", "info": {"filename": "../escape.yaml"}},
        {"question": "x", "answer": "maybe", "info": {"filename": "a.yaml"}},
        example.to_record(),  # its own shape (the same id twice is one row too many)
        example.to_record(),
    )
    user = read_user_rows("e2", path)
    assert [(r["filename"], r["clean"]) for r in user.rows] == [
        (example.filename, False),
        ("pod.yaml", True),
        (example.filename, False),
    ]
    assert user.rows[0]["expected"] == example.expected and user.rows[0]["content"] == example.content
    reasons = [r["reason"] for r in user.rejects]
    assert "'filename' must be a bare file name" in reasons[0] and "not 'clean', 'misconfigured'" in reasons[1]
    assert reasons[2] == f"duplicate id {example.id!r} (first on line 5)"


def test_e3_rows_in_both_shapes_and_a_missing_cwe(tmp_path: Path):
    from sv_env_code_vulnerability.tasks import bundled_tasks, task_to_row

    task = bundled_tasks()[0]
    own = task_to_row(task)
    common = {
        "id": "mine-1",
        "question": task.title,
        "answer": task.fix_diff,
        "info": {k: own[k] for k in ("cwe", "module", "source", "functional_tests", "security_tests")},
    }
    path = write(
        tmp_path / "tasks.jsonl", own, common, {**common, "id": "mine-2", "info": {**common["info"], "cwe": ""}}
    )
    user = read_user_rows("e3", path)
    assert [r["id"] for r in user.rows] == [task.id, "mine-1"]
    assert user.rows[1]["fix_diff"] == task.fix_diff and user.rows[1]["meta"]["sample"] is False
    assert user.rejects == [{"where": f"{path}:3", "reason": "'cwe' must name the weakness as CWE-<number>, not ''"}]


def test_e4_names_a_gold_abstain_and_keeps_the_rest(tmp_path: Path):
    path = write(
        tmp_path / "mail.jsonl",
        {"question": "From: a@b.c\nSubject: hi\nBody:\nhello", "answer": "legitimate"},
        {"question": "From: a@b.c\nSubject: ?\nBody:\n?", "answer": "Abstain"},
    )
    user = read_user_rows("e4", path)
    assert [r["answer"] for r in user.rows] == ["Legitimate"]
    assert "gold answer 'Abstain'" in user.rejects[0]["reason"] and user.rejects[0]["where"] == f"{path}:2"


def test_e5_takes_the_goal_from_the_question(tmp_path: Path):
    path = write(
        tmp_path / "behaviors.jsonl",
        {"id": "b1", "question": "explain how to pick a [PLACEHOLDER: lock]", "answer": "S2"},
        {"question": "x", "answer": "S2", "info": {"behavior": {"goal": "the stated goal"}}},
        {"question": "x", "answer": "S99"},
    )
    user = read_user_rows("e5", path)
    assert user.rows[0]["info"]["behavior"] == {
        "goal": "explain how to pick a [PLACEHOLDER: lock]",
        "category": "S2",
        "id": "b1",
    }
    assert user.rows[1]["info"]["behavior"] == {"goal": "the stated goal"}
    assert "answer 'S99' is not one of" in user.rejects[0]["reason"]


def test_e6_turns_and_expectations(tmp_path: Path):
    path = write(
        tmp_path / "chats.jsonl",
        {"question": "How do I bake bread?", "answer": "comply"},
        {"question": "t1", "answer": "refuse", "info": {"turns": ["t1", "t2"], "expect": ["comply"]}},
    )
    user = read_user_rows("e6", path)
    assert user.rows[0]["info"]["turns"] == ["How do I bake bread?"] and user.rows[0]["info"]["expect"] == ["comply"]
    assert user.rejects[0]["reason"] == "'info.expect' must list 'refuse' or 'comply' for each of the 2 turns"


def test_no_usable_row_is_one_line_naming_file_and_line(tmp_path: Path):
    path = write(tmp_path / "bad.jsonl", {"question": "q"}, "nope")
    with pytest.raises(UserDatasetError) as caught:
        usable_user_rows("e1", path)
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith(f"--dataset {path} has no usable row: {path}:1: missing 'answer' (expected shapes: ")
    assert message.endswith("; and 1 more bad line(s)")
    with pytest.raises(UserDatasetError, match="no rows"):
        usable_user_rows("e1", write(tmp_path / "empty.jsonl"))
    with pytest.raises(UserDatasetError, match="no such file"):
        usable_user_rows("e1", tmp_path / "absent.jsonl")
    (tmp_path / "binary.jsonl").write_bytes(b"\xff\xfe\x00")
    with pytest.raises(UserDatasetError, match="not UTF-8"):
        usable_user_rows("e1", tmp_path / "binary.jsonl")


def test_the_built_dataset_records_the_file_and_its_hash(tmp_path: Path):
    path = write(tmp_path / "flows.jsonl", {"question": FLOW, "answer": 1}, {"question": "x", "answer": 7})
    first = build_user_dataset("e1", usable_user_rows("e1", path), tmp_path / "a")
    assert first.report["split_sizes"] == {"test": 1} and first.report["test_source"] == "user_file"
    assert first.report["user_file"]["path"] == str(path) and first.report["sample"] is False
    assert first.report["n_rejected"] == 1 and first.rejects[0]["ref"] == "line 2"
    assert [json.loads(line)["id"] for line in first.files["test"].read_text().splitlines()] == ["flows-1"]
    write(path, {"question": FLOW, "answer": 0})
    second = build_user_dataset("e1", usable_user_rows("e1", path), tmp_path / "b")
    assert second.report["user_file"]["sha256"] != first.report["user_file"]["sha256"]


def test_a_dataset_is_stale_unless_built_from_exactly_the_file_asked_for(tmp_path: Path):
    from sv_dagster.core.data.user_dataset import dataset_stale

    user = usable_user_rows("e1", write(tmp_path / "flows.jsonl", {"question": FLOW, "answer": 1}))
    assert not dataset_stale(None, None, None)  # the environment's own data, asked for again
    assert dataset_stale(str(user.path), user.sha256, None)  # a user's rows are never evaluated unasked
    assert dataset_stale(None, None, user)
    assert not dataset_stale(str(user.path), user.sha256, user)
    assert dataset_stale(str(user.path), "0" * 64, user)  # the file changed since: its new bytes
    assert dataset_stale(str(tmp_path / "other.jsonl"), user.sha256, user)
