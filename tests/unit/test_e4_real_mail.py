"""E4 on mail as people and mail corpora write it: a raw RFC 822 message given as a user row's
`question` is read as headers and body, so the heuristic and the tasks score its body; the
email package's reading of bodies (HTML as text, links, attachments, encoded headers); the
corpus normaliser's caps, near-duplicate filter and rejects; false alarms per corpus group
in the summary."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from sv_dagster.core.data.corpora.build import build_user_dataset
from sv_dagster.core.data.user_dataset import read_user_rows
from sv_dagster.core.envs import ENVS
from sv_env_phishing_detection.corpora import eml
from sv_env_phishing_detection.emails import render_email_question
from sv_env_phishing_detection.plugin import evidence_summary
from sv_env_phishing_detection.rfc822 import eml_fields, looks_like_rfc822
from sv_shared.corpora import LabelSpec, SourceSpec

# Rows as someone exporting their own mailbox would write them: the raw message (CRLF line
# ends, a folded header, an mbox separator), the label, and their own metadata.
QUOTA = (
    "Return-Path: <servicedesk@univ-mail.example.edu>\r\n"
    "From: IT Service Desk <servicedesk@univ-mail.example.edu>\r\n"
    "To: staff@univ.example.edu\r\n"
    "Subject: Mailbox quota notice for\r\n"
    " all staff accounts\r\n"
    "Date: Tue, 4 Mar 2025 08:12:00 +0000\r\n"
    "Content-Type: text/plain; charset=utf-8\r\n"
    "\r\n"
    "Dear user,\r\n\r\nYour mailbox has exceeded its quota and will be deactivated.\r\n"
    "Verify your password within 24 hours at http://bit.ly/3xQuota to keep your messages.\r\n"
)
HTML_ONLY = (
    "From mailer@notices.example.com  Mon Mar  3 10:00:00 2025\n"
    "From: Account Notices <mailer@notices.example.com>\n"
    "To: you@example.org\n"
    "Subject: =?utf-8?q?Action_required_=E2=80=93_your_account?=\n"
    "MIME-Version: 1.0\n"
    'Content-Type: multipart/mixed; boundary="b1"\n'
    "\n"
    "--b1\n"
    "Content-Type: text/html; charset=utf-8\n"
    "\n"
    "<html><head><style>p {color: red}</style><script>track()</script></head><body>"
    "<p>We could not process your payment &amp; your access is on hold.</p>"
    '<p>Please <a href="https://paypa1.com/billing">confirm your login</a> to restore it.</p></body></html>\n'
    "--b1\n"
    'Content-Type: application/octet-stream; name="invoice.pdf.exe"\n'
    'Content-Disposition: attachment; filename="invoice.pdf.exe"\n'
    "\n"
    "TVqQAAMAAAAEAAAA\n"
    "--b1--\n"
)
LUNCH = (
    "From: Dana Whitfield <dana@example.org>\n"
    "To: Sam Ortiz <sam@example.org>\n"
    "Subject: Lunch on Friday\n"
    "\n"
    "Hi Sam, are we still on for lunch on Friday? The new place on Elm Street opens at noon.\n"
)


def test_raw_rfc822_questions_are_scored_on_their_bodies(tmp_path: Path) -> None:
    path = tmp_path / "my-mail.jsonl"
    rows = [
        {"question": QUOTA, "answer": "Phishing", "meta": {"folder": "reported"}},
        {"question": HTML_ONLY, "answer": 1, "meta": {"folder": "reported"}},
        {"question": LUNCH, "answer": "legitimate", "meta": {"folder": "inbox"}},
    ]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    user = read_user_rows("e4", path)
    assert not user.rejects and len(user.rows) == 3
    build_user_dataset("e4", user, tmp_path / "dataset")
    env = ENVS["e4"]
    tasks = list(env.iter_tasks(tmp_path / "dataset" / "test.jsonl", None))
    emails = [task.data.info["email"] for task in tasks]
    assert "Verify your password within 24 hours" in emails[0]["body"]
    assert emails[0]["subject"] == "Mailbox quota notice for all staff accounts"
    assert emails[1]["subject"] == "Action required \u2013 your account"
    assert emails[1]["body"] == (
        "We could not process your payment & your access is on hold.\n\nPlease confirm your login to restore it."
    )
    assert emails[1]["links"] == ["https://paypa1.com/billing"] and emails[1]["attachments"] == ["invoice.pdf.exe"]
    assert emails[2]["body"].startswith("Hi Sam, are we still on for lunch")
    assert all("email read from a raw RFC 822 message" in task.data.info["notes"] for task in tasks)
    assert tasks[0].data.info["folder"] == "reported"  # the user's own metadata is kept
    replies = [json.loads(env.heuristic(task.data.prompt_text)) for task in tasks]
    assert [reply["label"] for reply in replies] == ["Phishing", "Phishing", "Legitimate"]
    # The phishing cues of the first email are only in its body; the evidence quotes it.
    assert {"bit.ly", "within 24 hours", "Verify your password"} <= set(replies[0]["evidence"])
    assert "paypa1.com" in replies[1]["evidence"] and "invoice.pdf.exe" in replies[1]["evidence"]
    for task, reply in zip(tasks, replies, strict=True):
        scores = task.reward_values(json.dumps(reply))
        assert scores["accuracy"] == 1.0 and scores["evidence"] == 1.0


def test_the_heuristic_reads_a_raw_message_given_to_it_directly() -> None:
    reply = json.loads(ENVS["e4"].heuristic(QUOTA))
    assert reply["label"] == "Phishing" and "Verify your password" in reply["evidence"]


@pytest.mark.parametrize(
    ("text", "raw"),
    [
        (QUOTA, True),
        (HTML_ONLY, True),  # after an mbox `From ` line
        ("Received: from mx.example.org\n\tby mail.example.org\nMessage-ID: <1@x>\n", True),  # headers only
        ("Subject: hi\n\nbody", True),
        (render_email_question({"from": "a@b.c", "subject": "hi", "body": "hello"}), False),
        ("From: a@b.c\nSubject: hi\nBody:\nhello", False),  # the rendered layout, without its intro line
        ("Dear customer,\n\nyour account is locked.", False),
        ("X-Custom: 1\n\nbody", False),  # no mail header
        ("Note: remember the milk\n\nand eggs", False),
        ("", False),
    ],
)
def test_what_counts_as_a_raw_message(text: str, raw: bool) -> None:
    assert looks_like_rfc822(text) is raw


def test_an_html_only_message_is_read_as_text_with_its_links_and_attachments() -> None:
    fields = eml_fields(HTML_ONLY)
    assert fields["subject"] == "Action required \u2013 your account"  # an RFC 2047 word, decoded
    assert fields["body"] == (
        "We could not process your payment & your access is on hold.\n\nPlease confirm your login to restore it."
    )  # style and script dropped, the entity decoded, paragraphs kept apart
    assert fields["links"] == ["https://paypa1.com/billing"] and fields["attachments"] == ["invoice.pdf.exe"]


def test_bodies_in_odd_charsets_and_plain_before_html() -> None:
    alternative = (
        "From: a@example.org\nSubject: =?koi8-r?B?8NLJ18XU?=\n"
        'Content-Type: multipart/alternative; boundary="z"\n\n'
        "--z\nContent-Type: text/html\n\n<p>html version</p>\n"
        "--z\nContent-Type: text/plain; charset=x-unknown-charset\n\nplain version \xe9\n--z--\n"
    )
    fields = eml_fields(alternative)
    assert fields["subject"] == "Привет"
    assert fields["body"].startswith("plain version")  # the plain part wins; an unknown charset is read as UTF-8


def _spec(**options) -> SourceSpec:
    return SourceSpec(
        id="mail",
        envs=("e4",),
        title="t",
        loader="local",
        license="x",
        normalizer="e4_eml",
        sample={},
        label=LabelSpec(column="_split", map={"ham": "Legitimate", "hard_ham": "Legitimate", "spam": "Phishing"}),
        options=options,
    )


def _frame(messages: list[tuple[str, str]]) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "path": [f"m{i}.txt" for i in range(len(messages))],
            "text": [text for _, text in messages],
            "_split": [split for split, _ in messages],
            "_file": "mail.jsonl",
            "_line": range(1, len(messages) + 1),
        }
    )


def _mail(subject: str, body: str, sender: str = "a@example.org") -> str:
    return f"From: {sender}\nSubject: {subject}\n\n{body}\n"


def test_the_normaliser_caps_bodies_and_links_and_leaves_near_duplicates_out() -> None:
    words = " ".join(f"word{i}" for i in range(40))
    tracking = "http://track.example.com/click?id=" + "x" * 300
    links = " ".join([tracking, *(f"http://l{i}.example.com/" for i in range(15))])
    frame = _frame(
        [
            ("ham", _mail("Weekly report 12", f"Numbers for week 12: {words}")),
            ("ham", _mail("Weekly report 13", f"Numbers for week 13: {words}", sender="b@example.org")),  # digits only
            ("hard_ham", _mail("Sale", "日本語のテキスト" * 20)),
            ("spam", _mail("Offers", f"see {links}")),
            ("spam", "Content-Type: multipart/mixed; boundary=" + "\n" * 3),
            ("unknown", _mail("x", "y")),
        ]
    )
    result = eml(_spec(max_body_bytes=100, max_links=10, max_link_chars=60, near_duplicate_jaccard=0.9), frame)
    assert result.n_filtered == 1  # week 13 is week 12 with other digits and sender
    by_path = {item.ref.split(" (")[1].rstrip(")"): item.record for item in result.items}
    assert sorted(by_path) == ["m0.txt", "m2.txt", "m3.txt"]
    cjk = by_path["m2.txt"]["info"]
    assert cjk["email"]["body"] == ("日本語のテキスト" * 5)[:33]  # 99 bytes: a 34th character would pass 100
    assert cjk["group"] == "hard_ham" and cjk["notes"] == ["body cut from 161 to 33 characters (100 UTF-8 bytes)"]
    spam = by_path["m3.txt"]["info"]
    assert spam["email"]["links"] == [tracking[:60], *(f"http://l{i}.example.com/" for i in range(9))]
    assert spam["notes"] == [
        f"body cut from {len('see ' + links) + 1} to 100 characters (100 UTF-8 bytes)",  # + its final line break
        "links cut from 16 to 10",
        "1 link(s) cut to 60 characters",
    ]
    assert by_path["m0.txt"]["answer"] == "Legitimate" and spam["origin"] == {
        "file": "mail.jsonl:4",
        "member": "m3.txt",
    }
    assert result.rejects == [
        {
            "source": "mail",
            "ref": "mail.jsonl:5 (m4.txt)",
            "reason": "empty email (no sender, subject, body, links or attachments)",
        },
        {"source": "mail", "ref": "mail.jsonl:6 (m5.txt)", "reason": "unusable label 'unknown'"},
    ]
    without = eml(_spec(), frame)  # no caps, no near-duplicate filter
    assert without.n_filtered == 0 and len(without.items) == 4


def test_false_alarms_are_counted_per_corpus_group() -> None:
    def row(group: str | None, gold: str, said: str, error: str | None = None) -> dict:
        details = {"evidence": {}} | ({"group": group} if group else {})
        return {"answer": gold, "parsed": {"label": said}, "details": details, "error": error}

    rows = [
        row("hard_ham", "Legitimate", "Phishing"),
        row("hard_ham", "Legitimate", "Legitimate"),
        row("hard_ham", "Legitimate", "Abstain"),  # no alarm
        row("hard_ham", "Legitimate", "Phishing", error="timeout"),  # not scored
        row("easy_ham", "Legitimate", "Legitimate"),
        row("spam", "Phishing", "Legitimate"),  # a miss, not a false alarm
        row(None, "Legitimate", "Phishing"),  # no group: the bundled sample
    ]
    summary = evidence_summary(rows, {"mean_rewards": {}})
    assert summary["false_alarms_by_group"] == {
        "easy_ham": {"n": 1, "false_alarms": 0, "fpr": 0.0},
        "hard_ham": {"n": 3, "false_alarms": 1, "fpr": 1 / 3},
    }
    assert summary["hard_ham_fpr"] == 1 / 3 and summary["n_hard_ham"] == 3
    assert evidence_summary(rows[4:], {"mean_rewards": {}})["hard_ham_fpr"] is None
