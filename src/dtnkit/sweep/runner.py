"""Run a grid's points on a lab path and store each one (:mod:`.store`).

For each point, in the grid's order:

1. the lab path takes the point's RTT, rate and loss in place (:meth:`LabPath.set`); it is
   built once with as many sending hosts as the grid's largest ``origins`` (a point with
   fewer origins uses the first hosts), and rebuilt only when a point drops the rate cap;
2. the tuning profile, if any, is applied to both ends (the client host and each origin's
   host, each a namespace) with a snapshot taken before; it is restored after the point,
   also when the point failed or the sweep was interrupted;
3. the tool's servers run on the origins (kept running while the next point needs the same
   ones, else stopped by PID and started again);
4. the tool runs the point as a load (:class:`~dtnkit.measure.probes.load.LoadSpec`: the
   point's origins, streams, duration or bytes), the same tool a probe runs, taken from
   :mod:`dtnkit.measure.registry`, with the point's deadline (``time_limit``), while
   :class:`~dtnkit.measure.pathsampler.PointSampler` samples throughput, CPU, softirq,
   retransmits, context switches, NIC drops and the delay stage;
5. the point is stored, ``ok`` or ``failed`` with its error; a failed point does not stop
   the sweep.

``resume`` skips the points stored ``ok``.  Ctrl-C (SIGINT, or SIGTERM turned into it by the
CLI) stops every process the sweep started (by PID), restores the profile, stores nothing of
the point in flight, marks the run ``interrupted`` and leaves the lab path as asked
(``keep_lab``), then re-raises.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import os
import platform
import secrets
import shutil
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from dtnkit import __version__
from dtnkit.db.location import Location
from dtnkit.errors import BadInput, DtnkitError
from dtnkit.host import process
from dtnkit.host.host import Host
from dtnkit.lab import fidelity, path
from dtnkit.measure import registry
from dtnkit.measure.pathsampler import (
    PointSampler,
    Window,
    data_window,
    group_cpu_seconds,
    measured_idle_percent,
)
from dtnkit.measure.probes.load import LoadSpec, Origin
from dtnkit.measure.procs import Procs
from dtnkit.measure.tool import ToolContext, ToolRun
from dtnkit.progress import SILENT, Progress
from dtnkit.sweep import estimate, servers, store, tuning
from dtnkit.sweep.grid import Grid, Point, registry_tool
from dtnkit.units import counted, format_rate


@dataclasses.dataclass
class SweepOptions:
    """Where a sweep runs and keeps its things."""

    name: str
    db_path: Location
    lab_name: str
    lab_state_root: Path
    state_dir: Path
    workdir: Path  # the run's files (sources, per-point directories); removed at the end
    resume: bool = False
    keep_lab: bool | None = None  # None: keep a lab path that existed, remove one built here
    backend: str = "auto"
    reuse_servers: bool = True  # False: servers are started and stopped for every point


@dataclasses.dataclass
class SweepSummary:
    name: str
    db: str
    total: int
    skipped: int = 0
    ran: int = 0
    ok: int = 0
    failed: int = 0
    interrupted: bool = False
    lab: str = ""  # "kept" or "removed"
    lab_name: str = ""
    elapsed_s: float = 0.0
    failures: list[dict[str, str]] = dataclasses.field(default_factory=list)
    #: said before the run (estimate.Estimate.as_dict): seconds, low_s, high_s, notes ...
    estimate: dict[str, Any] = dataclasses.field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def default_workdir(name: str, state_dir: Path) -> Path:
    """tmpfs when the machine has it (storage then never limits a point), else the state
    directory; one directory per run (``dtnkit-sweep-NAME-RANDOM``), so two runs of one name
    (two users, two stores, a test beside a campaign) never share or remove each other's
    files."""
    shm = Path("/dev/shm")
    base = shm if shm.is_dir() and os.access(shm, os.W_OK) else state_dir / "sweep"
    return base / f"dtnkit-sweep-{name}-{secrets.token_hex(8)}"


def tool_version(argv: Sequence[str]) -> str:
    try:
        proc = process.run(argv, timeout=10)
    except (OSError, process.SubprocessError):
        return ""
    text = (proc.stdout or proc.stderr).strip().splitlines()
    return text[0][:120] if text else ""


def environment(lab: path.LabPath | None) -> dict[str, Any]:
    """What a report shows of where the sweep ran."""
    uname = platform.uname()
    doc: dict[str, Any] = {
        "host": uname.node,
        "kernel": uname.release,
        "machine": uname.machine,
        "cpus": os.cpu_count(),
        "python": sys.version.split()[0],
        "versions": {
            "dtnkit": __version__,
            "iperf3": tool_version(["iperf3", "--version"]),
            "xrootd": tool_version(["xrootd", "-v"]) if shutil.which("xrootd") else "",
            "gfal-copy": tool_version(["gfal-copy", "--version"])
            if shutil.which("gfal-copy")
            else "",
        },
        "started": time.time(),
    }
    if lab is not None:
        doc["lab"] = {
            "name": lab.name,
            "backend": lab.state.backend,
            "backend_reason": lab.state.backend_reason,
            "mtu": lab.spec.mtu,
            "n_src": lab.spec.n_src,
        }
    return doc


class LabFailed(DtnkitError):
    """The lab path could not be built, loaded or changed: no point can run, the sweep
    stops (the error is the lab's)."""

    def __init__(self, cause: DtnkitError) -> None:
        super().__init__(cause.what, cause.why, cause.next_step, status=cause.status)


class Sweep:
    """One run of a grid.  :meth:`run` returns a :class:`SweepSummary`; Ctrl-C propagates
    as KeyboardInterrupt after the clean-up."""

    def __init__(
        self, grid: Grid, grid_text: str, opts: SweepOptions, *, progress: Progress = SILENT
    ) -> None:
        store.check_run_name(opts.name)
        self.grid, self.grid_text, self.opts, self.progress = grid, grid_text, opts, progress
        self.store = store.SweepStore(opts.db_path)
        self.procs = Procs()
        self.lab: path.LabPath | None = None
        self.lab_built = False
        self.lab_before: path.PathSpec | None = None
        self.anchors: dict[str, int] = {}  # lab namespace -> the PID of a sleep there
        self.servers: tuple[tuple[Any, ...], list[servers.RunningServer]] | None = None
        self._pki: servers.Pki | None = None
        self._starts = 0
        self.token = secrets.token_hex(16)
        # cgroups are named dtnkit-PREFIX-oI: a prefix of this run's own, so a run of the
        # same name elsewhere (or one killed before it could remove its cgroups) is not met
        self.cgroup_prefix = "sw" + secrets.token_hex(5)
        self.tuning_cache: dict[str | None, dict[str, Any]] = {}

    # ---- files ----
    def source_file(self, size: int) -> Path:
        """A local file of ``size`` bytes under the workdir (uploads read it)."""
        return servers.prepare_source(self.opts.workdir / "files", size)

    # ---- tools ----
    @staticmethod
    def tool_name(point: Point) -> str:
        """The registry's tool that runs the point: ``command:NAME`` is the command tool,
        ``dtnkit-cp-upload`` is dtnkit-cp with the load's ``upload``."""
        return registry_tool(point.tool)

    @staticmethod
    def server_kinds(point: Point) -> tuple[str | None, str | None]:
        """The server kind each origin runs and the one the client side runs (or None):
        iperf3's server for iperf3, a third-party copy's destination beside its origins."""
        if point.tool == "iperf3":
            return "iperf3", None
        if registry.named(Sweep.tool_name(point)).kind == "tpc":
            return point.server, point.server
        return point.server, None

    def load(
        self, point: Point, origins: tuple[Origin, ...], destination: Origin | None
    ) -> LoadSpec:
        """The point as a load: what its tool moves (an upload's file prepared here)."""
        upload = point.tool == "dtnkit-cp-upload"
        return load_of(
            point, origins, destination, self.source_file(point.file_size) if upload else None
        )

    # ---- the lab path ----
    def _lab_spec(self, first: Point) -> path.PathSpec:
        return path.PathSpec(
            rtt_ms=first.rtt_ms,
            rate_bps=first.rate_bps,
            loss=first.loss,
            n_src=max(self.grid.axes["origins"]),
            n_dst=1,
            mtu=self.grid.mtu,
            backend=self.opts.backend,
        )

    def ensure_lab(self, point: Point) -> path.LabPath:
        opts = self.opts
        if self.lab is None:
            try:
                self.lab = path.load(opts.lab_name, state_root=opts.lab_state_root)
                self.lab_before = dataclasses.replace(self.lab.spec)
                if self.lab.spec.n_src < max(self.grid.axes["origins"]):
                    raise BadInput(
                        f"lab path {opts.lab_name!r} has {self.lab.spec.n_src} sending hosts",
                        f"the grid needs {max(self.grid.axes['origins'])} origins",
                        "give another --lab (the sweep builds it), or `dtnkit lab "
                        f"down {opts.lab_name}` first",
                    )
                if self.lab.spec.mtu != self.grid.mtu:
                    raise BadInput(
                        f"lab path {opts.lab_name!r} has MTU {self.lab.spec.mtu}",
                        f"the grid asks for MTU {self.grid.mtu} ([run] mtu)",
                        "give another --lab (the sweep builds it), or `dtnkit lab "
                        f"down {opts.lab_name}` first",
                    )
            except BadInput as exc:
                if not exc.what.startswith("no lab path"):
                    raise
                self.progress.step(f"building lab path {opts.lab_name}")
                self.lab = path.up(
                    opts.lab_name, self._lab_spec(point), state_root=opts.lab_state_root
                )
                self.lab_built = True
            self.start_anchors()
        lab = self.lab
        spec = lab.spec
        if point.rate_bps is None and spec.rate_bps is not None:
            self.rebuild_lab(point)
            return self.lab
        changes: dict[str, Any] = {}
        if spec.rtt_ms != point.rtt_ms:
            changes["rtt_ms"] = point.rtt_ms
        if spec.rate_bps != point.rate_bps:
            changes["rate_bps"] = point.rate_bps
        if spec.loss != point.loss:
            changes["loss"] = point.loss
        if changes:
            lab.set(**changes)
        return lab

    def rebuild_lab(self, point: Point) -> None:
        """A point without a rate cap after one with a cap: the cap cannot be lifted in
        place, so the path is built again (it is the sweep's own from then on)."""
        self.stop_servers()
        self.stop_anchors()
        assert self.lab is not None
        self.lab.down()
        self.lab = path.up(
            self.opts.lab_name, self._lab_spec(point), state_root=self.opts.lab_state_root
        )
        self.lab_built = True
        self.start_anchors()

    def start_anchors(self) -> None:
        """A ``sleep`` in every namespace of the path: the sampler reads its counters
        through /proc/PID/net."""
        assert self.lab is not None
        for ns in self.lab.state.namespaces:
            proc = self.procs.start(
                ["ip", "netns", "exec", ns, "sleep", "infinity"],
                stdout=process.DEVNULL,
                stderr=process.DEVNULL,
            )
            self.anchors[ns] = proc.pid
        # `ip netns exec` execs sleep once it has entered the namespace: wait for that
        deadline = time.monotonic() + 10
        for pid in self.anchors.values():
            while time.monotonic() < deadline:
                with contextlib.suppress(OSError):
                    if Path(f"/proc/{pid}/comm").read_text().strip() == "sleep":
                        break
                time.sleep(0.005)  # the exec of a process we started, bounded

    def stop_anchors(self) -> None:
        self.procs.stop_pids(self.anchors.values())
        self.anchors.clear()

    def finish_lab(self, interrupted: bool) -> str:
        """Tear the path down or leave it (restored to the spec it had) as asked."""
        self.stop_anchors()
        if self.lab is None:
            return ""
        keep = self.opts.keep_lab if self.opts.keep_lab is not None else not self.lab_built
        if not keep:
            self.lab.down()
            return "removed"
        before = self.lab_before
        if before is not None and not self.lab_built:
            spec = self.lab.spec
            with contextlib.suppress(DtnkitError):
                if before.rate_bps is None and spec.rate_bps is not None:
                    pass  # a cap cannot be lifted in place; the path keeps the last one
                else:
                    self.lab.set(rtt_ms=before.rtt_ms, rate_bps=before.rate_bps, loss=before.loss)
        return "kept"

    # ---- servers ----
    def server_key(self, point: Point, kinds: tuple[str | None, str | None]) -> tuple[Any, ...]:
        count = math.ceil(max(self.grid.axes["streams"]) / point.origins)
        return (kinds, point.origins, point.cores, point.file_size, count)

    def ensure_servers(self, point: Point) -> tuple[tuple[Origin, ...], Origin | None]:
        """The point's origins (and TPC destination): the running ones when the previous
        point had the same servers, else stopped by PID and started anew."""
        kinds = self.server_kinds(point)
        key = self.server_key(point, kinds)
        if (
            self.opts.reuse_servers
            and self.servers is not None
            and self.servers[0] == key
            and all(s.proc.poll() is None for s in self.servers[1])
        ):
            return self._origins(self.servers[1])
        self.stop_servers()
        running = self.start_servers(point, kinds, key[-1])
        self.servers = (key, running)
        return self._origins(running)

    @staticmethod
    def _origins(
        running: Sequence[servers.RunningServer],
    ) -> tuple[tuple[Origin, ...], Origin | None]:
        origins = tuple(s.origin for s in running if s.origin.index >= 0)
        dest = next((s.origin for s in running if s.origin.index < 0), None)
        return origins, dest

    def pki(self) -> servers.Pki:
        if self._pki is None:
            assert self.lab is not None
            names = [h.address for h in self.lab.hosts] + [
                self.lab.hostname(h) for h in self.lab.hosts
            ]
            self._pki = servers.make_pki(self.opts.workdir / "pki", names)
        return self._pki

    def start_servers(
        self, point: Point, kinds: tuple[str | None, str | None], count: int
    ) -> list[servers.RunningServer]:
        """Origins on the first ``point.origins`` sending hosts, each under its CPU quota
        (a cgroup: the accounting, and ``cores`` when set), ``count`` source files each."""
        assert self.lab is not None
        kind, dest_kind = kinds
        if kind is None:
            return []
        hosts = [h for h in self.lab.hosts if h.side == "src"][: point.origins]
        base = self.opts.workdir / "servers" / str(self._starts)
        self._starts += 1
        https = kind != "iperf3"
        source = (
            servers.prepare_source(self.opts.workdir / "files", point.file_size) if https else None
        )
        started = servers.start_many(
            kind,
            hosts,
            base=base,
            pki=self.pki() if https else None,
            cores=point.cores,
            prefix=self.cgroup_prefix,
            source=source,
            files=count if https else 0,
            token=self.token,
        )
        if dest_kind is not None:
            try:
                started.append(
                    servers.start_destination(
                        dest_kind,
                        self.lab.dst,
                        base=base,
                        pki=self.pki(),
                        prefix=self.cgroup_prefix,
                        origins=[s.origin for s in started],
                        token=self.token,
                    )
                )
            except BaseException:
                servers.stop_all(started)
                raise
        return started

    def stop_servers(self) -> None:
        if self.servers is not None:
            running, self.servers = self.servers[1], None
            servers.stop_all(running)

    # ---- profiles ----
    @contextlib.contextmanager
    def profile_applied(self, point: Point, hosts: Sequence[path.LabHost]) -> Iterator[None]:
        if point.profile is None:
            yield
            return
        with tuning.applied(
            point.profile,
            [h.netns for h in hosts],
            self.opts.state_dir,
            f"sweep-{self.opts.name}",
            rtt_ms=point.rtt_ms,
        ):
            yield

    def live_tuning(
        self, point: Point, client: path.LabHost, origin: path.LabHost | None
    ) -> dict[str, Any]:
        """The tuning live on both ends (read once per profile: it is the same for every
        point that applies it)."""
        if point.profile in self.tuning_cache:
            return self.tuning_cache[point.profile]
        doc = {
            "dst": tuning.live(client.netns),
            "src": tuning.live(origin.netns) if origin is not None else None,
        }
        self.tuning_cache[point.profile] = doc
        return doc

    # ---- one point ----
    def run_point(self, point: Point) -> store.PointResult:
        t_start = time.monotonic()
        started = time.time()
        phases: dict[str, float] = {}
        mark = [t_start]

        def phase(name: str) -> None:
            now = time.monotonic()
            phases[name] = round(phases.get(name, 0.0) + now - mark[0], 4)
            mark[0] = now

        try:
            lab = self.ensure_lab(point)
        except DtnkitError as exc:
            raise LabFailed(exc) from None
        phase("path_s")
        client = lab.dst
        hosts = [h for h in lab.hosts if h.side == "src"][: point.origins]
        workdir = self.opts.workdir / "points" / point.id
        shutil.rmtree(workdir, ignore_errors=True)
        workdir.mkdir(parents=True)
        try:
            with self.profile_applied(point, [client, *hosts]):
                phase("profile_s")
                tuning = self.live_tuning(point, client, hosts[0] if hosts else None)
                phase("tuning_s")
                try:
                    origins, destination = self.ensure_servers(point)
                except DtnkitError as exc:
                    return store.PointResult(
                        point=point,
                        status="failed",
                        **store.error_of(exc),
                        started=started,
                        elapsed_s=time.monotonic() - t_start,
                        tuning=tuning,
                    )
                phase("servers_start_s")
                spec = self.load(point, origins, destination)
                marks = [(srv, srv.log_size()) for srv in self.running()]
                window, run = self.measure(point, spec, lab, client, hosts, workdir)
                if run.failed:  # the servers' side of it: XRootD's 500s are told there
                    run = dataclasses.replace(run, raw=with_server_logs(run.raw, marks))
                phase("measure_s")
                if run.failed or not self.opts.reuse_servers:
                    self.stop_servers()  # a failed point's servers may be in any state
                phase("servers_stop_s")
            phase("profile_s")
        finally:
            shutil.rmtree(workdir, ignore_errors=True)
        return self.result(point, started, t_start, window, run, tuning, phases)

    def measure(
        self,
        point: Point,
        spec: LoadSpec,
        lab: path.LabPath,
        client: path.LabHost,
        hosts: Sequence[path.LabHost],
        workdir: Path,
    ) -> tuple[Window, ToolRun]:
        """Run the point's load with its tool on the client, the path sampled around it."""
        anchor = self.anchors
        receivers = [anchor[h.netns] for h in hosts] if spec.upload else [anchor[client.netns]]
        senders = [anchor[client.netns]] if spec.upload else [anchor[h.netns] for h in hosts]
        names = {h.name: anchor[h.netns] for h in [client, *hosts]}
        names["path"] = anchor[lab.mid]
        cpu = [self.cpu_reader(o) for o in spec.origins]
        sampler = PointSampler(
            interval_s=point.sample_interval_s,
            receivers=receivers,
            device=path.LINK_DEV,
            senders=senders,
            namespaces=names,
            origins_cpu=cpu,
            emulator=lab.emulator_stats if lab.state.backend == "nfqueue" else None,
        )
        deadline = time.monotonic() + point.time_limit_s
        with sampler:
            context = ToolContext(
                deadline=deadline,
                workdir=workdir,
                procs=self.procs,
                received_bytes=sampler.received_bytes,
            )
            run = registry.run_load(
                Host(netns=client.netns), spec, tool=self.tool_name(point), context=context
            )
        return sampler.window, run

    def running(self) -> list[servers.RunningServer]:
        return list(self.servers[1]) if self.servers is not None else []

    def cpu_reader(self, origin: Origin) -> Callable[[], float | None]:
        """The origin's CPU seconds so far: its cgroup's accounting, else the CPU time of its
        process group."""
        for s in self.running():
            if s.origin.pid == origin.pid and s.quota is not None:
                return s.usage_s
        return lambda: group_cpu_seconds(origin.pid)

    def result(
        self,
        point: Point,
        started: float,
        t_start: float,
        w: Window,
        run: ToolRun,
        tuning: dict[str, Any],
        phases: dict[str, float],
    ) -> store.PointResult:
        if run.measure_seconds is not None and run.measure_from_s is not None:
            start, until = data_window(w.samples, run.measure_from_s, run.measure_seconds)
            if run.measure_until_s is not None:
                until = min(until, run.measure_until_s)
            run = dataclasses.replace(run, measure_from_s=start, measure_until_s=until)
        emulator: dict[str, Any] | None = None
        bound, why = False, ""
        reasons: list[str] = []
        if w.emulator_docs:
            stage = fidelity.summarize(w.emulator_docs)
            emulator = stage.as_json()
            reasons += fidelity.emulator_bound(stage, rtt_ms=point.rtt_ms).reasons
        machine = measured_idle_percent(w, run.measure_from_s, run.measure_until_s)
        reasons += fidelity.machine_bound(machine).reasons
        bound, why = bool(reasons), "; ".join(reasons)
        tool_retrans = run.summary.get("retransmits")
        retrans, note = w.retransmits, w.retransmits_note
        if retrans is None and tool_retrans is not None:
            retrans, note = tool_retrans, "as the tool reported (not DSACK-corrected)"
        extra = {k: v for k, v in run.summary.items() if k != "retransmits"}
        extra["phases_s"] = phases  # where the point's wall time went (the runner's overhead)
        if w.errors:
            extra["sampler_errors"] = w.errors[:20]
        if tool_retrans is not None:
            extra["tool_retransmits"] = tool_retrans
        if run.measure_until_s is not None:
            extra["measure_until_s"] = round(run.measure_until_s, 6)
        if run.measure_from_s is not None:
            extra["measure_from_s"] = round(run.measure_from_s, 6)
            if machine is not None:  # what the lab-bound rule read: the transfer's own share
                extra["idle_percent_measured"] = machine
        return store.PointResult(
            point=point,
            status="failed" if run.failed else "ok",
            **(store.error_of(DtnkitError(run.failed)) if run.failed else {}),
            started=started,
            elapsed_s=time.monotonic() - t_start,
            tool_s=w.elapsed_s,
            samples=tuple(w.samples),
            series=w.series,
            cpu_seconds=tuple(w.cpu_seconds),
            softirq=w.softirq,
            retransmits=retrans,
            retransmits_note=note,
            ctxt=w.ctxt,
            nic_drops=w.nic_drops,
            transfers=run.transfers,
            raw=run.raw,
            tuning=tuning,
            emulator=emulator,
            emulator_bound=bound,
            emulator_why=why,
            extra=extra,
        )

    # ---- the sweep ----
    def run(self) -> SweepSummary:
        opts = self.opts
        points = self.grid.points()
        t0 = time.monotonic()
        summary = SweepSummary(
            name=opts.name, db=str(opts.db_path), total=len(points), lab_name=opts.lab_name
        )
        if opts.resume:
            self.store.run_info(opts.name)  # an unknown run is bad input, before anything
        todo = points
        done: set[str] = set()
        if opts.resume:
            done = self.store.done_point_ids(opts.name)
            todo = [p for p in points if p.id not in done]
        summary.skipped = len(points) - len(todo)
        self.store.create_run(
            opts.name, self.grid_text, environment(None), len(points), reuse=opts.resume
        )
        est = estimate.estimate(
            todo,
            start_s=estimate.measure_start(),
            new_lab=not path.state_dir(opts.lab_name, opts.lab_state_root).exists(),
        )
        summary.estimate = est.as_dict()
        self.progress.step(f"sweep {opts.name}: {est.line()}")
        for note in est.notes:
            self.progress.step(f"  note: {note}")
        interrupted = completed = False
        try:
            opts.workdir.mkdir(mode=0o700, parents=True, exist_ok=True)
            first = True
            for k, point in enumerate(todo, 1):
                eta = est.remaining(k - 1, time.monotonic() - t0) if k > 1 else None
                self.progress.step(describe(point), summary.skipped + k, len(points), eta_s=eta)
                try:
                    result = self.run_point(point)
                except LabFailed:
                    raise
                except DtnkitError as exc:
                    result = store.PointResult(
                        point=point, status="failed", **store.error_of(exc), started=time.time()
                    )
                    self.stop_servers()
                if first:  # the lab is known now: record it with the run
                    first = False
                    self.store.create_run(
                        opts.name, self.grid_text, environment(self.lab), len(points), reuse=True
                    )
                self.store.store_point(opts.name, result)
                summary.ran += 1
                if result.status == "ok":
                    summary.ok += 1
                else:
                    summary.failed += 1
                    summary.failures.append({"id": point.id, "error": result.error})
                self.progress.step(
                    f"  {result.status}: "
                    + (
                        format_rate(result.throughput_bps)
                        if result.throughput_bps is not None and result.status == "ok"
                        else result.error[:70]
                    )
                )
            completed = True
        except KeyboardInterrupt:
            interrupted = True
            raise
        finally:
            self.procs.stop_all()
            try:
                self.stop_servers()
            except Exception:  # a server that would not stop must not keep the lab up
                self.servers = None
            summary.lab = self.finish_lab(interrupted)
            shutil.rmtree(opts.workdir, ignore_errors=True)
            summary.interrupted = interrupted
            summary.elapsed_s = time.monotonic() - t0
            with contextlib.suppress(DtnkitError):
                # a sweep stopped before its last point (Ctrl-C, or a lab path that failed)
                self.store.set_status(opts.name, "done" if completed else "interrupted")
        return summary


def load_of(
    point: Point,
    origins: tuple[Origin, ...],
    destination: Origin | None,
    source: Path | None = None,
) -> LoadSpec:
    """A point as the load its tool runs: the grid's coordinates that say what to move
    (streams, duration or bytes, file size, the template and its values), the running
    servers, and ``source``, the local file an upload reads."""
    return LoadSpec(
        origins=origins,
        streams=point.streams,
        file_size=point.file_size,
        time_limit_s=point.time_limit_s,
        duration_s=point.duration_s,
        bytes=point.bytes,
        destination=destination,
        upload=point.tool == "dtnkit-cp-upload",
        source=source,
        command=point.command,
        fields={
            "rtt_ms": f"{point.rtt_ms:g}",
            "rate_bps": str(point.rate_bps) if point.rate_bps is not None else "",
        },
        interval_s=point.sample_interval_s,
    )


def with_server_logs(raw: str, marks: Sequence[tuple[servers.RunningServer, int]]) -> str:
    """A failed point's tool output followed by what each of its servers logged during the
    point (``SERVER_LOG_BYTES`` shared among them, the last lines of each): a transfer's
    error often says only "HTTP 500"; the server's log says why."""
    limit = max(2048, servers.SERVER_LOG_BYTES // max(1, len(marks)))
    parts = [raw.rstrip("\n")] if raw.strip() else []
    for srv, mark in marks:
        text = srv.log_since(mark, limit).strip("\n")
        if text:
            parts.append(f"--- {srv.label()} logged during the point ---\n{text}")
    return "\n".join(parts)


def describe(point: Point) -> str:
    parts = [f"rtt {point.rtt_ms:g} ms"]
    if point.rate_bps is not None:
        parts.append(f"rate {format_rate(point.rate_bps)}")
    if point.loss:
        parts.append(f"loss {point.loss * 100:g}%")
    if point.origins > 1:
        parts.append(f"{point.origins} origins")
    if point.cores is not None:
        parts.append(f"{point.cores:g} cores")
    if point.profile:
        parts.append(f"profile {point.profile}")
    parts.append(point.tool)
    parts.append(counted(point.streams, "stream"))
    if point.repeat:
        parts.append(f"repeat {point.repeat + 1}")
    return ", ".join(parts)
