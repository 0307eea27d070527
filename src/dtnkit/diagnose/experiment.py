"""Per-group experiments: save -> apply one group -> probe -> restore, against interleaved
baseline runs (A B A B ...), so each group's effect is a ratio with its noise.

A group *helps* when its median beats the baseline median by more than the noise, is
*harmful* when it loses by more than the noise, and *neutral* inside the noise or when the
hosts already comply (``applied: false``: nothing to apply).

An experiment's own snapshots live apart from `tune apply`'s (``STATE/experiments/ID/``): they
never move the "last baseline" that a later ``tune restore`` goes back to, and each is deleted
once its group is restored; the experiment dir is removed when all are (the results record of
the experiment stays in the results store).  A snapshot whose restore failed is kept there.
"""

from __future__ import annotations

import secrets
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from dtnkit.errors import DtnkitError
from dtnkit.host.host import Host
from dtnkit.measure.registry import run_probe
from dtnkit.measure.result import iso_utc
from dtnkit.measure.store import ResultStore
from dtnkit.measure.tool import ProbeSpec, ToolContext
from dtnkit.tune import apply
from dtnkit.tune.audit import build_context, check_groups
from dtnkit.tune.judging import Judging
from dtnkit.tune.profile import Profile
from dtnkit.tune.snapshot import Store
from dtnkit.units import format_rate

MIN_MARGIN = 0.05  # never call an effect below 5 % real


class ExperimentSnapshots(Store):
    """Snapshots of one experiment, under ``STATE/experiments/ID``: the lock is still the
    state dir's (experiments and applies never write at once), but they are not listed by
    ``tune list`` and never become the "last baseline"."""

    def __init__(self, state_dir: Path, exp_id: str) -> None:
        super().__init__(state_dir)
        self.dir = state_dir / "experiments" / exp_id

    def set_last_baseline(self, snap_id: str, scope: str = "host") -> None:
        """Experiments leave apply's last baseline where it is."""

    def last_baseline(self, scope: str = "host") -> str | None:
        return None

    def remove(self, snap_id: str) -> None:
        (self.dir / f"{snap_id}.json").unlink(missing_ok=True)

    def remove_dir(self) -> None:
        """The experiment's dir, once it holds no snapshot (a failed restore keeps its own)."""
        try:
            self.dir.rmdir()
            self.dir.parent.rmdir()  # the experiments dir, when no other is running
        except OSError:
            pass


@dataclass
class ExperimentSpec:
    groups: list[str]
    probe: ProbeSpec  # what each run measures (its kind picks the tools)
    tool: str | None = None  # None: the probe's default tool
    repeat: int = 2
    both_ends: bool = False
    #: what each group is judged by (RTT, speed, interfaces; the profile is passed apart)
    judging: Judging = field(default_factory=Judging)

    @property
    def rtt_ms(self) -> float:
        return self.judging.rtt_ms


class RunProgress:
    """The runs of an experiment: how many are done of how many, and the time left (the
    mean run so far times the runs left)."""

    def __init__(self, total: int) -> None:
        self.total, self.done = total, 0
        self.t0 = time.monotonic()

    def eta_s(self) -> float | None:
        if not self.done:
            return None
        return (time.monotonic() - self.t0) / self.done * max(0, self.total - self.done)


def live_tuning(host: Host) -> dict[str, Any] | None:
    """The tuning live during a probe, recorded with its result; None if unreadable."""
    try:
        return apply.live_values(host)
    except DtnkitError:  # recording the tuning must never lose a measurement
        return None


def _median(xs: Sequence[float]) -> float:
    return statistics.median(xs) if xs else 0.0


def judge(baseline: Sequence[float], treated: Sequence[float]) -> tuple[str, float, float]:
    """(verdict, ratio of medians, margin): the margin is the baseline's own relative spread."""
    base, got = _median(baseline), _median(treated)
    if base <= 0:
        return "neutral", 0.0, 1.0
    spread = (max(baseline) - min(baseline)) / base if len(baseline) > 1 else 0.0
    margin = max(MIN_MARGIN, spread)
    ratio = got / base
    if ratio > 1 + margin:
        return "helps", ratio, margin
    if ratio < 1 - margin:
        return "harmful", ratio, margin
    return "neutral", ratio, margin


def run_experiment(
    hosts: Sequence[Host],
    spec: ExperimentSpec,
    profile: Profile,
    store: ResultStore,
    state_dir: Path,
    *,
    context: ToolContext | None = None,
    progress: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """``hosts``: where groups are applied (this host, and the peer with --both-ends); every
    probe runs from the first."""
    check_groups(spec.groups)
    if spec.repeat < 1 or spec.repeat > 20:
        raise DtnkitError("--repeat must be 1 to 20", f"got {spec.repeat}")
    exp_id = f"exp-{time.strftime('%Y%m%dT%H%M%S', time.gmtime())}-{secrets.token_hex(2)}"
    say = progress or (lambda _msg: None)
    snaps = ExperimentSnapshots(state_dir, exp_id)
    started = time.time()
    report: dict[str, Any] = {
        "id": exp_id,
        "started": iso_utc(started),
        "started_epoch": started,
        "spec": {
            "groups": spec.groups,
            "probe": spec.probe.kind,
            "repeat": spec.repeat,
            "both_ends": spec.both_ends,
            "rtt_ms": spec.rtt_ms,
            "profile": profile.name,
            "speed_mbps": spec.judging.speed_mbps,
            "ifaces": list(spec.judging.ifaces),
            "exact": spec.judging.exact,
            "hosts": [h.label for h in hosts],
        },
        "groups": [],
    }

    context = context or ToolContext()
    runs = RunProgress(len(spec.groups) * spec.repeat * 2)

    def measured(label: str) -> float:
        group, kind, k = label.split(":")
        context.progress.step(
            f"group {group} ({spec.groups.index(group) + 1} of {len(spec.groups)}): "
            f"{kind} run {int(k) + 1} of {spec.repeat}",
            runs.done + 1,
            runs.total,
            eta_s=runs.eta_s(),
        )
        r = run_probe(hosts[0], spec.probe, tool=spec.tool, context=context)
        runs.done += 1
        r.experiment_id, r.label = exp_id, label
        r.tuning = live_tuning(hosts[0])
        store.add(r)
        value = float(r.summary["throughput_bps"])
        say(f"  {label}: {format_rate(value)}")
        return value

    for group in spec.groups:
        say(f"group {group}")
        base: list[float] = []
        treated: list[float] = []
        changes: list[dict[str, Any]] = []
        applicable = True
        for k in range(spec.repeat):
            base.append(measured(f"{group}:baseline:{k}"))
            baselines: list[tuple[Host, str]] = []
            try:
                for h in hosts:
                    audit = spec.judging.audit(h, profile, [group])
                    if not apply.plan(audit):
                        continue
                    # apply audits again under the lock: the plan above may be stale by then
                    out = apply.apply(
                        h,
                        partial(spec.judging.audit, profile=profile, groups=[group]),
                        snaps,
                        label=f"{exp_id} {group}",
                    )
                    if out.baseline:
                        baselines.append((h, out.baseline))
                    if not out.ok:
                        assert out.error is not None
                        raise out.error
                    if k == 0:
                        changes += [{"host": h.label, **s.as_dict()} for s in out.done]
                if not baselines:
                    applicable = False
                    runs.total -= 2 * (spec.repeat - k) - 1  # the group's other runs are not made
                    break
                treated.append(measured(f"{group}:applied:{k}"))
            finally:
                for h, snap_id in reversed(baselines):
                    ctx = build_context(
                        h, profile, rtt_ms=spec.rtt_ms, speed_mbps=spec.judging.speed_mbps
                    )
                    back = apply.restore(h, snaps.load(snap_id), snaps, ctx)
                    if back.ok:
                        snaps.remove(snap_id)
                    else:
                        report.setdefault("kept_snapshots", []).append(
                            str(snaps.dir / f"{snap_id}.json")
                        )
        if not applicable:
            report["groups"].append(
                {
                    "group": group,
                    "verdict": "neutral",
                    "applied": False,
                    "why": "nothing to apply: the hosts already comply",
                    "baseline_bps": base,
                    "applied_bps": [],
                    "ratio": None,
                    "margin": None,
                    "changes": [],
                }
            )
            say("  neutral: nothing to apply (the hosts already comply)")
            continue
        verdict, ratio, margin = judge(base, treated)
        noise_measured = len(base) > 1  # one baseline run has no spread: the floor alone
        say(
            f"  {verdict}: x{ratio:.2f} (noise +-{margin:.0%}"
            + ("" if noise_measured else ", not measured: one baseline run")
            + ")"
        )
        report["groups"].append(
            {
                "group": group,
                "verdict": verdict,
                "applied": True,
                "ratio": ratio,
                "margin": margin,
                "noise_measured": noise_measured,
                "baseline_bps": base,
                "applied_bps": treated,
                "changes": changes,
            }
        )
    snaps.remove_dir()
    report["helped"] = [g["group"] for g in report["groups"] if g["verdict"] == "helps"]
    finished = time.time()
    report["finished"], report["finished_epoch"] = iso_utc(finished), finished
    store.add_experiment(exp_id, report)
    return report
