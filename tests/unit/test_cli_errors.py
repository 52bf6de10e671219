"""A person's mistakes on the command line end in one line naming the fix and a non-zero
exit, with no traceback unless --verbose. Each case calls `main(argv)` in-process on a fresh
instance and stops before any run starts or any model is called (bar the two that show a
failure found inside a run)."""

from __future__ import annotations

import json
from pathlib import Path

import dagster as dg
import pytest

from sv_dagster.cli import USAGE_EXIT, main

E1_SPLITS = {"train": 262, "dev": 28, "test": 56, "ood": 40}


def ended(capsys: pytest.CaptureFixture[str], code: int, argv: list[str]) -> str:
    """Run the command; check its exit status and that no traceback was printed; return the
    last line of stderr."""
    capsys.readouterr()
    assert main(argv) == code
    err = capsys.readouterr().err
    assert "Traceback" not in err and "Stack Trace" not in err, err[-3000:]
    return err.strip().splitlines()[-1]


def no_runs() -> bool:
    return not dg.DagsterInstance.get().get_runs()


@pytest.fixture
def built_e1(isolated: Path) -> Path:
    """The instance records dataset/e1 as built, with E1's split sizes in its report: the
    command reads only that report, so no dataset is built here."""
    folder = isolated / "dataset-e1"
    folder.mkdir()
    (folder / "metadata.json").write_text(json.dumps({"split_sizes": E1_SPLITS}))
    dg.DagsterInstance.get().report_runless_asset_event(
        dg.AssetMaterialization(asset_key=["dataset", "e1"], metadata={"artifact_path": str(folder)})
    )
    return isolated


def test_endpoint_model_without_its_key(isolated: Path, monkeypatch, capsys):
    registry = isolated / "models.yaml"
    registry.write_text(
        "models:\n  heuristic:\n    backend: heuristic\n    default: true\n  remote-llm:\n    backend: openai\n    model: m\n"
        "    base_url: https://api.example/v1\n    api_key_env: SV_TEST_KEY_NEVER_SET\n"
    )
    monkeypatch.setenv("SV_MODEL_REGISTRY", str(registry))
    monkeypatch.delenv("SV_TEST_KEY_NEVER_SET", raising=False)
    assert ended(capsys, USAGE_EXIT, ["eval", "e1", "--models", "heuristic", "remote-llm"]) == (
        "sv-dagster eval: model 'remote-llm' needs the environment variable SV_TEST_KEY_NEVER_SET "
        "(put it in .env or export it); nothing was run"
    )
    assert no_runs()


@pytest.mark.parametrize(
    ("models", "line"),
    [
        (["heuristc"], "sv-dagster eval: unknown model 'heuristc' (did you mean 'heuristic'?); the models for e1: "),
        # Case is not a typo worth a second try: the registry's spelling is offered.
        (["GPT-5-Mini"], "sv-dagster eval: unknown model 'GPT-5-Mini' (did you mean 'gpt-5-mini' or 'gpt-5'?); "),
        # Was a raw DagsterInvalidSubsetError: the model has no eval asset for e1.
        (["tool-oracle"], "sv-dagster eval: model 'tool-oracle' is registered for e2, e3, not e1; the models for e1: "),
    ],
)
def test_unknown_model_or_not_for_the_env(isolated: Path, capsys, models, line):
    last = ended(capsys, USAGE_EXIT, ["eval", "e1", "--models", *models])
    assert last.startswith(line) and "heuristic" in last.partition("the models for e1: ")[2]
    assert no_runs()


def test_target_names_the_side_it_is_for(isolated: Path, capsys):
    assert ended(capsys, USAGE_EXIT, ["eval", "e5", "--models", "heuristic", "--target", "tool-oracle"]).startswith(
        "sv-dagster eval: --target model 'tool-oracle' is registered for e2, e3, not e6 (the side e5 talks to); "
    )


def test_unknown_split(built_e1: Path, capsys):
    assert ended(capsys, USAGE_EXIT, ["eval", "e1", "--models", "heuristic", "--split", "validation"]) == (
        "sv-dagster eval: dataset/e1 has no split 'validation'; its splits: dev, ood, test, train"
    )
    assert no_runs()


def test_n_larger_than_the_split(built_e1: Path, capsys):
    line = (
        "sv-dagster eval: --n 50 is more than the 28 examples of split 'dev' of dataset/e1; "
        "ask for at most 28, or `--n all`"
    )
    assert ended(capsys, USAGE_EXIT, ["eval", "e1", "--models", "heuristic", "--split", "dev", "--n", "50"]) == line
    # --verbose adds the traceback above the same last line.
    assert main(["eval", "e1", "--models", "heuristic", "--split", "dev", "--n", "50", "--verbose"]) == USAGE_EXIT
    err = capsys.readouterr().err
    assert "Traceback (most recent call last)" in err and err.strip().splitlines()[-1] == line
    assert no_runs()


@pytest.mark.parametrize(
    ("flag", "line"),
    [
        (["--n", "0"], "sv-dagster eval: --n must be at least 1, not 0"),
        (["--n", "ten"], "sv-dagster eval: --n takes a number of examples or 'all', not 'ten'"),
    ],
)
def test_n_is_a_positive_number_or_all(isolated: Path, capsys, flag, line):
    assert ended(capsys, USAGE_EXIT, ["eval", "e1", "--models", "heuristic", *flag]) == line


def test_concurrency_is_positive(isolated: Path, capsys):
    # A usage error (click's): the command's usage, then the same one line.
    assert ended(capsys, USAGE_EXIT, ["eval", "e1", "--models", "heuristic", "--concurrency", "0"]) == (
        "sv-dagster eval: Invalid value for '--concurrency': must be at least 1, not 0"
    )
    assert no_runs()


@pytest.mark.parametrize(
    ("argv", "line"),
    [
        (["eval", "e1", "--models"], "sv-dagster eval: Option '--models' requires an argument."),
        (["eval", "e9", "--models", "heuristic"], "sv-dagster eval: Invalid value for 'ENV': 'e9' is not one of "),
        (["runs", "prune"], "sv-dagster runs: No such command 'prune'."),
        (["baseline", "record"], "sv-dagster baseline record: Missing argument 'EVAL_DIR'."),
    ],
)
def test_usage_mistakes_end_in_one_line(isolated: Path, capsys, argv, line):
    assert ended(capsys, USAGE_EXIT, argv).startswith(line)


def test_several_values_after_one_option_and_verbose_anywhere(monkeypatch):
    """`--models a b` (and `--rows a b`) take every value up to the next option, as before;
    --verbose may come before or after the command."""
    import sv_dagster.cli.evals as evals

    seen = []
    monkeypatch.setattr(evals, "run_eval_command", lambda *args: seen.append(args) or 0)
    assert main(["eval", "e1", "--models", "heuristic", "oracle", "--n", "3", "--verbose"]) == 0
    assert main(["-v", "eval", "e1", "--models", "heuristic oracle", "--models", "tool-oracle"]) == 0
    assert main(["eval", "e1", "--models=heuristic"]) == 0
    (env, models, n, *_rest, verbose, dataset), second, third = seen[0], seen[1], seen[2]
    assert (env, models, n, verbose, dataset) == ("e1", ["heuristic", "oracle"], 3, True, None)
    assert second[1] == ["heuristic", "oracle", "tool-oracle"] and second[8] is True
    assert third[1] == ["heuristic"] and third[8] is False


def test_broken_registry_file(isolated: Path, monkeypatch, capsys):
    registry = isolated / "models.yaml"
    registry.write_text("models:\n  foo:\n    backend: nope\n")
    monkeypatch.setenv("SV_MODEL_REGISTRY", str(registry))
    assert ended(capsys, USAGE_EXIT, ["eval", "e1", "--models", "heuristic"]) == (
        f"sv-dagster eval: {registry}: model 'foo' has backend 'nope'; "
        "known: ['heuristic', 'oracle', 'openai', 'local']"
    )


def test_unknown_demo_job(isolated: Path, capsys):
    assert ended(capsys, USAGE_EXIT, ["demo", "--job", "eval_e7"]).startswith(
        "sv-dagster demo: no job 'eval_e7' (did you mean 'eval_e6' or "
    )
    assert no_runs()


@pytest.mark.parametrize("command", [["rescore"], ["baseline", "record"]])
def test_not_an_eval_folder(isolated: Path, capsys, command):
    missing = isolated / "nope"
    assert ended(capsys, USAGE_EXIT, [*command, str(missing)]) == (
        f"sv-dagster {command[0]}: {missing}: no such folder; give one like outputs/evals/<env>--<model>/<run_id>"
    )
    missing.mkdir()
    (missing / "summary.json").write_text("{}")
    assert ended(capsys, USAGE_EXIT, [*command, str(missing)]).startswith(
        f"sv-dagster {command[0]}: {missing} is not an eval folder (no metadata.json, results.jsonl); "
    )


def test_failure_inside_a_run_ends_in_its_line(isolated: Path, capsys):
    """Signing off a checkpoint never reviewed fails inside the promote run: its FAILED line
    is last, with no stack trace on the console (the event log keeps it)."""
    assert ended(capsys, 1, ["signoff", "e2", "--reviewer", "me", "--verdict", "approve"]) == (
        "FAILED safety_signoff__e2: safety_review/e2/rlft_stage1 was never materialized: there is nothing to sign off"
    )


def test_console_shows_a_step_error_without_its_stack_unless_verbose(capsys):
    from sv_dagster.cli._console import console_job, console_logs

    @dg.op
    def broken():
        raise ValueError("the bad thing, said once")

    @dg.job
    def job():
        broken()

    for verbose in (False, True):
        capsys.readouterr()
        result = console_job(job, verbose).execute_in_process(
            run_config=console_logs(verbose), raise_on_error=False, instance=dg.DagsterInstance.ephemeral()
        )
        assert not result.success
        err = capsys.readouterr().err
        (failure,) = [line for line in err.splitlines() if "STEP_FAILURE" in line]
        if verbose:
            assert "Stack Trace:" in err and 'raise ValueError("the bad thing, said once")' in err
        else:
            assert "Stack Trace:" not in err and "raise ValueError" not in err, err
            assert failure.endswith("ValueError: the bad thing, said once (stack trace: --verbose)")
        # Either way the instance's event log holds the whole error.
        (event,) = [e for e in result.all_events if e.is_step_failure]
        assert event.step_failure_data.error.cause.stack


def test_eval_entry_spec_mistakes(isolated: Path, capsys):
    """`python -m sv_dagster.eval_entry SPEC.json` run by hand: the same one line, exit 2."""
    from sv_dagster.eval_entry import main as entry

    def entry_line(spec_path: Path) -> str:
        capsys.readouterr()
        assert entry([str(spec_path)]) == USAGE_EXIT
        err = capsys.readouterr().err
        assert "Traceback" not in err
        return err.strip().splitlines()[-1]

    spec = isolated / "spec.json"
    assert entry_line(spec) == f"sv_dagster.eval_entry: {spec}: cannot read the spec (No such file or directory)"
    dataset = isolated / "test.jsonl"
    dataset.write_text("")
    fields = {"env": "e1", "dataset_path": str(dataset), "outputs_root": str(isolated), "run_id": "r"}
    spec.write_text(json.dumps({**fields, "model": "heuristc"}))
    assert entry_line(spec).startswith(
        "sv_dagster.eval_entry: unknown model 'heuristc' (did you mean 'heuristic'?); the models for e1: "
    )
    spec.write_text(json.dumps({**fields, "model": "heuristic", "dataset_path": str(isolated / "gone.jsonl")}))
    assert entry_line(spec) == f"sv_dagster.eval_entry: dataset_path {isolated / 'gone.jsonl'}: no such file"


def test_any_user_error_ends_in_its_line_and_any_other_error_is_a_fault(isolated: Path, monkeypatch, capsys):
    import sv_dagster.cli.gate as gate
    from sv_shared.errors import UserError

    class NewConfigError(UserError, ValueError):
        """A user error the command line has never heard of."""

    def broken(message: str, kind: type[Exception]):
        def run_check() -> int:
            raise kind(message)

        return run_check

    monkeypatch.setattr(
        gate, "run_check", broken("thresholds.yaml line 3: 'max' must be a number\n  (got 'x')", NewConfigError)
    )
    assert (
        ended(capsys, USAGE_EXIT, ["check"])
        == "sv-dagster check: thresholds.yaml line 3: 'max' must be a number; (got 'x')"
    )
    monkeypatch.setattr(gate, "run_check", broken("a bug", ValueError))
    with pytest.raises(ValueError, match="a bug"):
        main(["check"])


def test_a_closed_pipe_inside_a_command_is_a_fault_and_ctrl_c_ends_the_command(isolated: Path, monkeypatch, capsys):
    import sv_dagster.cli.gate as gate

    def closed_pipe() -> int:
        raise EOFError("a worker closed its pipe")

    monkeypatch.setattr(gate, "run_check", closed_pipe)
    with pytest.raises(EOFError, match="a worker closed its pipe"):  # click would print only "Aborted!"
        main(["check"])

    def interrupted() -> int:
        raise KeyboardInterrupt

    monkeypatch.setattr(gate, "run_check", interrupted)
    assert main(["check"]) == 1 and capsys.readouterr().err.strip().endswith("Aborted!")
