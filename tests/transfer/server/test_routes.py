"""The route table and what is derived from it."""

from __future__ import annotations

import io
from email.message import Message
from pathlib import Path

import pytest

from dtnkit.transfer import files, tokens
from dtnkit.transfer.server import adapter, routes
from dtnkit.transfer.server.config import Counters, ServerConfig
from dtnkit.transfer.server.errors import HttpError
from dtnkit.transfer.server.exchange import Services


def test_allow_and_scopes_are_derived() -> None:
    assert routes.ALLOW == "OPTIONS, GET, HEAD, PUT, DELETE, MKCOL, PROPFIND, COPY, POST"
    assert {"GET", "HEAD", "PROPFIND"} == routes.READ_METHODS
    assert {"PUT", "DELETE", "MKCOL"} == routes.WRITE_METHODS
    assert "MOVE" in routes.BY_METHOD and "MOVE" not in routes.ALLOW
    assert [r.method for r in routes.ROUTES if r.drops_body] == ["GET", "HEAD", "DELETE"]
    assert routes.scope("GET") == "read" and routes.scope("COPY") is None
    assert routes.scope("BREW") is None
    for route in routes.ROUTES:  # the adapter dispatches every row, and nothing else
        assert callable(getattr(adapter.RequestHandler, f"do_{route.method}"))
    assert not hasattr(adapter.RequestHandler, "do_BREW")


class FakeExchange:
    """Just enough of an Exchange for the checks before ``100 Continue``."""

    def __init__(self, method: str, root: Path, headers: dict[str, str]) -> None:
        self.method = method
        self.headers = Message()
        for name, value in headers.items():
            self.headers[name] = value
        config = ServerConfig(
            root=root,
            tokens=tokens.parse("rw read,write\nro read\n"),
            anonymous_read=False,
            quiet=True,
            log=io.StringIO(),
        )
        self.services = Services(config, files.ChecksumCache(), Counters(), None)
        self.authorized: list[str | None] = []

    def resolve(self) -> Path:
        return self.services.config.root / "f"

    def authorize(self, need: str | None = None) -> None:
        need = need or routes.scope(self.method)
        self.authorized.append(need)
        if need == "write" and self.headers.get("Authorization") != "Bearer rw":
            raise HttpError(403, self.method, "no write scope")


def test_before_continue(tmp_path: Path) -> None:
    ex = FakeExchange("PUT", tmp_path, {"Authorization": "Bearer rw"})
    routes.before_continue(ex)  # type: ignore[arg-type]
    assert ex.authorized == ["write"]
    ex = FakeExchange("PUT", tmp_path, {"Authorization": "Bearer ro"})
    with pytest.raises(HttpError):
        routes.before_continue(ex)  # type: ignore[arg-type]
    # the PUT route's own checks run too: a Content-Range without a session is refused
    ex = FakeExchange(
        "PUT", tmp_path, {"Authorization": "Bearer rw", "Content-Range": "bytes 0-1/2"}
    )
    with pytest.raises(HttpError) as info:
        routes.before_continue(ex)  # type: ignore[arg-type]
    assert info.value.status == 501
    # ... but not for a session's range
    ex = FakeExchange(
        "PUT",
        tmp_path,
        {"Authorization": "Bearer rw", "Dtnkit-Upload-Id": "x", "Content-Range": "bytes 0-1/2"},
    )
    routes.before_continue(ex)  # type: ignore[arg-type]
    ex = FakeExchange("POST", tmp_path, {})
    routes.before_continue(ex)  # type: ignore[arg-type]
    assert ex.authorized == [None]  # POST: the handler decides
