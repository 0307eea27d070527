"""Snapshots: versioned, atomic, validated; diff is a pure function."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dtnkit.errors import BadInput
from dtnkit.host.host import Host
from dtnkit.tune.snapshot import SCHEMA, Snapshot, Store, diff, load_values, new_snapshot

VALUES = {
    "sysctl/net.ipv4.tcp_rmem": "4096 131072 6291456",
    "link/eth0/mtu": 1500,
    "qdisc/eth0/root": {
        "kind": "tbf",
        "handle": "8001:",
        "options": {"rate": 1, "burst": 1600},
        "children": [],
    },
}


def make(store: Store, label: str = "x", values: dict[str, object] | None = None) -> Snapshot:
    snap = new_snapshot(Host(Path("/nonexistent")), dict(values or VALUES), label, "manual")
    store.save(snap)
    return snap


def test_save_load_round_trip_is_versioned_and_leaves_no_temp_files(tmp_path: Path) -> None:
    store = Store(tmp_path)
    snap = make(store)
    doc = json.loads((store.dir / f"{snap.id}.json").read_text())
    assert doc["schema"] == SCHEMA
    assert store.load(snap.id).values == VALUES
    assert [p.name for p in store.dir.iterdir()] == [f"{snap.id}.json"]
    assert oct(store.dir.stat().st_mode & 0o777) == "0o700"


def test_names_resolve_by_prefix_label_and_last_baseline(tmp_path: Path) -> None:
    store = Store(tmp_path)
    a = make(store, "before-upgrade")
    b = make(store, "other")
    assert store.resolve("before-upgrade") == a.id
    assert store.resolve(b.id[:20] + b.id[20:]) == b.id
    with pytest.raises(BadInput, match="no baseline"):
        store.resolve("last")
    store.set_last_baseline(b.id)
    assert store.resolve("last") == b.id
    with pytest.raises(BadInput, match="ambiguous"):
        store.resolve(a.id[:8])
    store.delete(b.id)
    assert store.last_baseline() is None


def test_same_second_saves_do_not_overwrite(tmp_path: Path) -> None:
    store = Store(tmp_path)
    snap1 = make(store, "same")
    snap2 = new_snapshot(Host(Path("/nonexistent")), {}, "same", "manual")
    snap2.id = snap1.id
    store.save(snap2)
    assert len(store.ids()) == 2


@pytest.mark.parametrize("name", ["../etc/passwd", "/etc/passwd", "a/b", ".hidden", "", "x" * 200])
def test_hostile_names_are_refused(tmp_path: Path, name: str) -> None:
    with pytest.raises(BadInput):
        Store(tmp_path).load(name)


@pytest.mark.parametrize(
    ("content", "fragment"),
    [
        ("{not json", "corrupt"),
        ("[]", "not a dtnkit snapshot"),
        (json.dumps({"schema": "dtnkit.snapshot/99", "id": "x"}), "schema"),
        (json.dumps({"schema": SCHEMA, "id": "x"}), "damaged"),
        (
            json.dumps(
                {
                    "schema": SCHEMA,
                    "id": "x",
                    "kind": "manual",
                    "created": "t",
                    "values": {"evil/../../key": 1},
                }
            ),
            "unknown setting",
        ),
    ],
)
def test_corrupt_or_foreign_snapshots_get_one_clear_error(
    tmp_path: Path, content: str, fragment: str
) -> None:
    store = Store(tmp_path)
    store.dir.mkdir(parents=True)
    (store.dir / "bad.json").write_text(content)
    with pytest.raises(Exception) as err:
        store.load("bad")
    assert fragment in str(getattr(err.value, "render", lambda: str(err.value))())


def test_diff_is_pure_and_normalises_whitespace() -> None:
    a = dict(VALUES)
    b = {
        **VALUES,
        "sysctl/net.ipv4.tcp_rmem": "4096\t131072\t6291456",
        "link/eth0/mtu": 9000,
        "sysctl/net.core.rmem_max": "4194304",
    }
    d = diff(a, b)
    assert [(x.key, x.a, x.b) for x in d] == [
        ("sysctl/net.core.rmem_max", None, "4194304"),
        ("link/eth0/mtu", 1500, 9000),
    ]
    assert diff(a, b, only_common=True)[0].key == "link/eth0/mtu"
    assert a == VALUES  # inputs untouched


def test_diff_accepts_a_peer_snapshot_file_and_a_sysctl_conf(tmp_path: Path) -> None:
    store = Store(tmp_path / "state")
    peer = tmp_path / "peer.json"
    snap = new_snapshot(Host(Path("/nonexistent")), dict(VALUES), "peer", "manual")
    peer.write_text(json.dumps(snap.as_dict()))
    name, values = load_values(str(peer), store)
    assert values == VALUES and name == snap.id
    conf = tmp_path / "99-site.conf"
    conf.write_text("# site\nnet.ipv4.tcp_rmem = 4096 87380 33554432\n-net.core.rmem_max=1\n")
    _, values = load_values(str(conf), store)
    assert values == {
        "sysctl/net.ipv4.tcp_rmem": "4096 87380 33554432",
        "sysctl/net.core.rmem_max": "1",
    }
    bad = tmp_path / "bad.conf"
    bad.write_text("this line has no equals sign\n")
    with pytest.raises(BadInput, match="neither a snapshot nor a sysctl file"):
        load_values(str(bad), store)
