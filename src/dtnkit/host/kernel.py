"""What the running kernel tells a live Host over netlink: one :class:`KernelView` per Host.

``ip``, ``tc`` and ``ethtool`` each cost a process start (5-10 ms on a loaded host) for
microseconds of kernel work, so a live Host asks the kernel what they would: the rtnetlink
dumps of links, default routes, IPv6 addresses and qdiscs, and ethtool's reads (rings,
features, coalescing, pause over the ``ethtool`` generic-netlink family; the driver through
the ``SIOCETHTOOL`` ioctl), as ethtool 6.1 and iproute2 6.1 ask them.  A netlink socket
belongs to the network namespace of the process that opens it, so for a namespace the
questions go to the Host's helper inside it (:mod:`dtnkit.host.nshelper`; the dumps ride
along with its batch read of the namespace's files), and for the host they are asked in this
process (:func:`dtnkit.host.nlsocket.exchange`).

The view gives the kernel's replies as bytes, read once until the Host writes or refreshes;
:mod:`dtnkit.host.parsers.rtnetlink` and :mod:`~dtnkit.host.parsers.ethtool_nl` decode them
into what the text parsers give for ``ip -j``, ``tc -j`` and ``ethtool`` (which a captured
tree, or a runner of the caller's own, still runs: those Hosts have no view).  The messages
are dtnkit's own (:mod:`dtnkit.host.parsers.netlink`), not pyroute2's: importing pyroute2 costs more
than the whole audit these reads serve (see that module).
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from typing import Any

from dtnkit.host import nlsocket
from dtnkit.host.parsers import ParseError, ethtool_nl
from dtnkit.host.parsers.netlink import NETLINK_GENERIC, NETLINK_ROUTE
from dtnkit.host.parsers.rtnetlink import DUMPS, dump_request

#: a request to the namespace's helper and its reply (None: no helper)
Ask = Callable[[dict[str, Any]], "dict[str, Any] | None"]


@functools.cache
def dump_requests() -> tuple[bytes, ...]:
    """The rtnetlink dump requests of :data:`~dtnkit.host.parsers.rtnetlink.DUMPS`, in order
    (sequence numbers from 1)."""
    return tuple(dump_request(name, seq) for seq, name in enumerate(DUMPS, start=1))


def named_dumps(replies: object) -> dict[str, bytes] | None:
    """The dumps' replies by name, or None when they are missing or malformed."""
    if not isinstance(replies, list) or len(replies) != len(DUMPS):
        return None
    if not all(isinstance(r, bytes) for r in replies):
        return None
    return dict(zip(DUMPS, replies, strict=True))


class KernelView:
    """The kernel's answers for one live Host (a plain class: the audit builds one per run).

    ``netns``: the namespace the Host works in; ``ask``: a request to its helper there;
    ``batch_dumps``: the dumps read with the helper's batch; ``ethtool``: whether ethtool's
    reads are asked of the kernel (a live Host rooted at ``/``)."""

    def __init__(
        self,
        netns: str | None,
        ask: Ask,
        batch_dumps: Callable[[], dict[str, bytes] | None],
        *,
        ethtool: bool = True,
    ) -> None:
        self.netns = netns
        self._ask = ask
        self._batch_dumps = batch_dumps
        self._ethtool_on = ethtool
        self._lock = threading.Lock()
        self._generation = 0
        self._dumps: dict[None, dict[str, bytes] | None] = {}
        self._ethtool: dict[str, dict[str, object] | None] = {}
        self._family: dict[None, int | None] = {}  # the same in every namespace: kept

    def forget(self) -> None:
        """Drop what was read (the Host wrote, or was told the host changed)."""
        with self._lock:
            self._generation += 1
            self._dumps.clear()
            self._ethtool.clear()

    def rtnl_dumps(self) -> dict[str, bytes] | None:
        """The kernel's replies to the rtnetlink dumps of
        :data:`~dtnkit.host.parsers.rtnetlink.DUMPS` (links, routes, addresses, qdiscs) by
        name; None when the socket fails (the caller runs ``ip`` and ``tc``)."""
        if self.netns is not None:
            return self._batch_dumps()
        if None not in self._dumps:
            got = named_dumps(nlsocket.exchange(NETLINK_ROUTE, dump_requests(), 5.0))
            self._dumps[None] = got
        return self._dumps[None]

    def ethtool_replies(self, device: str) -> dict[str, object] | None:
        """The kernel's answers to what ethtool 6.1 asks for ``-k``, ``-g``, ``-c``, ``-a``
        (replies by the names of :data:`~dtnkit.host.parsers.ethtool_nl.READS`) and ``-i``
        (``drvinfo``: the ioctl's struct, or its errno), asked once per device; None when
        they cannot be asked (no ethtool family, no helper, a Host not rooted at ``/``).  The
        dict is the same object until the next :meth:`forget`, so a caller may keep what it
        decoded from it there (under keys of its own)."""
        if not self._ethtool_on:
            return None
        with self._lock:
            if device in self._ethtool:
                return self._ethtool[device]
            generation = self._generation
        family = self._ethtool_family()
        replies: dict[str, object] | None = None
        if family is not None:
            try:
                requests = ethtool_nl.device_requests(family, device)
            except ParseError:
                requests = None
            if requests is not None:
                replies = self._ask_ethtool(device, requests)
        with self._lock:
            if self._generation == generation:
                self._ethtool[device] = replies
        return replies

    def _ethtool_family(self) -> int | None:
        """The ethtool generic-netlink family's id (the same in every namespace), or None."""
        if None not in self._family:
            family: int | None = None
            got = nlsocket.exchange(NETLINK_GENERIC, [ethtool_nl.family_request()], 5.0)
            if isinstance(got, list) and len(got) == 1:
                try:
                    family = ethtool_nl.parse_family(got[0])
                except ParseError:  # KernelRefused too: no ethtool family
                    family = None
            self._family[None] = family
        return self._family[None]

    def _ask_ethtool(self, device: str, requests: list[bytes]) -> dict[str, object] | None:
        drv = ethtool_nl.drvinfo_request()
        if self.netns is not None:
            reply = self._ask({"ethtool": [device, requests], "drv": drv})
            if reply is None:
                return None
            got, info = reply.get("nl"), reply.get("drvinfo")
        else:
            got = nlsocket.exchange(NETLINK_GENERIC, requests, 5.0)
            info = nlsocket.ethtool_ioctl(device, drv)
        if not isinstance(got, list) or len(got) != len(requests):
            return None
        if not all(isinstance(r, bytes) for r in got) or not isinstance(info, bytes | int):
            return None
        out: dict[str, object] = dict(zip(ethtool_nl.READS, got, strict=True))
        out["drvinfo"] = info
        return out
