"""Raw RFC 822 messages (headers, a blank line, the body) as E4 emails.

`eml_fields` reads one message with the standard library's `email` package: From, Reply-To,
To and Subject, the text body (the plain part, else the HTML part converted to text), the
links (URLs in the text and the HTML's `href`s) and the attachments' file names. The email
package's header parser is super-linear on some hostile headers, so `parse_rfc822` runs it in
a worker process with a size cap and a deadline (`sv_shared.bounded`). `looks_like_rfc822`
tells a raw message from the project's rendered prompt, so a user's row that carries a raw
email as its question is read as one.
"""

from __future__ import annotations

import email
import email.policy
import quopri
import re
from email.errors import HeaderParseError
from email.header import decode_header, make_header
from html.parser import HTMLParser
from typing import Any

from sv_shared.bounded import InputRefused, ParserFailed, check_size, run_bounded

MAX_EML_CHARS = 30_000_000
"""Largest RFC 822 message read (mail systems refuse messages over 25 MB)."""
EML_DEADLINE_S = 10.0
"""Seconds parsing one message may take (milliseconds for real mail): the email package's
header parser is super-linear on some hostile headers (a few thousand encoded words or
addresses take seconds), and no cheap pre-check rules that out."""
MAX_LINKS = 50

_URL = re.compile(r"https?://[^\s<>\"')\]]+", re.IGNORECASE)
_FIELD = re.compile(r"^[!-9;-~]+:")
"""An RFC 5322 header line: a field name of printable ASCII without ':' or spaces, then ':'."""
MAIL_HEADERS = frozenset(
    ("from", "to", "subject", "date", "received", "return-path", "message-id", "mime-version", "reply-to", "cc")
)
"""Fields whose presence says a header block is an email's (one of them is required)."""
HEADER_LINES_CHECKED = 500


def links_in(*texts: str) -> list[str]:
    """The http(s) URLs in `texts`, first occurrence first, at most MAX_LINKS."""
    seen: dict[str, None] = {}
    for text in texts:
        for url in _URL.findall(text or ""):
            seen.setdefault(url.rstrip(".,;:"), None)
    return list(seen)[:MAX_LINKS]


class _HtmlText(HTMLParser):
    """Text and hrefs of an HTML body: script and style dropped, block elements as line
    breaks, entities decoded (the standard library's parser: linear in the input)."""

    BLOCKS = frozenset(("br", "p", "div", "tr", "li", "h1", "h2", "h3", "h4", "h5", "h6", "table", "hr", "title"))
    HIDDEN = frozenset(("script", "style", "head"))

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self.hrefs: list[str] = []
        self.hidden = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in self.HIDDEN:
            self.hidden += 1
        if tag in self.BLOCKS:
            self.parts.append("\n")
        if tag == "a":
            self.hrefs.extend(value for name, value in attrs if name == "href" and value)

    def handle_endtag(self, tag: str) -> None:
        if tag in self.HIDDEN:
            self.hidden = max(0, self.hidden - 1)
        if tag in self.BLOCKS:
            self.parts.append("\n")

    def handle_data(self, data: str) -> None:
        if not self.hidden:
            self.parts.append(data)


def html_text(html: str) -> tuple[str, list[str]]:
    """(text, hrefs) of an HTML document; blank runs collapsed to one blank line."""
    parser = _HtmlText()
    parser.feed(html)
    parser.close()
    lines = [" ".join(line.split()) for line in "".join(parser.parts).splitlines()]
    text = re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip()
    return text, parser.hrefs


def _header(message: Any, name: str) -> str:
    """A header's value with RFC 2047 encoded words decoded ("" when absent)."""
    value = message.get(name)
    if value is None:
        return ""
    try:
        return str(make_header(decode_header(str(value))))
    except (HeaderParseError, LookupError, UnicodeError, ValueError):  # a broken encoded word: as written
        return str(value)


def _part_text(part: Any) -> str:
    """A text part's payload as text: as it stands when it was sent as text (7bit, 8bit: the
    message was read as text already), else decoded from base64 or quoted-printable by its
    charset (undecodable bytes replaced)."""
    raw = part.get_payload()
    if not isinstance(raw, str):
        return ""
    encoding = str(part.get("Content-Transfer-Encoding", "")).strip().lower()
    if encoding not in ("base64", "quoted-printable"):
        return raw
    if encoding == "quoted-printable":
        # compat32 would escape non-ASCII text before decoding it; quopri takes the bytes as they are
        payload = quopri.decodestring(raw.encode("utf-8", errors="surrogateescape"))
    else:
        payload = part.get_payload(decode=True)
    if not isinstance(payload, bytes):
        return ""
    charset = part.get_content_charset() or "utf-8"
    try:
        return payload.decode(charset, errors="replace")
    except LookupError:  # an unknown charset name
        return payload.decode("utf-8", errors="replace")


def _filename(part: Any) -> str:
    try:
        name = part.get_filename()
    except (LookupError, UnicodeError, ValueError):
        return ""
    if not name:
        return ""
    try:
        return str(make_header(decode_header(name)))
    except (HeaderParseError, LookupError, UnicodeError, ValueError):
        return name


def eml_fields(text: str) -> dict[str, Any]:
    """From/Reply-To/To/Subject, the text body (the first plain part, else the first HTML part
    as text; attachments are no body), links and attachment names of one RFC 822 message.
    Read with the email package's compat32 policy and the 2047 decoder on the four headers
    used: the default policy parses every header it is asked about into objects, which costs
    milliseconds a message and seconds on some real spam headers. Not bounded in time itself:
    `parse_rfc822` runs it in a worker process with a deadline."""
    message = email.message_from_string(text.replace("\r\n", "\n"), policy=email.policy.compat32)
    plain = html = None
    attachments: list[str] = []
    for part in message.walk():
        if part.is_multipart():
            continue
        name = _filename(part)
        if name or str(part.get("Content-Disposition", "")).strip().lower().startswith("attachment"):
            if name:
                attachments.append(name)
            continue
        kind = part.get_content_type()
        if kind == "text/plain" and plain is None:
            plain = part
        elif kind == "text/html" and html is None:
            html = part
    body = ""
    hrefs: list[str] = []
    if plain is not None:
        body = _part_text(plain)
    elif html is not None:
        body, hrefs = html_text(_part_text(html))
    return {
        "from": _header(message, "From"),
        "reply_to": _header(message, "Reply-To"),
        "to": _header(message, "To"),
        "subject": _header(message, "Subject"),
        "body": body,
        "links": links_in(body, " ".join(hrefs)),
        "attachments": attachments[:MAX_LINKS],
    }


def parse_rfc822(text: str) -> dict[str, Any]:
    """`eml_fields(text)` in a worker process, bounded in size, time and memory: one hostile
    message costs at most EML_DEADLINE_S. Raises InputRefused (too large, too slow) or
    ParserFailed (the email package raised)."""
    check_size(text, MAX_EML_CHARS, "email")
    return run_bounded(f"{__name__}:eml_fields", text, deadline_s=EML_DEADLINE_S, what="email")


def looks_like_rfc822(text: str) -> bool:
    """Whether `text` is a raw message: a header block (field lines and their folded
    continuations, optionally after an mbox `From ` line) holding at least one mail header
    such as From, To or Subject, ended by a blank line or the end of the text. The project's
    rendered prompt is not (its intro line, `- link` lines and `Body:` line are no headers)."""
    lines = text.replace("\r\n", "\n").split("\n")
    if lines and lines[0].startswith("From ") and not lines[0].startswith("From :"):
        lines = lines[1:]  # the mbox separator line
    seen_mail_header = False
    for number, line in enumerate(lines):
        if not line.strip():
            return seen_mail_header and number > 0
        if number >= HEADER_LINES_CHECKED:
            return seen_mail_header
        if line[0] in " \t" and number > 0:
            continue  # a folded header line
        if not _FIELD.match(line):
            return False
        name = line.split(":", 1)[0].casefold()
        if name == "body":
            return False
        seen_mail_header = seen_mail_header or name in MAIL_HEADERS
    return seen_mail_header


def rfc822_email(text: str) -> tuple[dict[str, Any], list[str]]:
    """(raw email fields, notes) of a raw message; never raises. A message the parser
    refuses or fails on keeps its text after the header block as the body (with a note)."""
    try:
        return parse_rfc822(text), []
    except (InputRefused, ParserFailed) as exc:
        head, _, body = text.replace("\r\n", "\n").partition("\n\n")
        fields: dict[str, Any] = {"body": body, "links": links_in(body)}
        for line in head.split("\n"):
            name, colon, value = line.partition(":")
            key = {"from": "from", "reply-to": "reply_to", "to": "to", "subject": "subject"}.get(name.casefold())
            if colon and key and key not in fields:
                fields[key] = value.strip()
        return fields, [f"email headers read without the email package ({exc})"[:300]]
