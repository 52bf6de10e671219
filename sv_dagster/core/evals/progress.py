"""Progress lines for long work (evals, training stages), throttled so a log stays readable.

    eval e1/heuristic: 28/56 examples (50%), 3 errors, 12.4 s elapsed, ETA 12 s
    sft e1: step 12/40 (30%), loss 1.234, 7.1 s/step, ETA 3m18s

Plain Python: the caller says where a line goes (`emit`: a Dagster `context.log.info`, a
Pipes `log.info`, `print`).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any


def format_duration(seconds: float) -> str:
    """12 s, 3m18s, 2h05m."""
    seconds = max(0, round(seconds))
    if seconds < 60:
        return f"{seconds} s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"


class Progress:
    """Counts done out of `total` and emits a line every `every_s` seconds or every `every_frac`
    of the total, whichever comes first (but not within `min_s` of the last line: a fast eval
    shows its last line only), and always for the last item.

    Work finished before this run (resumed examples, a training stage restarted from its
    checkpoint) is given to `start`: it is shown in the count but left out of the rate, so
    the ETA is this run's own pace."""

    def __init__(
        self,
        total: int,
        label: str,
        emit: Callable[[str], Any],
        *,
        count_format: str = "{done}/{total} examples",
        rate_unit: str | None = None,
        every_s: float = 15.0,
        every_frac: float = 0.1,
        min_s: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.total, self.label, self.emit = max(0, int(total)), label, emit
        self.count_format = count_format
        self.rate_unit = rate_unit
        """None: show time elapsed; a unit ("step"): show seconds per unit instead."""
        self.every_s, self.every_frac, self.min_s, self.clock = every_s, every_frac, min_s, clock
        self.start()

    def start(self, done: int = 0) -> None:
        """(Re)start the clock with `done` already finished before this run."""
        self.started, self.first = self.clock(), done
        self.done = done
        self.details: tuple[str, ...] = ()
        self.last_at, self.last_done = self.started, done
        self.emitted: int | None = None

    def update(self, done: int, *details: str) -> str | None:
        """Record progress (`details`: "3 errors", "loss 1.234"); returns the line if one was emitted."""
        self.done, self.details = done, details
        now = self.clock()
        finished = self.total > 0 and done >= self.total
        since = now - self.last_at
        due = since >= self.every_s or (since >= self.min_s and self._step(done) > self._step(self.last_done))
        if not (finished or due) or self.emitted == done:  # one line per count is enough
            return None
        return self._emit(now)

    def finish(self) -> str | None:
        """The last count's line unless it was emitted (work that stopped early, a zero total)."""
        if self.emitted == self.done:
            return None
        return self._emit(self.clock(), final=True)

    def _step(self, done: int) -> int:
        """Which `every_frac` slice of the total `done` is in."""
        if self.total <= 0 or self.every_frac <= 0:
            return 0
        return math.floor(done / self.total / self.every_frac + 1e-9)

    def _emit(self, now: float, final: bool = False) -> str:
        line = self.line(now, final)
        self.last_at, self.last_done, self.emitted = now, self.done, self.done
        self.emit(line)
        return line

    def line(self, now: float | None = None, final: bool = False) -> str:
        now = self.clock() if now is None else now
        elapsed, ran = now - self.started, self.done - self.first
        count = self.count_format.format(done=self.done, total=self.total)
        if self.total > 0:
            count += f" ({100 * self.done // self.total}%)"
        parts = [count, *self.details]
        if self.rate_unit is None:
            parts.append(f"{elapsed:.1f} s elapsed")
        elif ran > 0:
            parts.append(f"{elapsed / ran:.1f} s/{self.rate_unit}")
        if not final and ran > 0 and 0 < self.total and self.done < self.total:
            parts.append(f"ETA {format_duration((self.total - self.done) * elapsed / ran)}")
        return f"{self.label}: " + ", ".join(parts)


class EvalProgress(Progress):
    """`Progress` as the `progress` callback of `run_eval`/`evaluate`: they call it with their
    `RunCounts` once before the first example (resumed examples counted) and after each one.
    Call `finish()` after the run for the last line."""

    def __call__(self, counts: Any) -> None:
        done = counts.n_resumed + counts.n
        if counts.n == 0:  # before the first example of this run
            self.start(done)
            return
        errors = counts.n_errors
        self.update(done, f"{errors} error{'' if errors == 1 else 's'}")


class StepProgress:
    """A training stage's step lines (`sft e1: step 12/40 (30%), loss 1.234, 7.1 s/step, ETA 3m18s`)
    from the stage's reports: "start" ({"step", "max_steps"}: the step it resumes at and the
    total) and "metrics" ({"step", "loss", ...}). Without a known total: `sft e1: step 12, loss 1.234`."""

    SHOWN = (("loss", "loss"), ("train_loss", "mean loss"), ("reward", "reward"))
    """(metric key, name shown); train_loss is the trainer's average over the run, in its last log."""

    def __init__(self, label: str, emit: Callable[[str], Any], **options: Any) -> None:
        self.label, self.emit, self.options = label, emit, options
        self.progress: Progress | None = None

    def start(self, step: int, max_steps: int | None) -> None:
        if max_steps and max_steps > 0:
            self.progress = Progress(
                max_steps, self.label, self.emit, count_format="step {done}/{total}", rate_unit="step", **self.options
            )
            self.progress.start(step)

    def metrics(self, payload: dict[str, Any]) -> None:
        shown: dict[str, str] = {}
        for key, name in self.SHOWN:
            value = payload.get(key)
            if name not in shown and isinstance(value, (int, float)):
                shown[name] = f"{name} {value:.3f}"
        step = int(payload.get("step") or 0)
        if self.progress is None:
            self.emit(", ".join([f"{self.label}: step {step}", *shown.values()]))
        else:
            self.progress.update(step, *shown.values())

    def finish(self) -> None:
        if self.progress is not None:
            self.progress.finish()
