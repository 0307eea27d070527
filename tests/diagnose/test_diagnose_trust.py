"""Issue 10: diagnose on short runs, hints that carry the options in force, experiments that
leave `tune apply`'s snapshots alone, and the NIC-full case, on real lab paths (names ``dg*``,
each test removes only its own path)."""

from __future__ import annotations

import json
import secrets
import shutil
from pathlib import Path
from typing import Any

import pytest
from tests.support.cli import lab_files, run
from tests.support.lab import set_tcp_buffers

from dtnkit.diagnose.layers import EXIT, MIN_SAMPLES, Layer, diagnose, tune_hint
from dtnkit.errors import ExitStatus
from dtnkit.lab import path as lab
from dtnkit.measure.result import ProbeResult

NEEDS = [t for t in ("iperf3", "ping", "iptables") if shutil.which(t) is None]
SMALL = "4096 131072 4194304"
G = 1e9


def name() -> str:
    return f"dg{secrets.token_hex(3)}"


# ---- pure -------------------------------------------------------------------------------------
def net(bps: float, samples: int, **summary: Any) -> ProbeResult:
    return ProbeResult(
        "net",
        {"peer": "x", "duration_s": 5, "interval_s": 5.0},
        {
            "throughput_bps": bps,
            "retransmits": 0,
            "rtt_ms_min": 50.0,
            "rtt_ms_mean": 51.0,
            "sampler_samples": samples,
            "sampler_rwnd_limited_pct_max": 0.0,
            **summary,
        },
    )


def test_too_few_samples_is_inconclusive_never_a_layer() -> None:
    d = diagnose(net(0.5 * G, 1), link_bps=10 * G)
    assert d.layer is Layer.INCONCLUSIVE and EXIT[d.layer] == ExitStatus.INCONCLUSIVE == 15
    v = d.as_dict()["verdict"]
    assert v["groups"] == [] and v["samples"] == 1 and "inconclusive" in v["summary"]
    assert "--duration 25" in v["next"] and "--interval 1" in v["next"]
    assert not any(c.binds for c in d.checks)
    # the same figures with enough samples name the path
    assert diagnose(net(0.5 * G, MIN_SAMPLES), link_bps=10 * G).layer is Layer.PATH


def test_a_nic_at_its_shaper_cap_is_nic_bound_with_the_evidence() -> None:
    d = diagnose(
        net(0.47 * G, 5, sampler_nic_tx_dev="eth0", sampler_nic_tx_bps_mean=0.49 * G),
        link_bps=10 * G,
        cap_bps=0.5 * G,
        cap_kind="tbf",
        dev="eth0",
    )
    assert d.layer is Layer.NIC, d.as_dict()["checks"]
    ev = d.as_dict()["verdict"]["evidence"]
    assert ev["line_rate_bps"] == 0.5 * G and ev["egress_tx_bps_mean"] == 0.49 * G
    assert "tbf cap" in d.as_dict()["verdict"]["summary"]


def test_hints_carry_the_options_of_every_end() -> None:
    ends = ["--netns a-src --state-dir /s", "--netns a-dst --state-dir /s"]
    d = diagnose(net(0.4 * G, 5, sampler_rwnd_limited_pct_max=60.0), link_bps=10 * G, ends=ends)
    nxt = d.as_dict()["verdict"]["next"]
    assert "`dtnkit tune apply --group buffers --rtt 51ms --netns a-src --state-dir /s`" in nxt
    assert "`dtnkit tune apply --group buffers --rtt 51ms --netns a-dst --state-dir /s`" in nxt
    assert "the same on the peer" in tune_hint("--group buffers", [""])


def test_a_bad_interval_is_refused(capsys: pytest.CaptureFixture[str], env: dict[str, str]) -> None:
    for bad in ("nan", "0", "-1"):
        code, doc = run(
            capsys,
            "diagnose",
            "--peer",
            "localhost",
            "--interval",
            bad,
            "--db",
            env["db"],
            "--format",
            "json",
        )
        assert code == ExitStatus.BAD_INPUT and "--interval" in doc["error"]["what"]


# ---- real lab paths ---------------------------------------------------------------------------
@pytest.mark.serial
@pytest.mark.needs_root
@pytest.mark.needs_netns
@pytest.mark.skipif(bool(NEEDS), reason=f"needs {', '.join(NEEDS)}")
def test_a_short_run_gets_five_samples_and_hints_name_both_ends(
    capsys: pytest.CaptureFixture[str], env: dict[str, str]
) -> None:
    with lab.path(name(), state_root=Path(env["lab"]), rtt_ms=50, rate_bps=2_000_000_000) as p:
        set_tcp_buffers(p, SMALL)
        diag_argv = [
            "diagnose",
            "--peer",
            f"{p.name}/dst",
            "--netns",
            p.src.netns,
            "--duration",
            "5",
            "--db",
            env["db"],
            "--state-dir",
            env["state"],
            "--format",
            "json",
        ]
        # the interval follows the duration: 5 samples, and the buffers-bound path is named
        code, diag = run(capsys, *diag_argv)
        assert diag["verdict"]["samples"] >= MIN_SAMPLES, diag["verdict"]
        assert code == ExitStatus.BINDS_HOST_NETWORK, diag["checks"]
        nxt = diag["verdict"]["next"]
        for ns in (p.src.netns, p.dst.netns):
            assert f"--netns {ns} --state-dir {env['state']}`" in nxt, nxt
        # one 5 s sample is too few: said so, not a layer
        code, diag = run(capsys, *diag_argv, "--interval", "5")
        assert code == ExitStatus.INCONCLUSIVE, diag["checks"]
        assert diag["verdict"]["layer"] == "inconclusive" and diag["verdict"]["groups"] == []
        assert diag["verdict"]["samples"] < MIN_SAMPLES


def tcp(p: lab.LabPath) -> str:
    return p.src.run(
        ["sh", "-c", "cat /proc/sys/net/ipv4/tcp_*mem /proc/sys/net/ipv4/tcp_no_metrics_save"]
    ).stdout


@pytest.mark.serial  # its hint needs `helped`, a judged rate (see test_diagnose_hints.py)
@pytest.mark.needs_root
@pytest.mark.needs_netns
@pytest.mark.skipif(bool(NEEDS), reason=f"needs {', '.join(NEEDS)}")
def test_experiments_leave_the_last_baseline_and_no_snapshots(
    capsys: pytest.CaptureFixture[str], env: dict[str, str]
) -> None:
    state = Path(env["state"])
    with lab.path(name(), state_root=Path(env["lab"]), rtt_ms=50, rate_bps=2_000_000_000) as p:
        set_tcp_buffers(p, SMALL)
        start = tcp(p)
        code, out = run(
            capsys,
            "tune",
            "apply",
            "--group",
            "congestion",
            "--netns",
            p.src.netns,
            "--state-dir",
            env["state"],
            "--format",
            "json",
        )
        assert code == 0 and out["baseline"], out
        pointer = state / f"last-baseline.netns-{p.src.netns}"  # the namespace's own
        last = pointer.read_text()
        snaps = sorted(x.name for x in (state / "snapshots").iterdir())
        tuned = tcp(p)
        assert tuned != start

        code, exp = run(
            capsys,
            "experiment",
            "--groups",
            "buffers",
            "--peer",
            f"{p.name}/dst",
            "--netns",
            p.src.netns,
            "--both-ends",
            "--repeat",
            "1",
            "--duration",
            "3",
            "--rtt",
            "50ms",
            "--state-dir",
            env["state"],
            "--db",
            env["db"],
            "--format",
            "json",
        )
        assert code == 0 and exp["helped"] == ["buffers"], exp["groups"]
        # one run each: the verdict says its noise was not measured
        assert [g["noise_measured"] for g in exp["groups"]] == [False]
        assert tcp(p) == tuned  # the group was restored
        # apply's last baseline and snapshots are as they were; the experiment's are gone
        assert pointer.read_text() == last
        assert sorted(x.name for x in (state / "snapshots").iterdir()) == snaps
        assert not (state / "experiments").exists()
        # the results record stays
        code, rows = run(
            capsys, "results", "list", "--experiments", "--db", env["db"], "--format", "json"
        )
        assert [e["id"] for e in rows] == [exp["id"]]
        # the hint names both ends, with the state dir and the results store
        assert exp["next"] == [
            f"dtnkit tune apply --from-experiment {exp['id']} --netns {ns} "
            f"--state-dir {env['state']} --db {env['db']}"
            for ns in (p.src.netns, p.dst.netns)
        ]
        # and `tune restore last` still undoes the apply
        code, out = run(
            capsys,
            "tune",
            "restore",
            "last",
            "--netns",
            p.src.netns,
            "--state-dir",
            env["state"],
            "--format",
            "json",
        )
        assert code == 0, out
        assert tcp(p) == start


@pytest.mark.serial
@pytest.mark.needs_root
@pytest.mark.needs_netns
@pytest.mark.skipif(bool(NEEDS), reason=f"needs {', '.join(NEEDS)}")
def test_the_nic_full_case(capsys: pytest.CaptureFixture[str], env: dict[str, str]) -> None:
    cap = 500_000_000
    with lab.path(name(), state_root=Path(env["lab"]), rtt_ms=10, src_rate_bps=cap) as p:
        peer = ["--peer", f"{p.name}/dst", "--netns", p.src.netns]
        # the delay stage runs in user space: on a loaded 2-core machine one run may fall
        # short of the cap, so up to 3 runs (a wrong NIC check fails all three)
        for _ in range(3):
            code, diag = run(
                capsys, "diagnose", *peer, "--duration", "5", "--db", env["db"], "--format", "json"
            )
            if code == ExitStatus.BINDS_NIC:
                break
        assert code == ExitStatus.BINDS_NIC, diag["checks"]
        ev = diag["verdict"]["evidence"]
        assert ev["cap_bps"] == cap and ev["cap_kind"] == "tbf" and ev["dev"] == lab.LINK_DEV
        assert ev["link_bps"] > cap  # the link is faster: its shaper is the line rate
        assert ev["egress_tx_bps_mean"] >= 0.8 * cap, ev
        assert (
            f"`dtnkit experiment --groups buffers,congestion --peer {p.name}/dst --both-ends "
            f"--netns {p.src.netns}"
        ) in diag["verdict"]["next"]

        code, exp = run(
            capsys,
            "experiment",
            "--groups",
            "buffers,congestion",
            *peer,
            "--both-ends",
            "--repeat",
            "2",
            "--duration",
            "3",
            "--rtt",
            "10ms",
            "--state-dir",
            env["state"],
            "--db",
            env["db"],
            "--format",
            "json",
        )
        assert code == 0
        assert {g["verdict"] for g in exp["groups"]} <= {"neutral", "harmful"}, exp["groups"]
        assert exp["helped"] == [] and exp["next"] == []
        before = tcp(p)
        for h in (p.src, p.dst):
            code, out = run(
                capsys,
                "tune",
                "apply",
                "--from-experiment",
                exp["id"],
                "--db",
                env["db"],
                "--netns",
                h.netns,
                "--state-dir",
                env["state"],
                "--format",
                "json",
            )
            assert code == 0 and out["applied"] == [] and out["baseline"] is None, out
        assert tcp(p) == before
        root = p.src.run(["tc", "-j", "qdisc", "show", "dev", lab.LINK_DEV, "root"]).stdout
        assert json.loads(root)[0]["kind"] == "tbf"


def test_a_bad_source_rate_is_refused(
    capsys: pytest.CaptureFixture[str], env: dict[str, str]
) -> None:
    for bad in ("0", "fast", "-1gbit", "nan"):
        code, doc = run(capsys, "lab", "up", "dgbad", "--src-rate", bad, "--format", "json")
        assert code == ExitStatus.BAD_INPUT, (bad, doc)
    assert not (Path(env["lab"]) / "dgbad").exists()


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    return lab_files(tmp_path, monkeypatch)
