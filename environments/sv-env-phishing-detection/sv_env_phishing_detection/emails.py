"""Emails as structured records, and how they are shown to a model.

An email is a dict with `from`, `reply_to`, `to`, `subject`, `body`, `links` (list of
URLs) and `attachments` (list of file names). Everything that reads one goes through
`normalize_email`, which never raises: non-text becomes text, lone surrogates and other
unencodable characters become U+FFFD, header values lose their line breaks, and a body
longer than `BODY_CAP` characters is cut (the cut is reported in the returned notes).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

LABELS: tuple[str, ...] = ("Phishing", "Legitimate", "Abstain")
GOLD_LABELS: tuple[str, ...] = ("Phishing", "Legitimate")
POSITIVE_LABEL = "Phishing"
INT_LABELS: dict[int, str] = {0: "Legitimate", 1: "Phishing"}

BODY_CAP = 20_000
"""Characters of body kept; longer bodies are truncated (note in info)."""
HEADER_CAP = 1_000
MAX_LIST_ITEMS = 50
"""Links / attachments kept per email."""

SYSTEM_PROMPT = (
    "You are an email security analyst. You classify one email as Phishing or Legitimate. "
    "If the evidence is insufficient, answer Abstain. Missing a phishing email costs more "
    "than a false alarm. Evidence must be copied from the email: URLs or domains that "
    "appear in it, a Reply-To that differs from the From address, exact urgency or "
    "credential-request phrases, attachment names. Invented evidence is penalised. You may "
    "call the check_url tool to look up a URL's reputation. Reply with a single JSON object "
    'and nothing else: {"label": "Phishing" | "Legitimate" | "Abstain", "confidence": '
    '<number 0..1>, "evidence": ["<item copied from the email>", ...]}'
)

HEADER_FIELDS: tuple[tuple[str, str], ...] = (
    ("from", "From"),
    ("reply_to", "Reply-To"),
    ("to", "To"),
    ("subject", "Subject"),
)
_HEADER_BY_NAME = {title.casefold(): key for key, title in HEADER_FIELDS}
_SURROGATE = re.compile("[\ud800-\udfff]")
_INTRO = "Classify this email as Phishing or Legitimate."
_NONE = "(none)"


def clean_text(value: Any, cap: int | None = None) -> str:
    """`value` as valid UTF-8 text (bytes decoded with replacement, lone surrogates ->
    U+FFFD, NUL removed), cut to `cap` characters."""
    if value is None:
        return ""
    if isinstance(value, (bytes, bytearray, memoryview)):
        text = bytes(value[: (cap * 4) if cap else None]).decode("utf-8", errors="replace")
    elif isinstance(value, str):
        text = value
    else:
        text = str(value)
    if cap is not None and len(text) > cap:
        text = text[:cap]
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = _SURROGATE.sub("\ufffd", text)
    return text.replace("\x00", "")


def _header(value: Any) -> str:
    return " ".join(clean_text(value, HEADER_CAP).split())


def _items(value: Any) -> list[str]:
    if value is None:
        return []
    if isinstance(value, (str, bytes)):
        value = [value]
    if not isinstance(value, (list, tuple)):
        return []
    out = []
    for item in value[:MAX_LIST_ITEMS]:
        text = _header(item)
        if text:
            out.append(text)
    return out


def normalize_email(raw: Any) -> tuple[dict[str, Any], list[str]]:
    """(clean email dict, notes). Never raises; a non-mapping becomes an empty email."""
    notes: list[str] = []
    if not isinstance(raw, Mapping):
        if raw is not None:
            notes.append(f"email is not an object ({type(raw).__name__}); treated as empty")
        raw = {}
    email: dict[str, Any] = {key: _header(raw.get(key)) for key, _ in HEADER_FIELDS}
    body = raw.get("body")
    body_len = len(body) if isinstance(body, (str, bytes, bytearray)) else None
    email["body"] = clean_text(body, BODY_CAP)
    if body_len is not None and body_len > BODY_CAP:
        notes.append(f"body truncated from {body_len} to {BODY_CAP} characters")
    email["links"] = _items(raw.get("links"))
    email["attachments"] = _items(raw.get("attachments"))
    if not any(email[k] for k in ("from", "subject", "body")) and not email["links"] and not email["attachments"]:
        notes.append("empty email")
    return email, notes


def render_email_question(email: Mapping[str, Any]) -> str:
    """The user prompt for one email (normalised first)."""
    email, _ = normalize_email(email)
    lines = [_INTRO]
    for key, title in HEADER_FIELDS:
        lines.append(f"{title}: {email[key] or _NONE}")
    lines.append(f"Attachments: {', '.join(email['attachments']) if email['attachments'] else _NONE}")
    lines.append("Links:")
    lines.extend(f"- {link}" for link in email["links"]) if email["links"] else lines.append(f"- {_NONE}")
    lines.append("Body:")
    lines.append(email["body"])
    return "\n".join(lines)


_HEADER_LINE = re.compile(r"^([A-Za-z-]+):[ \t]?(.*)$")


def email_from_question(text: Any) -> tuple[dict[str, Any], list[str]]:
    """(email, notes) of a question: a raw RFC 822 message as people write one (headers, a
    blank line, the body; `rfc822.looks_like_rfc822`) is read with the email package, in a
    bounded worker; anything else as a rendered prompt (`parse_email_question`). Never raises."""
    from sv_env_phishing_detection.rfc822 import looks_like_rfc822, rfc822_email

    raw = clean_text(text, MAX_QUESTION_CHARS)
    if looks_like_rfc822(raw):
        fields, notes = rfc822_email(raw)
        email, more = normalize_email(fields)
        return email, ["email read from a raw RFC 822 message", *notes, *more]
    return parse_email_question(raw), ["email parsed from the prompt"]


MAX_QUESTION_CHARS = 1_000_000
"""Characters of a question read as a raw message (a message's attachments ride along)."""


def parse_email_question(text: Any) -> dict[str, Any]:
    """Read an email back out of a rendered prompt (for baselines and for datasets that
    ship only the prompt). Headers are read up to the `Body:` line; everything after it
    is the body. Unknown text gives an email with only a body. Never raises."""
    text = clean_text(text, BODY_CAP + 20 * HEADER_CAP)
    raw: dict[str, Any] = {"links": [], "attachments": []}
    lines = text.split("\n")
    in_links = False
    for i, line in enumerate(lines):
        if line.strip() == "Body:":
            raw["body"] = "\n".join(lines[i + 1 :])
            break
        if in_links and line.startswith("- "):
            if line[2:].strip() != _NONE:
                raw["links"].append(line[2:].strip())
            continue
        in_links = False
        match = _HEADER_LINE.match(line)
        if not match:
            continue
        name, value = match.group(1).casefold(), match.group(2).strip()
        if name == "links":
            in_links = True
        elif name == "attachments":
            raw["attachments"] = [] if value == _NONE else [a.strip() for a in value.split(",") if a.strip()]
        elif name in _HEADER_BY_NAME:
            raw[_HEADER_BY_NAME[name]] = "" if value == _NONE else value
    else:
        if not any(raw.get(k) for k in ("from", "subject")):
            raw["body"] = text  # not a rendered prompt: the whole text is the body
    return normalize_email(raw)[0]


_DIGITS = re.compile(r"\d+")


def canonical_text(email: Mapping[str, Any]) -> str:
    """Subject and body, digits masked: what makes two emails the same example (the same
    email with another sender, link, order or invoice number is). The leakage check and the
    corpus's near-duplicate filter compare this."""
    return _DIGITS.sub("0", f"{email.get('subject') or ''}\n{email.get('body') or ''}")


_ADDRESS = re.compile(r"[\w.+'-]+@([\w-]+(?:\.[\w-]+)+)", re.UNICODE)


def address_domain(header: str) -> str:
    """The domain of the (last) address in a From/Reply-To header, lower-cased; '' if none."""
    found = _ADDRESS.findall(header or "")
    return found[-1].lower().rstrip(".") if found else ""
