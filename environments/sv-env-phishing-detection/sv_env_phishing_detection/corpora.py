"""E4's corpora: emails labelled phishing or legitimate, from tables (Enron ham, the Kaggle
phishing CSV) or RFC 822 messages (APWG reports), rendered as the taskset renders them."""

import email
import email.policy
import re
from typing import Any

from sv_env_phishing_detection.emails import normalize_email, render_email_question
from sv_shared.bounded import InputRefused, ParserFailed, check_size, run_bounded
from sv_shared.corpora import (
    CorpusSpec,
    Item,
    Normalised,
    Normalizer,
    SourceSpec,
    column,
    labels_of,
    qa_schema,
    records,
    refs,
    reject,
    short_hash,
    text_of,
)

_URL = re.compile(r"https?://[^\s<>\"')\]]+", re.IGNORECASE)
_TAG = re.compile(r"<[^>]+>")


def _links(*texts: str) -> list[str]:
    seen: dict[str, None] = {}
    for text in texts:
        for url in _URL.findall(text or ""):
            seen.setdefault(url.rstrip(".,;:"), None)
    return list(seen)[:50]


def _item(spec: SourceSpec, raw_email: dict[str, Any], label: str, ref: str) -> Item | dict[str, Any]:
    mail, notes = normalize_email(raw_email)
    if "empty email" in notes:
        return reject(spec.id, ref, "empty email (no sender, subject, body, links or attachments)")
    question = render_email_question(mail)
    info = {"email": mail, "scenario": spec.id, "source": spec.id, "sample": False}
    if notes:
        info["notes"] = notes
    return Item(
        "e4",
        {"id": f"{spec.id}-{short_hash(question)}", "question": question, "answer": label, "info": info},
        spec.id,
        ref,
    )


def _add(result: Normalised, made: Item | dict[str, Any]) -> None:
    (result.items.append if isinstance(made, Item) else result.rejects.append)(made)


def emails(spec: SourceSpec, frame: Any) -> Normalised:
    """Emails from table columns (`columns`: from, reply_to, to, subject, body); links are the
    URLs in the body, so evidence can be checked against what the model saw."""
    result = Normalised()
    where = refs(frame)
    assert spec.label is not None
    raw_labels = frame[spec.label.column] if spec.label.column else None
    labels, dropped = labels_of(raw_labels if raw_labels is not None else [None] * len(frame), spec.label)
    cols = {name: column(frame, spec, name) for name in ("from", "reply_to", "to", "subject", "body")}
    for i in range(len(frame)):
        if dropped[i]:
            result.n_filtered += 1
            continue
        label = labels[i]
        if label is None:
            raw = raw_labels.iloc[i] if raw_labels is not None else None
            result.rejects.append(reject(spec.id, where[i], f"unusable label {raw!r}"))
            continue
        raw = {name: text_of(col.iloc[i]) for name, col in cols.items() if col is not None}
        raw["links"] = _links(raw.get("body", ""))
        _add(result, _item(spec, raw, label, where[i]))
    return result


MAX_EML_CHARS = 30_000_000
"""Largest RFC 822 message read (mail systems refuse messages over 25 MB)."""
EML_DEADLINE_S = 10.0
"""Seconds parsing one message may take (milliseconds for real mail): the email package's
header parser is super-linear on some hostile headers (a few thousand encoded words or
addresses take seconds), and no cheap pre-check rules that out."""


def eml_fields(text: str) -> dict[str, Any]:
    """From/Reply-To/To/Subject, the plain (or de-tagged HTML) body, links and attachment
    names of one RFC 822 message. Not bounded in time itself: `_parse_eml` runs it in a
    worker process with a deadline."""
    message = email.message_from_string(text, policy=email.policy.default)
    body_part = message.get_body(preferencelist=("plain", "html")) if message.is_multipart() else message
    try:
        body = body_part.get_content() if body_part is not None else ""
    except (LookupError, KeyError, ValueError):  # unknown charset / broken transfer encoding
        payload = body_part.get_payload(decode=True) if body_part is not None else b""
        body = payload.decode("utf-8", errors="replace") if isinstance(payload, bytes) else str(payload or "")
    hrefs = re.findall(r"href=[\"']?([^\"' >]+)", body or "", re.IGNORECASE)
    if body_part is not None and body_part.get_content_type() == "text/html":
        body = re.sub(r"\n\s*\n+", "\n\n", _TAG.sub("", body))
    attachments = [part.get_filename() for part in message.iter_attachments()] if message.is_multipart() else []
    return {
        "from": str(message.get("From", "")),
        "reply_to": str(message.get("Reply-To", "")),
        "to": str(message.get("To", "")),
        "subject": str(message.get("Subject", "")),
        "body": body,
        "links": _links(body, " ".join(hrefs)),
        "attachments": [a for a in attachments if a],
    }


def _parse_eml(text: str) -> dict[str, Any]:
    """`eml_fields(text)` in a worker process, bounded in size, time and memory: one hostile
    message costs at most EML_DEADLINE_S and never stalls the rest of the corpus."""
    check_size(text, MAX_EML_CHARS, "email")
    return run_bounded(f"{__name__}:eml_fields", text, deadline_s=EML_DEADLINE_S, what="email")


def eml(spec: SourceSpec, frame: Any) -> Normalised:
    """RFC 822 messages (.eml files, one per row): headers, the plain (or de-tagged HTML) body,
    links and attachment names."""
    result = Normalised()
    assert spec.label is not None and spec.label.value is not None
    where = refs(frame)
    for i, row in enumerate(records(frame[["path", "text"]])):
        ref = f"{where[i]} ({row['path']})"
        try:
            raw = _parse_eml(text_of(row["text"]))
        except InputRefused as exc:
            result.rejects.append(reject(spec.id, ref, f"email refused: {exc}"))
            continue
        except ParserFailed as exc:  # the email package raises many types on broken messages
            result.rejects.append(reject(spec.id, ref, f"not a parsable email ({exc.kind}: {exc.detail[:100]})"))
            continue
        _add(result, _item(spec, raw, spec.label.value, ref))
    return result


CORPORA = CorpusSpec(
    normalizers={"e4_emails": Normalizer(emails), "e4_eml": Normalizer(eml)},
    schema=qa_schema("e4", ("Phishing", "Legitimate")),
    test_sources=("bundled", "corpora"),
)
