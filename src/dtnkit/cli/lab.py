"""`dtnkit lab`: emulated WAN paths between network namespaces."""

from __future__ import annotations

from typing import Any

import click

from dtnkit.cli import lab_render
from dtnkit.cli.options import CliGroup, pass_env
from dtnkit.cli.output import emit, format_option
from dtnkit.cli.progress import reporter
from dtnkit.environment import Environment
from dtnkit.errors import BadInput
from dtnkit.host.process import run_forwarding
from dtnkit.lab import path as lab_path
from dtnkit.units import (
    format_ms,
    format_percent,
    format_rate,
    parse_bytes,
    parse_fraction,
    parse_ms,
    parse_rate,
)


def _lab() -> Any:
    return lab_path


@click.group(cls=CliGroup)
def lab() -> None:
    """Emulated WAN paths (RTT, rate cap, loss) between network namespaces."""


@lab.command()
@click.argument("name")
@click.option("--rtt", default="50ms", show_default=True, help="Round-trip time, e.g. 50ms.")
@click.option("--rate", default=None, help="Bottleneck rate, e.g. 2gbit (default: none).")
@click.option("--loss", default="0", show_default=True, help="Forward-path loss, e.g. 0.01%.")
@click.option(
    "--src-rate",
    default=None,
    help="The sending hosts' own interface rate, e.g. "
    "1gbit (a tbf on their interface: the NIC is the limit; default: none).",
)
@click.option(
    "--queue",
    default="auto",
    show_default=True,
    help="Bottleneck FIFO in bytes, or auto (one bandwidth-delay product).",
)
@click.option("--mtu", type=int, default=1500, show_default=True)
@click.option(
    "--src", "n_src", type=int, default=1, show_default=True, help="Hosts on the sending side."
)
@click.option(
    "--dst", "n_dst", type=int, default=1, show_default=True, help="Hosts on the receiving side."
)
@click.option(
    "--backend", type=click.Choice(["auto", "netem", "nfqueue"]), default="auto", show_default=True
)
@click.option("--seed", type=int, default=1, show_default=True, help="Seed of the loss draws.")
@format_option
@pass_env
def up(
    env: Environment,
    name: str,
    rtt: str,
    rate: str | None,
    src_rate: str | None,
    loss: str,
    queue: str,
    mtu: int,
    n_src: int,
    n_dst: int,
    backend: str,
    seed: int,
    fmt: str,
) -> int:
    """Build path NAME and print its hosts."""
    lab_path = _lab()
    spec = lab_path.PathSpec(
        rtt_ms=parse_ms(rtt, "RTT", hi=2000),
        rate_bps=parse_rate(rate, hi=lab_path.MAX_RATE_BPS) if rate else None,
        loss=parse_fraction(loss),
        queue_bytes=None if queue == "auto" else parse_bytes(queue),
        mtu=mtu,
        n_src=n_src,
        n_dst=n_dst,
        backend=backend,
        seed=seed,
        src_rate_bps=(
            parse_rate(src_rate, "src-rate", hi=lab_path.MAX_RATE_BPS) if src_rate else None
        ),
    )
    built = lab_path.up(name, spec, state_root=env.lab_state_root, progress=reporter(env, fmt))
    doc = built.status(measure=False)
    emit(env, doc, fmt, lambda p: lab_render.lab_up(p.console, name, doc))
    return 0


@lab.command(name="list")
@format_option
@pass_env
def list_cmd(env: Environment, fmt: str) -> int:
    """List lab paths."""
    rows = _lab().list_paths(state_root=env.lab_state_root)

    emit(env, rows, fmt, lambda p: lab_render.lab_list(p.console, rows))
    return 0


@lab.command()
@click.argument("name")
@click.option("--no-measure", is_flag=True, help="Skip the ping that measures the RTT.")
@format_option
@pass_env
def status(env: Environment, name: str, no_measure: bool, fmt: str) -> int:
    """Configured vs measured RTT, counters and emulator health."""
    doc = _lab().load(name, state_root=env.lab_state_root).status(measure=not no_measure)
    emit(env, doc, fmt, lambda p: lab_render.lab_status(p.console, doc))
    return 0


@lab.command(name="set")
@click.argument("name")
@click.option("--rtt", default=None)
@click.option("--rate", default=None)
@click.option("--loss", default=None)
@click.option("--queue", default=None)
@format_option
@pass_env
def set_cmd(
    env: Environment,
    name: str,
    rtt: str | None,
    rate: str | None,
    loss: str | None,
    queue: str | None,
    fmt: str,
) -> int:
    """Change a path's RTT, rate, loss or queue in place."""
    if rtt is None and rate is None and loss is None and queue is None:
        raise BadInput("nothing to change", "", "give --rtt, --rate, --loss or --queue")
    built = _lab().load(name, state_root=env.lab_state_root)
    built.set(
        rtt_ms=parse_ms(rtt, "RTT", hi=2000) if rtt is not None else None,
        rate_bps=parse_rate(rate, hi=_lab().MAX_RATE_BPS) if rate else None,
        loss=parse_fraction(loss) if loss is not None else None,
        queue_bytes=parse_bytes(queue) if queue else None,
    )
    spec = built.spec
    emit(
        env,
        {"name": name, "rtt_ms": spec.rtt_ms, "rate_bps": spec.rate_bps, "loss": spec.loss},
        fmt,
        lambda p: p.echo(
            f"{name}: RTT {format_ms(spec.rtt_ms)}, "
            f"{format_rate(spec.rate_bps) if spec.rate_bps else 'no rate cap'}, "
            f"loss {format_percent(spec.loss, fraction=True)}"
        ),
    )
    return 0


@lab.command(name="exec", context_settings={"ignore_unknown_options": True})
@click.argument("name")
@click.argument("host")
@click.argument("command", nargs=-1, type=click.UNPROCESSED, required=True)
@pass_env
def exec_cmd(env: Environment, name: str, host: str, command: tuple[str, ...]) -> int:
    """Run COMMAND inside HOST's namespace (use -- before the command).

    SIGINT, SIGTERM and SIGHUP go to COMMAND, which is waited for (an interrupted `cp` keeps
    its resume journal); the exit status is COMMAND's (128+N when signal N ended it)."""
    target = _lab().load(name, state_root=env.lab_state_root).host(host)
    return run_forwarding(target.argv(list(command)))


@lab.command()
@click.argument("name", required=False)
@click.option("--all", "everything", is_flag=True, help="Every lab path, and leftovers.")
@click.option("--prefix", default=None, help="With --all: only paths whose name starts with this.")
@click.option("--missing-ok", is_flag=True, help="A NAME that does not exist is not an error.")
@format_option
@pass_env
def down(
    env: Environment,
    name: str | None,
    everything: bool,
    prefix: str | None,
    missing_ok: bool,
    fmt: str,
) -> int:
    """Remove a path: processes, namespaces, devices, rules, state."""
    lab_path = _lab()
    if prefix is not None and not everything:
        raise BadInput(
            "--prefix needs --all",
            "it picks which paths --all removes",
            f"`dtnkit lab down --all --prefix {prefix}`",
        )
    if everything and name:
        raise BadInput(
            "give NAME or --all, not both",
            "",
            "`dtnkit lab down NAME` or `dtnkit lab down --all [--prefix P]`",
        )
    if everything:
        if prefix is not None:
            lab_path.check_prefix(prefix)
        removed = lab_path.down_all(state_root=env.lab_state_root, prefix=prefix or "")
    elif name:
        removed = lab_path.down(name, state_root=env.lab_state_root, missing_ok=missing_ok)
    else:
        raise BadInput("which path?", "give NAME or --all", "see `dtnkit lab list`")
    emit(
        env,
        {"removed": removed},
        fmt,
        lambda p: p.echo(
            f"removed {len(removed)} namespaces" + (f": {' '.join(removed)}" if removed else "")
        ),
    )
    return 0
