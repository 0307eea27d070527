"""The route table: one row per HTTP method, and everything derived from it.

``Allow`` (OPTIONS), the read and write scopes a bearer token needs, which methods drop an
unexpected small body first, and what is checked before ``100 Continue`` all come from
:data:`ROUTES`. Adding a method is one handler module and one row here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from dtnkit.transfer.server import copy, dav, get, put, sessions
from dtnkit.transfer.server.errors import HttpError
from dtnkit.transfer.server.exchange import Exchange

Handler = Callable[[Exchange], None]


@dataclass(frozen=True)
class HttpRoute:
    method: str
    handler: Handler
    #: the token scope the method needs ("read", "write"); None: the handler decides
    #: (COPY needs write to pull and read to push) or needs none (OPTIONS)
    scope: str | None = None
    #: drop a small unexpected request body before the handler runs (keep-alive stays usable)
    drops_body: bool = False
    #: checks to pass before inviting the body with ``100 Continue`` (after the scope check)
    before_body: Handler | None = None
    #: listed in ``Allow``
    advertised: bool = True


def _put(ex: Exchange) -> None:
    if sessions.is_session_request(ex):
        sessions.handle_put_range(ex)
    else:
        put.handle_put(ex)


def _put_before_body(ex: Exchange) -> None:
    if not sessions.is_session_request(ex):
        put.check(ex, ex.resolve())


def _delete(ex: Exchange) -> None:
    if sessions.is_session_request(ex):
        sessions.handle_delete(ex)
    else:
        dav.handle_delete(ex)


def _options(ex: Exchange) -> None:
    dav.handle_options(ex, ALLOW)


def _move(ex: Exchange) -> None:
    raise HttpError(501, "MOVE", "not implemented by dtnkit serve")


ROUTES: tuple[HttpRoute, ...] = (
    HttpRoute("OPTIONS", _options),
    HttpRoute("GET", get.handle_get, "read", drops_body=True),
    HttpRoute("HEAD", get.handle_head, "read", drops_body=True),
    HttpRoute("PUT", _put, "write", before_body=_put_before_body),
    HttpRoute("DELETE", _delete, "write", drops_body=True),
    HttpRoute("MKCOL", dav.handle_mkcol, "write"),
    HttpRoute("PROPFIND", dav.handle_propfind, "read"),
    HttpRoute("COPY", copy.handle_copy),
    HttpRoute("POST", sessions.handle_post),
    HttpRoute("MOVE", _move, advertised=False),
)

BY_METHOD: dict[str, HttpRoute] = {route.method: route for route in ROUTES}
ALLOW = ", ".join(route.method for route in ROUTES if route.advertised)
READ_METHODS = frozenset(route.method for route in ROUTES if route.scope == "read")
WRITE_METHODS = frozenset(route.method for route in ROUTES if route.scope == "write")


def scope(method: str) -> str | None:
    """The scope a token needs for *method* by default (None: none, or the handler decides)."""
    route = BY_METHOD.get(method)
    return route.scope if route is not None else None


def before_continue(ex: Exchange) -> None:
    """What a request with ``Expect: 100-continue`` must pass before its body is invited."""
    ex.authorize()
    route = BY_METHOD.get(ex.method)
    if route is not None and route.before_body is not None:
        route.before_body(ex)
