"""Checksums for a block-pipelined, multi-stream data mover: one registry of algorithms.

Every algorithm dtnkit knows is one :class:`Algorithm` record in :data:`REGISTRY` (name,
aliases, digest size, its names in RFC 3230 ``Digest`` and RFC 9530 ``Repr-Digest``, hex or
base64 on the RFC 3230 wire, constructor, and for combinable ones the block and combine
functions). Every other table (:data:`ALGORITHMS`, :data:`COMBINABLE`, :data:`ALIASES`,
:data:`DIGEST_SIZE`, the HTTP name maps of :mod:`dtnkit.transfer.wire.digests`) is derived
from it: adding an algorithm is adding one record.

* ``adler32`` (zlib) and ``crc32c`` (Castagnoli) are *combinable*: each block of a file can be
  hashed on its own, in any order and on any stream, and the whole-file value follows from the
  per-block values and lengths (:func:`combine`, :func:`combine_blocks`) in O(log n) per block.
* ``md5``, ``sha256`` and ``sha512`` are not: they must see the bytes in file order.

crc32c uses the ``crc32c`` package (C, SSE4.2/ARMv8 instructions) when it is importable; without
it, a pure-Python table-driven fallback gives the same values, over a thousand times slower
(about 6 MB/s).
:data:`CRC32C_BACKEND` says which one is in use.  adler32 uses ISA-L's (the ``isal`` package,
about 4x zlib's on x86-64) when it is importable, else zlib's (:data:`ADLER32_BACKEND`).

Digests are the algorithm's natural big-endian bytes: 4 for adler32 and crc32c, 16 for md5, 32
for sha256, 64 for sha512; :func:`to_bytes` turns an adler32/crc32c integer into them.
"""

from __future__ import annotations

import array
import functools
import hashlib
import sys
import zlib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

Buffer = bytes | bytearray | memoryview

_MASK32 = 0xFFFFFFFF
_ADLER_BASE = 65521  # largest prime below 2**16
_CRC32C_POLY = 0x82F63B78  # Castagnoli polynomial 0x1EDC6F41, bit-reflected


class Checksum(Protocol):
    """A running checksum: feed bytes with :meth:`update`, read the result at any time."""

    @property
    def name(self) -> str: ...

    def update(self, data: Buffer, /) -> None: ...

    def digest(self) -> bytes: ...

    def hexdigest(self) -> str: ...


# --------------------------------------------------------------------------- crc32c


@functools.cache
def _byte_tables() -> tuple[tuple[int, ...], ...]:
    """Eight 256-entry tables: T[0] for byte-at-a-time, T[k] = T[0] advanced by k zero bytes."""
    first = []
    for byte in range(256):
        crc = byte
        for _ in range(8):
            crc = (crc >> 1) ^ _CRC32C_POLY if crc & 1 else crc >> 1
        first.append(crc)
    tables = [tuple(first)]
    for _ in range(7):
        prev = tables[-1]
        tables.append(tuple((prev[i] >> 8) ^ first[prev[i] & 0xFF] for i in range(256)))
    return tuple(tables)


def crc32c_python(data: Buffer, crc: int = 0) -> int:
    """CRC-32C of *data*, continuing from *crc* (the value of the bytes before): pure Python.

    Slicing-by-8: each 64-bit little-endian word goes through eight lookup tables in one step;
    the last ``len % 8`` bytes go bytewise. Correct everywhere, but only some MB/s.
    """
    view = memoryview(data).cast("B")
    t0, t1, t2, t3, t4, t5, t6, t7 = _byte_tables()
    crc = (crc & _MASK32) ^ _MASK32
    head = len(view) - len(view) % 8
    words = array.array("Q")
    words.frombytes(view[:head])
    if sys.byteorder == "big":
        words.byteswap()
    for word in words:
        x = word ^ crc
        crc = (
            t7[x & 0xFF]
            ^ t6[(x >> 8) & 0xFF]
            ^ t5[(x >> 16) & 0xFF]
            ^ t4[(x >> 24) & 0xFF]
            ^ t3[(x >> 32) & 0xFF]
            ^ t2[(x >> 40) & 0xFF]
            ^ t1[(x >> 48) & 0xFF]
            ^ t0[x >> 56]
        )
    for byte in view[head:]:
        crc = t0[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return crc ^ _MASK32


_Crc32cFn = Callable[[Buffer, int], int]
_crc32c_chosen: list[tuple[_Crc32cFn, str]] = []


def _crc32c_impl() -> tuple[_Crc32cFn, str]:
    """The CRC-32C function and its backend's name, chosen at the first use: the crc32c
    package when it is installed and works on this CPU, else :func:`crc32c_python`."""
    if not _crc32c_chosen:
        try:
            import crc32c as pkg  # optional: a C extension absent on some installs
        except ImportError:  # pragma: no cover - exercised in a subprocess by the tests
            _crc32c_chosen.append((crc32c_python, "python"))
        else:
            try:  # CRC32C_SW_MODE=none on a CPU without CRC instructions: it raises on use
                usable = pkg.crc32c(b"123456789") == 0xE3069283
            except Exception:  # pragma: no cover - depends on the CPU and environment
                usable = False
            if usable:
                _crc32c_chosen.append(
                    (pkg.crc32c, "crc32c-hw" if pkg.hardware_based else "crc32c-sw")
                )
            else:  # pragma: no cover
                _crc32c_chosen.append((crc32c_python, "python"))
    return _crc32c_chosen[0]


def _crc32c_update(data: Buffer, crc: int) -> int:
    return _crc32c_impl()[0](data, crc)


def __getattr__(name: str) -> object:
    if name == "CRC32C_BACKEND":  # which CRC-32C implementation is in use
        return _crc32c_impl()[1]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


_Adler32Fn = Callable[[Buffer, int], int]
_adler32_update: _Adler32Fn
try:  # ISA-L's adler32 (python-isal): ~4x zlib's on x86-64 (AVX2/AVX-512), releases the GIL
    from isal import isal_zlib as _isal_zlib
except ImportError:  # pragma: no cover - exercised in a subprocess by the tests
    _adler32_update = zlib.adler32
    ADLER32_BACKEND = "zlib"
else:
    if _isal_zlib.adler32(b"123456789") == zlib.adler32(b"123456789") == 0x091E01DE:
        _adler32_update = _isal_zlib.adler32
        ADLER32_BACKEND = "isal"
    else:  # pragma: no cover - a broken build
        _adler32_update = zlib.adler32
        ADLER32_BACKEND = "zlib"


def adler32(data: Buffer, value: int = 1) -> int:
    """Adler-32 of *data*, continuing from *value*, with the fastest backend available."""
    return _adler32_update(data, value)


def crc32c(data: Buffer, crc: int = 0) -> int:
    """CRC-32C of *data*, continuing from *crc*, with the fastest backend available."""
    return _crc32c_update(data, crc)


def _gf2_mul(a: int, b: int) -> int:
    """a * b modulo the Castagnoli polynomial, both in the reflected (CRC register) order.

    In that order bit 31 is the coefficient of x**0 and bit 0 that of x**31. Walk the bits of
    *a* from x**0 upwards while *b* is multiplied by x each step (a right shift, reduced by the
    polynomial when the x**31 coefficient falls off).
    """
    product = 0
    bit = 1 << 31
    while a:
        if a & bit:
            product ^= b
            a ^= bit
        bit >>= 1
        b = (b >> 1) ^ _CRC32C_POLY if b & 1 else b >> 1
    return product


_Tables = tuple[tuple[int, ...], ...]


def _nibble_tables(op: int) -> _Tables:
    """Tables for multiplying by a fixed *op*: eight lookups instead of 32 steps per product.

    Multiplying by a fixed operator is linear over GF(2), so the product of a 32-bit value is
    the xor of the products of its eight nibbles, each read from a 16-entry table. Building
    them costs about two plain products.
    """
    by_bit = []  # by_bit[p] = op * (the polynomial of bit p alone) = op * x**(31 - p)
    term = op
    for _ in range(32):  # op * x**0, op * x**1, ... op * x**31
        by_bit.append(term)
        term = (term >> 1) ^ _CRC32C_POLY if term & 1 else term >> 1
    by_bit.reverse()
    tables = []
    for k in range(0, 32, 4):  # entry v of a nibble's table: xor of by_bit over v's set bits
        a, b, c, d = by_bit[k : k + 4]
        low = (0, a, b, a ^ b)
        tables.append(tuple([x ^ y for y in (0, c, d, c ^ d) for x in low]))
    return tuple(tables)


def _mul_by(tables: _Tables, value: int) -> int:
    t0, t1, t2, t3, t4, t5, t6, t7 = tables
    return (
        t0[value & 0xF]
        ^ t1[(value >> 4) & 0xF]
        ^ t2[(value >> 8) & 0xF]
        ^ t3[(value >> 12) & 0xF]
        ^ t4[(value >> 16) & 0xF]
        ^ t5[(value >> 20) & 0xF]
        ^ t6[(value >> 24) & 0xF]
        ^ t7[value >> 28]
    )


def _squares(first: int, count: int) -> tuple[int, ...]:
    out = [first]
    for _ in range(count - 1):
        out.append(_gf2_mul(out[-1], out[-1]))
    return tuple(out)


_POW_2K_COUNT = 64


@functools.cache
def _x_pow_2k() -> tuple[int, ...]:
    """x**(2**k) mod P for k = 0..63 (x**1 is bit 30): enough for blocks up to 2**60 bytes;
    computed at the first crc32c combine, not at import."""
    return _squares(1 << 30, _POW_2K_COUNT)


@functools.cache
def _x_pow_2k_tables(k: int) -> _Tables:
    return _nibble_tables(_x_pow_2k()[k])


@functools.lru_cache(maxsize=256)
def _x_pow_8n(n: int) -> int:
    """x**(8n) mod P: the operator that moves a CRC over n zero bytes. O(log n) products."""
    exponent = 8 * n
    result = 1 << 31  # x**0
    if exponent.bit_length() > _POW_2K_COUNT:  # absurdly long: plain products
        for k, power in enumerate(_squares(1 << 30, exponent.bit_length())):
            if exponent >> k & 1:
                result = _gf2_mul(power, result)
        return result
    k = 0
    while exponent:
        if exponent & 1:
            result = _mul_by(_x_pow_2k_tables(k), result)
        exponent >>= 1
        k += 1
    return result


@functools.lru_cache(maxsize=256)
def _shift_tables(n: int) -> _Tables:
    """Tables for multiplying by x**(8n), i.e. for moving a CRC over n zero bytes."""
    return _nibble_tables(_x_pow_8n(n))


def crc32c_combine(first: int, second: int, len_second: int) -> int:
    """CRC-32C of A+B from crc(A), crc(B) and len(B).

    The register after A carries into B as crc(A) * x**(8 len B); the pre- and post-inversion
    of both CRCs cancel, so crc(AB) = crc(A) * x**(8 len B) xor crc(B) (mod P). The operator
    for a block length takes O(log n) products and is cached as lookup tables, so blocks of
    one size (all but a file's last) cost eight table lookups each.
    """
    if not len_second:
        return first ^ second  # crc(B) of an empty B is 0
    if not first:  # nothing to move
        return second
    return _mul_by(_shift_tables(len_second), first) ^ second


def adler32_combine(first: int, second: int, len_second: int) -> int:
    """Adler-32 of A+B from adler(A), adler(B) and len(B).

    With value = b << 16 | a (both mod 65521, a starting at 1): a = a1 + a2 - 1, and every byte
    of B adds a1 - 1 more to its running sum, so b = b1 + b2 + len(B) * (a1 - 1).
    """
    a1, b1 = first & 0xFFFF, first >> 16
    a2, b2 = second & 0xFFFF, second >> 16
    a = (a1 + a2 - 1) % _ADLER_BASE
    b = (b1 + b2 + len_second * (a1 - 1)) % _ADLER_BASE
    return (b << 16) | a


# --------------------------------------------------------------------------- running checksums


class _IntChecksum:
    """A 32-bit checksum kept as an int; digest() is its 4 big-endian bytes."""

    __slots__ = ("name", "value")
    name: str
    value: int

    def digest(self) -> bytes:
        return self.value.to_bytes(4, "big")

    def hexdigest(self) -> str:
        return f"{self.value:08x}"


class Adler32(_IntChecksum):
    """Running Adler-32 (zlib)."""

    __slots__ = ()

    def __init__(self, value: int = 1) -> None:
        self.name = "adler32"
        self.value = value

    def update(self, data: Buffer, /) -> None:
        self.value = _adler32_update(data, self.value)


class Crc32c(_IntChecksum):
    """Running CRC-32C (Castagnoli), with the backend chosen at import (CRC32C_BACKEND)."""

    __slots__ = ()

    def __init__(self, value: int = 0) -> None:
        self.name = "crc32c"
        self.value = value

    def update(self, data: Buffer, /) -> None:
        self.value = _crc32c_update(data, self.value)


# --------------------------------------------------------------------------- the registry


@dataclass(frozen=True, slots=True)
class Algorithm:
    """Everything dtnkit knows about one checksum algorithm."""

    name: str  # dtnkit's name (CLI, journals, APIs)
    size: int  # digest length in bytes
    rfc3230: str  # the name sent in RFC 3230 ``Digest`` / ``Want-Digest``
    rfc9530: str  # the name sent in RFC 9530 ``Repr-Digest`` / ``Want-Repr-Digest``
    hex_on_wire: bool  # RFC 3230 value in hex (a 32-bit integer) rather than base64
    new: Callable[[], Checksum]  # a fresh running checksum
    aliases: tuple[str, ...] = ()  # other spellings accepted (lowercase)
    #: combinable algorithms only: value of A+B from value(A), value(B), len(B)
    combine: Callable[[int, int, int], int] | None = None
    block: Callable[[Buffer], int] | None = None  # value of one block on its own
    empty: int | None = None  # value of no bytes

    @property
    def combinable(self) -> bool:
        return self.combine is not None

    @property
    def spellings(self) -> frozenset[str]:
        """Every lowercase name that means this algorithm (ours, HTTP's, aliases)."""
        return frozenset({self.name, self.rfc3230.lower(), self.rfc9530.lower(), *self.aliases})


def _md5() -> Checksum:
    # usedforsecurity=False: an integrity check, allowed on FIPS-mode hosts too
    return hashlib.md5(usedforsecurity=False)


def _sha256() -> Checksum:
    return hashlib.sha256()


def _sha512() -> Checksum:
    return hashlib.sha512()


REGISTRY: dict[str, Algorithm] = {
    a.name: a
    for a in (
        # RFC 9530 registers "adler" where RFC 3230 had "ADLER32".
        Algorithm(
            "adler32",
            4,
            "adler32",
            "adler",
            True,
            lambda: Adler32(),
            combine=adler32_combine,
            block=lambda data: _adler32_update(data, 1),
            empty=1,
        ),
        Algorithm(
            "crc32c",
            4,
            "crc32c",
            "crc32c",
            True,
            lambda: Crc32c(),
            combine=crc32c_combine,
            block=lambda data: _crc32c_update(data, 0),
            empty=0,
        ),
        Algorithm("md5", 16, "md5", "md5", False, _md5),
        Algorithm("sha256", 32, "sha-256", "sha-256", False, _sha256),
        Algorithm("sha512", 64, "sha-512", "sha-512", False, _sha512),
    )
}

ALGORITHMS: tuple[str, ...] = tuple(REGISTRY)
COMBINABLE = frozenset(a.name for a in REGISTRY.values() if a.combinable)
#: Other spellings accepted for the names above (matched case-insensitively).
ALIASES: dict[str, str] = {
    spelling: a.name
    for a in REGISTRY.values()
    for spelling in sorted(a.spellings)
    if spelling != a.name
}
#: Digest length in bytes per algorithm.
DIGEST_SIZE: dict[str, int] = {a.name: a.size for a in REGISTRY.values()}


def canonical(name: str) -> str:
    """The dtnkit name of an algorithm (``"SHA-256"`` -> ``"sha256"``); ValueError if unknown."""
    key = name.strip().lower()
    key = ALIASES.get(key, key)
    if key not in REGISTRY:
        known = ", ".join(ALGORITHMS)
        raise ValueError(f"unknown checksum algorithm {name!r} (known: {known})")
    return key


def algorithm(name: str) -> Algorithm:
    """The registry record of *name* (any spelling); ValueError if unknown."""
    return REGISTRY[canonical(name)]


def lookup(name: str) -> Algorithm | None:
    """The record for a name as received (any case and spelling), or None when unknown."""
    key = name.strip().lower()
    return REGISTRY.get(ALIASES.get(key, key))


def _combinable(name: str) -> Algorithm:
    record = algorithm(name)
    if not record.combinable:
        raise ValueError(
            f"{record.name} values cannot be combined or expressed as an integer "
            f"(combinable: {', '.join(sorted(COMBINABLE))})"
        )
    return record


def new(name: str) -> Checksum:
    """A fresh running checksum for *name* (any case; ``sha-256`` and ``adler`` accepted)."""
    return algorithm(name).new()


def block_value(name: str, data: Buffer) -> int:
    """adler32 or crc32c of one block on its own, as an int (ready for :func:`combine`)."""
    block = _combinable(name).block
    assert block is not None
    return block(data)


def _check_value(value: int, what: str) -> None:
    if not 0 <= value <= _MASK32:
        raise ValueError(f"{what} {value!r} is not a 32-bit checksum value")


def combine(name: str, first: int, second: int, len_second: int) -> int:
    """The value of A+B from value(A), value(B) and len(B) (adler32 or crc32c), O(log len)."""
    step = _combinable(name).combine
    assert step is not None
    _check_value(first, "first")
    _check_value(second, "second")
    if len_second < 0:
        raise ValueError(f"block length {len_second} is negative")
    return step(first, second, len_second)


def combine_blocks(name: str, blocks: Iterable[tuple[int, int]]) -> int:
    """The whole-file value from ``(value, length)`` of each block, in file order.

    Blocks may have been hashed in any order and on any stream; only this fold needs the file
    order. No blocks gives the value of the empty file.
    """
    record = _combinable(name)
    step, total = record.combine, record.empty
    assert step is not None and total is not None
    for value, length in blocks:
        _check_value(value, "block value")
        if length < 0:
            raise ValueError(f"block length {length} is negative")
        total = step(total, value, length)
    return total


def to_bytes(name: str, value: int) -> bytes:
    """An adler32/crc32c value as its digest: 4 bytes, big-endian."""
    _combinable(name)
    _check_value(value, "value")
    return value.to_bytes(4, "big")


def from_bytes(name: str, digest: bytes) -> int:
    """The inverse of :func:`to_bytes`."""
    _combinable(name)
    if len(digest) != 4:
        raise ValueError(f"a {canonical(name)} digest is 4 bytes, not {len(digest)}")
    return int.from_bytes(digest, "big")


class MultiHasher:
    """Feed several algorithms from one pass over the data (one read, many checksums)."""

    def __init__(self, names: Sequence[str]) -> None:
        if isinstance(names, str):
            raise TypeError("names must be a sequence of algorithm names, not one string")
        self._sums: dict[str, Checksum] = {}
        for name in names:
            key = canonical(name)
            if key not in self._sums:
                self._sums[key] = new(key)
        if not self._sums:
            raise ValueError("MultiHasher needs at least one algorithm")

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self._sums)

    def update(self, data: Buffer) -> None:
        for checksum in self._sums.values():
            checksum.update(data)

    def digests(self) -> dict[str, bytes]:
        """Digest bytes per algorithm (dtnkit names, in the order first given)."""
        return {key: checksum.digest() for key, checksum in self._sums.items()}

    def hexdigests(self) -> dict[str, str]:
        return {key: checksum.hexdigest() for key, checksum in self._sums.items()}


def file_checksum(path: Path, name: str, *, block_size: int = 8 * 2**20) -> bytes:
    """Digest of the file at *path*, read in blocks of *block_size* bytes into one buffer."""
    if block_size <= 0:
        raise ValueError(f"block_size must be positive, not {block_size}")
    checksum = new(name)
    buffer = bytearray(block_size)
    view = memoryview(buffer)
    with open(path, "rb", buffering=0) as handle:
        while True:
            count = handle.readinto(view)
            if not count:
                break
            checksum.update(view[:count])
    return checksum.digest()
