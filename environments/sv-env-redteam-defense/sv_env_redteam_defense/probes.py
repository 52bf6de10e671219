"""E6's adversarial first turns as requests for the automated safety review of a trained checkpoint."""

import json
from importlib import resources


def safety_probes() -> list[dict[str, str]]:
    text = (resources.files("sv_env_redteam_defense") / "data" / "sample.jsonl").read_text(encoding="utf-8")
    probes = []
    for line in text.splitlines():
        row = json.loads(line)
        if (row.get("info") or {}).get("kind") == "adversarial":
            probes.append({"id": row["id"], "source": "e6", "request": row["info"]["turns"][0]})
    return probes
