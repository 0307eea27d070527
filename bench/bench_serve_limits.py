"""What a read token can make ``dtnkit serve`` do: hashing and listing amplification.

Runs two trees side by side (``--baseline DIR``: an older checkout's ``src``, e.g. from
``git archive``; the current tree), each as its own ``dtnkit serve`` child process, with the
runs interleaved, and prints for each: server CPU seconds (``/proc/PID/stat``) and wall time
of N concurrent ``HEAD`` + ``Range`` + ``Want-Content-Digest`` requests over a file, and the
server's peak RSS growth (VmHWM) for N concurrent depth-1 PROPFINDs of a large directory.

    .venv/bin/python bench/bench_serve_limits.py --baseline /tmp/old/src --size 1GiB
"""

from __future__ import annotations

import argparse
import http.client
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchlib import CpuWatch, proc_cpu

HERE = Path(__file__).resolve().parents[1] / "src"


def peak_rss(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    return 0


@contextmanager
def server(src: Path, root: Path) -> Iterator[tuple[int, int]]:
    env = dict(os.environ, PYTHONPATH=str(src))
    # the memory of ten streamed listings at once: a tree with per-token listing slots
    # gets ten (its default, 2, would serve them in turn)
    more = (["--listing-slots", "10"] if "listing-slots" in (src / "dtnkit/cli/serve.py")
            .read_text() else [])
    proc = subprocess.Popen([sys.executable, "-m", "dtnkit.cli.main", "serve", "--root",
                             str(root), "--port", "0", "--anonymous-read", "--quiet", *more],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                            env=env)
    try:
        assert proc.stdout is not None
        found = re.search(r":([0-9]+)/", proc.stdout.readline())
        assert found, "the server did not start"
        yield proc.pid, int(found.group(1))
    finally:
        proc.terminate()
        proc.wait(10)


def at_once(port: int, n: int, method: str, path: str, headers: dict[str, str]) -> None:
    go = threading.Barrier(n)

    def one() -> None:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
        go.wait()
        conn.request(method, path, headers=headers)
        resp = conn.getresponse()
        resp.read()
        conn.close()

    threads = [threading.Thread(target=one) for _ in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--baseline", type=Path, required=True, help="an older tree's src/")
    parser.add_argument("--size", default="1GiB", help="file size (MiB or GiB)")
    parser.add_argument("--requests", type=int, default=20)
    parser.add_argument("--entries", type=int, default=50_000)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    number, unit = re.fullmatch(r"([0-9]+)(MiB|GiB)", args.size).groups()  # type: ignore[union-attr]
    size = int(number) * (2**20 if unit == "MiB" else 2**30)
    watch = CpuWatch()
    with tempfile.TemporaryDirectory(prefix="bench-limits-", dir="/dev/shm") as tmp:
        root = Path(tmp)
        with open(root / "big.bin", "wb") as f:
            block = os.urandom(2**20)
            for _ in range(size // 2**20):
                f.write(block)
        (root / "dir").mkdir()
        for i in range(args.entries):
            os.close(os.open(root / "dir" / f"entry-with-a-fairly-long-name-{i:07d}.dat",
                             os.O_CREAT | os.O_WRONLY))
        rows: dict[str, list[tuple[float, float, float]]] = {"baseline": [], "current": []}
        for _round in range(args.rounds):
            for label, src in (("baseline", args.baseline), ("current", HERE)):
                with server(src, root) as (pid, port):
                    at_once(port, 1, "PROPFIND", "/", {"Depth": "1"})  # warm up
                    cpu, t0 = proc_cpu(pid), time.monotonic()
                    at_once(port, args.requests, "HEAD", "/big.bin",
                            {"Range": f"bytes=0-{size - 1}",
                             "Want-Content-Digest": "sha-256=10"})
                    cpu, wall = proc_cpu(pid) - cpu, time.monotonic() - t0
                    base = peak_rss(pid)
                    at_once(port, 10, "PROPFIND", "/dir/", {"Depth": "1"})
                    rows[label].append((cpu, wall, (peak_rss(pid) - base) / 2**20))
        print(f"{args.requests} x HEAD Range 0-{args.size} Want-Content-Digest sha-256; "
              f"10 x PROPFIND depth 1 of {args.entries} entries; {args.rounds} rounds, "
              "interleaved, best round\n")
        print("| tree | digest HEADs: server CPU s | wall s | PROPFINDs: peak RSS growth MiB |")
        print("|---|---|---|---|")
        for label, got in rows.items():
            cpu, wall, rss = (min(r[i] for r in got) for i in range(3))
            print(f"| {label} | {cpu:.2f} | {wall:.2f} | {rss:.0f} |")
    print("\n" + watch.report())


if __name__ == "__main__":
    main()
