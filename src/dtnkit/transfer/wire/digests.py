"""HTTP digest headers as real storage servers speak them.

Two generations of headers carry whole-file checksums:

* RFC 3230 ``Want-Digest`` / ``Digest`` (obsoleted, but what XRootD, dCache, gfal2/davix and FTS
  use): ``Want-Digest: adler32;q=1, md5;q=0.8`` -> ``Digest: adler32=0a1b2c3d``.
* RFC 9530 ``Want-Repr-Digest`` / ``Repr-Digest`` (and the ``Content-`` pair): Structured Field
  dictionaries, ``Want-Repr-Digest: sha-256=10, adler=3`` -> ``Repr-Digest: adler=:jwQKXQ==:``.

Encodings in ``Digest`` (RFC 3230), as sent and as accepted:

========  =======================  ====================================================
name      we send                  we also accept
========  =======================  ====================================================
adler32   8 lowercase hex digits   1-8 hex digits, any case (``9600001``); base64 of the 4 bytes
crc32c    8 lowercase hex digits   1-8 hex digits; base64 of the 4 bytes (XRootD < 5.8.1)
md5       base64                   32 hex digits (old DPM)
sha-256   base64                   64 hex digits
sha-512   base64                   128 hex digits
========  =======================  ====================================================

Which algorithm goes in hex and under which names comes from the checksum registry
(:data:`dtnkit.transfer.checksum.REGISTRY`); this module adds no table of its own.

crc32c is sent in hex because the IANA registry for RFC 3230 says so (``crc32c=0a72a4df`` for
"dog"), XRootD switched from base64 to hex in 5.8.1 (commit d825555, issue #2456: its test now
expects ``Digest: crc32c=ee24f29e``), and davix/gfal2 take a crc32c value verbatim, without base64
decoding, so base64 would never match what gfal2 computes. XRootD 5.5.3 (Debian 12) still sends
base64 (``crc32c=jeyM7g==`` for 0x8dec8cee), so the parser takes both; a 4-byte base64 value is
always 8 characters ending ``==``, which no hex value is.

Algorithm names are returned in dtnkit's spelling (:data:`dtnkit.transfer.checksum.ALGORITHMS`:
``sha-256`` -> ``sha256``, ``adler`` -> ``adler32``); other names are kept, lowercased.

Every parser raises :class:`DigestError` (a ValueError) on bad input and nothing else; fields are
limited to :data:`MAX_FIELD_LEN` characters and :data:`MAX_ITEMS` members.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Mapping, Sequence

from dtnkit.transfer import checksum
from dtnkit.transfer.checksum import DIGEST_SIZE

MAX_FIELD_LEN = 8192
MAX_ITEMS = 64

# Our name -> the name we send; received name (lowercased) -> our name: from the registry.
_RFC3230_NAME = {a.name: a.rfc3230.lower() for a in checksum.REGISTRY.values()}
_RFC9530_NAME = {a.name: a.rfc9530.lower() for a in checksum.REGISTRY.values()}
_FROM_HTTP = {spelling: a.name for a in checksum.REGISTRY.values() for spelling in a.spellings}

_FIELD_CHARS = re.compile(r"[\t\x20-\x7e]*")  # visible ASCII, space, tab: no CTLs, no non-ASCII
_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_QVALUE = re.compile(r"0(\.[0-9]{0,3})?|1(\.0{0,3})?")
_HEX32 = re.compile(r"[0-9a-fA-F]{1,8}")
_B64_4BYTES = re.compile(r"[A-Za-z0-9+/]{6}(==)?")
_HEX = re.compile(r"[0-9a-fA-F]+")
_B64 = re.compile(r"[A-Za-z0-9+/]*={0,2}")
_OWS = " \t"


class DigestError(ValueError):
    """A digest header that cannot be used: malformed, oversized, or with a bad digest."""


def _http_to_ours(name: str) -> str:
    key = name.lower()
    return _FROM_HTTP.get(key, key)


def _check_field(value: str, header: str) -> None:
    if not isinstance(value, str):
        raise DigestError(f"{header}: expected a str, got {type(value).__name__}")
    if len(value) > MAX_FIELD_LEN:
        raise DigestError(f"{header}: {len(value)} characters (limit {MAX_FIELD_LEN})")
    if not _FIELD_CHARS.fullmatch(value):
        raise DigestError(f"{header}: control or non-ASCII characters")


def _list_members(value: str, header: str) -> list[str]:
    """The non-empty members of an HTTP #list (RFC 9110 section 5.6.1), whitespace trimmed."""
    _check_field(value, header)
    members = [m.strip(_OWS) for m in value.split(",")]
    members = [m for m in members if m]
    if len(members) > MAX_ITEMS:
        raise DigestError(f"{header}: {len(members)} items (limit {MAX_ITEMS})")
    return members


def _check_token(name: str, header: str) -> None:
    if not _TOKEN.fullmatch(name):
        raise DigestError(f"{header}: {name[:40]!r} is not an algorithm name")


def _by_preference(items: list[tuple[str, float]]) -> list[tuple[str, float]]:
    return sorted(items, key=lambda item: -item[1])  # stable: ties keep the sender's order


# --------------------------------------------------------------------------- RFC 3230


def parse_want_digest(value: str) -> list[tuple[str, float]]:
    """``Want-Digest`` (RFC 3230) -> ``[(name, q)]``, highest q first (ties in sent order).

    Names are case-insensitive and come back in dtnkit's spelling when known (``SHA-256`` ->
    ``sha256``), lowercased otherwise; unknown ones are kept for the caller to filter. A missing
    q is 1.0; ``q=0`` means "not acceptable" and is kept as 0.0. Other parameters are ignored.
    """
    header = "Want-Digest"
    items: list[tuple[str, float]] = []
    for member in _list_members(value, header):
        name, *params = (part.strip(_OWS) for part in member.split(";"))
        _check_token(name, header)
        q: float | None = None
        for param in params:
            key, sep, raw = (p.strip(_OWS) for p in param.partition("="))
            if not sep or not _TOKEN.fullmatch(key) or not _TOKEN.fullmatch(raw):
                raise DigestError(f"{header}: bad parameter {param[:40]!r} for {name[:40]!r}")
            if key.lower() != "q":
                continue
            if q is not None:
                raise DigestError(f"{header}: two q values for {name[:40]!r}")
            if not _QVALUE.fullmatch(raw):
                raise DigestError(f"{header}: q={raw[:40]!r} is not a qvalue (0 to 1)")
            q = float(raw)
        items.append((_http_to_ours(name), 1.0 if q is None else q))
    return _by_preference(items)


def _b64decode(text: str, what: str) -> bytes:
    """Standard base64, padding optional; DigestError on anything else."""
    if not _B64.fullmatch(text):
        raise DigestError(f"{what}: not base64")
    body = text.rstrip("=")
    if len(body) % 4 == 1:
        raise DigestError(f"{what}: truncated base64")
    try:
        return base64.b64decode(body + "=" * (-len(body) % 4), validate=True)
    except (binascii.Error, ValueError) as exc:  # pragma: no cover - the checks above catch it
        raise DigestError(f"{what}: bad base64") from exc


def _decode_digest_value(name: str, text: str) -> bytes:
    """The raw digest of one ``Digest`` item value for one of our algorithms."""
    what = f"Digest {_RFC3230_NAME[name]}"
    size = DIGEST_SIZE[name]
    if checksum.REGISTRY[name].hex_on_wire:  # adler32, crc32c: a 32-bit integer in hex per the
        # IANA registry; base64 from XRootD < 5.8.1 (crc32c)
        if _HEX32.fullmatch(text):
            return int(text, 16).to_bytes(4, "big")
        if _B64_4BYTES.fullmatch(text):
            return _b64decode(text, what)
        raise DigestError(f"{what}: {text[:40]!r} is neither 1-8 hex digits nor 4 bytes in base64")
    if len(text) == 2 * size and _HEX.fullmatch(text):
        return bytes.fromhex(text)
    raw = _b64decode(text, what)
    if len(raw) != size:
        raise DigestError(f"{what}: {len(raw)} bytes, expected {size}")
    return raw


def parse_digest(value: str) -> dict[str, bytes]:
    """``Digest`` (RFC 3230) -> raw digest bytes per algorithm we know (dtnkit names).

    Algorithms we do not compute (``UNIXcksum``, ``sha-384``, ...) are skipped. A known one
    with an undecodable value or the wrong length, a member without ``=``, or one algorithm
    given twice with different values is a DigestError. Values may be quoted.
    """
    header = "Digest"
    out: dict[str, bytes] = {}
    for member in _list_members(value, header):
        name, sep, text = member.partition("=")
        name, text = name.strip(_OWS), text.strip(_OWS)
        _check_token(name, header)
        if not sep:
            raise DigestError(f"{header}: {member[:40]!r} has no value")
        if len(text) >= 2 and text[0] == text[-1] == '"':
            text = text[1:-1].strip(_OWS)
        ours = _http_to_ours(name)
        if ours not in DIGEST_SIZE:
            continue
        if not text:
            raise DigestError(f"{header}: empty value for {name}")
        raw = _decode_digest_value(ours, text)
        if out.setdefault(ours, raw) != raw:
            raise DigestError(f"{header}: two different {ours} values")
    return out


def _ours_or_error(name: str) -> str:
    ours = _http_to_ours(name.strip())
    if ours not in DIGEST_SIZE:
        raise DigestError(f"no HTTP digest encoding for algorithm {name[:40]!r}")
    return ours


def _check_size(ours: str, digest: bytes) -> None:
    if not isinstance(digest, bytes | bytearray | memoryview):
        raise DigestError(f"{ours} digest must be bytes, not {type(digest).__name__}")
    if len(digest) != DIGEST_SIZE[ours]:
        raise DigestError(f"a {ours} digest is {DIGEST_SIZE[ours]} bytes, not {len(digest)}")


def format_digest(name: str, digest: bytes) -> str:
    """One ``Digest`` item (RFC 3230) as XRootD and dCache send it.

    ``adler32=0a1b2c3d`` and ``crc32c=ee24f29e`` (8 lowercase hex digits),
    ``md5=<base64>``, ``sha-256=<base64>``. Join several with ``","`` (davix matches
    ``name=`` at the start of each comma-separated piece, so it misses items after ``", "``).
    """
    ours = _ours_or_error(name)
    _check_size(ours, digest)
    label = _RFC3230_NAME[ours]
    if checksum.REGISTRY[ours].hex_on_wire:
        return f"{label}={bytes(digest).hex()}"
    return f"{label}={base64.b64encode(digest).decode('ascii')}"


def format_value(name: str, digest: bytes) -> str:
    """The value of one ``Digest`` item alone: what :func:`format_digest` puts after ``=``."""
    return format_digest(name, digest).split("=", 1)[1]


def show(digest: bytes) -> str:
    """A digest for people and JSON, as md5sum, sha256sum and xrdadler32 print it: lowercase
    hex, whatever the algorithm (base64 is only for md5/sha in headers on the wire)."""
    return bytes(digest).hex()


def parse_value(name: str, text: str) -> bytes:
    """The raw digest of one ``Digest`` item value for algorithm *name* (any spelling)."""
    ours = _ours_or_error(name)
    text = text.strip(_OWS)
    if not text:
        raise DigestError(f"Digest: empty value for {name}")
    return _decode_digest_value(ours, text)


# --------------------------------------------------------------------------- RFC 9530


class _Token(str):
    """A Structured Field Token (as opposed to a String)."""


_SFBareItem = int | float | str | bytes | bool
_SFItem = tuple[_SFBareItem, dict[str, _SFBareItem]]
_SFMember = _SFItem | tuple[list[_SFItem], dict[str, _SFBareItem]]

_KEY_FIRST = frozenset("abcdefghijklmnopqrstuvwxyz*")
_KEY_CHARS = _KEY_FIRST | frozenset("0123456789_-.")
_TOKEN_CHARS = frozenset("!#$%&'*+-.^_`|~0123456789:/abcdefghijklmnopqrstuvwxyz") | frozenset(
    "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
)
_ALPHA = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
_B64_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=")


class _SFParser:
    """Structured Field Dictionary parser after RFC 8941 section 4.2 (strict)."""

    def __init__(self, text: str, header: str) -> None:
        self.s = text
        self.i = 0
        self.header = header

    def fail(self, why: str) -> DigestError:
        return DigestError(f"{self.header}: {why} at character {self.i}")

    def peek(self) -> str:
        return self.s[self.i] if self.i < len(self.s) else ""

    def dictionary(self) -> dict[str, _SFMember]:
        self.s = self.s.strip(" ")
        out: dict[str, _SFMember] = {}
        while self.i < len(self.s):
            key = self.key()
            if self.peek() == "=":
                self.i += 1
                member = self.item_or_inner_list()
            else:
                member = (True, self.parameters())
            out[key] = member  # a repeated key overwrites, keeping its first position
            if len(out) > MAX_ITEMS:
                raise self.fail(f"more than {MAX_ITEMS} members")
            while self.peek() in (" ", "\t"):
                self.i += 1
            if self.i >= len(self.s):
                return out
            if self.peek() != ",":
                raise self.fail("expected ','")
            self.i += 1
            while self.peek() in (" ", "\t"):
                self.i += 1
            if self.i >= len(self.s):
                raise self.fail("trailing ','")
        return out

    def key(self) -> str:
        start = self.i
        if self.peek() not in _KEY_FIRST:
            raise self.fail("expected a lowercase key")
        while self.peek() and self.peek() in _KEY_CHARS:
            self.i += 1
        return self.s[start : self.i]

    def item_or_inner_list(self) -> _SFMember:
        if self.peek() != "(":
            return self.item()
        self.i += 1
        items: list[_SFItem] = []
        while True:
            while self.peek() == " ":
                self.i += 1
            if self.peek() == ")":
                self.i += 1
                return (items, self.parameters())
            items.append(self.item())
            if len(items) > MAX_ITEMS:
                raise self.fail(f"more than {MAX_ITEMS} items in an inner list")
            if self.peek() not in (" ", ")"):
                raise self.fail("expected ' ' or ')' in an inner list")

    def item(self) -> _SFItem:
        return (self.bare_item(), self.parameters())

    def parameters(self) -> dict[str, _SFBareItem]:
        params: dict[str, _SFBareItem] = {}
        while self.peek() == ";":
            self.i += 1
            while self.peek() == " ":
                self.i += 1
            key = self.key()
            value: _SFBareItem = True
            if self.peek() == "=":
                self.i += 1
                value = self.bare_item()
            params[key] = value
            if len(params) > MAX_ITEMS:
                raise self.fail(f"more than {MAX_ITEMS} parameters")
        return params

    def bare_item(self) -> _SFBareItem:
        c = self.peek()
        if c == "-" or (c.isdigit() and c.isascii()):
            return self.number()
        if c == '"':
            return self.string()
        if c and (c in _ALPHA or c == "*"):
            return self.token()
        if c == ":":
            return self.byte_sequence()
        if c == "?":
            return self.boolean()
        raise self.fail("expected an item")

    def number(self) -> int | float:
        start = self.i
        if self.peek() == "-":
            self.i += 1
        digits_start = self.i
        while self.peek().isdigit() and self.peek().isascii():
            self.i += 1
        int_digits = self.i - digits_start
        if not int_digits:
            raise self.fail("expected a digit")
        if self.peek() != ".":
            if int_digits > 15:
                raise self.fail("integer too long")
            return int(self.s[start : self.i])
        if int_digits > 12:
            raise self.fail("decimal too long")
        self.i += 1
        frac_start = self.i
        while self.peek().isdigit() and self.peek().isascii():
            self.i += 1
        if not 1 <= self.i - frac_start <= 3:
            raise self.fail("decimal needs 1 to 3 fractional digits")
        return float(self.s[start : self.i])

    def string(self) -> str:
        self.i += 1
        chars: list[str] = []
        while self.i < len(self.s):
            c = self.s[self.i]
            self.i += 1
            if c == "\\":
                nxt = self.peek()
                if nxt not in ('"', "\\"):
                    raise self.fail("bad escape in a string")
                chars.append(nxt)
                self.i += 1
            elif c == '"':
                return "".join(chars)
            elif not " " <= c <= "~":
                raise self.fail("control character in a string")
            else:
                chars.append(c)
        raise self.fail("unterminated string")

    def token(self) -> _Token:
        start = self.i
        self.i += 1
        while self.peek() and self.peek() in _TOKEN_CHARS:
            self.i += 1
        return _Token(self.s[start : self.i])

    def byte_sequence(self) -> bytes:
        start = self.i + 1
        end = self.s.find(":", start)
        if end < 0:
            raise self.fail("unterminated byte sequence")
        body = self.s[start:end]
        if not set(body) <= _B64_CHARS:
            raise self.fail("byte sequence is not base64")
        self.i = end + 1
        return _b64decode(body, self.header)

    def boolean(self) -> bool:
        self.i += 1
        c = self.peek()
        if c not in ("0", "1"):
            raise self.fail("expected ?0 or ?1")
        self.i += 1
        return c == "1"


def _sf_dictionary(value: str, header: str) -> dict[str, _SFMember]:
    _check_field(value, header)
    return _SFParser(value, header).dictionary()


def parse_want_repr_digest(value: str) -> list[tuple[str, float]]:
    """``Want-Repr-Digest`` / ``Want-Content-Digest`` (RFC 9530) -> ``[(name, preference)]``.

    The field is a Structured Field Dictionary of integers 0..10 (10 most preferred, 0 "not
    acceptable"): ``"sha-256=10, md5=3"`` -> ``[("sha256", 10.0), ("md5", 3.0)]``, highest
    first. Keys must be lowercase (RFC 8941); a bare key (``adler32`` alone, which XRootD also
    rejects), a non-integer or an out-of-range value is a DigestError.
    """
    header = "Want-Repr-Digest"
    items: list[tuple[str, float]] = []
    for key, (pref, _params) in _sf_dictionary(value, header).items():
        if type(pref) is not int or not 0 <= pref <= 10:
            raise DigestError(f"{header}: {key} needs an integer preference 0 to 10")
        items.append((_http_to_ours(key), float(pref)))
    return _by_preference(items)


def format_repr_digest(items: Mapping[str, bytes]) -> str:
    """``Repr-Digest`` / ``Content-Digest`` (RFC 9530): ``sha-256=:<base64>:, adler=:<b64>:``.

    Names are written as RFC 9530 registers them (``adler``, ``crc32c``, ``md5``, ``sha-256``,
    ``sha-512``).
    """
    members: dict[str, str] = {}
    for name, digest in items.items():
        ours = _ours_or_error(name)
        _check_size(ours, digest)
        label = _RFC9530_NAME[ours]
        if label in members:
            raise DigestError(f"{ours} given twice")
        members[label] = f"{label}=:{base64.b64encode(digest).decode('ascii')}:"
    if not members:
        raise DigestError("Repr-Digest needs at least one digest")
    return ", ".join(members.values())


def parse_repr_digest(value: str) -> dict[str, bytes]:
    """``Repr-Digest`` / ``Content-Digest`` (RFC 9530) -> raw digest bytes per known algorithm.

    Keys we do not compute are skipped; a known key whose value is not a byte sequence of the
    right length is a DigestError (``adler32`` is accepted as a key beside ``adler``).
    """
    header = "Repr-Digest"
    out: dict[str, bytes] = {}
    for key, (raw, _params) in _sf_dictionary(value, header).items():
        ours = _http_to_ours(key)
        if ours not in DIGEST_SIZE:
            continue
        if not isinstance(raw, bytes):
            raise DigestError(f"{header}: {key} must be a byte sequence (:base64:)")
        if len(raw) != DIGEST_SIZE[ours]:
            raise DigestError(f"{header}: {key} is {len(raw)} bytes, expected {DIGEST_SIZE[ours]}")
        if out.setdefault(ours, raw) != raw:
            raise DigestError(f"{header}: two different {ours} values")
    return out


# --------------------------------------------------------------------------- negotiation


def choose(wanted: Sequence[tuple[str, float]], available: Sequence[str]) -> str | None:
    """The algorithm to answer with: the highest preference among those we can compute.

    *wanted* is what a ``parse_want_*`` function returned (any order; q or 0..10 preferences
    alike); *available* the algorithms we can compute, in any spelling. Ties go to the one the
    client listed first. Never an algorithm the client did not ask for, nor one it refused with
    q=0 anywhere in the list (unlike XRootD, which falls back to adler32 and ignores q): None
    when nothing acceptable is left. Returns the entry of *available* that matched.
    """
    ours: dict[str, str] = {}
    for name in available:
        ours.setdefault(_http_to_ours(name.strip()), name)
    refused = {_http_to_ours(name) for name, q in wanted if not q > 0}
    best: str | None = None
    best_q = 0.0
    for name, q in wanted:
        key = _http_to_ours(name)
        if key in refused or key not in ours:
            continue
        if q > best_q:
            best, best_q = ours[key], q
    return best


def mismatches(expected: Mapping[str, bytes], got: Mapping[str, bytes]) -> str | None:
    """``name expected X got Y; ...`` for every expected digest that *got* contradicts, or
    None when all match (the detail of a 412)."""
    bad = [name for name in expected if got[name] != expected[name]]
    if not bad:
        return None
    return "; ".join(f"{n} expected {expected[n].hex()} got {got[n].hex()}" for n in bad)
