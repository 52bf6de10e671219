"""bench/training.py's GRPO time split: transformers' training_step runs TRL's _prepare_inputs
(sampling and rewards) inside it, so each part is counted once and the parts add up to the
steps' time."""

from __future__ import annotations

import time

from bench.training import time_split, timed_trainer


class FakeGRPOTrainer:
    """The call shape of transformers' Trainer.training_step under TRL's GRPOTrainer."""

    def _generate_single_turn(self):
        time.sleep(0.03)

    def _calculate_rewards(self):
        time.sleep(0.01)

    def _prepare_inputs(self):
        self._generate_single_turn()
        self._calculate_rewards()
        time.sleep(0.01)  # the old policy's log-probs

    def compute_loss(self):
        time.sleep(0.02)

    def training_step(self):
        self._prepare_inputs()
        self.compute_loss()
        time.sleep(0.02)  # backward and the optimizer's update


def test_the_parts_of_a_step_are_counted_once_and_add_up_to_it():
    timed = timed_trainer(FakeGRPOTrainer)
    timed.timings = {}
    trainer = timed()
    for _ in range(3):
        trainer.training_step()
    split = time_split(dict(timed.timings))
    assert abs(sum(split.values()) - timed.timings["training_step"]) < 1e-9
    assert split["generation"] >= 0.09 and split["loss_forward"] >= 0.06
    # generation is not counted again in what follows the loss forward
    assert 0.06 <= split["backward_and_update"] < split["generation"]


def test_a_planted_split():
    timings = {"training_step": 10.0, "prepare_inputs": 6.0, "generation": 4.0, "reward": 1.0, "loss_forward": 2.0}
    assert time_split(timings) == {
        "generation": 4.0,
        "reward": 1.0,
        "other_sampling": 1.0,
        "loss_forward": 2.0,
        "backward_and_update": 2.0,
    }
