"""GRPO policy snapshots: whole weights only, listed in step order once finished."""

from __future__ import annotations

import pytest

from sv_dagster.training.config import TrainingConfig, TrainingConfigError, load_training_config
from sv_dagster.training.snapshots import snapshot_record, snapshots_dir


def test_snapshots_need_whole_weights():
    with pytest.raises(ValueError, match="snapshot_steps"):
        TrainingConfig.model_validate({"env": "e1", "model": {"lora": {}}, "grpo": {"snapshot_steps": 2}})
    with pytest.raises(TrainingConfigError):
        load_training_config("e1", overrides={"model": {"lora": {}}, "grpo": {"snapshot_steps": 2}}, profile="tiny")


def test_snapshot_record_lists_finished_snapshots_in_step_order(tmp_path):
    out = tmp_path / "grpo"
    for name in ("step-10", "step-2", "step-4.partial", "step-20"):
        (snapshots_dir(out) / name).mkdir(parents=True)
    assert [s["step"] for s in snapshot_record(out, last_step=10)] == [2, 10]
