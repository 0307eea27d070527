"""``dtnkit serve``: the server half of the HTTP data mover.

One directory tree over HTTP/1.1 (optionally TLS): GET/HEAD with a single byte range, PUT
(temporary name, fsync, checksum check, rename), DELETE, MKCOL, PROPFIND (depth 0 and 1),
multi-stream upload sessions (POST), HTTP third-party COPY, ``Want-Digest`` /
``Want-Repr-Digest`` answered from a per-file checksum cache, and bearer tokens with
read/write scopes.

Layout: :mod:`.routes` (the route table), one handler module per method family (:mod:`.get`,
:mod:`.put`, :mod:`.dav`, :mod:`.sessions`, :mod:`.copy`) written against
:class:`.exchange.Exchange`, and :mod:`.adapter`, the only module that knows the HTTP stack.

Use :func:`start_server` in-process (tests, the client's own tests) or the ``serve`` command.
"""

from dtnkit.transfer.server.adapter import ServerHandle, start_server
from dtnkit.transfer.server.config import Counters, ServerConfig, tls_context

__all__ = ["Counters", "ServerConfig", "ServerHandle", "start_server", "tls_context"]
