"""A rule baseline for E1: what a careful analyst's first-pass rules would say.

It sees exactly what a model sees (the rendered prompt) and answers in the same JSON
schema, so it runs through the same runner and scoring as any model.
"""

from __future__ import annotations

import json
from typing import Any

from sv_env_network_logs.flows import parse_flow_question

# Ports that IoT botnets (Mirai and kin) scan and brute-force, and classic C&C ports.
_TELNET_PORTS = {23, 2323}
_BOTNET_PORTS = {6667, 6697, 8081, 37215, 52869, 7547, 5555}
_FAILED_STATES = {"S0", "REJ", "RSTOS0", "RSTR", "SH"}


def classify_flow(flow: dict[str, Any]) -> tuple[str, float, str]:
    """(label, confidence, rationale) for one flow, from fixed rules."""
    port = flow.get("id.resp_p")
    state = flow.get("conn_state")
    orig_bytes = flow.get("orig_bytes") or 0
    resp_bytes = flow.get("resp_bytes") or 0
    orig_pkts = flow.get("orig_pkts") or 0
    if not flow:
        return "Abstain", 0.5, "no flow fields found"
    if port in _TELNET_PORTS:
        return "Malicious", 0.9, f"connection to telnet port {port}, a botnet brute-force target"
    if port in _BOTNET_PORTS:
        return "Malicious", 0.85, f"connection to port {port}, commonly used by IoT botnets"
    if state in _FAILED_STATES and orig_bytes == 0 and resp_bytes == 0:
        return "Malicious", 0.7, f"unanswered connection attempt ({state}) with no payload, scan-like"
    if orig_pkts >= 500 and resp_bytes == 0:
        return "Malicious", 0.75, "high packet volume with no response, flood-like"
    if state == "OTH":
        return "Abstain", 0.5, "midstream flow (OTH) gives too little to judge"
    if state == "SF" and port in {53, 80, 123, 443, 8080, 8883, 1883}:
        return "Benign", 0.8, f"completed connection to common service port {port}"
    return "Benign", 0.6, "no rule matched"


def heuristic_reply(prompt: str) -> str:
    """The baseline's completion for a rendered E1 prompt, as a JSON string."""
    label, confidence, rationale = classify_flow(parse_flow_question(prompt))
    return json.dumps({"label": label, "confidence": confidence, "rationale": rationale})


def constant_reply(answer: str, *, confidence: float, request: str = "") -> str:
    """A reference policy's reply: `answer` for every flow, in the answer schema, with the
    confidence it is given (the answer's share of a label prior)."""
    return json.dumps({"label": answer, "confidence": confidence, "rationale": f"reference policy: always {answer}"})
