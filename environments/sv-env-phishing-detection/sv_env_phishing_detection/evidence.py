"""Verifying a model's evidence against the email it was given.

THE RULE. Each evidence item (a string) is broken into *claims*; the item is *verified*
when it makes at least one claim and every claim holds in the email, otherwise it is
*invented*. Claims, looked for in this order (text is compared after NFKC, case folding
and whitespace collapsing):

- url:        each `http(s)://...` / `www....` in the item is a link of the email (prefix
              match either way, trailing `/` ignored) or occurs in the email's text;
- address:    each `user@domain` is in the From, Reply-To or To header or the text;
- attachment: each file name with a known extension (`invoice.docm`) is an attachment;
              a bare extension (`.exe`, "exe attachment") is the extension of an attachment;
              the word attachment/Anhang/adjunto/pièce jointe alone claims there is one;
- domain:     each other domain is a host (or registrable domain) of a link, a sender
              address or a URL in the text;
- reply_to:   mentioning Reply-To (or "mismatch") claims that the Reply-To domain differs
              from the From domain (registrable domains compared);
- punycode / shortener / lookalike keywords claim that some host in the email is one;
- quote:      every quoted segment ("...", '...', “...”, «...») is in the email's text;
- phrase:     an item with none of the above is verified when the item, or the part after
              its first colon ("Urgency: act now" -> "act now"), is in the email's text
              (subject, body, headers). Segments shorter than 3 characters never verify.

SCORE. With n items (only the first `max_items` are judged; more count as invented),
v verified and i = n - v invented:

    score = clip(v / n - penalty * i, 0, 1)        (penalty from rewards.toml, default 0.25)

With no evidence at all (missing, empty list, or only blank strings): 1.0 for a
Legitimate answer, 0.5 for Abstain, 0.0 for Phishing or an unparsable answer. A string
instead of a list is read as a one-item list; non-string items are invented.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from sv_env_phishing_detection.emails import address_domain, normalize_email
from sv_env_phishing_detection.urltools import SHORTENERS, host_of, lookalike_of, registrable_domain

DEFAULT_PENALTY = 0.25
DEFAULT_MAX_ITEMS = 10
MAX_ITEM_CHARS = 500

RISKY_EXTENSIONS: frozenset[str] = frozenset(
    {
        "exe",
        "scr",
        "js",
        "vbs",
        "bat",
        "cmd",
        "ps1",
        "jar",
        "msi",
        "iso",
        "img",
        "lnk",
        "hta",
        "html",
        "htm",
        "zip",
        "rar",
        "7z",
        "docm",
        "xlsm",
        "pptm",
    }
)
FILE_EXTENSIONS: frozenset[str] = RISKY_EXTENSIONS | {
    "pdf",
    "doc",
    "docx",
    "xls",
    "xlsx",
    "csv",
    "txt",
    "png",
    "jpg",
    "jpeg",
    "gif",
    "ics",
    "ppt",
    "pptx",
}
_EXT = "|".join(sorted(FILE_EXTENSIONS, key=len, reverse=True))

_URL = re.compile(r"(?:https?://|www\.)[^\s<>\"'“”«»()\[\]]+", re.IGNORECASE)
_ADDRESS = re.compile(r"[\w.+'-]+@[\w-]+(?:\.[\w-]+)+", re.UNICODE)
# A name runs over every further known extension: "invoice.pdf.exe" is one file, not "invoice.pdf".
_FILENAME = re.compile(rf"[\w()\[\] -]*?[\w)\]]\.(?:{_EXT})\b(?:\.(?:{_EXT})\b)*", re.IGNORECASE | re.UNICODE)
_BARE_EXT = re.compile(
    rf"(?:(?<![\w])\.({_EXT})\b|\b({_EXT})\s+(?:attachment|file|anhang|adjunto|archivo|fichier|pièce))", re.IGNORECASE
)
_DOMAIN = re.compile(
    r"(?<![\w@.-])(?:[\w](?:[\w-]{0,61}[\w])?\.)+(?:xn--[a-z0-9-]+|[^\W\d_]{2,24})(?![\w-])", re.UNICODE
)
_QUOTE = re.compile(r"\"([^\"]+)\"|“([^”]+)”|«([^»]+)»|„([^“”]+)[“”]|(?<![\w])'([^']+)'(?![\w])")
_REPLY_TO = re.compile(r"reply[\s-]?to|mismatch|antwort(?:adresse| an)|responder a|répondre à", re.IGNORECASE)
_ATTACHMENT_WORD = re.compile(r"attach|anhang|adjunto|pièce jointe|piece jointe", re.IGNORECASE)
_PUNYCODE_WORD = re.compile(r"punycode|homoglyph|idn\b|internationali[sz]ed", re.IGNORECASE)
_SHORTENER_WORD = re.compile(r"shorten", re.IGNORECASE)
_LOOKALIKE_WORD = re.compile(r"look-?alike|typosquat|impersonat", re.IGNORECASE)
_WS = re.compile(r"\s+")
_TRIM = " \t\n\r.,;:!?-–—*•\"'“”«»„()[]{}<>"


def norm(text: str) -> str:
    return _WS.sub(" ", unicodedata.normalize("NFKC", text).casefold()).strip()


@dataclass(frozen=True)
class EmailIndex:
    """What verification needs about one email, computed once."""

    text: str
    """Normalised headers + subject + body + links + attachment names."""
    links: tuple[str, ...]
    hosts: frozenset[str]
    """Hosts and registrable domains of links, sender addresses and URLs in the text."""
    addresses: str
    attachments: frozenset[str]
    extensions: frozenset[str]
    reply_to_mismatch: bool
    punycode: bool
    shortener: bool
    lookalike: bool


def _hosts_from(email: dict[str, Any]) -> set[str]:
    hosts: set[str] = set()
    raw_urls = list(email["links"]) + _URL.findall(email["body"]) + _URL.findall(email["subject"])
    for url in raw_urls:
        if host := host_of(url.rstrip(".,;:!?)")):
            hosts.add(host)
    for header in ("from", "reply_to", "to"):
        if domain := address_domain(email[header]):
            hosts.add(domain)
    for match in _ADDRESS.findall(email["body"]):
        hosts.add(match.split("@", 1)[1].lower())
    out = set()
    for host in hosts:
        host = host.strip(".")
        out.add(host)
        if host.startswith("www."):
            out.add(host[4:])
        reg = registrable_domain(host)
        if reg:
            out.add(reg)
        try:
            if "xn--" in host:
                out.add(host.encode("ascii").decode("idna"))
            elif not host.isascii():
                out.add(host.encode("idna").decode("ascii"))
        except (UnicodeError, ValueError):
            pass
    return out


def build_index(raw_email: Any) -> EmailIndex:
    email, _ = normalize_email(raw_email)
    hosts = _hosts_from(email)
    text = norm(
        "\n".join(
            [
                email["from"],
                email["reply_to"],
                email["to"],
                email["subject"],
                email["body"],
                *email["links"],
                *email["attachments"],
            ]
        )
    )
    attachments = frozenset(norm(a) for a in email["attachments"])
    extensions = frozenset(a.rsplit(".", 1)[1] for a in attachments if "." in a)
    from_dom, reply_dom = address_domain(email["from"]), address_domain(email["reply_to"])
    mismatch = bool(from_dom and reply_dom and registrable_domain(from_dom) != registrable_domain(reply_dom))
    return EmailIndex(
        text=text,
        links=tuple(norm(link).rstrip("/") for link in email["links"]),
        hosts=frozenset(hosts),
        addresses=norm(" ".join([email["from"], email["reply_to"], email["to"]])),
        attachments=attachments,
        extensions=extensions,
        reply_to_mismatch=mismatch,
        punycode=any("xn--" in h or not h.isascii() for h in hosts),
        shortener=any(h in SHORTENERS for h in hosts),
        lookalike=any(lookalike_of(h)[0] for h in hosts),
    )


@dataclass(frozen=True)
class ItemCheck:
    item: Any
    verified: bool
    claims: tuple[str, ...]
    reason: str

    def to_dict(self) -> dict[str, Any]:
        item = self.item if isinstance(self.item, str) else repr(self.item)
        return {
            "item": item[:MAX_ITEM_CHARS],
            "verified": self.verified,
            "claims": list(self.claims),
            "reason": self.reason,
        }


def _substring(segment: str, index: EmailIndex) -> bool:
    segment = segment.strip(_TRIM)
    return len(segment) >= 3 and segment in index.text


def _same_file(claimed: str, attachment: str) -> bool:
    """`claimed` names `attachment` (words before the name, e.g. "macro file x.docm", allowed)."""
    if claimed == attachment or claimed.endswith(" " + attachment):
        return True
    return attachment.endswith(claimed) and not attachment[-len(claimed) - 1].isalnum()


def check_item(item: Any, index: EmailIndex) -> ItemCheck:
    """Verify one evidence item (see the module docstring for the rule)."""
    if not isinstance(item, str):
        return ItemCheck(item, False, (), f"not a string ({type(item).__name__})")
    text = norm(item[:MAX_ITEM_CHARS])
    if not text:
        return ItemCheck(item, False, (), "empty item")
    claims: list[str] = []
    failed: list[str] = []
    rest = text

    def claim(kind: str, ok: bool, what: str) -> None:
        claims.append(kind)
        if not ok:
            failed.append(f"{kind} {what!r} not in the email")

    for url in _URL.findall(rest):
        u = url.rstrip(".,;:!?)").rstrip("/")
        ok = u in index.text or any(link.startswith(u) or u.startswith(link) for link in index.links)
        claim("url", ok, u)
    rest = _URL.sub(" ", rest)
    for address in _ADDRESS.findall(rest):
        claim("address", address in index.addresses or address in index.text, address)
    rest = _ADDRESS.sub(" ", rest)
    for match in _FILENAME.finditer(rest):
        name = match.group(0).strip(_TRIM)
        # a name that is a host of the email ("dhl.zip" the TLD) is a domain, not a file
        if name in index.hosts:
            continue
        ok = any(_same_file(name, a) for a in index.attachments)
        claim("attachment", ok, name)
        rest = rest.replace(match.group(0), " ")
    for match in _BARE_EXT.finditer(rest):
        ext = (match.group(1) or match.group(2)).lower()
        claim("attachment", ext in index.extensions, "." + ext)
    for domain in _DOMAIN.findall(rest):
        d = domain.strip(".")
        if d.startswith("www."):
            d = d[4:]
        claim("domain", d in index.hosts, d)
    if _REPLY_TO.search(text):
        claim("reply_to", index.reply_to_mismatch, "Reply-To/From mismatch")
    if _PUNYCODE_WORD.search(text):
        claim("punycode", index.punycode, "punycode domain")
    if _SHORTENER_WORD.search(text):
        claim("shortener", index.shortener, "shortened link")
    if _LOOKALIKE_WORD.search(text):
        claim("lookalike", index.lookalike, "lookalike domain")
    if _ATTACHMENT_WORD.search(text) and "attachment" not in claims:
        claim("attachment", bool(index.attachments), "attachment")
    for groups in _QUOTE.findall(text):
        quoted = next(g for g in groups if g)
        claim("quote", _substring(quoted, index), quoted.strip(_TRIM)[:80])
    if not claims:
        after = text.split(":", 1)[1] if ":" in text else ""
        ok = _substring(text, index) or (bool(after.strip()) and _substring(after, index))
        claim("phrase", ok, text[:80])
    if failed:
        return ItemCheck(item, False, tuple(claims), "; ".join(failed))
    return ItemCheck(item, True, tuple(claims), "all claims found in the email: " + ", ".join(claims))


def evidence_items(raw: Any) -> list[Any]:
    """The `evidence` value of a parsed reply as a list (a string is one item)."""
    if raw is None:
        return []
    if isinstance(raw, str):
        raw = [raw]
    if not isinstance(raw, (list, tuple)):
        return [raw]
    return [item for item in raw if not (isinstance(item, str) and not item.strip())]


@dataclass(frozen=True)
class EvidenceReport:
    score: float
    checks: tuple[ItemCheck, ...]
    ignored: int = 0
    """Items beyond max_items (counted as invented)."""
    note: str = ""
    verified: int = field(init=False)
    invented: int = field(init=False)

    def __post_init__(self) -> None:
        verified = sum(c.verified for c in self.checks)
        object.__setattr__(self, "verified", verified)
        object.__setattr__(self, "invented", len(self.checks) - verified + self.ignored)

    def to_dict(self) -> dict[str, Any]:
        return {
            "score": self.score,
            "verified": self.verified,
            "invented": self.invented,
            "ignored": self.ignored,
            "note": self.note,
            "items": [c.to_dict() for c in self.checks],
        }


def evidence_report(
    items: Any,
    email: EmailIndex | dict[str, Any],
    label: str | None,
    *,
    penalty: float = DEFAULT_PENALTY,
    max_items: int = DEFAULT_MAX_ITEMS,
) -> EvidenceReport:
    items = evidence_items(items)
    if not items:
        score = {"Legitimate": 1.0, "Abstain": 0.5}.get(label or "", 0.0)
        return EvidenceReport(score, (), 0, f"no evidence given with label {label!r}")
    index = email if isinstance(email, EmailIndex) else build_index(email)
    judged, ignored = items[:max_items], max(0, len(items) - max_items)
    checks = tuple(check_item(item, index) for item in judged)
    verified = sum(c.verified for c in checks)
    n = len(checks) + ignored
    score = verified / n - penalty * (n - verified)
    return EvidenceReport(min(1.0, max(0.0, score)), checks, ignored)


def evidence_score(
    items: Any,
    email: EmailIndex | dict[str, Any],
    label: str | None,
    *,
    penalty: float = DEFAULT_PENALTY,
    max_items: int = DEFAULT_MAX_ITEMS,
) -> float:
    """The evidence reward in [0, 1] (rule in the module docstring)."""
    return evidence_report(items, email, label, penalty=penalty, max_items=max_items).score


@lru_cache(maxsize=4096)
def _cached_index(key: str) -> EmailIndex:  # pragma: no cover - helper for prompt-only datasets
    from sv_env_phishing_detection.emails import parse_email_question

    return build_index(parse_email_question(key))


def index_for_prompt(prompt: str) -> EmailIndex:
    """EmailIndex of a rendered prompt (memoised by prompt text)."""
    return _cached_index(prompt)
