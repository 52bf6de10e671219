"""Figures printed by the console and the reports come from one module; each output keeps its
own CI precision."""

from __future__ import annotations

from sv_dagster.core.reporting.figures import (
    CONSOLE_CI_DIGITS,
    REPORT_CI_DIGITS,
    ci_text,
    fmt,
    format_table,
    with_ci,
)


def test_cells_and_cis():
    assert (fmt(None), fmt(0.5), fmt(3), fmt("x"), fmt(0.12345, 2)) == ("-", "0.500", "3", "x", "0.12")
    assert ci_text([0.1, 0.25], CONSOLE_CI_DIGITS) == "[0.10, 0.25]"
    assert with_ci(0.5, [0.1, 0.9], CONSOLE_CI_DIGITS) == "0.500 [0.10, 0.90]"
    assert with_ci(0.5, [0.1, 0.9], REPORT_CI_DIGITS) == "0.500 [0.100, 0.900]"
    assert with_ci(0.5, None, REPORT_CI_DIGITS) == with_ci(0.5, [], CONSOLE_CI_DIGITS) == "0.500"


def test_console_table_pads_each_column_to_its_widest_cell():
    rows = [{"model": "heuristic", "n_examples": 56, "accuracy": 0.5}, {"model": "o", "n_examples": 7}]
    assert format_table(rows, (("accuracy", "accuracy"),)).splitlines() == [
        "model      n   accuracy",
        "---------  --  --------",
        "heuristic  56  0.500   ",
        "o          7   -       ",
    ]
