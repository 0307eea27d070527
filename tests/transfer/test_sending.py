"""sending.send_all: a body sent on a socket that has a timeout keeps the send buffer full
(it waits only when the buffer has no room), arrives whole over plain TCP and TLS through
many such waits, and a wait without room ends in TimeoutError, the socket's timeout as it
was.  Real TCP connections on loopback, a reader that holds back, a real TLS handshake."""

from __future__ import annotations

import hashlib
import secrets
import socket
import ssl
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.support.xrootd import Pki, make_pki

from dtnkit.transfer import sending

MiB = 2**20
BODY = 6 * MiB
SO_SNDBUFFORCE = 32  # asm-generic/socket.h (Python's socket module does not name it)


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


def pair(sndbuf: int = MiB, rcvbuf: int = 64 * 1024) -> tuple[socket.socket, socket.socket]:
    """A connected (sender, receiver) on loopback, buffers smaller than the body, so that
    the sender's fills long before the body is sent.  The send buffer (2 MiB: the kernel
    doubles what is set) holds several pieces: a third of it is more than one."""
    with socket.socket() as listener:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        sender = socket.socket()
        try:  # past net.core.wmem_max (212992 on older kernels) as root
            sender.setsockopt(socket.SOL_SOCKET, SO_SNDBUFFORCE, sndbuf)
        except PermissionError:
            sender.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, sndbuf)
        sender.connect(listener.getsockname())
        receiver, _ = listener.accept()
    return sender, receiver


def drain(
    sock: socket.socket | ssl.SSLSocket,
    size: int,
    digest: list[str],
    budget: threading.Semaphore | None = None,
) -> None:
    """Read *size* bytes in small reads (each one frees only a little room), then their
    sha256 into *digest*; with a *budget*, 1 MiB for each release of it."""
    h = hashlib.sha256()
    got = 0
    while got < size:
        if budget is not None and got % MiB == 0:
            assert budget.acquire(timeout=30), f"no budget after {got} bytes"
        data = sock.recv(min(16 * 1024, size - got, MiB - got % MiB))
        assert data, f"closed after {got} bytes"
        h.update(data)
        got += len(data)
    digest.append(h.hexdigest())


@pytest.fixture
def plain() -> Iterator[tuple[socket.socket, socket.socket]]:
    sender, receiver = pair()
    try:
        yield sender, receiver
    finally:
        sender.close()
        receiver.close()


def test_the_first_wait_comes_with_the_buffer_full_and_the_body_arrives_whole(
    plain: tuple[socket.socket, socket.socket],
) -> None:
    """The first wait (the reader has not read yet) is for a buffer that takes not one
    more byte; the body then arrives whole and in order through many more waits, each
    piece counted, the socket's timeout kept.  Before, a socket with a timeout waited
    before every piece until a third of its buffer was free, so it first waited with room
    for about a third of it (the probe's byte would then have gone, and failed the
    digest)."""
    sender, receiver = plain
    sender.settimeout(7.0)
    body = secrets.token_bytes(BODY)
    digest: list[str] = []
    reader = threading.Thread(target=drain, args=(receiver, BODY, digest))
    room_at_first_wait: list[bool] = []
    waits: list[int] = []

    def wait() -> float:
        waits.append(1)
        if len(waits) == 1:  # nobody reads yet: the buffer is as send_all left it
            room_at_first_wait.append(_room(sender))
            reader.start()
        return 5.0

    counted: list[int] = []
    sending.send_all(sender, body, wait=wait, sent=counted.append)
    reader.join(30)
    assert room_at_first_wait == [False]
    assert digest == [hashlib.sha256(body).hexdigest()]
    assert sum(counted) == BODY and max(counted) <= sending.PIECE
    assert len(waits) >= 3
    assert sender.gettimeout() == 7.0


def _room(sock: socket.socket) -> bool:
    """Whether the kernel takes one more byte now (a poll for POLLOUT answers for a third
    of the buffer, not for one byte; a socket with a timeout would poll first)."""
    timeout = sock.gettimeout()
    sock.setblocking(False)
    try:
        return sock.send(b"\0") == 1
    except BlockingIOError:
        return False
    finally:
        sock.settimeout(timeout)


def test_a_wait_without_room_is_a_timeout_and_the_timeout_is_kept(
    plain: tuple[socket.socket, socket.socket],
) -> None:
    """A reader that never reads: the first wait for room ends after wait()'s seconds in
    TimeoutError (no hang), and the socket is back to its own timeout."""
    sender, _receiver = plain
    sender.settimeout(3.0)
    waits: list[int] = []

    def wait() -> float:
        waits.append(1)
        return 0.05

    with pytest.raises(TimeoutError):
        sending.send_all(sender, secrets.token_bytes(BODY), wait=wait)
    assert waits == [1]
    assert sender.gettimeout() == 3.0


def test_a_deadline_raised_by_wait_stops_the_send(
    plain: tuple[socket.socket, socket.socket],
) -> None:
    """``wait`` may raise instead of giving seconds (cp's --deadline): that error ends the
    send, the socket's timeout restored."""
    sender, _receiver = plain
    sender.settimeout(2.0)

    class Passed(Exception):
        pass

    def wait() -> float:
        raise Passed

    with pytest.raises(Passed):
        sending.send_all(sender, secrets.token_bytes(BODY), wait=wait)
    assert sender.gettimeout() == 2.0


def test_a_tls_body_arrives_whole_through_many_waits(pki: Pki) -> None:
    """Over TLS a piece that did not fit is written again, the same bytes, after the wait
    (OpenSSL has taken part of it): the body arrives whole through many waits.  The reader
    reads 1 MiB for each wait (more than a third of the send buffer, so the wait ends), and
    the rest once the sender is done: the buffers hold about 2 MiB of a 12 MiB body, so
    the sender cannot finish without waiting several times, however fast the reader is."""
    sender, receiver = pair()
    server_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_ctx.load_cert_chain(Path(pki.cert), Path(pki.key))
    client_ctx = ssl.create_default_context(cafile=str(pki.ca_file))
    accepted: list[ssl.SSLSocket] = []
    t = threading.Thread(
        target=lambda: accepted.append(server_ctx.wrap_socket(receiver, server_side=True))
    )
    t.start()
    tls = client_ctx.wrap_socket(sender, server_hostname="localhost")
    t.join(10)
    server = accepted[0]
    size = 2 * BODY
    budget = threading.Semaphore(0)  # MiB the reader may read

    try:
        tls.settimeout(9.0)
        body = secrets.token_bytes(size)
        digest: list[str] = []
        reader = threading.Thread(target=drain, args=(server, size, digest, budget))
        waits: list[int] = []

        def wait() -> float:
            waits.append(1)
            if len(waits) == 1:
                reader.start()
            budget.release()
            return 5.0

        sending.send_all(tls, body, wait=wait)
        budget.release(size // MiB)  # the rest
        reader.join(30)
        assert digest == [hashlib.sha256(body).hexdigest()]
        assert len(waits) >= 3
        assert tls.gettimeout() == 9.0
    finally:
        tls.close()
        server.close()
