"""The README's serve/cp examples run as written, tokens included: each line of the mover's
console block is run in order as a real ``dtnkit`` process against real ``dtnkit serve``
processes (dtn1, dtn2, and a TLS one standing in for xrootd.example).  Only what cannot be
literal on a test machine is mapped: host names to 127.0.0.1 ports (port 0), /data,
/scratch, /etc/dtnkit/tokens and ca.pem to files of the test."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.support.xrootd import Pki

README = Path(__file__).parents[2] / "README.md"
DTNKIT = str(Path(sys.executable).parent / "dtnkit")
TOKEN = "readme-token-1f3a"


def mover_block() -> list[str]:
    """The command lines of the README's console block on the data mover (continuations
    joined, comment lines dropped)."""
    text = README.read_text()
    start = text.index("# The HTTP data mover")
    block = text[start:text.index("```", start)]
    lines: list[str] = []
    pending = ""
    for raw in block.splitlines():
        if raw.rstrip().endswith("\\"):
            pending += raw.rstrip()[:-1] + " "
            continue
        line = (pending + raw).strip()
        pending = ""
        if line and not line.startswith("#"):
            lines.append(line)
    return lines


class Site:
    """The hosts of the README on this machine."""

    def __init__(self, tmp: Path, pki: Pki) -> None:
        self.tmp, self.pki = tmp, pki
        self.scratch = tmp / "scratch"
        self.roots = {host: tmp / host for host in ("dtn1", "dtn2", "xrootd.example")}
        self.urls: dict[str, str] = {}  # host:port as written -> 127.0.0.1:port (or localhost)
        self.procs: list[subprocess.Popen[str]] = []

    def path(self, host: str, arg: str) -> str:
        """A README path on *host* as a path of the test."""
        arg = arg.replace("$TOKEN", TOKEN)
        if arg.startswith("/etc/dtnkit/"):
            return str(self.roots[host].parent / f"{host}-{arg.rsplit('/', 1)[1]}")
        if arg == "/data":
            return str(self.roots[host])
        if arg.startswith("/scratch"):
            return str(self.scratch) + arg[len("/scratch"):]
        if arg == "ca.pem":
            return str(self.pki.ca_file)
        for written, real in self.urls.items():
            arg = arg.replace(f"://{written}/", f"://{real}/")
        return arg

    def serve(self, argv: list[str]) -> None:
        """The README's serve line on each host (port 0; its URL read from its first line)."""
        assert argv[:2] == ["dtnkit", "serve"], argv
        argv = argv[:-1] if argv[-1] == "&" else argv
        for host, written, tls in (("dtn1", "dtn1:8080", False), ("dtn2", "dtn2:8080", False),
                                   ("xrootd.example", "xrootd.example:1094", True)):
            self.roots[host].mkdir(exist_ok=True)
            args = [self.path(host, a) for a in argv[2:]]
            extra = ["--cert", str(self.pki.cert), "--key", str(self.pki.key)] if tls else []
            # the README's hosts are this machine's loopback here: let COPY reach it
            extra += ["--tpc-allow", "127.0.0.1", "--tpc-allow", "localhost"]
            proc = subprocess.Popen([DTNKIT, "serve", *args, *extra, "--port", "0", "--quiet",
                                     "--format", "json"], stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, text=True)
            self.procs.append(proc)
            assert proc.stdout is not None
            first = proc.stdout.readline()
            assert first, f"{argv} did not start: {proc.communicate()[1]}"
            url = json.loads(first)["url"]
            port = url.rsplit(":", 1)[1].strip("/")
            # the test certificate names localhost and 127.0.0.1
            self.urls[written] = f"{'localhost' if tls else '127.0.0.1'}:{port}"

    def stop(self) -> None:
        for proc in self.procs:
            proc.terminate()
        for proc in self.procs:
            try:
                proc.communicate(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.communicate()


@pytest.fixture
def site(tmp_path: Path, pki: Pki) -> Iterator[Site]:
    s = Site(tmp_path, pki)
    try:
        yield s
    finally:
        s.stop()


@pytest.mark.skipif(shutil.which("openssl") is None,
                    reason="needs openssl for the TLS server's test certificate")
def test_the_readme_mover_examples_run_as_written(site: Site) -> None:
    lines = mover_block()
    assert sum(line.startswith("dtnkit cp") for line in lines) >= 5, lines
    (site.roots["xrootd.example"] / "store").mkdir(parents=True)
    site.scratch.mkdir()
    data = os.urandom(3 * 2**20 + 5)
    (site.scratch / "f").write_bytes(data)
    (site.scratch / "dir" / "sub").mkdir(parents=True)
    (site.scratch / "dir" / "a").write_bytes(data[:1000])
    (site.scratch / "dir" / "sub" / "b").write_bytes(data[1000:5000])
    env = {**os.environ, "TOKEN": TOKEN}
    env.pop("DTNKIT_TOKEN", None)
    env.pop("BEARER_TOKEN", None)
    for line in lines:
        argv = shlex.split(line, comments=True)
        if argv[0] == "echo":  # the tokens file of each server
            assert argv[2] == ">" and len(argv) == 4, line
            for host in ("dtn1", "dtn2", "xrootd.example"):
                Path(site.path(host, argv[3])).write_text(argv[1].replace("$TOKEN", TOKEN)
                                                          + "\n")
        elif argv[:2] == ["dtnkit", "serve"]:
            site.serve(argv)
        else:
            assert argv[:2] == ["dtnkit", "cp"], f"the test does not know how to run {line!r}"
            args = [site.path("dtn1", a) for a in argv[2:]]
            proc = subprocess.run([DTNKIT, "cp", *args], capture_output=True, text=True,
                                  env=env, timeout=120, check=False)
            assert proc.returncode == 0, f"{line}\n{args}\n{proc.stderr}"
            if "--format" in argv:
                assert json.loads(proc.stdout)["files"] == 2
    dtn1, dtn2 = site.roots["dtn1"], site.roots["dtn2"]
    assert (site.scratch / "g").read_bytes() == data
    assert (dtn1 / "f").read_bytes() == data
    assert (dtn1 / "dir" / "sub" / "b").read_bytes() == data[1000:5000]
    assert (site.roots["xrootd.example"] / "store" / "f").read_bytes() == data
    assert (dtn2 / "f").read_bytes() == data and (dtn2 / "g").read_bytes() == data
