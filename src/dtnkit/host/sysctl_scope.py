"""Which sysctls a network namespace has its own copy of, asked of the kernel itself.

A sysctl's name does not say whether it is per network namespace: on one kernel
``net.core.optmem_max`` is per namespace and ``net.core.rmem_max`` is the host's (shown
read-only inside other namespaces), ``net.core.netdev_max_backlog`` and
``net.ipv4.tcp_mem`` exist only in the initial namespace, and ``kernel.*`` / ``vm.*`` files
are the host's own files whatever namespace reads them.  So :class:`ScopeProbe` classifies
each key by what the kernel does, in a throw-away namespace (``unshare --net``: it has no
name and vanishes with the probe process, so nothing can be left behind):

1. absent in the new namespace                    -> host-global (initial namespace only)
2. the new namespace sees the host's own file      -> host-global (not namespaced at all:
   the same inode, with the host's file held open so the number cannot be reused)
3. outside ``/proc/sys/net``                       -> host-global (never written to find out)
4. read-only in the new namespace                  -> host-global (the host's value, shared)
5. writable: write a changed value there, read it back, then read the host's value:
   unchanged -> per namespace; changed -> host-global (and the host's value is put back at
   once); no changed value could be written -> host-global ("could not prove it").

Every doubt ends in "host-global", the side that is never written inside a namespace.  One
probe process serves a whole batch of keys and results are cached per key for the run, and
the probe runs only when a namespace is targeted.  It needs root (``unshare``); when it
cannot run, every key it was asked about is host-global with the reason.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from dtnkit.host.runner import Runner, SubprocessRunner

NET_PREFIX = "net."

# Runs inside the new namespace (python3 -I: stdlib only).  stdin: {"names": [...],
# "host_ino": {name: inode or null}}; stdout: {name: {...facts...}}.
_CHILD = r"""
import json, os, sys
req = json.load(sys.stdin)
def path(name):
    return "/proc/sys/" + name.replace(".", "/")
def read(p):
    with open(p) as fh:
        return fh.read()
def candidates(name, text):
    if name == "net.ipv4.tcp_congestion_control":
        avail = read("/proc/sys/net/ipv4/tcp_available_congestion_control").split()
        return [a for a in avail if a != text.strip()][:2]
    try:
        nums = [int(f) for f in text.split()]
    except ValueError:
        return []
    if not nums:
        return []
    out = []
    for last in ([nums[-1] - 1, nums[-1] + 1] if nums[-1] > 0 else [nums[-1] + 1]):
        out.append(" ".join(str(n) for n in nums[:-1] + [last]))
    return out
res = {}
for name in req["names"]:
    p = path(name)
    try:
        st = os.stat(p)
    except OSError:
        res[name] = {"present": False}
        continue
    fact = {"present": True, "same_file": st.st_ino == req["host_ino"].get(name),
            "writable": os.access(p, os.W_OK), "wrote": None, "errors": []}
    res[name] = fact
    if fact["same_file"] or not fact["writable"] or not name.startswith("net."):
        continue
    try:
        text = read(p)
    except OSError as exc:
        fact["errors"].append(str(exc.strerror))
        continue
    for cand in candidates(name, text):
        try:
            with open(p, "w") as fh:
                fh.write(cand)
            if read(p).split() == cand.split():
                fact["wrote"] = cand
                break
            fact["errors"].append("the value read back is not the one written")
        except OSError as exc:
            fact["errors"].append(str(exc.strerror))
    if fact["wrote"] is None and not fact["errors"]:
        fact["errors"].append("no other valid value is known for it")
json.dump(res, sys.stdout)
"""


@dataclass(frozen=True)
class SysctlScope:
    """The kernel's answer for one sysctl: per network namespace or global to the host."""

    name: str
    per_netns: bool
    why: str


def sysctl_file(name: str) -> str:
    return "/proc/sys/" + name.replace(".", "/")


class ScopeProbe:
    """Classify sysctls by probing a throw-away namespace; results cached per key."""

    def __init__(self, runner: Runner | None = None, proc_sys: Path = Path("/proc/sys")) -> None:
        self.runner = runner or SubprocessRunner(timeout=30.0)
        self.proc_sys = proc_sys
        self.cache: dict[str, SysctlScope] = {}
        self.probes = 0  # probe processes run (tests check the batching)

    def _host_path(self, name: str) -> Path:
        return self.proc_sys / name.replace(".", "/")

    def _host_value(self, name: str) -> str | None:
        try:
            return self._host_path(name).read_text()
        except OSError:
            return None

    def classify(self, names: Iterable[str]) -> dict[str, SysctlScope]:
        wanted = list(dict.fromkeys(names))
        todo = [n for n in wanted if n not in self.cache]
        if todo:
            self.cache.update(self._probe(todo))
        return {n: self.cache[n] for n in wanted}

    def _probe(self, names: list[str]) -> dict[str, SysctlScope]:
        fds: dict[str, int] = {}
        try:
            host_ino: dict[str, int | None] = {}
            for name in names:
                try:
                    fds[name] = os.open(self._host_path(name), os.O_RDONLY)
                    host_ino[name] = os.fstat(fds[name]).st_ino
                except OSError:
                    host_ino[name] = None
            before = {n: self._host_value(n) for n in names}
            self.probes += 1
            res = self.runner.run(["unshare", "--net", "--", sys.executable, "-I", "-c", _CHILD],
                                  stdin=json.dumps({"names": names, "host_ino": host_ino}))
            after = {n: self._host_value(n) for n in names}
        finally:
            for fd in fds.values():
                os.close(fd)
        try:
            facts = json.loads(res.stdout) if res.ok else None
        except json.JSONDecodeError:
            facts = None
        if not isinstance(facts, dict):
            why = ("could not probe a new namespace (" + res.message() + "); treated as "
                   "host-global")
            return {n: SysctlScope(n, False, why) for n in names}
        return {n: self._verdict(n, facts.get(n, {}), before[n], after[n], host_ino[n])
                for n in names}

    def _verdict(self, name: str, fact: dict[str, object], before: str | None,
                 after: str | None, host_ino: int | None) -> SysctlScope:
        def glob(why: str) -> SysctlScope:
            return SysctlScope(name, False, why)

        if not fact.get("present"):
            if host_ino is None:
                return glob("absent on this kernel")
            return glob("absent in a new network namespace: the kernel keeps it for the "
                        "initial namespace only")
        if fact.get("same_file"):
            return glob("a new network namespace sees the host's own file: not namespaced")
        if not name.startswith(NET_PREFIX):
            return glob("outside /proc/sys/net, the only sysctls a network namespace has its "
                        "own copy of")
        if not fact.get("writable"):
            return glob("read-only in a new network namespace: the host's value, shared")
        if before != after:
            if before is not None:
                with contextlib.suppress(OSError):
                    self._host_path(name).write_text(before)
            return glob("a write in a new network namespace changed the host's value "
                        "(put back): global")
        if fact.get("wrote") is None:
            errors = fact.get("errors") or []
            detail = "; ".join(str(e) for e in errors) if isinstance(errors, list) else ""
            return glob(f"could not prove it per-namespace ({detail or 'no write'}); treated "
                        "as host-global")
        return SysctlScope(name, True, "a write in a new network namespace left the host's "
                           "value unchanged: per-namespace")


# one probe per run (a CLI invocation is a run): the kernel's answers do not change in between
PROBE = ScopeProbe()
