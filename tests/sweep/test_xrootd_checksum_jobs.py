"""XRootD as a sweep configures it answers a burst of concurrent checksum queries (issue 13).

gfal-copy asks the TPC destination for each transfer's adler32 as the transfer ends (a HEAD
with ``Want-Digest: adler32``).  With the sweep's old ``xrootd.chksum max 4`` XRootD kept at
most 12 checksum queries (4 running, 8 queued) and told the next ones to wait 30 s; XRootD
5.5's HTTP bridge answers a query that has to wait twice with HTTP 500 (fixed upstream in
5.8.2, xrootd/xrootd#2480), which gfal-copy reported as ``DESTINATION CHECKSUM HTTP 500`` in
points of 16 or more transfers.  The burst here is the sweep's: distinct paths, nothing
cached, all sent at once.
"""

from __future__ import annotations

import concurrent.futures
import http.client
import os
import re
import threading
import time
import zlib
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.support.xrootd import Pki, Xrootd, client_context, running_xrootd

from dtnkit.errors import BadInput
from dtnkit.measure.tools import tpc as tools_tpc
from dtnkit.sweep import grid, servers

MiB = 2**20
#: concurrent queries: far more than the 12 the old configuration held
QUERIES = 32
#: each query's file: sparse (nothing to write, nothing on disk), distinct (XRootD caches a
#: computed checksum per file), as long to hash as 64 MiB of data
SIZE = 64 * MiB
#: XRootD's wait for a free checksum job is 30 s; the whole burst hashes 2 GiB in a few
#: seconds on the loaded 2-core machine (the last answer after 4-7 s at load 12-16), so an
#: answer later than this is one that was told to wait
WAITED_S = 20.0


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return servers.make_pki(tmp_path_factory.mktemp("x21pki"))


@pytest.fixture(scope="module")
def xrd(pki: Pki) -> Iterator[Xrootd]:
    with running_xrootd(pki) as server:
        yield server


def burst(xrd: Xrootd, names: list[str]) -> list[tuple[int | str, str, float]]:
    """One HEAD with ``Want-Digest: adler32`` per name, all sent at once (each connection
    is opened first): (status or error, Digest header, seconds) per name."""
    ready = threading.Barrier(len(names))

    def one(name: str) -> tuple[int | str, str, float]:
        conn = http.client.HTTPSConnection(
            "127.0.0.1", xrd.http_port, timeout=WAITED_S, context=client_context(xrd.pki)
        )
        try:
            conn.connect()
            ready.wait(timeout=60)
            t0 = time.monotonic()
            try:
                conn.request("HEAD", f"/{name}", headers={"Want-Digest": "adler32"})
                r = conn.getresponse()
                r.read()
                return r.status, r.getheader("Digest") or "", time.monotonic() - t0
            except TimeoutError:
                return "no answer", "", time.monotonic() - t0
        finally:
            conn.close()

    with concurrent.futures.ThreadPoolExecutor(len(names)) as pool:
        return list(pool.map(one, names))


@pytest.mark.needs_xrootd
def test_a_burst_of_checksum_queries_gets_every_digest_without_waiting(xrd: Xrootd) -> None:
    names, want = [], []
    for i in range(QUERIES):
        head = os.urandom(16)
        path = xrd.put(f"x21-{i}.bin", head)
        os.truncate(path, SIZE)
        # adler32 of head + n zero bytes: A stays, B grows by A per byte
        a, b = zlib.adler32(head) & 0xFFFF, zlib.adler32(head) >> 16
        b = (b + (SIZE - len(head)) * a) % 65521
        names.append(path.name)
        want.append(f"adler32={b << 16 | a:08x}")

    answers = burst(xrd, names)

    bad = [(n, a) for n, w, a in zip(names, want, answers, strict=True) if a[0] != 200 or a[1] != w]
    late = [(n, round(a[2], 1)) for n, a in zip(names, answers, strict=True) if a[2] >= WAITED_S]
    assert not bad and not late, (
        f"{len(bad)} of {QUERIES} checksum queries failed or were answered wrongly, "
        f"{len(late)} waited (XRootD's 30 s wait for a checksum job): {bad[:4]} {late[:4]}\n"
        f"--- xrootd log ---\n{xrd.log_tail(20)}"
    )


def test_the_configuration_runs_as_many_checksums_as_a_sweep_makes_transfers(
    tmp_path: Path,
) -> None:
    """``max`` covers the grid's largest ``streams`` (concurrent transfers): every query of
    a point runs at once and none is queued or told to wait."""
    pki = Pki(
        tmp_path, tmp_path / "ca.pem", tmp_path / "ca", tmp_path / "h.pem", tmp_path / "h.key"
    )
    cfg = servers.xrootd_config(tmp_path, tmp_path / "data", pki, 1094, 1095)
    (line,) = [x for x in cfg.splitlines() if x.startswith("xrootd.chksum")]
    m = re.fullmatch(r"xrootd\.chksum max (\d+) adler32 md5 crc32c", line)
    assert m, line
    most = grid.parse_grid_flags(["rtt=5ms", "streams=1024"]).axes["streams"]
    assert int(m.group(1)) >= max(most) == 1024
    with pytest.raises(BadInput):
        grid.parse_grid_flags(["rtt=5ms", "streams=1025"])


@pytest.mark.parametrize(
    ("side", "source", "destination", "named"),
    [
        ("DESTINATION", "dtnkit", "xrootd", True),
        ("SOURCE", "xrootd", "dtnkit", True),
        ("DESTINATION", "xrootd", "dtnkit", False),
        ("SOURCE", "dtnkit", "xrootd", False),
    ],
)
def test_a_checksum_500_from_xrootd_names_the_cause(
    side: str, source: str, destination: str, named: bool
) -> None:
    line = (
        f"gfal-copy error: 5 (Input/output error) - {side} CHECKSUM HTTP 500 : "
        "Unexpected server error: 500"
    )
    error = tools_tpc.gfal_error(
        f"Copying 67108864 bytes a => b\n{line} \n", source=source, destination=destination
    )
    assert error.startswith(line)
    assert ("xrootd.chksum max" in error) is named
    assert (error == line) is not named
    assert len(error) <= 500


def test_other_gfal_errors_are_the_last_line_as_before() -> None:
    out = "Copying 1 bytes a => b\ngfal-copy error: 110 (Connection timed out) - x \n"
    assert tools_tpc.gfal_error(out, source="xrootd", destination="xrootd") == (
        "gfal-copy error: 110 (Connection timed out) - x"
    )
    assert tools_tpc.gfal_error("", source="xrootd", destination="xrootd") == ""
