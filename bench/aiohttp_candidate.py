#!/usr/bin/env python3
"""A minimal aiohttp server doing what bench_serve_stack.py measures: the other candidate.

Not dtnkit (not imported by it, not a dependency): GET of a whole file with
``web.FileResponse`` (sendfile), PUT into a part file with adler32 hashed while receiving,
fsync and rename, answered with ``Digest``; a bearer token.  Same command line as the parts
of ``dtnkit serve`` the benchmark uses (``--root --port --tokens --quiet``).
"""

from __future__ import annotations

import argparse
import base64
import os
import zlib
from pathlib import Path

from aiohttp import web  # type: ignore[import-not-found,unused-ignore]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", type=Path, required=True)
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--tokens", type=Path, required=True)
    ap.add_argument("--quiet", action="store_true")
    args = ap.parse_args()
    token = args.tokens.read_text().split()[0]
    root: Path = Path(args.root).resolve()

    def target(request: web.Request) -> Path:
        if request.headers.get("Authorization") != f"Bearer {token}":
            raise web.HTTPUnauthorized()
        path = (root / str(request.match_info["name"])).resolve()
        if path.parent != root:
            raise web.HTTPForbidden()
        return path

    async def get(request: web.Request) -> web.StreamResponse:
        return web.FileResponse(target(request))

    async def put(request: web.Request) -> web.Response:
        path = target(request)
        part = path.with_name(f".{path.name}.part")
        value = 1
        with part.open("wb") as f:
            async for chunk in request.content.iter_chunked(2**20):
                value = zlib.adler32(chunk, value)
                f.write(chunk)
            f.flush()
            os.fsync(f.fileno())
        os.replace(part, path)
        digest = base64.b64encode(value.to_bytes(4, "big")).decode()
        return web.Response(status=201, headers={"Digest": f"adler32={digest}"})

    app = web.Application(client_max_size=2**40)
    app.add_routes([web.get("/{name}", get), web.put("/{name}", put)])
    print(f"aiohttp candidate: listening on http://127.0.0.1:{args.port}/", flush=True)
    web.run_app(app, host="127.0.0.1", port=args.port, print=None, access_log=None)


if __name__ == "__main__":
    main()
