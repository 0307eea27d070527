"""Run a test's body in a network namespace of its own: a forked child that unshares its
network namespace (only ``lo``, brought up), so nothing it does reaches any address
outside it, whatever it is asked to connect to (a fuzzed COPY's remote, a name the
resolver would ask about).  Needs root (CAP_SYS_ADMIN)."""

from __future__ import annotations

import ctypes
import os
import select
import signal
import subprocess
import time
import traceback
from collections.abc import Callable

CLONE_NEWNET = 0x40000000
OK = b"ok\n"


def run_in_fresh_netns(body: Callable[[], None], *, timeout: float) -> str | None:
    """Run *body* in a forked child inside a new network namespace; None when it
    returned, else its traceback (or why it did not finish within *timeout* seconds)."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns into the test runner
        message = OK
        try:
            os.close(r)
            libc = ctypes.CDLL(None, use_errno=True)
            if libc.unshare(CLONE_NEWNET) != 0:
                raise OSError(ctypes.get_errno(), "unshare(CLONE_NEWNET)")
            subprocess.run(["ip", "link", "set", "lo", "up"], check=True, capture_output=True)
            body()
        except BaseException:
            message = traceback.format_exc().encode("utf-8", "replace")
        finally:
            view = memoryview(message)
            while view:
                view = view[os.write(w, view) :]
            os._exit(0)
    os.close(w)
    chunks: list[bytes] = []
    end = time.monotonic() + timeout
    try:
        while True:
            left = end - time.monotonic()
            if left <= 0 or not select.select([r], [], [], left)[0]:
                os.kill(pid, signal.SIGKILL)
                return f"the child did not finish within {timeout} s"
            data = os.read(r, 65536)
            if not data:
                break
            chunks.append(data)
    finally:
        os.close(r)
        os.waitpid(pid, 0)
    got = b"".join(chunks)
    return None if got == OK else got.decode("utf-8", "replace")
