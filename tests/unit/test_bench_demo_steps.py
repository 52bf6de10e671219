"""The demo bench's step times: read back from the instance a run wrote to."""

from __future__ import annotations

import time

import dagster as dg

from bench.demo import step_seconds


@dg.op
def slow() -> int:
    time.sleep(0.3)
    return 1


@dg.op
def quick(value: int) -> int:
    return value + 1


@dg.job
def two_steps():
    quick(slow())


def test_step_seconds_reads_each_step_of_each_job_longest_first(tmp_path):
    (tmp_path / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    with dg.DagsterInstance.from_config(str(tmp_path)) as instance:
        assert two_steps.execute_in_process(instance=instance).success

    times = step_seconds(tmp_path)

    assert list(times) == ["two_steps"]
    assert list(times["two_steps"]) == ["slow", "quick"]
    assert times["two_steps"]["slow"] >= 0.3
