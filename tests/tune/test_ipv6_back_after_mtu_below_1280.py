"""An MTU below 1280 takes IPv6 off an interface (every address and route), and the kernel
gives back only a link-local address when the MTU is 1280 or more again.  The baseline an
apply takes before such an MTU (``--allow-unsafe link/*/mtu``) holds the interface's
permanent addresses and hand-made routes, and restore, and the undo of an apply that fails
after the MTU step, add them back.  Real namespaces; a hostile snapshot of that state is
refused with one error and nothing written."""

from __future__ import annotations

import ipaddress
import json
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from conftest import Netns
from dtnkit.cli.main import main
from dtnkit.errors import BadInput, ExitStatus
from dtnkit.tune.kinds.ipv6 import check_address, check_conf, check_route
from dtnkit.tune.snapshot import Snapshot

ADDRS = {("2001:db8::5", 64, ("nodad",)), ("fd00:6::7", 64, ("nodad", "noprefixroute"))}
ROUTE = "2001:db8:100::/48"


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, Any, str]:
    capsys.readouterr()
    code = main(list(argv))
    got = capsys.readouterr()
    out = json.loads(got.out) if got.out.strip().startswith(("{", "[")) else got.out
    return code, out, got.err


def profile(tmp_path: Path, extra: str = "") -> str:
    path = tmp_path / "site.toml"
    path.write_text(
        'include = "dtn"\n[tune."link/*/mtu"]\nvalue = 1200\nmode = "exact"\n'
        'source = "site"\napply = "on-request"\n' + extra
    )
    return str(path)


def carry_ipv6(netns: Netns, dev: str = "dkv0") -> None:
    netns.run("sysctl", "-qw", f"net.ipv6.conf.{dev}.accept_ra=0")
    netns.run("ip", "-6", "addr", "add", "2001:db8::5/64", "dev", dev, "nodad")
    netns.run("ip", "-6", "addr", "add", "fd00:6::7/64", "dev", dev, "nodad", "noprefixroute")
    netns.run("ip", "-6", "route", "add", ROUTE, "via", "2001:db8::1", "dev", dev)


def addresses(netns: Netns, dev: str = "dkv0") -> set[tuple[str, int, tuple[str, ...]]]:
    """The interface's addresses that are not link-local, as `ip -6 addr` reports them."""
    links = json.loads(netns.run("ip", "-j", "-6", "addr", "show", "dev", dev).stdout or "[]")
    return {
        (a["local"], a["prefixlen"], tuple(f for f in ("nodad", "noprefixroute") if a.get(f)))
        for link in links
        for a in link.get("addr_info", [])
        if a.get("scope") != "link"
    }


def routes(netns: Netns, dev: str = "dkv0") -> set[str]:
    got = json.loads(netns.run("ip", "-j", "-6", "route", "show", "dev", dev).stdout or "[]")
    return {f"{r['dst']} via {r['gateway']}" for r in got if "gateway" in r}


def mtu(netns: Netns, dev: str = "dkv0") -> int:
    return int(netns.run("cat", f"/sys/class/net/{dev}/mtu").stdout)


@pytest.mark.needs_root
@pytest.mark.needs_netns
def test_restore_puts_back_the_addresses_and_routes_an_mtu_below_1280_took(
    netns: Netns, tmp_path: Path, state_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    carry_ipv6(netns)
    assert addresses(netns) == ADDRS
    sel = ["--netns", netns.name, "--state-dir", str(state_dir)]
    code, out, err = run(
        capsys,
        "tune",
        "apply",
        *sel,
        "--profile",
        profile(tmp_path),
        "--group",
        "nic",
        "--mtu",
        "--iface",
        "dkv0",
        "--allow-unsafe",
        "link/*/mtu",
        "--format",
        "json",
    )
    assert code == ExitStatus.OK, err
    assert mtu(netns) == 1200 and addresses(netns) == set() and routes(netns) == set()
    snap = json.loads(next((state_dir / "snapshots").glob("*.json")).read_text())
    assert snap["schema"] == "dtnkit.snapshot/2"
    assert snap["values"]["ipv6/dkv0/addresses"] == [
        "2001:db8::5/64 nodad",
        "fd00:6::7/64 nodad noprefixroute",
    ]
    assert snap["values"]["ipv6/dkv0/routes"] == [f"{ROUTE} via 2001:db8::1 metric 1024"]

    code, plan, err = run(capsys, "tune", "restore", *sel, "--dry-run", "--format", "json")
    assert code == ExitStatus.OK, err
    assert [s["key"] for s in plan["plan"]] == [
        "link/dkv0/mtu",
        "ipv6/dkv0/addresses",
        "ipv6/dkv0/conf",
        "ipv6/dkv0/routes",
    ]
    code, out, err = run(capsys, "tune", "restore", *sel, "--format", "json")
    assert code == ExitStatus.OK, err
    assert out["ok"] and out["not_restored"] == []
    assert mtu(netns) == 1500
    assert addresses(netns) == ADDRS  # with their flags
    assert routes(netns) == {f"{ROUTE} via 2001:db8::1"}
    assert netns.sysctl("net.ipv6.conf.dkv0.accept_ra") == "0"  # not the default's 1
    # restored whole: nothing left to do, and the live host is what the baseline holds
    code, plan, err = run(capsys, "tune", "restore", *sel, "--dry-run", "--format", "json")
    assert code == ExitStatus.OK and plan["plan"] == [], (err, plan)

    def dkv0_differs() -> list[str]:  # (the baseline holds only dkv0, the one selected)
        code, out, err = run(capsys, "tune", "diff", "last", *sel, "--format", "json")
        assert code in (ExitStatus.OK, ExitStatus.DRIFT), err
        return [d["key"] for d in out["differences"] if "/dkv0/" in d["key"]]

    assert dkv0_differs() == []
    # an address the baseline does not hold is a difference (restore leaves it)
    netns.run("ip", "-6", "addr", "add", "2001:db8:9::9/64", "dev", "dkv0", "nodad")
    assert dkv0_differs() == ["ipv6/dkv0/addresses"]


@pytest.mark.needs_root
@pytest.mark.needs_netns
def test_the_undo_of_an_apply_failing_after_the_mtu_step_puts_them_back(
    netns: Netns, tmp_path: Path, state_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    carry_ipv6(netns)
    # tcp_ecn 5 is refused by the kernel (it takes 0-2); in the cpu group it comes after the
    # MTU step (nic), so the MTU is 1200 and IPv6 is off dkv0 when the run fails
    prof = profile(
        tmp_path,
        '[tune."sysctl/net.ipv4.tcp_ecn"]\ngroup = "cpu"\nvalue = 5\n'
        'mode = "exact"\nsource = "test: a value the kernel rejects"\n',
    )
    code, out, err = run(
        capsys,
        "tune",
        "apply",
        "--netns",
        netns.name,
        "--state-dir",
        str(state_dir),
        "--profile",
        prof,
        "--group",
        "nic",
        "--group",
        "cpu",
        "--mtu",
        "--iface",
        "dkv0",
        "--allow-unsafe",
        "link/*/mtu",
        "--format",
        "json",
    )
    assert code == ExitStatus.PARTIAL_APPLY, err
    assert out["failed"]["key"] == "sysctl/net.ipv4.tcp_ecn"
    assert [s["key"] for s in out["rolled_back"]] == ["link/dkv0/mtu"]
    assert out["rollback_errors"] == []
    assert mtu(netns) == 1500
    assert addresses(netns) == ADDRS
    assert routes(netns) == {f"{ROUTE} via 2001:db8::1"}
    assert netns.sysctl("net.ipv6.conf.dkv0.accept_ra") == "0"


@pytest.mark.needs_root
@pytest.mark.needs_netns
def test_an_interface_without_ipv6_or_without_addresses_of_its_own_is_unaffected(
    netns: Netns, tmp_path: Path, state_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    netns.run("sysctl", "-qw", "net.ipv6.conf.dkv1.disable_ipv6=1")  # no IPv6 on dkv1
    sel = ["--netns", netns.name, "--state-dir", str(state_dir)]
    code, _out, err = run(
        capsys,
        "tune",
        "apply",
        *sel,
        "--profile",
        profile(tmp_path),
        "--group",
        "nic",
        "--mtu",
        "--iface",
        "dkv0",
        "--iface",
        "dkv1",
        "--allow-unsafe",
        "link/dkv0/mtu",
        "--format",
        "json",
    )
    assert code == ExitStatus.OK, err
    snap = json.loads(next((state_dir / "snapshots").glob("*.json")).read_text())
    # dkv0 runs IPv6 with only its link-local address, dkv1 none: no address or route to
    # keep, but each one's settings (the kernel makes them anew from the defaults: IPv6 on)
    assert sorted(k for k in snap["values"] if k.startswith("ipv6/")) == [
        "ipv6/dkv0/conf",
        "ipv6/dkv1/conf",
    ]
    assert snap["values"]["ipv6/dkv1/conf"]["disable_ipv6"] == "1"
    code, out, err = run(capsys, "tune", "restore", *sel, "--format", "json")
    assert code == ExitStatus.OK, err
    assert [s["key"] for s in out["applied"]] == [
        "link/dkv0/mtu",
        "link/dkv1/mtu",
        "ipv6/dkv0/conf",
        "ipv6/dkv1/conf",
    ]
    assert mtu(netns, "dkv0") == mtu(netns, "dkv1") == 1500
    assert netns.sysctl("net.ipv6.conf.dkv1.disable_ipv6") == "1"  # still no IPv6 on dkv1
    assert addresses(netns, "dkv1") == set() and addresses(netns, "dkv0") == set()


# ---- hostile snapshots ------------------------------------------------------------------------
def _doc(values: dict[str, Any]) -> dict[str, Any]:
    return {
        "schema": "dtnkit.snapshot/2",
        "id": "h",
        "label": "",
        "kind": "baseline",
        "created": "2026-01-01T00:00:00+00:00",
        "host": {},
        "files": {},
        "values": {"link/dkv0/mtu": 1500, **values},
    }


HOSTILE = {
    "not an address": {"ipv6/dkv0/addresses": ["2001:db8::zz/64"]},
    "prefix length out of range": {"ipv6/dkv0/addresses": ["2001:db8::5/129"]},
    "no prefix length": {"ipv6/dkv0/addresses": ["2001:db8::5"]},
    "an IPv4 address": {"ipv6/dkv0/addresses": ["192.0.2.1/24"]},
    "link-local": {"ipv6/dkv0/addresses": ["fe80::1/64"]},
    "another interface in the words": {"ipv6/dkv0/addresses": ["2001:db8::5/64 dev eth0"]},
    "a shell word": {"ipv6/dkv0/addresses": ["2001:db8::5/64; reboot"]},
    "not a list": {"ipv6/dkv0/addresses": "2001:db8::5/64"},
    "not strings": {"ipv6/dkv0/addresses": [{"local": "2001:db8::5"}]},
    "another interface's key": {"ipv6/dkv1/addresses": ["2001:db8::5/64"]},
    "a bad interface name": {"ipv6/../../etc/addresses": ["2001:db8::5/64"]},
    "a route via a name": {"ipv6/dkv0/routes": ["default via eth0 metric 1024"]},
    "a route without its metric": {"ipv6/dkv0/routes": ["default via fe80::1"]},
    "a route to nowhere": {"ipv6/dkv0/routes": ["2001:db8::/129 metric 1"]},
    "a route with a table": {"ipv6/dkv0/routes": ["default via fe80::1 metric 1 table 7"]},
    "too many": {"ipv6/dkv0/addresses": [f"2001:db8::{i:x}/64" for i in range(600)]},
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_a_hostile_ipv6_record_is_refused(name: str) -> None:
    with pytest.raises(BadInput):
        Snapshot.from_dict(_doc(HOSTILE[name]), "snapshot h")


def test_the_ipv6_record_needs_its_interfaces_mtu_at_1280_or_more() -> None:
    ok = {
        "ipv6/dkv0/addresses": ["2001:db8::5/64 nodad"],
        "ipv6/dkv0/routes": ["default via fe80::1 metric 1024 onlink proto static"],
    }
    assert Snapshot.from_dict(_doc(ok), "snapshot h").values["ipv6/dkv0/addresses"]
    low = _doc(ok)
    low["values"]["link/dkv0/mtu"] = 1200
    with pytest.raises(BadInput, match="without link/dkv0/mtu at 1280"):
        Snapshot.from_dict(low, "snapshot h")


WORDS = st.sampled_from(
    [
        "2001:db8::5/64",
        "fe80::1/64",
        "2001:db8::/32",
        "default",
        "via",
        "metric",
        "1024",
        "-1",
        "4294967296",
        "onlink",
        "proto",
        "static",
        "nodad",
        "noprefixroute",
        "dev",
        "eth0",
        "/129",
        "::",
        "::1/128",
        "10.0.0.1/8",
        ";",
        "$(reboot)",
        "\n",
        "\x00",
    ]
)
ENTRIES = st.one_of(
    st.text(max_size=60),
    st.lists(WORDS, max_size=7).map(" ".join),
    st.tuples(st.ip_addresses(v=6), st.integers(-3, 140)).map(lambda t: f"{t[0]}/{t[1]}"),
)


@settings(max_examples=1000, deadline=None)
@given(entry=ENTRIES)
@example(entry="/²")  # str.isdigit() says yes, int() says no: was a ValueError
@example(entry="2001:db8::5/٦٤")  # Arabic-Indic digits: int() reads them, the kernel would not
def test_an_entry_is_accepted_only_in_its_form(entry: str) -> None:
    """Any text gets a verdict, never an exception, and what is accepted is what ip takes."""
    why = check_address(entry)
    if why is None:
        first, *flags = entry.split(" ")
        iface = ipaddress.IPv6Interface(first)
        assert 0 <= iface.network.prefixlen <= 128 and not iface.ip.is_link_local
        assert set(flags) <= {"nodad", "noprefixroute", "home", "mngtmpaddr"}
    why = check_route(entry)
    if why is None:
        words = entry.split(" ")
        assert words[0] == "default" or ipaddress.IPv6Network(words[0])
        assert "metric" in words and not {"dev", ";", "$(reboot)"} & set(words)
    if check_conf({entry: "1"}) is None:  # a name that stays in net.ipv6.conf.DEV
        assert re.fullmatch(r"[a-z0-9_]{1,64}", entry)


@pytest.mark.needs_root
@pytest.mark.needs_netns
@pytest.mark.parametrize(
    "name",
    ["prefix length out of range", "another interface's key", "another interface in the words"],
)
def test_restore_of_a_hostile_record_writes_nothing(
    name: str, netns: Netns, state_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    netns.run("ip", "link", "set", "dkv0", "mtu", "1300")
    before = (netns.state(), addresses(netns, "dkv0"), addresses(netns, "dkv1"))
    (state_dir / "snapshots").mkdir(parents=True)
    (state_dir / "snapshots" / "h.json").write_text(json.dumps(_doc(HOSTILE[name])))
    listing = sorted(p.name for p in state_dir.rglob("*"))
    code, _out, err = run(
        capsys, "tune", "restore", "h", "--netns", netns.name, "--state-dir", str(state_dir)
    )
    assert code == ExitStatus.BAD_INPUT, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("dtnkit: error: "), err
    assert "Traceback" not in err
    assert (netns.state(), addresses(netns, "dkv0"), addresses(netns, "dkv1")) == before
    assert mtu(netns) == 1300
    assert sorted(p.name for p in state_dir.rglob("*")) == listing


@pytest.mark.needs_root
@pytest.mark.needs_netns
def test_a_route_the_kernel_refuses_rolls_the_whole_restore_back(
    netns: Netns, tmp_path: Path, state_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    carry_ipv6(netns)
    sel = ["--netns", netns.name, "--state-dir", str(state_dir)]
    code, _out, err = run(
        capsys,
        "tune",
        "apply",
        *sel,
        "--profile",
        profile(tmp_path),
        "--group",
        "nic",
        "--mtu",
        "--iface",
        "dkv0",
        "--allow-unsafe",
        "link/*/mtu",
    )
    assert code == ExitStatus.OK, err
    path = next((state_dir / "snapshots").glob("*.json"))
    doc = json.loads(path.read_text())
    # well formed, but its gateway is on no prefix of dkv0's: the kernel refuses it, after the
    # MTU, the settings and the addresses are back
    doc["values"]["ipv6/dkv0/routes"].append("2001:db8:200::/48 via 2001:db8:77::1 metric 5")
    path.write_text(json.dumps(doc))
    code, out, err = run(capsys, "tune", "restore", *sel, "--format", "json")
    assert code == ExitStatus.PARTIAL_APPLY, err
    assert out["failed"]["key"] == "ipv6/dkv0/routes"
    assert "2001:db8:200::/48" in out["error"]["what"] and out["error"]["why"]
    assert out["error"]["next"] and out["rollback_errors"] == []
    # as before the restore: MTU 1200, so no IPv6 on dkv0 at all
    assert mtu(netns) == 1200 and addresses(netns) == set() and routes(netns) == set()
