"""`sv-dagster`: the command line, one module per command group (click, as Dagster's own).

This module is the group and the one place a mistake becomes a line: a `UserError` (or a
usage error) ends in `sv-dagster COMMAND: message` and exit 2, with the traceback only under
--verbose; anything else is a fault and keeps its traceback.
"""

from __future__ import annotations

import sys
import traceback

import click

from sv_dagster.cli._context import USAGE_EXIT, VERBOSE_HELP, Session
from sv_shared.errors import UserError

USAGE = """\b
sv-dagster [--verbose] COMMAND    runs show progress and results on the console (INFO);
                                  --verbose adds Dagster's step-by-step events (DEBUG)
                                  and the traceback of a mistake, which otherwise ends in
                                  one line naming the fix (exit 2; a failed run: exit 1)
sv-dagster demo [--job demo]      run a job in-process on the project's instance and
                                  print each eval's headline metrics and artifact paths
sv-dagster eval e1 --models heuristic gpt-5-mini [--n 32] [--seed 42] [--include-tools false]
sv-dagster eval e5 --models gpt-5-mini --target llama-3.1-8b [--n 20]
sv-dagster eval e4 --models heuristic --dataset my_emails.jsonl
                                  evaluate registry models (one Dagster run, in the UI);
                                  --n more than the split holds is an error, --n all takes
                                  the whole split for every model (unset: the whole split, or
                                  a model's registry `limit`); --dataset FILE evaluates
                                  your JSONL file (bad lines listed and left out)
sv-dagster resume RUN_ID          continue a killed or failed eval run in its own results
                                  folder: finished examples are kept, the rest are asked
sv-dagster runs reap              mark runs whose process is gone failed and free their pool
                                  slots (every command does this first)
sv-dagster baseline record EVAL_DIR
                                  make an eval folder its (env, model)'s regression baseline
sv-dagster check                  regression gate over the latest evals; exit 1 on a
                                  regression, 3 if some eval had NO BASELINE
sv-dagster lineage ASSET_KEY [--partition P] [--run R | --data-version V] [--json]
                                  the chain from an asset's latest (or the named)
                                  materialization to its roots: data version, content hash,
                                  code version, git commit
sv-dagster lineage REPORT.md --row LINE
                                  the same for the eval behind one row of a report
sv-dagster audit REPORT.md        every number in a report against the files it cites and
                                  their hashes on disk; exit 1 on any mismatch
sv-dagster signoff e1 --reviewer NAME --verdict approve|reject [--note TEXT]
                                  a human's sign-off on the reviewed checkpoint; promotes it
                                  when approved (job promote_e1)
sv-dagster rescore EVAL_DIR [--reward-config TOML]
                                  score an eval folder's stored completions again with the
                                  current verifier (no model calls); writes a new folder
sv-dagster review synthetic ENV --partition DATE --reviewer NAME --verdict accept|reject [--rows ID ...] [--note TEXT]
                                  record a spot-check decision on a synthetic batch (decisions
                                  file + asset check evaluation and observation in the instance)
"""


@click.group(help=USAGE, context_settings={"max_content_width": 110})
@click.option("-v", "--verbose", is_flag=True, help=VERBOSE_HELP)
@click.pass_context
def cli(ctx: click.Context, verbose: bool) -> None:
    state = ctx.ensure_object(Session)
    state.verbose = state.verbose or verbose
    state.command = ctx.invoked_subcommand or ""


def _add_commands() -> None:
    from sv_dagster.cli.demo import demo
    from sv_dagster.cli.evals import eval_command, rescore, resume
    from sv_dagster.cli.gate import baseline, check
    from sv_dagster.cli.lineage import audit, lineage
    from sv_dagster.cli.review import review
    from sv_dagster.cli.runs import runs
    from sv_dagster.cli.signoff import signoff

    for command in (demo, eval_command, resume, runs, rescore, check, baseline, lineage, audit, review, signoff):
        cli.add_command(command)


_add_commands()


def main(argv: list[str] | None = None) -> int:
    """Run one command; its exit status (0, 1 for a failed run, 2 for a mistake, 3: `check`)."""
    state = Session()
    try:
        code = cli.main(
            args=list(sys.argv[1:] if argv is None else argv), prog_name="sv-dagster", standalone_mode=False, obj=state
        )
    except click.exceptions.NoArgsIsHelpError as exc:  # a group alone: its commands
        print(exc.format_message(), file=sys.stderr)
        return USAGE_EXIT
    except click.UsageError as exc:  # what was typed: usage, then the one line
        where = exc.ctx.command_path if exc.ctx is not None else f"sv-dagster {state.command}".rstrip()
        if exc.ctx is not None:
            print(exc.ctx.get_usage(), file=sys.stderr)
        print(f"{where}: {exc.format_message()}", file=sys.stderr)
        return USAGE_EXIT
    except click.ClickException as exc:
        exc.show()
        return exc.exit_code
    except click.Abort as exc:
        # click turns an EOFError inside a command into Abort too: that is a fault (a pipe a
        # worker closed), not the user's Ctrl-C, so it keeps its traceback.
        if isinstance(exc.__cause__, EOFError):
            raise exc.__cause__ from None
        print("Aborted!", file=sys.stderr)
        return 1
    except UserError as exc:  # a person can fix it: one line; anything else is a fault with its traceback
        if state.verbose:
            traceback.print_exc()
        # One line, the last of stderr: a message that spans lines is joined.
        line = "; ".join(part.strip() for part in str(exc).splitlines() if part.strip())
        print(f"sv-dagster {state.command}: {line}", file=sys.stderr)
        return USAGE_EXIT
    return code if isinstance(code, int) else 0


if __name__ == "__main__":
    sys.exit(main())
