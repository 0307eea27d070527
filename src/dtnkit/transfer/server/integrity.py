"""Digests on requests: what a client sent with a body, what it wants back, free space."""

from __future__ import annotations

from pathlib import Path

from dtnkit.transfer import checksum, files
from dtnkit.transfer.server.errors import HttpError
from dtnkit.transfer.server.exchange import Headers
from dtnkit.transfer.wire import digests


def sent_digests(
    digest: str | None,
    repr_digest: str | None,
    content_md5: str | None,
    content_digest: str | None = None,
) -> dict[str, bytes]:
    """Digests a client sent with its body, by dtnkit algorithm name; unknown ones are skipped.

    ``Digest`` (RFC 3230), ``Repr-Digest`` and ``Content-Digest`` (RFC 9530: the server takes
    no content coding, so the content is the bytes received), ``Content-MD5`` (base64).
    HttpError 400 when a value is malformed or two headers disagree.
    """
    found: list[tuple[str, dict[str, bytes]]] = []
    for header, value, parse in (
        ("Digest", digest, digests.parse_digest),
        ("Repr-Digest", repr_digest, digests.parse_repr_digest),
        ("Content-Digest", content_digest, digests.parse_repr_digest),
        ("Content-MD5", content_md5, lambda v: digests.parse_digest(f"md5={v.strip()}")),
    ):
        if value is None:
            continue
        try:
            found.append((header, parse(value)))
        except ValueError as exc:
            why = str(exc).removeprefix("Repr-Digest").removeprefix("Digest").lstrip(": ")
            raise HttpError(400, header, f"{why}; nothing written") from None
    result: dict[str, bytes] = {}
    for header, values in found:
        for name, raw in values.items():
            if result.setdefault(name, raw) != raw:
                raise HttpError(400, header, f"its {name} value disagrees with another header")
    return result


def request_digests(headers: Headers, *, content: bool = True) -> dict[str, bytes]:
    """:func:`sent_digests` of a request's ``Digest``, ``Repr-Digest``, ``Content-MD5`` and,
    when the request has a body the digests describe (*content*), ``Content-Digest``."""
    return sent_digests(
        headers.get("Digest"),
        headers.get("Repr-Digest"),
        headers.get("Content-MD5"),
        headers.get("Content-Digest") if content else None,
    )


def want_digest(value: str | None) -> str | None:
    """The algorithm to answer a ``Want-Digest`` with (None: none acceptable); 400 if bad."""
    if not value:
        return None
    try:
        return digests.choose(digests.parse_want_digest(value), checksum.ALGORITHMS)
    except ValueError as exc:
        raise HttpError(400, "Want-Digest", str(exc)) from None


def want_repr_digest(value: str | None, header: str = "Want-Repr-Digest") -> str | None:
    """The same for RFC 9530's ``Want-Repr-Digest`` / ``Want-Content-Digest``."""
    if not value:
        return None
    try:
        return digests.choose(digests.parse_want_repr_digest(value), checksum.ALGORITHMS)
    except ValueError as exc:
        why = str(exc).replace("Want-Repr-Digest", header)
        raise HttpError(400, header, why) from None


def check_space(directory: Path, length: int, where: str, root: Path | None = None) -> None:
    """HttpError 507 when *length* bytes do not fit under *directory* (under *root*)."""
    free = files.free_space(directory, root)
    if free is not None and length > free:
        raise HttpError(507, f"PUT {where}", f"needs {length} bytes, {free} are free")
