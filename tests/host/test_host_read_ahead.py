"""Host.read_ahead: commands of independent reads overlap, each still runs once, and a
refresh() is never undone by a read that started before it."""

from __future__ import annotations

import os
import subprocess
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from dtnkit.host.host import Host
from dtnkit.host.runner import SubprocessRunner


def _wait_for(predicate: object, seconds: float = 30.0) -> None:
    deadline = time.monotonic() + seconds
    while not predicate():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached")
        time.sleep(0.01)


def test_one_command_asked_by_many_threads_runs_once(tmp_path: Path) -> None:
    log, gate = tmp_path / "log", tmp_path / "gate"
    os.mkfifo(gate)
    argv = ["sh", "-c", f"echo run >> {log}; read x < {gate}; echo done"]
    host = Host.live()
    results: list[str] = []
    reads = [lambda: results.append(host.query(argv).stdout) for _ in range(6)]
    runner = threading.Thread(target=host.read_ahead, args=(reads,), kwargs={"workers": 6})
    runner.start()
    _wait_for(lambda: log.exists() and log.read_text())  # the first run is blocked on the gate
    with open(gate, "w") as fh:  # let it finish (every blocked reader, had there been more)
        fh.write("go\n")
    runner.join(timeout=60)
    assert not runner.is_alive()
    assert log.read_text() == "run\n"  # the other five waited for the first one's result
    assert results == ["done\n"] * 6


def test_read_ahead_fills_the_cache_the_caller_reads_in_its_own_order() -> None:
    host = Host.live()
    argvs = [["echo", str(i)] for i in range(8)]
    host.read_ahead([lambda a=a: host.query(a) for a in argvs])

    class Refuse(SubprocessRunner):
        def run(self, argv: object, *, stdin: str | None = None) -> object:  # type: ignore[override]
            raise AssertionError(f"ran {argv} again: not cached")

    host.runner = Refuse()
    assert [host.query(a).stdout for a in argvs] == [f"{i}\n" for i in range(8)]


def test_a_failing_read_ahead_is_left_to_the_caller() -> None:
    host = Host.live()

    def boom() -> None:
        raise RuntimeError("read failed")

    host.read_ahead([boom, lambda: host.query(["true"])])  # no exception escapes
    assert host.query(["true"]).ok


def test_refresh_drops_a_result_that_was_read_before_it(tmp_path: Path) -> None:
    log, gate = tmp_path / "log", tmp_path / "gate"
    os.mkfifo(gate)
    host = Host.live()
    argv = ["sh", "-c", f"echo run >> {log}; read x < {gate}; echo old"]
    reader = threading.Thread(target=host.query, args=(argv,))
    reader.start()
    _wait_for(lambda: log.exists() and log.read_text())  # the query is under way
    host.refresh()  # e.g. a write happened while the command ran
    with open(gate, "w") as fh:
        fh.write("go\n")
    reader.join(timeout=60)
    gate.unlink()
    gate.write_text("go\n")  # a plain file now: the next run does not block
    assert host.query(argv).stdout == "old\n"
    assert log.read_text() == "run\nrun\n"  # ran again: the first result predates refresh()


def test_no_read_ahead_with_a_runner_of_the_callers_own() -> None:
    for host in (Host(runner=_Recording()), Host(netns="dkl-nosuch", runner=_Recording())):
        seen: list[int] = []
        host.read_ahead([lambda seen=seen: seen.append(1)] * 3)
        assert seen == []  # nothing ahead: the caller reads in order, as without it


class _Recording(SubprocessRunner):
    """A runner of the caller's own (e.g. a test's): it must see every command in order."""


@pytest.fixture
def netns() -> Iterator[str]:
    name = f"dkra{uuid.uuid4().hex[:8]}"
    subprocess.run(["ip", "netns", "add", name], check=True)
    try:
        yield name
    finally:
        subprocess.run(["ip", "netns", "del", name], check=False)


@pytest.mark.needs_root
@pytest.mark.needs_netns
def test_in_a_namespace_the_helper_runs_the_planned_commands_side_by_side(
    netns: str, tmp_path: Path
) -> None:
    # Two commands that can only finish together: each opens a FIFO the other one reads.
    # Run one after the other they would both hit the runner's timeout.
    a, b = tmp_path / "a", tmp_path / "b"
    os.mkfifo(a)
    os.mkfifo(b)
    first = ["sh", "-c", f"echo one > {a}; cat {b}"]
    second = ["sh", "-c", f"cat {a}; echo two > {b}"]
    then = ["echo", "after"]
    host = Host(netns=netns, runner=SubprocessRunner(timeout=20))

    def chained() -> None:  # a read whose second command depends on its first's output
        if host.query(first).ok:
            host.query(then)

    host.read_ahead([chained, lambda: host.query(second)])

    class Refuse(SubprocessRunner):
        def run(self, argv: object, *, stdin: str | None = None) -> object:  # type: ignore[override]
            raise AssertionError(f"ran {argv} again: not cached")

    host.runner = Refuse()
    host.read_ahead = lambda reads, workers=4: None  # type: ignore[method-assign]
    results = [host.query(c) for c in (first, second, then)]
    assert [(r.returncode, r.stdout) for r in results] == [
        (0, "two\n"),
        (0, "one\n"),
        (0, "after\n"),
    ]


def test_reads_that_need_no_command_start_no_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    """Files (and netlink) are read in this process: threads would only take turns at the
    interpreter, so read_ahead leaves such reads to the caller; a command still overlaps."""
    started: list[str] = []
    real_start = threading.Thread.start

    def count(self: threading.Thread) -> None:
        started.append(self.name)
        real_start(self)

    monkeypatch.setattr(threading.Thread, "start", count)
    host = Host.live()
    files = ["/proc/sys/net/core/rmem_max", "/proc/sys/net/core/wmem_max", "/proc/loadavg"]
    host.read_ahead([lambda f=f: host.read(f) for f in files])
    assert "dtnkit-read" not in started
    host.read_ahead([lambda: host.read(files[0]), lambda: host.query(["echo", "x"])])
    assert started.count("dtnkit-read") == 1  # one command: one thread
