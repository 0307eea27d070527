"""A Linux bridge's MTU follows the smallest of its ports' until it is set by hand; from then on
the kernel keeps it (BROPT_MTU_SET_BY_USER), and nothing but re-creating the bridge makes it
follow again.  apply and restore must leave a following bridge following: its ports are
written first, so the bridge is already at its value when its own step comes.

Each test builds a bridge br0 with two veth ports in a throw-away namespace and runs
`dtnkit tune` in-process against it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from conftest import Netns, sh
from dtnkit.cli.main import main
from dtnkit.errors import ExitStatus
from dtnkit.host.host import Host
from dtnkit.host.runner import Result, SubprocessRunner
from dtnkit.tune import apply as apply_mod
from dtnkit.tune.audit import run_audit
from dtnkit.tune.profile import load_profile
from dtnkit.tune.snapshot import Store

pytestmark = [pytest.mark.needs_root, pytest.mark.needs_netns]

PORTS = ("hlp0", "hlp1")


@pytest.fixture
def bridged(tmp_path: Path) -> Iterator[Netns]:
    """A namespace holding br0 with ports hlp0 and hlp1 (veth, peers hlq0 and hlq1), all up,
    every MTU 1500: the bridge follows its ports."""
    with Netns(prefix="hlbr") as ns:
        sh("ip", "-n", ns.name, "link", "add", "br0", "type", "bridge")
        for i, port in enumerate(PORTS):
            sh("ip", "-n", ns.name, "link", "add", port, "type", "veth", "peer", "name", f"hlq{i}")
            sh("ip", "-n", ns.name, "link", "set", port, "master", "br0")
            for dev in (port, f"hlq{i}"):
                sh("ip", "-n", ns.name, "link", "set", dev, "up")
        sh("ip", "-n", ns.name, "link", "set", "br0", "up")
        yield ns


def mtu(ns: Netns, dev: str) -> int:
    return int(ns.run("cat", f"/sys/class/net/{dev}/mtu").stdout)


def set_mtu(ns: Netns, dev: str, value: int) -> None:
    sh("ip", "-n", ns.name, "link", "set", dev, "mtu", str(value))


def follows(ns: Netns) -> bool:
    """Whether br0 still follows its ports: lower one port's MTU and see (then put it back)."""
    before = mtu(ns, "hlp0")
    set_mtu(ns, "hlp0", 1400)
    try:
        return mtu(ns, "br0") == min(1400, mtu(ns, "hlp1"))
    finally:
        set_mtu(ns, "hlp0", before)


def tune(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, Any]:
    capsys.readouterr()
    code = main(["tune", *argv, "--format", "json"])
    out = capsys.readouterr().out
    return code, json.loads(out) if out.strip() else None


def test_apply_and_restore_leave_a_following_bridge_following(
    bridged: Netns, state_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert follows(bridged)
    sel = ["--netns", bridged.name, "--state-dir", str(state_dir)]
    code, out = tune(capsys, "apply", *sel, "--iface", "br0", "--group", "nic", "--mtu")
    assert code == ExitStatus.OK, out
    assert {a["key"] for a in out["applied"]} >= {"link/hlp0/mtu", "link/hlp1/mtu", "link/br0/mtu"}
    assert [mtu(bridged, d) for d in ("hlp0", "hlp1", "br0")] == [9000, 9000, 9000]

    code, out = tune(capsys, "restore", *sel)
    assert code == ExitStatus.OK, out
    assert out["not_restored"] == []
    assert [mtu(bridged, d) for d in ("hlp0", "hlp1", "br0")] == [1500, 1500, 1500]
    # the bridge still follows: restore lowered the ports first (it had set br0 by hand)
    assert follows(bridged)


def test_apply_does_not_set_a_following_bridge_that_a_port_left_out_holds(
    bridged: Netns, state_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # only hlp0 is selected: hlp1 (1500) keeps br0 at 1500, so br0 could reach 9000 only set
    # by hand, which would end its following for good (restore could not undo it)
    sel = ["--netns", bridged.name, "--state-dir", str(state_dir)]
    code, audit = tune(
        capsys, "audit", "--netns", bridged.name, "--iface", "hlp0", "--group", "nic"
    )
    found = {f["key"]: f for f in audit["findings"]}
    br0 = found["link/br0/mtu"]
    assert br0["status"] == "unknown", br0
    assert "hlp1 (1500)" in br0["why"] and "--iface br0" in br0["why"]
    assert {
        "give": "--iface br0",
        "hint": "give --iface br0 and audit again",
        "keys": ["link/br0/mtu"],
    } in audit["undecided"]

    code, out = tune(capsys, "apply", *sel, "--iface", "hlp0", "--group", "nic", "--mtu")
    assert code == ExitStatus.UNDECIDED, out  # hlp0 applied; br0 left undecided, as it says
    assert out["ok"]
    assert "link/br0/mtu" not in {a["key"] for a in out["applied"]}
    assert (mtu(bridged, "hlp0"), mtu(bridged, "br0")) == (9000, 1500)
    code, out = tune(capsys, "restore", *sel)
    assert code == ExitStatus.OK, out
    assert follows(bridged)


def test_restore_says_when_a_bridge_was_set_by_hand_since(
    bridged: Netns, state_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sel = ["--netns", bridged.name, "--state-dir", str(state_dir)]
    code, saved = tune(capsys, "save", *sel)
    assert code == ExitStatus.OK, saved
    set_mtu(bridged, "br0", 9000)  # by hand: the kernel stops br0 following for good
    code, out = tune(capsys, "restore", saved["id"], *sel)
    assert code == ExitStatus.DRIFT, out  # the value is back, the following is not
    assert mtu(bridged, "br0") == 1500
    (line,) = out["not_restored"]
    assert line.startswith("link/br0/mtu: ") and "re-create" in line, line
    assert not follows(bridged)


class StopAfterBridge(SubprocessRunner):
    """Real commands; Ctrl-C right after the command that sets br0's MTU has run."""

    def run(self, argv: Sequence[str], *, stdin: str | None = None) -> Result:
        res = super().run(argv, stdin=stdin)
        if "br0" in argv and "mtu" in argv and "9000" in argv:
            raise KeyboardInterrupt
        return res


def test_an_apply_undone_leaves_a_following_bridge_following(
    bridged: Netns, state_dir: Path
) -> None:
    # the undo goes newest first, but the MTUs as restore writes them: ports, then br0
    host = Host(Path("/"), netns=bridged.name, runner=StopAfterBridge())
    out = apply_mod.apply(
        host,
        lambda h: run_audit(h, load_profile("dtn"), groups=["nic"], ifaces=["br0"]),
        Store(state_dir),
        on_request=("mtu",),
    )
    assert out.error is not None and out.error.status == ExitStatus.INTERRUPTED
    assert out.failed is not None and out.failed.tunable.key == "link/br0/mtu"
    assert out.rollback_errors == []
    assert [mtu(bridged, d) for d in ("hlp0", "hlp1", "br0")] == [1500, 1500, 1500]
    assert follows(bridged)
