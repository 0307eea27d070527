"""`tune diff` across hosts: interfaces paired by role (or --map), JSON values typed; the
restore plan names groups.  Real CLI runs on the captured trees dtn-a and dtn-b."""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from conftest import HOSTS, taken
from dtnkit.cli.main import main
from dtnkit.environment import Environment
from dtnkit.errors import BadInput, ExitStatus
from dtnkit.tune.keys import group_of, typed, unit_of
from dtnkit.tune.pairing import Pair, pair, rename


def run(env: Environment, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv), env)
    return code, taken(env.stdout), taken(env.stderr)


def save(env: Environment, tree: str, label: str) -> Path:
    code, out, err = run(
        env, "tune", "save", "--tree", str(HOSTS / tree), "--label", label, "--format", "json"
    )
    assert code == 0, err
    return Path(json.loads(out)["path"])


def diff_json(env: Environment, *argv: str) -> dict[str, Any]:
    code, out, err = run(env, "tune", "diff", *argv, "--format", "json")
    assert code == ExitStatus.DRIFT, err
    doc: dict[str, Any] = json.loads(out)
    return doc


@pytest.fixture(scope="module")
def saved_once(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The snapshots of dtn-a and dtn-b, saved once for the module (a save takes ~1 s)."""
    state = tmp_path_factory.mktemp("voc-state")
    env = Environment(
        state_dir=state,
        results_db=state / "r.sqlite",
        lab_state_root=state / "lab",
        stdin=io.StringIO(),
        stdout=io.StringIO(),
        stderr=io.StringIO(),
    )
    save(env, "dtn-a", "a")
    save(env, "dtn-b", "b")
    return state / "snapshots"


@pytest.fixture
def two_hosts(environment: Environment, saved_once: Path) -> tuple[Path, Path]:
    """A copy of them in this test's own state dir (a test may change them)."""
    shutil.copytree(saved_once, environment.state_dir / "snapshots")
    files = sorted((environment.state_dir / "snapshots").glob("*.json"))
    by_label = {json.loads(f.read_text())["label"]: f for f in files}
    return by_label["a"], by_label["b"]


def test_snapshots_record_interface_roles(
    environment: Environment, two_hosts: tuple[Path, Path]
) -> None:
    host = json.loads(two_hosts[0].read_text())["host"]
    assert host["interfaces"] == (
        "bond0=bond bond0.111=vlan ens1f0np0=member ens1f1np1=member ens5f1np1=nic"
    )


def test_nics_named_differently_pair_by_role(
    environment: Environment, two_hosts: tuple[Path, Path]
) -> None:
    doc = diff_json(environment, "a", "b")
    # before: every item of enp1s0 (B) and of ens5f1np1 (A) was "missing" on the other side
    assert doc["pairs"] == [{"a": "ens5f1np1", "b": "enp1s0", "by": "role", "role": "nic"}]
    keys = {d["key"]: d for d in doc["differences"]}
    assert not any("/enp1s0/" in k for k in keys)
    ring = keys["ring/ens5f1np1/rx"]
    assert (ring["a"], ring["b"], ring["b_key"], ring["unit"], ring["group"]) == (
        1024,
        4096,
        "ring/enp1s0/rx",
        "descriptors",
        "rings",
    )
    assert "link/ens5f1np1/mtu" not in keys  # 9000 on both: equal once paired
    code, out, _ = run(environment, "tune", "diff", "a", "b")
    assert code == ExitStatus.DRIFT
    assert "paired: ens5f1np1 in A with enp1s0 in B (role nic; --map to change)" in out


def test_map_pairs_by_hand(environment: Environment, two_hosts: tuple[Path, Path]) -> None:
    doc = diff_json(environment, "a", "b", "--map", "ens1f0np0=enp1s0")
    assert doc["pairs"] == [{"a": "ens1f0np0", "b": "enp1s0", "by": "map", "role": "member"}]
    keys = {d["key"] for d in doc["differences"]}
    assert "ring/ens1f0np0/rx" in keys and "ring/ens5f1np1/rx" in keys
    assert not any("/enp1s0/" in k for k in keys)


@pytest.mark.parametrize(
    ("value", "fragment"),
    [
        ("ens1f0np0", "bad --map 'ens1f0np0'"),
        ("nosuch=enp1s0", "A has no interface nosuch"),
        ("ens1f0np0=nosuch", "B has no interface nosuch"),
        ("ens1f0np0=enp1s0,ens1f1np1=enp1s0", "--map names enp1s0 twice"),
    ],
)
def test_bad_maps_are_one_error(
    environment: Environment, two_hosts: tuple[Path, Path], value: str, fragment: str
) -> None:
    code, out, err = run(environment, "tune", "diff", "a", "b", "--map", value)
    assert code == ExitStatus.BAD_INPUT
    assert err.startswith("dtnkit: error: ") and fragment in err and out == ""


def test_an_older_snapshot_pairs_by_its_keys(
    environment: Environment, two_hosts: tuple[Path, Path]
) -> None:
    for path in two_hosts:
        doc = json.loads(path.read_text())
        del doc["host"]["interfaces"]
        path.write_text(json.dumps(doc))
    doc = diff_json(environment, "a", "b")
    # three NICs by their keys in A, one in B: not guessed, but said, with the flag to use
    assert doc["pairs"] == []
    assert doc["unpaired"] == [
        "nic: A has ens1f0np0, ens1f1np1, ens5f1np1 and B has enp1s0; not paired (pair them "
        "with --map, e.g. --map ens1f0np0=enp1s0)"
    ]


def test_json_values_are_typed(
    environment: Environment, two_hosts: tuple[Path, Path], tmp_path: Path
) -> None:
    doc = diff_json(environment, "a", "b")
    keys = {d["key"]: d for d in doc["differences"]}
    # before: "3072660 4096883 6145320", a string beside the integers of rmem_max
    assert keys["sysctl/net.ipv4.tcp_mem"]["a"] == [3072660, 4096883, 6145320]
    assert keys["sysctl/net.ipv4.tcp_mem"]["unit"] == "pages"
    assert keys["sysctl/net.core.rmem_max"]["unit"] == "bytes"
    for d in doc["differences"]:
        if d["unit"] is not None:
            for value in (d["a"], d["b"]):
                assert (
                    value is None
                    or isinstance(value, int)
                    or (isinstance(value, list) and all(isinstance(v, int) for v in value))
                ), d
    conf = tmp_path / "peer.conf"
    conf.write_text("net.core.rmem_max = 4194304\nnet.ipv4.tcp_rmem = 4096 87380 4194304\n")
    doc = diff_json(environment, "a", str(conf))
    values = {d["key"]: d["b"] for d in doc["differences"]}
    assert values == {
        "sysctl/net.core.rmem_max": 4194304,
        "sysctl/net.ipv4.tcp_rmem": [4096, 87380, 4194304],
    }


def test_restore_plan_names_groups(environment: Environment, tmp_path: Path) -> None:
    path = save(environment, "dtn-a", "before")
    doc = json.loads(path.read_text())
    doc["values"]["sysctl/net.core.rmem_max"] = 4194304
    doc["values"]["ring/ens5f1np1/rx"] = 512
    doc["values"]["feature/ens5f1np1/gro"] = not doc["values"]["feature/ens5f1np1/gro"]
    path.write_text(json.dumps(doc))
    code, out, err = run(
        environment,
        "tune",
        "restore",
        "before",
        "--tree",
        str(HOSTS / "dtn-a"),
        "--dry-run",
        "--format",
        "json",
    )
    assert code == 0, err
    # before: sysctl, ring, feature (the kind of setting)
    assert {(s["key"], s["group"]) for s in json.loads(out)["plan"]} == {
        ("sysctl/net.core.rmem_max", "buffers"),
        ("ring/ens5f1np1/rx", "rings"),
        ("feature/ens5f1np1/gro", "offloads"),
    }


# ---- the pure parts ---------------------------------------------------------------------------
def test_same_names_pair_with_themselves_and_a_map_wins() -> None:
    a = {"ring/eth0/rx": 1, "ring/eth1/rx": 1}
    b = {"ring/eth0/rx": 2, "ring/ens1/rx": 1}
    assert pair(a, b).pairs == [Pair("eth1", "ens1", "role", "nic")]
    got = pair(a, b, manual={"eth0": "ens1"})
    assert got.pairs == [Pair("eth0", "ens1", "map", "nic"), Pair("eth1", "eth0", "role", "nic")]
    assert rename(b, got.b_to_a()) == {"ring/eth1/rx": 2, "ring/eth0/rx": 1}


def test_a_rename_onto_a_device_b_keeps_is_refused() -> None:
    b = {"ring/eth0/rx": 2, "ring/ens1/rx": 1}
    with pytest.raises(BadInput, match="which B also has"):
        rename(b, {"ens1": "eth0"})


def test_keys() -> None:
    assert (
        group_of("ring/x/rx") == "rings" and group_of("sysctl/net.ipv4.tcp_fin_timeout") == "site"
    )
    assert unit_of("link/bond0.111/mtu") == "bytes" and unit_of("feature/x/gro") is None
    assert typed("4096 87380\t6291456") == [4096, 87380, 6291456] and typed("-1") == -1
    assert typed("bbr") == "bbr" and typed(True) is True and typed({"k": "1"}) == {"k": "1"}
