"""Round trips before the first byte: one verified ``dtnkit cp`` stream of two trees (a
baseline tree, e.g. before the first-request work, and this one) against unverified curl, on
a ``dtnkit lab`` path, timed *inside* each tool (cp's JSON ``seconds``, curl's
``time_total``), so that process start-up and the machine's load on the interpreter weigh
less than the requests each tool sends.

Both trees' clients fetch from the same ``dtnkit serve`` (this tree's, TLS, in the dst
namespace, its adler32 cached first); clients run in the src namespace; every round runs
each client once per size, the order rotated every round.  The table gives medians and the
ratio of each to curl's time and of this tree to the baseline.

    sudo .venv/bin/python bench/bench_first_request.py --before /path/to/old/tree
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # for tests.support

from tests.support.xrootd import make_pki

from benchlib import log, make_file, out, stop, table
from dtnkit.lab import path as lab

REPO = Path(__file__).resolve().parent.parent
MiB = 2**20


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--before", required=True, help="a baseline tree (its src/ is used)")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--sizes", default="4,64", help="MiB, comma-separated")
    ap.add_argument("--rtt", type=float, default=50.0, help="ms")
    ap.add_argument("--prefix", default="bfr", help="lab name prefix (namespaces dkl-PREFIX*)")
    args = ap.parse_args()
    before = Path(args.before).resolve() / "src"
    work = Path(tempfile.mkdtemp(prefix=f"dtnkit-{args.prefix}-", dir="/dev/shm"))
    root = work / "root"
    root.mkdir()
    sizes = [int(s) for s in args.sizes.split(",") if s]
    for s in sizes:
        make_file(root / f"f{s}", s * MiB)
    (work / "tokens").write_text("tok read\n")
    (work / "tokens").chmod(0o600)
    times: dict[str, list[float]] = {}
    with lab.path(f"{args.prefix}0", state_root=work / "lab", rtt_ms=args.rtt,
                  rate_bps=10**9) as p:
        name = p.hostname(p.dst)
        pki = make_pki(work / "pki", (name, p.dst.address))
        server = p.dst.popen([sys.executable, "-m", "dtnkit", "serve", "--root", str(root),
                              "--host", "0.0.0.0", "--port", "0", "--cert", str(pki.cert),
                              "--key", str(pki.key), "--tokens", str(work / "tokens"),
                              "--quiet"], stderr=subprocess.DEVNULL)
        try:
            assert server.stdout is not None
            m = re.search(r":(\d+)", server.stdout.readline())
            assert m, "serve did not start"
            base = f"https://{name}:{m.group(1)}/"
            for s in sizes:  # the digests cached, as on a server that keeps them
                p.src.run(["curl", "-sS", "-I", "--cacert", str(pki.ca_file), "-H",
                           "Want-Digest: adler32", "-H", "Authorization: Bearer tok",
                           f"{base}f{s}"], check=False)

            def cp(tree: Path | None, s: int) -> float:
                env = ["env", f"PYTHONPATH={tree}"] if tree is not None else []
                res = p.src.run([*env, sys.executable, "-m", "dtnkit", "cp", "--streams", "1",
                                 "--checksum", "adler32", "--ca-file", str(pki.ca_file),
                                 "--token", "tok", "-f", "--format", "json", f"{base}f{s}",
                                 str(work / "got")], check=False)
                if res.returncode != 0:
                    raise RuntimeError(res.stderr.strip()[-300:])
                return float(json.loads(res.stdout)["seconds"])

            def curl(s: int) -> float:
                res = p.src.run(["curl", "-sS", "-f", "--cacert", str(pki.ca_file), "-H",
                                 "Authorization: Bearer tok", "-o", str(work / "got"), "-w",
                                 "%{time_total}", f"{base}f{s}"], check=False)
                if res.returncode != 0:
                    raise RuntimeError(res.stderr.strip()[-300:])
                return float(res.stdout)

            for k in range(args.rounds):
                for s in sizes:
                    runs: list[tuple[str, Callable[[], float]]] = [
                        ("curl", functools.partial(curl, s)),
                        ("cp before", functools.partial(cp, before, s)),
                        ("cp after", functools.partial(cp, None, s))]
                    for label, run in runs[k % 3:] + runs[:k % 3]:
                        t = run()
                        times.setdefault(f"{label} {s} MiB", []).append(t)
                        log(f"round {k + 1} {label} {s} MiB: {t:.3f} s")
        finally:
            stop(server)
    shutil.rmtree(work, ignore_errors=True)
    out(f"`bench/bench_first_request.py --before {args.before} --rounds {args.rounds}`, "
        f"{args.rtt:g} ms lab path, untuned ends, TLS, one stream, adler32; seconds inside "
        f"each tool; load average at the end {os.getloadavg()[0]:.1f}")
    out()
    rows = []
    for s in sizes:
        med = {lbl: statistics.median(times[f"{lbl} {s} MiB"])
               for lbl in ("curl", "cp before", "cp after")}
        rows.append([f"{s} MiB", f"{med['curl']:.3f}", f"{med['cp before']:.3f}",
                     f"{med['cp after']:.3f}", f"{med['cp before'] / med['curl']:.2f}",
                     f"{med['cp after'] / med['curl']:.2f}",
                     f"{med['cp after'] / med['cp before']:.2f}"])
    table(["size", "curl s", "cp before s", "cp after s", "before / curl", "after / curl",
           "after / before"], rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
