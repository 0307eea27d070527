"""dtnkit.measure: parsers on real captures, sample arithmetic, and the sampler for real.

Fixtures: ``tests/fixtures/measure`` (captured on the development VM over a lab path; its
README says how).  The namespace tests run iperf3 over a 50 ms, 1 Gbit/s lab path; rates vary
between runs on the CI machine, so they assert relations, never absolute figures.
"""

from __future__ import annotations

import json
import os
import select
import shutil
import signal
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from tests.support.lab import set_tcp_buffers

from dtnkit.host.host import Host
from dtnkit.host.parsers import ParseError
from dtnkit.host.runner import Result
from dtnkit.lab import path as lab
from dtnkit.lab.path import LabPath
from dtnkit.measure import parsers as mp
from dtnkit.measure.sampler import Reading, Sampler, cpu_delta, summarize, tcp_delta

FIX = Path(__file__).resolve().parent.parent / "fixtures" / "measure"


def fx(name: str) -> str:
    return (FIX / name).read_text(encoding="utf-8")


def data_flow(flows: list[dict[str, Any]]) -> dict[str, Any]:
    """The iperf3 data connection: the one that moved the most bytes."""
    return max(flows, key=lambda f: f.get("bytes_acked", 0) + f.get("bytes_received", 0))


# ---- /proc/stat ---------------------------------------------------------------------------------
def test_proc_stat_real() -> None:
    doc = mp.parse_proc_stat(fx("proc-stat.large-bbr.1.txt"))
    assert set(doc["cpus"]) == {"cpu", "cpu0", "cpu1"}
    assert doc["cpus"]["cpu0"] == {
        "user": 16351,
        "nice": 0,
        "system": 22930,
        "idle": 258353,
        "iowait": 1032,
        "irq": 0,
        "softirq": 7238,
        "steal": 2158,
        "guest": 0,
        "guest_nice": 0,
    }
    assert doc["ctxt"] == 8308025
    assert doc["procs_running"] == 2
    total = doc["cpus"]["cpu"]
    for key in ("user", "system", "idle", "softirq", "steal"):
        assert total[key] == doc["cpus"]["cpu0"][key] + doc["cpus"]["cpu1"][key]


def test_proc_stat_old_kernel_columns_are_zero() -> None:
    doc = mp.parse_proc_stat("cpu  10 0 5 100\ncpu0 10 0 5 100\nctxt 7\n")
    assert doc["cpus"]["cpu"]["steal"] == 0
    assert doc["cpus"]["cpu"]["idle"] == 100


@pytest.mark.parametrize(
    "text",
    [
        "",
        "   \n",
        "hello world\n",
        "cpu  1 2 x 4\nctxt 1\n",
        "cpu 1 2\nctxt 1\n",
        "cpu0 1 2 3 4\nctxt 5\n",
        "cpu 1 2 3 4\n",
        "cpu 1 2 3 4\nctxt\n",
        "cpuX 1 2 3 4\nctxt 1",
        '{"cpu": 1}\n',
    ],
)
def test_proc_stat_garbage(text: str) -> None:
    with pytest.raises(ParseError):
        mp.parse_proc_stat(text)


# ---- /proc/net/snmp and /proc/net/netstat -------------------------------------------------------
def test_snmp_real() -> None:
    doc = mp.parse_snmp(fx("proc-net-snmp.large-bbr.after.txt"))
    assert set(doc) == {"Ip", "Icmp", "Tcp", "Udp", "UdpLite"}
    assert doc["Tcp"]["OutSegs"] == 487485
    assert doc["Tcp"]["RetransSegs"] == 9270
    assert doc["Tcp"]["MaxConn"] == -1


def test_netstat_real() -> None:
    doc = mp.parse_snmp(fx("proc-net-netstat.large-bbr.after.txt"))
    assert set(doc) == {"TcpExt", "IpExt", "MPTcpExt"}
    ext = doc["TcpExt"]
    for name in (
        "TCPLostRetransmit",
        "TCPTimeouts",
        "TCPDSACKUndo",
        "TCPSACKReorder",
        "TCPSpuriousRTOs",
        "TCPDSACKRecvSegs",
    ):
        assert name in ext
    before = mp.parse_snmp(fx("proc-net-netstat.large-bbr.before.txt"))["TcpExt"]
    assert ext["TCPLostRetransmit"] - before["TCPLostRetransmit"] == 90
    assert ext["TCPDSACKRecvSegs"] - before["TCPDSACKRecvSegs"] == 45


@pytest.mark.parametrize(
    "text",
    [
        "",
        "Tcp: A B\n",
        "Tcp: A B\nTcp: 1\n",
        "Tcp: A B\nUdp: 1 2\n",
        "Tcp: A B\nTcp: 1 x\n",
        "garbage line\nmore garbage\n",
        "Tcp A B\nTcp 1 2\n",
        "Tcp: A 1B\nTcp: 1 2\n",
    ],
)
def test_snmp_garbage(text: str) -> None:
    with pytest.raises(ParseError):
        mp.parse_snmp(text)


# ---- /proc/net/dev ------------------------------------------------------------------------------
def test_net_dev_real() -> None:
    doc = mp.parse_net_dev(fx("proc-net-dev.large-bbr.after.txt"))
    assert set(doc) == {"lo", "dklink0"}
    dev = doc["dklink0"]
    assert dev["rx_bytes"] == 953183 and dev["tx_bytes"] == 720153155
    assert dev["rx_drop"] == 0 and dev["rx_errs"] == 0
    assert len(dev) == 16 and {"tx_colls", "tx_carrier", "rx_multicast"} <= set(dev)


def test_net_dev_name_runs_into_counter() -> None:
    head = "\n".join(fx("proc-net-dev.large-bbr.after.txt").splitlines()[:2])
    doc = mp.parse_net_dev(
        head + "\nenp1s0f0np0:12345678901 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16\n"
    )
    assert doc["enp1s0f0np0"]["rx_bytes"] == 12345678901
    assert doc["enp1s0f0np0"]["rx_drop"] == 4


@pytest.mark.parametrize(
    "text",
    [
        "",
        "eth0: 1 2 3\n",
        "Inter-| Receive | Transmit\n face |bytes|bytes\neth0: 1 2 3\n",
        "Inter-|\n face |bytes packets|bytes packets\neth0 1 2 3 4\n",
        "Inter-|\n face |bytes packets|bytes packets\neth0: 1 2 x 4\n",
        "just text\n",
    ],
)
def test_net_dev_garbage(text: str) -> None:
    with pytest.raises(ParseError):
        mp.parse_net_dev(text)


# ---- ss -tinO -----------------------------------------------------------------------------------
SS_FIXTURES = sorted(p.name for p in FIX.glob("ss-*.txt"))


@pytest.mark.parametrize("name", SS_FIXTURES)
def test_ss_every_capture_parses(name: str) -> None:
    flows = mp.parse_ss_tin(fx(name))
    assert len(flows) == 2  # iperf3's control and data connections
    for f in flows:
        assert f["state"] == "ESTAB"
        assert f["cc"] in ("bbr", "cubic")
        assert f["rtt_ms"] > 40 and f["rttvar_ms"] >= 0
        assert f["cwnd"] > 0 and f["mss"] == 1448
        assert f["local_port"] == "5201" or f["peer_port"] == "5201"
        assert isinstance(f["send_bps"], int) and isinstance(f["pacing_rate_bps"], int)


def test_ss_window_limited_flow() -> None:
    f = data_flow(mp.parse_ss_tin(fx("ss-tinO.tiny-rmem.src.txt")))
    assert f["local"] == "10.251.0.2:40928" and f["peer"] == "10.252.0.2:5201"
    assert (f["local_addr"], f["peer_addr"], f["peer_port"]) == ("10.251.0.2", "10.252.0.2", "5201")
    assert f["send_q"] == 3026608 and f["recv_q"] == 0
    assert (f["cwnd"], f["ssthresh"]) == (1278, 646)
    assert (f["rtt_ms"], f["rttvar_ms"], f["minrtt_ms"]) == (50.776, 0.412, 50.128)
    assert f["busy_ms"] == 2416
    assert (f["rwnd_limited_ms"], f["rwnd_limited_pct"]) == (852, 35.3)
    assert "sndbuf_limited_pct" not in f
    assert f["pacing_rate_bps"] == 158965976 and f["delivery_rate_bps"] == 125822352
    assert f["send_bps"] == 291561998
    assert f["bytes_acked"] == 30527862 and f["notsent"] == 2237880
    assert f["bbr_bw_bps"] == 128457352 and f["bbr_mrtt_ms"] == 50.128
    assert (f["bbr_pacing_gain"], f["bbr_cwnd_gain"]) == (1.25, 2.0)
    assert f["snd_wscale"] == 7 and f["snd_wnd"] == 807552
    assert "retrans" not in f  # no retransmits: ss prints no retrans field


def test_ss_send_buffer_limited_flow() -> None:
    f = data_flow(mp.parse_ss_tin(fx("ss-tinO.tiny-rmem-wmem.src.txt")))
    assert f["rwnd_limited_pct"] == 34.5
    assert (f["sndbuf_limited_ms"], f["sndbuf_limited_pct"]) == (620, 21.2)
    assert f["app_limited"] is True and "app_limited" in f["flags"]


def test_ss_unlimited_flow() -> None:
    f = data_flow(mp.parse_ss_tin(fx("ss-tinO.large-cubic.src.txt")))
    assert f["cc"] == "cubic"
    assert "rwnd_limited_pct" not in f and "sndbuf_limited_pct" not in f
    assert not any(k.startswith("bbr_") for k in f)
    assert (f["retrans"], f["retrans_total"]) == (0, 2653)
    assert f["bytes_retrans"] == 3841544
    tiny = data_flow(mp.parse_ss_tin(fx("ss-tinO.tiny-rmem.src.txt")))
    assert f["delivery_rate_bps"] > 3 * tiny["delivery_rate_bps"]


def test_ss_receiver_side() -> None:
    flows = mp.parse_ss_tin(fx("ss-tinO.large-bbr.dst.txt"))
    f = data_flow(flows)
    assert f["local"] == "[::ffff:10.252.0.2]:5201"
    assert f["local_addr"] == "::ffff:10.252.0.2" and f["local_port"] == "5201"
    assert f["bytes_received"] == 232553181 and f["rcv_ooopack"] == 25129
    assert f["rcv_rtt_ms"] == 67.832 and f["bbr_bw_bps"] == 0
    assert "bbr_pacing_gain" not in f  # the receiver's bbr prints only bw and mrtt


def test_ss_without_one_line_option() -> None:
    """``ss -tin`` puts tcp_info on a second, indented line: the same data comes out."""
    multi = data_flow(mp.parse_ss_tin(fx("ss-tin.large-bbr.src.txt")))
    one = data_flow(mp.parse_ss_tin(fx("ss-tinO.large-bbr.src.txt")))
    assert set(multi) == set(one)
    assert multi["local"] == one["local"] and multi["retrans_total"] == one["retrans_total"]


def test_ss_human_rates_and_extras() -> None:
    """Without -n ss prints rates with SI prefixes; -p, -e and -o add words."""
    text = (
        "State Recv-Q Send-Q Local Address:Port Peer Address:Port Process\n"
        'ESTAB 0 5 10.0.0.1:40000 10.0.0.2:5201 users:(("iperf3",pid=7,fd=5)) timer:(on,'
        "200ms,0) ino:1234 sk:3c <-> ts sack cubic wscale:7,7 rto:204 rtt:0.5/0.25 cwnd:10 "
        "send 2.9Mbps pacing_rate 1.5Gbps/2Gbps delivery_rate 455.7Kbps busy:4ms\n"
    )
    f = mp.parse_ss_tin(text)[0]
    assert f["cc"] == "cubic" and {"ts", "sack"} <= set(f["flags"])
    assert f["send_bps"] == 2_900_000 and f["delivery_rate_bps"] == 455_700
    assert f["pacing_rate_bps"] == 1_500_000_000 and f["pacing_rate_max_bps"] == 2 * 10**9
    assert f["timer"] == "on,200ms,0" and f["users"].startswith("users:")


def test_ss_empty_and_header_only() -> None:
    assert mp.parse_ss_tin("") == []
    assert mp.parse_ss_tin(fx("ss-tinO.tiny-rmem.src.txt").splitlines()[0] + "\n") == []


@pytest.mark.parametrize(
    "text",
    [
        "hello world this is not ss\n",
        "ESTAB x 0 1.2.3.4:5 6.7.8.9:10\n",
        "ESTAB 0 0 a b\n",
        "ESTAB 0 0 1.2.3.4:5 6.7.8.9:10 rtt:fast/1\n",
        "ESTAB 0 0 1.2.3.4:5 6.7.8.9:10 rwnd_limited:12ms\n",
        "ESTAB 0 0 1.2.3.4:5 6.7.8.9:10 send 12parsecs\n",
        "ESTAB 0 0 1.2.3.4:5 6.7.8.9:10 bbr:(bw:1bps,mrtt:x)\n",
        "ESTAB 0 0 1.2.3.4:5 6.7.8.9:10 bbr:(bw:1bps\n",
        "\tcwnd:10\n",
        "ESTAB 0 0 1.2.3.4:5 6.7.8.9:10 pacing_rate\n",
    ],
)
def test_ss_garbage(text: str) -> None:
    with pytest.raises(ParseError):
        mp.parse_ss_tin(text)


# ---- sample arithmetic on real before/after pairs -----------------------------------------------
def reading(t: float, **data: Any) -> Reading:
    return Reading(t, dict(data), dict.fromkeys(data, t))


def test_cpu_delta_real() -> None:
    a = mp.parse_proc_stat(fx("proc-stat.large-bbr.1.txt"))
    b = mp.parse_proc_stat(fx("proc-stat.large-bbr.2.txt"))
    cpu = cpu_delta(a, b)
    assert cpu is not None
    assert set(cpu["per_cpu"]) == {"cpu0", "cpu1"}
    for pct in [cpu["all"], *cpu["per_cpu"].values()]:
        parts = sum(
            pct[k] for k in ("user", "nice", "system", "irq", "softirq", "iowait", "idle", "steal")
        )
        assert parts == pytest.approx(100.0)
        assert pct["busy"] == pytest.approx(100.0 - pct["idle"] - pct["iowait"])
    # cpu0: softirq 7238 -> 7247, 9 of 101 jiffies (user 9, system 10, idle 69, steal 4)
    assert cpu["per_cpu"]["cpu0"]["softirq"] == pytest.approx(100 * 9 / 101)
    assert cpu["max_softirq_pct"] == max(c["softirq"] for c in cpu["per_cpu"].values())
    assert cpu_delta(a, a) is None  # no time passed


def test_tcp_delta_real() -> None:
    a = reading(
        0.0,
        snmp=mp.parse_snmp(fx("proc-net-snmp.large-bbr.before.txt")),
        netstat=mp.parse_snmp(fx("proc-net-netstat.large-bbr.before.txt")),
    )
    b = reading(
        5.0,
        snmp=mp.parse_snmp(fx("proc-net-snmp.large-bbr.after.txt")),
        netstat=mp.parse_snmp(fx("proc-net-netstat.large-bbr.after.txt")),
    )
    tcp = tcp_delta(a, b)
    assert (tcp["out_segs"], tcp["retrans_segs"]) == (387695, 9270)
    assert tcp["out_segs_per_s"] == pytest.approx(387695 / 5)
    assert tcp["retrans_share"] == pytest.approx(9270 / (387695 + 9270))
    # OutSegs leaves retransmissions out: it grew with the new data sent, not with them
    ext = [
        mp.parse_snmp(fx(f"proc-net-netstat.large-bbr.{w}.txt"))["TcpExt"]
        for w in ("before", "after")
    ]
    orig = ext[1]["TCPOrigDataSent"] - ext[0]["TCPOrigDataSent"]
    assert orig <= tcp["out_segs"] < orig + 100
    assert tcp["lost_retrans"] == 90 and tcp["lost_retrans_per_s"] == pytest.approx(18.0)
    assert tcp["sack_reorder"] == 22 and tcp["dsack_recv_segs"] == 45
    assert tcp["timeouts_per_s"] == 0 and tcp["dsack_undo_per_s"] == 0
    # counters never go backwards in a sample (a recreated namespace restarts them)
    back = tcp_delta(b, reading(6.0, snmp=a.data["snmp"], netstat=a.data["netstat"]))
    assert back["out_segs"] == 0 and back["retrans_share"] is None
    # no netstat: the TcpExt figures are None, the snmp ones are there
    bare = tcp_delta(reading(0.0, snmp=a.data["snmp"]), reading(1.0, snmp=b.data["snmp"]))
    assert bare["timeouts"] is None and bare["retrans_segs"] == 9270


def sample(
    *,
    dt: float = 1.0,
    out: int = 1000,
    retrans: int = 0,
    dsack: int = 0,
    flows: Sequence[dict[str, Any]] = (),
    drops: int = 0,
) -> dict[str, Any]:
    pct = {
        "user": 10.0,
        "nice": 0.0,
        "system": 10.0,
        "irq": 0.0,
        "softirq": 5.0,
        "iowait": 2.0,
        "idle": 73.0,
        "steal": 0.0,
        "busy": 25.0,
    }
    return {
        "t_s": dt,
        "dt_s": dt,
        "errors": [],
        "cpu": {
            "all": pct,
            "per_cpu": {"cpu0": pct},
            "max_softirq_pct": 5.0 + out / 1000,
            "max_busy_pct": 25.0,
        },
        "ctx_switches_per_s": 100.0,
        "tcp": {
            "out_segs": out,
            "retrans_segs": retrans,
            "dsack_recv_segs": dsack,
            "dsack_undo": 1 if dsack else 0,
            "sack_reorder": 0,
            "lost_retrans": 0,
            "timeouts": 0,
            "spurious_rtos": 0,
        },
        "nic": {"eth0": {"rx_drops": drops, "rx_errors": 0}},
        "flows": list(flows),
    }


def test_summarize() -> None:
    idle = {"rtt_ms": 10.0, "cwnd": 10, "active": False}
    busy = {
        "rtt_ms": 30.0,
        "cwnd": 500,
        "active": True,
        "rwnd_limited_pct": 40.0,
        "delivery_rate_bps": 9 * 10**8,
    }
    s = summarize(
        [
            sample(out=1000, retrans=10, flows=[idle, busy], drops=2),
            sample(dt=3.0, out=3000, retrans=90, dsack=80, flows=[idle], drops=1),
        ]
    )
    assert s["samples"] == 2
    assert s["retrans_share"] == pytest.approx(100 / 4100)
    assert s["retrans_segs_per_s_mean"] == pytest.approx(100 / 4)
    assert s["spurious_retrans_hint"] is True  # 80 of 100 retransmits came back as DSACK
    assert s["nic_rx_drops_total"] == 3
    assert s["flows_max"] == 2 and s["cwnd_max"] == 500
    assert s["rwnd_limited_pct_max"] == 40.0 and s["sndbuf_limited_pct_max"] == 0.0
    assert s["rtt_ms_min"] == 30.0 and s["rtt_ms_mean"] == 30.0  # the idle flow is left out
    assert s["softirq_pct_max"] == 8.0 and s["cpu_busy_pct_max"] == 25.0
    assert s["iowait_pct_mean"] == pytest.approx(2.0)
    assert s["ctx_switches_per_s_mean"] == pytest.approx(100.0)
    real_loss = summarize([sample(retrans=100, dsack=5)])
    assert real_loss["spurious_retrans_hint"] is False
    assert summarize([sample(retrans=0)])["retrans_share"] == 0.0


def test_summarize_nothing() -> None:
    s = summarize([])
    assert s["samples"] == 0 and s["flows_max"] == 0
    assert s["retrans_share"] is None and s["rtt_ms_mean"] is None
    assert s["spurious_retrans_hint"] is False
    broken = summarize(
        [
            {
                "t_s": 1.0,
                "dt_s": None,
                "cpu": None,
                "ctx_switches_per_s": None,
                "tcp": None,
                "nic": None,
                "flows": [],
                "errors": ["x"],
            }
        ]
    )
    assert broken["cpu_busy_pct_max"] is None and broken["errors"] == 1


# ---- the thread, on a captured tree (no root) ---------------------------------------------------
class CountingRunner:
    """Answers ``ss`` from a fixture, raises on every other command; counts the ss calls."""

    def __init__(self, wanted: int) -> None:
        self.calls = 0
        self.wanted = wanted
        self.enough = threading.Event()

    def run(self, argv: Sequence[str], *, stdin: str | None = None) -> Result:
        if argv[0] != "ss":
            raise RuntimeError(f"unexpected command {argv}")
        self.calls += 1
        if self.calls >= self.wanted:
            self.enough.set()
        if self.calls % 2:
            raise RuntimeError("ss blew up")
        return Result(tuple(argv), 0, fx("ss-tinO.tiny-rmem.src.txt"), "")


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    root = tmp_path / "tree"
    (root / "proc" / "net").mkdir(parents=True)
    (root / "proc" / "stat").write_text(fx("proc-stat.large-bbr.1.txt"))
    (root / "proc" / "net" / "snmp").write_text(fx("proc-net-snmp.large-bbr.before.txt"))
    (root / "proc" / "net" / "dev").write_text("this is not /proc/net/dev\n")
    return root  # no /proc/net/netstat


def test_sampler_records_errors_and_goes_on(tree: Path) -> None:
    runner = CountingRunner(wanted=4)
    host = Host(tree, runner=runner)
    with Sampler(host, interval_s=0.02, ss_filter=["dport", "=", ":5201"]) as sampler:
        assert runner.enough.wait(10), "the sampler thread stopped sampling"
    samples = sampler.samples
    assert len(samples) >= 4
    # one ss per reading but the first; the last reading may widen the last sample instead
    assert len(samples) <= runner.calls <= len(samples) + 1
    for s in samples:
        assert isinstance(s["t_s"], float) and s["dt_s"] > 0
        assert any(e.startswith("netstat: ") for e in s["errors"])
        assert any(e.startswith("dev: ") for e in s["errors"])
        assert s["nic"] is None
        assert s["tcp"]["out_segs"] == 0  # the tree does not change
        assert s["tcp"]["timeouts"] is None  # no netstat in the tree
        assert s["cpu"] is None  # no CPU time passed in the tree
    with_flows = [s for s in samples if s["flows"]]
    failed = [s for s in samples if any("ss blew up" in e for e in s["errors"])]
    assert with_flows and failed and len(with_flows) + len(failed) == len(samples)
    assert all(s["flows"] == [] for s in failed)
    assert [s["t_s"] for s in samples] == sorted(s["t_s"] for s in samples)
    assert sampler._thread is None  # joined on exit
    json.dumps(samples)  # samples are stored as JSON
    summarize(samples)


def test_sampler_first_reading_errors_are_reported_once(tree: Path) -> None:
    runner = CountingRunner(wanted=10**6)
    with Sampler(Host(tree, runner=runner), interval_s=3600) as sampler:
        pass
    assert len(sampler.samples) == 1  # a run shorter than an interval still has one sample
    errors = sampler.samples[0]["errors"]
    assert sum(e.startswith("netstat: ") for e in errors) == 2  # the first reading and the last


def test_sampler_rejects_bad_interval(tree: Path) -> None:
    with pytest.raises(ValueError):
        Sampler(Host(tree), interval_s=0)


def test_sampler_does_not_touch_the_callers_cache(tree: Path) -> None:
    host = Host(tree, runner=CountingRunner(wanted=10**6))
    host._cache[("marker",)] = Result(("marker",), 0, "", "")
    with Sampler(host, interval_s=3600):
        pass
    assert ("marker",) in host._cache
    assert host.writes == []


def test_sampler_on_this_host_short_run() -> None:
    """The live host, no namespace (needs no root): one sample with real CPU figures."""
    with Sampler(Host.live(), interval_s=60, ifaces=["lo"]) as sampler:
        sum(i * i for i in range(200_000))  # some CPU time between the readings
    (s,) = sampler.samples
    assert s["errors"] == [], s["errors"]
    assert s["ctx_switches_per_s"] is not None and s["ctx_switches_per_s"] >= 0
    assert set(s["nic"]) == {"lo"} and s["nic"]["lo"]["rx_drops_per_s"] >= 0
    assert s["tcp"]["retrans_segs_per_s"] >= 0
    if s["cpu"] is not None:  # None only if no jiffy passed
        assert set(s["cpu"]["per_cpu"]) <= {f"cpu{i}" for i in range(os.cpu_count() or 1)}


# ---- for real: iperf3 over a lab path ----------------------------------------------------------
NEEDS = [t for t in ("iperf3", "iptables", "ss") if shutil.which(t) is None]
TINY = "4096 16384 1048576"
LARGE = "4096 131072 67108864"


@pytest.fixture(scope="module")
def path(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LabPath]:
    with lab.path(state_root=tmp_path_factory.mktemp("lab"), rtt_ms=50, rate_bps=10**9) as p:
        yield p
    assert [n for n in lab._netns_list() if n.startswith(f"{lab.NS_PREFIX}{p.name}-")] == []


def sampled_iperf(p: LabPath, seconds: int = 3) -> list[dict[str, Any]]:
    """Run iperf3 src -> dst with the sampler on src; the samples."""
    srv = p.dst.popen(["iperf3", "-s", "-1", "--forceflush"])
    try:
        assert srv.stdout is not None
        seen = b""
        while b"listening" not in seen:  # wait until it says it listens; select bounds it
            ready, _, _ = select.select([srv.stdout], [], [], 10)
            chunk = os.read(srv.stdout.fileno(), 4096) if ready else b""
            assert chunk, f"iperf3 -s did not start listening: {seen!r}"
            seen += chunk
        host = Host.live(p.src.netns)
        with Sampler(host, interval_s=0.5, ss_filter=["dport", "=", ":5201"]) as sampler:
            p.src.run(
                ["iperf3", "-c", p.dst.address, "-t", str(seconds), "-J"], timeout=seconds + 30
            )
        srv.wait(timeout=30)
    finally:
        if srv.poll() is None:
            os.killpg(srv.pid, signal.SIGKILL)
            srv.wait()
    return sampler.samples


@pytest.mark.serial  # judges delivery rates: large buffers carry twice what tiny ones do
@pytest.mark.needs_root
@pytest.mark.needs_netns
@pytest.mark.skipif(bool(NEEDS), reason=f"needs {', '.join(NEEDS)}")
def test_sampler_over_a_lab_path(path: LabPath) -> None:
    set_tcp_buffers(path, TINY)
    tiny = sampled_iperf(path)
    set_tcp_buffers(path, LARGE)
    large = sampled_iperf(path)

    for samples in (tiny, large):
        assert len(samples) >= 4
        for s in samples:
            assert s["errors"] == [], s["errors"]
            tcp = s["tcp"]
            for key in (
                "out_segs_per_s",
                "retrans_segs_per_s",
                "lost_retrans_per_s",
                "timeouts_per_s",
                "dsack_undo_per_s",
                "sack_reorder_per_s",
            ):
                assert tcp[key] >= 0, key
            assert tcp["retrans_share"] is None or 0 <= tcp["retrans_share"] <= 1
            assert set(s["nic"]) == {"dklink0"}
            assert s["nic"]["dklink0"]["rx_drops_per_s"] >= 0
            assert set(s["cpu"]["per_cpu"]) <= {f"cpu{i}" for i in range(os.cpu_count() or 1)}
            assert 0 <= s["cpu"]["max_softirq_pct"] <= 100
        assert any(s["flows"] for s in samples)
        flows = [f for s in samples for f in s["flows"]]
        assert all(f["peer"] == f"{path.dst.address}:5201" for f in flows)
        assert any(s["tcp"]["out_segs_per_s"] > 1000 for s in samples)

    def limited(samples: list[dict[str, Any]]) -> float:
        return max(
            max(float(f.get("rwnd_limited_pct", 0.0)), float(f.get("sndbuf_limited_pct", 0.0)))
            for s in samples
            for f in s["flows"]
        )

    assert limited(tiny) > 0  # 1 MiB of receive buffer at 50 ms holds ~160 Mbit/s
    s_tiny, s_large = summarize(tiny), summarize(large)
    assert s_large["delivery_rate_bps_max"] > 2 * s_tiny["delivery_rate_bps_max"]
    assert max(s_tiny["rwnd_limited_pct_max"], s_tiny["sndbuf_limited_pct_max"]) > max(
        s_large["rwnd_limited_pct_max"], s_large["sndbuf_limited_pct_max"]
    )
    assert 45 <= s_tiny["rtt_ms_min"] <= s_tiny["rtt_ms_mean"]
    assert s_large["flows_max"] == 2 and s_large["cwnd_max"] > s_tiny["cwnd_max"]
    assert s_large["retrans_share"] is not None
