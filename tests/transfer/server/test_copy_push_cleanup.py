"""A failed COPY push removes the remote file only when the push created it (a ``201``),
never a file the remote had before.

The remote that refuses is a real ``dtnkit serve`` whose file-size limit (RLIMIT_FSIZE,
standing for a quota) is below the pushed file: it takes the body, fails writing it
(EFBIG) and answers 500, twice (the push retries once).  On main the push then sent DELETE
and the remote's existing file was gone.  A remote that answers the PUT ``201`` and then
offers no digest to verify against shows that what the push did create is still removed.
"""

from __future__ import annotations

import http.client
import os
import re
import resource
import secrets
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from dtnkit.transfer import tokens
from dtnkit.transfer.server import start_server

LOCAL = "push-local-ro"
REMOTE = "push-remote-rw"
LIMIT = 3 * 2**19  # the remote's largest file: 1.5 MiB
BIG = 2 * 2**20


@contextmanager
def limited_remote(tmp: Path) -> Iterator[tuple[int, Path, Path]]:
    """``dtnkit serve`` as a child whose files may not grow past LIMIT bytes: (port, root,
    its access log, complete once the block ends)."""
    root = tmp / "remote"
    root.mkdir()
    token_file = tmp / "remote-tokens"
    token_file.write_text(f"{REMOTE} read,write\n")
    log = tmp / "remote.log"

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (LIMIT, LIMIT))

    with open(log, "w") as err:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "dtnkit",
                "serve",
                "--root",
                str(root),
                "--host",
                "127.0.0.1",
                "--port",
                "0",
                "--tokens",
                str(token_file),
            ],
            stdout=subprocess.PIPE,
            stderr=err,
            text=True,
            preexec_fn=limit,
            start_new_session=True,
        )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        m = re.search(r"listening on http://127\.0\.0\.1:([0-9]+)/", line)
        assert m, (line, log.read_text())
        yield int(m.group(1)), root, log
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=60)  # drained: every request it answered is in its log


class Creating(ThreadingHTTPServer):
    """A remote that answers a PUT 201 (created), offers only an adler32 digest, and
    records the requests it gets."""

    daemon_threads = True

    def __init__(self) -> None:
        self.seen: list[str] = []
        super().__init__(("127.0.0.1", 0), _Handler)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: Creating

    def log_message(self, *args: Any) -> None:
        pass

    def _any(self) -> None:
        self.server.seen.append(f"{self.command} {self.path}")
        length = int(self.headers.get("Content-Length", "0"))
        if length:
            self.rfile.read(length)
        status = {"HEAD": 404 if "PUT" not in " ".join(self.server.seen) else 200, "PUT": 201}.get(
            self.command, 204
        )
        self.send_response(status)
        if self.command == "HEAD" and status == 200:
            self.send_header("Digest", "adler32=00000001")
        self.send_header("Content-Length", "0")
        self.end_headers()

    do_HEAD = do_PUT = do_DELETE = _any


def copy(port: int, path: str, destination: str, want: str = "adler32") -> str:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    try:
        conn.request(
            "COPY",
            path,
            headers={
                "Authorization": f"Bearer {LOCAL}",
                "Credential": "none",
                "Want-Digest": want,
                "Destination": destination,
                "TransferHeaderAuthorization": f"Bearer {REMOTE}",
            },
        )
        resp = conn.getresponse()
        assert resp.status == 202, resp.read()
        lines = [x for x in resp.read().decode().splitlines() if x.strip()]
        return lines[-1]
    finally:
        conn.close()


def test_a_failed_push_deletes_only_what_it_created(tmp_path: Path) -> None:
    kept = secrets.token_bytes(64 * 1024)
    local = tmp_path / "local"
    local.mkdir()
    (local / "big.bin").write_bytes(secrets.token_bytes(BIG))
    store = tokens.parse(f"{LOCAL} read\n")
    creating = Creating()
    thread = threading.Thread(
        target=creating.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
    )
    thread.start()
    try:
        with start_server(
            local, tokens=store, quiet=True, marker_interval=0.2, tpc_allow=["127.0.0.1"]
        ) as active:
            with limited_remote(tmp_path) as (port, remote_root, log):
                (remote_root / "keep.bin").write_bytes(kept)
                final = copy(active.port, "/big.bin", f"http://127.0.0.1:{port}/keep.bin")
            # the remote refused the PUT after its body: its file is as it was
            assert final.startswith("failure:") and "500" in final, final
            requests = re.findall(r'"([A-Z]+) /keep\.bin HTTP/1\.[01]" (\d+)', log.read_text())
            there = (remote_root / "keep.bin").is_file()
            assert there and (remote_root / "keep.bin").read_bytes() == kept, requests
            assert ("PUT", "500") in requests and not [r for r in requests if r[0] == "DELETE"], (
                requests
            )
            # a file this push created (201) and could not verify is removed
            final = copy(
                active.port,
                "/big.bin",
                f"http://127.0.0.1:{creating.server_address[1]}/new.bin",
                want="md5",
            )
            assert final.startswith("failure:") and "md5" in final, final
            assert creating.seen[-1] == "DELETE /new.bin", creating.seen
    finally:
        creating.shutdown()
        creating.server_close()
        thread.join(5)
