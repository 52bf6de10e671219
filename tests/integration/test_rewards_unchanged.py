"""Every environment's per-example rewards on its bundled data, as recorded in
tests/fixtures/env_rewards.json: moving code between the pipeline and the environment
packages must not change a single reward. Record again on purpose only, with
`SV_RECORD_REWARDS=1 pytest tests/integration/test_rewards_unchanged.py`."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from sv_dagster.core.envs import ENVS
from sv_dagster.core.evals.evaluation import evaluate
from sv_dagster.core.models.backends import make_backend
from sv_dagster.core.models.registry import ModelSpec

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "env_rewards.json"
RECORD = os.environ.get("SV_RECORD_REWARDS") == "1"
# The rule baseline everywhere, and the oracle where an environment has one.
RUNS = [(short, "heuristic") for short in ("e1", "e2", "e3", "e4", "e5", "e6")] + [("e2", "oracle"), ("e3", "oracle")]


def _rewards(short: str, backend: str, tmp_path: Path) -> dict[str, dict]:
    env = ENVS[short]
    spec = ModelSpec(name=backend, backend=backend, model=backend)
    counterpart = None
    if env.counterpart_env:
        counterpart = make_backend(
            ModelSpec(name="heuristic", backend="heuristic", model="heuristic"), env.counterpart_env
        )
    run = evaluate(
        env,
        spec,
        make_backend(spec, env.env_id),
        dataset_path=None,
        outputs_root=tmp_path,
        run_id=f"{short}-{backend}",
        counterpart=counterpart,
        counterpart_model=None,
    )
    rows = [json.loads(line) for line in run.results_path.read_text(encoding="utf-8").splitlines()]
    return {
        row["example_id"]: {"reward": row.get("reward"), "rewards": row.get("rewards"), "error": row.get("error")}
        for row in rows
    }


@pytest.mark.parametrize(("short", "backend"), RUNS)
def test_rewards_match_the_recording(short: str, backend: str, tmp_path: Path) -> None:
    got = _rewards(short, backend, tmp_path)
    recorded = json.loads(FIXTURE.read_text(encoding="utf-8")) if FIXTURE.exists() else {}
    key = f"{short}/{backend}"
    if RECORD:
        recorded[key] = got
        FIXTURE.write_text(json.dumps(recorded, indent=1, sort_keys=True) + "\n", encoding="utf-8")
        return
    assert key in recorded, f"{key} was never recorded in {FIXTURE}"
    assert len(got) >= 8
    assert got == recorded[key]
