"""Synthetic E4 emails: campaign templates and benign transactional mail, localised and
obfuscated, each labelled with evidence that E4's own verifier confirms.

Templates are the package's scenarios (`samples.SCENARIOS`): phishing campaigns
(credential harvest, invoice fraud, delivery notice, CEO fraud) and benign transactional
mail (orders, shipping, password resets, newsletters, colleagues, IT notices, vendor
reminders), in English, German, Spanish and French. Obfuscations applied on top:

- `homoglyph_host`: a link's host becomes a brand name with a Cyrillic homoglyph, written
  in punycode (xn--...), and the sender uses it too;
- `url_shortener`: links go through a URL shortener (bit.ly, is.gd, ...).

Labelling: every signal the generator planted becomes a gold evidence item ("shortened
link https://bit.ly/..."); `evidence.evidence_report` (the environment's verifier) must
verify each one against the email, or the row is rejected. A phishing row needs at least
one verified item. The rule baseline's verdict sets the difficulty (0..2: 2 when it is
wrong or the template is a known hard case).
"""

from __future__ import annotations

import random
import re
from collections.abc import Sequence
from typing import Any

from sv_env_phishing_detection.baseline import classify_email
from sv_env_phishing_detection.emails import address_domain, normalize_email, render_email_question
from sv_env_phishing_detection.evidence import evidence_report
from sv_env_phishing_detection.samples import BANKS, CARRIERS, LANGUAGES, SCENARIOS, SHORT, T
from sv_env_phishing_detection.urltools import host_of, lookalike_of

GENERATOR_ID = "sv-env-phishing-detection/synthetic"
GENERATOR_VERSION = "1"
VERIFIER_ID = "e4-evidence-verifier@1"

CAMPAIGNS = {
    "credential_harvest": "credential_harvest",
    "invoice_fraud": "invoice_fraud",
    "delivery_notice": "delivery_notice",
    "ceo_fraud": "ceo_fraud",
}
_HOMOGLYPHS = {"a": "а", "e": "е", "o": "о", "p": "р", "c": "с", "x": "х", "y": "у"}
_URL = re.compile(r"https?://[^\s]+")


def homoglyph_host(brand: str, rng: random.Random) -> str | None:
    """`brand` (e.g. paypal.com) with one Latin letter of its name swapped for a Cyrillic
    look-alike, in punycode; None when the name has no such letter."""
    label, _, tld = brand.partition(".")
    spots = [i for i, ch in enumerate(label) if ch in _HOMOGLYPHS]
    if not spots:
        return None
    i = rng.choice(spots)
    unicode_label = label[:i] + _HOMOGLYPHS[label[i]] + label[i + 1 :]
    return unicode_label.encode("idna").decode("ascii") + "." + tld


def _replace_links(email: dict[str, Any], make: Any) -> list[tuple[str, str]]:
    """Every link (in `links` and in the body) through `make(old) -> new`; (old, new) pairs."""
    pairs = [(old, make(old)) for old in email["links"]]
    pairs = [(old, new) for old, new in pairs if new and new != old]
    for old, new in pairs:
        email["links"] = [new if link == old else link for link in email["links"]]
        email["body"] = email["body"].replace(old, new)
    return pairs


def obfuscate(email: dict[str, Any], kind: str, lang: str, rng: random.Random) -> list[str] | None:
    """Apply one obfuscation in place; the gold evidence items it plants, or None when it
    does not apply (no link to rewrite, no brand with a homoglyph)."""
    if not email["links"]:
        return None
    if kind == "url_shortener":
        pairs = _replace_links(email, lambda old: f"https://{rng.choice(SHORT)}/{rng.randrange(16**6):06x}")
        return [f"shortened link {new}" for _, new in pairs] or None
    if kind == "homoglyph_host":
        brands = [b for b in (*BANKS[lang], *CARRIERS[lang]) if homoglyph_host(b, rng)]
        if not brands:
            return None
        brand = rng.choice(brands)
        host = homoglyph_host(brand, rng)
        pairs = _replace_links(email, lambda old: re.sub(r"^(https?://)[^/]+", rf"\g<1>{host}", old))
        if not pairs:
            return None
        name = re.sub(r"<[^>]*>", "", email["from"]).strip() or brand.split(".")[0].capitalize()
        email["from"] = f"{name} <no-reply@{host}>"
        return [f"punycode lookalike domain {host}"]
    raise ValueError(f"unknown obfuscation {kind!r}")


def planted_evidence(email: dict[str, Any], label: str, lang: str) -> list[str]:
    """Gold evidence for the signals a template itself plants: a Reply-To that differs from
    the sender, risky attachments, the urgency / credential phrases of the language, a
    lookalike sender or link host. Benign mail gets none (its signals are the hard part)."""
    if label != "Phishing":
        return []
    items: list[str] = []
    from_dom, reply_dom = address_domain(email["from"]), address_domain(email["reply_to"])
    if reply_dom and from_dom and reply_dom != from_dom:
        items.append(f"Reply-To {email['reply_to']} differs from the sender")
    for name in email["attachments"]:
        items.append(f"attachment {name}")
    for host in dict.fromkeys([from_dom, *(host_of(link) for link in email["links"])]):
        if host and lookalike_of(host)[0]:
            items.append(f"lookalike domain {host}")
    text = f"{email['subject']}\n{email['body']}"
    for phrase in (*T[lang]["urgency"], *T[lang]["cred"], *T[lang]["soft_urgency"]):
        if phrase.lower() in text.lower():
            items.append(f'"{phrase}"')
    if not items:  # CEO fraud with no technical signal: the payment request itself
        sentence = email["body"].split(". ")[0].strip()
        if sentence:
            items.append(f'"{sentence}"')
    return items


def generate(
    n: int,
    rng: random.Random,
    *,
    id_prefix: str,
    phishing_share: float = 0.5,
    obfuscation_rate: float = 0.5,
    languages: Sequence[str] = LANGUAGES,
    info: dict[str, Any] | None = None,
) -> list[dict[str, Any]]:
    """`n` candidate rows in E4's schema, languages rotating; about `phishing_share`
    phishing campaigns; each phishing email obfuscated with probability
    `obfuscation_rate`, and a few benign ones too (a newsletter's shortened link is
    real mail). Gold evidence in `info.evidence_planned`; `label_rows` verifies it."""
    rows = []
    phishing = [s for s, (label, _, _) in SCENARIOS.items() if label == "Phishing"]
    benign = [s for s, (label, _, _) in SCENARIOS.items() if label == "Legitimate"]
    for i in range(n):
        lang = languages[i % len(languages)]
        names = phishing if rng.random() < phishing_share else benign
        name = rng.choices(names, [SCENARIOS[s][2] for s in names])[0]
        label, make, _ = SCENARIOS[name]
        email, hard = make(rng, lang)
        email, _ = normalize_email({"from": "", "reply_to": "", "to": "", **email})
        applied: list[str] = []
        extra: list[str] = []
        rate = obfuscation_rate if label == "Phishing" else obfuscation_rate / 4
        if rng.random() < rate:
            kind = rng.choice(["homoglyph_host", "url_shortener"])
            planted = obfuscate(email, kind, lang, rng)
            if planted is not None:
                applied.append(kind)
                extra = planted if label == "Phishing" else []
        evidence = list(dict.fromkeys([*extra, *planted_evidence(email, label, lang)]))
        rows.append(
            {
                "id": f"{id_prefix}-{i:05d}",
                "question": render_email_question(email),
                "answer": label,
                "info": {
                    "generator": f"{GENERATOR_ID}@{GENERATOR_VERSION}",
                    **(info or {}),
                    "language": lang,
                    "scenario": name,
                    "family": CAMPAIGNS.get(name, "transactional"),
                    "hard": hard,
                    "obfuscations": applied,
                    "evidence_planned": evidence,
                    "email": email,
                },
            }
        )
    return rows


def label_row(row: dict[str, Any]) -> str | None:
    """Verify the row's planned evidence with E4's verifier; on success the row gets
    `info.evidence` (the verified items), `info.baseline` and `info.difficulty`, and None
    is returned; otherwise why the row cannot stand."""
    info = row["info"]
    email = info["email"]
    planned = info.get("evidence_planned") or []
    report = evidence_report(planned, email, row["answer"], max_items=max(10, len(planned)))
    failed = [check.to_dict() for check in report.checks if not check.verified]
    obfuscation_items = [item for item in planned if item.startswith(("shortened link", "punycode lookalike"))]
    if any(check["item"] in obfuscation_items for check in failed):
        return f"obfuscation not verifiable in the email: {[c['reason'] for c in failed][:2]}"
    verified = [check.item for check in report.checks if check.verified]
    if row["answer"] == "Phishing" and not verified:
        return f"phishing email without verifiable evidence ({[c['reason'] for c in failed][:2]})"
    baseline, _, _ = classify_email(email)
    info.pop("evidence_planned", None)
    hard = baseline != row["answer"] or info.get("hard")
    info.update(
        evidence=verified,
        evidence_dropped=[c["item"] for c in failed],
        baseline=baseline,
        difficulty=2 if hard else 0,
        difficulty_basis="rule baseline wrong or a hard template" if hard else "rule baseline right",
    )
    return None


def variation_prompt(row: dict[str, Any]) -> str:
    lang = row["info"]["language"]
    return (
        f"Rewrite the body of this email in the same language ({lang}) with different wording. Keep every URL, "
        "e-mail address, amount and file name exactly as written. Reply with the new body only.\n\n"
        + row["info"]["email"]["body"]
    )


def parse_variation(row: dict[str, Any], text: str, new_id: str) -> dict[str, Any]:
    """The row with the model's body (evidence re-planned, to be verified again); ValueError
    when the reply is empty or dropped a URL of the email."""
    body = (text or "").strip().strip("`").strip()
    if not body:
        raise ValueError("empty reply")
    email = dict(row["info"]["email"])
    missing = [url for url in _URL.findall(email["body"]) if url not in body]
    if missing:
        raise ValueError(f"the rewrite dropped URL(s) {missing[:2]}")
    email["body"] = body
    email, _ = normalize_email(email)
    info = {**row["info"], "email": email}
    obfuscated = [
        e
        for e in row["info"].get("evidence", []) + row["info"].get("evidence_planned", [])
        if e.startswith(("shortened link", "punycode lookalike"))
    ]
    info["evidence_planned"] = list(
        dict.fromkeys([*obfuscated, *planted_evidence(email, row["answer"], info["language"])])
    )
    for key in ("evidence", "evidence_dropped", "baseline", "difficulty", "difficulty_basis"):
        info.pop(key, None)
    return {**row, "id": new_id, "question": render_email_question(email), "info": info}
