"""Flows stated in words, as people write them in a question ("a TCP connection from
10.0.0.5:49152 to port 23 lasting 0.3 s, 0 bytes sent and 0 received, state S0"), read into
the Zeek conn.log fields E1 scores (`flows.FLOW_FIELDS`).

What is read: the protocol (tcp, udp, icmp), source and destination ports (`source port N`,
`src_port=N`, `from HOST:N`, `to port N`, `dport N`), the duration (`duration 2.5 s`,
`lasted 120 ms`), bytes and packets each way (`120 bytes sent`, `received 1.2 KB`,
`orig_bytes=120`, `bytes in: 5,120`), the service, the connection state (Zeek's codes: S0,
SF, REJ, ...), and the TCP history (`history ShADadFf`, `flags: SYN, ACK` as Zeek's
originator letters S, A, F, R). A value written `?` (or `-`) is stated missing: the field
is present, None. Nothing is guessed from prose ("no reply" is not read as S0).

Bounded: only the first `MAX_CHARS` characters are read, and every pattern has bounded
repetition, so the time taken grows linearly with that prefix and never with the rest.
"""

from __future__ import annotations

import re
from typing import Any

MAX_CHARS = 4000
"""Characters of a question read for flow fields (a flow stated in words fits in a few hundred)."""

ZEEK_STATES = frozenset(("S0", "S1", "SF", "REJ", "S2", "S3", "RSTO", "RSTR", "RSTOS0", "RSTRH", "SH", "SHR", "OTH"))
_TCP_FLAGS = {"SYN": "S", "ACK": "A", "FIN": "F", "RST": "R"}
_UNITS = {"b": 1, "byte": 1, "bytes": 1, "kb": 1000, "kib": 1024, "mb": 1_000_000, "mib": 1_048_576}
_SECONDS = {"ms": 1e-3, "msec": 1e-3, "millisecond": 1e-3, "milliseconds": 1e-3, "min": 60.0, "minute": 60.0}
_SECONDS["minutes"] = 60.0

_NUM = r"(\d{1,3}(?:,\d{3}){1,5}|\d{1,15}(?:\.\d{1,9})?|\.\d{1,9}|\?|-(?![\d.]))"
_SEP = r"\s{0,3}(?:[:=#]|\bis\b|\bwas\b|\bof\b)?\s{0,3}"
_COLON = r"\s{0,3}[:=]\s{0,3}"
"""`bytes in: 5,120` needs its separator: `bytes in 14 packets` states no byte count."""
_BYTE_UNIT = r"\s{0,2}(bytes?|B|[kKmM]i?B)\b"
_HOST = r"[\w.-]{1,253}"

_I = re.IGNORECASE


def _field(names: str) -> str:
    """`names` as a field label followed by a separator (`src_port=`, `source port:`, `dport is`)."""
    return rf"\b(?:{names})\b{_SEP}"


_PATTERNS: dict[str, tuple[re.Pattern[str], ...]] = {
    "proto": (
        re.compile(_field(r"proto(?:col)?") + r"(tcp|udp|icmp|\?)\b", _I),
        re.compile(r"\b(tcp|udp|icmp)\b", _I),
    ),
    "id.orig_p": (
        re.compile(_field(r"(?:source|src|orig(?:inator)?|client|local)[ _.-]?port|sport|id\.orig_p") + _NUM, _I),
        re.compile(r"\bfrom\s{1,3}port\s{1,3}" + _NUM, _I),
        re.compile(rf"\bfrom\s{{1,3}}{_HOST}:(\d{{1,5}})\b", _I),
    ),
    "id.resp_p": (
        re.compile(
            _field(r"(?:destination|dest|dst|resp(?:onder)?|server|remote|target)[ _.-]?port|dport|id\.resp_p") + _NUM,
            _I,
        ),
        re.compile(r"\b(?:to|on|at)\s{1,3}port\s{1,3}" + _NUM, _I),
        re.compile(rf"\bto\s{{1,3}}{_HOST}:(\d{{1,5}})\b", _I),
    ),
    "duration": (
        re.compile(
            r"\b(?:duration|dur|lasted|lasting|lasts|took|length)\b(?:\s{1,3}for)?"
            + _SEP
            + _NUM
            + r"(?:\s{0,2}(ms|msec|milliseconds?|s|secs?|seconds?|min|minutes?)\b)?",
            _I,
        ),
    ),
    "orig_bytes": (
        re.compile(_field(r"(?:orig(?:inator)?|src|source|client|outbound|upload(?:ed)?|tx)[ _.-]?bytes") + _NUM, _I),
        re.compile(r"\bbytes\s{1,3}(?:sent|out|outbound|uploaded)" + _COLON + _NUM, _I),
        re.compile(_NUM + _BYTE_UNIT + r"\s{0,3}(?:were\s{1,3})?(?:sent|out|outbound|uploaded|upstream)\b", _I),
        re.compile(r"\b(?:sent|sending|uploaded)\s{1,3}" + _NUM + _BYTE_UNIT, _I),
    ),
    "resp_bytes": (
        re.compile(
            _field(r"(?:resp(?:onder)?|dst|dest|destination|server|inbound|download(?:ed)?|rx)[ _.-]?bytes") + _NUM, _I
        ),
        re.compile(r"\bbytes\s{1,3}(?:received|in|inbound|downloaded|returned|back)" + _COLON + _NUM, _I),
        re.compile(
            _NUM + _BYTE_UNIT + r"\s{0,3}(?:were\s{1,3})?(?:received|in|inbound|downloaded|returned|back|downstream)\b",
            _I,
        ),
        re.compile(r"\b(?:received|receiving|downloaded|got)\s{1,3}" + _NUM + _BYTE_UNIT, _I),
    ),
    "orig_pkts": (
        re.compile(_field(r"(?:orig(?:inator)?|src|source|client|outbound|tx)[ _.-]?(?:pkts|packets)") + _NUM, _I),
        re.compile(_NUM + r"\s{0,2}(?:packets?|pkts)\s{0,3}(?:were\s{1,3})?(?:sent|out|outbound)\b", _I),
    ),
    "resp_pkts": (
        re.compile(
            _field(r"(?:resp(?:onder)?|dst|dest|destination|server|inbound|rx)[ _.-]?(?:pkts|packets)") + _NUM, _I
        ),
        re.compile(_NUM + r"\s{0,2}(?:packets?|pkts)\s{0,3}(?:were\s{1,3})?(?:received|in|inbound|back)\b", _I),
    ),
    "service": (re.compile(_field(r"service|app(?:lication)?[ _-]?protocol") + r"([a-z][\w-]{0,15}|\?)", _I),),
    "conn_state": (
        re.compile(_field(r"conn(?:ection)?[ _.-]?state|state") + r"([A-Za-z0-9]{2,6}|\?)", _I),
        re.compile(r"\b(" + "|".join(sorted(ZEEK_STATES, key=len, reverse=True)) + r")\b"),
    ),
    "history": (
        re.compile(
            _field(r"history|(?:tcp[ _-]?)?flags")
            + r"((?:SYN|ACK|FIN|RST)(?:\s{0,2}[,/+|-]?\s{0,2}(?:SYN|ACK|FIN|RST)){0,7})\b",
            _I,
        ),
        re.compile(_field(r"history|(?:tcp[ _-]?)?flags") + r"([ShHADadFfRrCcGgIiQqTtWw^]{1,32}|\?)(?![\w])"),
    ),
}


def _number(raw: str, unit: str | None = None, scale: dict[str, float] | None = None) -> int | float | None:
    if raw in ("?", "-"):
        return None
    value = float(raw.replace(",", ""))
    factor = (scale or {}).get((unit or "").lower(), 1.0)
    value *= factor
    return int(value) if value.is_integer() and "." not in raw and factor >= 1 else value


def _bytes(raw: str, unit: str | None) -> int | float | None:
    if raw in ("?", "-"):
        return None
    factor = _UNITS.get((unit or "b").lower(), 1)
    value = float(raw.replace(",", "")) * factor
    return int(value) if value.is_integer() else value


def _value(name: str, match: re.Match[str]) -> tuple[bool, Any]:
    """(usable, value) of one match of field `name`."""
    raw = match.group(1)
    if name in ("proto", "service"):
        return True, None if raw == "?" else raw.lower()
    if name in ("id.orig_p", "id.resp_p"):
        port = _number(raw)
        return port is None or 0 <= port <= 65535, port
    if name == "duration":
        return True, _number(raw, match.group(2), _SECONDS)
    if name in ("orig_bytes", "resp_bytes"):
        return True, _bytes(raw, match.group(2) if match.lastindex and match.lastindex >= 2 else None)
    if name in ("orig_pkts", "resp_pkts"):
        return True, _number(raw)
    if name == "conn_state":
        state = raw.upper()
        return raw == "?" or state in ZEEK_STATES, None if raw == "?" else state
    # history: Zeek's letters as written, or TCP flag names as the originator's letters
    if raw == "?":
        return True, None
    names = re.findall(r"SYN|ACK|FIN|RST", raw, _I)
    return True, "".join(_TCP_FLAGS[n.upper()] for n in names) if names else raw


def parse_flow_words(text: str) -> dict[str, Any]:
    """The flow fields a question states in words (see the module docstring); fields it does
    not state are absent. Reads at most `MAX_CHARS` characters."""
    head = (text or "")[:MAX_CHARS]
    flow: dict[str, Any] = {}
    for name, patterns in _PATTERNS.items():
        for pattern in patterns:
            found = next((v for m in pattern.finditer(head) if (v := _value(name, m))[0]), None)
            if found is not None:
                flow[name] = found[1]
                break
    return flow
