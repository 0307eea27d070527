"""How do the usual clients and servers move the same file on loopback, against dtnkit cp?

The --size file (--dir, tmpfs) from XRootD 5.5.3 (plain HTTP and root://, ``xrootd.chksum
adler32``, the file owned by XRootD's user so that it stores the checksum) and from this tree's
``dtnkit serve``: curl, curl + xrdadler32, xrdcp, xrdcp + xrdadler32, ``xrdcp --cksum
adler32:source``, ``gfal-copy -K adler32``, ``rclone copyto`` (an on-the-fly webdav remote)
and ``dtnkit cp`` (the CLI, ``--json``) at each --streams; wall time of the commands as run
from a shell (process start-up included), interleaved, best of --rounds.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import os
import pwd
import subprocess
import sys
import time

from bench.lib import Bench, Case
from bench.lib import loopback as lb
from bench.lib.procs import fmt_size
from dtnkit.transfer import checksum as cks


def options(p: argparse.ArgumentParser) -> None:
    lb.options(p)


def quick(args: argparse.Namespace) -> None:
    args.size, args.streams = 256, [1]


def run_cmds(cmds: list[list[str]], env: dict[str, str]) -> tuple[float, str]:
    start = time.perf_counter()
    outs = []
    for c in cmds:
        r = subprocess.run(c, capture_output=True, text=True, env=env, timeout=600, check=False)
        if r.returncode != 0:
            raise RuntimeError(f"{c[0]} exit {r.returncode}: {r.stderr.strip()[-300:]}")
        outs.append(r.stdout + r.stderr)
    return time.perf_counter() - start, "\n".join(outs)


def run(b: Bench) -> None:
    a = b.args
    size = a.size * lb.MiB
    with lb.served_file(b, size, ["adler32"], where=a.dir) as f:
        name, src, dst = f.src.name, f.src, f.out / f"peer-{f.src.name}"
        expected = cks.file_checksum(src, "adler32").hex()
        # owned by the user XRootD runs as, so that it can store the adler32 it computes in
        # an extended attribute (XrdCks) and answer later requests from it
        nobody = pwd.getpwnam("nobody")
        os.chown(src, nobody.pw_uid, nobody.pw_gid)
        env = dict(os.environ, GFAL_PYTHONBIN="/usr/bin/python3", RCLONE_CONFIG="/dev/null")
        dtnkit = [sys.executable, "-m", "dtnkit"]
        with lb.xrootd_server(b, f.root, f.work) as (xhttp, xroot):
            for _ in range(2):  # XRootD computes (and stores) the adler32 on the first request
                subprocess.run(
                    ["curl", "-sSI", "-H", "Want-Digest: adler32", xhttp + name],
                    capture_output=True,
                    timeout=120,
                    check=False,
                )
            xhost = xroot.split("//")[1].rstrip("/")
            peers: list[tuple[str, str, list[list[str]]]] = [
                (
                    "XRootD source adler32 only (HEAD Want-Digest)",
                    "- (the server's checksum)",
                    [["curl", "-sSfI", "-o", str(dst), "-H", "Want-Digest: adler32", xhttp + name]],
                ),
                ("curl (XrdHttp)", "nothing", [["curl", "-sSf", "-o", str(dst), xhttp + name]]),
                ("curl (dtnkit serve)", "nothing", [["curl", "-sSf", "-o", str(dst), f.file_url]]),
                (
                    "curl + xrdadler32",
                    "source adler32 (HEAD), GET, adler32 of the copy",
                    [
                        ["curl", "-sSfI", "-H", "Want-Digest: adler32", xhttp + name],
                        ["curl", "-sSf", "-o", str(dst), xhttp + name],
                        ["xrdadler32", str(dst)],
                    ],
                ),
                ("xrdcp (root://)", "nothing", [["xrdcp", "-f", "-s", xroot + name, str(dst)]]),
                (
                    "xrdcp + xrdadler32",
                    "source adler32 (xrdfs query), copy, adler32 of the copy",
                    [
                        ["xrdfs", xhost, "query", "checksum", "/" + name],
                        ["xrdcp", "-f", "-s", xroot + name, str(dst)],
                        ["xrdadler32", str(dst)],
                    ],
                ),
                (
                    "xrdcp --cksum adler32:source",
                    "xrdcp's end-to-end check",
                    [["xrdcp", "-f", "-s", "--cksum", "adler32:source", xroot + name, str(dst)]],
                ),
                (
                    "gfal-copy -K adler32 (XrdHttp)",
                    "source (Want-Digest) vs the copy's",
                    [["gfal-copy", "-f", "-K", "adler32", xhttp + name, f"file://{dst}"]],
                ),
                (
                    "rclone copyto (webdav, XrdHttp)",
                    "size only (no hash over webdav)",
                    [
                        [
                            "rclone",
                            "copyto",
                            "-q",
                            f":webdav,url='{xhttp}',vendor=other:{name}",
                            str(dst),
                        ]
                    ],
                ),
                (
                    "rclone copyto (webdav, dtnkit serve)",
                    "size only",
                    [
                        [
                            "rclone",
                            "copyto",
                            "-q",
                            f":webdav,url='{f.url}',vendor=other:{name}",
                            str(dst),
                        ]
                    ],
                ),
            ]
            cp = [*dtnkit, "cp", "--checksum", "adler32", "--retries", "0", "--json"]
            for s in a.streams:
                for mode in ("none", "block"):
                    peers.append(
                        (
                            f"dtnkit cp {s} str --verify {mode} (XrdHttp)",
                            "nothing" if mode == "none" else "block adler32, in flight",
                            [[*cp, "--streams", str(s), "--verify", mode, xhttp + name, str(dst)]],
                        )
                    )
            for s in a.streams:
                peers.append(
                    (
                        f"dtnkit cp {s} str --verify block (dtnkit serve)",
                        "block adler32, in flight",
                        [[*cp, "--streams", str(s), "--verify", "block", f.file_url, str(dst)]],
                    )
                )
            notes: dict[str, str] = {}

            def one(label: str, cmds: list[list[str]]) -> float:
                try:
                    t, text = run_cmds(cmds, env)
                    ok = label.startswith("XRootD source") or dst.stat().st_size == size
                    if "xrdadler32" in label:
                        ok = ok and text.count(expected) >= 2
                    if not ok:
                        raise RuntimeError("WRONG RESULT")
                    if "--json" in cmds[-1]:
                        notes[label] = f"{json.loads(text.strip().splitlines()[-1])['seconds']:.2f}"
                    return t
                finally:
                    with contextlib.suppress(OSError):
                        dst.unlink()

            got = b.rounds_of(
                {label: functools.partial(one, label, cmds) for label, _w, cmds in peers},
                label="peers",
                keep_going=True,
                errors=(RuntimeError, OSError, ValueError, subprocess.SubprocessError),
            )
    base = min(got.get("curl (XrdHttp)") or [float("nan")])
    rows = []
    for label, what, _cmds in peers:
        t = min(got.get(label) or [float("inf")])
        moved = t != float("inf") and not label.startswith("XRootD source")
        note = notes.get(label, "") or (got.failures.get(label, [""])[0][:60])
        rows.append(
            [
                label,
                what,
                f"{t:.2f}" if t != float("inf") else "-",
                lb.mb_s(size, t) if moved else "-",
                f"{t / base:.2f}" if moved else "-",
                note,
            ]
        )
    b.table(
        ["client", "verifies", "seconds", "MB/s", "x curl", "note (dtnkit: --json seconds)"],
        rows,
        title=f"Peers: the same {fmt_size(size)} file ({a.dir}) from XRootD 5.5.3 "
        f"(plain HTTP and root://) and from dtnkit serve; wall time of the "
        f"commands, best of {b.rounds}",
    )


CASE = Case(
    run=run,
    options=options,
    quick=quick,
    rounds=3,
    tools=("curl", "xrootd", "xrdcp", "xrdfs", "xrdadler32", "gfal-copy", "rclone"),
    quick_help="256 MiB, one stream, one run each",
)
