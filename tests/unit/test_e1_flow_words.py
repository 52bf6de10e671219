"""E1 user rows as people write them: the common {"question", "answer", "meta"} shape with the
flow stated in words (not E1's own `field: value` prompt), read into E1's flow fields, so the
rule baseline judges the flow instead of abstaining for want of fields. The rows are written
here in the shapes such files take (a sentence, key=value pairs, a pipe-separated summary)."""

from __future__ import annotations

import json

import pytest

from sv_env_network_logs import heuristic_reply
from sv_env_network_logs.flow_words import MAX_CHARS, parse_flow_words
from sv_env_network_logs.flows import parse_flow_question
from sv_env_network_logs.plugin import user_flow_row

ROWS = [
    (
        {
            "question": "Is this connection malicious? A TCP connection from 192.168.1.10:49321 to 203.0.113.5:23 "
            "lasted 0.3 s; 0 bytes sent and 0 bytes received; connection state S0.",
            "answer": "Malicious",
            "meta": {"capture": "honeypot-7"},
        },
        {
            "proto": "tcp",
            "id.orig_p": 49321,
            "id.resp_p": 23,
            "duration": 0.3,
            "orig_bytes": 0,
            "resp_bytes": 0,
            "conn_state": "S0",
        },
    ),
    (
        {
            "question": "protocol=udp src_port=5353 dst_port=53 duration=? orig_bytes=64 resp_bytes=128 conn_state=SF",
            "answer": 0,
            "meta": {},
        },
        {
            "proto": "udp",
            "id.orig_p": 5353,
            "id.resp_p": 53,
            "duration": None,
            "orig_bytes": 64,
            "resp_bytes": 128,
            "conn_state": "SF",
        },
    ),
    (
        {
            "question": "Flow summary | Protocol: ICMP | Source port: 8 | Destination port: 0 | Duration: ? | "
            "Bytes sent: ? | Bytes received: ? | Conn state: OTH",
            "answer": "Benign",
            "meta": {"id": "x-3"},
        },
        {
            "proto": "icmp",
            "id.orig_p": 8,
            "id.resp_p": 0,
            "duration": None,
            "orig_bytes": None,
            "resp_bytes": None,
            "conn_state": "OTH",
        },
    ),
    (
        {
            "question": "Classify: tcp traffic, source port ?, to port 443, lasting 1,500 ms; the client sent 1.5 KB "
            "and received 12,288 bytes in 14 packets; flags ShADadFf; service ssl.",
            "answer": "Benign",
            "meta": {},
        },
        {
            "proto": "tcp",
            "id.orig_p": None,
            "id.resp_p": 443,
            "duration": 1.5,
            "orig_bytes": 1500,
            "resp_bytes": 12288,
            "history": "ShADadFf",
            "service": "ssl",
        },
    ),
    (
        {
            "question": "Connection with TCP flags: SYN, RST from port 40000 to port 2323, 120 packets sent, "
            "duration 2 minutes.",
            "answer": 1,
            "meta": {},
        },
        {
            "proto": "tcp",
            "id.orig_p": 40000,
            "id.resp_p": 2323,
            "duration": 120.0,
            "orig_pkts": 120,
            "history": "SR",
        },
    ),
]


@pytest.mark.parametrize(("row", "expected"), ROWS, ids=[f"row{i}" for i in range(len(ROWS))])
def test_a_flow_stated_in_words_is_read_into_e1s_fields(row: dict, expected: dict) -> None:
    out = user_flow_row(row)
    assert out["question"] == row["question"]  # the model reads the question as written
    flow = out["info"]["flow"]
    assert {name: flow.get(name, "absent") for name in expected} == expected
    assert "notes" not in out["info"]
    assert flow == parse_flow_question(row["question"])  # what the rule baseline reads


def test_the_rule_baseline_judges_flows_stated_in_words() -> None:
    replies = [json.loads(heuristic_reply(row["question"])) for row, _ in ROWS]
    assert all(reply["rationale"] != "no flow fields found" for reply in replies)
    # A telnet-port connection attempt with no payload is flagged, as in E1's own prompts.
    assert replies[0]["label"] == "Malicious" and "telnet" in replies[0]["rationale"]
    assert replies[4]["label"] == "Malicious"


def test_words_that_state_no_flow_leave_a_note_and_nothing_is_guessed() -> None:
    out = user_flow_row({"question": "The device stopped answering after lunch; no reply at all.", "answer": "Benign"})
    assert "flow" not in out["info"] and out["info"]["notes"] == [
        "no flow fields parsed from the question; shown as written"
    ]
    # Out-of-range ports and states that are not Zeek's are not taken.
    assert parse_flow_words("destination port 99999, state XYZ") == {}


def test_rendered_prompts_still_read_as_field_lines() -> None:
    from sv_env_network_logs.flows import render_flow_question

    flow = {"id.orig_p": 1032, "id.resp_p": 80, "proto": "tcp", "duration": 0.44746, "conn_state": "RSTO"}
    parsed = parse_flow_question(render_flow_question(flow))
    assert {name: parsed[name] for name in flow} == flow


def test_only_the_first_max_chars_are_read() -> None:
    stated = "protocol tcp, destination port 23"
    assert parse_flow_words(stated)["id.resp_p"] == 23
    assert parse_flow_words("x" * MAX_CHARS + stated) == {}
    # Hostile repetitions of every pattern's prefix parse to nothing, within the bound.
    hostile = ("from " + "a" * 250 + " " + "1," * 40 + "source port " + " " * 3) * 2000
    assert parse_flow_words(hostile) == {}
