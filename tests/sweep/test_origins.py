"""Origins of a sweep on a real lab path: dtnkit serve and XRootD under CPU quotas, the TPC
tools (dtnkit cp --tpc, gfal-copy) between them, and nothing left behind."""

from __future__ import annotations

import dataclasses
import os
import re
import secrets
import shutil
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.support.cgroups import cgroup_reason, needs_cgroups

from dtnkit.host.host import Host
from dtnkit.lab import path as lab
from dtnkit.measure import procs, registry
from dtnkit.measure.tool import ToolContext, ToolRun
from dtnkit.measure.tools import tpc as tools_tpc
from dtnkit.sweep import cgroups, servers
from dtnkit.sweep.cgroups import CgroupUnavailable, CpuController
from dtnkit.sweep.grid import Point
from dtnkit.sweep.runner import Sweep, load_of, with_server_logs
from dtnkit.sweep.servers import Pki, RunningServer, ServerFailed

pytestmark = [pytest.mark.needs_root, pytest.mark.needs_netns]
MiB = 2**20
SIZE = 24 * MiB
TOKEN = "o19-rw-token"


class Site:
    def __init__(self, p: lab.LabPath, base: Path, pki: Pki, source: Path, prefix: str):
        self.p, self.base, self.pki, self.source, self.prefix = p, base, pki, source, prefix

    @property
    def sources(self) -> list[lab.LabHost]:
        return [h for h in self.p.hosts if h.side == "src"]


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    if os.geteuid() != 0 or shutil.which("openssl") is None:
        pytest.skip("needs root and openssl")
    prefix = f"o19{secrets.token_hex(2)}"
    base = servers.default_base(prefix)
    base.mkdir(parents=True)
    try:
        with lab.path(
            prefix,
            state_root=tmp_path_factory.mktemp("lab"),
            rtt_ms=4,
            rate_bps=1_000_000_000,
            n_src=2,
        ) as p:
            names = [p.hostname(h) for h in p.hosts] + [h.address for h in p.hosts]
            pki = servers.make_pki(base / "pki", names)
            yield Site(p, base, pki, servers.prepare_source(base / "cache", SIZE), prefix)
    finally:
        shutil.rmtree(base, ignore_errors=True)
        if not cgroup_reason():
            assert cgroups.remove_leftovers(prefix) == [], "a cgroup was left behind"


def gone(s: RunningServer) -> list[str]:
    """What of a stopped server is still there (empty: nothing)."""
    left = []
    if Path(f"/proc/{s.pid}").exists():
        left.append(f"pid {s.pid}")
    if s.origin.cgroup and Path(s.origin.cgroup).exists():
        left.append(s.origin.cgroup)
    if s.quota is not None:
        left += [str(p) for p in s.quota.paths if p.exists()]
    if s.workdir.exists():
        left.append(str(s.workdir))
    return left


def point(kind: str, tool: str, *, streams: int = 2, size: int = SIZE) -> Point:
    return Point(
        rtt_ms=4,
        rate_bps=None,
        loss=0.0,
        origins=2,
        cores=0.5,
        profile=None,
        tool=tool,
        file_size=size,
        streams=streams,
        repeat=0,
        duration_s=None,
        bytes=None,
        sample_interval_s=1.0,
        time_limit_s=60.0,
        server=kind,
    )


def processes_mentioning(text: str) -> list[str]:
    found = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit() and int(proc.name) != os.getpid():
            try:
                cmdline = (proc / "cmdline").read_bytes()
            except OSError:
                continue
            if text.encode() in cmdline:
                found.append(f"{proc.name}: {cmdline[:150]!r}")
    return found


xrootd = pytest.mark.needs_xrootd
gfal = pytest.mark.needs_gfal


@needs_cgroups
@pytest.mark.parametrize(
    "kind,tool",
    [
        ("dtnkit", "dtnkit-tpc"),
        pytest.param("xrootd", "dtnkit-tpc", marks=xrootd),
        pytest.param("dtnkit", "gfal-tpc", marks=gfal),
        pytest.param("xrootd", "gfal-tpc", marks=[xrootd, gfal]),
    ],
)
def test_tpc_tool_between_quota_origins(
    site: Site, kind: str, tool: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    argvs: list[list[str]] = []  # every command the tool ran (they still run for real)
    real_run = procs.Batch.run

    def spy(
        self: procs.Batch, argv: list[str], *args: Any, **kwargs: Any
    ) -> tuple[int | None, str]:
        argvs.append(list(argv))
        return real_run(self, argv, *args, **kwargs)

    monkeypatch.setattr(procs.Batch, "run", spy)
    origins = servers.start_many(
        kind,
        site.sources,
        base=site.base,
        pki=site.pki,
        cores=0.5,
        prefix=f"{site.prefix}-{tool[:4]}",
        source=site.source,
        files=2,
        token=TOKEN,
    )
    started = list(origins)
    try:
        assert [o.origin.index for o in origins] == [0, 1]
        for o in origins:
            assert o.quota is not None and o.quota.cores == 0.5
            assert o.origin.cgroup == o.quota.path and o.pid in o.quota.pids()
            assert o.origin.files == ("f0.bin", "f1.bin")
        dest = servers.start_destination(
            kind,
            site.p.dst,
            base=site.base,
            pki=site.pki,
            prefix=f"{site.prefix}-{tool[:4]}",
            origins=[o.origin for o in origins],
            token=TOKEN,
        )
        started.append(dest)
        assert dest.origin.index == -1
        before = [o.usage_s() or 0.0 for o in origins]
        t_before = time.monotonic()
        t = registry.TOOLS[tool]
        assert Sweep.server_kinds(point(kind, tool)) == (kind, kind)
        spec = load_of(point(kind, tool), tuple(o.origin for o in origins), dest.origin)
        workdir = site.base / f"point-{kind}-{tool}"
        workdir.mkdir()
        run: ToolRun = t.run(
            Host(netns=site.p.dst.netns),
            spec,
            ToolContext(deadline=time.monotonic() + 90, workdir=workdir),
        )
        assert run.failed == "", run.raw[-3000:]
        assert len(run.transfers) == 2
        for tr in run.transfers:
            assert tr.bytes == SIZE and tr.verified and tr.error == ""
            assert tr.end_s is not None and 0 <= tr.start_s < tr.end_s
        assert run.summary["transfers_per_origin"] == {"0": 1, "1": 1}  # spread across origins
        # tokens never on a command line (ps shows it) nor in the stored output
        assert argvs and not [a for a in argvs if any(TOKEN in word for word in a)]
        assert TOKEN not in run.raw
        # the servers' cgroups saw the work: each origin sent 24 MiB over TLS
        after = [o.usage_s() or 0.0 for o in origins]
        elapsed = time.monotonic() - t_before
        assert all(a - b > 0.005 for a, b in zip(after, before, strict=True)), (before, after)
        # and within their quota (CFS accounts per 100 ms period: one period of slack)
        assert all(a - b <= 0.5 * (elapsed + 0.1) for a, b in zip(after, before, strict=True))
        assert (dest.usage_s() or 0.0) > 0.005
    finally:
        servers.stop_all(started)
    for s in started:
        assert gone(s) == []
    assert processes_mentioning(f"{site.prefix}-{tool[:4]}") == []


@needs_cgroups
def test_the_deadline_stops_every_transfer(site: Site) -> None:
    origins = servers.start_many(
        "dtnkit",
        site.sources,
        base=site.base,
        pki=site.pki,
        cores=None,
        prefix=f"{site.prefix}-dl",
        source=site.source,
        files=1,
        token=TOKEN,
    )
    started = list(origins)
    site.p.set(rate_bps=20_000_000)  # 24 MiB takes ~10 s per transfer
    try:
        dest = servers.start_destination(
            "dtnkit",
            site.p.dst,
            base=site.base,
            pki=site.pki,
            prefix=f"{site.prefix}-dl",
            origins=[o.origin for o in origins],
            token=TOKEN,
        )
        started.append(dest)
        spec = load_of(point("dtnkit", "dtnkit-tpc"), tuple(o.origin for o in origins), dest.origin)
        (site.base / "point-dl").mkdir()
        t0 = time.monotonic()
        run = tools_tpc.DtnkitTpc().run(
            Host(netns=site.p.dst.netns),
            spec,
            ToolContext(deadline=time.monotonic() + 2.5, workdir=site.base / "point-dl"),
        )
        took = time.monotonic() - t0
        assert took < 2.5 + tools_tpc.STOP_GRACE_S + 3, took
        assert run.failed and all(t.end_s is None and t.bytes == 0 for t in run.transfers)
        assert "deadline" in run.raw
        assert processes_mentioning(dest.origin.url_base) == []
    finally:
        site.p.set(rate_bps=1_000_000_000)
        servers.stop_all(started)
    assert all(gone(s) == [] for s in started)


@xrootd
def test_a_failed_point_keeps_what_its_server_logged_during_it(site: Site) -> None:
    """A transfer's error may say only "HTTP 500"; XRootD's log says why, and goes with the
    server's work directory: a failed point keeps the lines logged while it ran."""
    origins = servers.start_many(
        "xrootd",
        site.sources[:1],
        base=site.base,
        pki=site.pki,
        cores=None,
        prefix=f"{site.prefix}-lg",
        source=site.source,
        files=1,
        token=TOKEN,
    )
    try:
        (srv,) = origins
        assert "initialization completed" in srv.log_tail(1000)  # logged before the mark
        marks = [(srv, srv.log_size())]
        out = site.p.dst.run(
            [
                "curl",
                "-sS",
                "-o",
                "/dev/null",
                "-w",
                "%{http_code}",
                "--cacert",
                str(site.pki.ca_file),
                "-H",
                f"Authorization: Bearer {TOKEN}",
                f"{srv.origin.url_base}/no-such-file.bin",
            ],
            check=False,
        )
        assert out.stdout == "404"
        text = with_server_logs("the tool's output", marks)
        head, _, logged = text.partition(f"--- {srv.label()} logged during the point ---\n")
        assert head == "the tool's output\n"
        assert "Unable to open /no-such-file.bin" in logged
        assert "initialization" not in logged and TOKEN not in logged
        # the last bytes when there is more; all of it when the log was cut below the mark
        last = srv.log_since(marks[0][1], 150)
        assert last.startswith("2") and "disc" in last  # whole lines only
        assert len(last.encode()) <= 150 and logged.endswith(last.rstrip("\n"))
        assert srv.log_since(10**9, 10**6) == srv.log.read_text(errors="replace")
        assert with_server_logs("", [(srv, srv.log_size())]) == ""  # nothing new: no header
    finally:
        servers.stop_all(origins)


@needs_cgroups
def test_ctrl_c_during_a_run_leaves_no_transfer_running(site: Site) -> None:
    origins = servers.start_many(
        "dtnkit",
        site.sources,
        base=site.base,
        pki=site.pki,
        cores=None,
        prefix=f"{site.prefix}-ic",
        source=site.source,
        files=1,
        token=TOKEN,
    )
    started = list(origins)
    site.p.set(rate_bps=20_000_000)
    old = signal.getsignal(signal.SIGALRM)

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    try:
        dest = servers.start_destination(
            "dtnkit",
            site.p.dst,
            base=site.base,
            pki=site.pki,
            prefix=f"{site.prefix}-ic",
            origins=[o.origin for o in origins],
            token=TOKEN,
        )
        started.append(dest)
        spec = load_of(point("dtnkit", "dtnkit-tpc"), tuple(o.origin for o in origins), dest.origin)
        (site.base / "point-ic").mkdir()
        signal.signal(signal.SIGALRM, interrupt)
        signal.setitimer(signal.ITIMER_REAL, 2.0)  # Ctrl-C, 2 s into the run
        t0 = time.monotonic()
        with pytest.raises(KeyboardInterrupt):
            tools_tpc.DtnkitTpc().run(
                Host(netns=site.p.dst.netns),
                spec,
                ToolContext(deadline=time.monotonic() + 120, workdir=site.base / "point-ic"),
            )
        took = time.monotonic() - t0
        assert took < 2.0 + tools_tpc.STOP_GRACE_S + 3, took  # not the 120 s deadline
        assert processes_mentioning(dest.origin.url_base) == []
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
        site.p.set(rate_bps=1_000_000_000)
        servers.stop_all(started)
    assert all(gone(s) == [] for s in started)


@needs_cgroups
def test_a_server_dying_at_start_is_one_error_with_its_log(site: Site) -> None:
    workdir = site.base / "dies"
    with pytest.raises(ServerFailed) as err:
        servers.start_server(
            "dtnkit",
            site.sources[1],
            index=1,
            workdir=workdir,
            pki=site.pki,
            cores=0.5,
            quota_name=f"{site.prefix}-dies",
            token=TOKEN,
            extra_args=["--no-such-flag"],
        )
    text = err.value.render()
    assert text.startswith("dtnkit: error: origin 1 (dtnkit on src2) exited with status")
    assert "no-such-flag" in text and "\n" not in text
    assert not workdir.exists()
    assert cgroups.leftovers(f"{site.prefix}-dies") == []


@needs_cgroups
@pytest.mark.parametrize("kind", ["dtnkit", pytest.param("xrootd", marks=xrootd), "iperf3"])
def test_a_port_already_taken(site: Site, kind: str) -> None:
    first = servers.start_server(
        "dtnkit",
        site.sources[0],
        index=0,
        workdir=site.base / "p1",
        pki=site.pki,
        quota_name=f"{site.prefix}-p1",
        token=TOKEN,
    )
    try:
        with pytest.raises(ServerFailed) as err:
            servers.start_server(
                kind,
                site.sources[0],
                index=3,
                workdir=site.base / "p2",
                pki=site.pki,
                quota_name=f"{site.prefix}-p2",
                token=TOKEN,
                port=first.origin.port,
            )
        text = err.value.render()
        # XRootD logs that its initialization failed, then exits: either may be seen first
        assert re.search(
            rf"origin 3 \({kind} on src1\) (exited with status|said its "
            "initialization failed)",
            text,
        ), text
        assert "in use" in text.lower(), text
        assert "\n" not in text
        assert not (site.base / "p2").exists()
        assert cgroups.leftovers(f"{site.prefix}-p2") == []
    finally:
        first.stop()
    assert gone(first) == []


@needs_cgroups
def test_a_missing_cgroup_hierarchy_is_one_error_and_nothing_runs(site: Site) -> None:
    ctl = CpuController(cgroups.KIND_V1, site.base / "no-such-hierarchy", None, 2)
    workdir = site.base / "nocg"
    with pytest.raises(CgroupUnavailable) as err:
        servers.start_server(
            "iperf3",
            site.sources[0],
            index=0,
            workdir=workdir,
            cores=0.5,
            quota_name=f"{site.prefix}-nocg",
            controller=ctl,
        )
    assert "cannot create the cgroup" in err.value.render()
    assert not workdir.exists()
    assert processes_mentioning(str(workdir)) == []


@needs_cgroups
def test_iperf3_server_in_a_quota(site: Site) -> None:
    s = servers.start_server(
        "iperf3",
        site.sources[0],
        index=0,
        workdir=site.base / "ip",
        cores=0.25,
        quota_name=f"{site.prefix}-ip",
    )
    try:
        assert s.origin.url_base == "" and s.origin.port > 0 and s.origin.files == ()
        out = site.p.dst.run(
            ["iperf3", "-c", site.sources[0].address, "-p", str(s.origin.port), "-t", "1", "-J"],
            timeout=30,
        )
        assert '"sum_received"' in out.stdout
        assert (s.usage_s() or 0.0) > 0.0
    finally:
        s.stop()
    assert gone(s) == []


def test_unknown_kind_and_missing_pki_are_bad_input(tmp_path: Path) -> None:
    from dtnkit.errors import BadInput

    host = lab.LabHost("src", "src", "dkl-none-src", "10.0.0.1", "x")
    with pytest.raises(BadInput, match="unknown server kind"):
        servers.start_server("nginx", host, index=0, workdir=tmp_path / "w")
    if servers.missing("dtnkit") is None:
        with pytest.raises(BadInput, match="needs a PKI"):
            servers.start_server("dtnkit", host, index=0, workdir=tmp_path / "w")
    assert not (tmp_path / "w").exists()


def test_plan_spreads_transfers_across_origins(tmp_path: Path) -> None:
    host = lab.LabHost("src1", "src", "ns", "10.0.0.1", "x")
    mk = [
        servers.Origin(i, "dtnkit", host, 1, f"https://h{i}:1", 0, None, ("f0.bin", "f1.bin"))
        for i in range(2)
    ]
    dest = servers.Origin(-1, "dtnkit", host, 2, "https://d:2", 0, None)
    env = tools_tpc.Pull(
        load_of(point("dtnkit", "dtnkit-tpc", streams=3), tuple(mk), dest),
        host,
        tmp_path,
        time.monotonic(),
    )  # type: ignore[arg-type]
    job = tools_tpc.plan(env)
    got = [(job(k, k % 3).src, job(k, k % 3).dst) for k in range(5)]
    # every transfer writes a name of its own (XRootD 5.5 fails a checksum query of a path
    # whose earlier checksum job it failed to remove)
    assert got == [
        ("https://h0:1/f0.bin", "https://d:2/t0.bin"),
        ("https://h1:1/f0.bin", "https://d:2/t1.bin"),
        ("https://h0:1/f1.bin", "https://d:2/t2.bin"),
        ("https://h1:1/f1.bin", "https://d:2/t3.bin"),
        ("https://h0:1/f0.bin", "https://d:2/t4.bin"),
    ]
    assert job(3, 0).dst_file is None  # the destination's directory is not known here
    assert tools_tpc.plan(env, "davs://")(0, 0).src == "davs://h0:1/f0.bin"
    assert tools_tpc.transfers_wanted(load_of(point("x", "y", streams=3), tuple(mk), dest)) == 3


def test_each_transfer_writes_its_own_file_and_it_is_removed_once_ended(tmp_path: Path) -> None:
    """A destination whose directory is known here: transfer k writes t{k}.bin, no name is
    written twice, and the file is gone once its transfer has ended (the tmpfs holds at most
    one file per slot), whether the transfer succeeded or failed."""
    host = lab.LabHost("src1", "src", "ns", "10.0.0.1", "x")
    root = tmp_path / "dst-data"
    root.mkdir()
    origin = servers.Origin(0, "dtnkit", host, 1, "https://h0:1", 0, None, ("f0.bin",))
    dest = servers.Origin(-1, "xrootd", host, 2, "https://d:2", 0, None, root=root)
    pt = dataclasses.replace(
        point("xrootd", "gfal-tpc", streams=3), duration_s=None, bytes=7 * SIZE
    )
    env = tools_tpc.Pull(
        load_of(pt, (origin,), dest),
        host,  # type: ignore[arg-type]
        tmp_path,
        time.monotonic() + 60,
    )
    written: list[str] = []
    most = [0]

    def one(j: tools_tpc.Job, batch: procs.Batch, deadline: float) -> tools_tpc.TransferOutcome:
        assert j.dst_file is not None and j.dst.endswith("/" + j.dst_file.name)
        assert not j.dst_file.exists()  # never a name written before
        j.dst_file.write_bytes(b"x")
        written.append(j.dst_file.name)
        most[0] = max(most[0], len(list(root.iterdir())))
        failed = j.k % 4 == 1
        return tools_tpc.TransferOutcome(not failed, False, "", "HTTP 500" if failed else "")

    run = tools_tpc.run_transfers(env, tools_tpc.plan(env), one)
    assert sorted(written) == sorted(f"t{k}.bin" for k in range(7))
    assert list(root.iterdir()) == [] and most[0] <= 3
    assert len(run.transfers) == 7 and sum(t.end_s is None for t in run.transfers) == 2
