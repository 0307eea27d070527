"""The `dtnkit` command: ``main(argv, env) -> ExitStatus`` is the single catch site.

Tests call :func:`main` in-process, with an :class:`~dtnkit.environment.Environment` of their
own when they want other state directories or streams; otherwise ``main`` reads the process's
one, once, and hands it to every command as click's ``ctx.obj``.  Every
:class:`~dtnkit.errors.DtnkitError` becomes one line on stderr (``dtnkit: error: what: why.
Next: ...``), and in ``--format json`` mode also a JSON object ``{"error": {...}}`` on stdout,
so a script always gets JSON.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Sequence

import click

from dtnkit import __version__
from dtnkit.cli.output import emit
from dtnkit.environment import Environment
from dtnkit.errors import DtnkitError, ExitStatus

#: command -> (module, attribute); a command's module is imported only when it runs (or for
#: the help listing), so `dtnkit cp` does not pay for tune/lab/measure imports at start-up
COMMANDS: dict[str, tuple[str, str]] = {
    "tune": ("dtnkit.cli.tune", "tune"),
    "lab": ("dtnkit.cli.lab", "lab"),
    "serve": ("dtnkit.cli.serve", "serve"),
    "cp": ("dtnkit.cli.cp", "cp"),
    "probe": ("dtnkit.cli.measure", "probe"),
    "results": ("dtnkit.cli.measure", "results"),
    "diagnose": ("dtnkit.cli.measure", "diagnose"),
    "experiment": ("dtnkit.cli.measure", "experiment"),
}


class _LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in COMMANDS:
            return None
        module, attr = COMMANDS[cmd_name]
        command = getattr(importlib.import_module(module), attr)
        assert isinstance(command, click.Command)
        return command


@click.group(cls=_LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="dtnkit")
@click.option("--traceback", is_flag=True, help="Show the Python traceback of errors.")
def cli(traceback: bool) -> None:
    """Tune, measure and test research data-transfer nodes."""
    # --traceback is acted on by main(), which sees it before click parses anything


def main(argv: Sequence[str] | None = None, env: Environment | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    env = Environment.from_os() if env is None else env
    json_mode = _wants_json(args)
    try:
        result = cli.main(args=args, prog_name="dtnkit", standalone_mode=False, obj=env)
    except DtnkitError as exc:
        if "--traceback" in args:
            raise
        click.echo(exc.render(), file=env.stderr)
        if json_mode:
            emit(env, {"error": exc.as_dict()}, "json")
        return int(exc.status)
    except click.exceptions.Abort:
        click.echo("dtnkit: interrupted", file=env.stderr)
        return int(ExitStatus.INTERRUPTED)
    except KeyboardInterrupt:
        click.echo("dtnkit: interrupted", file=env.stderr)
        return int(ExitStatus.INTERRUPTED)
    except click.ClickException as exc:
        exc.show(file=env.stderr)
        return int(ExitStatus.USAGE)
    except click.exceptions.Exit as exc:
        return int(exc.exit_code)
    return int(result) if isinstance(result, int) else int(ExitStatus.OK)


def _wants_json(args: Sequence[str]) -> bool:
    if "--json" in args:
        return True
    for i, arg in enumerate(args):
        if arg == "--format=json" or (arg == "--format" and args[i + 1:i + 2] == ["json"]):
            return True
    return False


def entry() -> None:
    sys.exit(main())


if __name__ == "__main__":
    entry()
