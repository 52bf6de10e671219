"""What every command shares: the session (verbosity, the definitions built at most once),
the option that may also follow a command, options taking several values, mistakes."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import click

from sv_shared.errors import UserError

USAGE_EXIT = 2
"""Exit status of a mistake in what was asked for."""


class CommandError(UserError, ValueError):
    """A mistake in a command's arguments found past parsing; its message is the one line a
    person needs."""


@dataclass
class Session:
    """One command's state; `main` makes one per command."""

    verbose: bool = False
    command: str = ""
    _defs: Any = field(default=None, repr=False)

    def definitions(self):
        """The definitions, built on first use (with the registry as it is now, and .env read)."""
        if self._defs is None:
            from sv_dagster.assembly import build_definitions

            self._defs = build_definitions()
        return self._defs


def session() -> Session:
    return click.get_current_context().ensure_object(Session)


VERBOSE_HELP = "also Dagster's step-by-step events (DEBUG) on the console, not only progress and results"


def _set_verbose(ctx: click.Context, _param, value: bool) -> None:
    if value:
        ctx.ensure_object(Session).verbose = True


def verbose_option(command):
    """`--verbose` after the command as well as before it."""
    return click.option("-v", "--verbose", is_flag=True, expose_value=False, callback=_set_verbose, help=VERBOSE_HELP)(
        command
    )


class SeveralValues(click.Command):
    """A command whose `several` options take every value up to the next option, as in
    `--models heuristic gpt-5-mini` (click's own way is one value per option)."""

    def __init__(self, *args, several: tuple[str, ...] = (), **kwargs):
        super().__init__(*args, **kwargs)
        self.several = several

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        out: list[str] = []
        name, given = None, 0
        for i, arg in enumerate(args):
            if arg == "--":
                out += args[i:]
                break
            if arg in self.several:
                if name is not None and not given:
                    out.append(name)  # no value: click names the mistake
                name, given = arg, 0
            elif name is not None and not arg.startswith("-"):
                out += [name, arg]
                given += 1
            else:
                if name is not None and not given:
                    out.append(name)
                name = None
                out.append(arg)
        if name is not None and not given:
            out.append(name)
        return super().parse_args(ctx, out)


def positive_int(_ctx, param, value: str | None) -> int | None:
    if value is None:
        return None
    try:
        number = int(value)
    except ValueError:
        raise click.BadParameter(f"a whole number, not {value!r}") from None
    if number < 1:
        raise click.BadParameter(f"must be at least 1, not {number}")
    return number


def eval_folder(path: Path) -> Path:
    """`path` if it is an eval folder (what `rescore` and `baseline record` read)."""
    example = "give one like outputs/evals/<env>--<model>/<run_id>"
    if not path.is_dir():
        raise CommandError(f"{path}: no such folder; {example}")
    missing = [name for name in ("metadata.json", "results.jsonl", "summary.json") if not (path / name).is_file()]
    if missing:
        raise CommandError(f"{path} is not an eval folder (no {', '.join(missing)}); {example}")
    return path


def env_choice() -> click.Choice:
    from sv_dagster.core.envs import ENVS

    return click.Choice(sorted(ENVS))
