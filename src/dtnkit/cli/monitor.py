"""`dtnkit exporter` (Prometheus /metrics over HTTP) and `dtnkit metrics` (one collection:
for people, JSON, the exposition text, or a file for node_exporter's textfile collector)."""

from __future__ import annotations

import ipaddress
import ssl
from pathlib import Path
from typing import Any

import click
from prometheus_client import make_wsgi_app
from prometheus_client.process_collector import ProcessCollector

from dtnkit.cli.judging_options import judging_options
from dtnkit.cli.options import CliCommand, Duration, db_option, pass_env, wide_option
from dtnkit.cli.output import emit
from dtnkit.cli.render import Col, print_fitted
from dtnkit.cli.stopping import stop_on_signals, wait
from dtnkit.db.location import Location
from dtnkit.environment import Environment
from dtnkit.errors import BadInput, DtnkitError, ExitStatus
from dtnkit.host.parsers import is_uint
from dtnkit.monitor import httpd, webconfig
from dtnkit.monitor.base import Exporter
from dtnkit.monitor.build import (
    DriftOptions,
    check_textfile,
    collect_once,
    rules_text,
    write_textfile,
)
from dtnkit.monitor.build import exporter as build
from dtnkit.tune.judging import Judging
from dtnkit.units import format_duration

DEFAULT_LISTEN = "127.0.0.1:9640"


def parse_listen(text: str) -> tuple[str, int]:
    """``ADDR:PORT``, ``[V6ADDR]:PORT`` or ``:PORT`` (every address) -> (address, port)."""
    addr, sep, port_text = text.rpartition(":")
    if not sep or not is_uint(port_text) or int(port_text) > 65535:
        raise BadInput(
            f"bad --listen {text!r}",
            "it takes ADDR:PORT, [V6ADDR]:PORT or :PORT",
            f"e.g. --listen {DEFAULT_LISTEN}",
        )
    if addr.startswith("[") and addr.endswith("]"):
        addr = addr[1:-1]
    addr = addr or "0.0.0.0"
    try:
        ipaddress.ip_address(addr)
    except ValueError:
        raise BadInput(
            f"bad --listen {text!r}",
            f"{addr!r} is not an IP address",
            f"e.g. --listen {DEFAULT_LISTEN}",
        ) from None
    return addr, int(port_text)


def _flat(args: Any) -> str:
    """An exception's arguments as one line (prometheus_client wraps ssl's in a tuple)."""
    if isinstance(args, tuple | list):
        return "; ".join(filter(None, (_flat(a) for a in args)))
    return str(args).strip()


def _common(f: Any) -> Any:
    for deco in reversed(
        (
            click.option(
                "--netns",
                default=None,
                metavar="NS",
                help="Read this network namespace's counters (the exporter listens in its own).",
            ),
            # the drift series judge as `tune audit` does with the same flags
            judging_options(iface=True, netns=False),
            click.option("--no-drift", is_flag=True, help="No tuning-drift series (no audit)."),
            db_option(
                help="Results store whose last probes are exported (default $DTNKIT_DB or "
                "/var/lib/dtnkit/results.sqlite; never created)."
            ),
        )
    ):
        f = deco(f)
    return f


def _drift(no_drift: bool, judging: Judging, interval: float) -> DriftOptions | None:
    if no_drift:
        return None
    return DriftOptions(judging=judging, interval=interval)


@click.command(cls=CliCommand)
@click.option(
    "--listen",
    "--web.listen-address",
    "listen",
    default=DEFAULT_LISTEN,
    show_default=True,
    metavar="ADDR:PORT",
    help="Address and port of /metrics (port 0 picks a free one); "
    "--web.listen-address is the Prometheus exporters' name for it.",
)
@_common
@click.option(
    "--drift-interval",
    type=Duration(1, 86400),
    default="5m",
    show_default=True,
    help="Audit for the drift series at most this often (a scrape in between gets the last one).",
)
@click.option(
    "--cert",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="PEM certificate for HTTPS; needs --key.",
)
@click.option(
    "--key",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="PEM private key for --cert.",
)
@click.option(
    "--client-ca",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Accept only clients with a certificate from this CA (mutual TLS).",
)
@click.option(
    "--web.config.file",
    "web_config",
    type=click.Path(path_type=Path),
    default=None,
    metavar="FILE",
    help="Prometheus exporter-toolkit web config (YAML): tls_server_config "
    "(cert_file, key_file, client_ca_file) and basic_auth_users (bcrypt); "
    "instead of --cert/--key/--client-ca.",
)
@click.option(
    "--max-connections",
    type=click.IntRange(1, 2**24),
    default=None,
    help="Connections open at once; more get 503 and are closed (default: derived "
    "from the descriptor limit, as dtnkit serve).",
)
@click.option(
    "--max-connections-per-client",
    type=click.IntRange(1, 2**24),
    default=None,
    help="Connections one client address (an IPv6 /64) may hold (default: an "
    "eighth of --max-connections, at least 64, at most half).",
)
@click.option(
    "--head-timeout",
    type=Duration(1, 600),
    default="20s",
    show_default=True,
    help="Time for a TLS handshake and a whole request head to arrive; a silent "
    "connection is closed then (it never holds a thread).",
)
@click.option(
    "--print-rules", is_flag=True, help="Print the shipped Prometheus alert rules (YAML) and exit."
)
@wide_option
@click.option(
    "--format",
    "fmt",
    type=click.Choice(("table", "json")),
    default="table",
    show_default=True,
    help="json: the listening line as one JSON object.",
)
@pass_env
def exporter(
    env: Environment,
    listen: str,
    netns: str | None,
    judging: Judging,
    no_drift: bool,
    db: Location,
    drift_interval: float,
    cert: Path | None,
    key: Path | None,
    client_ca: Path | None,
    print_rules: bool,
    fmt: str,
    web_config: Path | None = None,
    max_connections: int | None = None,
    max_connections_per_client: int | None = None,
    head_timeout: float = 20.0,
) -> int:
    """Serve Prometheus metrics at http://ADDR:PORT/metrics: TCP, softnet, NIC and CPU
    counters node_exporter does not export, tuning drift and the last probe results.

    Reads on every scrape (no background work).  Prints one line once listening; stops on
    SIGTERM or SIGINT.  TLS and basic auth: --web.config.file, as other exporters.
    """
    if print_rules:
        click.echo(rules_text(), file=env.stdout, nl=False)
        return int(ExitStatus.OK)
    addr, port = parse_listen(listen)
    if (cert is None) != (key is None):
        raise BadInput("TLS", "--cert and --key go together", "pass both, or neither for HTTP")
    if client_ca is not None and cert is None:
        raise BadInput("TLS", "--client-ca needs --cert and --key", "pass all three")
    web = None
    if web_config is not None:
        if cert is not None or client_ca is not None:
            raise BadInput(
                "--web.config.file",
                "gives TLS itself",
                "pass either --web.config.file or --cert/--key/--client-ca",
            )
        web = webconfig.load(web_config)

    limits = httpd.Settings(
        max_connections=max_connections,
        max_per_client=max_connections_per_client,
        head_timeout=head_timeout,
        log=env.stderr,
    )

    drift = _drift(no_drift, judging, drift_interval)
    with build(netns, db, drift) as (reg, _):
        # process_* as every Prometheus exporter has them, and the older prefixed names
        ProcessCollector(registry=reg)
        ProcessCollector(namespace="dtnkit_exporter", registry=reg)
        try:
            if web is not None:
                server = webconfig.serve(web, addr, port, reg, limits)
            else:
                ctx = (
                    None
                    if cert is None or key is None
                    else httpd.tls_context(
                        str(cert), str(key), None if client_ca is None else str(client_ca)
                    )
                )
                server = httpd.ExporterServer(make_wsgi_app(reg), addr, port, ctx, limits)
        except ssl.SSLError as exc:  # a bad certificate or key (an OSError too)
            raise BadInput("TLS", _flat(exc.args) or str(exc), "check --cert and --key") from exc
        except OSError as exc:
            raise DtnkitError(
                f"cannot listen on {listen}",
                exc.strerror or str(exc),
                "pick another --listen (port 0 picks a free one)",
            ) from exc
        bound_addr = server.server_address[0]
        host = bound_addr.decode() if isinstance(bound_addr, bytes) else str(bound_addr)
        bound = int(server.server_address[1])
        shown = f"[{host}]" if ":" in host else host
        tls = cert is not None or (web is not None and web.tls)
        url = f"{'https' if tls else 'http'}://{shown}:{bound}/metrics"
        try:
            with stop_on_signals() as stop:
                emit(
                    env,
                    {"url": url, "netns": netns},
                    fmt,
                    lambda p: p.echo(
                        f"dtnkit exporter: listening on {url}"
                        + (f" (namespace {netns})" if netns else "")
                    ),
                    indent=None,
                )
                env.stdout.flush()
                wait(stop)
        finally:
            server.shutdown()
    return int(ExitStatus.OK)


@click.command(cls=CliCommand)
@_common
@click.option(
    "--textfile",
    type=click.Path(path_type=Path),
    default=None,
    metavar="DIR",
    help="Write DIR/dtnkit.prom for node_exporter's textfile collector (atomic: a "
    "temporary file in DIR, then a rename).",
)
@click.option(
    "--name",
    "file_name",
    default="dtnkit.prom",
    show_default=True,
    help="File name inside --textfile's DIR (ends in .prom).",
)
@wide_option
@click.option(
    "--format",
    "fmt",
    type=click.Choice(("table", "json", "prom")),
    default="table",
    show_default=True,
    help="prom: the exposition text Prometheus reads; json: the samples.",
)
@pass_env
def metrics(
    env: Environment,
    netns: str | None,
    judging: Judging,
    no_drift: bool,
    db: Location,
    textfile: Path | None,
    file_name: str,
    fmt: str,
) -> int:
    """Collect once: the exporter's series for people, as JSON, as the exposition text
    (--format prom), or into a file for node_exporter's textfile collector (--textfile).

    Exit 0 when every collector succeeded, 1 when one failed (the others' series are still
    there; the table and JSON say which one and why).
    """
    if textfile is not None:
        check_textfile(textfile, file_name)  # before any read: bad input writes nothing
    drift = _drift(no_drift, judging, 300.0)
    with build(netns, db, drift) as (reg, collector):
        families, data = collect_once(reg)
    written = None if textfile is None else write_textfile(textfile, file_name, data)
    samples = [s for fam in families for s in fam.samples]
    rows = [
        _collector_row(s.labels["collector"], samples, collector)
        for s in samples
        if s.name == "dtnkit_collector_success"
    ]
    doc: dict[str, Any] = {
        "netns": netns,
        "textfile": None if written is None else str(written),
        "collectors": rows,
        "series": len(samples),
        **(
            {}
            if written is not None
            else {
                "samples": [{"name": s.name, "labels": s.labels, "value": s.value} for s in samples]
            }
        ),
    }
    if fmt == "prom" and written is None:
        env.stdout.write(data.decode())
    else:
        emit(env, doc, fmt, lambda p: _table(p, doc))
    ok = all(c["ok"] for c in rows)
    return int(ExitStatus.OK if ok else ExitStatus.ERROR)


def _collector_row(name: str, samples: list[Any], collector: Exporter) -> dict[str, Any]:
    def value(metric: str) -> float:
        return float(
            next(s.value for s in samples if s.name == metric and s.labels.get("collector") == name)
        )

    return {
        "collector": name,
        "ok": value("dtnkit_collector_success") == 1.0,
        "duration_s": value("dtnkit_collector_duration_seconds"),
        "error": collector.errors.get(name),
    }


def _table(p: Any, doc: dict[str, Any]) -> None:
    rows = [
        [
            c["collector"],
            "ok" if c["ok"] else "FAILED",
            format_duration(c["duration_s"]),
            c["error"] or "",
        ]
        for c in doc["collectors"]
    ]
    print_fitted(
        p.console,
        [Col("collector"), Col("read"), Col("time", justify="right"), Col("error", rank=1)],
        rows,
    )
    where = f" to {doc['textfile']}" if doc["textfile"] else ""
    p.echo(
        f"{doc['series']} series{where}"
        + ("" if doc["textfile"] else "; --format prom prints them")
    )
