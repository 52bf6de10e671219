"""A training stage that fails on its scoring errors fails its asset with the errors file
attached, so the run in the UI leads to the completions that could not be scored."""

from __future__ import annotations

from pathlib import Path

import dagster as dg

from sv_dagster.assets.training import run_training_stage
from sv_dagster.resources import ExperimentTracking, PipesLauncher
from sv_dagster.training.config import load_training_config
from sv_dagster.training.stages import reward_errors_path


class ScoringFailsLauncher(PipesLauncher):
    """Stands in for the training process: writes its errors file and fails as it would."""

    def launch(self, context, spec_path, env, module="sv_dagster.training.entry", gpu=True):
        out = Path(spec_path.removesuffix(".spec.json"))
        reward_errors_path(out).write_text('{"task_key": "t1", "error": "KeyError"}\n')
        raise dg.Failure("sv_dagster.training.entry failed: StageError: grpo: 1 of 8 completions could not be scored")


def test_a_stage_that_fails_on_scoring_errors_attaches_its_errors_file(tmp_path: Path):
    out = tmp_path / "grpo"
    reward_errors_path(out).write_text("an earlier run's errors\n")

    @dg.asset
    def stage(context):
        run_training_stage(
            context,
            stage="grpo",
            env_short="e1",
            config=load_training_config("e1"),
            out=out,
            model_dir=None,
            data={},
            reward_configs={},
            launcher=ScoringFailsLauncher(),
            tracking=ExperimentTracking(mode="disabled"),
            resume=False,
        )

    result = dg.materialize([stage], raise_on_error=False)
    failure = next(e for e in result.all_events if e.is_step_failure).step_failure_data
    assert "could not be scored" in failure.error.to_string()
    assert failure.user_failure_data.metadata["reward_errors"] == dg.MetadataValue.path(str(reward_errors_path(out)))
    assert "t1" in reward_errors_path(out).read_text()  # this run's file, not the earlier one's
