"""Values that weaken a host's security or break its connectivity (SYN cookies off, a local
port range from below 1024 or of fewer than 1000 ports, an MTU below 1280 where IPv6 runs,
the userspace governor, ...) are marked unsafe by the audit and the plan, and apply and
restore refuse them (exit 9, nothing written) unless `--allow-unsafe KEY` names the key.
The profile loader is fuzzed with generated values for each kind of setting."""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import HOSTS, Netns
from dtnkit.cli.main import main
from dtnkit.environment import Environment
from dtnkit.errors import ExitStatus
from dtnkit.tune.registry import tunable_for_key


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, Any, str]:
    capsys.readouterr()
    code = main(list(argv))
    got = capsys.readouterr()
    out = json.loads(got.out) if got.out.strip().startswith(("{", "[")) else got.out
    return code, out, got.err


def profile(tmp_path: Path, items: dict[str, Any], name: str = "site") -> Path:
    lines = ['include = "dtn"']
    for key, value in items.items():
        lines += [
            f"[tune.{json.dumps(key)}]",
            f"value = {json.dumps(value)}",
            'mode = "exact"',
            'source = "site"',
        ]
        if key.startswith("sysctl/"):
            lines.append('group = "congestion"')
        if key.startswith("link/"):
            lines.append('apply = "on-request"')
    path = tmp_path / f"{name}.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


def sysctl(tree: Path, name: str) -> str:
    return (tree / "proc/sys" / name.replace(".", "/")).read_text()


UNSAFE_SITE = {"sysctl/net.ipv4.tcp_syncookies": 0, "sysctl/net.ipv4.ip_local_port_range": "1 2"}


@pytest.mark.parametrize("tree", ["dtn-b"], indirect=True)
def test_syncookies_off_and_a_tiny_port_range_are_marked_and_refused(
    tree: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tree / "proc/sys/net/ipv4/tcp_syncookies").write_text("1\n")
    (tree / "proc/sys/net/ipv4/ip_local_port_range").write_text("32768\t60999\n")
    prof = str(profile(tmp_path, UNSAFE_SITE))
    sel = ["--tree", str(tree), "--profile", prof, "--group", "congestion"]
    state = ["--state-dir", str(tmp_path / "state")]

    code, doc, _err = run(capsys, "tune", "audit", *sel, "--format", "json")
    unsafe = {f["key"]: f.get("unsafe") for f in doc["findings"]}
    assert "SYN" in unsafe["sysctl/net.ipv4.tcp_syncookies"]
    assert "below 1024" in unsafe["sysctl/net.ipv4.ip_local_port_range"]
    assert unsafe["sysctl/net.ipv4.tcp_no_metrics_save"] is None

    code, plan, err = run(capsys, "tune", "apply", "--dry-run", *sel, "--format", "json")
    assert code == ExitStatus.OK, err
    marked = {s["key"] for s in plan["plan"] if s.get("unsafe")}
    assert marked == set(UNSAFE_SITE)
    code, text, err = run(capsys, "tune", "apply", "--dry-run", *sel)
    assert "0 (unsafe)" in text and "refused without --allow-unsafe" in text

    before = {k: sysctl(tree, k.partition("/")[2]) for k in UNSAFE_SITE}
    code, _out, err = run(capsys, "tune", "apply", *sel, *state)
    assert code == ExitStatus.BAD_INPUT, err
    assert err.count("dtnkit: error:") == 1 and "unsafe" in err, err
    assert "--allow-unsafe sysctl/net.ipv4.tcp_syncookies" in err
    assert {k: sysctl(tree, k.partition("/")[2]) for k in UNSAFE_SITE} == before
    assert sysctl(tree, "net.ipv4.tcp_congestion_control") == "cubic\n"  # nothing written
    assert not (tmp_path / "state" / "snapshots").exists()

    # one key allowed is not enough: the other is still refused
    code, _out, err = run(
        capsys, "tune", "apply", *sel, *state, "--allow-unsafe", "sysctl/net.ipv4.tcp_syncookies"
    )
    assert code == ExitStatus.BAD_INPUT and "ip_local_port_range" in err, err
    code, out, err = run(
        capsys,
        "tune",
        "apply",
        *sel,
        *state,
        "--format",
        "json",
        "--allow-unsafe",
        "sysctl/net.ipv4.tcp_syncookies",
        "--allow-unsafe",
        "sysctl/net.ipv4.ip_local_port_range",
    )
    assert code == ExitStatus.OK, err
    assert sysctl(tree, "net.ipv4.tcp_syncookies") == "0\n"
    assert sysctl(tree, "net.ipv4.ip_local_port_range") == "1\t2\n"

    # a snapshot holding unsafe values is refused by restore the same way
    code, out, err = run(capsys, "tune", "save", "--tree", str(tree), *state, "--format", "json")
    doc = json.loads(Path(out["path"]).read_text())  # with the site key a profile added
    doc["id"] = saved = "with-syncookies-off"
    doc["values"]["sysctl/net.ipv4.tcp_syncookies"] = 0
    (tmp_path / "state" / "snapshots" / f"{saved}.json").write_text(json.dumps(doc))
    (tree / "proc/sys/net/ipv4/tcp_syncookies").write_text("1\n")
    code, _out, err = run(capsys, "tune", "restore", saved, "--tree", str(tree), *state)
    assert code == ExitStatus.BAD_INPUT and "tcp_syncookies" in err, err
    assert sysctl(tree, "net.ipv4.tcp_syncookies") == "1\n"
    code, _out, err = run(
        capsys,
        "tune",
        "restore",
        saved,
        "--tree",
        str(tree),
        *state,
        "--allow-unsafe",
        "sysctl/net.ipv4.tcp_syncookies",
    )
    assert code == ExitStatus.OK, err
    assert sysctl(tree, "net.ipv4.tcp_syncookies") == "0\n"


@pytest.mark.parametrize("value", ["1023 65535", "40000 40998", "1 65535"])
def test_each_port_range_rule(value: str) -> None:
    assert tunable_for_key("sysctl/net.ipv4.ip_local_port_range").unsafe(value)


@pytest.mark.parametrize("value", ["1024 2023", "32768 60999"])
def test_a_port_range_from_1024_of_1000_ports_is_safe(value: str) -> None:
    assert tunable_for_key("sysctl/net.ipv4.ip_local_port_range").unsafe(value) is None


def test_the_userspace_governor_is_refused(
    tree: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for path in tree.glob("sys/devices/system/cpu/cpu*/cpufreq/scaling_available_governors"):
        path.write_text("performance powersave userspace\n")
    prof = str(profile(tmp_path, {"cpu/governor": "userspace"}))
    sel = ["--tree", str(tree), "--profile", prof, "--group", "cpu"]
    code, _out, err = run(capsys, "tune", "apply", *sel, "--state-dir", str(tmp_path / "s"))
    assert code == ExitStatus.BAD_INPUT and "userspace" in err and "cpu/governor" in err, err
    govs = {
        p.read_text() for p in tree.glob("sys/devices/system/cpu/cpu*/cpufreq/scaling_governor")
    }
    assert govs == {"powersave\n"}


def test_an_unknown_allow_unsafe_key_is_bad_input(
    tree: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for bad in ("nosuch/key", "link/*/nosuch", "sysctl/"):
        code, _out, err = run(
            capsys, "tune", "apply", "--dry-run", "--tree", str(tree), "--allow-unsafe", bad
        )
        assert code == ExitStatus.BAD_INPUT, err
        assert err.count("dtnkit: error:") == 1 and "Traceback" not in err


@pytest.mark.needs_root
@pytest.mark.needs_netns
@pytest.mark.needs_ethtool
def test_an_mtu_below_1280_is_unsafe_only_where_ipv6_runs(
    netns: Netns, tmp_path: Path, state_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    netns.run("sysctl", "-qw", "net.ipv6.conf.dkv1.disable_ipv6=1")
    prof = str(profile(tmp_path, {"link/*/mtu": 1200}))
    sel = [
        "--netns",
        netns.name,
        "--profile",
        prof,
        "--group",
        "nic",
        "--mtu",
        "--iface",
        "dkv0",
        "--iface",
        "dkv1",
        "--state-dir",
        str(state_dir),
    ]
    code, plan, err = run(capsys, "tune", "apply", "--dry-run", *sel, "--format", "json")
    assert code == ExitStatus.OK, err
    unsafe = {s["key"]: s.get("unsafe") for s in plan["plan"] if s["key"].endswith("/mtu")}
    assert "IPv6" in unsafe["link/dkv0/mtu"]  # IPv6 runs on dkv0
    assert unsafe["link/dkv1/mtu"] is None  # not on dkv1: nothing to lose
    code, _out, err = run(capsys, "tune", "apply", *sel)
    assert code == ExitStatus.BAD_INPUT and "link/dkv0/mtu" in err, err
    assert netns.run("cat", "/sys/class/net/dkv0/mtu").stdout.strip() == "1500"
    code, _out, err = run(capsys, "tune", "apply", *sel, "--allow-unsafe", "link/*/mtu")
    assert code == ExitStatus.OK, err
    assert netns.run("cat", "/sys/class/net/dkv0/mtu").stdout.strip() == "1200"


# ---- the profile loader, fuzzed with values per kind of setting ------------------------------
KINDS: dict[str, Any] = {
    # sysctls: one integer, a triple, a pair, a name
    "sysctl/net.ipv4.tcp_syncookies": st.integers(-3, 5),
    "sysctl/net.core.netdev_max_backlog": st.integers(-(2**33), 2**33),
    "sysctl/net.core.somaxconn": st.integers(-5, 70000),
    "sysctl/net.ipv4.tcp_rmem": st.lists(st.integers(-5, 2**32), min_size=1, max_size=4).map(
        lambda v: " ".join(map(str, v))
    ),
    "sysctl/net.ipv4.ip_local_port_range": st.lists(
        st.integers(-5, 70000), min_size=1, max_size=3
    ).map(lambda v: " ".join(map(str, v))),
    "sysctl/net.ipv4.tcp_congestion_control": st.text(min_size=0, max_size=20),
    "sysctl/net.ipv4.tcp_ecn": st.one_of(st.integers(-3, 5), st.text(max_size=5), st.booleans()),
    # interfaces: integers with bounds, switches
    "link/*/mtu": st.integers(-5, 70000),
    "link/*/txqueuelen": st.integers(-(2**33), 2**33),
    "ring/*/rx": st.integers(-5, 2**33),
    "feature/*/gro": st.one_of(st.booleans(), st.integers(-1, 2), st.text(max_size=4)),
    # names
    "cpu/governor": st.one_of(
        st.sampled_from(["performance", "powersave", "userspace", "ondemand"]), st.text(max_size=12)
    ),
    "tuned/profile": st.text(max_size=30),
}


class Loader:
    """dtn-a (read-only: dry runs) and a profile file, fed to the CLI in-process."""

    def __init__(self, root: Path) -> None:
        self.tree = root / "tree"
        shutil.copytree(HOSTS / "dtn-a", self.tree)
        self.profile = root / "fz.toml"
        self.root = root

    def run(self, *argv: str) -> tuple[int, str, str]:
        env = Environment(
            state_dir=self.root / "state",
            results_db=self.root / "r.sqlite",
            lab_state_root=self.root / "lab",
            stdin=io.StringIO(),
            stdout=io.StringIO(),
            stderr=io.StringIO(),
        )
        code = main(list(argv), env)
        return code, env.stdout.getvalue(), env.stderr.getvalue()


@pytest.fixture(scope="module")
def loader(tmp_path_factory: pytest.TempPathFactory) -> Loader:
    return Loader(tmp_path_factory.mktemp("hu-unsafe-fuzz"))


def _toml(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return json.dumps(value)


@settings(max_examples=400, deadline=None, database=None, suppress_health_check=list(HealthCheck))
@given(data=st.data(), key=st.sampled_from(sorted(KINDS)))
def test_generated_values_per_kind_give_a_plan_or_one_clear_error(
    loader: Loader, data: st.DataObject, key: str
) -> None:
    value = data.draw(KINDS[key])
    group = (
        ['group = "congestion"']
        if key.startswith("sysctl/")
        and key
        not in ("sysctl/net.ipv4.tcp_congestion_control", "sysctl/net.core.netdev_max_backlog")
        else []
    )
    loader.profile.write_text(
        "\n".join(
            [
                'include = "dtn"',
                f"[tune.{json.dumps(key)}]",
                f"value = {_toml(value)}",
                'mode = "exact"',
                'source = "fuzz"',
                *group,
            ]
        )
        + "\n"
    )
    code, out, err = loader.run(
        "tune",
        "apply",
        "--dry-run",
        "--tree",
        str(loader.tree),
        "--profile",
        str(loader.profile),
        "--mtu",
        "--tuned",
        "--format",
        "json",
    )
    assert "Traceback" not in err
    assert code in (ExitStatus.OK, ExitStatus.BAD_INPUT), err
    if code == ExitStatus.BAD_INPUT:
        lines = err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("dtnkit: error: "), err
        return
    for step in json.loads(out)["plan"]:  # every unsafe value written is marked
        tunable = tunable_for_key(step["key"])
        assert bool(step.get("unsafe")) == bool(tunable.unsafe(step["after"])) or (
            step["key"].startswith("link/")
        ), step
