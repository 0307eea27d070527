"""`dtnkit cp SRC DST`: copy files to or from a `dtnkit serve` (or any WebDAV/HTTP) endpoint."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import click

from dtnkit.transfer import checksum as cks
from dtnkit.transfer import pipeline as pl
from dtnkit.units import parse_bytes


@contextmanager
def _progress(enabled: bool, total: int | None) -> Iterator[Callable[[int], None] | None]:
    """A rich progress bar on stderr (rate, ETA); yields its advance(bytes) or None."""
    if not enabled:
        yield None
        return
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        DownloadColumn,
        Progress,
        TimeRemainingColumn,
        TransferSpeedColumn,
    )

    progress = Progress("[progress.description]{task.description}", BarColumn(),
                        DownloadColumn(binary_units=True), TransferSpeedColumn(),
                        TimeRemainingColumn(), console=Console(stderr=True), transient=True)
    with progress:
        task = progress.add_task("cp", total=total)

        def advance(n: int) -> None:
            progress.advance(task, n)

        yield advance


@click.command()
@click.argument("src")
@click.argument("dst")
@click.option("-r", "--recursive", is_flag=True, help="Copy a directory tree.")
@click.option("--streams", type=click.IntRange(1, 256), default=1, show_default=True,
              help="Parallel TCP streams per file (disjoint byte ranges).")
@click.option("--parallel", type=click.IntRange(1, 256), default=1, show_default=True,
              help="Files copied concurrently.")
@click.option("--block-size", default="8MiB", show_default=True,
              help="Range block size per request.")
@click.option("--checksum", type=click.Choice(cks.ALGORITHMS), default="adler32",
              show_default=True)
@click.option("--verify", type=click.Choice(pl.VERIFY_MODES), default="block",
              show_default=True,
              help="none; sequential (source, transfer, re-read destination); file (checksum "
                   "after the transfer); block (pipelined with the transfer).")
@click.option("--verify-level", "level", type=click.Choice(pl.LEVELS), default="inflight",
              show_default=True,
              help="inflight; durable (fsync before rename); ondisk (evict pages, re-read).")
@click.option("--retries", type=click.IntRange(0, 100), default=3, show_default=True)
@click.option("--stall-timeout", type=click.FloatRange(0.1), default=60.0, show_default=True,
              help="Seconds without progress on a stream before it is retried.")
@click.option("--token", default=None, help="Bearer token (default $DTNKIT_TOKEN, "
                                            "then $BEARER_TOKEN).")
@click.option("--ca-file", type=click.Path(exists=True, dir_okay=False), default=None,
              help="PEM CA bundle to verify the server's certificate.")
@click.option("--insecure", is_flag=True, help="Do not verify the server's certificate.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON summary on stdout.")
def cp(src: str, dst: str, recursive: bool, streams: int, parallel: int, block_size: str,
       checksum: str, verify: str, level: str, retries: int, stall_timeout: float,
       token: str | None, ca_file: str | None, insecure: bool, as_json: bool) -> int:
    """Copy SRC to DST; one is a local path, the other http(s)://host:port/path.

    The destination appears only after verification; a failed copy leaves nothing behind.
    """
    from dtnkit.transfer import client

    if token is None:
        token = os.environ.get("DTNKIT_TOKEN") or os.environ.get("BEARER_TOKEN") or None
    options = client.Options(
        streams=streams, block_size=parse_bytes(block_size, "block-size", lo=4096, hi=2**30),
        checksum=checksum, verify=verify, level=level, retries=retries,
        stall_timeout=stall_timeout, token=token, ca_file=ca_file, insecure=insecure,
        parallel=parallel, recursive=recursive)
    show = sys.stderr.isatty() and not as_json
    total = client.total_size(src, options) if show else None
    with _progress(show, total) as advance:
        options.progress = advance
        summary = client.copy(src, dst, options)
    result = summary.as_dict(options)
    if as_json:
        click.echo(json.dumps(result))
    else:
        rate = result["rate_bps"]
        rate_text = f"{float(rate) / 1e6:.1f} Mb/s" if isinstance(rate, float) else "-"
        digest = f", {options.checksum} {result['digest']}" if result["digest"] else ""
        click.echo(f"copied {result['files']} file(s), {result['bytes']} bytes in "
                   f"{result['seconds']:.2f} s ({rate_text}); verify {verify}, "
                   f"level {result['level']}{digest}", err=True)
    return 0
