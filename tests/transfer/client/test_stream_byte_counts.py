"""A stream's bytes are counted as each receive returns them, not when a 1 MiB read of the
response is full: ``--streams auto`` judges the streams by what they moved per round trip,
and counts in 1 MiB steps read four bound streams' 3 MiB windows as 2.0, 2.5 or 3.5 MiB
(:class:`~dtnkit.transfer.client.pace.PacedSocket`, ``ReceiveLane.counted``)."""

from __future__ import annotations

import socket
import threading

from tests.support.polling import until

from dtnkit.transfer.client.pace import PacedSocket
from dtnkit.transfer.client.request import CopyRequest, CopyRun

KiB = 1024


def test_bytes_count_while_a_1_mib_read_is_still_waiting() -> None:
    a, b = socket.socketpair()
    paced = PacedSocket(a, CopyRun.of(CopyRequest()))
    reader = paced.makefile("rb")  # as http.client reads a response
    got: list[int] = []
    t = threading.Thread(
        target=lambda: got.append(reader.readinto(bytearray(1024 * KiB))), daemon=True
    )
    try:
        t.start()
        b.sendall(b"x" * (600 * KiB))
        until("600 KiB counted", lambda: paced.received >= 600 * KiB, 10)
        assert not got  # the read is not full yet: it has not returned
        b.sendall(b"y" * (424 * KiB))
        t.join(10)
        assert got == [1024 * KiB] and paced.received == 1024 * KiB
    finally:
        b.shutdown(socket.SHUT_RDWR)  # the read returns, whatever happened
        t.join(10)
        reader.close()
        a.close()
        b.close()
