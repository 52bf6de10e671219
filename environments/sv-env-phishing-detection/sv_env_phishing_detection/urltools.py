"""Offline, deterministic URL reputation: the `check_url` tool and its building blocks.

Registrable domains come from tldextract's *bundled* public-suffix snapshot (no network,
no cache directory). Lookalikes are judged against the brand list shipped in
`data/brands.txt`: same homoglyph skeleton, edit distance 1 (labels of 5+ characters),
the brand's name embedded in another domain (`paypal-secure.com`), or the brand's domain
used as a subdomain (`paypal.com.evil.ru`).
"""

from __future__ import annotations

import json
import unicodedata
from functools import lru_cache
from importlib import resources
from urllib.parse import urlsplit

import tldextract

SHORTENERS: frozenset[str] = frozenset(
    {
        "bit.ly",
        "tinyurl.com",
        "t.co",
        "goo.gl",
        "ow.ly",
        "is.gd",
        "buff.ly",
        "rebrand.ly",
        "cutt.ly",
        "shorturl.at",
        "tiny.cc",
        "rb.gy",
        "t.ly",
        "s.id",
    }
)

_EXTRACT = tldextract.TLDExtract(suffix_list_urls=(), cache_dir=None, include_psl_private_domains=False)

# Characters that read as another: digits/symbols and common Cyrillic/Greek homoglyphs.
_HOMOGLYPHS = str.maketrans(
    {
        "0": "o",
        "1": "l",
        "3": "e",
        "4": "a",
        "5": "s",
        "7": "t",
        "8": "b",
        "@": "a",
        "$": "s",
        "i": "l",
        "|": "l",
        "!": "l",
        "а": "a",
        "е": "e",
        "о": "o",
        "р": "p",
        "с": "c",
        "у": "y",
        "х": "x",
        "і": "l",
        "ј": "j",
        "ԁ": "d",
        "ɡ": "g",
        "ո": "n",
        "ս": "u",
        "α": "a",
        "ο": "o",
        "ν": "v",
        "ρ": "p",
    }
)


def _lines(name: str) -> list[str]:
    text = (resources.files("sv_env_phishing_detection") / "data" / name).read_text(encoding="utf-8")
    return [line.strip().lower() for line in text.splitlines() if line.strip() and not line.startswith("#")]


@lru_cache(maxsize=1)
def brand_domains() -> tuple[str, ...]:
    return tuple(_lines("brands.txt"))


@lru_cache(maxsize=1)
def blocklist() -> frozenset[str]:
    return frozenset(_lines("blocklist.txt"))


def skeleton(label: str) -> str:
    """Homoglyph skeleton: NFKD, marks dropped, look-alike characters mapped, rn->m, vv->w."""
    text = unicodedata.normalize("NFKD", label.lower())
    text = "".join(c for c in text if not unicodedata.combining(c)).translate(_HOMOGLYPHS)
    return text.replace("rn", "m").replace("vv", "w").replace("-", "")


def _distance_le1(a: str, b: str) -> bool:
    """Levenshtein distance between a and b is at most 1."""
    if a == b:
        return True
    if abs(len(a) - len(b)) > 1:
        return False
    if len(a) > len(b):
        a, b = b, a
    i = 0
    while i < len(a) and a[i] == b[i]:
        i += 1
    return a[i:] == b[i + 1 :] if len(a) < len(b) else a[i + 1 :] == b[i + 1 :]


def host_of(url: str) -> str:
    """The host of a URL or bare domain, lower-cased, IDNA-decoded to Unicode where possible."""
    text = (url or "").strip()
    if "://" not in text:
        text = "http://" + text
    try:
        host = urlsplit(text).hostname or ""
    except ValueError:
        host = ""
    host = host.strip(".").lower()
    return host


def _to_unicode(host: str) -> str:
    try:
        return host.encode("ascii").decode("idna") if "xn--" in host else host
    except (UnicodeError, ValueError):
        return host


def _to_ascii(host: str) -> str:
    try:
        return host if host.isascii() else host.encode("idna").decode("ascii")
    except (UnicodeError, ValueError):
        return host


@lru_cache(maxsize=65536)
def registrable_domain(host: str) -> str:
    """eTLD+1 of `host` (ASCII/punycode form); the host itself for IPs and bare names."""
    host = _to_ascii(host.strip(".").lower())
    if not host:
        return ""
    parts = _EXTRACT(host)
    if parts.suffix and parts.domain:
        return f"{parts.domain}.{parts.suffix}"
    return host


@lru_cache(maxsize=65536)
def lookalike_of(host: str) -> tuple[str | None, str | None]:
    """(brand domain, why) when `host` imitates a shipped brand but is not it."""
    ascii_host = _to_ascii(host)
    reg = registrable_domain(ascii_host)
    if not reg or reg in brand_domains():
        return None, None
    unicode_reg = _to_unicode(reg)
    label = unicode_reg.split(".")[0]
    sk = skeleton(label)
    unicode_host = _to_unicode(ascii_host)
    for brand in brand_domains():
        brand_label = brand.split(".")[0]
        if label != brand_label and sk == skeleton(brand_label):
            return brand, f"homoglyph skeleton of {label!r} equals {brand_label!r}"
    for brand in brand_domains():
        brand_label = brand.split(".")[0]
        if len(brand_label) >= 5 and label != brand_label and _distance_le1(label, brand_label):
            return brand, f"{label!r} is one edit away from {brand_label!r}"
    for brand in brand_domains():
        brand_label = brand.split(".")[0]
        brand_sk = skeleton(brand_label)
        if (
            len(brand_label) >= 4
            and label != brand_label
            and (
                any(skeleton(token) == brand_sk for token in label.split("-"))
                or (len(brand_label) >= 5 and sk.startswith(brand_sk))
            )
        ):
            return brand, f"brand name {brand_label!r} embedded in {label!r}"
        if unicode_host.startswith(brand + ".") or f".{brand}." in f".{unicode_host}.":
            return brand, f"brand domain {brand!r} used as a subdomain of {unicode_reg!r}"
    return None, None


def url_report(url: str) -> dict:
    """The check_url result as a dict (see `check_url`)."""
    host = host_of(str(url)[:2048] if url is not None else "")
    reasons: list[str] = []
    if not host:
        return {
            "url": str(url)[:200] if url else "",
            "registrable_domain": None,
            "lookalike_of": None,
            "punycode": False,
            "shortener": False,
            "blocklisted": False,
            "reasons": ["no host in URL"],
        }
    ascii_host = _to_ascii(host)
    reg = registrable_domain(host)
    punycode = "xn--" in ascii_host or not host.isascii()
    if punycode:
        reasons.append(f"internationalised (punycode) domain {ascii_host} = {_to_unicode(ascii_host)}")
    brand, why = lookalike_of(host)
    if brand:
        reasons.append(f"lookalike of {brand}: {why}")
    shortener = reg in SHORTENERS or ascii_host in SHORTENERS
    if shortener:
        reasons.append(f"{reg} is a URL shortener (destination hidden)")
    blocked = reg in blocklist() or ascii_host in blocklist()
    if blocked:
        reasons.append(f"{reg} is on the local blocklist")
    if not reasons:
        reasons.append("no reputation issue found")
    return {
        "url": str(url)[:200],
        "registrable_domain": reg,
        "lookalike_of": brand,
        "punycode": punycode,
        "shortener": shortener,
        "blocklisted": blocked,
        "reasons": reasons,
    }


def url_report_json(url: str) -> str:
    """What `check_url` returns to a model for `url` (the tool's text, byte for byte)."""
    try:
        return json.dumps(url_report(url), ensure_ascii=False)
    except Exception as exc:  # a tool must answer, never raise
        return json.dumps({"url": str(url)[:200], "error": f"{type(exc).__name__}: {exc}"})


async def check_url(url: str) -> str:
    """Look up a URL's reputation offline. Returns JSON: registrable_domain, lookalike_of
    (the imitated brand domain or null), punycode, shortener, blocklisted, reasons.

    Args:
        url: the URL or domain to check, e.g. "https://paypa1.com/login".
    """
    return url_report_json(url)
