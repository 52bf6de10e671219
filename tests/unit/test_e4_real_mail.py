"""E4 on mail as mail corpora store it: the email package's reading of raw RFC 822 messages
(HTML as text, links, attachments, encoded headers, odd charsets), and the corpus normaliser's
caps, near-duplicate filter and rejects; false alarms per corpus group in the summary."""

from __future__ import annotations

import pandas as pd

from sv_env_phishing_detection.corpora import eml
from sv_env_phishing_detection.plugin import evidence_summary
from sv_env_phishing_detection.rfc822 import eml_fields
from sv_shared.corpora import LabelSpec, SourceSpec

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
