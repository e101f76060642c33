"""The ``offpoc`` command line: launch background training runs, watch, control and export them.

    offpoc run td3 Hopper-v4 --correction acoffpoc --compare --seeds 0-4
    offpoc ps            offpoc show 3          offpoc follow
    offpoc stop 3        offpoc resume 3        offpoc rm 3        offpoc jobs 4
    offpoc sweep sweeps/quick.toml [--backend ray]
    offpoc export --table evaluations --format csv -o returns.csv
    offpoc dashboard     offpoc dashboard --once

Bad input prints one line and exits with status 2, before anything is written.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import sys
from typing import Annotated, Any

import typer
from typer.exceptions import Abort

try:  # typer ≥ 0.20 vendors click; its exceptions are not click's
    from typer._click.exceptions import ClickException, NoArgsIsHelpError
except ImportError:  # pragma: no cover - older typer on plain click
    from click import ClickException  # type: ignore[assignment]
    from click.exceptions import NoArgsIsHelpError  # type: ignore[assignment]
from offpoc_tui.commands import control, dashboard, export, logs, merge, queue, settings, sweeps, tags, watch
from offpoc_tui.commands.analyze import analyze_app
from offpoc_tui.commands.imports import import_app
from offpoc_tui.commands.plot import plot
from offpoc_tui.console import WholeSummaries
from store import StoreError


class OneLineErrors(WholeSummaries):
    """Click's usage errors, and the store's, as one ``error: ...`` line with exit status 2."""

    def main(self, *args: Any, standalone_mode: bool = True, **kwargs: Any) -> Any:
        kwargs["standalone_mode"] = False
        if not standalone_mode:
            return super().main(*args, **kwargs)
        try:
            code = super().main(*args, **kwargs)
        except NoArgsIsHelpError as error:  # bare `offpoc` (or a group): its help, not an error
            if error.format_message().strip():
                typer.echo(error.format_message())
            sys.exit(0)
        except ClickException as error:
            typer.echo(f"error: {error.format_message()}", err=True)
            sys.exit(error.exit_code)
        except Abort:
            typer.echo("aborted", err=True)
            sys.exit(1)
        except StoreError as error:  # the store's errors are one line each, wherever they arise
            typer.echo(f"error: {error}", err=True)
            sys.exit(2)
        except sqlite3.Error as error:  # the store could not be read or written now (locked too long, a full disk)
            typer.echo(f"error: the store could not be used: {error}", err=True)
            sys.exit(1)
        except BrokenPipeError:  # its reader stopped reading (`| head`): nothing more to say
            _drop_stdout()
            sys.exit(1)
        except OSError as error:  # the output could not be written (a full disk behind `>`)
            _drop_stdout()
            where = f": {error.filename}" if error.filename else ""
            typer.echo(f"error: {error.strerror or error}{where}", err=True)
            sys.exit(1)
        sys.exit(code if isinstance(code, int) else 0)


HELP_OPTIONS: dict[str, Any] = {"help_option_names": ["-h", "--help"], "max_content_width": 120}
"""``-h`` too; help as wide as the terminal, up to 120 columns (click stops at 80)."""
app = typer.Typer(
    cls=OneLineErrors,
    help="AC-Off-POC experiments: background training runs in SQLite, and the tools to watch them.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,  # help texts are literal: '[default: 1,000,000]' is not markup
    context_settings=HELP_OPTIONS,
)


def _version(value: bool) -> None:
    if value:
        from importlib.metadata import version

        typer.echo(f"offpoc {version('offpoc')}")
        raise typer.Exit()


@app.callback()
def _main(
    _: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Print offpoc's version and exit.")
    ] = False,
) -> None:
    """AC-Off-POC experiments: background training runs in SQLite, and the tools to watch them."""


for command in (queue.run, sweeps.sweep, settings.config, settings.jobs, watch.follow, watch.ps, watch.show, logs.logs,
                control.stop, control.resume, control.rm, control.duplicates, export.export,
                dashboard.dashboard, merge.merge):  # fmt: skip
    app.command()(command)
# `tag 3 -draft -hard`: tags to remove, not options (so only --help asks for help); `note 3 "-5% worse"`: a note.
app.command(context_settings={"ignore_unknown_options": True, "help_option_names": ["--help"]})(tags.tag)
app.command(context_settings={"ignore_unknown_options": True})(tags.note)
app.add_typer(import_app, name="import")
app.add_typer(analyze_app, name="analyze")
app.command()(plot)


def _drop_stdout() -> None:
    """Send what is left in standard output's buffer nowhere: a failed stream flushed again at exit would print
    Python's own complaint after our line."""
    with contextlib.suppress(OSError, ValueError):
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


def main() -> None:
    if sys.stdout is None:  # started with standard output closed (`>&-`): what it prints goes nowhere, as asked
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115 (for the life of the process)
    app(prog_name="offpoc")


if __name__ == "__main__":
    main()
