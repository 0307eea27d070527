"""`dtnkit fleet campaign`: the steps of a fleet campaign that run on one host, for the Ansible
collection dtn.dtnkit (its `probe` and `experiment` modules): gate, judge, server start|stop."""

from __future__ import annotations

from pathlib import Path

import click

from dtnkit.cli.options import CliGroup, pass_env, state_dir_option
from dtnkit.cli.output import emit, format_option
from dtnkit.diagnose.campaign import gate as gate_of
from dtnkit.diagnose.campaign import server_start as start
from dtnkit.diagnose.campaign import server_stop as stop
from dtnkit.diagnose.campaign import verdict
from dtnkit.environment import Environment
from dtnkit.units import parse_speed


@click.group(cls=CliGroup)
def campaign() -> None:
    """Steps of a fleet campaign: the NIC-headroom gate, a group's verdict, a probe server."""


def _speeds(texts: tuple[str, ...]) -> float | None:
    """The slower of the ends' NIC speeds, in bit/s (None: none given)."""
    return min(parse_speed(t, "--nic-speed") for t in texts) * 1e6 if texts else None


@campaign.command()
@click.option("--group", required=True, help="The group (one).")
@click.option(
    "--baseline",
    "baseline",
    type=float,
    multiple=True,
    metavar="BPS",
    help="A baseline throughput in bit/s (repeat it for each run).",
)
@click.option(
    "--nic-speed",
    "nic_speeds",
    multiple=True,
    metavar="SPEED",
    help="An end's NIC speed, e.g. 10gbit (repeat it for each end: the slower counts).",
)
@click.option(
    "--measured-harmful",
    is_flag=True,
    help="The group was judged harmful on this pair before: keep it off.",
)
@format_option
@pass_env
def gate(
    env: Environment,
    group: str,
    baseline: tuple[float, ...],
    nic_speeds: tuple[str, ...],
    measured_harmful: bool,
    fmt: str,
) -> int:
    """Whether a group must stay off a pair (the NIC-headroom gate).  Reads only."""
    doc = gate_of(group, baseline, _speeds(nic_speeds), measured_harmful)
    emit(
        env,
        doc,
        fmt,
        lambda p: p.echo(f"{group}: {'gated' if doc['gated'] else 'may be applied'}: {doc['why']}"),
    )
    return 0


@campaign.command()
@click.option("--group", required=True, help="The group (one).")
@click.option(
    "--baseline",
    "baseline",
    type=float,
    multiple=True,
    metavar="BPS",
    help="A baseline throughput in bit/s (repeat it for each run).",
)
@click.option(
    "--applied",
    "applied",
    type=float,
    multiple=True,
    metavar="BPS",
    help="A throughput with the group applied, in bit/s (repeat it).",
)
@format_option
@pass_env
def judge(
    env: Environment, group: str, baseline: tuple[float, ...], applied: tuple[float, ...], fmt: str
) -> int:
    """A group's verdict on a pair (helps, neutral, harmful), by `dtnkit experiment`'s rule."""
    doc = verdict(group, baseline, applied)
    emit(env, doc, fmt, lambda p: p.echo(f"{group}: {doc['verdict']}: {doc['why']}"))
    return 0


@campaign.group()
def server() -> None:
    """An iperf3 server kept by a PID file under the state dir, for a pair's probes."""


@server.command(name="start")
@click.option("--port", type=int, default=5201, show_default=True, help="The port (0: a free one).")
@click.option(
    "--bind",
    required=True,
    metavar="ADDR",
    help="Listen on this address only: the one the campaign's client probes (iperf3 -B).",
)
@state_dir_option(help="The PID file goes under DIR/servers/.")
@format_option
@pass_env
def server_start(env: Environment, port: int, bind: str, state_dir: Path, fmt: str) -> int:
    """Start iperf3 -s in this network namespace (one already running there for the same
    address and token is kept).  Only clients holding the campaign's token ($DTNKIT_TOKEN)
    get in: iperf3's RSA authentication, user dtnkit, a fresh key pair whose public half is
    printed (JSON: public_key) for the client's --server-key.  Started by root, iperf3 runs
    as nobody."""
    doc = start(state_dir, port, bind, env.token)
    emit(
        env,
        doc,
        fmt,
        lambda p: p.echo(
            f"iperf3 -s on {doc['bind']} port {doc['port']}, pid {doc['pid']} as {doc['user']}"
            f"{'' if doc['started'] else ' (already running)'}; clients need the token and "
            f"{Path(doc['pid_file']).with_suffix('.pub')}"
        ),
        indent=None,
    )
    return 0


@server.command(name="stop")
@click.option("--port", type=int, default=5201, show_default=True)
@state_dir_option(help="Where `server start` wrote the PID file.")
@format_option
@pass_env
def server_stop(env: Environment, port: int, state_dir: Path, fmt: str) -> int:
    """Stop the iperf3 server that `server start` started on this port (by its PID)."""
    doc = stop(state_dir, port)
    emit(env, doc, fmt, lambda p: p.echo(f"port {port}: {doc['why']}"), indent=None)
    return 0
