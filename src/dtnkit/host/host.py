"""The one seam between dtnkit and the system it tunes.

Every read of /proc or /sys and every command dtnkit runs goes through a :class:`Host`.  A Host
has three parts:

* ``root``: where /proc and /sys live (``/`` on a live host, a captured tree in tests);
* ``runner``: how commands run (:mod:`dtnkit.host.runner`, or the replay of captured
  outputs in :mod:`dtnkit.host.replay`);
* ``netns``: a named network namespace to work in (commands are prefixed with
  ``ip netns exec NAME``; per-namespace files are read there).  With the plain runner, reads
  and read-only commands go through one helper process inside the namespace (see
  :mod:`dtnkit.host.nshelper`), which reads most per-namespace files in one batch.

A live Host asks the kernel over netlink what ``ip``, ``tc`` and ``ethtool`` would print
(:attr:`Host.kernel`, a :class:`~dtnkit.host.kernel.KernelView`).

Reads (:meth:`Host.read`, :meth:`Host.query`) and writes (:meth:`Host.write`,
:meth:`Host.change`) are separate calls, so a read-only Host (``Host(..., read_only=True)``)
can prove that audit and ``--dry-run`` write nothing: any write raises.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import shutil
import threading
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dtnkit.errors import DtnkitError, ToolMissing
from dtnkit.host import nsserve
from dtnkit.host.runner import Result, Runner, SubprocessRunner
from dtnkit.host.tree import Tree
from dtnkit.host.tree import check as check_tree

# The netlink decoders (kernel), the namespace helper and the captured trees' runner (replay)
# are imported where they are first used: a process that reads a few files of its own
# namespace (`dtnkit cp --streams auto`: buffer limits and the link's speed) needs none of
# them, and they were 9 % of cp's start-up (477 -> 434 M instructions, bench cp-start).
if TYPE_CHECKING:
    from dtnkit.host.kernel import KernelView
    from dtnkit.host.nshelper import NsHelper

# Paths whose content depends on the network namespace of the reader.
_NETNS_PATHS = ("/proc/sys/net/", "/sys/class/net/", "/proc/net/")

# What one process inside a namespace reads for all later reads (instead of one
# `ip netns exec cat` per file): every file of these directories, and of each interface's
# directory, with its listing; missing, unreadable (EINVAL: the kernel lists the file but has
# no value) and writable files told apart.  Paths elsewhere are read one at a time.
_BATCH_DIRS = (
    "/proc/sys/net/core",
    "/proc/sys/net/ipv4",
    "/proc/sys/net/ipv6/conf/all",
    "/proc/sys/net/ipv6/conf/default",
    "/sys/class/net",
)
_BATCH_DEVICE_FILES = ("device", "device/numa_node")
# The files whose content the helper's batch reads at once: those an audit reads (every other
# file of the batch's directories is read when asked for, by the same helper: see
# Host._batch_file).  Reading all ~430 cost 20 ms of a namespace audit's ~45 ms lead.
_BATCH_NAMES = (
    "default_qdisc",
    "netdev_max_backlog",
    "optmem_max",
    "rmem_default",
    "rmem_max",
    "wmem_default",
    "wmem_max",
    "tcp_allowed_congestion_control",
    "tcp_available_congestion_control",
    "tcp_congestion_control",
    "tcp_mem",
    "tcp_mtu_probing",
    "tcp_no_metrics_save",
    "tcp_rmem",
    "tcp_slow_start_after_idle",
    "tcp_wmem",
    "disable_ipv6",
    "mtu",
    "speed",
    "tx_queue_len",
    "numa_node",
)


def _batch_request() -> dict[str, Any]:
    """The helper's batch read: the files of the batch's directories and the kernel's
    rtnetlink dumps, which belong to the namespace the helper is in."""
    from dtnkit.host.kernel import dump_requests

    return {
        "batch": [list(_BATCH_DIRS), list(_BATCH_DEVICE_FILES), dump_requests(), list(_BATCH_NAMES)]
    }


@dataclass(slots=True)
class _Batch:
    """What the batch read saw in a namespace (see :func:`dtnkit.host.nsserve.batch`)."""

    dirs: dict[str, list[str]]
    files: dict[str, str | None]
    exists: dict[str, bool]
    writable: set[str]
    rtnl: dict[str, bytes] | None = None  # the rtnetlink dumps by name (see .kernel)

    def knows(self, path: str) -> bool:
        """Whether the batch answers for ``path``: its directory was listed, it was named, or
        a listed directory above it lacks the next step (then it does not exist)."""
        return (
            path in self.dirs
            or path in self.exists
            or path.rpartition("/")[0] in self.dirs
            or self._missing_step(path)
        )

    def present(self, path: str) -> bool:
        if path in self.exists:
            return self.exists[path]
        parent, _, name = path.rpartition("/")
        return path in self.dirs or (
            name in self.dirs.get(parent, ()) and not self._missing_step(path)
        )

    def _missing_step(self, path: str) -> bool:
        head = path
        while head.count("/") > 1:
            head, _, step = head.rpartition("/")
            if head in self.dirs and step not in self.dirs[head]:
                return True
        return False


class _Planned(BaseException):
    """Raised by Host.query while read_ahead plans a namespace's commands: not an error, so
    not an Exception a read could catch as one."""


_PLAN_ROUNDS = 4  # a command whose output leads to another (ethtool --json, then text): depth


class ReadOnlyViolation(DtnkitError):
    """Raised when a read-only Host is asked to write: a bug, never a user error."""


@dataclass(slots=True)
class WriteRecord:
    """One write to the host: what was written (a file or a command) and the value."""

    what: str  # a path or a command line
    value: str


@dataclass
class Host:
    """Everything dtnkit knows how to touch on one host (or one network namespace)."""

    root: Path = Path("/")
    netns: str | None = None
    runner: Runner = field(default_factory=SubprocessRunner)
    read_only: bool = False
    writes: list[WriteRecord] = field(default_factory=list)
    _cache: dict[tuple[str, ...], Result] = field(default_factory=dict, repr=False)
    # The namespace's files read in one process (key None), dropped with _cache.
    _batch: dict[None, _Batch] = field(default_factory=dict, repr=False)
    # The helper process inside the namespace (key None), started at the first read.
    _helper: dict[None, NsHelper] = field(default_factory=dict, repr=False)
    # Commands being run by another thread (see read_ahead): key -> done.
    _running: dict[tuple[str, ...], threading.Event] = field(default_factory=dict, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)
    # Bumped by refresh(): a command that started before it is not cached after it.
    _generation: list[int] = field(default_factory=lambda: [0], repr=False)
    # While read_ahead plans a namespace's commands: the commands the reads would run.
    _planning: list[dict[tuple[str, ...], None]] = field(default_factory=list, repr=False)
    # What does not change while dtnkit runs (the kernel's build config, where a tool is).
    _fixed: dict[str, Any] = field(default_factory=dict, repr=False)
    # What the kernel says over netlink (key None; see the kernel property).
    _kernel: dict[None, KernelView] = field(default_factory=dict, repr=False)

    # ---- construction ---------------------------------------------------------------------
    @classmethod
    def live(cls, netns: str | None = None, *, read_only: bool = False) -> Host:
        host = cls(Path("/"), netns=netns, runner=SubprocessRunner(), read_only=read_only)
        if netns is not None:  # start the namespace's helper and its batch read right away
            from dtnkit.host.nshelper import NsHelper

            host._helper[None] = NsHelper(netns, first=host._helper_request(_batch_request()))
        return host

    @classmethod
    def from_tree(cls, path: Path, *, read_only: bool = False) -> Host:
        if not path.is_dir():
            raise DtnkitError(
                f"host tree {path} does not exist", "", "give the path of a captured tree"
            )
        check_tree(path)  # a link anywhere in it: refused before anything is read
        from dtnkit.host.replay import FixtureRunner

        return cls(path, runner=FixtureRunner(Tree(path)), read_only=read_only)

    def read_only_view(self) -> Host:
        """The same host, refusing every write (used by audit and --dry-run)."""
        return Host(
            self.root,
            self.netns,
            self.runner,
            read_only=True,
            _cache=self._cache,
            _batch=self._batch,
            _helper=self._helper,
            _running=self._running,
            _lock=self._lock,
            _generation=self._generation,
            _planning=self._planning,
            _fixed=self._fixed,
            _kernel=self._kernel,
        )

    @property
    def is_live(self) -> bool:
        return isinstance(self.runner, SubprocessRunner)

    @property
    def label(self) -> str:
        if not self.is_live:
            return f"tree {self.root}"
        return f"netns {self.netns}" if self.netns else "host"

    # ---- files ----------------------------------------------------------------------------
    def _in_netns(self, path: str) -> bool:
        return (
            self.is_live
            and self.netns is not None
            and (path.rstrip("/") + "/").startswith(_NETNS_PATHS)
        )

    def _local(self, path: str) -> Path:
        return self.root / path.lstrip("/")

    def _tree(self) -> Tree | None:
        """The files of a captured tree (a root other than ``/`` whose commands are not run:
        ``--tree``), opened without following links (see :mod:`dtnkit.host.tree`); None for
        a live host, also one whose root of its own links to the real /proc and /sys (the
        checklist's tests read /etc there)."""
        return Tree(self.root) if self.root != Path("/") and not self.is_live else None

    def _batched(self, path: str) -> _Batch | None:
        """The namespace's batch read when it answers for ``path`` (read on first use)."""
        if not path.startswith(("/proc/sys/net/", "/sys/class/net")):
            return None
        self._batch_read()
        batch = self._batch[None]
        return batch if batch.knows(path.rstrip("/")) else None

    def _batch_read(self) -> None:
        if None not in self._batch:
            doc = self._helper_reply(_batch_request())
            doc = doc.get("batch") if doc is not None else None
            if doc is None:
                res = self.runner.run(
                    self.argv(
                        nsserve.command("batch", json.dumps([_BATCH_DIRS, _BATCH_DEVICE_FILES]))
                    )
                )
                try:
                    doc = json.loads(res.stdout) if res.ok else None
                except ValueError:
                    doc = None
            if not isinstance(doc, dict):  # no batch: each file is read on its own
                doc = {"dirs": {}, "files": {}, "exists": {}, "writable": []}
            from dtnkit.host.kernel import named_dumps

            self._batch[None] = _Batch(
                doc["dirs"],
                doc["files"],
                doc["exists"],
                set(doc["writable"]),
                named_dumps(doc.get("rtnl")),
            )

    def _batch_file(self, batch: _Batch, path: str) -> bool:
        """Whether ``batch`` holds ``path``'s content, asking the helper for a file of a listed
        directory the batch did not read (see _BATCH_NAMES)."""
        if path in batch.files:
            return True
        parent, _, name = path.rpartition("/")
        if name not in batch.dirs.get(parent, ()):
            return False
        reply = self._helper_reply({"read": [path]})
        got = reply.get("read") if reply is not None else None
        if not isinstance(got, dict):
            return False
        with self._lock:
            batch.files.update(got["files"])
            batch.writable.update(got["writable"])
        return path in batch.files

    @property
    def kernel(self) -> KernelView | None:
        """What the running kernel says over netlink (see :mod:`dtnkit.host.kernel`), in this
        process or, for a namespace, through its helper; None when this Host does not ask the
        kernel: a captured tree, a runner of the caller's own (those run ``ip``, ``tc`` and
        ``ethtool``)."""
        if type(self.runner) is not SubprocessRunner:
            return None
        if None not in self._kernel:
            from dtnkit.host.kernel import KernelView

            self._kernel[None] = KernelView(
                self.netns, self._helper_reply, self._batch_dumps, ethtool=self.root == Path("/")
            )
        return self._kernel[None]

    def _batch_dumps(self) -> dict[str, bytes] | None:
        self._batch_read()
        return self._batch[None].rtnl

    def read(self, path: str) -> str | None:
        """The content of ``path`` (``/proc/...``), or None when it does not exist."""
        if self._in_netns(path):
            batch = self._batched(path)
            if batch is not None and self._batch_file(batch, path):
                return batch.files[path]
            if batch is not None and not batch.present(path):
                return None
            res = self.query(["cat", path])
            return res.stdout if res.ok else None
        tree = self._tree()
        try:  # bytes that are not UTF-8 as U+FFFD, as the namespace's helper reads them
            data = tree.read_bytes(path) if tree else self._local(path).read_bytes()
            return data.decode(errors="replace")
        except (FileNotFoundError, NotADirectoryError):
            return None
        except OSError as exc:
            if exc.errno in (errno.EINVAL, errno.EOPNOTSUPP, errno.ENODEV):
                return None  # the kernel lists the file but has no value (e.g. lo's speed)
            raise DtnkitError(f"cannot read {path}", exc.strerror or str(exc)) from exc

    def exists(self, path: str) -> bool:
        if self._in_netns(path):
            batch = self._batched(path)
            if batch is not None:
                return batch.present(path.rstrip("/"))
            return self.query(["test", "-e", path]).ok
        tree = self._tree()
        return tree.exists(path) if tree else self._local(path).exists()

    def writable(self, path: str) -> bool:
        """Whether the kernel would accept a write (read-only sysctls in a netns are not)."""
        if self._in_netns(path):
            batch = self._batched(path)
            if batch is not None and self._batch_file(batch, path):
                return path in batch.writable
            if batch is not None and not batch.present(path):
                return False
            return self.query(["test", "-w", path]).ok
        tree = self._tree()
        if tree is not None:
            return tree.writable(path)
        local = self._local(path)
        return local.exists() and os.access(local, os.W_OK)

    def listdir(self, path: str) -> list[str]:
        if self._in_netns(path):
            batch = self._batched(path)
            if batch is not None and path.rstrip("/") in batch.dirs:
                return list(batch.dirs[path.rstrip("/")])
            res = self.query(["ls", "-1", path])
            return sorted(res.stdout.split()) if res.ok else []
        tree = self._tree()
        if tree is not None:
            return tree.listdir(path)
        try:
            return sorted(os.listdir(self._local(path)))
        except (FileNotFoundError, NotADirectoryError):
            return []

    def write(self, path: str, value: str) -> None:
        """Write ``value`` to ``path``; raises DtnkitError with the kernel's reason."""
        self._guard(path, value)
        self.writes.append(WriteRecord(path, value))
        self.refresh()
        if self._in_netns(path):
            res = self.runner.run(
                ["ip", "netns", "exec", self.netns or "", "tee", path], stdin=value
            )
            if not res.ok:
                raise DtnkitError(f"cannot write {value!r} to {path}", _tee_reason(res.stderr))
            return
        local = self._local(path)
        if not self.is_live and path.startswith(("/proc/", "/sys/")):
            value = _as_kernel_prints(path, value)
        tree = self._tree()
        try:
            if tree is not None:
                tree.write_bytes(
                    path, value.encode(), make_parents=not self.is_live or path.startswith("/etc/")
                )
                return
            if not self.is_live or path.startswith("/etc/"):
                local.parent.mkdir(parents=True, exist_ok=True)
            with open(local, "w") as fh:
                fh.write(value)
        except OSError as exc:
            raise DtnkitError(
                f"cannot write {value!r} to {path}", exc.strerror or str(exc)
            ) from exc

    def remove(self, path: str) -> None:
        self._guard(path, "<remove>")
        self.writes.append(WriteRecord(path, "<remove>"))
        self.refresh()
        tree = self._tree()
        if tree is not None:
            tree.unlink(path)
            return
        self._local(path).unlink(missing_ok=True)

    def _guard(self, what: str, value: str) -> None:
        if self.read_only:
            raise ReadOnlyViolation(
                f"internal error: read-only host asked to write {value!r} to {what}",
                "audit and --dry-run never write",
                "report this as a dtnkit bug",
            )

    # ---- commands -------------------------------------------------------------------------
    def argv(self, argv: Sequence[str]) -> list[str]:
        """The command line that runs ``argv`` on this host (inside its namespace)."""
        if self.is_live and self.netns:
            return ["ip", "netns", "exec", self.netns, *argv]
        return list(argv)

    def query(self, argv: Sequence[str]) -> Result:
        """Run a command that only reads (cached until the next write or change); in a
        namespace through the helper there, when it runs."""
        key = tuple(argv)
        while True:
            with self._lock:
                if key in self._cache:
                    return self._cache[key]
                if self._planning:  # read_ahead asks what this read would run: stop here
                    self._planning[-1][key] = None
                    raise _Planned()
                running = self._running.get(key)
                if running is None:
                    done = self._running[key] = threading.Event()
                    generation = self._generation[0]
                    break
            running.wait()  # another thread runs it: take its result
        try:
            res = self._in_helper({"argv": list(argv), "stdin": None})
            if res is None:
                res = self.runner.run(self.argv(argv))
            with self._lock:
                if self._generation[0] == generation:
                    self._cache[key] = res
        finally:
            with self._lock:
                if self._running.get(key) is done:
                    del self._running[key]
            done.set()
        return res

    def read_ahead(self, reads: Sequence[Callable[[], object]], workers: int = 4) -> None:
        """Run independent reads side by side, so the commands behind them (each ``ip``,
        ``ethtool`` or ``tc`` is a process start) overlap instead of queueing.

        Only their cached command outputs are kept: the caller then reads again in its own
        order, so what it reports never depends on timing.  Best effort: a read that fails
        here fails again where the caller makes it.  The reads are first run to learn the
        commands they need (each stops at its first command not yet known); those run side by
        side (threads here, the helper process in a namespace), and again for the commands
        their outputs lead to.  Reads that need no command (files, netlink: the whole live
        audit) are left to the caller: threads would only take turns at the interpreter (an
        audit took 30-59 ms with them, 20 ms without).  A no-op for a captured tree and a
        runner of the caller's own.
        """
        if type(self.runner) is not SubprocessRunner or len(reads) < 2:
            return
        for _ in range(_PLAN_ROUNDS):
            planned = self._plan(reads)
            if not planned:
                return  # nothing left to run: the reads are files and netlink, in-process
            if self.netns is not None:
                if not self._run_in_helper(planned):
                    return  # no helper: the caller runs its commands one by one
                continue
            self._run_side_by_side(list(reversed(planned)), workers)

    def _run_side_by_side(self, todo: list[tuple[str, ...]], workers: int) -> None:
        """Run the commands (cached by :meth:`query`) in up to ``workers`` threads."""

        def work() -> None:
            while True:
                with self._lock:
                    if not todo:
                        return
                    key = todo.pop()
                with contextlib.suppress(Exception):
                    self.query(key)

        threads = [
            threading.Thread(target=work, name="dtnkit-read", daemon=True)
            for _ in range(min(workers, len(todo)))
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()

    def _plan(self, reads: Sequence[Callable[[], object]]) -> dict[tuple[str, ...], None]:
        """The commands the reads would run next that are not yet cached (each read stops
        at its first such command; one that needs none runs whole, its files read twice:
        cheaper than threads that would only take turns at the interpreter)."""
        planned: dict[tuple[str, ...], None] = {}
        self._planning.append(planned)
        try:
            for read in reads:
                try:
                    read()
                except (_Planned, Exception):
                    continue  # planned, or failed: the caller's own read says why
        finally:
            self._planning.pop()
        return planned

    def _run_in_helper(self, planned: dict[tuple[str, ...], None]) -> bool:
        """Run the planned commands side by side in the namespace's helper; False when
        there is no helper (or its reply is not whole)."""
        with self._lock:
            generation = self._generation[0]
        reply = self._helper_reply({"many": [list(k) for k in planned], "stdin": None})
        many = reply.get("many") if reply is not None else None
        if not isinstance(many, list) or len(many) != len(planned):
            return False
        with self._lock:
            if self._generation[0] == generation:
                for key, (rc, out, err) in zip(planned, many, strict=True):
                    self._cache[key] = Result(tuple(self.argv(key)), int(rc), str(out), str(err))
        return True

    def _in_helper(self, request: dict[str, Any]) -> Result | None:
        """Run a command in the namespace's helper process, or None when it cannot."""
        reply = self._helper_reply(request)
        if reply is None:
            return None
        argv = tuple(self.argv(request["argv"]))
        return Result(argv, int(reply["rc"]), str(reply["out"]), str(reply["err"]))

    def _helper_reply(self, request: dict[str, Any]) -> dict[str, Any] | None:
        """The namespace's helper process's reply: only for a live namespace with the plain
        subprocess runner (a runner of the caller's own sees every command)."""
        runner = self.runner
        if not (self.netns and type(runner) is SubprocessRunner):
            return None
        if None not in self._helper:
            from dtnkit.host.nshelper import NsHelper

            self._helper[None] = NsHelper(self.netns)
        return self._helper[None].ask(self._helper_request(request))

    def _helper_request(self, request: dict[str, Any]) -> dict[str, Any]:
        timeout = getattr(self.runner, "timeout", 60.0)
        return {**request, "timeout": float(timeout)}

    def refresh(self) -> None:
        """Forget cached command outputs and files (the host may have changed behind our
        back)."""
        with self._lock:
            self._cache.clear()
            self._generation[0] += 1
        self._batch.clear()
        for kernel in self._kernel.values():
            kernel.forget()
        for helper in self._helper.values():
            helper.drop_early()  # a batch read sent at start is as old as the cache

    def change(self, argv: Sequence[str]) -> Result:
        """Run a command that changes the host."""
        self._guard(" ".join(argv), "")
        self.writes.append(WriteRecord(" ".join(argv), ""))
        self.refresh()
        if not self.is_live:
            from dtnkit.host.replay import FixtureRunner

            if isinstance(self.runner, FixtureRunner):
                return self.runner.record_change(argv)
        return self.runner.run(self.argv(argv))

    def has_tool(self, name: str) -> bool:
        """Whether a binary is installed (always True for a tree: its runner replays what was
        captured, or says what was not).  Asking costs a PATH walk, not a process."""
        if not self.is_live:
            return True
        if f"which {name}" not in self._fixed:
            self._fixed[f"which {name}"] = shutil.which(name)
        return self._fixed[f"which {name}"] is not None

    def need_tool(self, name: str, package: str) -> None:
        """Raise ToolMissing when a binary the command needs is absent."""
        if not self.has_tool(name):
            raise ToolMissing(
                f"`{name}` is not installed",
                f"dtnkit reads and sets this through {name}",
                f"install it (apt-get install {package} / dnf install {package})",
            )

    def process_running(self, comm: str) -> bool | None:
        """Whether a process named ``comm`` runs, as ``pgrep -x COMM`` says, from each
        ``/proc/PID/comm`` (the same in every network namespace); None for a tree or a runner
        of the caller's own, which run ``pgrep`` instead."""
        if type(self.runner) is not SubprocessRunner or self.root != Path("/"):
            return None
        for pid in os.listdir("/proc"):
            if pid.isdigit():  # os.open, not open(): a file object costs 3x the read here
                try:
                    fd = os.open(f"/proc/{pid}/comm", os.O_RDONLY)
                except OSError:
                    continue  # ended meanwhile
                try:
                    name = os.read(fd, 4096)
                except OSError:
                    continue
                finally:
                    os.close(fd)
                if name.rstrip(b"\n").decode(errors="replace") == comm:
                    return True
        return False

    # ---- network namespaces ---------------------------------------------------------------
    def netns_id(self) -> str | None:
        """``DEV:INODE`` of the network namespace this host works in (``/run/netns/NAME``
        for a namespace, else this process's own); None for a captured tree."""
        if not self.is_live:
            return None
        return self.named_netns_id(self.netns) if self.netns else _ns_id("/proc/self/ns/net")

    def named_netns_id(self, name: str) -> str | None:
        """``DEV:INODE`` of the ``ip netns`` namespace ``name``; None when there is none."""
        if not self.is_live or "/" in name or name in ("", ".", ".."):
            return None
        return _ns_id(f"/run/netns/{name}")

    def process_netns_id(self, pid: str) -> str | None:
        """``DEV:INODE`` of the network namespace process ``pid`` runs in (the same identity
        as :meth:`netns_id`); None when it cannot be told (a tree, a process that ended, no
        permission)."""
        if not self.is_live or not pid.isdigit():
            return None
        return _ns_id(str(self._local(f"/proc/{pid}/ns/net")))

    # ---- sysctl ---------------------------------------------------------------------------
    @staticmethod
    def sysctl_path(key: str) -> str:
        return "/proc/sys/" + key.replace(".", "/")

    def kernel_config(self, only: tuple[str, ...] = ()) -> dict[str, str] | None:
        """The kernel's build configuration, when the host exposes it (read once: it does not
        change while the kernel runs).  ``only``: parse just the lines that hold one of these
        strings (e.g. ``("CONFIG_NET_SCH_",)``): the symbols of those lines get the values the
        whole parse gives them (a text with line breaks other than newlines: the whole parse),
        without a Python loop over its ~10,000 lines (~13 M
        instructions, 4 % of an audit)."""
        if "kernel config" not in self._fixed:
            self._fixed["kernel config"] = self._read_kernel_config()
        raw: str | None = self._fixed["kernel config"]
        if raw is None:
            return None
        if only and not any(brk in raw for brk in _OTHER_BREAKS):
            return parse_kernel_config(_lines_holding(raw, only))
        if "kernel config parsed" not in self._fixed:  # (with odd line breaks: all of it)
            self._fixed["kernel config parsed"] = parse_kernel_config(raw.splitlines())
        config: dict[str, str] = self._fixed["kernel config parsed"]
        return config

    def _read_kernel_config(self) -> str | None:
        raw: str | None = None
        tree = self._tree()
        gz = self._local("/proc/config.gz")
        if tree.exists("/proc/config.gz") if tree else gz.exists():
            try:
                data = tree.read_bytes("/proc/config.gz") if tree else gz.read_bytes()
                raw = zlib.decompress(data, 16 + zlib.MAX_WBITS).decode(errors="replace")
            except (OSError, zlib.error):
                raw = None
        if raw is None:
            release = (self.read("/proc/sys/kernel/osrelease") or "").strip()
            raw = self.read(f"/boot/config-{release}") if release else None
        return raw


#: the line breaks of str.splitlines other than "\n" (a kernel config has none)
_OTHER_BREAKS = tuple("\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029")


def parse_kernel_config(lines: Sequence[str]) -> dict[str, str]:
    """A kernel config's lines as {symbol: value} (``# CONFIG_X is not set``: "n")."""
    config: dict[str, str] = {}
    for line in lines:
        if line.startswith("CONFIG_") and "=" in line:
            name, _, value = line.partition("=")
            config[name] = value
        elif line.startswith("# CONFIG_") and line.endswith(" is not set"):
            config[line[2:].split()[0]] = "n"
    return config


def _lines_holding(raw: str, needles: tuple[str, ...]) -> list[str]:
    """The lines of ``raw`` ("\n"-separated) that hold one of ``needles``, in order, each once."""
    starts: set[int] = set()
    for needle in needles:
        pos = raw.find(needle)
        while pos >= 0:
            start = raw.rfind("\n", 0, pos) + 1
            starts.add(start)
            end = raw.find("\n", pos)
            pos = raw.find(needle, end) if end >= 0 else -1
    out = []
    for start in sorted(starts):
        end = raw.find("\n", start)
        out.append(raw[start:] if end < 0 else raw[start:end])
    return out


def _as_kernel_prints(path: str, value: str) -> str:
    """What the kernel would print back after a write (for captured trees)."""
    if path.startswith("/proc/sys/"):
        value = "\t".join(value.split())
    return value.rstrip("\n") + "\n"


def _tee_reason(stderr: str) -> str:
    # "tee: /proc/sys/...: Invalid argument" -> "Invalid argument"
    line = stderr.strip().splitlines()[-1] if stderr.strip() else "write failed"
    return line.rsplit(": ", 1)[-1]


def _ns_id(path: str) -> str | None:
    """A namespace file's identity, ``DEV:INODE`` (nsfs: the same for every path to one
    namespace), or None when it cannot be read."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return f"{st.st_dev}:{st.st_ino}"
