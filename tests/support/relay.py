"""A TCP relay for tests: 127.0.0.1, a kernel-chosen port, in front of a real server's port.

A subclass sees each client connection with its own connection to the server
(:meth:`Relay.connected`) and moves the bytes as it likes (counting, parsing, holding or
cutting them); :meth:`Relay.close` closes the listening socket and every connection."""

from __future__ import annotations

import contextlib
import socket
import threading


class Relay:
    """127.0.0.1:``port`` -> 127.0.0.1:``target``.  A subclass sets its own attributes
    before calling ``super().__init__``: the accepting thread starts there."""

    def __init__(self, target: int) -> None:
        self.target = target
        self._lock = threading.Lock()
        self._socks: list[socket.socket] = []
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        threading.Thread(target=self._serve, daemon=True).start()

    def connected(self, client: socket.socket, upstream: socket.socket) -> None:
        """A client connected (``upstream``: the relay's connection to the server for it)."""
        raise NotImplementedError

    def _serve(self) -> None:
        while True:
            try:
                client, _ = self.sock.accept()
            except OSError:
                return
            upstream = socket.create_connection(("127.0.0.1", self.target))
            with self._lock:
                self._socks += [client, upstream]
            self.connected(client, upstream)

    def close(self) -> None:
        self.sock.close()
        with self._lock:
            for s in self._socks:
                with contextlib.suppress(OSError):
                    s.close()
