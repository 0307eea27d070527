"""Does dtnkit serve stay correct and fair under hostile clients, against --base?

Each tree's own ``dtnkit serve`` on 127.0.0.1 (a child process, a fresh one for every run,
``--drain-timeout 1s``), clients over real sockets; the runs interleaved (--order), --rounds
times.  Three questions (--only one of them):

fifo   A FIFO in the served tree: --requests GETs and HEADs of it (anonymous read) over
       --probers kept-alive connections, while --readers clients GET four other files, each
       on a new connection, and check every body's sha256.  Then a directory: one client with
       a write token makes and deletes it (MKCOL, DELETE) while --probers connections GET its
       listing, --requests times in all.  Counted: wrong bodies, answers other than 200 for
       the files, connections cut or refused, reads that waited 10 s.  A loop ends after its
       requests, after --loop-seconds, or when no reader has been served for 10 s; then fresh
       connections ask for a file: is the server still serving, and if not, when was a reader
       last served.
slow   --slow connections from 127.0.0.1 (more than the server's workers), each sending a GET
       head with a 64-byte body, then one byte every --slow-interval s, without a token (a
       connection the server closes is opened again).  Meanwhile a client with a read token
       GETs a 64 KiB file from 127.0.0.2, one new GET every 0.5 s for --slow-seconds, each
       bounded by --timeout: its latency p50 / p99 (a failed GET counts as the timeout) and its
       failures, beside its p50 with no attack.  Two servers: tokens only, and tokens with
       --anonymous-read (then the attacker's GET is allowed and its body read).
cap    A server with --max-connections --cap (and a 120 s head deadline, so idle connections
       stay): 127.0.0.1 opens --cap connections and holds them without a request; then
       127.0.0.2 makes --gets GETs, each on a new connection.  How many connections the first
       address holds, and what the second is answered, how fast.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import functools
import hashlib
import http.client
import math
import os
import re
import resource
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from bench.lib import Bench, Case
from bench.lib.core import positive
from bench.lib.procs import listening_url
from bench.lib.trees import Tree

HOST = "127.0.0.1"  # the server's address, and the hostile client's
OTHER = "127.0.0.2"  # the other client's (a second loopback address)
TOKEN = "bench-abuse-token"  # read,write
QUIET = 10.0  # seconds with no reader served: the server has stopped serving
READ_TIMEOUT = 10.0  # a reader's GET, the prober's and the final checks
BODY = 64  # bytes a slow body announces (one is sent per tick: it never completes)
EVERY = 0.5  # seconds between the legitimate client's GETs under attack
ALONE = 10  # legitimate GETs before the attack, for their latency alone
FD_SPARE = 256  # descriptors beside the held connections (readers, files, the base tree)
FILES = {f"r{i}.bin": 256 * 1024 + i for i in range(4)}
SMALL = "small.bin"
QUESTIONS = ("fifo", "slow", "cap")
#: what a prober may be answered without anything being wrong
EXPECTED = {"fifo": {"403"}, "directory": {"200", "404"}}


def seconds(value: str) -> float:
    """A duration in seconds: a finite number above 0 and at most a day."""
    try:
        got = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not a number of seconds") from None
    if not 0 < got <= 86400:  # also refuses nan and inf
        raise argparse.ArgumentTypeError(f"{value!r}: more than 0 s, at most 86400 s")
    return got


def options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--only", choices=QUESTIONS, help="one question")
    p.add_argument(
        "--requests",
        type=positive,
        default=20000,
        help="requests at the FIFO, and GETs of the raced directory (default 20000)",
    )
    p.add_argument(
        "--probers",
        type=positive,
        default=16,
        help="connections those requests are spread over (default 16)",
    )
    p.add_argument("--readers", type=positive, default=4, help="readers beside them (default 4)")
    p.add_argument(
        "--loop-seconds", type=seconds, default=45.0, help="at most this long per loop (default 45)"
    )
    p.add_argument(
        "--slow",
        type=positive,
        default=600,
        help="slow-body connections (default 600; the servers have 512 workers)",
    )
    p.add_argument(
        "--slow-interval",
        type=seconds,
        default=5.0,
        help="seconds between a slow body's bytes (default 5)",
    )
    p.add_argument(
        "--slow-seconds",
        type=seconds,
        default=40.0,
        help="how long the legitimate client GETs under attack (default 40)",
    )
    p.add_argument(
        "--timeout",
        type=seconds,
        default=20.0,
        help="the legitimate client's timeout, seconds (default 20)",
    )
    p.add_argument(
        "--cap",
        type=positive,
        default=2048,
        help="the servers' --max-connections in the cap question (default 2048)",
    )
    p.add_argument(
        "--gets",
        type=positive,
        default=20,
        help="GETs from the second address in the cap question (default 20)",
    )


def quick(args: argparse.Namespace) -> None:
    args.requests, args.probers, args.readers, args.loop_seconds = 400, 4, 2, 15.0
    args.slow_seconds, args.timeout, args.cap, args.gets = 6.0, 5.0, 256, 5


def check(args: argparse.Namespace) -> str | None:
    """The connections the questions hold must fit this process's descriptor limit."""
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    need = max(args.cap, args.slow) + FD_SPARE
    if hard != resource.RLIM_INFINITY and need > hard:
        return (
            f"--cap {args.cap} / --slow {args.slow} need {need} descriptors, more than "
            f"the hard limit {hard}: give smaller ones (or raise the limit)"
        )
    return None


# ------------------------------------------------------------------ pure parts: the tables


def percentile(values: Sequence[float], q: float) -> float:
    """The nearest-rank *q*-th percentile (0 < q <= 100) of *values* (inf for a failure)."""
    if not values:
        return math.nan
    ranked = sorted(values)
    return ranked[max(0, math.ceil(q / 100 * len(ranked)) - 1)]


def ms(value: float, timeout: float) -> str:
    """Milliseconds, or the timeout it reached ("> 20 s"), or "-" without a value."""
    if math.isnan(value):
        return "-"
    if math.isinf(value) or value >= timeout:
        return f"> {timeout:g} s"
    return f"{value * 1000:.0f}" if value >= 0.01 else f"{value * 1000:.1f}"


def counts(counter: collections.Counter[str]) -> str:
    """ "403 x 1999, cut x 1": the most frequent first; "-" when empty."""
    if not counter:
        return "-"
    return ", ".join(
        f"{k} x {n}" for k, n in sorted(counter.items(), key=lambda kv: (-kv[1], kv[0]))
    )


@dataclass
class Loop:
    """One FIFO or directory loop against one server: what the prober and the readers got."""

    kind: str  # "fifo" or "directory"
    answers: collections.Counter[str] = field(default_factory=collections.Counter)
    readers: collections.Counter[str] = field(default_factory=collections.Counter)
    seconds: float = 0.0
    last_served: float | None = None  # seconds from the start: a reader's last correct body
    served_at_end: bool = False
    tracebacks: int = 0  # in the server's stderr

    def unexpected(self) -> int:
        return sum(n for k, n in self.answers.items() if k not in EXPECTED[self.kind])

    def verdict(self) -> str:
        """stopped (no fresh connection served at the end), broken (a wrong body or answer,
        a cut connection), slow (reads that only timed out), intact."""
        if not self.served_at_end:
            return "stopped serving"
        r = self.readers
        if r["bad body"] or r["status"] or r["cut"] or r["refused"] or self.unexpected():
            return "broken"
        if r["timeout"]:
            return "slow"
        return "intact"

    def end(self) -> str:
        if self.served_at_end:
            return "yes"
        if self.last_served is None:
            return "no (never served)"
        return f"no: last at {self.last_served:.1f} s"

    def row(self, tree: str) -> list[str]:
        r = self.readers
        return [
            tree,
            self.kind,
            counts(self.answers),
            str(sum(r.values())),
            str(r["bad body"]),
            str(r["status"]),
            str(r["cut"] + r["refused"]),
            str(r["timeout"]),
            self.end(),
            str(self.tracebacks),
            self.verdict(),
        ]


LOOP_HEAD = [
    "tree",
    "loop",
    "its answers",
    "reader GETs",
    "wrong bodies",
    "other statuses",
    "cut or refused",
    "timed out",
    "fresh connection served",
    "server tracebacks",
    "verdict",
]


@dataclass
class Starve:
    """The legitimate client's GETs beside one slow-body attack."""

    mode: str
    alone: list[float]  # seconds, inf for a failure
    under: list[float]
    outcomes: collections.Counter[str]
    timeout: float
    opened: int = 0  # attacker connections opened (a closed one is opened again)
    closed: int = 0  # ... closed or answered by the server

    def failed(self) -> int:
        return sum(1 for v in self.under if math.isinf(v) or v >= self.timeout)

    def verdict(self) -> str:
        """served (every GET in time), starved (at least half failed), partly starved."""
        if not self.under:
            return "no data"
        bad = self.failed()
        if bad == 0:
            return "served"
        return "starved" if 2 * bad >= len(self.under) else "partly starved"

    def row(self, tree: str) -> list[str]:
        t = self.timeout
        return [
            tree,
            self.mode,
            ms(percentile(self.alone, 50), t),
            str(len(self.under)),
            ms(percentile(self.under, 50), t),
            ms(percentile(self.under, 99), t),
            str(self.failed()),
            f"{self.opened} / {self.closed}",
            self.verdict(),
        ]


STARVE_HEAD = [
    "tree",
    "server",
    "alone p50 ms",
    "GETs under attack",
    "p50 ms",
    "p99 ms",
    "failed",
    "attacker connections opened / closed by the server",
    "verdict",
]


@dataclass
class Greedy:
    """One address holding what it can, and a second address's GETs meanwhile."""

    cap: int
    per_client: int | None  # the tree's limit per address (None: it has none)
    held: int
    answers: collections.Counter[str]
    latencies: list[float]  # seconds of the answered GETs
    timeout: float

    def verdict(self) -> str:
        ok = self.answers.get("200", 0)
        total = sum(self.answers.values())
        if total and ok == total:
            return "served"
        return "refused" if ok == 0 else "partly refused"

    def row(self, tree: str) -> list[str]:
        limit = "none" if self.per_client is None else str(self.per_client)
        return [
            tree,
            limit,
            f"{self.held} of {self.cap}",
            counts(self.answers),
            ms(percentile(self.latencies, 50), self.timeout),
            self.verdict(),
        ]


GREEDY_HEAD = [
    "tree",
    "per-client limit",
    "first address holds",
    "second address answered",
    "p50 ms",
    "verdict",
]


def per_client_of(tree: Tree, cap: int) -> int | None:
    """The tree's default connections per client address under *cap* (None: no such limit),
    read from its source: an eighth of the cap, at least 64, at most half (see conn.py)."""
    text = (tree.src / "dtnkit/transfer/server/conn.py").read_text()
    share = re.search(r"^PER_CLIENT_SHARE = (\d+)", text, re.M)
    floor = re.search(r"^PER_CLIENT_FLOOR = (\d+)", text, re.M)
    if not share or not floor:
        return None
    return max(1, cap // int(share.group(1)), min(int(floor.group(1)), cap // 2))


def workers_of(tree: Tree) -> int | None:
    text = (tree.src / "dtnkit/transfer/server/conn.py").read_text()
    m = re.search(r"^WORKERS = (\d+)", text, re.M)
    return int(m.group(1)) if m else None


# ------------------------------------------------------------------ servers and clients


@dataclass
class Server:
    proc: subprocess.Popen[str]
    port: int
    stderr: Path

    def tracebacks(self) -> int:
        return self.stderr.read_text(errors="replace").count("Traceback")


class Files:
    """The served tree: the readers' files with their sha256, a small file, a FIFO."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.digests: dict[str, str] = {}
        for name, size in [*FILES.items(), (SMALL, 64 * 1024)]:
            data = os.urandom(size)
            (root / name).write_bytes(data)
            self.digests[name] = hashlib.sha256(data).hexdigest()
        os.mkfifo(root / "pipe")


@contextlib.contextmanager
def serving(b: Bench, tree: Tree, files: Files, state: Path, *flags: str) -> Iterator[Server]:
    """*tree*'s ``dtnkit serve`` of the files (the bench token read,write), stopped after."""
    state.mkdir(exist_ok=True)
    tokens = state / "tokens"
    tokens.write_text(f"{TOKEN} read,write\n")
    tokens.chmod(0o600)
    err = state / f"serve-{time.monotonic_ns()}.stderr"
    with err.open("w") as stderr:
        proc = b.tracked.add(
            subprocess.Popen(
                tree.dtnkit(
                    "serve",
                    "--root",
                    str(files.root),
                    "--host",
                    HOST,
                    "--port",
                    "0",
                    "--tokens",
                    str(tokens),
                    "--quiet",
                    "--drain-timeout",
                    "1s",
                    *flags,
                ),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=stderr,
                text=True,
                env=tree.env(state),
            )
        )
    try:
        assert proc.stdout is not None
        url = listening_url(proc.stdout.readline())
        yield Server(proc, int(url.rstrip("/").rsplit(":", 1)[-1]), err)
    finally:
        b.tracked.stop(proc)  # SIGTERM, SIGKILL after 10 s: a hung server goes too


def fetch(
    port: int,
    path: str,
    sha: str | None,
    *,
    source: str = HOST,
    token: str | None = None,
    timeout: float = READ_TIMEOUT,
) -> tuple[str, str, float]:
    """One GET on a new connection: (outcome, status, seconds).  Outcomes: ok, bad body (a 200
    with other bytes), status (another answer), cut (the connection ended early), timeout (no
    answer within *timeout*), refused (no connection)."""
    t0 = time.monotonic()
    conn = http.client.HTTPConnection(HOST, port, timeout=timeout, source_address=(source, 0))
    try:
        try:
            conn.connect()
        except OSError:
            return "refused", "-", time.monotonic() - t0
        try:
            conn.request(
                "GET",
                path,
                headers={
                    "Connection": "close",
                    **({"Authorization": f"Bearer {token}"} if token else {}),
                },
            )
            resp = conn.getresponse()
            body = resp.read()
        except TimeoutError:
            return "timeout", "-", time.monotonic() - t0
        except (OSError, http.client.HTTPException):
            return "cut", "-", time.monotonic() - t0
        took = time.monotonic() - t0
        if resp.status != 200:
            return "status", str(resp.status), took
        if sha is not None and hashlib.sha256(body).hexdigest() != sha:
            return "bad body", "200", took
        return "ok", "200", took
    finally:
        conn.close()


class KeepAlive:
    """Requests on one kept-alive connection (opened again when the server ends it); each
    answer as its status, or cut / timeout / refused."""

    def __init__(self, port: int, token: str | None = None) -> None:
        self.port = port
        self.headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.conn: http.client.HTTPConnection | None = None

    def ask(self, method: str, path: str) -> str:
        if self.conn is None:
            self.conn = http.client.HTTPConnection(HOST, self.port, timeout=READ_TIMEOUT)
            try:
                self.conn.connect()
            except OSError:
                self.close()
                return "refused"
        try:
            self.conn.request(method, path, headers=self.headers)
            resp = self.conn.getresponse()
            resp.read()
        except TimeoutError:
            self.close()
            return "timeout"
        except (OSError, http.client.HTTPException):
            self.close()
            return "cut"
        if resp.will_close:
            self.close()
        return str(resp.status)

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None


def threads(targets: Sequence[Callable[[], None]]) -> list[threading.Thread]:
    started = [threading.Thread(target=t, daemon=True) for t in targets]
    for t in started:
        t.start()
    return started


def join(started: Sequence[threading.Thread], within: float) -> None:
    deadline = time.monotonic() + within
    for t in started:
        t.join(max(0.0, deadline - time.monotonic()))


# ------------------------------------------------------------------ fifo: the double close


def loop(
    srv: Server, files: Files, kind: str, requests: int, probers: int, readers: int, seconds: float
) -> Loop:
    got = Loop(kind)
    lock = threading.Lock()
    stop = threading.Event()
    left = [requests]  # requests still to make, shared by the probers
    t0 = time.monotonic()

    def reader(i: int) -> None:
        names = list(FILES)
        while not stop.is_set():
            name = names[i % len(names)]
            i += 1
            outcome, _status, _took = fetch(srv.port, "/" + name, files.digests[name])
            with lock:
                got.readers[outcome] += 1
                if outcome == "ok":
                    got.last_served = time.monotonic() - t0
            if outcome == "refused":
                stop.wait(0.05)  # a server that stopped accepting refuses at once: no spin

    def prober() -> None:
        conn = KeepAlive(srv.port)
        try:
            while not stop.is_set():
                with lock:
                    i = left[0]
                    left[0] -= 1
                if i <= 0:
                    break
                answer = (
                    conn.ask("HEAD" if i % 2 else "GET", "/pipe")
                    if kind == "fifo"
                    else conn.ask("GET", "/race/")
                )
                with lock:
                    got.answers[answer] += 1
                if answer == "refused":
                    stop.wait(0.05)
        finally:
            conn.close()

    def racer() -> None:  # a write token makes and removes the directory being listed
        conn = KeepAlive(srv.port, TOKEN)
        try:
            while not stop.is_set():
                for method in ("MKCOL", "DELETE"):
                    if conn.ask(method, "/race") == "refused":
                        stop.wait(0.05)
        finally:
            conn.close()

    probing = threads([prober] * probers)
    started = [
        *probing,
        *threads(
            [functools.partial(reader, i) for i in range(readers)]
            + ([racer] if kind == "directory" else [])
        ),
    ]
    while any(t.is_alive() for t in probing):
        stop.wait(0.2)
        now = time.monotonic() - t0
        with lock:
            last = got.last_served if got.last_served is not None else 0.0
        if now >= seconds or now - last >= QUIET:
            break
    got.seconds = time.monotonic() - t0
    stop.set()
    join(started, READ_TIMEOUT + 5)
    name = next(iter(FILES))
    for _ in range(3):  # a fresh connection, three tries
        if fetch(srv.port, "/" + name, files.digests[name])[0] == "ok":
            got.served_at_end = True
            break
    got.tracebacks = srv.tracebacks()
    return got


# ------------------------------------------------------------------ slow: bodies that trickle


class Trickle:
    """*count* connections from HOST, each a GET head announcing a BODY-byte body, then one
    byte per *interval*; a connection the server answers or closes is opened again."""

    def __init__(self, port: int, count: int, interval: float) -> None:
        self.port, self.count, self.interval = port, count, interval
        self.head = (
            f"GET /{SMALL} HTTP/1.1\r\nHost: {HOST}\r\nContent-Length: {BODY}\r\n\r\n"
        ).encode()
        self.opened = self.closed = 0
        self.stop = threading.Event()
        self.ready = threading.Event()  # every connection opened once
        self.thread = threading.Thread(target=self.run, daemon=True)

    def __enter__(self) -> Trickle:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join(30)

    def run(self) -> None:
        socks: list[socket.socket | None] = [None] * self.count
        try:
            while not self.stop.is_set():
                for i in range(self.count):
                    if self.stop.is_set():
                        break
                    s = socks[i]
                    if s is not None and not self.trickle(s):
                        self.closed += 1
                        s.close()
                        s = socks[i] = None
                    if s is None:
                        socks[i] = self.open()
                self.ready.set()
                self.stop.wait(self.interval)
        finally:
            for s in socks:
                if s is not None:
                    s.close()
            self.ready.set()

    def open(self) -> socket.socket | None:
        try:
            s = socket.create_connection((HOST, self.port), timeout=2, source_address=(HOST, 0))
        except OSError:
            return None
        try:
            s.sendall(self.head)
        except OSError:
            s.close()
            return None
        s.setblocking(False)
        self.opened += 1
        return s

    @staticmethod
    def trickle(s: socket.socket) -> bool:
        """One more byte; False when the server has answered or closed the connection."""
        try:
            s.recv(1, socket.MSG_PEEK)
            return False  # an answer (401, 408, 400) or the end of the connection
        except BlockingIOError:
            pass
        except OSError:
            return False
        try:
            s.send(b"a")
        except BlockingIOError:
            pass
        except OSError:
            return False
        return True


def legitimate(
    port: int, sha: str, timeout: float, *, seconds: float | None = None, count: int = ALONE
) -> tuple[list[float], collections.Counter[str]]:
    """GETs of SMALL with the token from OTHER: *count* in turn, or one every EVERY s for
    *seconds*, each in its own thread; their seconds (inf when failed) and outcomes."""
    took: list[float] = []
    outcomes: collections.Counter[str] = collections.Counter()
    lock = threading.Lock()

    def one() -> None:
        outcome, status, t = fetch(
            port, "/" + SMALL, sha, source=OTHER, token=TOKEN, timeout=timeout
        )
        with lock:
            took.append(t if outcome == "ok" else math.inf)
            outcomes[outcome if outcome != "status" else status] += 1

    if seconds is None:
        for _ in range(count):
            one()
        return took, outcomes
    started: list[threading.Thread] = []
    end = time.monotonic() + seconds
    tick = threading.Event()
    while time.monotonic() < end:
        started += threads([one])
        tick.wait(EVERY)
    join(started, timeout + 5)
    return took, outcomes


def starve(srv: Server, files: Files, mode: str, a: argparse.Namespace) -> Starve:
    alone, _ = legitimate(srv.port, files.digests[SMALL], a.timeout)
    with Trickle(srv.port, a.slow, a.slow_interval) as attack:
        attack.ready.wait(60)
        under, outcomes = legitimate(
            srv.port, files.digests[SMALL], a.timeout, seconds=a.slow_seconds
        )
        opened, closed = attack.opened, attack.closed
    return Starve(mode, alone, under, outcomes, a.timeout, opened, closed)


# ------------------------------------------------------------------ cap: one greedy address


def hold(port: int, count: int) -> tuple[list[socket.socket], int]:
    """*count* connections from HOST, no request on them; (the sockets, how many the server
    answered or closed at once: refused).  Waits until no more refusals come for 1 s."""
    socks: list[socket.socket] = []
    for _ in range(count):
        try:
            s = socket.create_connection((HOST, port), timeout=5, source_address=(HOST, 0))
        except OSError:
            continue
        s.setblocking(False)
        socks.append(s)
    refused: set[int] = set()
    quiet_since = time.monotonic()
    end = quiet_since + 15
    pause = threading.Event()
    while time.monotonic() < end and time.monotonic() - quiet_since < 1.0:
        for i, s in enumerate(socks):
            if i in refused:
                continue
            try:
                s.recv(1, socket.MSG_PEEK)
            except BlockingIOError:
                continue
            except OSError:
                pass
            refused.add(i)
            quiet_since = time.monotonic()
        pause.wait(0.1)
    return socks, len(refused)


def greedy(srv: Server, files: Files, tree: Tree, a: argparse.Namespace) -> Greedy:
    socks, refused = hold(srv.port, a.cap)
    try:
        answers: collections.Counter[str] = collections.Counter()
        took: list[float] = []
        for _ in range(a.gets):
            outcome, status, t = fetch(
                srv.port, "/" + SMALL, files.digests[SMALL], source=OTHER, timeout=a.timeout
            )
            answers[status if status != "-" else outcome] += 1
            if outcome in ("ok", "status"):
                took.append(t)
        return Greedy(
            a.cap, per_client_of(tree, a.cap), len(socks) - refused, answers, took, a.timeout
        )
    finally:
        for s in socks:
            s.close()


# ------------------------------------------------------------------ the case


def trees_of(b: Bench) -> dict[str, Tree]:
    assert b.base is not None
    return {"base": b.base, "this": b.this}


def label(name: str, k: int, rounds: int) -> str:
    return name if rounds == 1 else f"{name} #{k + 1}"


def ask_fifo(b: Bench, files: Files, work: Path) -> None:
    a = b.args
    runs: list[tuple[str, Loop]] = []

    def one(name: str, kind: str) -> float:
        with serving(b, trees_of(b)[name], files, work / name, "--anonymous-read") as srv:
            got = loop(srv, files, kind, a.requests, a.probers, a.readers, a.loop_seconds)
        k = sum(1 for n, x in runs if n.split()[0] == name and x.kind == kind)
        runs.append((label(name, k, b.rounds), got))
        b.result.add(
            "runs",
            {
                "question": "fifo",
                "tree": name,
                "kind": kind,
                "answers": got.answers,
                "readers": got.readers,
                "seconds": got.seconds,
                "last_served": got.last_served,
                "served_at_end": got.served_at_end,
                "tracebacks": got.tracebacks,
                "verdict": got.verdict(),
            },
        )
        return float(got.readers["ok"])

    watch = b.watch()
    b.rounds_of(
        {
            f"{t} {kind}": functools.partial(one, t, kind)
            for kind in ("fifo", "directory")
            for t in ("base", "this")
        },
        label="fifo",
        keep_going=True,
    )
    b.table(
        LOOP_HEAD,
        [x.row(name) for name, x in runs],
        title=f"A FIFO ({a.requests} GET/HEAD) and a directory made and deleted while "
        f"listed ({a.requests} GETs), beside {a.readers} readers checking sha256; "
        f"at most {a.loop_seconds:g} s a loop",
    )
    b.load_line(watch, "The FIFO and directory loops")


def ask_slow(b: Bench, files: Files, work: Path) -> None:
    a = b.args
    runs: list[tuple[str, Starve]] = []
    modes = {"tokens only": (), "--anonymous-read": ("--anonymous-read",)}

    def one(name: str, mode: str) -> float:
        with serving(b, trees_of(b)[name], files, work / name, *modes[mode]) as srv:
            got = starve(srv, files, mode, a)
        k = sum(1 for n, x in runs if n.split()[0] == name and x.mode == mode)
        runs.append((label(name, k, b.rounds), got))
        b.result.add(
            "runs",
            {
                "question": "slow",
                "tree": name,
                "mode": mode,
                "alone": got.alone,
                "under": got.under,
                "outcomes": got.outcomes,
                "opened": got.opened,
                "closed": got.closed,
                "verdict": got.verdict(),
            },
        )
        return percentile(got.under, 50)

    watch = b.watch()
    b.rounds_of(
        {
            f"{t} {mode}": functools.partial(one, t, mode)
            for mode in modes
            for t in ("base", "this")
        },
        label="slow",
        keep_going=True,
    )
    workers = {n: workers_of(t) for n, t in trees_of(b).items()}
    b.table(
        STARVE_HEAD,
        [x.row(name) for name, x in runs],
        title=f"{a.slow} slow GET bodies (1 byte / {a.slow_interval:g} s, no token; "
        f"workers: base {workers['base']}, this {workers['this']}); a GET with a "
        f"token every {EVERY:g} s for {a.slow_seconds:g} s from {OTHER}, "
        f"timeout {a.timeout:g} s",
    )
    b.load_line(watch, "The slow-body runs")


def ask_cap(b: Bench, files: Files, work: Path) -> None:
    a = b.args
    runs: list[tuple[str, Greedy]] = []

    def one(name: str) -> float:
        tree = trees_of(b)[name]
        with serving(
            b,
            tree,
            files,
            work / name,
            "--anonymous-read",
            "--max-connections",
            str(a.cap),
            "--head-timeout",
            "120s",
        ) as srv:
            got = greedy(srv, files, tree, a)
        k = sum(1 for n, _x in runs if n.split()[0] == name)
        runs.append((label(name, k, b.rounds), got))
        b.result.add(
            "runs",
            {
                "question": "cap",
                "tree": name,
                "held": got.held,
                "per_client": got.per_client,
                "answers": got.answers,
                "latencies": got.latencies,
                "verdict": got.verdict(),
            },
        )
        return float(got.held)

    watch = b.watch()
    b.rounds_of(
        {t: functools.partial(one, t) for t in ("base", "this")}, label="cap", keep_going=True
    )
    b.table(
        GREEDY_HEAD,
        [x.row(name) for name, x in runs],
        title=f"--max-connections {a.cap}: {HOST} holds what it can, {OTHER} makes {a.gets} GETs",
    )
    b.load_line(watch, "The cap runs")


def run(b: Bench) -> int | None:
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    a = b.args
    work = b.workdir(mode=0o755)
    root = work / "root"
    root.mkdir()
    files = Files(root)
    asks = {"fifo": ask_fifo, "slow": ask_slow, "cap": ask_cap}
    for name in QUESTIONS:
        if a.only in (None, name):
            asks[name](b, files, work)
    return None


CASE = Case(
    run=run,
    options=options,
    quick=quick,
    check=check,
    rounds=1,
    base="required",
    quick_help="200 requests, 2 readers, 6 s of slow bodies, a cap of 256",
)
