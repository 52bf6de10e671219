"""A GRPO run's signal, summarised from TRL's logged windows: a run whose groups all scored
alike is flagged as having had nothing to learn from."""

from __future__ import annotations

from sv_dagster.training.grpo_signal import grpo_signal


def test_a_run_with_signal_in_some_groups():
    history = [
        {"step": 5, "reward": 0.4, "reward_std": 0.2, "frac_reward_zero_std": 0.5},
        {"step": 10, "reward": 0.6, "reward_std": 0.4, "frac_reward_zero_std": 0.25},
        {"step": 10, "train_runtime": 12.0, "train_loss": 0.1},  # the trainer's closing summary
    ]
    signal = grpo_signal(history)
    assert signal["logged_steps"] == [5, 10]
    assert abs(signal["reward_std_within_groups"] - 0.3) < 1e-12
    assert abs(signal["groups_without_signal"] - 0.375) < 1e-12
    assert signal["kl"] is None and signal["no_signal"] is False


def test_a_run_where_every_group_scored_alike_is_flagged():
    history = [{"step": 5, "reward_std": 0.0, "frac_reward_zero_std": 1.0, "kl": 0.0}]
    signal = grpo_signal(history)
    assert signal["no_signal"] is True and signal["kl"] == 0.0


def test_nothing_logged_reads_unknown_not_fine():
    assert grpo_signal([{"step": 2, "train_runtime": 1.0}])["no_signal"] is None
