"""`dtnkit cp SRC DST`: copy files to or from a `dtnkit serve` (or any WebDAV/HTTP) endpoint."""

from __future__ import annotations

import signal
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import click
from click.core import ParameterSource

from dtnkit.cli.options import CliCommand, Duration, pass_env
from dtnkit.cli.output import emit, format_option
from dtnkit.environment import Environment
from dtnkit.errors import BadInput
from dtnkit.host.parsers import is_uint
from dtnkit.host.signals import interrupting
from dtnkit.transfer.checksum import ALGORITHMS
from dtnkit.transfer.client import bearer, streamtable
from dtnkit.transfer.client import timeline as timelines
from dtnkit.transfer.client.copy import copy, total_size
from dtnkit.transfer.client.metrics import CopyMetrics, check_path
from dtnkit.transfer.client.policy import StreamPolicy
from dtnkit.transfer.client.request import CopyRequest
from dtnkit.transfer.client.session import is_url
from dtnkit.transfer.client.verify import Level, Verify
from dtnkit.units import (
    counted,
    format_bytes,
    format_duration,
    format_rate,
    parse_bytes,
    parse_rate,
)

if TYPE_CHECKING:
    from dtnkit.transfer.wire.markers import Marker


def _streams(ctx: click.Context, param: click.Parameter, value: object) -> int | str:
    """``--streams``: 1-256 or ``auto``."""
    text = str(value).strip()
    if text.lower() == "auto":
        return "auto"
    if is_uint(text) and 1 <= int(text) <= 256:
        return int(text)
    raise click.BadParameter(f"{value!r} is neither auto nor a number from 1 to 256")


class _Bar:
    """A progress bar's handles: ``advance(bytes)``, and ``size(total)`` for a total known
    only once the copy has begun (a remote source's first answer)."""

    __slots__ = ("advance", "size")

    def __init__(self, advance: Callable[[int], None], size: Callable[[int], None]) -> None:
        self.advance = advance
        self.size = size


class _Notes:
    """Where ``dtnkit cp: ...`` notes go: stderr, or above the progress bar while one is
    drawn (a note written straight to the terminal would land in the bar's line, and the
    bar's next redraw would wipe it)."""

    def __init__(self, env: Environment) -> None:
        self.env = env
        self.above: Callable[[str], None] | None = None  # set while a bar is drawn

    def say(self, text: str) -> None:
        if self.above is not None:
            self.above(text)
        else:
            click.echo(text, file=self.env.stderr)


@contextmanager
def _progress(
    env: Environment, enabled: bool, total: int | None, notes: _Notes | None = None
) -> Iterator[_Bar | None]:
    """A rich progress bar on stderr (rate, ETA), or None when not *enabled*; while it is
    drawn, ``notes`` are printed above it."""
    if not enabled:
        yield None
        return
    # rich only when a person watches the bar (its import is most of cp's start-up:
    # docs/benchmarks.md, "cp start-up")
    from dtnkit.cli import cp_bar

    progress = cp_bar.progress(env.stderr)

    def above(text: str) -> None:
        progress.console.print(text, markup=False, highlight=False, soft_wrap=True)

    with progress:
        task = progress.add_task("cp", total=total)

        def advance(n: int) -> None:
            progress.advance(task, n)

        def size(n: int) -> None:
            progress.update(task, total=n)

        if notes is not None:
            notes.above = above
        try:
            yield _Bar(advance, size)
        finally:
            if notes is not None:
                notes.above = None


def _scitag(
    env: Environment,
    scitag: str | None,
    experiment: str | None,
    activity: str | None,
    registry: str | None,
) -> int | None:
    """The tag of ``--scitag`` or ``--experiment``/``--activity`` (None: not asked)."""
    if scitag is None and experiment is None and activity is None:
        if registry is not None:
            raise BadInput(
                "--scitags-registry",
                "is only read for --experiment/--activity",
                "pass --experiment NAME, or drop --scitags-registry",
            )
        return None
    from dtnkit.transfer.client import scitags  # a copy without a tag never loads it

    loaded = (
        scitags.load(registry, env.state_dir) if scitag is None and experiment is not None else None
    )
    return scitags.choose_tag(scitag, experiment, activity, loaded)


@contextmanager
def _sigterm_interrupts(notes: _Notes) -> Iterator[None]:
    """SIGTERM acts as Ctrl-C while copying: a download keeps its part file and journal."""
    with interrupting(signal.SIGTERM):
        try:
            yield
        except KeyboardInterrupt:
            notes.say(
                "dtnkit cp: interrupted; a partial download is kept: rerun the same "
                "command to resume"
            )
            raise


@click.command(cls=CliCommand)
@click.argument("src")
@click.argument("dst")
@click.option("-r", "--recursive", is_flag=True, help="Copy a directory tree.")
@click.option(
    "--streams",
    callback=_streams,
    metavar="N|auto",
    default="auto",
    show_default=True,
    help="Parallel TCP streams per file (disjoint byte ranges), or auto: "
    "ceil(rate x RTT / window) from the first connection's RTT, this host's "
    "socket buffer limits and --rate (at most 16; the reason goes to stderr); "
    "without --rate, when one window carries 1 Gbit/s, one stream starts and "
    "the others join only if it is bound by its window.",
)
@click.option(
    "--rate",
    "path_rate",
    default=None,
    help="With --streams auto: the path's rate in bit/s as iperf3 takes it (1g, "
    "10G, 500mbit); default: the link speed of the interface to the server.",
)
@click.option(
    "--streams-table",
    "streams_table",
    default=None,
    metavar="FILE",
    help="With --streams auto: a sweep's recommended streams per RTT (`dtnkit sweep "
    "analyze --save-streams`); its row for the measured RTT chooses. Default: "
    "STATE_DIR/streams.json when it exists and --rate is not given.",
)
@click.option(
    "--parallel",
    type=click.IntRange(1, 256),
    default=1,
    show_default=True,
    help="Files copied concurrently.",
)
@click.option(
    "--block-size", default="8MiB", show_default=True, help="Range block size per request."
)
@click.option(
    "-K",
    "--checksum",
    type=click.Choice(ALGORITHMS),
    default="adler32",
    show_default=True,
    help="Checksum algorithm (-K as in gfal-copy).",
)
@click.option(
    "--verify",
    type=click.Choice([v.value for v in Verify]),
    default=Verify.BLOCK.value,
    show_default=True,
    help="none; sequential (source, transfer, re-read destination); file (checksum "
    "after the transfer); block (pipelined with the transfer).",
)
@click.option(
    "--verify-level",
    "level",
    type=click.Choice([lv.value for lv in Level]),
    default=Level.INFLIGHT.value,
    show_default=True,
    help="inflight; durable (fsync before rename); ondisk (evict pages, re-read).",
)
@click.option("--retries", type=click.IntRange(0, 100), default=3, show_default=True)
@click.option(
    "--stall-timeout",
    type=Duration(0.1, 365 * 86400),
    default="60s",
    show_default=True,
    help="Time (e.g. 60s, 2m) without progress on a stream before it is retried.",
)
@click.option(
    "--low-speed-limit",
    default="1KiB",
    show_default=True,
    help="Minimum rate of each connection, in bytes/s (0: none): slower than this "
    "for --low-speed-time counts as a stall.",
)
@click.option(
    "--low-speed-time",
    type=Duration(0.1, 86400),
    default="30s",
    show_default=True,
    help="How long (e.g. 30s) a connection may stay below --low-speed-limit.",
)
@click.option(
    "--deadline",
    type=Duration(0.1, 365 * 86400),
    default=None,
    help="How long the whole copy may take, e.g. 10m or 2h (default: no limit); not retried.",
)
@click.option(
    "--no-resume",
    is_flag=True,
    help="Start over instead of resuming what an interrupted run kept (a "
    "download's part file, an upload's session on the server).",
)
@click.option(
    "--token",
    default=None,
    help="Bearer token; on a command line `ps` shows it: prefer --token-file. "
    "Without either: $DTNKIT_TOKEN, then WLCG token discovery "
    "($BEARER_TOKEN, the file $BEARER_TOKEN_FILE, $XDG_RUNTIME_DIR/bt_u$UID, "
    "/tmp/bt_u$UID).",
)
@click.option(
    "--token-file",
    type=click.Path(path_type=Path),
    default=None,
    metavar="FILE",
    help="Read the bearer token from FILE (as BEARER_TOKEN_FILE).",
)
@click.option(
    "--ca-file",
    type=click.Path(exists=True, dir_okay=False),
    default=None,
    help="PEM CA bundle to verify the server's certificate (also trusted: "
    "the hashed CA directory $X509_CERT_DIR, default "
    "/etc/grid-security/certificates, when it exists).",
)
@click.option("--insecure", is_flag=True, help="Do not verify the server's certificate.")
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    hidden=True,
    help="The same as --format json (kept for scripts).",
)
@format_option
@click.option(
    "-f",
    "--force",
    is_flag=True,
    help="Replace an existing destination (as xrdcp -f and gfal-copy -f); "
    "without it an existing file is never overwritten.",
)
@click.option(
    "-p",
    "--parents",
    is_flag=True,
    help="Create the destination's missing parent directories (a local path, as "
    "mkdir -p) or collections (a URL: MKCOL one level at a time, as gfal-copy "
    "-p and xrdcp -p).",
)
@click.option(
    "--tpc",
    type=click.Choice(["pull", "push"]),
    default=None,
    help="HTTP third-party copy between two servers: pull (COPY to DST with "
    "Source: SRC) or push (COPY to SRC with Destination: DST).",
)
@click.option(
    "--remote-token",
    default=None,
    help="With --tpc: token for the passive server, forwarded as "
    "TransferHeaderAuthorization (default: $DTNKIT_REMOTE_TOKEN, else none; "
    "--token is never sent to the other server).",
)
@click.option(
    "--remote-token-file",
    type=click.Path(path_type=Path),
    default=None,
    metavar="FILE",
    help="Read --remote-token from FILE.",
)
@click.option(
    "--src-token",
    default=None,
    help="Remote to remote without --tpc (relayed through this client): token for "
    "the source server (default: --token).",
)
@click.option(
    "--src-token-file",
    type=click.Path(path_type=Path),
    default=None,
    metavar="FILE",
    help="Read --src-token from FILE.",
)
@click.option(
    "--dst-token",
    default=None,
    help="Remote to remote without --tpc: token for the destination server (default: --token).",
)
@click.option(
    "--dst-token-file",
    type=click.Path(path_type=Path),
    default=None,
    metavar="FILE",
    help="Read --dst-token from FILE.",
)
@click.option(
    "--scitag",
    default=None,
    metavar="N",
    help="SciTags tag of the transfer (expId << 6 | actId, 65-65535): sent as the "
    "SciTag header on every request (and TransferHeaderSciTag with --tpc); "
    "the IPv6 flow label of the connections this client opens.",
)
@click.option(
    "--experiment",
    default=None,
    metavar="NAME",
    help="SciTags experiment (a registry name such as atlas, or its id); with "
    "--activity (default: default) instead of --scitag.",
)
@click.option(
    "--activity",
    default=None,
    metavar="NAME",
    help="SciTags activity of --experiment (a registry name or id).",
)
@click.option(
    "--scitags-registry",
    default=None,
    metavar="FILE|URL",
    help="Resolve --experiment/--activity with this registry (api.json) instead "
    "of the one `dtnkit scitags refresh` kept or the shipped snapshot.",
)
@click.option(
    "-v",
    "--verbose",
    is_flag=True,
    help="Say in full why --streams auto chose its streams (by default: one line).",
)
@click.option(
    "--metrics-textfile",
    type=click.Path(path_type=Path),
    default=None,
    metavar="FILE",
    help="Write the copy's Prometheus series to FILE (atomically, every 5 s and "
    "at the end), e.g. for node_exporter's textfile collector (*.prom).",
)
@click.option(
    "--timeline",
    "timeline_path",
    type=click.Path(path_type=Path),
    default=None,
    metavar="FILE",
    help="Write the copy's timeline to FILE (JSON): each connection's bytes over "
    "time from TCP_INFO, and its steps (handshakes, the streams decision, "
    "requests, streams starting and ending, digest, commit) with their times.",
)
@click.option(
    "--capacity",
    default=None,
    metavar="RATE",
    help="With --metrics-textfile: the rate the streams share (1g, 10G), for the "
    "stream utilisation series.",
)
@pass_env
def cp(
    env: Environment,
    src: str,
    dst: str,
    recursive: bool,
    streams: int | str,
    path_rate: str | None,
    parallel: int,
    block_size: str,
    checksum: str,
    verify: str,
    level: str,
    retries: int,
    stall_timeout: float,
    token: str | None,
    ca_file: str | None,
    insecure: bool,
    as_json: bool,
    fmt: str = "table",
    force: bool = False,
    tpc: str | None = None,
    remote_token: str | None = None,
    no_resume: bool = False,
    src_token: str | None = None,
    dst_token: str | None = None,
    low_speed_limit: str = "1KiB",
    low_speed_time: float = 30.0,
    deadline: float | None = None,
    scitag: str | None = None,
    experiment: str | None = None,
    activity: str | None = None,
    scitags_registry: str | None = None,
    metrics_textfile: Path | None = None,
    capacity: str | None = None,
    streams_table: str | None = None,
    token_file: Path | None = None,
    remote_token_file: Path | None = None,
    src_token_file: Path | None = None,
    dst_token_file: Path | None = None,
    verbose: bool = False,
    parents: bool = False,
    timeline_path: Path | None = None,
) -> int:
    """Copy SRC to DST: local path or http(s)://host:port/path, at least one a URL.

    Two URLs without --tpc: relayed through this client (ranges fetched from SRC and sent to
    DST, hashed in flight, compared with SRC's digest).  Uploads with --streams N > 1 use N
    streams and resumable upload sessions where the server has them (dtnkit serve), else one
    PUT stream (the JSON summary's upload_streams); rerun a failed upload to resume it.

    The destination appears only after verification; a failed copy leaves nothing behind.
    """
    as_json = as_json or fmt == "json"
    tag = _scitag(env, scitag, experiment, activity, scitags_registry)
    capacity_bps = parse_rate(capacity, "capacity") if capacity is not None else None
    if capacity_bps is not None and metrics_textfile is None:
        raise BadInput(
            "--capacity",
            "only scales the --metrics-textfile series",
            "pass --metrics-textfile FILE with it, or drop --capacity",
        )
    token = _token(env, "--token", token, token_file, discover=True)
    remote_token = _token(env, "--remote-token", remote_token, remote_token_file)
    src_token = _token(env, "--src-token", src_token, src_token_file)
    dst_token = _token(env, "--dst-token", dst_token, dst_token_file)
    rate_bps = parse_rate(path_rate, "rate") if path_rate is not None else None
    if rate_bps is not None and streams != "auto":
        raise BadInput(
            "--rate",
            "only chooses the number of streams",
            "pass --streams auto with it, or drop --rate",
        )
    if streams_table is not None and (streams != "auto" or rate_bps is not None):
        raise BadInput(
            "--streams-table",
            "chooses the number of streams with --streams auto (instead of --rate)",
            "pass --streams auto without --rate, or drop --streams-table",
        )
    if tpc is not None:
        explicit = click.get_current_context().get_parameter_source("streams") not in (
            ParameterSource.DEFAULT,
            None,
        )
        if streams == "auto" and explicit:  # the servers' path is not seen from here
            click.echo(
                "dtnkit cp: --tpc: 1 stream, auto cannot measure the servers' path: "
                "--streams N" + (" (this client is not on that path)" if verbose else ""),
                file=env.stderr,
            )
        if timeline_path is not None:
            raise BadInput(
                "--timeline",
                "is not drawn for --tpc (the active server moves the bytes)",
                "drop --timeline; scrape the active server's /metrics (dtnkit serve --metrics)",
            )
        if metrics_textfile is not None:
            raise BadInput(
                "--metrics-textfile",
                "is not written for --tpc (the active server moves the bytes)",
                "scrape the active server's /metrics (dtnkit serve --metrics)",
            )
        # never --token: the passive server gets a token only when one is given for it
        if remote_token is None:
            remote_token = env.remote_token
        return _third_party(
            env,
            tpc,
            src,
            dst,
            token,
            remote_token,
            streams if isinstance(streams, int) else 1,
            checksum,
            stall_timeout,
            ca_file,
            insecure,
            as_json,
            deadline,
            overwrite=force,
            scitag=tag,
            ca_dir=str(env.x509_cert_dir),
            parents=parents,
        )
    auto = None
    notes = _Notes(env)
    if streams == "auto":
        table, table_source = _streams_table(env, streams_table, rate_bps)
        auto = StreamPolicy.for_this_host(rate_bps, table=table, table_source=table_source)
        asked = click.get_current_context().get_parameter_source("streams") not in (
            ParameterSource.DEFAULT,
            None,
        )
        # else: in the summary and JSON only
        if asked or table is not None or (env.stderr_isatty and not as_json):
            # one line each; -v: the reasoning in full
            auto.on_decision = lambda d: notes.say(
                f"dtnkit cp: --streams auto: {d.reason}"
                if verbose
                else f"dtnkit cp: {d.short()}" + (" (-v: why)" if d.brief else "")
            )
            auto.on_grow = lambda why: notes.say(
                f"dtnkit cp: --streams auto: {why}"
                if verbose
                else f"dtnkit cp: used {why.split(': ', 1)[0]} (-v: why)"
            )
    request = CopyRequest(
        streams=streams if isinstance(streams, int) else 1,
        block_size=parse_bytes(block_size, "block-size", lo=4096, hi=2**30),
        checksum=checksum,
        verify=Verify(verify),
        level=Level(level),
        retries=retries,
        stall_timeout=stall_timeout,
        token=token,
        ca_file=ca_file,
        insecure=insecure,
        ca_dir=str(env.x509_cert_dir),
        parallel=parallel,
        recursive=recursive,
        resume=not no_resume,
        src_token=src_token,
        dst_token=dst_token,
        overwrite=force,
        parents=parents,
        low_speed_limit=parse_bytes(low_speed_limit, "low-speed-limit rate", lo=0, hi=2**40),
        low_speed_time=low_speed_time,
        deadline=deadline,
        scitag=tag,
    )
    recorder = None
    if metrics_textfile is not None:
        recorder = CopyMetrics(
            check_path(metrics_textfile),
            streams=request.streams,
            upload=not is_url(src),
            capacity=capacity_bps / 8 if capacity_bps else None,
        )
    timeline = None
    if timeline_path is not None:
        timeline_path = timelines.check_path(timeline_path)
        timeline = timelines.Timeline()
    show = env.stderr_isatty and not as_json
    with _progress(env, show, total_size(src) if show else None, notes) as bar:
        advance = bar.advance if bar is not None else None
        progress = advance if recorder is None else recorder.wrap(advance)
        # a remote source's size, from its first answer
        on_size = bar.size if bar is not None and not recursive else None
        if recorder is not None:
            recorder.start()
        ok = False
        try:
            with _sigterm_interrupts(notes):
                summary = copy(
                    src,
                    dst,
                    request,
                    streams=auto,
                    progress=progress,
                    on_size=on_size,
                    timeline=timeline,
                )
            ok = True
        finally:
            if recorder is not None:
                recorder.stop(ok)
            if timeline is not None and timeline_path is not None:
                timeline.close()
                timelines.write(timeline_path, timeline.document())
    result = summary.as_dict()
    rate = result["rate_bps"]
    rate_text = format_rate(rate if isinstance(rate, float) else None)
    digest = f", {request.checksum} {result['digest']}" if result["digest"] else ""
    kept = summary.resumed_bytes
    moved = (
        f"{format_bytes(result['bytes'])} in {format_duration(result['seconds'])} ({rate_text})"
        if not kept
        else f"{format_bytes(result['bytes'])}: {format_bytes(summary.bytes - kept)} moved in "
        f"{format_duration(result['seconds'])} ({rate_text}), {format_bytes(kept)} kept "
        "from the interrupted run"
    )
    if auto is not None and auto.decision is not None:
        digest += f", {counted(auto.used or auto.decision.streams, 'stream')} (auto)"
    # for people the summary goes to stderr, beside the progress bar
    emit(
        env,
        result,
        "json" if as_json else "table",
        lambda p: p.echo(
            f"copied {counted(len(summary.files), 'file')}, {moved}; verify "
            f"{verify}, level {result['level']}{digest}",
            err=True,
        ),
        indent=None,
    )
    return 0


def _streams_table(
    env: Environment, given: str | None, rate_bps: int | None
) -> tuple[list[tuple[float, int]] | None, str]:
    """The sweep's streams table --streams auto reads: --streams-table FILE, else the state
    dir's streams.json when it exists and no --rate was given; (None, "") for none."""
    if given is not None:
        path = Path(given)
    else:
        path = env.state_dir / streamtable.DEFAULT_NAME
        if rate_bps is not None or not path.is_file():
            return None, ""
    return streamtable.load(path), str(path)


def _token(
    env: Environment, flag: str, given: str | None, path: Path | None, discover: bool = False
) -> str | None:
    """The token of ``flag`` (or of ``flag``-file); ``discover``: else the environment's
    (WLCG discovery).  Never printed: errors name the file or the variable."""
    if given is not None and path is not None:
        raise BadInput(
            f"{flag} and {flag}-file",
            "both give the token",
            f"pass only {flag}-file (a command line shows in `ps`)",
        )
    if path is not None:
        return bearer.read_token_file(path, f"{flag}-file")
    if given is not None or not discover:
        return given
    found = bearer.discover(env)
    return None if found is None else found.value


def _third_party(
    env: Environment,
    mode: str,
    src: str,
    dst: str,
    token: str | None,
    remote_token: str | None,
    streams: int,
    checksum: str,
    timeout: float,
    ca_file: str | None,
    insecure: bool,
    as_json: bool,
    deadline: float | None = None,
    *,
    overwrite: bool = True,
    scitag: int | None = None,
    ca_dir: str | None = None,
    parents: bool = False,
) -> int:
    """``cp --tpc``: ask one server to copy from/to the other; the active side verifies."""
    from dtnkit.transfer.client import tpc  # only a third-party copy loads it

    show = env.stderr_isatty and not as_json
    # the markers tell the bytes moved, not the size: ask the source for the bar's total
    total = (
        tpc.source_size(
            mode,
            src,
            token=token,
            remote_token=remote_token,
            ca_file=ca_file,
            insecure=insecure,
            ca_dir=ca_dir,
        )
        if show
        else None
    )
    with _progress(env, show, total) as bar:
        per_stripe: dict[int, int] = {}

        def on_marker(marker: Marker) -> None:
            """Advance the bar by what the markers say moved since the last one."""
            if bar is None or marker.stripe_bytes is None:
                return
            before = sum(per_stripe.values())
            per_stripe[marker.stripe_index or 0] = marker.stripe_bytes
            bar.advance(max(0, sum(per_stripe.values()) - before))

        done = tpc.third_party_copy(
            mode,
            src,
            dst,
            token=token,
            remote_token=remote_token,
            streams=streams,
            checksum=checksum,
            timeout=timeout,
            ca_file=ca_file,
            insecure=insecure,
            on_marker=on_marker,
            deadline=deadline,
            overwrite=overwrite,
            scitag=scitag,
            ca_dir=ca_dir,
            parents=parents,
        )
    summary = done.as_dict()
    shown = f", {checksum} {summary['digest']}" if summary["digest"] else ""
    seconds = done.result.seconds
    rate = f" ({format_rate(done.size * 8 / seconds)})" if seconds > 0 else ""
    emit(
        env,
        summary,
        "json" if as_json else "table",
        lambda p: p.echo(
            f"third-party {mode}: {format_bytes(done.size)} in "
            f"{format_duration(seconds)}{rate}"
            f"{shown}",
            err=True,
        ),
        indent=None,
    )
    return 0
