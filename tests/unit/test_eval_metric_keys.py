"""An eval's headline metrics are keyed by the examples they were scored on, because the
Dagster UI plots each numeric metadata key across materializations."""

from __future__ import annotations

from sv_dagster.assets.evals import example_set, metric_metadata
from sv_dagster.core.envs import ENVS


def run_metadata(split: str, n: int, size: int | None, seed: int = 0) -> dict:
    dataset = {"split": split, "n_examples": n, **({"split_size": size} if size is not None else {})}
    return {"dataset": dataset, "seed": seed}


def test_a_whole_split_needs_no_seed_and_a_drawn_subset_names_it():
    assert example_set(run_metadata("test", 56, 56, seed=3)) == "test n=56"
    assert example_set(run_metadata("test", 7, 56, seed=3)) == "test n=7 seed=3"
    assert example_set(run_metadata("dev", 28, None, seed=1)) == "dev n=28 seed=1"  # size unknown: maybe drawn


def test_dev_test_and_subset_runs_never_share_a_metric_key():
    env = ENVS["e1"]
    summary = {"accuracy": 0.75, "mean_reward": 0.5, "n_errors": 0, "ece": 0.1}
    runs = [run_metadata("test", 56, 56), run_metadata("dev", 28, 28), run_metadata("test", 7, 56, seed=3)]
    keys = [{k for k, v in metric_metadata(env, summary, meta).items() if isinstance(v, float)} for meta in runs]
    assert all(keys) and not (keys[0] & keys[1]) and not (keys[0] & keys[2]) and not (keys[1] & keys[2])
    test_run = metric_metadata(env, summary, runs[0])
    assert test_run["examples"] == "test n=56" and test_run["accuracy [test n=56]"] == 0.75
    assert "accuracy" not in test_run  # no unkeyed metric to plot across splits
