"""`dtnkit probe`, `dtnkit results`, `dtnkit diagnose`, `dtnkit experiment`."""

from __future__ import annotations

import socket
from collections.abc import Callable, Sequence
from pathlib import Path
from shlex import join, quote
from typing import Any

import click

from dtnkit.cli import measure_render
from dtnkit.cli.hosts import make_host
from dtnkit.cli.judging_options import group_option, judging_options
from dtnkit.cli.options import (
    CliCommand,
    CliGroup,
    Duration,
    db_option,
    pass_env,
    state_dir_option,
)
from dtnkit.cli.output import Printer, emit, for_people, format_option
from dtnkit.cli.progress import reporter
from dtnkit.cli.progress import size as show_size
from dtnkit.cli.results_push import push as push_cmd
from dtnkit.db.location import Location
from dtnkit.diagnose.experiment import ExperimentSpec, live_tuning, run_experiment
from dtnkit.diagnose.layers import EXIT
from dtnkit.diagnose.layers import diagnose as run
from dtnkit.diagnose.nic import LineRate, line_rate
from dtnkit.environment import DEFAULT_RESULTS_DB, DEFAULT_STATE_DIR, Environment
from dtnkit.errors import BadInput
from dtnkit.host import cgexec
from dtnkit.host.host import Host
from dtnkit.host.parsers import is_uint
from dtnkit.lab.path import lab_peers
from dtnkit.measure import registry
from dtnkit.measure.probes.disk import MAX_SIZE_BYTES, DiskSpec
from dtnkit.measure.probes.e2e import E2ESpec
from dtnkit.measure.probes.net import NetSpec, egress_speed_mbps, resolve_peer
from dtnkit.measure.registry import run_probe
from dtnkit.measure.result import ProbeResult
from dtnkit.measure.store import ResultStore, export
from dtnkit.measure.tool import ProbeSpec, ToolContext
from dtnkit.measure.tools.dtnkit_cp import check_ends
from dtnkit.progress import SILENT, Progress
from dtnkit.tune.judging import DEFAULT_RTT_MS, Judging
from dtnkit.tune.keys import typed
from dtnkit.units import counted, parse_bytes

F = Callable[..., Any]


class Registered(click.Choice):  # type: ignore[type-arg]
    """Choices read from the measure registry when click needs them: probe kinds, the tools
    of one kind (``kind``), or with ``stored`` every kind a stored measurement can have (a
    sweep's ``tpc`` too), so a tool registered there is a choice here."""

    def __init__(self, kind: str | None = None, *, stored: bool = False) -> None:
        self.kind, self.stored = kind, stored
        super().__init__([])

    @property  # type: ignore[override]
    def choices(self) -> list[str]:
        if self.kind is not None:
            return registry.tool_names(self.kind)
        return registry.measured_kinds() if self.stored else registry.probe_kinds()

    @choices.setter
    def choices(self, value: Any) -> None:
        pass  # click sets its list in __init__; the registry is the list


def _tool(kind: str) -> Callable[[F], F]:
    return click.option(
        "--tool",
        type=Registered(kind),
        default=None,
        help=f"How to measure (default: the {kind} probe's default tool).",
    )


def _context(
    env: Environment,
    cgroup: Path | None = None,
    progress: Progress = SILENT,
    password: str | None = None,
) -> ToolContext:
    """The tools' wrapper (a cgroup), the lab paths that NAME/HOST peers name, where the
    tools report their intervals, and the password a tool authenticates with."""
    return ToolContext(
        wrap=_wrap(cgroup),
        lab_peers=lab_peers(env.lab_state_root),
        progress=progress,
        password=password,
    )


_TIMED_INTERVAL = (
    "Sampler period, e.g. 1s or 500ms (default: min(5s, duration / 5), so the "
    "run gets at least 5 samples)."
)


def _common(f: F, interval_help: str = _TIMED_INTERVAL) -> F:
    f = format_option(f)
    f = db_option(
        show_default="/var/lib/dtnkit/results.sqlite or $DTNKIT_DB",
        help="The results store: an SQLite file or a postgresql:// URL.",
    )(f)
    f = click.option("--netns", metavar="NS", help="Run from inside this network namespace.")(f)
    f = click.option(
        "--interval", "interval_s", type=Duration(0.1, 3600), default=None, help=interval_help
    )(f)
    return f


def _mover_options(f: F) -> F:
    """What the default end-to-end mover, dtnkit cp, is given (its options of the same
    names): the server's CA, no certificate check, the bearer token's file."""
    f = click.option(
        "--token-file",
        type=click.Path(dir_okay=False),
        default=None,
        metavar="FILE",
        help="dtnkit cp's --token-file: the bearer token's file (default: as "
        "dtnkit cp finds one: $DTNKIT_TOKEN, then WLCG discovery).",
    )(f)
    f = click.option(
        "--insecure",
        is_flag=True,
        help="dtnkit cp's --insecure: do not verify the server's certificate.",
    )(f)
    f = click.option(
        "--ca-file",
        type=click.Path(exists=True, dir_okay=False),
        default=None,
        metavar="FILE",
        help="dtnkit cp's --ca-file: the PEM CA bundle that signed the server's "
        "certificate (also trusted: $X509_CERT_DIR).",
    )(f)
    return f


def _common_untimed(f: F) -> F:
    """:func:`_common` for a command without a --duration (its sampler runs every 5 s)."""
    return _common(f, "Sampler period, e.g. 1s or 500ms (default 5s).")


def _interval(interval_s: float | None, duration_s: float | None = None) -> float:
    """The sampler period: as given, else one fifth of the duration (at most 5 s)."""
    if interval_s is None:
        return min(5.0, duration_s / 5) if duration_s else 5.0
    if not 0.1 <= interval_s <= 3600:  # also refuses nan
        raise BadInput(
            f"--interval {interval_s} is out of range",
            "allowed: 0.1 to 3600 s",
            "e.g. --interval 1, or leave it out",
        )
    return interval_s


def _opts(
    netns: str | None,
    state_dir: Path | None = None,
    db: Location | None = None,
    flags: Sequence[str] = (),
) -> str:
    """The options in force that a pasted next-step command needs (defaults left out);
    ``flags``: the judging flags given (--profile, --rtt, --speed ...)."""

    parts = [f"--netns {quote(netns)}"] if netns else []
    if state_dir is not None and state_dir != DEFAULT_STATE_DIR:
        parts.append(f"--state-dir {quote(str(state_dir))}")
    if db is not None and db != DEFAULT_RESULTS_DB:
        parts.append(f"--db {quote(str(db))}")
    if flags:
        parts.append(join(flags))
    return " ".join(parts)


def _host(netns: str | None) -> Host:
    return make_host(netns, None)


def _wrap(cgroup: Path | None) -> Callable[[Sequence[str]], list[str]] | None:
    """Run a tool inside a cgroup (e.g. one that throttles a disk), by its procs file."""
    if cgroup is None:
        return None
    procs = cgroup / "cgroup.procs"
    if not procs.exists():
        raise BadInput(
            f"{cgroup} is not a cgroup",
            "it has no cgroup.procs",
            "give a cgroup directory under /sys/fs/cgroup",
        )

    def wrap(argv: Sequence[str]) -> list[str]:
        return cgexec.command([str(procs)], argv)

    return wrap


def _emit(env: Environment, result: ProbeResult, fmt: str) -> None:
    emit(env, result.as_dict(with_raw=False), fmt, lambda p: _probe_table(p, result))


def _probe_table(p: Printer, result: ProbeResult) -> None:
    measure_render.probe_summary(p.console, result)


@click.group(cls=CliGroup)
def probe() -> None:
    """Measure one layer: network (iperf3), storage (fio), end to end."""


@probe.command()
@click.option(
    "-c",
    "--peer",
    required=True,
    help="NAME/HOST of a lab path, localhost, or an address running iperf3 -s (iperf3 -c).",
)
@click.option(
    "-P", "--streams", type=int, default=1, show_default=True, help="Parallel streams (iperf3 -P)."
)
@click.option(
    "-t",
    "--duration",
    "duration_s",
    type=Duration(1, 3600, whole=True),
    default="10s",
    show_default=True,
    help="How long to send, e.g. 30s or 2m (iperf3 -t; whole seconds).",
)
@click.option("-C", "--cc", default=None, help="Congestion control for the test (iperf3 -C).")
@click.option("--fq-rate", default=None, help="Per-flow pacing rate (iperf3 --fq-rate).")
@click.option("-R", "--reverse", is_flag=True, help="The peer sends (iperf3 -R).")
@click.option(
    "-p",
    "--port",
    type=int,
    default=5201,
    show_default=True,
    help="The peer's iperf3 port (iperf3 -p).",
)
@click.option("-J", "as_json", is_flag=True, help="The same as --format json (iperf3 -J).")
@click.option(
    "--server-key",
    type=click.Path(exists=True, dir_okay=False),
    default=None,
    metavar="FILE",
    help="The probe server's RSA public key (PEM, from `campaign "
    "server start`): authenticate as user dtnkit with $DTNKIT_TOKEN.",
)
@_tool("net")
@_common
@pass_env
def net(
    env: Environment,
    peer: str,
    streams: int,
    duration_s: int,
    cc: str | None,
    fq_rate: str | None,
    reverse: bool,
    port: int,
    as_json: bool,
    tool: str | None,
    netns: str | None,
    db: Location,
    fmt: str,
    interval_s: float | None,
    server_key: str | None = None,
) -> int:
    """iperf3 to a peer, with CPU, retransmits and per-flow state sampled.

    iperf3's own short flags work: -c peer, -P streams, -t duration, -R, -p port, -C, -J.
    """
    fmt = "json" if as_json else fmt
    host = _host(netns)
    progress = reporter(env, fmt)
    progress.step(
        f"network: {tool or 'iperf3'} to {peer}, {counted(streams, 'stream')}, "
        f"{duration_s} s{' (reverse)' if reverse else ''}"
    )
    if server_key is not None and not env.token:
        raise BadInput(
            "--server-key without a token",
            "the probe server lets in only clients that hold the campaign's token",
            "set $DTNKIT_TOKEN",
        )
    context = _context(
        env, progress=progress, password=env.token if server_key is not None else None
    )
    result = run_probe(
        host,
        NetSpec(
            peer,
            streams,
            duration_s,
            cc,
            fq_rate,
            reverse,
            port,
            _interval(interval_s, duration_s),
            server_key=None if server_key is None else str(Path(server_key).resolve()),
        ),
        tool=tool,
        context=context,
    )
    result.tuning = _tuning(host)
    ResultStore(db).add(result)
    _emit(env, result, fmt)
    return 0


@probe.command()
@click.option("--path", "path", required=True, help="Directory (or block device) to test.")
@click.option("--size", "size", default="256MiB", show_default=True)
@click.option("--direct/--buffered", default=True, show_default=True)
@click.option("--jobs", type=int, default=1, show_default=True)
@click.option(
    "--cgroup",
    type=click.Path(path_type=Path),
    default=None,
    help="Run fio inside this cgroup (e.g. one that throttles the disk).",
)
@_tool("disk")
@_common_untimed
@pass_env
def disk(
    env: Environment,
    path: str,
    size: str,
    direct: bool,
    jobs: int,
    cgroup: Path | None,
    tool: str | None,
    netns: str | None,
    db: Location,
    fmt: str,
    interval_s: float | None,
) -> int:
    """fio sequential write and read."""
    host = _host(netns)
    size_bytes = parse_bytes(size, "size", lo=2**20, hi=MAX_SIZE_BYTES)
    progress = reporter(env, fmt)
    progress.step(f"storage: {tool or 'fio'} on {path}, {show_size(size_bytes)} written, then read")
    result = run_probe(
        host,
        DiskSpec(path, size_bytes, direct, jobs, _interval(interval_s)),
        tool=tool,
        context=_context(env, cgroup, progress),
    )
    result.tuning = _tuning(host)
    ResultStore(db).add(result)
    _emit(env, result, fmt)
    return 0


@probe.command()
@click.argument("src")
@click.argument("dst")
@click.option(
    "--command",
    default=None,
    help="Transfer command with {src} and {dst}, e.g. "
    "'xrdcp {src} {dst}' (the command tool; default tool: dtnkit cp).",
)
@click.option(
    "--bytes", "nbytes", type=int, default=None, help="Bytes moved (default: the size of SRC)."
)
@click.option(
    "--cgroup",
    type=click.Path(path_type=Path),
    default=None,
    help="Run the transfer inside this cgroup.",
)
@_tool("e2e")
@_mover_options
@_common_untimed
@pass_env
def e2e(
    env: Environment,
    src: str,
    dst: str,
    command: str | None,
    nbytes: int | None,
    cgroup: Path | None,
    tool: str | None,
    netns: str | None,
    db: Location,
    fmt: str,
    interval_s: float | None,
    ca_file: str | None = None,
    insecure: bool = False,
    token_file: str | None = None,
) -> int:
    """A real transfer, timed: rate = bytes / wall time."""
    host = _host(netns)
    progress = reporter(env, fmt)
    chosen = _e2e_tool(tool, command)
    _check_e2e(src, dst, chosen)
    progress.step(f"end to end: {src} -> {dst} with {_mover(chosen, command)}")
    result = run_probe(
        host,
        E2ESpec(
            src,
            dst,
            command,
            nbytes,
            interval_s=_interval(interval_s),
            ca_file=ca_file,
            insecure=insecure,
            token_file=token_file,
        ),
        tool=chosen,
        context=_context(env, cgroup, progress),
    )
    result.tuning = _tuning(host)
    ResultStore(db).add(result)
    _emit(env, result, fmt)
    return 0


def _e2e_tool(tool: str | None, command: str | None) -> str | None:
    """--command without --tool means the command tool; neither: the default mover."""
    return tool or ("command" if command else None)


def _check_e2e(src: str, dst: str, tool: str | None) -> None:
    """Before anything runs: the default mover needs a URL at one end (BadInput if not)."""
    if tool in (None, "dtnkit-cp"):
        check_ends(src, dst)


def _mover(tool: str | None, command: str | None) -> str:
    """What moves an end-to-end probe's bytes, for its progress line."""
    if tool == "command" and command:
        return command.split()[0] if command.split() else "the command"
    return "dtnkit cp" if tool in (None, "dtnkit-cp") else tool


def _tuning(host: Host) -> dict[str, Any] | None:
    """The tuning live during a probe (recorded with the result)."""
    return live_tuning(host)


@click.group(cls=CliGroup)
def results() -> None:
    """Stored probe results and experiments."""


@results.command(name="list")
@click.option(
    "--kind",
    type=Registered(stored=True),
    default=None,
    help="Only this kind of measurement (tpc: a sweep's third-party copies, with --sweeps).",
)
@click.option("--limit", type=int, default=50, show_default=True)
@click.option("--experiments", is_flag=True, help="List experiments instead.")
@click.option(
    "--sweeps", is_flag=True, help="The sweeps' points' measurements too (label: RUN/POINT)."
)
@format_option
@db_option()
@pass_env
def list_cmd(
    env: Environment,
    kind: str | None,
    limit: int,
    experiments: bool,
    sweeps: bool,
    fmt: str,
    db: Location,
) -> int:
    """The newest results of probe, diagnose and experiment; --sweeps: the sweeps' points'
    measurements too, labelled RUN/POINT."""
    store = ResultStore(db)
    if experiments:
        exps = store.experiments()

        emit(env, exps, fmt, lambda p: measure_render.experiments_list(p.console, exps))
        return 0
    rows = store.results(kind=kind, limit=limit, sweeps=sweeps)
    here = socket.gethostname()

    emit(
        env,
        [r.as_dict(with_raw=False) for r in rows],
        fmt,
        lambda p: measure_render.results_list(p.console, rows, here),
    )
    return 0


@results.command()
@click.argument("result_id", metavar="ID")
@db_option()
@format_option
@pass_env
def show(env: Environment, result_id: str, db: Location, fmt: str) -> int:
    """Show one result (its number, as `results list` prints it) or one experiment (exp-...):
    its figures and when, where and with what it was measured; --format json: the full
    record (every figure, the samples, the tool's own output)."""
    store = ResultStore(db)
    if result_id.startswith("exp-"):
        exp = store.get_experiment(result_id)
        emit(env, exp, fmt, lambda p: measure_render.experiment_record(p.console, exp))
        return 0
    result = store.get(parse_result_id(result_id))
    emit(
        env,
        _typed_tuning(result.as_dict()),
        fmt,
        lambda p: measure_render.probe_summary(p.console, result, record=True),
    )
    return 0


def _typed_tuning(doc: dict[str, Any]) -> dict[str, Any]:
    """A result's ``tuning`` with sysctl triples as arrays of integers, as every other JSON
    prints them (the store keeps the text the kernel printed: its ``tuning_id`` hashes it)."""
    if isinstance(doc.get("tuning"), dict):
        doc["tuning"] = {k: typed(v) for k, v in doc["tuning"].items()}
    return doc


def parse_result_id(text: str) -> int:
    """A result's number (``12``, ``#12``); an experiment's ID is ``exp-...``."""
    digits = text.strip().removeprefix("#")
    if not is_uint(digits) or not 0 < int(digits) < 2**63:
        raise BadInput(
            f"bad result ID {text!r}",
            "a result is a number and an experiment exp-DATE-XXXX",
            "see `dtnkit results list` (and `dtnkit results list --experiments`)",
        )
    return int(digits)


@results.command(name="export")
@click.option("--format", "fmt", type=click.Choice(["json", "csv"]), default="json")
@click.option(
    "--kind", type=Registered(stored=True), default=None, help="Only this kind of measurement."
)
@db_option()
@pass_env
def export_cmd(env: Environment, fmt: str, kind: str | None, db: Location) -> int:
    rows = ResultStore(db).results(kind=kind, limit=100000)
    emit(env, [_typed_tuning(r.as_dict()) for r in rows], fmt, lambda p: p.echo(export(rows, fmt)))
    return 0


results.add_command(push_cmd)


@click.command(cls=CliCommand)
@click.option(
    "--peer", default=None, help="iperf3 peer: NAME/HOST of a lab path, localhost, or an address."
)
@click.option("--path", "path", default=None, help="Storage to probe with fio.")
@click.option(
    "--e2e",
    "e2e",
    nargs=2,
    default=None,
    metavar="SRC DST",
    help="An end-to-end transfer (dtnkit cp, or --command).",
)
@click.option("--command", default=None, help="Transfer command for --e2e ({src} {dst}).")
@click.option("--streams", type=int, default=1, show_default=True)
@click.option(
    "--duration",
    "duration_s",
    type=Duration(1, 3600, whole=True),
    default="10s",
    show_default=True,
    help="How long iperf3 sends, e.g. 30s or 2m.",
)
@click.option("--size", default="256MiB", show_default=True, help="fio file size.")
@click.option(
    "--cgroup",
    type=click.Path(path_type=Path),
    default=None,
    help="Run fio and the transfer inside this cgroup.",
)
@state_dir_option(help="Where `dtnkit tune` keeps its snapshots (carried into the hints).")
@judging_options(iface=False, netns=False)
@_mover_options
@_common
@pass_env
def diagnose(
    env: Environment,
    peer: str | None,
    path: str | None,
    e2e: tuple[str, str] | None,
    command: str | None,
    streams: int,
    duration_s: int,
    size: str,
    cgroup: Path | None,
    state_dir: Path,
    netns: str | None,
    db: Location,
    fmt: str,
    interval_s: float | None,
    judging: Judging,
    ca_file: str | None = None,
    insecure: bool = False,
    token_file: str | None = None,
) -> int:
    """Measure each layer and name the one that binds, with the next step.

    The tuning hints carry --netns, --state-dir and the --profile, --rtt and --speed given
    (--rtt: else the RTT measured); --speed is the egress link's speed when given.

    Exit: 0 nothing binds, 10 NIC, 11 host network, 12 path, 13 storage, 14 application,
    15 inconclusive (fewer than 5 sampler samples of the network probe).
    """
    if not (peer or path or e2e):
        raise BadInput(
            "nothing to diagnose",
            "give --peer, --path and/or --e2e",
            "e.g. dtnkit diagnose --peer demo/dst --netns dkl-demo-src",
        )
    size_bytes = parse_bytes(size, "size", lo=2**20, hi=MAX_SIZE_BYTES)  # before any probe
    if e2e:
        _check_e2e(e2e[0], e2e[1], _e2e_tool(None, command))
    progress = reporter(env, fmt)
    layers = [x for x in (peer and "network", path and "storage", e2e and "end to end") if x]
    host = _host(netns)
    store = ResultStore(db)
    net = disk_r = e2e_r = None
    line = LineRate(None, None)
    judged = judging.judging_flags(rtt=False, ifaces=False)
    ends = [_opts(netns, state_dir, flags=judged)]
    if peer:
        spec = NetSpec(peer, streams, duration_s, interval_s=_interval(interval_s, duration_s))
        context = _context(env, progress=progress)
        target = resolve_peer(peer, context.lab_peers)
        if target.netns:  # a lab peer: its own command in the hints
            ends.append(_opts(target.netns, state_dir, flags=judged))
        progress.step(
            f"network: iperf3 to {peer}, {counted(streams, 'stream')}, {duration_s} s",
            layers.index("network") + 1,
            len(layers),
        )
        net = run_probe(host, spec, context=context)
        net.tuning = _tuning(host)
        store.add(net)
        dev, speed_mbps = egress_speed_mbps(host, target.address)
        line = line_rate(host, dev, judging.speed_mbps or speed_mbps)
    interval_s = _interval(interval_s)
    if path:
        progress.step(
            f"storage: fio on {path}, {show_size(size_bytes)} written, then read",
            layers.index("storage") + 1,
            len(layers),
        )
        disk_r = run_probe(
            host,
            DiskSpec(path, size_bytes, interval_s=interval_s),
            context=_context(env, cgroup, progress),
        )
        disk_r.tuning = _tuning(host)
        store.add(disk_r)
    if e2e:
        progress.step(
            f"end to end: {e2e[0]} -> {e2e[1]} with {_mover(_e2e_tool(None, command), command)}",
            layers.index("end to end") + 1,
            len(layers),
        )
        e2e_r = run_probe(
            host,
            E2ESpec(
                e2e[0],
                e2e[1],
                command,
                interval_s=interval_s,
                ca_file=ca_file,
                insecure=insecure,
                token_file=token_file,
            ),
            tool=_e2e_tool(None, command),
            context=_context(env, cgroup, progress),
        )
        e2e_r.tuning = _tuning(host)
        store.add(e2e_r)
    result = run(
        net,
        link_bps=line.link_bps,
        disk=disk_r,
        e2e=e2e_r,
        cap_bps=line.cap_bps,
        cap_kind=line.cap_kind,
        dev=line.dev,
        ends=ends,
        rtt_ms=judging.rtt_ms if judging.rtt_ms != DEFAULT_RTT_MS else None,
    )

    doc = result.as_dict()
    emit(env, doc, fmt, lambda p: measure_render.diagnosis(p.console, doc))
    return int(EXIT[result.layer])


@click.command(cls=CliCommand)
@group_option(
    required=True,
    help="The groups to try, one at a time (repeat it, or separate "
    "with commas), e.g. --group buffers,congestion.",
)
@click.option("--probe", "probe_kind", type=Registered(), default="net", show_default=True)
@click.option(
    "--tool",
    default=None,
    help="How to measure (default: the probe's default tool); see `dtnkit probe KIND --help`.",
)
@click.option("--peer", default=None, help="iperf3 peer (for --probe net).")
@click.option("--path", "path", default=None, help="Storage (for --probe disk).")
@click.option("--e2e", "e2e", nargs=2, default=None, metavar="SRC DST")
@click.option("--command", default=None)
@click.option("--repeat", type=int, default=2, show_default=True)
@click.option("--both-ends", is_flag=True, help="Apply each group on the peer (a lab host) too.")
@judging_options(iface=True, netns=False)
@click.option("--streams", type=int, default=1, show_default=True)
@click.option(
    "--duration",
    "duration_s",
    type=Duration(1, 3600, whole=True),
    default="10s",
    show_default=True,
    help="How long each probe runs, e.g. 30s or 2m.",
)
@state_dir_option()
@_mover_options
@_common
@pass_env
def experiment(
    env: Environment,
    groups: tuple[str, ...],
    probe_kind: str,
    tool: str | None,
    peer: str | None,
    path: str | None,
    e2e: tuple[str, str] | None,
    command: str | None,
    repeat: int,
    both_ends: bool,
    judging: Judging,
    streams: int,
    duration_s: int,
    state_dir: Path,
    netns: str | None,
    db: Location,
    fmt: str,
    interval_s: float | None,
    ca_file: str | None = None,
    insecure: bool = False,
    token_file: str | None = None,
) -> int:
    """Apply one group at a time against interleaved baselines; keep what helps.

    Each group is judged by --profile, --rtt, --speed and --iface (on the peer too, but its
    own interfaces); `dtnkit tune apply --from-experiment ID` then applies only the groups
    that helped, judged the same way.
    """
    host = _host(netns)
    hosts = [host]
    context = _context(env, progress=reporter(env, fmt))
    probe_spec: ProbeSpec
    interval_s = _interval(interval_s, duration_s if probe_kind == "net" else None)
    if probe_kind == "net":
        if not peer:
            raise BadInput("--probe net needs --peer", "", "e.g. --peer demo/dst")
        probe_spec = NetSpec(peer, streams, duration_s, interval_s=interval_s)
        if both_ends:
            target = resolve_peer(peer, context.lab_peers)
            if not target.netns:
                raise BadInput(
                    "--both-ends needs a lab peer (NAME/HOST)",
                    "remote hosts are not supported yet",
                    "use --peer NAME/HOST",
                )
            hosts.append(Host.live(target.netns))
    elif probe_kind == "disk":
        if not path:
            raise BadInput("--probe disk needs --path", "", "e.g. --path /data")
        probe_spec = DiskSpec(path, interval_s=interval_s)
    else:
        if not e2e:
            raise BadInput(
                "--probe e2e needs --e2e SRC DST", "", "e.g. --e2e /data/f http://dtn:8080/f"
            )
        probe_spec = E2ESpec(
            e2e[0],
            e2e[1],
            command,
            interval_s=interval_s,
            ca_file=ca_file,
            insecure=insecure,
            token_file=token_file,
        )
        tool = _e2e_tool(tool, command)
        _check_e2e(e2e[0], e2e[1], tool)

    prof = judging.load_profile()
    person = for_people(env, fmt)
    say = None if person is None else person.echo
    report = run_experiment(
        hosts,
        ExperimentSpec(list(groups), probe_spec, tool, repeat, both_ends, judging=judging),
        prof,
        ResultStore(db),
        state_dir,
        context=context,
        progress=say,
    )

    # the same command on every end the groups were tried on, with the options in force
    # (the experiment's profile, RTT, speed and interfaces come from its record)
    report["next"] = (
        [
            " ".join(
                x
                for x in (
                    f"dtnkit tune apply --from-experiment {report['id']}",
                    _opts(h.netns, state_dir, db),
                )
                if x
            )
            for h in hosts
        ]
        if report["helped"]
        else []
    )

    emit(env, report, fmt, lambda p: measure_render.experiment_summary(p.console, report))
    return 0
