"""CPU quotas per origin (dtnkit.sweep.cgroups): real cgroups, real busy loops."""

from __future__ import annotations

import secrets
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.support.cgroups import cgroup_reason, needs_cgroups

from dtnkit.errors import BadInput
from dtnkit.sweep import cgroups
from dtnkit.sweep.cgroups import CgroupUnavailable, CpuQuota, cpu_quota

pytestmark = pytest.mark.needs_root
BUSY = "import sys\nprint('go', flush=True)\nwhile True:\n    pass\n"
# a random part: pytest-xdist workers (and other checkouts) test at once, and `clean` removes
# every cgroup under this prefix
PREFIX = f"o19c{secrets.token_hex(3)}"


@pytest.fixture
def clean() -> Iterator[None]:
    yield
    if not cgroup_reason():
        assert cgroups.remove_leftovers(PREFIX) == [], "a test left a cgroup behind"


def start_busy(q: CpuQuota) -> subprocess.Popen[str]:
    proc = subprocess.Popen(q.wrap([sys.executable, "-c", BUSY]), stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline() == "go\n"  # running inside
    return proc


@pytest.mark.serial
@needs_cgroups
def test_quota_holds_the_rate_and_cleanup_leaves_nothing(clean: None) -> None:
    """Three busy loops at once: 0.25 core, 0.5 core and no limit (the reference for what the
    loaded machine gives a loop).  Each quota caps its loop; the 0.5 one gets about twice the
    0.25 one whenever the machine has that much to give."""
    with (
        cpu_quota(f"{PREFIX}-q25", 0.25) as a,
        cpu_quota(f"{PREFIX}-q50", 0.5) as b,
        cpu_quota(f"{PREFIX}-free", None) as c,
    ):
        procs = [start_busy(q) for q in (a, b, c)]
        assert sorted(a.pids() + b.pids() + c.pids()) == sorted(p.pid for p in procs)
        rates: list[list[float]] = [[], [], []]
        for _ in range(3):  # three windows: a burst of load spoils one, not the verdict
            u0, t0 = [q.usage_s() for q in (a, b, c)], time.monotonic()
            time.sleep(0.6)  # the measuring window (not synchronisation)
            u1, t1 = [q.usage_s() for q in (a, b, c)], time.monotonic()
            for i in range(3):
                rates[i].append((u1[i] - u0[i]) / (t1 - t0))
        r25, r50, free = (sorted(r)[1] for r in rates)  # medians
        # a quota is a hard cap (a little over: CFS accounts per period, the window is not
        # aligned to periods)
        assert r25 <= 0.25 * 1.15 + 0.02, rates
        assert r50 <= 0.5 * 1.15 + 0.02, rates
        avail = max(free, r50)  # what a loop can get on this machine now
        assert r50 >= 0.7 * min(0.5, avail), rates
        if avail >= 0.45:  # the machine has room for the 0.5 core: the quotas differ
            assert r50 >= 1.4 * r25, rates
        if free >= 0.6:  # the 0.5 core loop wanted more than its quota: the kernel held it
            assert b.throttled()["throttled"] > 0, rates
        assert cgroups.usage_of(b.path) >= b.usage_s() > 0  # what a runner reads by path
        paths = [Path(p) for q in (a, b, c) for p in q.paths]
    for p in procs:
        assert p.wait(5) is not None
    assert not any(p.exists() for p in paths)
    assert a.final_usage_s is not None and a.final_usage_s > 0
    assert a.usage_s() == a.final_usage_s  # still readable after close


@needs_cgroups
def test_children_are_inside_and_close_stops_them(clean: None) -> None:
    with cpu_quota(f"{PREFIX}-kids", 1.0) as q:
        proc = subprocess.Popen(
            q.wrap(["sh", "-c", "sleep 60 & echo $!; wait"]), stdout=subprocess.PIPE, text=True
        )
        assert proc.stdout is not None
        child = int(proc.stdout.readline())
        assert sorted(q.pids()) == sorted([proc.pid, child])
        cg = Path(f"/proc/{child}/cgroup").read_text()
        assert f":/{cgroups.PREFIX}{PREFIX}-kids\n" in cg
        later = subprocess.Popen(["sleep", "60"])
        q.add(later.pid)
        assert later.pid in q.pids()
    assert proc.wait(5) is not None and later.wait(5) is not None
    assert not Path(q.path).exists()


@needs_cgroups
def test_a_name_taken_is_refused_and_nothing_is_removed(clean: None) -> None:
    with cpu_quota(f"{PREFIX}-dup", 0.5) as q, pytest.raises(BadInput, match="already exists"):
        CpuQuota(f"{PREFIX}-dup", 0.5)
    assert not Path(q.path).exists()


@needs_cgroups
def test_leftovers_of_a_killed_sweep_are_removed_by_prefix(clean: None) -> None:
    q = CpuQuota(f"{PREFIX}-left", 0.5)
    proc = start_busy(q)
    other = CpuQuota("o19zother", None)  # another prefix: untouched
    try:
        assert cgroups.remove_leftovers(PREFIX) == [str(p) for p in sorted(q.paths)]
        assert proc.wait(5) is not None
        assert all(Path(p).exists() for p in other.paths)
    finally:
        other.close()


@pytest.mark.parametrize("cores", [0, -1, 0.001, float("nan"), 5000, True, "1"])
def test_bad_cores_are_one_clear_error(cores: object) -> None:
    with pytest.raises(BadInput, match="CPU quota"):
        cgroups.check_cores(cores)  # type: ignore[arg-type]


def test_no_hierarchy_is_one_clear_error_naming_what_was_seen(tmp_path: Path) -> None:
    mounts = (
        "tmpfs /sys/fs/cgroup tmpfs rw 0 0\n"
        "cgroup /x/memory cgroup rw,memory 0 0\n"
        f"cgroup2 {tmp_path} cgroup2 rw 0 0\n"
    )
    (tmp_path / "cgroup.controllers").write_text("memory io\n")
    (tmp_path / "cgroup.subtree_control").write_text("\n")
    with pytest.raises(CgroupUnavailable) as err:
        cgroups.detect(mounts)
    text = err.value.render()
    assert "no CPU quota controller" in text
    assert "no cgroup v1 cpu hierarchy" in text and "offers no cpu controller" in text
    assert "Traceback" not in text and "\n" not in text


def test_v2_cpu_not_enabled_says_how(tmp_path: Path) -> None:
    (tmp_path / "cgroup.controllers").write_text("cpu memory\n")
    (tmp_path / "cgroup.subtree_control").write_text("memory\n")
    with pytest.raises(CgroupUnavailable) as err:
        cgroups.detect(f"cgroup2 {tmp_path} cgroup2 rw 0 0\n")
    assert f"echo +cpu > {tmp_path}/cgroup.subtree_control" in err.value.render()
    (tmp_path / "cgroup.subtree_control").write_text("cpu memory\n")
    ctl = cgroups.detect(f"cgroup2 {tmp_path} cgroup2 rw 0 0\n")
    assert ctl.kind == cgroups.KIND_V2 and ctl.roots() == (tmp_path,)


def test_a_cpuset_takes_whole_cores_only(tmp_path: Path) -> None:
    ctl = cgroups.detect(f"cgroup {tmp_path} cgroup rw,cpuset 0 0\n")
    assert ctl.kind == cgroups.KIND_CPUSET
    with pytest.raises(BadInput, match="cannot be a cpuset"):
        cgroups.check_cores(0.5, ctl)
    assert cgroups.check_cores(1, ctl) == 1.0


def test_bad_names_are_refused() -> None:
    for bad in ("", "Upper", "a/b", "../x", "x" * 70):
        with pytest.raises(BadInput):
            cgroups.check_name(bad)
