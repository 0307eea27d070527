"""`dtnkit serve`: serve one directory tree over HTTP(S) for the data mover."""

from __future__ import annotations

import stat
from pathlib import Path

import click

from dtnkit.cli.options import CliCommand, Duration, pass_env
from dtnkit.cli.output import emit, format_option
from dtnkit.cli.stopping import stop_on_signals, wait
from dtnkit.environment import Environment
from dtnkit.errors import BadInput
from dtnkit.transfer.client import scitags
from dtnkit.transfer.server import start_server
from dtnkit.transfer.server.flows import Destination, Marking
from dtnkit.transfer.server.limits import Limits
from dtnkit.units import parse_bytes, parse_rate


@click.command(cls=CliCommand)
@click.option(
    "--root",
    required=True,
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    help="Directory to serve; nothing outside it is reachable.",
)
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=None,
    help="Port (default 8443 with TLS, 8080 without; 0 picks a free one).",
)
@click.option(
    "--cert",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="PEM certificate (chain) for TLS; needs --key.",
)
@click.option(
    "--key",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="PEM private key for --cert.",
)
@click.option(
    "--tokens",
    "tokens_file",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Bearer tokens, one 'TOKEN read|write|read,write' a line (mode 0600: "
    "a file others can read is warned about).",
)
@click.option("--anonymous-read", is_flag=True, help="Allow GET/HEAD/PROPFIND without a token.")
@click.option("--quiet", is_flag=True, help="No access log on stderr.")
@click.option(
    "--marker-interval",
    type=Duration(0.05, 600),
    default="5s",
    show_default=True,
    help="Time between third-party-copy performance markers.",
)
@click.option(
    "--ca-file",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    default=None,
    help="PEM CA bundle trusted when this server, as the active "
    "party of a third-party copy, connects to the remote one "
    "(also trusted: the hashed CA directory $X509_CERT_DIR, "
    "default /etc/grid-security/certificates, if it exists).",
)
@click.option(
    "--no-upload-sessions",
    "no_upload_sessions",
    is_flag=True,
    help="Refuse multi-stream partial uploads (POST Dtnkit-Upload sessions); "
    "clients fall back to one PUT stream.",
)
@click.option(
    "--upload-expiry",
    type=Duration(1, 7 * 86400),
    default="1h",
    show_default=True,
    help="How long (e.g. 1h) an idle partial-upload session is kept, and the age at "
    "which part files left by killed uploads and copies are removed.",
)
@format_option
@click.option(
    "--tpc-allow",
    "tpc_allow",
    multiple=True,
    metavar="HOST[:PORT]|CIDR",
    help="Let third-party copies reach this host or range too (repeatable); "
    "without it only global addresses (the IANA special-purpose table): "
    "loopback, private, link-local, site-local, unique-local, documentation, "
    "unspecified and the NAT64/6to4/Teredo/IPv4-mapped forms of such IPv4 "
    "addresses are refused.  Failures from listed hosts are told in full, "
    "others in one generic line.",
)
@click.option(
    "--sessions-per-token",
    type=click.IntRange(1, 512),
    default=Limits.sessions_per_token,
    show_default=True,
    help="Upload sessions one token may have open at once.",
)
@click.option(
    "--session-bytes-per-token",
    default=None,
    metavar="SIZE",
    help="Bytes the open upload sessions of one token may declare [default: half the free space].",
)
@click.option(
    "--hash-slots",
    type=click.IntRange(1, 64),
    default=Limits.hash_slots,
    show_default=True,
    help="Requests of one token that may compute digests at the same time.",
)
@click.option(
    "--listing-slots",
    type=click.IntRange(1, 64),
    default=Limits.listing_slots,
    show_default=True,
    help="Directory listings (PROPFIND depth 1, GET of a collection) of one token "
    "read at the same time; the others wait up to 30 s, then 503.",
)
@click.option(
    "--range-digest-max",
    default="64MiB",
    show_default=True,
    metavar="SIZE",
    help="Largest range whose Content-Digest is computed (0: none).",
)
@click.option(
    "--max-connections",
    type=click.IntRange(1, 2**24),
    default=None,
    help="Connections open at once; more get 503 and are closed (default: derived "
    "from the descriptor limit, whose soft value is raised to the hard one).",
)
@click.option(
    "--max-connections-per-client",
    type=click.IntRange(1, 2**24),
    default=None,
    help="Connections one client address (an IPv6 /64) may hold; more get 503 "
    "and are closed (default: an eighth of --max-connections, at least 64, "
    "at most half).",
)
@click.option(
    "--head-timeout",
    type=Duration(1, 600),
    default="20s",
    show_default=True,
    help="Time for a whole request head (and a TLS handshake) to arrive.",
)
@click.option(
    "--idle-timeout",
    type=Duration(1, 3600),
    default="60s",
    show_default=True,
    help="How long a kept-alive connection may wait for its next request.",
)
@click.option(
    "--drain-timeout",
    type=Duration(0, 3600),
    default="30s",
    show_default=True,
    help="On SIGTERM or SIGINT: how long requests in progress "
    "may take to finish before they are cut.",
)
@click.option(
    "--scitag",
    default=None,
    metavar="N",
    help="SciTags tag of requests without a valid SciTag header (expId << 6 | "
    "actId); default: such requests are not marked.",
)
@click.option(
    "--experiment",
    default=None,
    metavar="NAME",
    help="The default tag by name: a registry experiment (with --activity, default: default).",
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
    help="Resolve --experiment/--activity with this registry (api.json).",
)
@click.option(
    "--firefly-dest",
    "firefly_dest",
    multiple=True,
    metavar="origin|HOST[:PORT]",
    help="Send fireflies of tagged transfers here (repeatable; UDP, port 10514 by "
    "default); 'origin' is each flow's peer, as XRootD's pmark ffdest.",
)
@click.option(
    "--metrics",
    "metrics",
    is_flag=True,
    help="Answer GET /metrics with the mover's Prometheus series (needs a read "
    "token unless --metrics-anonymous); a root file named metrics is then "
    "not reachable.",
)
@click.option("--metrics-anonymous", is_flag=True, help="With --metrics: /metrics without a token.")
@click.option(
    "--capacity",
    default=None,
    metavar="RATE",
    help="With --metrics: the rate the streams share (1g, 100G), for the stream "
    "utilisation series (default: the link speed towards the clients).",
)
@pass_env
def serve(
    env: Environment,
    root: Path,
    host: str,
    port: int | None,
    cert: Path | None,
    key: Path | None,
    tokens_file: Path | None,
    anonymous_read: bool,
    quiet: bool,
    marker_interval: float,
    ca_file: Path | None = None,
    no_upload_sessions: bool = False,
    upload_expiry: float = 3600.0,
    tpc_allow: tuple[str, ...] = (),
    sessions_per_token: int = Limits.sessions_per_token,
    session_bytes_per_token: str | None = None,
    hash_slots: int = Limits.hash_slots,
    listing_slots: int = Limits.listing_slots,
    range_digest_max: str = "64MiB",
    fmt: str = "table",
    max_connections: int | None = None,
    max_connections_per_client: int | None = None,
    head_timeout: float = 20.0,
    idle_timeout: float = 60.0,
    drain_timeout: float = 30.0,
    scitag: str | None = None,
    experiment: str | None = None,
    activity: str | None = None,
    scitags_registry: str | None = None,
    firefly_dest: tuple[str, ...] = (),
    metrics: bool = False,
    metrics_anonymous: bool = False,
    capacity: str | None = None,
) -> int:
    """Serve ROOT over HTTP(S): GET/HEAD (ranges, digests), PUT, DELETE, MKCOL, PROPFIND,
    and HTTP third-party COPY (pull with Source:, push with Destination:).

    Prints one line with the URL once listening (with --format json, one JSON object on one
    line: url, root).  On SIGTERM or SIGINT it stops accepting, lets requests in progress
    finish (up to --drain-timeout) and stops.
    """
    if (cert is None) != (key is None):
        raise BadInput("TLS", "--cert and --key go together", "pass both, or neither for HTTP")
    tls = (cert, key) if cert is not None and key is not None else None
    if port is None:
        port = 8443 if tls is not None else 8080
    limits = Limits(
        sessions_per_token=sessions_per_token,
        session_bytes_per_token=None
        if session_bytes_per_token is None
        else parse_bytes(session_bytes_per_token, "session-bytes-per-token size", lo=1, hi=2**62),
        hash_slots=hash_slots,
        listing_slots=listing_slots,
        range_digest_max=parse_bytes(range_digest_max, "range-digest-max size", lo=0, hi=2**62),
    )
    if metrics_anonymous and not metrics:
        raise BadInput("--metrics-anonymous", "needs --metrics", "pass --metrics too")
    if capacity is not None and not metrics:
        raise BadInput("--capacity", "only scales the --metrics series", "pass --metrics too")
    capacity_bps = parse_rate(capacity, "capacity") if capacity is not None else None
    default = None
    if scitag is not None or experiment is not None or activity is not None:
        registry = (
            scitags.load(scitags_registry, env.state_dir)
            if scitag is None and experiment is not None
            else None
        )
        default = scitags.choose_tag(scitag, experiment, activity, registry)
    elif scitags_registry is not None:
        raise BadInput(
            "--scitags-registry",
            "is only read for --experiment/--activity",
            "pass --experiment NAME, or drop --scitags-registry",
        )
    marking = Marking(default, tuple(Destination.parse(d) for d in firefly_dest))
    if tokens_file is not None:
        _warn_shared(env, tokens_file)
    handle = start_server(
        root,
        host=host,
        port=port,
        tls=tls,
        tokens=tokens_file,
        anonymous_read=anonymous_read,
        quiet=quiet,
        marker_interval=marker_interval,
        ca_file=ca_file,
        ca_dir=env.x509_cert_dir,
        upload_sessions=not no_upload_sessions,
        upload_expiry=upload_expiry,
        tpc_allow=tpc_allow,
        limits=limits,
        max_connections=max_connections,
        max_connections_per_client=max_connections_per_client,
        head_timeout=head_timeout,
        idle_timeout=idle_timeout,
        marking=marking,
        metrics=metrics,
        metrics_anonymous=metrics_anonymous,
        capacity=capacity_bps / 8 if capacity_bps else None,
    )
    try:
        with stop_on_signals() as stop:
            cap = handle.limits.max_connections
            each = handle.limits.per_client
            emit(
                env,
                {
                    "url": handle.url,
                    "root": str(handle.root),
                    "max_connections": cap,
                    "max_connections_per_client": each,
                },
                fmt,
                lambda p: p.echo(
                    f"dtnkit serve: listening on {handle.url} "
                    f"(root {handle.root}, up to {cap} connections, "
                    f"{each} per client)"
                ),
                indent=None,
            )
            wait(stop)
    finally:
        handle.stop(drain=drain_timeout)
    click.echo("dtnkit serve: stopped", file=env.stderr)
    return 0


def _warn_shared(env: Environment, tokens_file: Path) -> None:
    """Warn (on stderr, once, at start) when the token file is readable by its group or by
    everyone: anyone who can read it holds every token in it, as ssh says of a private key."""
    try:
        mode = stat.S_IMODE(tokens_file.stat().st_mode)
    except OSError:
        return  # start_server says why it cannot be read
    if mode & (stat.S_IRGRP | stat.S_IROTH):
        who = " and ".join(
            w
            for w, bit in (("its group", stat.S_IRGRP), ("every user", stat.S_IROTH))
            if mode & bit
        )
        click.echo(
            f"dtnkit serve: warning: token file {tokens_file} (mode {mode:04o}) is "
            f"readable by {who}, who can then use every token in it. "
            f"Next: chmod 600 {tokens_file}",
            file=env.stderr,
        )
