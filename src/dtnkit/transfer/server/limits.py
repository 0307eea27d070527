"""How much one token may make the server do: upload sessions and reserved bytes, hashing
work, listings (a :class:`HashGate` of their own: ``listing_slots`` at a time per token).

The numbers are :class:`Limits` (``dtnkit serve`` flags, defaults below); the shared state
that enforces the hashing limits is a :class:`HashGate` per server: a semaphore per token
(at most ``hash_slots`` requests of one token hash at a time; the rest wait up to
``hash_wait`` seconds, then get 503 with ``Retry-After``) and a cache of range digests keyed
by the file's identity (device, inode, size, mtime_ns) and the range, so twenty identical
``HEAD`` + ``Range`` + ``Want-Content-Digest`` requests read the range once (the others wait
for the first, :meth:`HashGate.once`, then find its result).
"""

from __future__ import annotations

import collections
import contextlib
import threading
from collections.abc import Hashable, Iterator
from dataclasses import dataclass

from dtnkit.errors import BadInput
from dtnkit.transfer.server.errors import HttpError

MiB = 2**20


@dataclass(frozen=True)
class Limits:
    #: upload sessions one token may have open at once (all tokens together: MAX_SESSIONS)
    sessions_per_token: int = 64
    #: bytes the open upload sessions of one token may declare (Upload-Length, counted whole
    #: although the part files are sparse); None: half the free space of the filesystem
    session_bytes_per_token: int | None = None
    #: requests of one token that may hash at the same time (whole-file digests not yet
    #: cached, range digests)
    hash_slots: int = 2
    #: seconds a request waits for one of its token's hashing slots before a 503
    hash_wait: float = 30.0
    #: the largest range whose Content-Digest is computed for one request; larger ranges
    #: are answered without Content-Digest (RFC 9530 makes it a preference)
    range_digest_max: int = 64 * MiB
    #: range digests remembered (per server)
    range_cache_entries: int = 4096
    #: directory listings (PROPFIND depth 1, GET of a collection) of one token at the same
    #: time: each reads and stats every member (200k entries: ~11 s of CPU); the others wait
    #: ``hash_wait`` seconds for a slot, then 503
    listing_slots: int = 2

    def __post_init__(self) -> None:
        bad = None
        if self.sessions_per_token < 1:
            bad = "sessions per token must be at least 1"
        elif self.session_bytes_per_token is not None and self.session_bytes_per_token < 1:
            bad = "session bytes per token must be at least 1"
        elif self.hash_slots < 1:
            bad = "hashing slots per token must be at least 1"
        elif self.listing_slots < 1:
            bad = "listing slots per token must be at least 1"
        elif not 0 < self.hash_wait <= 3600:
            bad = "the hashing wait must be more than 0 and at most 3600 s"
        elif self.range_digest_max < 0:
            bad = "the range digest limit cannot be negative"
        elif self.range_cache_entries < 0:
            bad = "the range digest cache cannot have a negative size"
        if bad is not None:
            raise BadInput("server limits", bad, "fix the value of that dtnkit serve flag")


#: (device, inode, size, mtime_ns) of a file, then first and last byte, then the algorithm
RangeKey = tuple[tuple[int, int, int, int], int, int, str]


class HashGate:
    """Per-token hashing slots and the range-digest cache of one server (with *slots* and
    *busy*: another kind of costly work, counted the same way, e.g. listings)."""

    def __init__(
        self, limits: Limits, slots: int | None = None, busy: str = "digests being computed"
    ) -> None:
        self.limits = limits
        self.slots = limits.hash_slots if slots is None else slots
        self.busy = busy
        self._lock = threading.Lock()
        self._slots: dict[str, threading.BoundedSemaphore] = {}
        self._users: collections.Counter[str] = collections.Counter()
        self._ranges: collections.OrderedDict[RangeKey, bytes] = collections.OrderedDict()
        self._keys: dict[Hashable, tuple[threading.Lock, int]] = {}
        self.waits = 0  # requests that had to wait for a slot (tests, benchmarks)
        self.refused = 0  # requests refused after waiting hash_wait

    @contextlib.contextmanager
    def slot(self, owner: str, what: str) -> Iterator[None]:
        """Hold one of *owner*'s hashing slots (HttpError 503 after ``hash_wait`` s)."""
        with self._lock:
            sem = self._slots.get(owner)
            if sem is None:
                sem = self._slots[owner] = threading.BoundedSemaphore(self.slots)
            self._users[owner] += 1
        try:
            if not sem.acquire(blocking=False):
                with self._lock:
                    self.waits += 1
                if not sem.acquire(timeout=self.limits.hash_wait):
                    with self._lock:
                        self.refused += 1
                    raise HttpError(
                        503,
                        what,
                        f"this token has too many {self.busy}; retry later",
                        [("Retry-After", "10")],
                    )
            try:
                yield
            finally:
                sem.release()
        finally:
            with self._lock:
                self._users[owner] -= 1
                if not self._users[owner]:  # forget idle tokens: the table stays small
                    del self._users[owner]
                    self._slots.pop(owner, None)

    @contextlib.contextmanager
    def once(self, key: Hashable) -> Iterator[None]:
        """Let one request at a time work on *key* (a file version, a range): the others
        wait for it and then find its result in the cache instead of hashing again."""
        with self._lock:
            lock, users = self._keys.get(key, (threading.Lock(), 0))
            self._keys[key] = (lock, users + 1)
        try:
            with lock:
                yield
        finally:
            with self._lock:
                lock, users = self._keys[key]
                if users == 1:
                    del self._keys[key]
                else:
                    self._keys[key] = (lock, users - 1)

    def cached_range(self, key: RangeKey) -> bytes | None:
        with self._lock:
            value = self._ranges.get(key)
            if value is not None:
                self._ranges.move_to_end(key)
            return value

    def store_range(self, key: RangeKey, value: bytes) -> None:
        with self._lock:
            self._ranges[key] = value
            self._ranges.move_to_end(key)
            while len(self._ranges) > self.limits.range_cache_entries:
                self._ranges.popitem(last=False)
