"""Progress lines: throttled by time and fraction, the last count always shown, ETA from this
run's own pace (resumed work counts as done but not toward the rate)."""

from __future__ import annotations

from sv_dagster.core.evals.progress import EvalProgress, Progress, StepProgress, format_duration
from sv_dagster.core.evals.runner import RunCounts


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def make(total: int, **options) -> tuple[Progress, list[str], Clock]:
    lines: list[str] = []
    clock = Clock()
    return Progress(total, "eval e1/heuristic", lines.append, clock=clock, **options), lines, clock


def test_a_line_every_tenth_of_the_total_and_the_last_one_always():
    progress, lines, clock = make(56)
    for done in range(1, 57):
        clock.now += 0.5  # well under every_s: only the fraction throttles
        progress.update(done, "0 errors")
    # 10% of 56 is 5.6 examples: a line on entering each tenth (6, 12, 17, ...), then 56/56.
    assert [line.split(": ")[1].split(" ")[0] for line in lines] == [
        "6/56",
        "12/56",
        "17/56",
        "23/56",
        "28/56",
        "34/56",
        "40/56",
        "45/56",
        "51/56",
        "56/56",
    ]
    assert lines[-1] == "eval e1/heuristic: 56/56 examples (100%), 0 errors, 28.0 s elapsed"
    assert progress.finish() is None  # the last count was shown already


def test_a_fast_run_shows_its_last_line_only():
    progress, lines, clock = make(56)
    for done in range(1, 57):
        clock.now += 0.01
        progress.update(done, "0 errors")
    assert lines == ["eval e1/heuristic: 56/56 examples (100%), 0 errors, 0.6 s elapsed"]


def test_time_throttles_when_the_fraction_is_slow():
    progress, lines, clock = make(1000)
    for done in range(1, 40):
        clock.now += 1.0
        progress.update(done)
    assert len(lines) == 2  # at 15 s and 30 s; 39 examples never reach 10%
    assert lines[0] == "eval e1/heuristic: 15/1000 examples (1%), 15.0 s elapsed, ETA 16m25s"


def test_eta_is_from_this_runs_pace_and_resumed_examples_count_as_done():
    progress, lines, clock = make(56)
    progress.start(20)  # 20 finished by the killed run
    clock.now += 8.0
    assert progress.update(28, "3 errors") == (
        "eval e1/heuristic: 28/56 examples (50%), 3 errors, 8.0 s elapsed, ETA 28 s"
    )  # 8 in 8 s, 28 to go (not 8 s)


def test_finish_shows_work_that_stopped_short_without_an_eta():
    progress, lines, clock = make(40, count_format="step {done}/{total}", rate_unit="step")
    clock.now += 59.0
    assert progress.update(10, "loss 1.234") == "eval e1/heuristic: step 10/40 (25%), loss 1.234, 5.9 s/step, ETA 2m57s"
    clock.now += 0.1
    assert progress.update(11, "loss 1.100") is None  # not due: same tenth, 0.1 s later
    assert (
        progress.finish() == "eval e1/heuristic: step 11/40 (27%), loss 1.100, 5.4 s/step"
    )  # stopped by its time budget
    assert progress.finish() is None


def test_zero_total_says_so_without_dividing_by_zero():
    progress, lines, clock = make(0)
    clock.now += 1.25
    progress.update(0)
    assert progress.finish() == "eval e1/heuristic: 0/0 examples, 1.2 s elapsed"
    assert lines == ["eval e1/heuristic: 0/0 examples, 1.2 s elapsed"]


def test_durations_read_like_a_person_would_write_them():
    assert [format_duration(s) for s in (0, 12.4, 59.6, 198, 3600 + 5 * 60 + 9)] == [
        "0 s",
        "12 s",
        "1m00s",
        "3m18s",
        "1h05m",
    ]


def test_eval_progress_takes_the_runners_counts():
    lines: list[str] = []
    clock = Clock()
    progress = EvalProgress(4, "eval e1/heuristic", lines.append, clock=clock)
    counts = lambda n, errors=0: RunCounts(  # noqa: E731
        n=n, n_scored=n - errors, n_model_errors=0, n_scoring_errors=0, n_resumed=2, n_judge_errors=errors
    )
    progress(counts(0))  # before the first example: 2 resumed
    clock.now += 3.0
    progress(counts(1, errors=1))
    clock.now += 3.0
    progress(counts(2, errors=1))
    progress.finish()
    assert lines == [
        "eval e1/heuristic: 3/4 examples (75%), 1 error, 3.0 s elapsed, ETA 3 s",
        "eval e1/heuristic: 4/4 examples (100%), 1 error, 6.0 s elapsed",
    ]


def test_step_progress_reads_a_trainers_metrics():
    lines: list[str] = []
    clock = Clock()
    steps = StepProgress("sft e1", lines.append, clock=clock)
    steps.start(0, 40)
    clock.now += 85.2
    steps.metrics({"step": 12, "loss": 1.2341, "learning_rate": 1e-4, "epoch": 0.3})
    clock.now += 100.0
    steps.metrics({"step": 39, "loss": 1.0})
    steps.metrics({"step": 40, "train_loss": 1.1, "train_runtime": 185.2})  # the trainer's summary
    steps.finish()
    assert lines == [
        "sft e1: step 12/40 (30%), loss 1.234, 7.1 s/step, ETA 3m19s",
        "sft e1: step 39/40 (97%), loss 1.000, 4.7 s/step, ETA 5 s",
        "sft e1: step 40/40 (100%), mean loss 1.100, 4.6 s/step",
    ]
    unknown: list[str] = []
    steps = StepProgress("grpo e1", unknown.append, clock=clock)
    steps.start(0, -1)
    steps.metrics({"step": 5, "reward": 0.5, "loss": 0.01})
    assert unknown == ["grpo e1: step 5, loss 0.010, reward 0.500"]
