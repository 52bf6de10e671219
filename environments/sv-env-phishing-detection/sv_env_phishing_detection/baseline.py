"""A rule baseline for E4: first-pass rules a mail filter would apply.

It sees exactly what a model sees (the rendered prompt), answers in the same JSON schema,
and copies its evidence verbatim from the email, so it runs through the same runner and
scoring as any model (its evidence always verifies)."""

from __future__ import annotations

import json
import re
from typing import Any

from sv_env_phishing_detection.emails import address_domain, email_from_question
from sv_env_phishing_detection.evidence import RISKY_EXTENSIONS
from sv_env_phishing_detection.urltools import SHORTENERS, blocklist, host_of, lookalike_of, registrable_domain

URGENCY: tuple[str, ...] = (
    # en
    "urgent",
    "immediately",
    "within 24 hours",
    "account will be suspended",
    "final notice",
    "act now",
    # de
    "dringend",
    "sofort",
    "innerhalb von 24 stunden",
    "konto wird gesperrt",
    "letzte mahnung",
    # es
    "urgente",
    "inmediatamente",
    "en 24 horas",
    "cuenta será suspendida",
    "último aviso",
    # fr
    "immédiatement",
    "sous 24 heures",
    "compte sera suspendu",
    "dernier avis",
)
CREDENTIALS: tuple[str, ...] = (
    "verify your password",
    "confirm your login",
    "enter your credentials",
    "bestätigen sie ihr passwort",
    "zugangsdaten",
    "verifique su contraseña",
    "datos de acceso",
    "credenciales",
    "confirmez votre mot de passe",
    "identifiants",
    "informations de connexion",
)
_URGENCY_RE = re.compile("|".join(re.escape(p) for p in URGENCY), re.IGNORECASE)
_CRED_RE = re.compile("|".join(re.escape(p) for p in CREDENTIALS), re.IGNORECASE)


def classify_email(email: dict[str, Any]) -> tuple[str, float, list[str]]:
    """(label, confidence, evidence) from fixed rules; evidence is copied from the email."""
    if not any(email.get(k) for k in ("from", "subject", "body", "links", "attachments")):
        return "Abstain", 0.5, []
    score, evidence = 0.0, []
    hosts = [host_of(link) for link in email["links"]]
    from_dom, reply_dom = address_domain(email["from"]), address_domain(email["reply_to"])
    for host in dict.fromkeys([from_dom, *hosts]):
        if not host:
            continue
        reg = registrable_domain(host)
        if lookalike_of(host)[0] or reg in blocklist():
            score += 3
            evidence.append(host)
        elif reg in SHORTENERS:
            score += 1
            evidence.append(host)
        if "xn--" in host:
            score += 1
    if from_dom and reply_dom and registrable_domain(from_dom) != registrable_domain(reply_dom):
        score += 2
        evidence.append(f"Reply-To {email['reply_to']} differs from From {email['from']}")
    text = f"{email['subject']}\n{email['body']}"
    urgent = [m.group(0) for m in _URGENCY_RE.finditer(text)][:2]
    score += len(urgent)
    evidence.extend(dict.fromkeys(urgent))
    cred = _CRED_RE.search(text)
    if cred:
        score += 2
        evidence.append(cred.group(0))
    for name in email["attachments"]:
        if name.rsplit(".", 1)[-1].lower() in RISKY_EXTENSIONS and "." in name:
            score += 2
            evidence.append(name)
    if score >= 3:
        return "Phishing", round(min(0.97, 0.55 + 0.06 * score), 2), evidence
    return "Legitimate", (0.85 if score == 0 else 0.6), ([] if score == 0 else evidence)


def heuristic_reply(prompt: str) -> str:
    """The baseline's completion for a rendered E4 prompt (or a raw RFC 822 message), as a
    JSON string."""
    label, confidence, evidence = classify_email(email_from_question(prompt)[0])
    return json.dumps({"label": label, "confidence": confidence, "evidence": evidence}, ensure_ascii=False)


def constant_reply(answer: str, *, confidence: float, request: str = "") -> str:
    """A reference policy's reply: `answer` for every email, in the answer schema, with no
    evidence and the confidence it is given (the answer's share of a label prior)."""
    return json.dumps({"label": answer, "confidence": confidence, "evidence": []})
