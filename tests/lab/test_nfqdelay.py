"""dtnkit.lab.nfqdelay: config validation (pure) and the engine on a real namespace path.

The path: dknq<hex>-src <-> dknq<hex>-path <-> dknq<hex>-dst (veth, /30s), with the engine
in -path and NFQUEUE FORWARD rules (queue 0 src->dst, queue 1 dst->src).
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import random
import re
import secrets
import shutil
import signal
import struct
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest
from tests.support.lab import DelayCheck, Round

from conftest import sh
from dtnkit.host.parsers import netlink
from dtnkit.lab import nfqdelay, nfqueue
from dtnkit.lab.delay import config, stats
from dtnkit.lab.delay.engine import Engine as DelayEngine

SRC = Path(__file__).resolve().parents[2] / "src"
SRC_IP, MID_SRC_IP, MID_DST_IP, DST_IP = "10.250.77.1", "10.250.77.2", "10.250.77.5", "10.250.77.6"

_missing = [t for t in ("iptables", "ping") if shutil.which(t) is None]
_MARKS = (
    pytest.mark.needs_root,
    pytest.mark.needs_netns,
    pytest.mark.skipif(
        bool(_missing),
        reason=f"needs {' and '.join(_missing)} (apt-get install -y iptables iputils-ping)",
    ),
)
F = TypeVar("F", bound=Callable[..., Any])


def real_path(fn: F) -> F:
    """Root, namespaces, iptables and ping."""
    for mark in _MARKS:
        fn = mark(fn)
    return fn


# ---- config validation (no root) -----------------------------------------------------------
def write(tmp_path: Path, doc: Any, name: str = "c.json") -> Path:
    path = tmp_path / name
    path.write_text(doc if isinstance(doc, str) else json.dumps(doc))
    return path


def test_load_config_reads_queues_and_seed(tmp_path: Path) -> None:
    cfg = config.load_config(
        write(
            tmp_path,
            {"queues": {"0": {"delay_ms": 25.0, "loss": 0.0001}, "1": {"delay_ms": 25}}, "seed": 7},
        )
    )
    assert cfg.queues == {0: config.QueueConfig(25.0, 0.0001), 1: config.QueueConfig(25.0)}
    assert cfg.seed == 7
    assert cfg.as_json()["queues"]["1"] == {"delay_ms": 25.0, "loss": 0.0}
    assert config.load_config(write(tmp_path, {"queues": {"3": {"delay_ms": 0}}})).seed == 1


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        ("{not json", "not valid JSON"),
        ([], "JSON object"),
        ({"queues": {}}, "non-empty"),
        ({"queues": {"0": {"delay_ms": -1}}}, "delay_ms is -1, allowed 0 to 10000"),
        ({"queues": {"0": {"delay_ms": 10000.5}}}, "allowed 0 to 10000"),
        ({"queues": {"0": {"delay_ms": 5, "loss": 1.5}}}, "loss is 1.5, allowed 0 to 1"),
        ({"queues": {"0": {"delay_ms": 5, "loss": -0.1}}}, "allowed 0 to 1"),
        ({"queues": {"0": {"delay_ms": "5"}}}, "must be a number"),
        ({"queues": {"0": {"delay_ms": True}}}, "must be a number"),
        ('{"queues": {"0": {"delay_ms": NaN}}}', "allowed 0 to 10000"),
        ({"queues": {"0": {"loss": 0.1}}}, '"delay_ms" is missing'),
        ({"queues": {"0": {"delay_ms": 5, "jitter": 1}}}, "unknown key 'jitter'"),
        ({"queues": {"x": {"delay_ms": 5}}}, "queue number"),
        ({"queues": {"70000": {"delay_ms": 5}}}, "queue number"),
        ({"queues": {"0": 5}}, "must be an object"),
        ({"queues": {"0": {"delay_ms": 5}}, "seed": 1.5}, "seed must be an integer"),
        ({"queues": {"0": {"delay_ms": 5}}, "rate": 1}, "unknown key 'rate'"),
    ],
)
def test_bad_config_is_rejected_with_a_clear_message(
    tmp_path: Path, doc: Any, message: str
) -> None:
    path = write(tmp_path, doc)
    with pytest.raises(ValueError, match=re.escape(message)) as info:
        config.load_config(path)
    assert str(path) in str(info.value) and "\n" not in str(info.value)


def test_bad_config_exits_2_with_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(tmp_path, {"queues": {"0": {"delay_ms": 20000}}})
    assert nfqdelay.main(["--config", str(path), "--stats", str(tmp_path / "s.json")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "delay_ms is 20000" in err
    assert not (tmp_path / "s.json").exists()
    assert nfqdelay.main(["--config", str(tmp_path / "missing.json")]) == 2
    assert "cannot read" in capsys.readouterr().err
    good = write(tmp_path, {"queues": {"0": {"delay_ms": 1}}}, "good.json")
    assert nfqdelay.main(["--config", str(good), "--spin-ms", "9"]) == 2
    assert "--spin-ms 0..5" in capsys.readouterr().err


def packet_msg(queue: int, packet_id: int, length: int | None = None) -> bytes:
    """An NFQNL_MSG_PACKET as the kernel sends it (header attribute first)."""
    attrs = (
        struct.pack("=HH", 11, nfqueue.NFQA_PACKET_HDR)
        + struct.pack(">IHB", packet_id, 0x0800, 2)
        + b"\0"
    )
    attrs += struct.pack("=HH", 8, 3) + struct.pack(">I", 0)  # NFQA_MARK
    if length is not None:
        attrs += struct.pack("=HH", 8, nfqueue.NFQA_CAP_LEN) + struct.pack(">I", length)
        attrs += struct.pack("=HH", 5, nfqueue.NFQA_PAYLOAD) + b"E\0\0\0"
    body = struct.pack(">BBH", 2, 0, queue) + attrs
    return struct.pack("=IHHII", 16 + len(body), nfqueue.MSG_PACKET, 0, 0, 0) + body


class FakeSocket:
    """recv_into from a list of datagrams, then EAGAIN, like the non-blocking socket."""

    def __init__(self, datagrams: list[bytes]) -> None:
        self.datagrams = datagrams

    def recv_into(self, buf: bytearray) -> int:
        if not self.datagrams:
            raise BlockingIOError
        data = self.datagrams.pop(0)
        buf[: len(data)] = data
        return len(data)


def verdicts(out: list[bytes]) -> list[tuple[int, int, int, int]]:
    """(message type, queue, verdict, id) of each verdict message sent."""
    data = b"".join(out)
    return [
        (
            struct.unpack_from("=H", data, off + 4)[0] & 0xFF,
            struct.unpack_from(">H", data, off + 18)[0],
            *struct.unpack_from(">II", data, off + 24),
        )
        for off in range(0, len(data), 32)
    ]


@pytest.mark.parametrize("count_bytes", [False, True])
def test_drain_parses_every_message_and_releases_fifo_in_one_batch(count_bytes: bool) -> None:
    cfg = config.parse_config(
        {"queues": {"0": {"delay_ms": 10}, "1": {"delay_ms": 5, "loss": 1.0}}}
    )
    engine = DelayEngine(cfg, Path("unused"), None, count_bytes=count_bytes)
    size = 1500 if count_bytes else None
    error_ack = (
        struct.pack("=IHHII", 36, netlink.NLMSG_ERROR, 0, 0, 0)
        + struct.pack("=i", -2)
        + struct.pack("=IHHII", 32, 0x301, 1, 0, 0)
    )
    engine.sock = FakeSocket(
        [  # type: ignore[assignment]
            packet_msg(0, 7, size) + packet_msg(0, 8, size) + packet_msg(1, 3, size),  # one recv
            error_ack + packet_msg(0, 9, size),
        ]
    )
    start = time.monotonic()
    engine.drain()
    q0, q1 = engine.queues[0], engine.queues[1]
    assert [pid for _, pid in q0.held] == [7, 8, 9] and q0.packets == 3
    assert q1.dropped == 1 and not q1.held  # loss 1.0: an NF_DROP verdict at once
    assert verdicts(engine.out) == [(nfqueue.NFQNL_MSG_VERDICT, 1, nfqueue.NF_DROP, 3)]
    assert engine.verdict_errors == 1 and engine.last_verdict_error == os.strerror(2)
    assert q0.bytes == (4500 if count_bytes else 0)
    engine.out.clear()
    assert engine.release_due(start) == q0.held[0][0]  # nothing due yet
    assert not engine.out
    nxt = engine.release_due(time.monotonic() + 1)
    assert nxt is None and q0.released == 3 and not q0.held
    assert verdicts(engine.out) == [(nfqueue.NFQNL_MSG_VERDICT_BATCH, 0, nfqueue.NF_ACCEPT, 9)]
    doc = engine.stats()
    assert doc["queues"]["0"]["held_max"] == 3 and doc["lateness_ms"]["count"] == 3
    assert doc["queues"]["0"]["bytes"] == (4500 if count_bytes else None)


def test_verdict_and_bind_messages_are_well_formed() -> None:
    msg = nfqueue.verdict_msg(1, 0x01020304, nfqueue.NF_ACCEPT, batch=True)
    length, mtype, flags, _seq, _pid = struct.unpack_from("=IHHII", msg)
    assert length == len(msg) == 32 and flags == netlink.NLM_F_REQUEST
    assert mtype == (3 << 8) | nfqueue.NFQNL_MSG_VERDICT_BATCH
    assert struct.unpack_from(">BBH", msg, 16) == (0, 0, 1)  # res_id = queue, big-endian
    assert struct.unpack_from("=HH", msg, 20) == (12, nfqueue.NFQA_VERDICT_HDR)
    assert struct.unpack_from(">II", msg, 24) == (1, 0x01020304)
    bind = nfqueue.bind_msg(2, 9, copy_mode=nfqueue.NFQNL_COPY_META, copy_range=0, maxlen=1 << 20)
    assert struct.unpack_from("=I", bind)[0] == len(bind) and len(bind) % 4 == 0
    attrs, off = {}, 20
    while off < len(bind):
        alen, atype = struct.unpack_from("=HH", bind, off)
        attrs[atype] = bind[off + 4 : off + alen]
        off += (alen + 3) & ~3
    assert attrs[nfqueue.NFQA_CFG_PARAMS] == struct.pack(">IB", 0, nfqueue.NFQNL_COPY_META)
    assert attrs[nfqueue.NFQA_CFG_QUEUE_MAXLEN] == struct.pack(">I", 1 << 20)
    assert (
        attrs[nfqueue.NFQA_CFG_FLAGS]
        == attrs[nfqueue.NFQA_CFG_MASK]
        == struct.pack(">I", nfqueue.NFQA_CFG_F_GSO)
    )


# ---- the real path ---------------------------------------------------------------------------
class LabPath:
    def __init__(self, tmp: Path) -> None:
        prefix = f"dknq{secrets.token_hex(3)}"
        self.src, self.mid, self.dst = (f"{prefix}-{n}" for n in ("src", "path", "dst"))
        self.tmp = tmp

    def ns(self, ns: str, *argv: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return sh("ip", "netns", "exec", ns, *argv, check=check)

    def create(self) -> None:
        for ns in (self.src, self.mid, self.dst):
            sh("ip", "netns", "add", ns)
            sh("ip", "-n", ns, "link", "set", "lo", "up")
        sh(
            "ip",
            "-n",
            self.src,
            "link",
            "add",
            "s0",
            "type",
            "veth",
            "peer",
            "name",
            "p0",
            "netns",
            self.mid,
        )
        sh(
            "ip",
            "-n",
            self.mid,
            "link",
            "add",
            "p1",
            "type",
            "veth",
            "peer",
            "name",
            "d0",
            "netns",
            self.dst,
        )
        for ns, dev, addr in (
            (self.src, "s0", SRC_IP),
            (self.mid, "p0", MID_SRC_IP),
            (self.mid, "p1", MID_DST_IP),
            (self.dst, "d0", DST_IP),
        ):
            sh("ip", "-n", ns, "addr", "add", f"{addr}/30", "dev", dev)
            sh("ip", "-n", ns, "link", "set", dev, "up")
        sh("ip", "-n", self.src, "route", "add", "default", "via", MID_SRC_IP)
        sh("ip", "-n", self.dst, "route", "add", "default", "via", MID_DST_IP)
        self.ns(self.mid, "sysctl", "-qw", "net.ipv4.ip_forward=1")
        self.rules("-A")

    def rules(self, action: str, *extra: str) -> None:
        for dev, q in (("p0", "0"), ("p1", "1")):
            self.ns(
                self.mid,
                "iptables",
                "-w",
                action,
                "FORWARD",
                "-i",
                dev,
                "-j",
                "NFQUEUE",
                "--queue-num",
                q,
                *extra,
            )

    def delete(self) -> None:
        for ns in (self.src, self.mid, self.dst):
            sh("ip", "netns", "del", ns, check=False)

    def ping(self, count: int = 50, interval: str = "0.01", wait: str = "2") -> dict[str, float]:
        out = self.ns(
            self.src,
            "ping",
            "-q",
            "-n",
            "-c",
            str(count),
            "-i",
            interval,
            "-W",
            wait,
            DST_IP,
            check=False,
        ).stdout
        sent = re.search(r"(\d+) packets transmitted, (\d+) received", out)
        assert sent, out
        doc = {"sent": float(sent[1]), "received": float(sent[2])}
        rtt = re.search(r"= ([\d.]+)/([\d.]+)/([\d.]+)/([\d.]+) ms", out)
        if rtt:
            doc.update(min=float(rtt[1]), avg=float(rtt[2]), max=float(rtt[3]), mdev=float(rtt[4]))
        return doc


class Engine:
    """One engine process in the path's middle namespace; stopped by PID."""

    def __init__(self, path: LabPath, name: str = "e") -> None:
        self.path = path
        self.config = path.tmp / f"{name}.json"
        self.stats = path.tmp / f"{name}-stats.json"
        self.log = path.tmp / f"{name}.log"
        self.proc: subprocess.Popen[bytes] | None = None

    def configure(self, q0: float, q1: float, loss: float = 0.0, seed: int = 1) -> None:
        doc = {"queues": {"0": {"delay_ms": q0, "loss": loss}, "1": {"delay_ms": q1}}, "seed": seed}
        tmp = self.config.with_suffix(".tmp")
        tmp.write_text(json.dumps(doc))
        os.replace(tmp, self.config)

    def start(self, *extra: str, wait: bool = True) -> None:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(SRC), *sys.path])}
        with self.log.open("wb") as log:
            self.proc = subprocess.Popen(
                [
                    "ip",
                    "netns",
                    "exec",
                    self.path.mid,
                    sys.executable,
                    "-m",
                    "dtnkit.lab.nfqdelay",
                    "--config",
                    str(self.config),
                    "--stats",
                    str(self.stats),
                    *extra,
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
            )
        if wait:
            until(
                lambda: self.stats.exists() or self.proc is None or self.proc.poll() is not None, 10
            )
            assert self.stats.exists(), self.log.read_text()

    def read(self) -> dict[str, Any]:
        return stats.read_stats(self.stats)

    def signal(self, sig: int) -> None:
        assert self.proc is not None
        self.proc.send_signal(sig)

    def stop(self) -> int | None:
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        return self.proc.returncode


def until(cond: Callable[[], bool], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)  # polling a file or a process, bounded by the deadline
    return True


def stats_config_is(engine: Engine, q0: float) -> Callable[[], bool]:
    def check() -> bool:
        try:
            return bool(engine.read()["config"]["queues"]["0"]["delay_ms"] == q0)
        except (OSError, ValueError, KeyError):
            return False

    return check


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LabPath]:
    path = LabPath(tmp_path_factory.mktemp("nfqdelay"))
    try:
        path.create()
        yield path
    finally:
        path.delete()


@pytest.fixture
def engine(lab: LabPath, request: pytest.FixtureRequest) -> Iterator[Engine]:
    eng = Engine(lab, request.node.name.replace("[", "-").replace("]", ""))
    try:
        yield eng
    finally:
        eng.stop()


def assert_rtt(
    lab: LabPath, engine: Engine, rtt: float, count: int = 10, rounds: int = 4, attempts: int = 3
) -> None:
    """The RTT is the configured one, judged against the noise measured in the same test:
    rounds of pings with the engine at delay 0 (the reference: the same engine and namespaces,
    the same load on the machine) in turn with rounds at rtt/2 each way, no loss (see
    tests/support/lab.py's DelayCheck).  Up to three tries: a burst of other work cannot fail
    it, a real bias or jitter of the engine fails every try.  The engine is left at rtt/2."""

    def ping_at(one_way: float) -> Round:
        engine.configure(one_way, one_way)
        engine.signal(signal.SIGHUP)
        assert until(stats_config_is(engine, one_way), 5)
        p = lab.ping(count=count, interval="0.05")
        assert p["received"] == p["sent"], p
        return Round(p["min"], p["avg"], p["mdev"])

    tries = []
    for _ in range(attempts):
        check = DelayCheck(rtt, [], [])
        for _ in range(rounds):
            check.reference.append(ping_at(0.0))
            check.delayed.append(ping_at(rtt / 2))
            late = (engine.read().get("lateness_ms") or {}).get("p99")
            check.delayed[-1].late = float(late or 0.0)
        tries.append(check)
        if check.ok():
            return
    pytest.fail(
        f"RTT {rtt} ms off in every try: "
        + "; ".join(
            f"early {c.early_ms:.3f} ms, excess {c.excess_ms:.3f} ms, extra mdev "
            f"{c.extra_jitter_ms:.3f} ms ({c})"
            for c in tries
        )
    )


@pytest.mark.serial
@real_path
@pytest.mark.parametrize(("rtt", "spin"), [(10, "0"), (100, "0"), (10, "1")])
def test_idle_rtt_is_accurate(engine: Engine, lab: LabPath, rtt: int, spin: str) -> None:
    engine.configure(rtt / 2, rtt / 2)
    engine.start("--spin-ms", spin)
    assert_rtt(lab, engine, rtt)
    assert engine.stop() == 0
    stats = engine.read()  # the final stats, written at exit
    assert stats["running"] is False
    for q in ("0", "1"):
        assert stats["queues"][q]["packets"] >= 50 and stats["queues"][q]["dropped_loss"] == 0
        assert stats["queues"][q]["released"] == stats["queues"][q]["packets"]
    assert set(stats["lateness_ms"]) >= {"p50", "p99", "max"}


@pytest.mark.serial
@real_path
def test_loss_follows_the_seeded_binomial(engine: Engine, lab: LabPath) -> None:
    loss, seed = 0.05, 42
    engine.configure(0.0, 0.0, loss=loss, seed=seed)
    engine.start()
    p = lab.ping(count=2000, interval="0.001", wait="1")
    assert engine.stop() == 0
    q0 = engine.read()["queues"]["0"]
    n, dropped = q0["packets"], q0["dropped_loss"]
    assert n >= 2000
    assert dropped == p["sent"] - p["received"]  # queue 1 has no loss
    assert abs(dropped - n * loss) <= 4 * math.sqrt(n * loss * (1 - loss))
    rng = random.Random(f"{seed}:0")  # documented: one draw per packet on queue 0
    assert dropped == sum(rng.random() < loss for _ in range(n))
    assert engine.read()["queues"]["1"]["dropped_loss"] == 0


@pytest.mark.serial
@real_path
def test_sighup_changes_the_delay_in_place(engine: Engine, lab: LabPath) -> None:
    engine.configure(5.0, 5.0)
    engine.start()
    pid = engine.read()["pid"]
    assert_rtt(lab, engine, 10)
    engine.configure(20.0, 20.0)
    engine.signal(signal.SIGHUP)
    assert until(stats_config_is(engine, 20.0), 5)
    assert_rtt(lab, engine, 40)
    # a bad file on SIGHUP: old config kept, error recorded, engine still running
    engine.config.write_text('{"queues": {"0": {"delay_ms": -3}, "1": {"delay_ms": 1}}}')
    engine.signal(signal.SIGHUP)
    assert until(lambda: bool(engine.read()["config_errors"]), 5)
    stats = engine.read()
    assert "delay_ms is -3" in stats["config_errors"][-1]["error"]
    assert stats["config"]["queues"]["0"]["delay_ms"] == 20.0 and stats["pid"] == pid
    kept = lab.ping(count=10)  # the old config kept: still 40 ms (load only adds delay)
    assert kept["received"] == kept["sent"] and kept["min"] >= 40 - 0.1, kept
    # a second engine cannot take the same queues: a clear error, exit 1
    other = Engine(lab, "other")
    other.configure(1.0, 1.0)
    other.start(wait=False)
    try:
        assert other.proc is not None and other.proc.wait(10) == 1
        assert "another process has bound this queue" in other.log.read_text()
    finally:
        other.stop()
    assert engine.stop() == 0


@pytest.mark.serial
@real_path
def test_sigterm_releases_held_packets_and_exits_0(engine: Engine, lab: LabPath) -> None:
    # bypass: once the engine is gone, packets pass undelayed (the reply must get back)
    lab.rules("-D")
    lab.rules("-A", "--queue-bypass")
    ping: subprocess.Popen[str] | None = None
    try:
        engine.configure(5000.0, 0.0)
        engine.start()
        ping = subprocess.Popen(
            ["ip", "netns", "exec", lab.src, "ping", "-n", "-c", "1", "-W", "15", DST_IP],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert until(lambda: engine.read()["queues"]["0"]["held_now"] == 1, 5)
        start = time.monotonic()
        engine.signal(signal.SIGTERM)
        assert engine.proc is not None and engine.proc.wait(5) == 0
        out, _ = ping.communicate(timeout=10)
        assert ping.returncode == 0, out
        assert time.monotonic() - start < 2.0
        rtt = float(re.search(r"time=([\d.]+) ms", out)[1])  # type: ignore[index]
        assert rtt < 2500, out  # released long before its 5 s were up
        final = engine.read()
        assert final["running"] is False
        assert final["queues"]["0"]["held_now"] == 0 and final["queues"]["0"]["released"] >= 1
    finally:
        if ping is not None and ping.poll() is None:
            ping.kill()
            ping.wait()
        lab.rules("-D", "--queue-bypass")
        lab.rules("-A")
