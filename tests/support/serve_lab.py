"""A ``dtnkit serve`` on the src end of a real lab path, and ``dtnkit cp`` run on its dst end,
for the tests of several download streams on long paths (``--streams auto``)."""

from __future__ import annotations

import contextlib
import json
import re
import secrets
import subprocess
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest


@dataclass
class ServeLab:
    p: Any  # the lab path (dtnkit.lab.path)
    url: str
    log: Path  # the server's access log (its stderr)
    root: Path
    got: Path
    script: Path  # a wrapper of `dtnkit cp` the test gave (``cp(..., wrapped=True)``)

    def sysctl(self, key: str, value: str, *sides: str) -> None:
        """Set a sysctl in the namespaces of the given ends (both when none given)."""
        for side in sides or ("src", "dst"):
            res = getattr(self.p, side).run(["sysctl", "-qw", f"{key}={value}"], check=False)
            assert res.returncode == 0, res.stderr

    def cp(
        self, *args: str, name: str = "f", wrapped: bool = False
    ) -> tuple[dict[str, object], str, list[tuple[str, int]]]:
        """Run ``dtnkit cp`` (or the wrapper) on dst; its JSON, its stderr and the requests
        the server logged for it (method, bytes sent)."""
        before = len(self.log.read_text().splitlines())
        head = [sys.executable, str(self.script)] if wrapped else [sys.executable, "-m", "dtnkit"]
        # -v: --streams auto's reasons in full (by default one short line)
        verbose = ["-v"] if "auto" in args else []
        res = self.p.dst.run(
            [
                *head,
                "cp",
                self.url + name,
                str(self.got),
                "-f",
                "--block-size",
                "1M",
                "--format",
                "json",
                *verbose,
                *args,
            ],
            check=False,
        )
        assert res.returncode == 0, res.stderr
        assert self.got.read_bytes() == (self.root / name).read_bytes()
        # the server logs a request when it has answered it: the copy is over
        lines = self.log.read_text().splitlines()[before:]
        # Combined Log Format: "GET /f HTTP/1.1" 200 1048576 (%b is - for no body)
        seen = [
            (m.group(1), int(m.group(2).replace("-", "0")))
            for m in (re.search(rf'"(GET|HEAD) /{name} HTTP/1\.1" \d+ (\d+|-)', x) for x in lines)
            if m
        ]
        doc: dict[str, object] = json.loads(res.stdout)
        return doc, str(res.stderr), seen


@contextlib.contextmanager
def serve_lab(
    tmp: Path, name: str, *, rtt_ms: float, files: Mapping[str, int], wrapper: str
) -> Iterator[ServeLab]:
    """A lab path ``name`` (rtt_ms, 1 Gbit/s behind its 10 Gbit/s veths), ``files`` (name:
    bytes, random) served anonymously from src, ``wrapper`` the source of ``cp``'s wrapper."""
    from dtnkit.lab import path as lab

    state = tmp / "lab"
    mp = pytest.MonkeyPatch()
    mp.setenv("DTNKIT_LAB_STATE", str(state))
    root = tmp / "srv"
    root.mkdir()
    for fname, size in files.items():
        (root / fname).write_bytes(secrets.token_bytes(size))
    script = tmp / "wrapper.py"
    script.write_text(wrapper)
    log = tmp / "serve.log"
    try:
        with (
            lab.path(name, state_root=state, rtt_ms=rtt_ms, rate_bps=10**9) as p,
            open(log, "w") as errlog,
        ):
            server = p.src.popen(
                [
                    sys.executable,
                    "-m",
                    "dtnkit",
                    "serve",
                    "--root",
                    str(root),
                    "--host",
                    p.src.address,
                    "--port",
                    "0",
                    "--anonymous-read",
                ],
                stderr=errlog,
            )
            try:
                assert server.stdout is not None
                line = server.stdout.readline()
                assert "listening on" in line, line
                url = line.split("listening on ", 1)[1].split()[0]
                yield ServeLab(p, url, log, root, tmp / "got", script)
            finally:
                server.terminate()
                try:
                    server.wait(10)
                except subprocess.TimeoutExpired:
                    server.kill()
    finally:
        mp.undo()
