"""The dtn.dtnkit playbooks end to end, over SSH, against four real hosts on one machine
(tests/support/sshhosts.py: the end hosts of one lab path, 20 ms RTT and a 200 Mbit/s cap
between the pairs src1 -> dst1 and src2 -> dst2, each host with its own sshd), with the
campaign's results in a real PostgreSQL (tests/support/postgres.py).

The hosts start as an untuned site: TCP buffers capped at 64 KiB (per namespace), so the
``buffers`` group really changes what a probe across the path measures.  Every check of
"nothing changed" / "restored" compares the live host with a snapshot the test saved before
(``dtnkit tune diff``, in a state dir of the test's own, not the playbook's), and reads the
root namespace's host-global values before and after (a campaign in namespaces must never
write them).
"""

from __future__ import annotations

import importlib.util
import json
import shlex
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

import pytest
from tests.support import sshhosts
from tests.support.postgres import missing_postgres, postgres_server

_WHY = (
    sshhosts.missing()
    or sshhosts.missing_ansible()
    or sshhosts.missing_collection()
    or missing_postgres()
)
pytestmark = [
    pytest.mark.needs_root,
    pytest.mark.needs_netns,
    pytest.mark.needs_sshd,
    pytest.mark.needs_ansible,
    pytest.mark.needs_postgres,
    pytest.mark.skipif(bool(_WHY), reason=str(_WHY)),
]
# dtnkit's PostgreSQL store (`--db postgresql://`): without it the hosts keep SQLite files
PG_STORE = importlib.util.find_spec("dtnkit.db") is not None
T = TypeVar("T")


def small(k: int) -> str:
    """Host k's TCP buffers before tuning: an untuned site's, max 64 KiB (~26 Mbit/s at
    20 ms) plus 4 KiB per host, so each host's audit shows which host it came from."""
    return f"4096 16384 {65536 + 4096 * k}"


GROUPS = ["buffers"]
PROBE_S = 1  # seconds per probe: 64 KiB windows reach ~26 Mbit/s of the 200, in any second
REPEAT = 1  # probes per (baseline, applied): a x10 gain needs no more
SITE_AUDIT = "dtn.dtnkit.site_audit"
CAMPAIGN = "dtn.dtnkit.campaign"
ROLLBACK = "dtn.dtnkit.rollback"


def tour(start: str) -> list[str]:
    """The README fleet tour's command lines that start with ``start`` (continuations joined,
    comments dropped), split as a shell would."""
    text = (sshhosts.REPO / "README.md").read_text().split("### Fleet tour", 1)[1]
    block = text.split("```console\n", 1)[1].split("```", 1)[0]
    lines: list[str] = []
    pending = ""
    for raw in block.splitlines():
        line = raw.split("  #", 1)[0].rstrip()
        if not line or line.startswith("#"):
            continue
        if line.endswith("\\"):
            pending += line[:-1]
            continue
        lines.append(pending + line)
        pending = ""
    return [line for line in lines if line.startswith(start)]


def run_tour_line(
    fleet: sshhosts.SshHosts, line: str, inventory: Path, cwd: Path
) -> subprocess.CompletedProcess[str]:
    """A README line as written, in ``cwd`` (``$PWD``), against the test's inventory."""
    env = fleet.env(PWD=str(cwd))
    argv = [
        str(inventory) if a == "inventory.yml" else a.replace("$PWD", str(cwd))
        for a in shlex.split(line)
    ]
    argv[0] = str(sshhosts.bindir() / argv[0])
    return subprocess.run(
        argv, capture_output=True, text=True, check=False, timeout=600, env=env, cwd=cwd
    )


def campaign_vars(out: Path, **more: Any) -> list[str]:
    doc = {
        "dtnkit_out_dir": str(out),
        "dtnkit_groups": GROUPS,
        "dtnkit_probe_duration": f"{PROBE_S}s",
        "dtnkit_repeat": REPEAT,
        "dtnkit_rtt": "20ms",
        **more,
    }
    return ["-e", json.dumps(doc)]


# ---- fixtures ------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def pg(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    with postgres_server(tmp_path_factory.mktemp("fss-pg"), "fss") as server:
        yield server


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[sshhosts.SshHosts]:
    with sshhosts.ssh_hosts(
        tmp_path_factory.mktemp("fss-fleet"),
        prefix="fssp",
        pairs=2,
        rtt_ms=20,
        rate_bps=200_000_000,
    ) as hosts:
        yield hosts


@pytest.fixture(scope="module")
def inventory(fleet: sshhosts.SshHosts, pg: Any, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Each host's dtnkit_path is a wrapper of the real dtnkit that first logs its arguments
    in ``runs-HOST.log`` next to the inventory (what :func:`runs` counts)."""
    where = tmp_path_factory.mktemp("fss-inv")
    paths = {}
    for h in fleet.hosts:
        paths[h.name] = where / f"dtnkit-{h.name}"
        paths[h.name].write_text(
            f'#!/bin/sh\necho "$*" >> {where}/runs-{h.name}.log\nexec {fleet.dtnkit_path} "$@"\n'
        )
        paths[h.name].chmod(0o755)
    return fleet.inventory(
        where / "inventory.yml",
        db=pg.url if PG_STORE else None,
        host_vars={n: {"dtnkit_path": str(p)} for n, p in paths.items()},
    )


def runs(inventory: Path) -> dict[str, list[list[str]]]:
    """The dtnkit runs on each host so far (each a run's first two words), then forgotten."""
    out = {}
    for log in inventory.parent.glob("runs-*.log"):
        out[log.stem[len("runs-") :]] = [line.split()[:2] for line in log.read_text().splitlines()]
        log.unlink()
    return out


@pytest.fixture(autouse=True)
def untuned(fleet: sshhosts.SshHosts) -> sshhosts.SshHosts:
    """Every test starts from the untuned site, with no snapshot in any host's state dir."""
    for k, h in enumerate(fleet.hosts):
        for key in ("tcp_rmem", "tcp_wmem"):
            h.run(["sh", "-c", f"echo '{small(k)}' > /proc/sys/net/ipv4/{key}"])
        shutil.rmtree(h.state_dir)  # no snapshot, no last baseline, no server PID file
        h.state_dir.mkdir()
    return fleet


def each(fleet: sshhosts.SshHosts, fn: Callable[[sshhosts.SshHost], T]) -> dict[str, T]:
    """fn on every host at once (threads: each runs a dtnkit process in its namespace)."""
    with ThreadPoolExecutor(len(fleet.hosts)) as pool:
        futures = {h.name: pool.submit(fn, h) for h in fleet.hosts}
        return {name: f.result() for name, f in futures.items()}


class Reference:
    """Each host's values saved before a step (in the test's own state dirs), and the
    root namespace's host-global values."""

    def __init__(self, fleet: sshhosts.SshHosts, where: Path) -> None:
        self.fleet = fleet
        self.where = where
        self.host_global = sshhosts.host_global()
        each(
            fleet,
            lambda h: fleet.dtnkit(
                h,
                "tune",
                "save",
                "--label",
                "fss-reference",
                "--state-dir",
                str(self.dir(h)),
                "--format",
                "json",
            ),
        )

    def dir(self, h: sshhosts.SshHost) -> Path:
        return self.where / h.name

    def differences(self, h: sshhosts.SshHost) -> list[dict[str, Any]]:
        """What differs between the host now and its reference snapshot (none: equal)."""
        proc = self.fleet.dtnkit(
            h,
            "tune",
            "diff",
            "fss-reference",
            "--state-dir",
            str(self.dir(h)),
            "--format",
            "json",
            check=False,
        )
        assert proc.returncode in (0, 3), proc.stderr
        doc = json.loads(proc.stdout)
        diffs: list[dict[str, Any]] = doc.get("differences", [])
        assert (proc.returncode == 3) == bool(diffs), doc
        return diffs

    def assert_unchanged(self) -> None:
        changed = each(self.fleet, self.differences)
        assert not any(changed.values()), changed
        assert sshhosts.host_global() == self.host_global


def results_count(pg: Any) -> int:
    """Rows in the shared store's results table (0 before anything created it)."""
    if pg.psql("SELECT to_regclass('public.results') IS NULL").strip() == "t":
        return 0
    return int(pg.psql("SELECT count(*) FROM results"))


def snapshots(h: sshhosts.SshHost) -> list[str]:
    return sorted(p.name for p in (h.state_dir / "snapshots").glob("*"))


# ---- site audit ----------------------------------------------------------------------------
def test_site_audit_writes_every_hosts_own_audit(
    fleet: sshhosts.SshHosts, inventory: Path, tmp_path: Path
) -> None:
    """The README's site audit and report lines, as written."""
    (line,) = tour("ansible-playbook -i inventory.yml dtn.dtnkit.site_audit")
    proc = run_tour_line(fleet, line, inventory, tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    out = tmp_path / "site"
    assert sorted(p.name for p in out.glob("*.audit.json")) == sorted(
        f"{h.name}.audit.json" for h in fleet.hosts
    )
    for k, h in enumerate(fleet.hosts):
        doc = json.loads((out / f"{h.name}.audit.json").read_text())
        assert doc["schema"] == "dtnkit.audit/2"
        # run on that host: in a namespace, with that host's own (untuned) buffers
        assert doc["environment"]["initial_netns"] is False
        current = {f["key"]: f["current"] for f in doc["findings"]}
        # an array of integers in the audit's JSON (schema 2)
        assert current["sysctl/net.ipv4.tcp_rmem"] == [int(x) for x in small(k).split()]
        assert doc["compliant"] is False
        direct = fleet.audit(h)
        assert [f["key"] for f in doc["findings"]] == [f["key"] for f in direct["findings"]]
    (line,) = tour("dtnkit fleet report")
    report = run_tour_line(fleet, line, inventory, tmp_path)
    assert report.returncode == 3, report.stderr  # no host complies yet
    page = (out / "report" / "report.html").read_text()
    assert all(h.name in page for h in fleet.hosts)


# ---- campaign ------------------------------------------------------------------------------
def test_check_mode_campaign_changes_nothing_on_any_host(
    fleet: sshhosts.SshHosts, inventory: Path, tmp_path: Path
) -> None:
    ref = Reference(fleet, tmp_path / "ref")
    (src1, dst1), (src2, dst2) = fleet.pairs
    runs(inventory)
    # two pairs with one server in common: the role reads each host's NIC speed once a play
    pairs = [[src1.name, dst1.name], [src2.name, dst1.name]]
    proc = fleet.playbook(
        inventory,
        CAMPAIGN,
        "--check",
        "--diff",
        *campaign_vars(tmp_path / "out", dtnkit_pairs=pairs),
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    ref.assert_unchanged()
    assert all(not snapshots(h) for h in fleet.hosts)  # not even a baseline was saved
    # dtnkit started on each host: the version checked once per pair (its first step), the
    # NIC speed read once, the group's dry run once per pair; nothing on dst2
    done = runs(inventory)
    assert dst2.name not in done, done
    for h, pairs_in in ((src1, 1), (src2, 1), (dst1, 2)):
        assert sorted(done[h.name]) == sorted(
            [["--version"]] * pairs_in + [["tune", "audit"]] + [["tune", "apply"]] * pairs_in
        ), (h.name, done)


@pytest.mark.serial  # judges whether the buffers helped from iperf3 rates
@pytest.mark.skipif(not PG_STORE, reason="needs dtnkit's PostgreSQL results store (dtnkit.db)")
def test_campaign_on_two_pairs_stores_its_probes_in_postgresql(
    fleet: sshhosts.SshHosts, inventory: Path, pg: Any, tmp_path: Path
) -> None:
    ref = Reference(fleet, tmp_path / "ref")
    before = results_count(pg)
    out = tmp_path / "out"
    runs(inventory)
    start = time.monotonic()
    proc = fleet.playbook(inventory, CAMPAIGN, *campaign_vars(out))
    took = time.monotonic() - start
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    doc = json.loads((out / "campaign.json").read_text())
    assert doc["schema"] == "dtnkit.campaign/1"
    assert doc["status"] == "done" and doc["failure"] is None
    assert doc["groups"] == GROUPS
    assert doc["finished"] >= doc["started"]
    assert doc["finished"] - doc["started"] <= took + 1
    pairs = {(p["client"], p["server"]) for p in doc["pairs"]}
    assert pairs == {(c.name, s.name) for c, s in fleet.pairs}
    for pair in doc["pairs"]:
        (result,) = pair["results"]
        assert result["group"] == "buffers"
        # 64 KiB windows at 20 ms cannot fill 200 Mbit/s; the profile's buffers can
        assert result["verdict"] == "helps", result
        assert min(result["applied_bps"]) > max(result["baseline_bps"]), result
    assert sorted(doc["restored"]) == sorted(h.name for h in fleet.hosts)
    # every probe in the shared store, none left out
    after = results_count(pg)
    assert after - before == 2 * 2 * REPEAT  # pairs x (baseline, applied) x repeats
    ref.assert_unchanged()
    # each host checked dtnkit's version once (when the pair was saved), not per module
    done = runs(inventory)
    assert {name: words.count(["--version"]) for name, words in done.items()} == {
        h.name: 1 for h in fleet.hosts
    }, done


def _wait_applied(
    fleet: sshhosts.SshHosts, proc: subprocess.Popen[str], timeout: float = 120
) -> sshhosts.SshHost:
    """The first host whose TCP buffers the campaign changed (polled: the campaign's own
    progress is on another machine's terms), bounded by the campaign's end."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        for k, h in enumerate(fleet.hosts):
            if h.sysctl("net.ipv4.tcp_rmem").split() != small(k).split():
                return h
        time.sleep(0.1)  # polling live values the campaign writes, bounded
    raise AssertionError(f"no host was tuned (campaign rc {proc.poll()})")


def test_a_host_that_fails_mid_campaign_leaves_every_host_restored(
    fleet: sshhosts.SshHosts, inventory: Path, tmp_path: Path
) -> None:
    ref = Reference(fleet, tmp_path / "ref")
    out = tmp_path / "out"
    argv = [
        str(sshhosts.bindir() / "ansible-playbook"),
        "-i",
        str(inventory),
        CAMPAIGN,
        *campaign_vars(out),
    ]
    log = tmp_path / "campaign.log"
    with open(log, "w") as fh:
        proc = subprocess.Popen(
            argv, stdout=fh, stderr=subprocess.STDOUT, text=True, env=fleet.env(), cwd=fleet.base
        )
    try:
        victim = _wait_applied(fleet, proc)
        fleet.kill_host(victim)
        rc = proc.wait(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    text = log.read_text()
    assert rc != 0, text[-3000:]
    assert f"campaign failed on {victim.name} " in text, text[-3000:]
    doc = json.loads((out / "campaign.json").read_text())
    assert doc["status"] == "failed"
    assert doc["failure"]["host"] == victim.name, doc["failure"]
    others = [h for h in fleet.hosts if h is not victim]
    assert set(doc["restored"]) >= {h.name for h in others if snapshots(h)}
    for h in others:
        assert not ref.differences(h), h.name
    # the failed host comes back: the rollback restores its last baseline too
    fleet.start_sshd(victim)
    back = fleet.playbook(inventory, ROLLBACK)
    assert back.returncode == 0, back.stdout[-3000:] + back.stderr[-2000:]
    ref.assert_unchanged()


def test_rollback_restores_the_last_baseline_everywhere(
    fleet: sshhosts.SshHosts, inventory: Path, tmp_path: Path
) -> None:
    ref = Reference(fleet, tmp_path / "ref")
    for h in fleet.hosts:  # each host tuned by hand, as a site does: a baseline each
        fleet.dtnkit(
            h,
            "tune",
            "apply",
            "--group",
            "buffers",
            "--rtt",
            "20ms",
            "--state-dir",
            str(h.state_dir),
            "--format",
            "json",
        )
        assert ref.differences(h)
    (line,) = tour("ansible-playbook -i inventory.yml dtn.dtnkit.rollback")  # the README's
    proc = run_tour_line(fleet, line, inventory, tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    ref.assert_unchanged()
