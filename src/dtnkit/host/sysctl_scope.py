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
4. read-only there (no write bit)                  -> host-global (the host's value, shared)
5. write a changed value there (the host's value +-1 in its last field, or another
   congestion control) and read it back, then read the host's value: unchanged -> per
   namespace; changed -> host-global (the host's value is put back at once); no changed
   value could be written -> host-global ("could not prove it").

Every doubt ends in "host-global", the side that is never written inside a namespace.  One
probe process (``python -I -S``, about 15 ms) serves a whole batch of keys, results are cached
per key for the run, and the probe runs only when a namespace is targeted.  It needs root
(``unshare``); when it cannot run, every key it was asked about is host-global with the
reason.  Such doubts (and a host value changed by someone else during the probe) are asked
once more and never cached; the host's value is put back only when it holds exactly what the
probe wrote.
"""

from __future__ import annotations

import contextlib
import json
import os
import weakref
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from dtnkit.host import nsfork, nsserve
from dtnkit.host.runner import Result, Runner, SubprocessRunner

NET_PREFIX = "net."


def _candidates(name: str, text: str | None, available_cc: str | None) -> list[str]:
    """Values other than the host's that the key is likely to accept (for the write probe)."""
    if text is None:
        return []
    if name == "net.ipv4.tcp_congestion_control":
        return [cc for cc in (available_cc or "").split() if cc != text.strip()][:2]
    try:
        nums = [int(f) for f in text.split()]
    except ValueError:
        return []
    if not nums:
        return []
    lasts = [nums[-1] - 1, nums[-1] + 1] if nums[-1] > 0 else [nums[-1] + 1]
    return [" ".join(str(n) for n in [*nums[:-1], last]) for last in lasts]


def _probe_input(
    names: list[str], host_ino: dict[str, int | None], cands: dict[str, list[str]]
) -> str:
    """What the probe in the new namespace is given (:func:`dtnkit.host.nsserve.probe`: one
    process, where a sh script started two per key): the paths, the host's inodes, the
    values to try."""
    return json.dumps(
        [[sysctl_file(n) for n in names], [host_ino[n] for n in names], [cands[n] for n in names]]
    )


def _facts(
    names: list[str], host_ino: dict[str, int | None], cands: dict[str, list[str]], out: str
) -> dict[str, dict[str, object]]:
    index = {sysctl_file(n): i for i, n in enumerate(names)}
    facts: dict[str, dict[str, object]] = {
        n: {"present": False, "same_file": False, "read_only": False, "wrote": None, "errors": []}
        for n in names
    }
    for line in out.splitlines():
        parts = line.split(maxsplit=3)
        if parts[:1] == ["P"] and len(parts) == 4 and parts[3] in index:
            name = names[index[parts[3]]]
            fact = facts[name]
            fact["present"] = True
            fact["same_file"] = parts[1] == str(host_ino[name])
            fact["read_only"] = not (int(parts[2], 8) & 0o222) if parts[2].isdigit() else False
            continue
        if len(parts) < 3 or not parts[1].isdigit() or int(parts[1]) >= len(names):
            continue
        name = names[int(parts[1])]
        errors = facts[name]["errors"]
        assert isinstance(errors, list)
        if not parts[2].isdigit() or not 0 < int(parts[2]) <= len(cands[name]):
            continue
        cand = cands[name][int(parts[2]) - 1]
        if parts[0] == "E":
            errors.append(f"{cand!r} refused")
        elif parts[0] == "W":
            readback = parts[3] if len(parts) > 3 else ""
            if readback.split() == cand.split():
                facts[name]["wrote"] = cand
            else:
                errors.append(f"wrote {cand!r} but read back {readback!r}")
    return facts


@dataclass(frozen=True)
class SysctlScope:
    """The kernel's answer for one sysctl: per network namespace or global to the host."""

    name: str
    per_netns: bool
    why: str
    final: bool = True  # the kernel's answer (cached); False: no answer this time (a doubt)


def sysctl_file(name: str) -> str:
    return "/proc/sys/" + name.replace(".", "/")


class ScopeProbe:
    """Classify sysctls by probing a throw-away namespace; results cached per key."""

    def __init__(self, runner: Runner | None = None, proc_sys: Path = Path("/proc/sys")) -> None:
        self.runner = runner or SubprocessRunner(timeout=30.0)
        self.proc_sys = proc_sys
        self.cache: dict[str, SysctlScope] = {}
        self.probes = 0  # probe processes run (tests check the batching)
        self.early: nsfork.ForkedChild | None = None  # see warm()

    def warm(self) -> None:
        """Fork the next probe's child now (into its new namespace, then waiting for its
        script), so its start overlaps with the caller's work (the plain runner only)."""
        if self.early is None and type(self.runner) is SubprocessRunner:
            self.early = nsfork.fork_new_netns(nsserve.probe_stdin)
            if self.early is not None:
                weakref.finalize(self, nsfork.ForkedChild.close, self.early)

    def _host_path(self, name: str) -> Path:
        return self.proc_sys / name.replace(".", "/")

    def _host_value(self, name: str) -> str | None:
        try:
            return self._host_path(name).read_bytes().decode(errors="replace")
        except OSError:
            return None

    def classify(self, names: Iterable[str]) -> dict[str, SysctlScope]:
        wanted = list(dict.fromkeys(names))
        got = {n: self.cache[n] for n in wanted if n in self.cache}
        todo = [n for n in wanted if n not in got]
        for _ in range(2):  # a doubt (probe failed, host changed meanwhile) is asked again once
            if not todo:
                break
            got.update(self._probe(todo))
            todo = [n for n in todo if not got[n].final]
        self.cache.update({n: v for n, v in got.items() if v.final})
        return {n: got[n] for n in wanted}

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
            cc = self._host_value("net.ipv4.tcp_available_congestion_control")
            cands = {
                n: _candidates(n, before[n], cc) if n.startswith(NET_PREFIX) else [] for n in names
            }
            self.probes += 1
            res = self._run(_probe_input(names, host_ino, cands))
            after = {n: self._host_value(n) for n in names}
        finally:
            for fd in fds.values():
                os.close(fd)
        if not res.ok:
            why = "could not probe a new namespace (" + res.message() + "); treated as host-global"
            return {n: SysctlScope(n, False, why, final=False) for n in names}
        facts = _facts(names, host_ino, cands, res.stdout)
        return {n: self._verdict(n, facts[n], before[n], after[n], host_ino[n]) for n in names}

    def _run(self, given: str) -> Result:
        """The probe's output: from a fork of this process in a new namespace (the plain
        runner), else (or when that fails) from ``unshare --net python`` by the runner."""
        argv = ["unshare", "--net", "--", *nsserve.command("probe")]
        if type(self.runner) is SubprocessRunner:
            early, self.early = self.early, None
            out = nsfork.run_in_new_netns(nsserve.probe_stdin, given.encode(), early)
            if out is None and early is not None:  # the early child failed: a fresh one
                out = nsfork.run_in_new_netns(nsserve.probe_stdin, given.encode())
            if out is not None:
                return Result(tuple(argv), 0, out, "")
        return self.runner.run(argv, stdin=given)

    def _verdict(
        self,
        name: str,
        fact: dict[str, object],
        before: str | None,
        after: str | None,
        host_ino: int | None,
    ) -> SysctlScope:
        def glob(why: str) -> SysctlScope:
            return SysctlScope(name, False, why)

        if not fact.get("present"):
            if host_ino is None:
                return glob("absent on this kernel")
            return glob(
                "absent in a new network namespace: the kernel keeps it for the "
                "initial namespace only"
            )
        if fact.get("same_file"):
            return glob("a new network namespace sees the host's own file: not namespaced")
        if not name.startswith(NET_PREFIX):
            return glob(
                "outside /proc/sys/net, the only sysctls a network namespace has its own copy of"
            )
        if before != after:
            wrote = fact.get("wrote")
            if (
                before is not None
                and isinstance(wrote, str)
                and (after or "").split() == wrote.split()
            ):
                with contextlib.suppress(OSError):  # our write reached the host: undo it
                    self._host_path(name).write_text(before)
                return glob(
                    "a write in a new network namespace changed the host's value (put back): global"
                )
            return SysctlScope(
                name,
                False,
                "the host's value changed during the probe (not by it); treated as host-global",
                final=False,
            )
        if fact.get("read_only"):
            return glob("read-only in a new network namespace: the host's value, shared")
        if fact.get("wrote") is None:
            errors = fact.get("errors") or []
            detail = "; ".join(str(e) for e in errors) if isinstance(errors, list) else ""
            return glob(
                "could not prove it per-namespace ("
                f"{detail or 'no other valid value is known for it'}); treated as "
                "host-global"
            )
        return SysctlScope(
            name,
            True,
            "a write in a new network namespace left the host's value unchanged: per-namespace",
        )


# one probe per run (a CLI invocation is a run): the kernel's answers do not change in between
PROBE = ScopeProbe()
