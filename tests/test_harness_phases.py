"""dev/phases.sh (what dev/test.sh and CI run after the checks) runs the `serial` tests beside
the others, which sit in a cpu cgroup marked idle until the serial phase ends: the journeys
below run it on a small suite of their own and read what a developer reads."""

from __future__ import annotations

import os
import re
import secrets
import signal
import subprocess
from pathlib import Path

import pytest
from tests.support import polling

ROOT = Path(__file__).parents[1]
PHASES = ROOT / "dev" / "phases.sh"

# Each inner test says what it saw in files under PHASES_DIR; they wait on each other's files,
# so the serial test is still running when the first parallel one looks at its cgroup.
INNER = '''
import os, pathlib, signal, time
import pytest
import dtnkit  # the phases measure the package's coverage: there is some to report

OUT = pathlib.Path(os.environ["PHASES_DIR"])
# one phase after the other: nothing to wait for, nothing beside
BESIDE = os.environ.get("DTNKIT_TEST_PHASES") != "sequential"


def cpu_cgroup():
    """This process's cpu cgroup (v1 or v2) and that cgroup's cpu.idle."""
    for line in pathlib.Path("/proc/self/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        if "cpu" in controllers.split(","):
            where = pathlib.Path("/sys/fs/cgroup/cpu" + path)
            break
    else:
        where = pathlib.Path("/sys/fs/cgroup" + line.split(":", 2)[2])
    idle = where / "cpu.idle"
    return str(where), idle.read_text().strip() if idle.exists() else "-"


def wait_for(name, seconds=120):
    deadline = time.monotonic() + seconds
    while not (OUT / name).exists():
        assert time.monotonic() < deadline, f"{name} never came"
        time.sleep(0.05)  # a poll of the other phase's file, bounded above


@pytest.mark.serial
def test_serial():
    (OUT / "serial").write_text(" ".join(cpu_cgroup()))
    if os.environ.get("PHASES_HOLD"):
        signal.pause()
    if BESIDE:
        wait_for("parallel-during")  # the other phase ran while this one was still running
    assert not os.environ.get("PHASES_FAIL"), "a serial test that fails"


def test_parallel_during_the_serial_phase():
    if not BESIDE:
        return
    wait_for("serial")
    (OUT / "parallel-during").write_text(" ".join(cpu_cgroup()))
    if os.environ.get("PHASES_HOLD"):
        signal.pause()


def test_parallel_after_the_serial_phase():
    if not BESIDE:
        return
    wait_for("parallel-during")
    deadline = time.monotonic() + 120
    while cpu_cgroup()[1] == "1":
        assert time.monotonic() < deadline, "the cgroup stayed idle"
        time.sleep(0.05)
    (OUT / "parallel-after").write_text(" ".join(cpu_cgroup()))
'''

pytestmark = [pytest.mark.needs_root]


def suite(tmp_path: Path) -> tuple[Path, Path]:
    tests = tmp_path / "suite"
    tests.mkdir()
    (tests / "pytest.ini").write_text("[pytest]\nmarkers =\n    serial: judged timing\n")
    (tests / "test_inner_phases.py").write_text(INNER)
    out = tmp_path / "out"
    out.mkdir()
    return tests, out


def phases(out: Path, tests: Path, **env: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [str(PHASES), "-p", "no:cacheprovider", str(tests)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={
            **os.environ,
            "PHASES_DIR": str(out),
            "DTNKIT_TEST_WORKERS": "2",
            # the combined coverage data goes here, not into the checkout under test
            "COVERAGE_FILE": str(out.parent / "coverage"),
            **env,
        },
    )


def checkout_coverage() -> dict[str, int]:
    """The checkout's coverage data files and when each was written: a run of dev/phases.sh
    (this suite's own, around this test) keeps its data in a directory of its own."""
    return {p.name: p.stat().st_mtime_ns for p in ROOT.glob(".coverage*")}


def own_cgroup(text: str) -> Path:
    """The cgroup a run of dev/phases.sh made, as its first line names it (other tests of this
    file may run theirs at the same time on other workers)."""
    m = re.search(r"\((/sys/fs/cgroup/\S*dtnkit-test-phase-[0-9]+-[0-9]+)\)", text)
    assert m, text
    return Path(m.group(1))


def idle_root() -> Path:
    """Where dev/phases.sh makes its cgroup: the cgroup v1 cpu hierarchy, else v2's root."""
    v1 = Path("/sys/fs/cgroup/cpu")
    return v1 if (v1 / "cpu.shares").exists() else Path("/sys/fs/cgroup")


def idle_cgroups_offered() -> bool:
    return Path("/sys/fs/cgroup/cpu/cpu.idle").exists() or Path("/sys/fs/cgroup/cpu.idle").exists()


@pytest.mark.skipif(not idle_cgroups_offered(), reason="needs cpu cgroups with cpu.idle")
def test_the_other_tests_yield_to_the_serial_ones_until_those_end(tmp_path: Path) -> None:
    tests, out = suite(tmp_path)
    # what a run killed before its clean-up leaves: an empty cgroup named for a process gone
    gone = subprocess.run(["sh", "-c", "echo $$"], capture_output=True, text=True).stdout
    stale = idle_root() / f"dtnkit-test-phase-{gone.strip()}-1"
    stale.mkdir()
    # what another run's coverage data in the checkout looks like (a developer's `pytest
    # --cov` beside it): this run must neither remove it nor combine it into its own
    other = ROOT / f".coverage.other-run-{secrets.token_hex(4)}"
    other.write_bytes(b"not this run's")
    try:
        data = checkout_coverage()
        proc = phases(out, tests)
        text = proc.communicate(timeout=300)[0]
        after = checkout_coverage()
    finally:
        other.unlink(missing_ok=True)
    assert proc.returncode == 0, text
    assert (tmp_path / "coverage").is_file()
    assert after == data, "the run wrote or removed coverage data in the checkout"
    if stale.exists():
        stale.rmdir()
        raise AssertionError("the killed run's empty cgroup was left")

    serial_cgroup, _ = (out / "serial").read_text().split()
    during, idle_during = (out / "parallel-during").read_text().split()
    after, idle_after = (out / "parallel-after").read_text().split()
    # the parallel phase has a cgroup of its own, idle while the serial test ran, then not
    assert Path(during).name.startswith("dtnkit-test-phase-") and during == after
    assert serial_cgroup != during
    assert (idle_during, idle_after) == ("1", "0")
    assert not own_cgroup(text).exists(), "the phase's cgroup was left behind"

    # what the developer reads: the parallel phase, then the serial one, then one coverage
    said = text.index("the serial phase runs beside this one")
    parallel = text.index("2 passed in")
    serial = text.index("the serial phase (it ran beside the one above)")
    assert said < parallel < serial < text.index("1 passed, 2 deselected") < text.index("TOTAL")


def test_one_after_the_other_a_failing_serial_test_fails_the_run(tmp_path: Path) -> None:
    tests, out = suite(tmp_path)
    proc = phases(out, tests, DTNKIT_TEST_PHASES="sequential", PHASES_FAIL="1")
    text = proc.communicate(timeout=300)[0]
    assert proc.returncode == 1, text
    assert "runs beside" not in text
    assert text.index("2 passed in") < text.index("1 failed, 2 deselected"), text
    assert "a serial test that fails" in text


@pytest.mark.skipif(not idle_cgroups_offered(), reason="needs cpu cgroups with cpu.idle")
def test_sigterm_ends_both_phases_and_removes_the_cgroup(tmp_path: Path) -> None:
    tests, out = suite(tmp_path)
    proc = phases(out, tests, PHASES_HOLD="1")
    try:
        polling.until(
            "both phases' tests running",
            lambda: (out / "serial").exists() and (out / "parallel-during").exists(),
            120,
        )
        proc.send_signal(signal.SIGTERM)
        text = proc.communicate(timeout=120)[0]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 143, text
    assert not own_cgroup(text).exists(), f"the phase's cgroup was left behind\n{text[-2000:]}"
    # no pytest of this suite is left running
    ps = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
    assert str(tests) not in ps, ps
