"""The train vs dev/test leakage check: exact and near duplicates found with file:line, each
environment's canonical text, the leak-rate verdict, the config file, and its speed."""

from __future__ import annotations

import json
import random
import time
from pathlib import Path

import pytest

from sv_dagster.core.data import leakage
from sv_dagster.core.data.leakage import Policy, TextRow, check_files, find_leaks
from sv_dagster.core.envs import ENVS

BODY = (
    "Dear customer, your mailbox storage is almost full. Verify your account within 24 hours "
    "at the link below or your messages will be deleted permanently. Regards, the IT helpdesk team"
)


def email_row(row_id: str, subject: str, body: str, sender: str = "IT <it@example.org>") -> dict:
    email = {"from": sender, "subject": subject, "body": body, "links": [], "attachments": [], "reply_to": "", "to": ""}
    question = f"Classify this email as Phishing or Legitimate.\nFrom: {sender}\nSubject: {subject}\nBody:\n{body}"
    return {"id": row_id, "question": question, "answer": "Phishing", "info": {"email": email}}


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


@pytest.fixture
def planted(tmp_path: Path) -> tuple[Path, Path]:
    test = write_jsonl(
        tmp_path / "test.jsonl",
        [
            email_row("t-0", "Mailbox almost full", BODY),
            email_row("t-1", "Your parcel is waiting", "We could not deliver your parcel today. Pay the fee."),
        ],
    )
    one_word = BODY.replace("permanently", "forever")
    train = write_jsonl(
        tmp_path / "train.jsonl",
        [
            email_row("r-0", "Quarterly report", "Hi team, the Q3 figures are attached for Thursday's review."),
            # Another sender, re-cased and re-spaced: the same email.
            email_row("r-1", "MAILBOX  almost full", BODY.upper(), sender="Help <help@other.example>"),
            email_row("r-2", "Lunch on Friday?", "Shall we try the new place near the station at noon?"),
            email_row("r-3", "Mailbox almost full", one_word),  # one word changed
        ],
    )
    return train, test


def test_planted_exact_and_near_duplicates_are_found_with_file_and_line(planted):
    train, test = planted
    report = check_files([train], [test], ENVS["e4"].canonical_text, Policy(jaccard=0.9))
    found = {(leak.row.file, leak.row.line): leak for leak in report.leaks}
    assert set(found) == {(str(train), 2), (str(train), 4)}
    exact, near = found[(str(train), 2)], found[(str(train), 4)]
    assert exact.kind == "exact" and exact.match.where == f"{test}:1" and exact.row.id == "r-1"
    assert near.kind == "near" and near.match.id == "t-0" and 0.9 <= near.similarity < 1.0
    assert report.counts() == {
        "n_train": 4,
        "n_reference": 2,
        "n_leaked": 2,
        "n_exact": 1,
        "n_near": 1,
        "leak_rate": 0.5,
        "jaccard_threshold": 0.9,
    }
    assert f"{train}:4 (near" in report.first()[1]


def test_an_unrelated_row_is_not_a_leak_and_the_threshold_matters(planted):
    train, test = planted
    strict = check_files([train], [test], ENVS["e4"].canonical_text, Policy(jaccard=1.0))
    assert [leak.row.line for leak in strict.leaks] == [2]  # the one-word change is below 1.0
    unrelated = find_leaks(
        [TextRow("train.jsonl", 1, "x", "Lunch on Friday? Shall we try the new place near the station at noon?")],
        [TextRow("test.jsonl", 1, "y", f"Mailbox almost full {BODY}")],
        Policy(jaccard=0.5),
    )
    assert unrelated.leaks == [] and unrelated.n_reference == 1


def test_a_batch_over_max_leak_rate_fails(planted):
    train, test = planted
    report = check_files([train], [test], ENVS["e4"].canonical_text, Policy())
    passed, description = leakage.batch_verdict(report, Policy(max_leak_rate=0.05))
    assert not passed and "2/4 rows (50.0%)" in description and "allowed 5.0%" in description
    assert leakage.batch_verdict(report, Policy(max_leak_rate=0.5))[0]  # at the rate: allowed


def _bundled_rows(env, tmp_path: Path) -> list[dict]:
    if env.write_bundled_dataset is not None:
        path = tmp_path / f"{env.short}.jsonl"
        env.write_bundled_dataset(path)
    else:  # E1 ships its sample rows as package data
        path = Path(env.package.__file__).parent / "data" / "sample.jsonl"
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


@pytest.mark.parametrize("short", ["e1", "e2", "e3", "e4", "e5", "e6"])
def test_canonical_text_of_each_environment_is_non_empty_on_its_bundled_data(short, tmp_path):
    env = ENVS[short]
    rows = _bundled_rows(env, tmp_path)
    texts = [leakage.canonical_fn(env)(row) for row in rows]
    assert rows and all(text.strip() for text in texts), short
    assert len(set(texts)) > len(texts) // 2, f"{short}: canonical texts should tell most rows apart"


def test_e1_ignores_source_port_and_duration_and_e4_the_sender():
    flow = "Classify this network flow (Zeek conn.log fields):\nid.orig_p: {p}\nid.resp_p: 80\nproto: tcp\nduration: {d} s\norig_bytes: 722 B"
    e1 = ENVS["e1"].canonical_text
    a, b = e1({"question": flow.format(p=50000, d=2.5)}), e1({"question": flow.format(p=41234, d=0.1)})
    assert a == b and "id.resp_p=80" in a and "50000" not in a
    e4 = ENVS["e4"].canonical_text
    assert e4(email_row("a", "Hi", "Body", sender="A <a@x.org>")) == e4(email_row("b", "Hi", "Body", sender="B <b@y>"))


def test_default_canonical_text_is_the_prompt_or_the_user_messages():
    assert leakage.default_canonical_text({"question": "q?"}) == "q?"
    prompt = [{"role": "system", "content": "s"}, {"role": "user", "content": "u1"}, {"role": "user", "content": "u2"}]
    assert leakage.default_canonical_text({"prompt": prompt}) == "u1\nu2"


def test_a_bad_config_fails_with_one_line_naming_the_file(tmp_path):
    bad = tmp_path / "leakage.yaml"
    bad.write_text("default:\n  jaccard: 1.5\nenvs:\n  e4: {max_leak_rate: -1}\n")
    with pytest.raises(leakage.LeakageConfigError) as info:
        leakage.load_config(bad)
    message = str(info.value)
    assert "\n" not in message and message.startswith(str(bad)) and "jaccard" in message
    bad.write_text("default: [unclosed\n")
    with pytest.raises(leakage.LeakageConfigError, match=str(bad)) as info:
        leakage.load_config(bad)
    assert "\n" not in str(info.value)


def test_the_project_config_loads_with_an_override():
    config = leakage.load_config()
    assert config.default.max_leak_rate == 0.05
    assert leakage.policy_for("e1").jaccard < config.default.jaccard  # E1's per-env override
    assert leakage.policy_for("e4") == config.default


def test_tens_of_thousands_of_rows_in_seconds():
    rng = random.Random(0)
    vocabulary = [f"w{i}" for i in range(5000)]

    def text() -> str:
        return " ".join(rng.choice(vocabulary) for _ in range(40))

    reference = [TextRow("test.jsonl", i + 1, None, text()) for i in range(5_000)]
    train = [TextRow("train.jsonl", i + 1, None, text()) for i in range(30_000)]
    train[7] = TextRow("train.jsonl", 8, None, reference[3].text)
    started = time.perf_counter()
    report = find_leaks(train, reference, Policy(num_perm=64))
    elapsed = time.perf_counter() - started
    assert [leak.row.line for leak in report.leaks] == [8]
    assert elapsed < 30, f"{elapsed:.1f} s for 35,000 rows"


def test_cotraining_attacks_on_train_and_dev_behaviors_never_test(tmp_path):
    from sv_dagster.assets.cotrain import _training_behaviors
    from sv_dagster.assets.recipe import Artifact

    files = {
        split: write_jsonl(tmp_path / f"{split}.jsonl", [{"id": f"{split}-{i}", "question": split} for i in range(2)])
        for split in ("train", "dev", "test")
    }
    out = tmp_path / "held"
    out.mkdir()
    path = _training_behaviors(Artifact(path=tmp_path, config={}, files=files), out)
    ids = [json.loads(line)["id"] for line in path.read_text().splitlines()]
    assert ids == ["train-0", "train-1", "dev-0", "dev-1"]
