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


def test_the_tournament_table_and_curve_print_figures_as_the_console_does():
    from sv_dagster.core.evals.tournament import RoundResult, TournamentResult
    from sv_dagster.core.reporting.figures import rounds_markdown, success_curve

    measured = RoundResult(1, 0.5, [0.25, 0.75], 4, 2, 0, "a", defender_unsafe_rate=0.125, known_attacks=0)
    failed = RoundResult(2, None, None, 4, 0, 4, "b", defender_over_refusal_rate=1.0, known_attacks=2)
    result = TournamentResult(rounds=[measured, failed])
    assert success_curve(result) == "0.50 -> n/a"
    assert rounds_markdown(result)[2:] == [
        "| 1 | 0.50 [0.25, 0.75] | 0.12 |  | 0 |",  # no over-refusal measured: blank, as before
        "| 2 | -  |  | 1.00 | 2 |",  # a round without a rate prints "-" (it used to raise)
    ]
