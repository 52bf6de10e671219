"""Network flows in the IoT-23 (Zeek conn.log) shape, and how they are shown to a model.

The field names are those of the Hugging Face dataset `19kmunz/iot-23-preprocessed`, so a
row of the real corpus and a row of the bundled sample render the same way.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

LABELS: tuple[str, ...] = ("Benign", "Malicious", "Abstain")
GOLD_LABELS: tuple[str, ...] = ("Benign", "Malicious")
POSITIVE_LABEL = "Malicious"
# Corpora often store the label as 0/1.
INT_LABELS: dict[int, str] = {0: "Benign", 1: "Malicious"}

# (field, unit shown to the model); the order is the order in the prompt.
FLOW_FIELDS: tuple[tuple[str, str], ...] = (
    ("id.orig_p", ""),
    ("id.resp_p", ""),
    ("proto", ""),
    ("service", ""),
    ("duration", "s"),
    ("orig_bytes", "B"),
    ("resp_bytes", "B"),
    ("conn_state", ""),
    ("missed_bytes", "B"),
    ("history", ""),
    ("orig_pkts", ""),
    ("orig_ip_bytes", "B"),
    ("resp_pkts", ""),
    ("resp_ip_bytes", "B"),
)
FLOW_FIELD_NAMES: tuple[str, ...] = tuple(name for name, _ in FLOW_FIELDS)

SYSTEM_PROMPT = (
    "You are a network security analyst. You classify one network flow from an IoT device "
    "as Benign or Malicious. If the evidence is insufficient, answer Abstain. Missing an "
    "attack costs more than a false alarm. Reply with a single JSON object and nothing "
    'else: {"label": "Benign" | "Malicious" | "Abstain", "confidence": <number 0..1>, '
    '"rationale": "<one sentence>"}'
)

_LINE = re.compile(r"^\s*([A-Za-z_.]+)\s*[:=]\s*(.*?)\s*$")


def _format_value(value: Any) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if isinstance(value, float):
        return f"{value:.6g}"
    return str(value)


def render_flow_question(flow: Mapping[str, Any]) -> str:
    """The user prompt for one flow: one `field: value` line per Zeek field."""
    lines = ["Classify this network flow (Zeek conn.log fields):"]
    for name, unit in FLOW_FIELDS:
        value = _format_value(flow.get(name))
        lines.append(f"{name}: {value}{' ' + unit if unit and value != '-' else ''}")
    return "\n".join(lines)


def parse_flow_question(text: str) -> dict[str, Any]:
    """Read the flow fields back out of a rendered prompt (for rule baselines).

    Numbers come back as int/float, '-' as None; unknown lines are ignored, so it also
    reads prompts from user datasets that follow the same `field: value` convention. Fields
    no such line gives are read from the question's words (`flow_words`: "a TCP connection
    to port 23 lasting 0.3 s").
    """
    flow = _field_lines(text)
    if len(flow) == len(FLOW_FIELDS):  # a rendered prompt states every field
        return flow
    from sv_env_network_logs.flow_words import parse_flow_words

    return {**parse_flow_words(text), **flow}


def _field_lines(text: str) -> dict[str, Any]:
    flow: dict[str, Any] = {}
    for line in (text or "").splitlines():
        match = _LINE.match(line)
        if not match or match.group(1) not in FLOW_FIELD_NAMES:
            continue
        raw = re.sub(r"\s+(s|B)$", "", match.group(2))
        if raw in ("-", ""):
            flow[match.group(1)] = None
            continue
        try:
            number = float(raw)
            flow[match.group(1)] = int(number) if number.is_integer() and "." not in raw else number
        except ValueError:
            flow[match.group(1)] = raw
    return flow
