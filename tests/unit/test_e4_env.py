"""E4 (phishing detection): sample generator, evidence verification, rewards, URL tool,
bad input and the heuristic baseline."""

from __future__ import annotations

import asyncio
import json
import socket
from collections import Counter
from pathlib import Path

import pytest

from sv_dagster.core.evals.traces import completion_trace
from sv_env_phishing_detection import (
    PhishingTaskset,
    PhishingTasksetConfig,
    build_index,
    check_url,
    evidence_score,
    heuristic_reply,
    load_reward_settings,
    normalize_email,
    parse_completion,
    render_email_question,
    write_bundled_dataset,
)
from sv_env_phishing_detection.emails import BODY_CAP, parse_email_question
from sv_env_phishing_detection.evidence import check_item, evidence_report
from sv_env_phishing_detection.samples import LANGUAGES, SCENARIOS, sample_emails

EMAIL = {
    "from": "PayPal <service@paypa1.com>",
    "reply_to": "help.desk@gmail.com",
    "to": "you@example.org",
    "subject": "Urgent: your account will be suspended",
    "body": "Dear customer, please verify your password within 24 hours at https://paypa1.com/login "
    "or https://bit.ly/3xYz. Bitte bestätigen Sie Ihr Passwort.",
    "links": ["https://paypa1.com/login?id=1", "https://bit.ly/3xYz", "http://xn--pypal-4ve.com/a"],
    "attachments": ["Invoice_2291.docm", "readme.pdf"],
}
CLEAN = {
    "from": "Amazon <order-update@amazon.de>",
    "subject": "Ihre Bestellung 123",
    "body": "Vielen Dank für Ihre Bestellung.",
    "links": ["https://www.amazon.de/orders/123"],
    "attachments": ["receipt_123.pdf"],
}


@pytest.fixture(scope="module")
def tasks():
    return list(PhishingTaskset(PhishingTasksetConfig(id="sv-env-phishing-detection")))


def score(task, completion: str):
    trace = completion_trace(task, completion)
    asyncio.run(task.score(trace))
    return {name: r.score for name, r in trace.rewards.items()}, trace.reward


# --- generator ------------------------------------------------------------------------


def test_generator_is_deterministic_and_matches_bundled_file():
    assert sample_emails() == sample_emails()
    assert sample_emails(seed=1) != sample_emails(seed=2)
    bundled = (
        Path(__file__).resolve().parents[2]
        / "environments/sv-env-phishing-detection/sv_env_phishing_detection/data/sample.jsonl"
    )
    rows = [json.loads(line) for line in bundled.read_text(encoding="utf-8").splitlines()]
    assert rows == json.loads(json.dumps(sample_emails()))


def test_sample_balance_languages_and_scenarios(tmp_path):
    summary = write_bundled_dataset(tmp_path / "e4.jsonl")
    assert summary["n_examples"] >= 120
    assert set(summary["by_language"]) == set(LANGUAGES) and min(summary["by_language"].values()) >= 30
    assert set(summary["by_label"]) == {"Phishing", "Legitimate"}
    assert 0.35 <= summary["by_label"]["Phishing"] / summary["n_examples"] <= 0.65
    rows = sample_emails()
    assert {r["info"]["scenario"] for r in rows} == set(SCENARIOS)
    assert all(r["info"]["sample"] is True for r in rows)
    hard = Counter(r["answer"] for r in rows if r["info"]["hard"])
    assert hard["Phishing"] > 0 and hard["Legitimate"] > 0


# --- evidence -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "item, claim",
    [
        ("paypa1.com", "domain"),
        ("Link to https://paypa1.com/login", "url"),
        ("xn--pypal-4ve.com uses punycode", "punycode"),
        ("shortened link bit.ly", "shortener"),
        ("Reply-To help.desk@gmail.com differs from From service@paypa1.com", "reply_to"),
        ("Urgency: 'within 24 hours'", "quote"),
        ("Urgent: your account will be suspended", "phrase"),
        ("credential request: VERIFY   your password", "phrase"),
        ("bestätigen sie ihr passwort", "phrase"),
        ("macro attachment Invoice_2291.docm", "attachment"),
        (".docm attachment", "attachment"),
        ("lookalike domain paypa1.com", "lookalike"),
    ],
)
def test_real_evidence_verifies(item, claim):
    check = check_item(item, build_index(EMAIL))
    assert check.verified, check.reason
    assert claim in check.claims


def test_a_double_extension_attachment_is_one_file_name():
    index = build_index({**EMAIL, "attachments": ["invoice.pdf.exe"]})
    assert check_item("invoice.pdf.exe", index).verified
    assert check_item("payload: invoice.pdf.exe", index).verified
    assert not check_item("invoice.pdf", index).verified  # not the name of the file attached


@pytest.mark.parametrize(
    "item",
    [
        "paypal-secure.net",  # domain not in the email
        "https://evil.example/login",  # url not in the email
        "Reply-To mismatch",  # true here; see CLEAN below for the false case
        "Urgency: 'act within 2 hours'",  # quoted phrase not in the text
        "the sender asks for your PIN code",  # phrase not in the text
        "Invoice_2291.exe",  # attachment name not present
        ".exe attachment",  # extension not present
        "",  # empty
        42,  # not a string
    ],
)
def test_invented_evidence_fails(item):
    index = build_index(EMAIL)
    check = check_item(item, index)
    if item == "Reply-To mismatch":
        assert check.verified and not check_item(item, build_index(CLEAN)).verified
        return
    assert not check.verified


def test_invented_evidence_on_clean_email():
    index = build_index(CLEAN)
    for item in (
        "punycode domain",
        "URL shortener",
        "lookalike domain amazon.de",
        ".exe attachment",
        "Reply-To differs from From",
    ):
        assert not check_item(item, index).verified, item
    assert check_item("amazon.de", index).verified
    assert check_item("receipt_123.pdf", index).verified


def test_evidence_score_rule():
    index = build_index(EMAIL)
    assert evidence_score(["paypa1.com", "bit.ly"], index, "Phishing") == 1.0
    # 2 verified, 1 invented: 2/3 - 0.25
    assert evidence_score(["paypa1.com", "bit.ly", "evil.example"], index, "Phishing") == pytest.approx(2 / 3 - 0.25)
    assert evidence_score(["evil.example"], index, "Phishing") == 0.0
    assert evidence_score([], index, "Legitimate") == 1.0
    assert evidence_score(None, index, "Abstain") == 0.5
    assert evidence_score([], index, "Phishing") == 0.0
    assert evidence_score("paypa1.com", index, "Phishing") == 1.0  # a string is one item
    # items past max_items count as invented
    many = ["paypa1.com"] * 12
    assert evidence_score(many, index, "Phishing", max_items=10) == pytest.approx(10 / 12 - 0.5)
    assert evidence_score(["evil.example"], index, "Phishing", penalty=0.0) == 0.0
    report = evidence_report(["paypa1.com", "nope.example"], EMAIL, "Phishing")
    assert (report.verified, report.invented) == (1, 1)


# --- rewards through the task -----------------------------------------------------------


def test_rewards_and_details(tasks):
    task = next(t for t in tasks if t.data.answer == "Phishing" and t.data.info["scenario"] == "credential_harvest")
    reply = heuristic_reply(task.data.prompt_text)
    scores, total = score(task, reply)
    assert set(scores) == set(load_reward_settings().weights)
    assert scores["format"] == 1.0 and scores["accuracy"] == 1.0 and scores["evidence"] == 1.0
    invented = json.dumps({"label": "Phishing", "confidence": 0.9, "evidence": ["totally-made-up.example"]})
    bad_scores, bad_total = score(task, invented)
    assert bad_scores["evidence"] == 0.0 and bad_total < total
    details = task.details(invented)["evidence"]
    assert details["invented"] == 1 and details["items"][0]["verified"] is False
    assert "not in the email" in details["items"][0]["reason"]
    json.dumps(task.details(reply))


def test_missing_phishing_costs_more_than_false_alarm(tasks):
    phish = next(t for t in tasks if t.data.answer == "Phishing")
    legit = next(t for t in tasks if t.data.answer == "Legitimate")
    missed, _ = score(phish, '{"label": "Legitimate", "confidence": 0.6, "evidence": []}')
    alarm, _ = score(legit, '{"label": "Phishing", "confidence": 0.6, "evidence": []}')
    abstain, _ = score(phish, '{"label": "Abstain", "confidence": 0.5}')
    assert missed["asymmetric_cost"] < alarm["asymmetric_cost"] < 1.0
    assert missed["asymmetric_cost"] < abstain["asymmetric_cost"] < 1.0
    legit_ok, _ = score(legit, '{"label": "Legitimate", "confidence": 0.9}')
    assert legit_ok["evidence"] == 1.0


def test_parse_completion_and_tools(tasks):
    parsed = parse_completion('```json\n{"Label": "phishing", "confidence": "80%", "Evidence": ["a.com", " "]}\n```')
    assert parsed.label == "Phishing" and parsed.confidence == 0.8 and parsed.evidence == ["a.com"]
    assert parsed.to_dict()["evidence"] == ["a.com"]
    assert parse_completion(None).to_dict()["evidence"] == []
    task = tasks[0]
    assert task.tool_functions() == [check_url] and task.tool_budget == 3


# --- URL tool -------------------------------------------------------------------------


def _check(url):
    return json.loads(asyncio.run(check_url(url)))


def test_check_url_cases(monkeypatch):
    def no_network(*args, **kwargs):
        raise AssertionError("network attempted")

    monkeypatch.setattr(socket.socket, "connect", no_network)
    monkeypatch.setattr(socket, "create_connection", no_network)
    monkeypatch.setattr(socket, "getaddrinfo", no_network)
    r = _check("https://paypa1.com/login")
    assert r["lookalike_of"] == "paypal.com" and r["registrable_domain"] == "paypa1.com"
    r = _check("http://xn--pypal-4ve.com/a")
    assert r["punycode"] and r["lookalike_of"] == "paypal.com"
    r = _check("https://bit.ly/3xYz")
    assert r["shortener"] and not r["blocklisted"]
    r = _check("https://login.secure-login-verify.top/x")
    assert r["blocklisted"] and r["registrable_domain"] == "secure-login-verify.top"
    r = _check("https://www.amazon.co.uk/orders")
    assert r["registrable_domain"] == "amazon.co.uk"
    r = _check("https://www.paypal.com/signin")
    assert (r["lookalike_of"], r["punycode"], r["shortener"], r["blocklisted"]) == (None, False, False, False)
    assert _check("http://paypal.com.verify-account.ru")["lookalike_of"] == "paypal.com"
    for junk in ("", "http://[::1", "\udcff" * 3, "x" * 100_000):
        assert "reasons" in _check(junk) or "error" in _check(junk)


# --- bad input ------------------------------------------------------------------------


def test_bad_input_never_crashes_and_is_bounded(tmp_path):
    huge = {**EMAIL, "body": "A\udcff\ufffd " * 350_000}  # ~1 MB with lone surrogates
    email, notes = normalize_email(huge)
    prompt = render_email_question(huge)
    reply = heuristic_reply(prompt)
    index = build_index(huge)
    evidence_score(["paypa1.com", "x" * 10_000], index, "Phishing")
    assert len(email["body"]) == BODY_CAP and any("truncated" in n for n in notes)
    prompt.encode("utf-8")  # no surrogates left
    assert json.loads(reply)["label"] in ("Phishing", "Legitimate", "Abstain")
    empty, notes = normalize_email({})
    assert "empty email" in notes and json.loads(heuristic_reply(render_email_question(empty)))["label"] == "Abstain"
    assert normalize_email(None)[0]["body"] == "" and normalize_email(b"\xff")[0]["links"] == []
    assert (
        normalize_email({"body": b"caf\xe9", "links": "https://a.com", "attachments": [None, 3]})[0]["body"]
        == "caf\ufffd"
    )
    assert evidence_score(["a"], {}, "Phishing") == 0.0
    assert parse_email_question("just some text")["body"] == "just some text"
    # A dataset with a huge surrogate body, an empty email and a prompt-only row loads and scores.
    rows = [
        {"id": "huge", "question": "x", "answer": "Phishing", "info": {"email": {"body": "\ud800" + "B" * 1_000_000}}},
        {"id": "empty", "question": "x", "answer": "Legitimate", "info": {"email": {}}},
        {"id": "prompt-only", "question": render_email_question(EMAIL), "answer": 1},
    ]
    path = tmp_path / "bad.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    loaded = list(PhishingTaskset(PhishingTasksetConfig(id="sv-env-phishing-detection", dataset_path=path)))
    assert [t.data.answer for t in loaded] == ["Phishing", "Legitimate", "Phishing"]
    assert any("truncated" in n for n in loaded[0].data.info["notes"])
    assert loaded[2].data.info["email"]["reply_to"] == "help.desk@gmail.com"
    for task in loaded:
        scores, _ = score(task, heuristic_reply(task.data.prompt_text))
        assert all(0.0 <= v <= 1.0 for v in scores.values())
        assert score(task, "\udcff garbage {")[0]["format"] == 0.0


# --- baseline -------------------------------------------------------------------------


def test_heuristic_accuracy_on_bundled_set(tasks):
    """The rule baseline is decent but imperfect: 0.80 <= accuracy <= 0.92 (0.8875 on the bundled 160 at seed 4),
    and its evidence, copied from the email, always verifies."""
    correct, evidence = 0, []
    for task in tasks:
        reply = heuristic_reply(task.data.prompt_text)
        correct += parse_completion(reply).label == task.data.answer
        evidence.append(task.details(reply)["evidence"]["score"])
    assert 0.80 <= correct / len(tasks) <= 0.92
    assert min(evidence) == 1.0


def test_sft_rows_that_call_check_url_get_what_the_tool_returns(tasks):
    """Variant `tool_calls`: one turn calling check_url on each distinct link (within the
    budget), the reports as the tool returns them, then the same answer as without tools."""
    from sv_dagster.training.sft_data import build_examples

    plain = {e.task_key: e for e in build_examples("e4", tasks)}
    examples = build_examples("e4", tasks, variant="tool_calls")
    by_key = {t.key: t for t in tasks}
    called = 0
    for example in examples:
        task = by_key[example.task_key]
        links = list(dict.fromkeys(task.data.info["email"].get("links") or []))[: task.tool_budget]
        assert example.completion == plain[task.key].completion
        if not links:
            assert example.tool_turns == []
            continue
        call, *reports = example.tool_turns
        urls = [json.loads(c["function"]["arguments"])["url"] for c in call["tool_calls"]]
        assert urls == links and {c["function"]["name"] for c in call["tool_calls"]} == {"check_url"}
        assert [r["content"] for r in reports] == [asyncio.run(check_url(url)) for url in links]
        called += 1
    assert 0 < called < len(examples)  # the bundled set has emails with and without links
    many = {**EMAIL, "links": [f"https://host{i}.example/a" for i in range(5)] * 2}
    task = tasks[0].with_data(info={**tasks[0].data.info, "email": many})
    (example,) = build_examples("e4", [task], variant="tool_calls")
    assert len(example.tool_turns[0]["tool_calls"]) == task.tool_budget == 3
