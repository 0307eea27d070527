"""The Host's end of its helper process inside a network namespace.

A live Host working in a namespace reads its files, asks its kernel and runs its read-only
commands through one process that stays inside it for the Host's life: a fork of the dtnkit
process that entered the namespace (:mod:`dtnkit.host.nsfork`), or ``ip netns exec NS python
.../nsserve.py serve`` when it cannot fork.  Both run :func:`dtnkit.host.nsserve.serve`.
Requests and replies are length-prefixed marshal documents on its stdin and stdout; it ends
when the Host's end of the pipe closes.
"""

from __future__ import annotations

import contextlib
import marshal
import os
import subprocess
import threading
import weakref
from typing import Any

from dtnkit.host import nsfork, nsserve

_Proc = subprocess.Popen[bytes] | nsfork.ForkedChild


class NsHelper:
    """The Host's end of its helper process inside a namespace (see :mod:`.nsserve`).

    ``first``: a request sent as soon as the process starts (the batch read), so the helper's
    start-up and that read overlap with whatever the caller does before it needs the reply."""

    def __init__(self, netns: str, first: dict[str, Any] | None = None) -> None:
        self.lock = threading.Lock()
        self.netns = netns
        # a fork of this process that entered the namespace (see dtnkit.host.nsfork), or
        # `ip netns exec NS python` when it cannot (its readiness is read at the first reply)
        self.forked = nsfork.usable(netns)
        child = nsfork.fork_in_netns(netns, nsserve.serve) if self.forked else None
        self.forked = child is not None
        self.proc: _Proc | None = child if child is not None else self._start()
        weakref.finalize(self, NsHelper._close, self.proc)
        self.sent: list[dict[str, Any]] = []  # requests whose replies are not read yet
        self.unanswered: list[dict[str, Any]] = []  # written to the process, no reply read
        # the first request and its reply, read while another request was asked first
        self.early: tuple[dict[str, Any], dict[str, Any]] | None = None
        if first is not None:
            with self.lock:
                if self._send(first):
                    self.sent.append(first)

    def _start(self) -> subprocess.Popen[bytes]:
        return subprocess.Popen(
            ["ip", "netns", "exec", self.netns, *nsserve.command("serve")],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env={**os.environ, "LC_ALL": "C"},
        )

    def _fall_back(self) -> bool:
        """The forked child could not enter the namespace: `ip netns exec` instead, sent
        again what the child was sent."""
        self.forked = False
        if self.proc is not None:
            NsHelper._close(self.proc)
        self.proc = self._start()
        weakref.finalize(self, NsHelper._close, self.proc)
        pending, self.unanswered = self.unanswered, []
        return all(self._send(request) for request in pending)

    @staticmethod
    def _close(proc: _Proc) -> None:
        if isinstance(proc, nsfork.ForkedChild):
            proc.close()
            return
        if proc.stdin is not None:
            with contextlib.suppress(OSError):
                proc.stdin.close()  # the helper's loop ends; it exits on its own
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

    def _send(self, request: dict[str, Any]) -> bool:
        proc = self.proc
        if proc is None or proc.stdin is None:
            return False
        try:
            data = marshal.dumps(request)
            proc.stdin.write(len(data).to_bytes(4, "big") + data)
            proc.stdin.flush()
        except (OSError, ValueError):
            return False
        self.unanswered.append(request)
        return True

    def _receive(self) -> Any:
        proc = self.proc
        if isinstance(proc, nsfork.ForkedChild) and self.forked:
            self.forked = False  # its first byte: whether it entered the namespace
            if not proc.ready() and not self._fall_back():
                return None
            proc = self.proc
        if proc is None or proc.stdout is None:
            return None
        try:
            head = proc.stdout.read(4)
            if len(head) == 4:
                reply = marshal.loads(proc.stdout.read(int.from_bytes(head, "big")))
                if self.unanswered:
                    self.unanswered.pop(0)
                return reply
        except (OSError, ValueError, EOFError, TypeError):
            pass
        return None

    def _gone(self) -> None:
        proc, self.proc = self.proc, None
        if proc is not None:
            NsHelper._close(proc)

    def drop_early(self) -> None:
        """Forget the first request's reply (read before a refresh, it may be stale)."""
        with self.lock:
            if self.sent:
                self.sent.pop()
                if not isinstance(self._receive(), dict):
                    self._gone()
            self.early = None

    def ask(self, request: dict[str, Any]) -> dict[str, Any] | None:
        """The helper's reply, or None when it is gone (the caller falls back to one process
        per command)."""
        with self.lock:
            if self.sent:  # the first request's reply comes first
                first = self.sent.pop()
                reply = self._receive()
                if not isinstance(reply, dict):
                    self._gone()
                    return None
                if first == request:
                    return reply
                self.early = (first, reply)
            if self.early is not None and self.early[0] == request:
                early, self.early = self.early[1], None
                return early
            if not self._send(request):
                self._gone()
                return None
            reply = self._receive()
            if not isinstance(reply, dict):
                self._gone()
                return None
            return reply
