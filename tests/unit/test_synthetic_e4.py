"""E4 synthetic emails: four languages, obfuscations present and verifiable, planted evidence
confirmed by E4's evidence verifier (and a row whose evidence does not hold is rejected)."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from sv_env_phishing_detection import synthetic as s
from sv_env_phishing_detection.evidence import build_index
from sv_env_phishing_detection.urltools import SHORTENERS, host_of


@pytest.fixture(scope="module")
def rows():
    rows = s.generate(240, random.Random(9), id_prefix="e4-t", obfuscation_rate=0.6)
    verdicts = [s.label_row(row) for row in rows]
    assert verdicts == [None] * len(rows)
    return rows


def test_localized_in_at_least_three_languages_with_both_labels_each(rows):
    by_lang = Counter((r["info"]["language"], r["answer"]) for r in rows)
    languages = {lang for lang, _ in by_lang}
    assert len(languages) >= 3 and languages == {"en", "de", "es", "fr"}
    assert all(by_lang[(lang, label)] > 5 for lang in languages for label in ("Phishing", "Legitimate"))
    de = next(r for r in rows if r["info"]["language"] == "de" and r["answer"] == "Phishing")
    assert any(word in de["question"] for word in ("Sehr geehrter", "Rechnung", "Paket", "Bitte", "Konto"))


def test_obfuscations_are_present_in_the_email_and_detectable(rows):
    homoglyph = [r for r in rows if "homoglyph_host" in r["info"]["obfuscations"]]
    shortened = [r for r in rows if "url_shortener" in r["info"]["obfuscations"]]
    assert len(homoglyph) > 10 and len(shortened) > 10
    for row in homoglyph:
        email = row["info"]["email"]
        hosts = {host_of(link) for link in email["links"]}
        assert any(h.startswith("xn--") for h in hosts) and build_index(email).punycode
        assert any(h in email["from"] for h in hosts if h.startswith("xn--"))  # the sender uses it too
    for row in shortened:
        assert {host_of(link) for link in row["info"]["email"]["links"]} & SHORTENERS
    assert {r["info"]["scenario"] for r in rows if r["answer"] == "Phishing"} == {
        "credential_harvest",
        "invoice_fraud",
        "delivery_notice",
        "ceo_fraud",
    }
    assert {"legit_order", "legit_shipping", "legit_reset"} <= {r["info"]["scenario"] for r in rows}


def test_gold_evidence_is_verified_against_each_email(rows):
    from sv_env_phishing_detection.evidence import evidence_report

    for row in rows:
        info = row["info"]
        if row["answer"] == "Phishing":
            assert info["evidence"], row["id"]
        report = evidence_report(info["evidence"], info["email"], row["answer"])
        assert report.invented == 0 and (report.score == 1.0)
        for kind in info["obfuscations"]:
            if row["answer"] == "Phishing":
                prefix = "shortened link" if kind == "url_shortener" else "punycode lookalike domain"
                assert any(e.startswith(prefix) for e in info["evidence"])
    assert Counter(r["info"]["difficulty"] for r in rows)[2] > 0
    for row in rows:
        assert row["info"]["difficulty"] == (
            2 if row["info"]["baseline"] != row["answer"] or row["info"]["hard"] else 0
        )


def test_a_row_whose_planted_evidence_is_not_in_the_email_is_rejected():
    row = s.generate(1, random.Random(2), id_prefix="e4-x", phishing_share=1.0, obfuscation_rate=1.0)[0]
    row["info"]["evidence_planned"] = ["shortened link https://bit.ly/notinthemail"]
    reason = s.label_row(row)
    assert reason and reason.startswith("obfuscation not verifiable in the email")
    row = s.generate(1, random.Random(4), id_prefix="e4-y", phishing_share=1.0, obfuscation_rate=0.0)[0]
    row["info"]["evidence_planned"] = ['"a phrase this email never says"']
    assert s.label_row(row).startswith("phishing email without verifiable evidence")


def test_a_models_rewrite_keeps_urls_or_is_refused(rows):
    row = next(r for r in rows if r["info"]["obfuscations"] == ["url_shortener"] and r["answer"] == "Phishing")
    url = row["info"]["email"]["links"][0]
    varied = s.parse_variation(row, f"Please act now and open {url} to keep your account.", "e4-v1")
    assert s.label_row(varied) is None and any(url in e for e in varied["info"]["evidence"])
    with pytest.raises(ValueError, match="dropped URL"):
        s.parse_variation(row, "Please act now to keep your account.", "e4-v2")
