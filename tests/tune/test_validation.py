"""Issue 10 item 4: bad snapshots, profiles, options and state dirs get one error line, exit 9
(or 1 for a state dir that is read-only or full), and nothing is written: not the host tree,
not the state dir.  Each case crashed, wrote, or exited 0/1 before the validation existed."""

from __future__ import annotations

import contextlib
import json
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.conftest import HOSTS, taken

from dtnkit.cli.main import main
from dtnkit.environment import Environment
from dtnkit.errors import ExitStatus
from dtnkit.tune.registry import tunable_for_key


def files_of(root: Path) -> dict[str, bytes]:
    """Every file under root with its bytes, and every directory (as b"<dir>")."""
    if not root.exists():
        return {}
    if root.is_file():
        return {".": root.read_bytes()}
    return {
        str(p.relative_to(root)): (p.read_bytes() if p.is_file() else b"<dir>")
        for p in sorted(root.rglob("*"))
    }


def run(env: Environment, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv), env)
    return code, taken(env.stdout), taken(env.stderr)


def one_error_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("dtnkit: error: ") and "Traceback" not in err, err
    return lines[0]


@pytest.fixture
def host_tree(tmp_path: Path) -> Path:
    dst = tmp_path / "tree"
    shutil.copytree(HOSTS / "dtn-a", dst, symlinks=True)
    return dst


@pytest.fixture
def good_snapshot(environment: Environment, host_tree: Path) -> dict[str, Any]:
    """A real snapshot of the tree (saved, read back, then removed from the state dir)."""
    code, _, err = run(environment, "tune", "save", "--tree", str(host_tree), "--label", "good")
    assert code == 0, err
    path = next((environment.state_dir / "snapshots").glob("*.json"))
    doc: dict[str, Any] = json.loads(path.read_bytes())
    shutil.rmtree(environment.state_dir)
    return doc


def _put(env: Environment, name: str, data: bytes) -> None:
    snaps = env.state_dir / "snapshots"
    snaps.mkdir(parents=True, exist_ok=True)
    (snaps / f"{name}.json").write_bytes(data)


def _mutated(doc: dict[str, Any], change: Any) -> bytes:
    doc = json.loads(json.dumps(doc))
    change(doc)
    return json.dumps(doc).encode()


def _set(key: str, value: Any) -> Any:
    # rmem_max changes too, so a crash half-way (the old behaviour) leaves it written
    def change(doc: dict[str, Any]) -> None:
        doc["values"]["sysctl/net.core.rmem_max"] = 999999
        doc["values"][key] = value

    return change


TBF = {"kind": "tbf", "handle": "1:", "children": []}
SNAPSHOT_CASES: dict[str, Any] = {
    "tbf without burst": _set("qdisc/ens1f0np0/root", {**TBF, "options": {"rate": 125000000}}),
    "qdisc options not an object": _set("qdisc/ens1f0np0/root", {**TBF, "options": 5}),
    "qdisc child without parent": _set(
        "qdisc/ens1f0np0/root",
        {"kind": "mq", "handle": "1:", "options": {}, "children": [{"kind": "fq", "options": {}}]},
    ),
    "values is a list": lambda d: d.__setitem__("values", []),
    "txqueuelen -5": _set("link/ens1f0np0/txqueuelen", -5),
    "mtu 10**12": _set("link/ens1f0np0/mtu", 10**12),
    "ring -1": _set("ring/ens1f0np0/rx", -1),
    "feature not a boolean": _set("feature/ens1f0np0/gro", "yes"),
    "tcp_rmem out of order": _set("sysctl/net.ipv4.tcp_rmem", "6291456 131072 4096"),
    "rmem_max negative": _set("sysctl/net.core.rmem_max", -1),
    "sysctl as a list": _set("sysctl/net.ipv4.tcp_mtu_probing", [1]),
    "governor path escape": _set("cpu/governor", {"../../../../etc/x": "performance"}),
    "unknown top-level field": lambda d: d.__setitem__("extra", 1),
    "unknown snapshot kind": lambda d: d.__setitem__("kind", "nonsense"),
    "files outside dtnkit's": lambda d: d.__setitem__("files", {"/etc/passwd": "x"}),
    "id is a number": lambda d: d.__setitem__("id", 5),
}


@pytest.mark.parametrize("case", list(SNAPSHOT_CASES))
def test_a_bad_snapshot_is_refused_before_restore_writes_anything(
    environment: Environment, host_tree: Path, good_snapshot: dict[str, Any], case: str
) -> None:
    _put(environment, "bad", _mutated(good_snapshot, SNAPSHOT_CASES[case]))
    tree_before, state_before = files_of(host_tree), files_of(environment.state_dir)
    code, _, err = run(environment, "tune", "restore", "bad", "--tree", str(host_tree))
    assert code == ExitStatus.BAD_INPUT, err
    one_error_line(err)
    assert files_of(host_tree) == tree_before
    assert files_of(environment.state_dir) == state_before


RAW_CASES = {
    "NaN": b'{"schema": "dtnkit.snapshot/1", "id": "x", "kind": "manual", "created": "t", '
    b'"values": {"sysctl/net.core.rmem_max": NaN}}',
    "1e999 (infinity)": b'{"schema": "dtnkit.snapshot/1", "id": "x", "kind": "manual", '
    b'"created": "t", "values": {"sysctl/net.core.rmem_max": 1e999}}',
    "a key twice": b'{"schema": "dtnkit.snapshot/1", "id": "x", "kind": "manual", '
    b'"created": "t", "values": {"sysctl/net.core.rmem_max": 1, '
    b'"sysctl/net.core.rmem_max": 2}}',
    "not UTF-8": b'{"schema": "dtnkit.snapshot/1", "id": "\xff\xfe", "kind": "manual"}',
    "nested 100000 deep": b"[" * 100000 + b"]" * 100000,
    "nested 40 deep in a value": b'{"schema": "dtnkit.snapshot/1", "id": "x", "kind": '
    b'"manual", "created": "t", "values": {"cpu/governor": '
    + b'{"a": ' * 40
    + b"1"
    + b"}" * 40
    + b"}}",
    "an integer of 5000 digits": b'{"schema": "dtnkit.snapshot/1", "id": "x", "kind": '
    b'"manual", "created": "t", "values": '
    b'{"sysctl/net.core.rmem_max": ' + b"9" * 5000 + b"}}",
}


@pytest.mark.parametrize("case", list(RAW_CASES))
def test_a_malformed_snapshot_file_is_one_error_line(
    environment: Environment, host_tree: Path, case: str
) -> None:
    _put(environment, "bad", RAW_CASES[case])
    tree_before, state_before = files_of(host_tree), files_of(environment.state_dir)
    for argv in (
        ["restore", "bad", "--tree", str(host_tree)],
        ["show", "bad"],
        ["diff", "bad", "--tree", str(host_tree)],
    ):
        code, _, err = run(environment, "tune", *argv)
        assert code == ExitStatus.BAD_INPUT, (argv, err)
        one_error_line(err)
    assert files_of(host_tree) == tree_before
    assert files_of(environment.state_dir) == state_before


PROFILE_HEAD = 'include = "dtn"\n'
PROFILE_CASES: dict[str, bytes] = {
    "params nan": b'include = "dtn"\n[params]\nbdp_multiplier = nan\n',
    "params inf": b'include = "dtn"\n[params]\nram_fraction = inf\n',
    "min nan": b'include = "dtn"\n[tune."sysctl/net.core.rmem_max"]\nrule = "bdp"\n'
    b'min = nan\nsource = "x"\n',
    "txqueuelen -5": b'include = "dtn"\n[tune."link/*/txqueuelen"]\nvalue = -5\nsource = "x"\n',
    "ring as text": b'include = "dtn"\n[tune."ring/*/rx"]\nvalue = "big"\nsource = "x"\n',
    "tcp_rmem out of order": b'include = "dtn"\n[tune."sysctl/net.ipv4.tcp_rmem"]\n'
    b'value = "9 8 7"\nsource = "x"\n',
    "bad tier value": b'include = "dtn"\n[tune."link/*/txqueuelen"]\nsource = "x"\n'
    b'[tune."link/*/txqueuelen".tiers]\n10 = -1\n',
    "note is a number": b'include = "dtn"\n[tune."link/*/txqueuelen"]\nvalue = 10000\n'
    b'source = "x"\nnote = 5\n',
    "not UTF-8": b'include = "dtn"\ndescription = "\xff"\n',
    "nested 100000 deep": b"x = " + b"[" * 100000 + b"]" * 100000 + b"\n",
    "a table twice": b'include = "dtn"\n[tune."sysctl/net.core.rmem_max"]\nvalue = 1\n'
    b'source = "x"\n[tune."sysctl/net.core.rmem_max"]\nvalue = 2\nsource = "x"\n',
}


@pytest.mark.parametrize("case", list(PROFILE_CASES))
def test_a_bad_profile_is_refused_before_apply_writes_anything(
    environment: Environment, host_tree: Path, tmp_path: Path, case: str
) -> None:
    profile = tmp_path / "p.toml"
    profile.write_bytes(PROFILE_CASES[case])
    tree_before = files_of(host_tree)
    for argv in (
        ["apply", "--tree", str(host_tree), "--profile", str(profile)],
        ["audit", "--tree", str(host_tree), "--profile", str(profile)],
        ["profiles", str(profile)],
    ):
        code, _, err = run(environment, "tune", *argv)
        assert code == ExitStatus.BAD_INPUT, (argv, err)
        one_error_line(err)
    assert files_of(host_tree) == tree_before
    assert not environment.state_dir.exists()


@pytest.mark.parametrize("speed", ["nan", "inf", "-1", "0"])
def test_speed_must_be_a_positive_finite_number(environment: Environment, speed: str) -> None:
    code, _, err = run(
        environment, "tune", "audit", "--tree", str(HOSTS / "dtn-a"), f"--speed={speed}"
    )
    assert code == ExitStatus.BAD_INPUT, err
    assert "--speed" in one_error_line(err)


@pytest.mark.parametrize(
    ("key", "value", "ok"),
    [
        ("link/eth0/txqueuelen", 0, True),
        ("link/eth0/txqueuelen", -5, False),
        ("link/eth0/txqueuelen", 2**32, False),
        ("link/eth0/txqueuelen", True, False),
        ("link/eth0/mtu", 9000, True),
        ("link/eth0/mtu", 67, False),
        ("link/eth0/mtu", "9000", False),
        ("sysctl/net.core.rmem_max", 2**31 - 1, True),
        ("sysctl/net.core.rmem_max", 2**31, False),
        ("sysctl/net.core.rmem_max", "4194304", True),
        ("sysctl/net.ipv4.tcp_rmem", "4096 87380 6291456", True),
        ("sysctl/net.ipv4.tcp_rmem", "4096 87380", False),
        ("sysctl/net.ipv4.tcp_mtu_probing", 3, False),
        ("sysctl/net.ipv4.tcp_congestion_control", "bbr", True),
        ("sysctl/net.ipv4.tcp_congestion_control", "bbr; reboot", False),
        ("sysctl/net.ipv4.ip_local_port_range", "32768\t60999", True),
        ("sysctl/net.ipv4.ip_local_port_range", "1\n2", False),
        ("sysctl/net.ipv4.ip_local_port_range", 1.5, False),
        ("ring/eth0/rx", 8192, True),
        ("ring/eth0/rx", -1, False),
        ("coalesce/eth0/adaptive-rx", True, True),
        ("coalesce/eth0/adaptive-rx", 1, False),
        ("pause/eth0/tx", False, True),
        ("feature/eth0/gro", "on", False),
        ("cpu/governor", {"cpu0": "performance"}, True),
        ("cpu/governor", {}, False),
        ("cpu/governor", "performance", True),
        ("cpu/governor", {"cpu0/..": "x"}, False),
        ("tuned/profile", None, True),
        ("tuned/profile", "network-throughput", True),
        ("tuned/profile", "a;b", False),
        ("qdisc/eth0/root", {"maxrate_bps": 10**9, "mq": True, "queues": 8}, True),
        ("qdisc/eth0/root", {"maxrate_bps": -1}, False),
        ("qdisc/eth0/root", {"kind": "tbf", "options": {"rate": 1, "burst": -1}}, False),
        (
            "qdisc/eth0/root",
            {"kind": "pfifo", "handle": "1:", "options": {"limit": 100}, "children": []},
            True,
        ),
        ("qdisc/eth0/root", {"kind": "mq", "handle": "x", "options": {}}, False),
    ],
)
def test_each_kind_validates_its_values(key: str, value: Any, ok: bool) -> None:
    why = tunable_for_key(key).validate(value)
    assert (why is None) == ok, why


# ---- the state dir ----------------------------------------------------------------------


def _state_commands(tree: Path) -> list[list[str]]:
    return [
        ["save", "--tree", str(tree)],
        ["apply", "--tree", str(tree)],
        ["restore", "last", "--tree", str(tree)],
        ["list"],
        ["delete", "x"],
    ]


def test_a_plain_file_as_state_dir_is_one_error_line(
    environment: Environment, host_tree: Path, tmp_path: Path
) -> None:
    plain = tmp_path / "plain"
    plain.write_text("not a directory\n")
    tree_before = files_of(host_tree)
    for argv in _state_commands(host_tree):
        for state in (plain, plain / "sub"):
            code, _, err = run(environment, "tune", *argv, "--state-dir", str(state))
            assert code == ExitStatus.BAD_INPUT, (argv, state, err)
            assert "Not a directory" in one_error_line(err) or "File exists" in err, err
    assert plain.read_text() == "not a directory\n"
    assert files_of(host_tree) == tree_before


@contextlib.contextmanager
def tmpfs(where: Path, options: str) -> Iterator[Path]:
    where.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", options, "dkva-state", str(where)], check=True)
    try:
        yield where
    finally:
        subprocess.run(["umount", str(where)], check=False)


@pytest.mark.needs_root
@pytest.mark.parametrize("state", ["read-only", "full"])
def test_a_read_only_or_full_state_dir_is_one_error_line(
    environment: Environment, host_tree: Path, tmp_path: Path, state: str
) -> None:
    options = "ro,size=64k" if state == "read-only" else "size=16k"
    with tmpfs(tmp_path / "mnt", options) as mnt:
        if state == "full":
            (mnt / "fill").write_bytes(b"\0" * 16384)
            with pytest.raises(OSError):
                (mnt / "more").write_bytes(b"\0" * 4096)
            (mnt / "more").unlink(missing_ok=True)
        tree_before = files_of(host_tree)
        for argv in (["save", "--tree", str(host_tree)], ["apply", "--tree", str(host_tree)]):
            code, _, err = run(environment, "tune", *argv, "--state-dir", str(mnt))
            assert code == ExitStatus.ERROR, (argv, err)
            assert ("Read-only" if state == "read-only" else "No space") in one_error_line(err)
        assert files_of(host_tree) == tree_before  # the baseline failed: no setting written
        assert not list(mnt.glob("snapshots/*.json"))
