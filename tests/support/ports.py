"""A TCP port on 127.0.0.1 that nothing holds now, for a test's own server.

The machine is shared: a fixed port may be taken by another lab, another test run or a
service, so every test server asks here instead of naming one.  The port is free when this
returns; the server binds it a moment later (the usual small window, which the kernel's
ephemeral range makes unlikely to be taken in between).
"""

from __future__ import annotations

import socket


def free_port() -> int:
    """A port on 127.0.0.1 that no socket holds at this moment."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
