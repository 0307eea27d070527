"""Hashing work a read token can make the server do is bounded.

Before, a 200-byte ``HEAD`` with ``Range`` and ``Want-Content-Digest`` hashed the range every
time (twenty at once of a 1 GiB range held both cores for 11 s).  Now a range larger than
``--range-digest-max`` gets no ``Content-Digest`` (RFC 9530 makes it a preference), range
digests are cached by the file's identity and the range, and one token hashes at most
``--hash-slots`` requests at a time.  The CPU the server spends is compared with the noise
of the same number of plain HEADs, measured in the same run.
"""

from __future__ import annotations

import hashlib
import http.client
import random
import threading
import time
from pathlib import Path

import pytest

from dtnkit.transfer import tokens
from dtnkit.transfer.server import ServerHandle, start_server
from dtnkit.transfer.server.errors import HttpError
from dtnkit.transfer.server.limits import HashGate, Limits
from dtnkit.transfer.wire import digests as dg

READ = "hash-ro"
MiB = 2**20
SIZE = 128 * MiB
REQUESTS = 20


def head(server: ServerHandle, headers: dict[str, str]) -> tuple[int, dict[str, str]]:
    conn = http.client.HTTPConnection(server.host, server.port, timeout=120)
    try:
        conn.request("HEAD", "/big.bin", headers={"Authorization": f"Bearer {READ}", **headers})
        resp = conn.getresponse()
        resp.read()
        return resp.status, dict(resp.headers.items())
    finally:
        conn.close()


def at_once(server: ServerHandle, headers: dict[str, str]) -> tuple[float, list[dict[str, str]]]:
    """CPU seconds of this process (server threads included) for REQUESTS concurrent HEADs."""
    answers: list[tuple[int, dict[str, str]]] = []
    lock = threading.Lock()
    go = threading.Barrier(REQUESTS)

    def one() -> None:
        go.wait()
        got = head(server, headers)
        with lock:
            answers.append(got)

    threads = [threading.Thread(target=one) for _ in range(REQUESTS)]
    cpu = time.process_time()
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    spent = time.process_time() - cpu
    assert [status for status, _h in answers] == [206] * REQUESTS, answers
    return spent, [h for _status, h in answers]


@pytest.mark.serial  # judges the CPU seconds the server spends: alone, after the rest
def test_range_digests_are_bounded_and_cached(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    data = random.Random(7).randbytes(SIZE)
    (root / "big.bin").write_bytes(data)
    cpu = time.process_time()
    hashlib.sha256(data).digest()
    one_hash = time.process_time() - cpu  # what one whole-file sha-256 costs here
    part = 32 * MiB
    want = hashlib.sha256(data[:part]).digest()
    del data
    store = tokens.parse(f"{READ} read\n")
    with start_server(root, tokens=store, quiet=True) as server:
        rounds = []
        for _ in range(2):  # noise twice: the spread between them is the noise
            rounds.append(at_once(server, {"Range": f"bytes=0-{SIZE - 1}"})[0])
        noise = max(rounds)
        spread = abs(rounds[0] - rounds[1])
        before = server.counters["checksum_bytes"]
        whole, answers = at_once(
            server, {"Range": f"bytes=0-{SIZE - 1}", "Want-Content-Digest": "sha-256=10"}
        )
        hashed_whole = server.counters["checksum_bytes"] - before
        before = server.counters["checksum_bytes"]
        ranged, answers_part = at_once(
            server, {"Range": f"bytes=0-{part - 1}", "Want-Content-Digest": "sha-256=10"}
        )
        hashed_part = server.counters["checksum_bytes"] - before
        before = server.counters["checksum_bytes"]
        _cpu, answers_file = at_once(server, {"Range": "bytes=0-0", "Want-Digest": "sha-256"})
        hashed_file = server.counters["checksum_bytes"] - before
    print(
        f"\n{REQUESTS} HEADs at once, CPU s: plain {noise:.2f} (spread {spread:.2f}); "
        f"Range 0-128MiB + Want-Content-Digest sha-256 {whole:.2f}; "
        f"Range 0-32MiB {ranged:.2f}; one 128 MiB sha-256 {one_hash:.2f}"
    )
    assert all("Content-Digest" not in h for h in answers)  # over --range-digest-max
    assert all(dg.parse_repr_digest(h["Content-Digest"]) == {"sha256": want} for h in answers_part)
    # the work itself: none for the range over the limit, one read of the smaller range
    assert hashed_whole == 0
    assert hashed_part == part
    # twenty whole-file digests not cached yet: the file is read once, not twenty times
    assert hashed_file == SIZE and len({h["Digest"] for h in answers_file}) == 1
    # and the CPU, which the counters above pin down exactly: now the noise, plus one hash of
    # the smaller range (a quarter of one_hash) for the second; before, twenty hashes of
    # each.  Beside other tests the CPU seconds of the same work vary by more than the
    # spread of two rounds (0.15 s over the noise, one_hash 0.10 s, once), so the bound
    # is a quarter of the work twenty hashes were: far from both.
    slack = 2 * spread + 0.05 * noise + 0.1
    before_whole, before_ranged = REQUESTS * one_hash, REQUESTS * one_hash / 4
    assert whole - noise < slack + before_whole / 4, (whole, noise, spread, one_hash)
    assert ranged - noise < slack + one_hash / 4 + before_ranged / 4, (
        ranged,
        noise,
        spread,
        one_hash,
    )


def test_one_token_hashes_in_its_own_slots() -> None:
    gate = HashGate(Limits(hash_slots=1, hash_wait=0.2))
    with gate.slot("a", "HEAD /x"):
        with pytest.raises(HttpError) as info, gate.slot("a", "HEAD /y"):
            pass
        assert info.value.status == 503 and ("Retry-After", "10") in info.value.headers
        with gate.slot("b", "HEAD /z"):  # another token is not held up
            pass
    with gate.slot("a", "HEAD /y"):  # free again
        pass
    assert gate.refused == 1
