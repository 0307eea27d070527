"""`third_party_copy` (what `dtnkit cp --tpc` calls): the clean-up of a destination a failed
copy left behind, over real sockets against a small peer that plays an XRootD-like active
server (201 with a ``failure:`` final line, a partial file left)."""

from __future__ import annotations

import threading
import zlib
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from dtnkit.transfer.client.tpc import ThirdPartySummary, TpcError, third_party_copy

DATA = b"partial"


class _Active(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format: str, *args: object) -> None:
        pass

    def _answer(
        self, status: int, body: bytes = b"", headers: dict[str, str] | None = None
    ) -> None:
        self.send_response(status)
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def do_HEAD(self) -> None:
        self.server.seen.append("HEAD")
        if not self.server.exists:
            self._answer(404)
            return
        self._answer(
            200,
            headers={
                "Content-Length": str(len(DATA)),
                "Digest": f"adler32={zlib.adler32(DATA):08x}",
            },
        )

    def do_COPY(self) -> None:
        self.server.seen.append("COPY")
        self.server.exists = True  # what a failed pull leaves behind
        self._answer(201, f"{self.server.final}\n".encode())

    def do_DELETE(self) -> None:
        self.server.seen.append("DELETE")
        self.server.exists = False
        self._answer(204)


class _Server(ThreadingHTTPServer):
    exists = False
    final = "failure: boom"
    seen: list[str]


@pytest.fixture
def active() -> Iterator[_Server]:
    server = _Server(("127.0.0.1", 0), _Active)
    server.seen = []
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


def run(active: _Server, mode: str = "pull") -> ThirdPartySummary:
    url = f"http://127.0.0.1:{active.server_address[1]}/y.bin"
    return third_party_copy(
        mode,
        "http://127.0.0.1:9/x.bin",
        url,
        token=None,
        remote_token=None,
        streams=1,
        checksum="adler32",
        timeout=5,
        ca_file=None,
        insecure=False,
    )


def test_a_failed_copy_removes_what_it_left(active: _Server) -> None:
    with pytest.raises(TpcError) as exc:
        run(active)
    assert exc.value.why == "boom; removed the partial destination the active server left"
    assert active.seen == ["HEAD", "COPY", "DELETE"] and not active.exists


def test_a_failed_copy_keeps_a_destination_that_was_there(active: _Server) -> None:
    active.exists = True
    with pytest.raises(TpcError) as exc:
        run(active)
    assert exc.value.why == "boom"
    assert active.seen == ["HEAD", "COPY"] and active.exists


def test_a_copy_reports_the_destination_digest(active: _Server) -> None:
    active.final = "success: Created"
    done = run(active)
    doc = done.as_dict()
    assert doc["digest"] == f"{zlib.adler32(DATA):08x}" and doc["bytes"] == len(DATA)
    assert doc["final"] == "success: Created" and doc["mode"] == "pull"
    assert active.seen == ["HEAD", "COPY", "HEAD"]


def test_needs_two_urls() -> None:
    from dtnkit.errors import BadInput

    with pytest.raises(BadInput, match="--tpc"):
        third_party_copy(
            "pull",
            "/local",
            "http://127.0.0.1:9/x",
            token=None,
            remote_token=None,
            streams=1,
            checksum="adler32",
            timeout=1,
            ca_file=None,
            insecure=False,
        )
