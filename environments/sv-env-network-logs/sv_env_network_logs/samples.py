"""Generator of the bundled SAMPLE flows: synthetic rows in the IoT-23 schema.

These are not IoT-23 data. They let the pipeline run with no network and are labelled
`sample: true` everywhere they go. Each row follows one scenario (benign services,
port scans, telnet brute force, C&C beaconing, floods, exfiltration), including cases a
rule baseline gets wrong (C&C over 443, benign failed connections), so the sample
exercises errors and calibration, not only the happy path.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

Flow = dict[str, Any]


def _tcp(rng: random.Random, port: int, state: str, ob: int, rb: int, dur: float, history: str) -> Flow:
    op = max(1, ob // 500 + rng.randint(1, 4)) if ob else rng.randint(1, 3)
    rp = max(1, rb // 1000 + rng.randint(1, 4)) if rb else 0
    return {
        "id.orig_p": rng.randint(32768, 60999),
        "id.resp_p": port,
        "proto": "tcp",
        "service": {80: "http", 443: "ssl", 8883: "ssl"}.get(port, "-"),
        "duration": round(dur, 6),
        "orig_bytes": ob,
        "resp_bytes": rb,
        "conn_state": state,
        "missed_bytes": 0,
        "history": history,
        "orig_pkts": op,
        "orig_ip_bytes": ob + 40 * op,
        "resp_pkts": rp,
        "resp_ip_bytes": rb + 40 * rp,
    }


def _udp(rng: random.Random, port: int, state: str, ob: int, rb: int, pkts: int, service: str = "-") -> Flow:
    rpkts = 0 if rb == 0 else max(1, pkts // 2)
    return {
        "id.orig_p": rng.randint(1024, 65535),
        "id.resp_p": port,
        "proto": "udp",
        "service": service,
        "duration": round(rng.uniform(0.0, 2.0), 6),
        "orig_bytes": ob,
        "resp_bytes": rb,
        "conn_state": state,
        "missed_bytes": 0,
        "history": "Dd" if rb else "D",
        "orig_pkts": pkts,
        "orig_ip_bytes": ob + 28 * pkts,
        "resp_pkts": rpkts,
        "resp_ip_bytes": rb + 28 * rpkts,
    }


def benign_web(rng):
    return _tcp(
        rng,
        rng.choice([80, 443, 443, 8080]),
        "SF",
        rng.randint(200, 2000),
        rng.randint(500, 60000),
        rng.uniform(0.05, 5),
        "ShADadFf",
    )


def benign_dns(rng):
    return _udp(rng, 53, "SF", rng.randint(30, 80), rng.randint(60, 300), 1, "dns")


def benign_ntp(rng):
    return _udp(rng, 123, "SF", 48, 48, 1)


def benign_mqtt(rng):
    return _tcp(
        rng,
        rng.choice([1883, 8883]),
        "SF",
        rng.randint(100, 900),
        rng.randint(20, 400),
        rng.uniform(10, 600),
        "ShADadfF",
    )


def benign_failed(rng):  # a device retrying an unreachable cloud endpoint; looks scan-like
    return _tcp(rng, 443, "S0", 0, 0, 0.0, "S")


def benign_midstream(rng):  # capture started mid-connection
    return _tcp(
        rng, rng.choice([443, 8080]), "OTH", rng.randint(0, 3000), rng.randint(0, 3000), rng.uniform(0, 30), "Cc"
    )


def attack_port_scan(rng):
    return _tcp(
        rng,
        rng.choice([22, 80, 81, 8080, 2222, rng.randint(1, 65535)]),
        rng.choice(["S0", "S0", "REJ"]),
        0,
        0,
        0.0,
        "S",
    )


def attack_telnet_bruteforce(rng):
    return _tcp(
        rng,
        rng.choice([23, 2323]),
        rng.choice(["SF", "RSTO", "S0"]),
        rng.randint(0, 120),
        rng.randint(0, 200),
        rng.uniform(0, 3),
        "ShAdDaFr",
    )


def attack_cc_irc(rng):
    return _tcp(rng, 6667, "SF", rng.randint(50, 400), rng.randint(50, 800), rng.uniform(30, 300), "ShADadFf")


def attack_cc_https(rng):  # beaconing over 443: the rule baseline calls it benign
    return _tcp(rng, 443, "SF", rng.randint(150, 300), rng.randint(100, 250), rng.uniform(0.1, 1.0), "ShADadFf")


def attack_udp_flood(rng):
    return _udp(rng, rng.randint(1024, 65535), "S0", rng.randint(50_000, 500_000), 0, rng.randint(600, 6000))


def attack_exfiltration(rng):  # large upload to an odd port
    return _tcp(
        rng,
        rng.choice([8443, 4444, 9001]),
        "SF",
        rng.randint(1_000_000, 20_000_000),
        rng.randint(100, 2000),
        rng.uniform(20, 600),
        "ShADadFf",
    )


SCENARIOS: dict[str, tuple[str, Callable[[random.Random], Flow], float]] = {
    # name: (label, generator, relative frequency)
    "benign_web": ("Benign", benign_web, 4),
    "benign_dns": ("Benign", benign_dns, 2),
    "benign_ntp": ("Benign", benign_ntp, 1),
    "benign_mqtt": ("Benign", benign_mqtt, 2),
    "benign_failed_connection": ("Benign", benign_failed, 1),
    "benign_midstream": ("Benign", benign_midstream, 1),
    "port_scan": ("Malicious", attack_port_scan, 3),
    "telnet_bruteforce": ("Malicious", attack_telnet_bruteforce, 2),
    "cc_beacon_irc": ("Malicious", attack_cc_irc, 1),
    "cc_beacon_https": ("Malicious", attack_cc_https, 1.5),
    "udp_flood": ("Malicious", attack_udp_flood, 1.5),
    "exfiltration": ("Malicious", attack_exfiltration, 1),
}


def sample_flows(n: int, seed: int = 0, duplicates: int = 0) -> list[Flow]:
    """`n` flows in the IoT-23 preprocessed schema plus `label` and `scenario` columns;
    `duplicates` of them repeated verbatim (to exercise de-duplication)."""
    rng = random.Random(seed)
    names = list(SCENARIOS)
    weights = [SCENARIOS[name][2] for name in names]
    rows: list[Flow] = []
    for _ in range(n):
        name = rng.choices(names, weights)[0]
        label, make, _ = SCENARIOS[name]
        rows.append({**make(rng), "label": label, "scenario": name})
    rows.extend(dict(rng.choice(rows)) for _ in range(duplicates))
    return rows
