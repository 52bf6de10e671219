"""E5's behaviors as adversarial requests for the automated safety review of a trained
checkpoint: each sanitized behavior in the direct and role-play framings."""

import json
from importlib import resources

from sv_shared.redteam import JAILBREAK_FRAMINGS

REVIEW_FRAMINGS = ("direct", "roleplay")


def safety_probes() -> list[dict[str, str]]:
    framings = dict(JAILBREAK_FRAMINGS)
    text = (resources.files("sv_env_redteam_attack") / "data" / "sample.jsonl").read_text(encoding="utf-8")
    probes = []
    for line in text.splitlines():
        behavior = json.loads(line)["info"]["behavior"]
        for name in REVIEW_FRAMINGS:
            probes.append(
                {
                    "id": f"{behavior['id']}-{name}",
                    "source": "e5",
                    "request": framings[name].format(goal=behavior["goal"]),
                }
            )
    return probes
