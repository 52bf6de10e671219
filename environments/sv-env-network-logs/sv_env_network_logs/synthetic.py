"""Synthetic E1 flows: attack playbooks, perturbed seed flows, validation and labelling.

Columnar (numpy arrays keyed by the IoT-23 field names) so a 100,000-row batch is
generated, checked and labelled in chunks without a Python loop per field. numpy comes
with verifiers, this package's dependency.

- Playbooks simulate benign IoT traffic and five attack families: port scan, brute force,
  C&C beaconing, exfiltration and DDoS (UDP and SYN floods), each a named scenario with a
  label, a relative frequency within its label, and a curriculum tag.
- `perturb_flows` varies real (seed) flows inside valid ranges: ephemeral source ports,
  a responder port swapped within its service family, durations and byte counts scaled
  (packets and IP-level bytes kept consistent), host addresses moved inside their /24 when
  the seed has them (the preprocessed IoT-23 schema has none).
- `validate_flows` checks the schema and value ranges; `verify_labels` is the labeller:
  each scenario's invariant (a port scan carries no payload, a flood gets no answer, ...)
  must hold for the label to stand. `difficulty` asks the environment's rule baseline: a
  flow it gets wrong is hard (2), one it gets right easy (0) (the curriculum's 0..2 scale).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from sv_env_network_logs.baseline import classify_flow
from sv_env_network_logs.flows import FLOW_FIELD_NAMES, GOLD_LABELS, render_flow_question

GENERATOR_ID = "sv-env-network-logs/synthetic"
GENERATOR_VERSION = "1"
VERIFIER_ID = "e1-scenario-invariants@1"
"""The labeller's id (bump when an invariant changes)."""

Columns = dict[str, np.ndarray]
INT_FIELDS = (
    "id.orig_p",
    "id.resp_p",
    "orig_bytes",
    "resp_bytes",
    "missed_bytes",
    "orig_pkts",
    "orig_ip_bytes",
    "resp_pkts",
    "resp_ip_bytes",
)
STR_FIELDS = ("proto", "service", "conn_state", "history")
TAG_FIELDS = ("label", "scenario", "family", "origin")
HOST_FIELDS = ("id.orig_h", "id.resp_h")
ZEEK_STATES = frozenset({"S0", "S1", "SF", "REJ", "S2", "S3", "RSTO", "RSTR", "RSTOS0", "RSTRH", "SH", "SHR", "OTH"})
PROTOS = frozenset({"tcp", "udp", "icmp"})
_HISTORY = re.compile(r"^(-|[ShADadFfRrCcGgTtWwIiQq^]{1,64})$")
MAX_DURATION_S = 7 * 86400.0
MAX_BYTES = 10**12
_HEADER = {"tcp": 40, "udp": 28, "icmp": 28}


def _choice(rng: np.random.Generator, values: list[Any], n: int, p: list[float] | None = None) -> np.ndarray:
    return np.asarray(values, dtype=object)[rng.choice(len(values), size=n, p=p)]


def _flows(
    rng: np.random.Generator,
    n: int,
    *,
    proto: str | np.ndarray,
    resp_p: np.ndarray,
    state: np.ndarray | str,
    ob: np.ndarray,
    rb: np.ndarray,
    dur: np.ndarray,
    history: np.ndarray | str,
    service: np.ndarray | str = "-",
    op: np.ndarray | None = None,
    rp: np.ndarray | None = None,
) -> Columns:
    """Columns for `n` flows; packets and IP-level bytes follow from the payload unless given."""
    protos = np.full(n, proto, dtype=object) if isinstance(proto, str) else proto
    ob, rb = ob.astype(np.int64), rb.astype(np.int64)
    if op is None:
        op = np.where(ob > 0, ob // 500 + rng.integers(1, 5, n), rng.integers(1, 4, n))
    if rp is None:
        rp = np.where(rb > 0, rb // 1000 + rng.integers(1, 5, n), 0)
    header = np.where(protos == "tcp", 40, 28)
    tcp = protos == "tcp"
    orig_p = np.where(tcp, rng.integers(32768, 61000, n), rng.integers(1024, 65536, n))
    return {
        "id.orig_p": orig_p.astype(np.int64),
        "id.resp_p": np.asarray(resp_p, dtype=np.int64),
        "proto": protos,
        "service": np.full(n, service, dtype=object) if isinstance(service, str) else service,
        "duration": np.round(np.asarray(dur, dtype=np.float64), 6),
        "orig_bytes": ob,
        "resp_bytes": rb,
        "conn_state": np.full(n, state, dtype=object) if isinstance(state, str) else state,
        "missed_bytes": np.zeros(n, dtype=np.int64),
        "history": np.full(n, history, dtype=object) if isinstance(history, str) else history,
        "orig_pkts": op.astype(np.int64),
        "orig_ip_bytes": (ob + header * op).astype(np.int64),
        "resp_pkts": rp.astype(np.int64),
        "resp_ip_bytes": (rb + header * rp).astype(np.int64),
    }


# -- playbooks -----------------------------------------------------------------------------


def benign_web(rng, n):
    port = _choice(rng, [80, 443, 443, 8080], n).astype(np.int64)
    service = np.where(port == 80, "http", np.where(port == 443, "ssl", "-")).astype(object)
    return _flows(
        rng,
        n,
        proto="tcp",
        resp_p=port,
        state="SF",
        ob=rng.integers(200, 2001, n),
        rb=rng.integers(500, 60001, n),
        dur=rng.uniform(0.05, 5, n),
        history="ShADadFf",
        service=service,
    )


def benign_dns(rng, n):
    return _flows(
        rng,
        n,
        proto="udp",
        resp_p=np.full(n, 53),
        state="SF",
        ob=rng.integers(30, 81, n),
        rb=rng.integers(60, 301, n),
        dur=rng.uniform(0, 0.2, n),
        history="Dd",
        service="dns",
        op=np.ones(n, np.int64),
        rp=np.ones(n, np.int64),
    )


def benign_ntp(rng, n):
    return _flows(
        rng,
        n,
        proto="udp",
        resp_p=np.full(n, 123),
        state="SF",
        ob=np.full(n, 48),
        rb=np.full(n, 48),
        dur=rng.uniform(0, 0.1, n),
        history="Dd",
        op=np.ones(n, np.int64),
        rp=np.ones(n, np.int64),
    )


def benign_mqtt(rng, n):
    port = _choice(rng, [1883, 8883], n).astype(np.int64)
    return _flows(
        rng,
        n,
        proto="tcp",
        resp_p=port,
        state="SF",
        ob=rng.integers(100, 901, n),
        rb=rng.integers(20, 401, n),
        dur=rng.uniform(10, 600, n),
        history="ShADadfF",
        service=np.where(port == 8883, "ssl", "-").astype(object),
    )


def benign_failed(rng, n):  # a device retrying an unreachable cloud endpoint: scan-like, benign
    return _flows(
        rng,
        n,
        proto="tcp",
        resp_p=np.full(n, 443),
        state="S0",
        ob=np.zeros(n),
        rb=np.zeros(n),
        dur=np.zeros(n),
        history="S",
        op=rng.integers(1, 4, n),
        rp=np.zeros(n, np.int64),
    )


def port_scan(rng, n):
    common = _choice(rng, [22, 23, 80, 81, 443, 2222, 8080, 8291, 37215], n).astype(np.int64)
    port = np.where(rng.random(n) < 0.4, rng.integers(1, 65536, n), common)
    return _flows(
        rng,
        n,
        proto="tcp",
        resp_p=port,
        state=_choice(rng, ["S0", "S0", "REJ"], n),
        ob=np.zeros(n),
        rb=np.zeros(n),
        dur=np.where(rng.random(n) < 0.7, 0.0, rng.uniform(0, 0.01, n)),
        history="S",
        op=rng.integers(1, 3, n),
        rp=np.zeros(n, np.int64),
    )


def brute_force(rng, n):
    port = _choice(rng, [22, 23, 2323, 21, 3389], n).astype(np.int64)
    return _flows(
        rng,
        n,
        proto="tcp",
        resp_p=port,
        state=_choice(rng, ["SF", "RSTO", "RSTR", "S1"], n),
        ob=rng.integers(20, 301, n),
        rb=rng.integers(20, 401, n),
        dur=rng.uniform(0.2, 4.0, n),
        history="ShAdDaFr",
        service=np.where(port == 22, "ssh", np.where(port == 21, "ftp", "-")).astype(object),
    )


def c2_beacon_irc(rng, n):
    return _flows(
        rng,
        n,
        proto="tcp",
        resp_p=_choice(rng, [6667, 6697, 8081], n).astype(np.int64),
        state="SF",
        ob=rng.integers(50, 401, n),
        rb=rng.integers(50, 801, n),
        dur=rng.uniform(30, 300, n),
        history="ShADadFf",
    )


def c2_beacon_https(rng, n):  # beaconing over 443: looks like web traffic to a rule baseline
    return _flows(
        rng,
        n,
        proto="tcp",
        resp_p=np.full(n, 443),
        state="SF",
        ob=rng.integers(150, 301, n),
        rb=rng.integers(100, 251, n),
        dur=rng.uniform(0.1, 1.0, n),
        history="ShADadFf",
        service="ssl",
    )


def exfiltration(rng, n):
    port = _choice(rng, [8443, 4444, 9001, 21, 443], n).astype(np.int64)
    return _flows(
        rng,
        n,
        proto="tcp",
        resp_p=port,
        state="SF",
        ob=rng.integers(1_000_000, 20_000_001, n),
        rb=rng.integers(100, 2001, n),
        dur=rng.uniform(20, 600, n),
        history="ShADadFf",
        service=np.where(port == 443, "ssl", np.where(port == 21, "ftp-data", "-")).astype(object),
    )


def udp_flood(rng, n):
    return _flows(
        rng,
        n,
        proto="udp",
        resp_p=rng.integers(1024, 65536, n),
        state="S0",
        ob=rng.integers(50_000, 500_001, n),
        rb=np.zeros(n),
        dur=rng.uniform(0.5, 10, n),
        history="D",
        op=rng.integers(600, 6001, n),
        rp=np.zeros(n, np.int64),
    )


def syn_flood(rng, n):
    return _flows(
        rng,
        n,
        proto="tcp",
        resp_p=_choice(rng, [80, 443, 8080], n).astype(np.int64),
        state="S0",
        ob=np.zeros(n),
        rb=np.zeros(n),
        dur=rng.uniform(1, 30, n),
        history="S",
        op=rng.integers(500, 5001, n),
        rp=np.zeros(n, np.int64),
    )


def _ports(cols: Columns, ports: set[int]) -> np.ndarray:
    return np.isin(cols["id.resp_p"], list(ports))


def _payload(cols: Columns) -> np.ndarray:
    return (cols["orig_bytes"] + cols["resp_bytes"]) > 0


@dataclass(frozen=True)
class Playbook:
    label: str
    family: str
    """Curriculum tag: the attack family (or `benign`)."""
    weight: float
    make: Callable[[np.random.Generator, int], Columns]
    invariant: Callable[[Columns], np.ndarray]
    """What must hold for the label to stand (the labeller's rule for this scenario)."""
    rule: str


PLAYBOOKS: dict[str, Playbook] = {
    "benign_web": Playbook(
        "Benign",
        "benign",
        4,
        benign_web,
        lambda c: (c["conn_state"] == "SF") & (c["resp_bytes"] > 0),
        "completed exchange with a response",
    ),
    "benign_dns": Playbook(
        "Benign",
        "benign",
        2,
        benign_dns,
        lambda c: (c["proto"] == "udp") & (c["id.resp_p"] == 53) & (c["orig_bytes"] < 512),
        "small UDP query to port 53",
    ),
    "benign_ntp": Playbook(
        "Benign",
        "benign",
        1,
        benign_ntp,
        lambda c: (c["id.resp_p"] == 123) & (c["orig_bytes"] <= 96),
        "NTP-sized exchange on 123",
    ),
    "benign_mqtt": Playbook(
        "Benign",
        "benign",
        2,
        benign_mqtt,
        lambda c: _ports(c, {1883, 8883}) & (c["orig_bytes"] < 10_000),
        "small MQTT telemetry session",
    ),
    "benign_failed_connection": Playbook(
        "Benign",
        "benign",
        1,
        benign_failed,
        lambda c: (c["id.resp_p"] == 443) & ~_payload(c) & (c["orig_pkts"] <= 5),
        "a few unanswered SYNs to one cloud endpoint",
    ),
    "port_scan": Playbook(
        "Malicious",
        "port_scan",
        3,
        port_scan,
        lambda c: ~_payload(c) & np.isin(c["conn_state"], ["S0", "REJ", "RSTOS0", "RSTR", "SH"]),
        "no payload, connection not established",
    ),
    "brute_force": Playbook(
        "Malicious",
        "brute_force",
        2,
        brute_force,
        lambda c: _ports(c, {21, 22, 23, 2323, 3389}) & (c["duration"] < 10) & (c["orig_bytes"] < 2_000),
        "short session to an authentication port",
    ),
    "c2_beacon_irc": Playbook(
        "Malicious",
        "c2_beaconing",
        1,
        c2_beacon_irc,
        lambda c: _ports(c, {6667, 6697, 8081}) & (c["orig_bytes"] < 2_000),
        "small periodic session to a C&C port",
    ),
    "c2_beacon_https": Playbook(
        "Malicious",
        "c2_beaconing",
        1.5,
        c2_beacon_https,
        lambda c: (c["id.resp_p"] == 443) & (c["orig_bytes"] < 1_000) & (c["resp_bytes"] < 1_000) & (c["duration"] < 5),
        "small, short, fixed-size beacon over 443",
    ),
    "exfiltration": Playbook(
        "Malicious",
        "exfiltration",
        1,
        exfiltration,
        lambda c: (c["orig_bytes"] >= 1_000_000) & (c["orig_bytes"] > 100 * c["resp_bytes"]),
        "at least 1 MB uploaded, 100x more than received",
    ),
    "udp_flood": Playbook(
        "Malicious",
        "ddos",
        1.5,
        udp_flood,
        lambda c: (c["proto"] == "udp") & (c["orig_pkts"] >= 500) & (c["resp_bytes"] == 0),
        "at least 500 packets, no answer",
    ),
    "syn_flood": Playbook(
        "Malicious",
        "ddos",
        1,
        syn_flood,
        lambda c: (c["proto"] == "tcp") & (c["orig_pkts"] >= 500) & ~_payload(c) & (c["conn_state"] == "S0"),
        "at least 500 SYNs, no handshake",
    ),
}
"""Scenarios a seed corpus may name too: the bundled IoT-23 sample's scenario names map here."""
SCENARIO_ALIASES = {
    "telnet_bruteforce": "brute_force",
    "cc_beacon_irc": "c2_beacon_irc",
    "cc_beacon_https": "c2_beacon_https",
    "benign_midstream": None,
}


def scenario_playbook(name: str | None) -> Playbook | None:
    if not name:
        return None
    name = SCENARIO_ALIASES.get(name, name)
    return PLAYBOOKS.get(name) if name else None


def empty_columns() -> Columns:
    cols: Columns = {name: np.zeros(0, dtype=np.int64) for name in INT_FIELDS}
    cols["duration"] = np.zeros(0, dtype=np.float64)
    for name in (*STR_FIELDS, *TAG_FIELDS):
        cols[name] = np.zeros(0, dtype=object)
    return cols


def concat(parts: list[Columns]) -> Columns:
    parts = [p for p in parts if len(p["label"])]
    if not parts:
        return empty_columns()
    keys = [k for k in parts[0] if all(k in p for p in parts)]
    return {k: np.concatenate([p[k] for p in parts]) for k in keys}


def take(cols: Columns, index: np.ndarray) -> Columns:
    return {k: v[index] for k, v in cols.items()}


def playbook_flows(n: int, rng: np.random.Generator, attack_share: float = 0.5) -> Columns:
    """`n` flows from the playbooks: each row Malicious with probability `attack_share`,
    then a scenario of that label by the playbooks' weights."""
    if n <= 0:
        return empty_columns()
    malicious = rng.random(n) < attack_share
    parts = []
    for label, mask in (("Malicious", malicious), ("Benign", ~malicious)):
        names = [name for name, p in PLAYBOOKS.items() if p.label == label]
        weights = np.array([PLAYBOOKS[name].weight for name in names], dtype=float)
        picks = rng.choice(len(names), size=int(mask.sum()), p=weights / weights.sum())
        for i, name in enumerate(names):
            count = int((picks == i).sum())
            if not count:
                continue
            book = PLAYBOOKS[name]
            cols = book.make(rng, count)
            cols.update(
                label=np.full(count, label, dtype=object),
                scenario=np.full(count, name, dtype=object),
                family=np.full(count, book.family, dtype=object),
                origin=np.full(count, "playbook", dtype=object),
            )
            parts.append(cols)
    out = concat(parts)
    return take(out, rng.permutation(len(out["label"])))


# -- perturbation of seed flows ----------------------------------------------------------

PORT_FAMILIES: tuple[tuple[int, ...], ...] = ((80, 8080), (443, 8443), (23, 2323), (1883, 8883), (6667, 6697))
"""Responder ports a perturbation may swap for one another (same service family)."""


def _swap_ports(ports: np.ndarray, rng: np.random.Generator, p: float) -> np.ndarray:
    out = ports.copy()
    swap = rng.random(len(ports)) < p
    for family in PORT_FAMILIES:
        for port in family:
            mask = swap & (ports == port)
            if mask.any():
                others = [q for q in family if q != port]
                out[mask] = np.asarray(others)[rng.integers(0, len(others), int(mask.sum()))]
    return out


def _move_host(hosts: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """IPv4 addresses moved to another host of their /24 (anything else kept)."""
    out = hosts.copy()
    last = rng.integers(1, 255, len(hosts))
    for i, host in enumerate(hosts):
        parts = str(host).split(".")
        if len(parts) == 4 and all(p.isdigit() for p in parts):
            out[i] = ".".join([*parts[:3], str(int(last[i]))])
    return out


def _scale_count(values: np.ndarray, factor: np.ndarray) -> np.ndarray:
    """Non-negative integers scaled; zero stays zero and a positive count stays >= 1."""
    scaled = np.rint(values * factor).astype(np.int64)
    return np.where(values > 0, np.maximum(scaled, 1), 0)


def perturb_flows(
    seed: Columns, n: int, rng: np.random.Generator, *, port_swap_p: float = 0.2, sigma: float = 0.25
) -> Columns:
    """`n` variants of seed flows (sampled with replacement): source ports resampled,
    responder ports swapped within a family with probability `port_swap_p`, durations and
    byte counts scaled by log-normal factors (sigma), packets scaled with the bytes and
    IP-level bytes recomputed with each row's own per-packet header size; host addresses
    moved within their /24 when present. Labels and scenarios are the seeds'; a perturbation
    that breaks its scenario's invariant is caught by `verify_labels`."""
    m = len(seed["label"])
    if n <= 0 or m == 0:
        return empty_columns()
    index = rng.integers(0, m, n)
    cols = take(seed, index)
    cols["seed_index"] = index.astype(np.int64)
    tcp = cols["proto"] == "tcp"
    cols["id.orig_p"] = np.where(tcp, rng.integers(32768, 61000, n), rng.integers(1024, 65536, n)).astype(np.int64)
    cols["id.resp_p"] = _swap_ports(cols["id.resp_p"].astype(np.int64), rng, port_swap_p)
    cols["duration"] = np.round(
        np.clip(cols["duration"].astype(np.float64) * rng.lognormal(0, sigma, n), 0, MAX_DURATION_S), 6
    )
    for side in ("orig", "resp"):
        factor = rng.lognormal(0, sigma, n)
        bytes_, pkts = cols[f"{side}_bytes"].astype(np.int64), cols[f"{side}_pkts"].astype(np.int64)
        ip_bytes = cols[f"{side}_ip_bytes"].astype(np.int64)
        header = np.where(pkts > 0, np.maximum(ip_bytes - bytes_, 0) // np.maximum(pkts, 1), 0)
        new_bytes = _scale_count(bytes_, factor)
        new_pkts = _scale_count(pkts, np.where(bytes_ > 0, factor, 1.0))
        cols[f"{side}_bytes"], cols[f"{side}_pkts"] = new_bytes, new_pkts
        cols[f"{side}_ip_bytes"] = new_bytes + header * new_pkts
    for host in HOST_FIELDS:
        if host in cols:
            cols[host] = _move_host(cols[host], rng)
    cols["origin"] = np.full(n, "perturbed", dtype=object)
    return cols


def seed_columns(flows: Sequence[Mapping[str, Any]]) -> tuple[Columns, list[tuple[int, str]]]:
    """Seed flows (dicts with the flow fields, `label`, optional `scenario`) as columns,
    and (position, reason) for each unusable one (missing field, non-numeric count, label
    outside Benign/Malicious): those are reported by the caller, never used."""
    kept: list[Mapping[str, Any]] = []
    problems: list[tuple[int, str]] = []
    for i, flow in enumerate(flows):
        # Zeek writes "-" for an unset text field (a rendered prompt reads back as None).
        flow = {**flow, **{name: "-" for name in STR_FIELDS if flow.get(name) is None}}
        missing = [name for name in FLOW_FIELD_NAMES if flow.get(name) is None]
        if missing:
            problems.append((i, f"missing flow field(s) {missing}"))
            continue
        if flow.get("label") not in GOLD_LABELS:
            problems.append((i, f"label {flow.get('label')!r} is not one of {list(GOLD_LABELS)}"))
            continue
        bad = [
            name
            for name in (*INT_FIELDS, "duration")
            if not isinstance(flow[name], (int, float)) or isinstance(flow[name], bool)
        ]
        if bad:
            problems.append((i, f"non-numeric field(s) {bad}"))
            continue
        kept.append(flow)
    cols = empty_columns()
    if kept:
        n = len(kept)
        cols = {name: np.array([int(f[name]) for f in kept], dtype=np.int64) for name in INT_FIELDS}
        cols["duration"] = np.array([float(f["duration"]) for f in kept], dtype=np.float64)
        for name in STR_FIELDS:
            cols[name] = np.array([str(f[name]) for f in kept], dtype=object)
        named = [str(f.get("scenario") or "") for f in kept]
        scenarios = [SCENARIO_ALIASES.get(s) or s for s in named]  # canonical name where a playbook matches
        cols["label"] = np.array([f["label"] for f in kept], dtype=object)
        cols["scenario"] = np.array([s or "unknown" for s in scenarios], dtype=object)
        cols["family"] = np.array(
            [PLAYBOOKS[s].family if s in PLAYBOOKS else "unknown" for s in scenarios], dtype=object
        )
        cols["origin"] = np.full(n, "seed", dtype=object)
        for host in HOST_FIELDS:
            if all(host in f for f in kept):
                cols[host] = np.array([str(f[host]) for f in kept], dtype=object)
    return cols, problems


# -- validation and labelling -------------------------------------------------------------


def validate_flows(cols: Columns) -> np.ndarray:
    """Per row: None when the flow is in the schema with valid values, else the first
    problem found (object array)."""
    n = len(cols["label"])
    reasons = np.full(n, None, dtype=object)

    def flag(mask: np.ndarray, reason: str) -> None:
        reasons[mask & (reasons == None)] = reason  # noqa: E711 - numpy elementwise comparison

    for port in ("id.orig_p", "id.resp_p"):
        flag((cols[port] < 0) | (cols[port] > 65535), f"{port} outside 0..65535")
    flag(~np.isin(cols["proto"], list(PROTOS)), f"proto not one of {sorted(PROTOS)}")
    flag(~np.isin(cols["conn_state"], list(ZEEK_STATES)), "conn_state is not a Zeek connection state")
    duration = cols["duration"].astype(np.float64)
    flag(~np.isfinite(duration) | (duration < 0) | (duration > MAX_DURATION_S), "duration not in 0..7 days")
    for name in (
        "orig_bytes",
        "resp_bytes",
        "missed_bytes",
        "orig_pkts",
        "resp_pkts",
        "orig_ip_bytes",
        "resp_ip_bytes",
    ):
        flag((cols[name] < 0) | (cols[name] > MAX_BYTES), f"{name} not in 0..1e12")
    for side in ("orig", "resp"):
        flag(cols[f"{side}_ip_bytes"] < cols[f"{side}_bytes"], f"{side}_ip_bytes smaller than {side}_bytes")
        flag((cols[f"{side}_bytes"] > 0) & (cols[f"{side}_pkts"] == 0), f"{side}_bytes without packets")
    flag(
        np.array([not _HISTORY.match(str(h)) for h in cols["history"]], dtype=bool),
        "history is not a Zeek history string",
    )
    flag(~np.isin(cols["label"], list(GOLD_LABELS)), f"label not one of {list(GOLD_LABELS)}")
    return reasons


def verify_labels(cols: Columns) -> np.ndarray:
    """The labeller: per row None when the label stands (the scenario's invariant holds,
    or the seed named no scenario we know), else why not. A scenario whose playbook has
    the other label is a contradiction too."""
    n = len(cols["label"])
    reasons = np.full(n, None, dtype=object)
    for name in np.unique(cols["scenario"]):
        book = scenario_playbook(str(name))
        if book is None:
            continue
        rows = cols["scenario"] == name
        sub = take(cols, np.flatnonzero(rows))
        broken = ~book.invariant(sub)
        wrong_label = sub["label"] != book.label
        why = np.where(
            wrong_label,
            f"scenario {name} is {book.label}, row says otherwise",
            # numpy's stubs take no None for a branch; numpy gives an object array
            np.where(broken, f"{name} invariant broken: {book.rule}", None),  # type: ignore[call-overload]
        )
        reasons[np.flatnonzero(rows)] = why
    return reasons


def baseline_labels(cols: Columns) -> np.ndarray:
    """The environment's rule baseline's label for each flow (a difficulty signal)."""
    names = list(FLOW_FIELD_NAMES)
    columns = [cols[name].tolist() for name in names]
    return np.array([classify_flow(dict(zip(names, values)))[0] for values in zip(*columns)], dtype=object)


def difficulty(cols: Columns) -> np.ndarray:
    """2 (hard) where the rule baseline disagrees with the label (or abstains), else 0 (easy)."""
    return np.where(baseline_labels(cols) == cols["label"], 0, 2).astype(np.int64)


def flow_dict(cols: Columns, i: int) -> dict[str, Any]:
    return {
        name: cols[name][i].item() if hasattr(cols[name][i], "item") else cols[name][i] for name in FLOW_FIELD_NAMES
    }


def example(cols: Columns, i: int, example_id: str, info: Mapping[str, Any]) -> dict[str, Any]:
    """Row `i` in E1's dataset schema ({id, question, answer, info})."""
    return {
        "id": example_id,
        "question": render_flow_question(flow_dict(cols, i)),
        "answer": str(cols["label"][i]),
        "info": {
            **info,
            "scenario": str(cols["scenario"][i]),
            "family": str(cols["family"][i]),
            "origin": str(cols["origin"][i]),
        },
    }


# -- model variations ---------------------------------------------------------------------


def variation_prompt(scenario: str) -> str:
    """What a seed model is asked for: one flow of a playbook, as JSON."""
    book = PLAYBOOKS[scenario]
    return (
        "Write ONE network flow record, as a Zeek conn.log entry from an IoT network, for this scenario: "
        f"{scenario.replace('_', ' ')} ({book.label.lower()} traffic; it must satisfy: {book.rule}). "
        f"Answer with one JSON object with exactly these keys: {', '.join(FLOW_FIELD_NAMES)}. "
        "Numbers as numbers, no comments, no prose."
    )


def parse_variation(text: str, scenario: str) -> dict[str, Any]:
    """The flow a model wrote (a JSON object, optionally fenced), tagged with the scenario's
    label; ValueError says what is wrong."""
    body = (text or "").strip()
    fenced = re.search(r"```(?:json)?\s*(\{.*?\})\s*```", body, re.DOTALL)
    if fenced:
        body = fenced.group(1)
    start, end = body.find("{"), body.rfind("}")
    if start < 0 or end <= start:
        raise ValueError("no JSON object in the reply")
    try:
        flow = json.loads(body[start : end + 1])
    except json.JSONDecodeError as exc:
        raise ValueError(f"reply is not valid JSON ({exc.msg})") from exc
    if not isinstance(flow, dict):
        raise ValueError("reply is not a JSON object")
    book = PLAYBOOKS[scenario]
    return {**{k: flow.get(k) for k in FLOW_FIELD_NAMES}, "label": book.label, "scenario": scenario}
