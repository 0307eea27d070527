#!/usr/bin/env python3
"""A/B of the single-stream receive path on a lab WAN path, interleaved in one run (root only).

    .venv/bin/python bench/bench_wan_recv.py                      # 50 ms, 1 Gbit/s, 256 MiB
    .venv/bin/python bench/bench_wan_recv.py --rtt 10 --rate 2gbit --size 512 --rounds 5
    .venv/bin/python bench/bench_wan_recv.py --before 79605bc --name w11b --tpc

One lab path (``dtnkit lab``: ``--rtt`` ms, ``--rate``, untuned ends: the namespaces' buffers
are the host's), a ``dtnkit serve`` of this checkout in the dst namespace (anonymous read, the
digest cache warmed with a HEAD asking adler32), a ``--size`` MiB random file in /dev/shm, and
downloads run in the src namespace into /dev/shm:

curl            ``curl -o`` (unverified, one stream): the yardstick
before 1        ``dtnkit cp --streams 1`` of the ``--before`` tree (``git archive`` of that
                revision; default: the commit before the change), verified (adler32, block)
after 1         the same with this checkout: one GET, receiving apart from writing/hashing
after auto      this checkout's ``--streams auto --rate RATE``
before N        the ``--before`` tree with the N streams auto chose (what a user who picks
                ``--streams`` by hand gets today)

``--tpc`` adds HTTP third-party pulls: a ``dtnkit serve`` of each tree in the src namespace
pulls the file from the dst server (``cp --tpc pull``, one stream, verified), which receives
through the same download code.

Every round runs each configuration once, in an order rotated from round to round.  Each
ratio is of the same round (paired); the tables give the median ratio and its min-max, and
each configuration's median.  Times: the copy as the tool reports it (cp's JSON ``seconds``,
curl's ``time_total``, cp --tpc's summary), without interpreter start-up (about 0.3 s of
Python imports, which curl does not pay).  Every copy is compared with
the source (size, and bytes in the first round).  The path and the servers are removed at the
end, also on Ctrl-C.
"""

from __future__ import annotations

import argparse
import filecmp
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchlib import CpuWatch, stop
from dtnkit.environment import Environment
from dtnkit.lab import path as lab
from dtnkit.lab.path import LabHost
from dtnkit.units import parse_rate

REPO = Path(__file__).resolve().parent.parent
STATE = Environment.from_os().lab_state_root
MiB = 2**20
TOKEN = "w11-bench-rw"


def tree_env(src: Path) -> list[str]:
    return ["env", f"PYTHONPATH={src}", sys.executable, "-m", "dtnkit"]


def start_serve(host: LabHost, tree: Path, root: Path,
                tokens: Path) -> tuple[subprocess.Popen[str], int]:
    proc = host.popen([*tree_env(tree), "serve", "--root", str(root), "--host", host.address,
                       "--port", "0", "--anonymous-read", "--tokens", str(tokens)],
                      stderr=subprocess.STDOUT)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if "listening on" not in line:
        proc.kill()
        raise SystemExit(f"dtnkit serve did not start: {line}{proc.stdout.read()}")
    port = int(line.split("listening on ", 1)[1].split("/")[2].rsplit(":", 1)[1])
    return proc, port


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--name", default="wanrecv", help="lab path name")
    parser.add_argument("--rtt", type=float, default=50.0, help="ms")
    parser.add_argument("--rate", default="1gbit")
    parser.add_argument("--size", type=int, default=256, help="MiB")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--before", default="79605bc", help="git revision of the old tree")
    parser.add_argument("--tpc", action="store_true", help="add third-party pulls")
    args = parser.parse_args()
    if os.geteuid() != 0:
        sys.exit("bench_wan_recv.py needs root")
    rate = parse_rate(args.rate)
    work = Path(tempfile.mkdtemp(prefix=f"{args.name}-", dir="/dev/shm"))
    procs: list[subprocess.Popen[str]] = []
    try:
        before = work / "before"
        before.mkdir()
        archive = subprocess.run(["git", "-C", str(REPO), "archive", args.before, "src"],
                                 check=True, capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", str(before)], input=archive, check=True)
        trees = {"before": before / "src", "after": REPO / "src"}
        srv, dst = work / "srv", work / "dst"
        srv.mkdir()
        dst.mkdir()
        tokens = work / "tokens"
        tokens.write_text(f"{TOKEN} read,write\n")
        with open(srv / "f", "wb") as f:
            for _ in range(args.size):
                f.write(os.urandom(MiB))
        watch = CpuWatch(lambda: [p.pid for p in procs])
        with lab.path(args.name, state_root=STATE, rtt_ms=args.rtt, rate_bps=rate) as p:
            server, port = start_serve(p.dst, trees["after"], srv, tokens)
            procs.append(server)
            url = f"http://{p.dst.address}:{port}/f"
            p.src.run(["curl", "-sfI", "-H", "Want-Digest: adler32", url])
            active: dict[str, tuple[str, Path]] = {}
            if args.tpc:
                for tree in ("before", "after"):
                    root = work / f"active-{tree}"
                    root.mkdir()
                    proc, aport = start_serve(p.src, trees[tree], root, tokens)
                    procs.append(proc)
                    active[tree] = (f"http://{p.src.address}:{aport}/got", root / "got")

            def cp(tree: str, *extra: str) -> Callable[[Path], float]:
                def run(out: Path) -> float:
                    res = p.src.run([*tree_env(trees[tree]), "cp", url, str(out), "--json",
                                     "--retries", "0", *extra], timeout=600)
                    doc = json.loads(res.stdout)
                    run.doc = doc  # type: ignore[attr-defined]
                    return float(doc["seconds"])
                return run

            def curl(out: Path) -> float:
                res = p.src.run(["curl", "-sf", "-o", str(out), "-w", "%{time_total}", url],
                                timeout=600)
                return float(res.stdout)

            def tpc(tree: str) -> Callable[[Path], float]:
                target, landed = active[tree]

                def run(out: Path) -> float:
                    res = p.src.run([*tree_env(trees[tree]), "cp", "--tpc", "pull", url, target,
                                     "--token", TOKEN, "--json"], timeout=600)
                    doc = json.loads(res.stdout)
                    shutil.move(landed, out)
                    return float(doc["seconds"])
                return run

            auto = cp("after", "--streams", "auto", "--rate", args.rate)
            auto(dst / "probe")  # which N auto picks on this path
            chosen = int(auto.doc["streams"])  # type: ignore[attr-defined]
            reason = auto.doc["streams_auto"]["reason"]  # type: ignore[attr-defined]
            configs: dict[str, Callable[[Path], float]] = {
                "curl": curl, "before 1": cp("before", "--streams", "1"),
                "after 1": cp("after", "--streams", "1"),
                "after auto": auto, f"before {chosen}": cp("before", "--streams", str(chosen))}
            if args.tpc:
                configs["tpc before"] = tpc("before")
                configs["tpc after"] = tpc("after")
            times: dict[str, list[float]] = {k: [] for k in configs}
            names = list(configs)
            for rnd in range(args.rounds):
                order = names[rnd % len(names):] + names[:rnd % len(names)]
                for key in order:
                    out = dst / key.replace(" ", "-")
                    out.unlink(missing_ok=True)
                    t = configs[key](out)
                    if out.stat().st_size != args.size * MiB or (
                            rnd == 0 and not filecmp.cmp(out, srv / "f", shallow=False)):
                        raise SystemExit(f"{key}: the copy differs from the source")
                    out.unlink()
                    times[key].append(t)
                    print(f"round {rnd + 1} {key}: {t:.2f} s", file=sys.stderr, flush=True)
        print(f"## Single-stream receive path: {args.size} MiB over {args.rtt:g} ms / "
              f"{args.rate}, untuned ends, {args.rounds} rounds\n")
        print(f"`--streams auto`: {reason}\n")
        print("| configuration | median s | min-max s |")
        print("|---|---|---|")
        for key, ts in times.items():
            print(f"| {key} | {statistics.median(ts):.2f} | {min(ts):.2f}-{max(ts):.2f} |")
        pairs = [("after 1", "curl"), ("before 1", "curl"), ("after 1", "before 1"),
                 ("after auto", "before 1"), ("after auto", f"before {chosen}"),
                 ("after auto", "curl")]
        if args.tpc:
            pairs += [("tpc after", "tpc before"), ("tpc after", "curl")]
        print("\n| ratio (same round) | median | min-max |")
        print("|---|---|---|")
        for a, b in pairs:
            r = [x / y for x, y in zip(times[a], times[b], strict=True)]
            print(f"| {a} / {b} | {statistics.median(r):.2f} | {min(r):.2f}-{max(r):.2f} |")
        print(f"\n{watch.report()}")
        return 0
    finally:
        for proc in procs:
            stop(proc)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    start = time.monotonic()
    code = main()
    print(f"(took {time.monotonic() - start:.0f} s)", file=sys.stderr)
    sys.exit(code)
