"""The `dtnkit` command: ``main(argv, env) -> ExitStatus`` is the single catch site.

Tests call :func:`main` in-process, with an :class:`~dtnkit.environment.Environment` of their
own when they want other state directories or streams; otherwise ``main`` reads the process's
one, once, and hands it to every command as click's ``ctx.obj``.  Every
:class:`~dtnkit.errors.DtnkitError` becomes one line on stderr (``dtnkit: error: what: why.
Next: ...``), and in ``--format json`` mode also a JSON object ``{"error": {...}}`` on stdout,
so a script always gets JSON.
"""

from __future__ import annotations

import os
import re
import select
import signal
import sys
from collections.abc import Sequence

import click

from dtnkit import __version__
from dtnkit.cli.options import LazyGroup
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
    "scitags": ("dtnkit.cli.scitags", "scitags"),
    "probe": ("dtnkit.cli.measure", "probe"),
    "results": ("dtnkit.cli.measure", "results"),
    "diagnose": ("dtnkit.cli.measure", "diagnose"),
    "experiment": ("dtnkit.cli.measure", "experiment"),
    "exporter": ("dtnkit.cli.monitor", "exporter"),
    "metrics": ("dtnkit.cli.monitor", "metrics"),
    "checklist": ("dtnkit.cli.checklist", "checklist"),
    "sweep": ("dtnkit.cli.sweep", "sweep"),
    "fleet": ("dtnkit.cli.fleet", "fleet"),
}

#: an old spelling -> the group and command it is now: still run, never listed in the help,
#: and each use says the new spelling on stderr (stdout and the exit status are the command's)
ALIASES: dict[str, tuple[str, str]] = {
    "report": ("sweep", "report"),
    "campaign": ("fleet", "campaign"),
}


class StdoutClosed(Exception):
    """stdout's reader went away (`dtnkit ... | head`); raised past click, which would exit 1."""


class _LazyGroup(LazyGroup):
    def invoke(self, ctx: click.Context) -> object:
        try:
            return super().invoke(ctx)
        except BrokenPipeError as exc:
            if _stdout_closed(ctx.find_object(Environment)):
                raise StdoutClosed() from exc
            raise
        except SystemExit as exc:
            # rich's console exits 1 when its output pipe is closed
            if isinstance(exc.__context__, BrokenPipeError):
                raise StdoutClosed() from exc
            raise

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in ALIASES:
            group_name, name = ALIASES[cmd_name]
            group = self.get_command(ctx, group_name)
            assert isinstance(group, click.Group)
            env = ctx.find_object(Environment)
            if env is not None and not ctx.resilient_parsing:
                click.echo(
                    f"dtnkit: note: `dtnkit {cmd_name}` is now `dtnkit {group_name} {name}`",
                    file=env.stderr,
                )
            return group.get_command(ctx, name)
        return super().get_command(ctx, cmd_name)


@click.group(cls=_LazyGroup, lazy=COMMANDS)
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
        try:
            result = cli.main(args=args, prog_name="dtnkit", standalone_mode=False, obj=env)
        except click.exceptions.NoArgsIsHelpError as exc:
            exc.show(file=env.stderr)  # a bare command group: its help, as git does
            return int(ExitStatus.USAGE)
        except click.UsageError as exc:  # click's four lines become dtnkit's one
            raise usage_error(exc) from exc
    except DtnkitError as exc:
        if "--traceback" in args:
            raise
        click.echo(exc.render(), file=env.stderr)
        if json_mode:
            emit(env, {"error": exc.as_dict()}, "json")
        return int(exc.status)
    except StdoutClosed:
        return int(ExitStatus.BROKEN_PIPE)  # entry() ends the process as SIGPIPE would
    except click.exceptions.Abort:
        click.echo("dtnkit: interrupted", file=env.stderr)
        return int(ExitStatus.INTERRUPTED)
    except KeyboardInterrupt:
        click.echo("dtnkit: interrupted", file=env.stderr)
        return int(ExitStatus.INTERRUPTED)
    except click.ClickException as exc:
        click.echo(f"dtnkit: error: {_message(exc)}", file=env.stderr)
        return int(ExitStatus.USAGE)
    except click.exceptions.Exit as exc:
        return int(exc.exit_code)
    return int(result) if isinstance(result, int) else int(ExitStatus.OK)


def usage_error(exc: click.UsageError) -> DtnkitError:
    """Click's usage error as dtnkit's one line: the command, what is wrong, where to look."""
    path = exc.ctx.command_path if exc.ctx is not None else "dtnkit"
    where = path.removeprefix("dtnkit").strip()
    what, _, why = _message(exc).partition(": ")
    return DtnkitError(
        f"{where}: {what}" if where else what, why, f"see `{path} -h`", status=ExitStatus.USAGE
    )


def _message(exc: click.ClickException) -> str:
    """Click's message on one line, without its capital and full stop."""
    text = "; ".join(line.strip() for line in exc.format_message().splitlines() if line.strip())
    m = re.fullmatch(r"(.*?)\.? \(?Did you mean (?:one of: )?(.*?)\?\)?", text)
    if m:  # click's "... '--grou'. (Did you mean one of: '--group', '--groups'?)"
        text = f"{m.group(1)} (did you mean {m.group(2).replace(', ', ' or ')}?)"
    text = text.rstrip(".")
    return text[:1].lower() + text[1:]


def _stdout_closed(env: Environment | None) -> bool:
    """Whether the reader of stdout is gone (a pipe to `head` that has exited)."""
    if env is None:
        return False
    try:
        fd = env.stdout.fileno()
    except (AttributeError, OSError, ValueError):
        return False
    poller = select.poll()
    poller.register(fd, select.POLLOUT)
    return any(event & select.POLLERR for _, event in poller.poll(0))


def _wants_json(args: Sequence[str]) -> bool:
    if "--" in args:  # what follows is another command's (`lab exec ... -- iperf3 -J`)
        args = args[: list(args).index("--")]
    if "--json" in args or "-J" in args:
        return True
    for i, arg in enumerate(args):
        if arg == "--format=json" or (arg == "--format" and args[i + 1 : i + 2] == ["json"]):
            return True
    return False


def entry() -> None:
    code = main()
    if code != ExitStatus.BROKEN_PIPE:
        try:
            sys.stdout.flush()  # a pipe's last block is written here
        except BrokenPipeError:
            code = int(ExitStatus.BROKEN_PIPE)
    if code == ExitStatus.BROKEN_PIPE:
        _die_of_sigpipe()
    sys.exit(code)


def _die_of_sigpipe() -> None:
    """End as `yes | head -1` ends: killed by SIGPIPE, silently (the shell shows 141)."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # nothing left to flush at exit
    except (OSError, ValueError):
        pass
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    os.kill(os.getpid(), signal.SIGPIPE)
    sys.exit(int(ExitStatus.BROKEN_PIPE))  # if the signal was blocked


if __name__ == "__main__":
    entry()
