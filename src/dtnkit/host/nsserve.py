"""What runs inside a network namespace on the Host's behalf: its helper's loop, the batch
read of the namespace's files and the sysctl scope probe's writes.

A process sees ``/proc/sys/net``, ``/sys/class/net`` and its netlink sockets for its own
network namespace, so these run there: in a fork of the dtnkit process that entered the
namespace (:mod:`dtnkit.host.nsfork`, which calls :func:`serve` or :func:`probe_stdin`), or,
when a fork cannot be used, in a new Python started inside it::

    ip netns exec NS python -I -S .../dtnkit/host/nsserve.py serve
    ip netns exec NS python -I -S .../dtnkit/host/nsserve.py batch JSON
    unshare --net -- python -I -S .../dtnkit/host/nsserve.py probe   (JSON on stdin)

(``-I -S``: no site, no environment; see :func:`command`).  The helper's requests and replies
are length-prefixed marshal documents on stdin and stdout, and everything here imports only
the standard library and :mod:`dtnkit.host.nlsocket`, the few modules a Python started in the
namespace needs (children run through ``os.posix_spawnp``, without the subprocess module).
The helper ends when its stdin closes.
"""

from __future__ import annotations

import os
import sys

if __name__ == "__main__" and not __package__:  # run by path (-I: sys.path lacks dtnkit)
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

import contextlib  # (after the path, for a run by path)
import json
import marshal
import select
import time
from collections.abc import Sequence
from typing import Any, BinaryIO

from dtnkit.host import nlsocket
from dtnkit.host.parsers.netlink import NETLINK_GENERIC, NETLINK_ROUTE

# ---- the batch read ---------------------------------------------------------------------


def _read_into(out: dict[str, Any], path: str) -> None:
    """One file's text (None: unreadable) and whether it is writable, into a reply."""
    try:
        with open(path, "rb") as fh:
            out["files"][path] = fh.read().decode(errors="replace")
    except OSError:
        out["files"][path] = None
    if os.access(path, os.W_OK):
        out["writable"].append(path)


def batch(
    dirs: Sequence[str],
    extra: Sequence[str],
    dumps: Sequence[bytes] = (),
    names: Sequence[str] | None = None,
) -> dict[str, Any]:
    """Every file of ``dirs`` and of each ``/sys/class/net/DEV`` with their listings, the
    ``extra`` paths under each device (whether they exist), and the replies to the rtnetlink
    ``dumps``; ``names``: when given, only files of these names are read (the rest on
    request: :func:`read_files`)."""
    out: dict[str, Any] = {"dirs": {}, "files": {}, "exists": {}, "writable": []}
    out["rtnl"] = nlsocket.exchange(NETLINK_ROUTE, dumps, 5.0) if dumps else None
    wanted = None if names is None else set(names)

    def walk(d: str) -> None:
        try:
            listed = sorted(os.listdir(d))
        except OSError:
            return
        out["dirs"][d] = listed
        for n in listed:
            path = d + "/" + n
            if (wanted is None or n in wanted) and os.path.isfile(path):
                _read_into(out, path)

    for d in dirs:
        walk(d)
    for dev in out["dirs"].get("/sys/class/net", []):
        walk("/sys/class/net/" + dev)
        for name in extra:
            path = "/sys/class/net/" + dev + "/" + name
            out["exists"][path] = os.path.exists(path)
            if out["exists"][path] and os.path.isfile(path):
                _read_into(out, path)
    return out


def read_files(paths: Sequence[str]) -> dict[str, Any]:
    """The files of ``paths`` (a batch's ``files`` and ``writable``, nothing listed)."""
    out: dict[str, Any] = {"files": {}, "writable": []}
    for path in paths:
        _read_into(out, path)
    return out


# ---- commands ---------------------------------------------------------------------------


def run_many(
    reqs: Sequence[tuple[Sequence[str], str | None]], timeout: float
) -> list[tuple[int, str, str]]:
    """Every ``(argv, stdin)`` at once, as children of this process; ``(rc, out, err)`` in
    order (127: not found, 124: still running at the deadline, then killed)."""
    env = dict(os.environ, LC_ALL="C")
    procs: list[list[Any]] = []
    fds: dict[int, list[bytes]] = {}
    for argv, stdin in reqs:
        (i_r, i_w), (o_r, o_w), (e_r, e_w) = os.pipe(), os.pipe(), os.pipe()
        try:  # pipes are close-on-exec: the child keeps only its three dup2 copies
            pid = os.posix_spawnp(
                argv[0],
                list(argv),
                env,
                file_actions=[
                    (os.POSIX_SPAWN_DUP2, i_r, 0),
                    (os.POSIX_SPAWN_DUP2, o_w, 1),
                    (os.POSIX_SPAWN_DUP2, e_w, 2),
                ],
            )
        except OSError:
            for fd in (i_r, i_w, o_r, o_w, e_r, e_w):
                os.close(fd)
            procs.append([None, 127, [], [argv[0].encode() + b": command not found"]])
            continue
        for fd in (i_r, o_w, e_w):
            os.close(fd)
        if stdin:
            os.write(i_w, stdin.encode())
        os.close(i_w)
        proc: list[Any] = [pid, None, [], []]
        procs.append(proc)
        fds[o_r], fds[e_r] = proc[2], proc[3]
    deadline = time.monotonic() + timeout
    while fds:
        ready = select.select(list(fds), [], [], max(0, deadline - time.monotonic()))[0]
        if not ready:
            break
        for fd in ready:
            chunk = os.read(fd, 65536)
            if chunk:
                fds[fd].append(chunk)
            else:
                os.close(fd)
                del fds[fd]
    for fd in fds:
        os.close(fd)
    out: list[tuple[int, str, str]] = []
    for pid, rc, stdout, stderr in procs:
        if pid is not None and fds:
            with contextlib.suppress(OSError):
                os.kill(pid, 9)  # still running at the deadline
        if pid is not None:
            status = os.waitpid(pid, 0)[1]
            late = bool(fds) and any(stdout is v or stderr is v for v in fds.values())
            rc = 124 if late else os.waitstatus_to_exitcode(status)
        if rc == 124:
            out.append((124, "", f"timed out after {timeout:.0f} s"))
        else:
            out.append(
                (
                    rc,
                    b"".join(stdout).decode(errors="replace"),
                    b"".join(stderr).decode(errors="replace"),
                )
            )
    return out


# ---- the helper's loop ------------------------------------------------------------------


def answer(req: dict[str, Any]) -> dict[str, Any]:
    """The reply to one request of the Host's (see :class:`dtnkit.host.nshelper.NsHelper`)."""
    if "batch" in req:
        return {"rc": 0, "batch": batch(*req["batch"]), "out": "", "err": ""}
    if "read" in req:
        return {"read": read_files(req["read"])}
    if "ethtool" in req:  # one device's ethtool reads (see dtnkit.host.kernel.KernelView)
        dev, requests = req["ethtool"]
        return {
            "nl": nlsocket.exchange(NETLINK_GENERIC, requests, req["timeout"]),
            "drvinfo": nlsocket.ethtool_ioctl(dev, req["drv"]),
        }
    if "many" in req:
        return {
            "many": [list(r) for r in run_many([(a, None) for a in req["many"]], req["timeout"])]
        }
    rc, out, err = run_many([(req["argv"], req["stdin"])], req["timeout"])[0]
    return {"rc": rc, "out": out, "err": err}


def serve(stdin: BinaryIO, stdout: BinaryIO) -> None:
    """Answer length-prefixed marshal requests until ``stdin`` closes."""
    while True:
        head = stdin.read(4)
        if len(head) < 4:
            return
        data = marshal.dumps(answer(marshal.loads(stdin.read(int.from_bytes(head, "big")))))
        stdout.write(len(data).to_bytes(4, "big") + data)
        stdout.flush()


# ---- the sysctl scope probe -------------------------------------------------------------


def probe(
    paths: Sequence[str], inodes: Sequence[int | None], cands: Sequence[Sequence[str]]
) -> str:
    """In a new network namespace (see :mod:`dtnkit.host.sysctl_scope`): ``P INODE MODE
    PATH`` for every path that exists here; then each path with candidates and a file of its
    own (not the host's inode) is written: ``W i j READBACK`` after the first write that
    worked, ``E i j`` for a refused one (``j`` from 1).  The readback is the whole file, as
    ``cat`` gives it."""

    def stat(path: str) -> os.stat_result | None:
        try:
            return os.stat(path)
        except OSError:
            return None

    out = []
    for path in paths:
        st = stat(path)
        if st is not None:
            out.append(f"P {st.st_ino} {st.st_mode & 0o7777:o} {path}")
    for i, path in enumerate(paths):
        st = stat(path) if cands[i] else None
        if st is None or st.st_ino == inodes[i]:
            continue  # absent here, or the host's own file: never written
        for j, cand in enumerate(cands[i], start=1):
            try:
                fd = os.open(path, os.O_WRONLY | os.O_TRUNC)
                try:
                    os.write(fd, cand.encode())
                finally:
                    os.close(fd)
            except OSError:
                out.append(f"E {i} {j}")
                continue
            try:
                with open(path, "rb") as fh:
                    back = fh.read().decode(errors="replace").rstrip("\n")
            except OSError:
                back = ""
            out.append(f"W {i} {j} {back}")
            break
    return "\n".join(out) + "\n"


def probe_stdin(stdin: BinaryIO, stdout: BinaryIO) -> None:
    """:func:`probe` of the JSON document ``[paths, inodes, candidates]`` on ``stdin``."""
    paths, inodes, cands = json.loads(stdin.read())
    stdout.write(probe(paths, inodes, cands).encode())
    stdout.flush()


# ---- as a program of its own ------------------------------------------------------------


def command(*args: str) -> list[str]:
    """The argv that runs this module's ``args`` in a new Python (``-I -S``: isolated from
    the caller's environment, without site's start-up)."""
    return [sys.executable, "-I", "-S", os.path.abspath(__file__), *args]


def main(argv: Sequence[str]) -> int:
    if argv[:1] == ["serve"]:
        serve(sys.stdin.buffer, sys.stdout.buffer)
    elif argv[:1] == ["batch"] and len(argv) == 2:
        json.dump(batch(*json.loads(argv[1])), sys.stdout)
    elif argv[:1] == ["probe"]:
        probe_stdin(sys.stdin.buffer, sys.stdout.buffer)
    else:
        print("usage: nsserve.py serve | batch JSON | probe", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
