"""``dtnkit serve`` on 127.0.0.1 (a port the kernel picks): as a subprocess, for tests that drive
the mover from outside (its URL and root, stopped by its process group at the end), or in
this process (:func:`holding`)."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from dtnkit.transfer.server import ServerHandle, start_server


@contextlib.contextmanager
def serve_subprocess(tmp_path: Path, token: str) -> Iterator[tuple[str, Path]]:
    """Serve ``tmp_path/served`` (``token`` may read and write, anyone may read)."""
    root = tmp_path / "served"
    root.mkdir()
    tokens = tmp_path / "tokens"
    tokens.write_text(f"{token} read,write\n")
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
            str(tokens),
            "--anonymous-read",
            "--quiet",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        m = re.search(r"listening on (http://127\.0\.0\.1:[0-9]+/)", line)
        assert m, line + (proc.stderr.read() if proc.stderr and proc.poll() is not None else "")
        yield m.group(1), root
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()


@contextlib.contextmanager
def holding(root: Path, files: Mapping[str, bytes], **options: Any) -> Iterator[ServerHandle]:
    """An in-process ``dtnkit serve`` of *root* (made here, holding *files*: name -> bytes),
    anyone may read (*options*: more of :func:`start_server`'s); stopped at the end."""
    root.mkdir()
    for name, data in files.items():
        (root / name).write_bytes(data)
    with start_server(root, anonymous_read=True, quiet=True, **options) as handle:
        yield handle
