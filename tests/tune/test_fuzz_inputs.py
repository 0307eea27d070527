"""Fuzz: generated snapshots and profiles fed to the real CLI in-process.

1,000 of each in every run, 10,000 in the nightly one (``DTNKIT_FUZZ``,
tests/support/fuzz.py): near-valid documents (a real snapshot of the dtn-a tree, or a
profile that includes dtn) with random mutations (wrong types, NaN and infinity, huge
integers, deep nesting, bytes that are not UTF-8, keys given twice, truncation).  Each must
end with a documented exit code and no uncaught exception, and an input that is refused
(exit 9) must leave the host tree and the state dir byte for byte as they were.
"""

from __future__ import annotations

import copy
import io
import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from tests.conftest import HOSTS
from tests.support import fuzz

from dtnkit.cli.main import main
from dtnkit.environment import Environment
from dtnkit.errors import ExitStatus

FUZZ = settings(
    max_examples=fuzz.CASES, deadline=None, database=None, suppress_health_check=list(HealthCheck)
)
# restore: done, done but a setting's device is not there (3), rolled back after a refused
# write (4), bad input (9)
RESTORE_CODES = {0, 3, 4, 9}
# profiles / apply --dry-run: done, bad input
PROFILE_CODES = {0, 9}


class World:
    """A writable copy of dtn-a, its pristine bytes, and a state dir, reset between examples."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.tree = root / "tree"
        shutil.copytree(HOSTS / "dtn-a", self.tree, symlinks=True)
        self.pristine = self.files(self.tree)
        self.signature = self.stats(self.tree)
        self.state = root / "state"
        self.counts: dict[str, int] = {}

    @staticmethod
    def stats(top: Path) -> dict[str, tuple[int, int, int]]:
        """Every file's (size, mtime_ns, inode): any write or replace changes one of them.
        (One scandir per directory and one lstat per entry, as os.walk + os.lstat did, without
        their per-entry path joins: called once per example.)"""
        out: dict[str, tuple[int, int, int]] = {}
        pending = [str(top)]
        while pending:
            with os.scandir(pending.pop()) as it:
                for entry in it:
                    st_ = entry.stat(follow_symlinks=False)
                    out[entry.path] = (st_.st_size, st_.st_mtime_ns, st_.st_ino)
                    if entry.is_dir(follow_symlinks=False):
                        pending.append(entry.path)
        return out

    @staticmethod
    def files(top: Path) -> dict[str, bytes]:
        if not top.exists():
            return {}
        return {
            str(p.relative_to(top)): (p.read_bytes() if p.is_file() else b"<dir>")
            for p in top.rglob("*")
        }

    def untouched(self) -> bool:
        return self.stats(self.tree) == self.signature

    def reset(self, *, known_untouched: bool = False) -> None:
        if known_untouched or self.untouched():
            shutil.rmtree(self.state, ignore_errors=True)
            return
        now = self.files(self.tree)
        for rel in sorted(set(now) - set(self.pristine), reverse=True):
            path = self.tree / rel
            shutil.rmtree(path) if path.is_dir() else path.unlink()
        for rel, data in self.pristine.items():
            if now.get(rel) != data and data != b"<dir>":
                (self.tree / rel).write_bytes(data)
        shutil.rmtree(self.state, ignore_errors=True)
        self.signature = self.stats(self.tree)

    def env(self) -> Environment:
        return Environment(
            state_dir=self.state,
            results_db=self.root / "r.sqlite",
            lab_state_root=self.root / "lab",
            stdin=io.StringIO(),
            stdout=io.StringIO(),
            stderr=io.StringIO(),
        )

    def run(self, *argv: str) -> tuple[int, str]:
        env = self.env()
        code = main(list(argv), env)
        err = env.stderr.getvalue()
        assert "Traceback" not in err, err
        return code, err

    def count(self, what: str) -> None:
        self.counts[what] = self.counts.get(what, 0) + 1


# One world a module (each test resets it), but each fuzzer is its own unit of work under
# pytest-xdist (dev/test.sh): minutes each, they would otherwise run one after the other on
# the worker that made the world (tests/conftest.py groups the tests of a module fixture).
@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> World:
    return World(tmp_path_factory.mktemp("dkva-fuzz"))


def refused_cleanly(code: int, err: str) -> None:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("dtnkit: error: "), err


# ---- generated values ---------------------------------------------------------------------
NEAR = [
    0,
    1,
    -1,
    -5,
    68,
    1500,
    9000,
    65536,
    65537,
    2**31 - 1,
    2**31,
    2**32,
    2**63,
    2**64,
    10**30,
    True,
    False,
    None,
    "",
    "fq",
    "bbr",
    "4096 87380 6291456",
    "9 8 7",
    "1 2",
    "performance",
    "cpu0",
    "1:",
    ":1",
    "on",
    "x\ny",
    "\u00e9",
    {"cpu0": "performance"},
    {"kind": "tbf", "handle": "1:", "options": {"rate": 125000000}, "children": []},
    {"kind": "tbf", "handle": "1:", "options": {"rate": 1, "burst": 1600}, "children": []},
    {"kind": "pfifo", "handle": "1:", "options": {"limit": 100}, "children": []},
    {"kind": "mq", "handle": "0:", "options": {}, "children": [{"kind": "fq"}]},
    {"maxrate_bps": 10**9, "mq": True, "queues": 2},
    {"maxrate_bps": -1},
    [],
    {},
    [[[]]],
    # the IPv6 state an MTU below 1280 drops: near-valid and hostile records
    ["2001:db8::5/64 nodad"],
    ["2001:db8::5/129"],
    ["fe80::1/64"],
    ["2001:db8::5/64 dev lo"],
    ["default via fe80::1 metric 1024"],
    ["default via eth0 metric 1"],
    ["::/0 metric -1"],
    {"accept_ra": "0"},
    {"../../../etc/passwd": "x"},
    {"disable_ipv6": 1},
]
#: a fresh copy of each NEAR value: the generators change what they are given (a qdisc tree's
#: children), and NEAR's own dicts, shared by every case, once became their own children
junk = st.one_of(
    st.sampled_from(NEAR).map(copy.deepcopy),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12),
    st.lists(st.integers(), max_size=3),
    st.dictionaries(st.text(max_size=6), st.integers(), max_size=3),
)
KEYS = [
    "sysctl/net.core.rmem_max",
    "sysctl/net.ipv4.tcp_rmem",
    "sysctl/net.core.default_qdisc",
    "sysctl/net.ipv4.tcp_congestion_control",
    "link/ens1f0np0/mtu",
    "link/ens1f0np0/txqueuelen",
    "ring/ens1f0np0/rx",
    "feature/ens1f0np0/gro",
    "coalesce/ens1f1np1/adaptive-rx",
    "pause/ens1f1np1/tx",
    "qdisc/ens1f0np0/root",
    "cpu/governor",
    "tuned/profile",
    "link/nosuch/mtu",
    "sysctl/",
    "evil/key",
    "qdisc/ens1f0np0/leaf",
    "check/smt",
    "sysctl/net.ipv4.tcp_ecn",
    "ipv6/ens1f0np0/addresses",
    "ipv6/ens1f0np0/routes",
    "ipv6/ens1f0np0/conf",
    "ipv6/nosuch/addresses",
    "ipv6/ens1f0np0/bogus",
]
TOP = ["schema", "id", "label", "kind", "created", "host", "values", "files", "extra"]


def _damage(draw: st.DrawFn, data: bytes, form: str) -> bytes:
    """A document's bytes with a few random bytes inserted ("bytes") or cut off ("truncate")."""
    if form == "bytes":
        at = draw(st.integers(0, len(data)))
        return data[:at] + draw(st.binary(min_size=1, max_size=4)) + data[at:]
    if form == "truncate":
        return data[: draw(st.integers(0, len(data)))]
    return data


def _deep(depth: int) -> str:
    return "[" * depth + "]" * depth


@st.composite
def snapshot_bytes(draw: st.DrawFn, base: str) -> bytes:
    doc = json.loads(base)  # a fresh copy of the JSON document (faster than a deepcopy)
    values = doc["values"]
    for _ in range(draw(st.integers(0, 3))):
        op = draw(st.sampled_from(["value", "new", "drop", "top", "untop", "qdisc", "files"]))
        if op == "value" and values:
            values[draw(st.sampled_from(sorted(values)))] = draw(junk)
        elif op == "new":
            values[draw(st.sampled_from(KEYS))] = draw(junk)
        elif op == "drop" and values:
            del values[draw(st.sampled_from(sorted(values)))]
        elif op == "top":
            doc[draw(st.sampled_from(TOP))] = draw(junk)
        elif op == "untop":
            doc.pop(draw(st.sampled_from(TOP)), None)
        elif op == "qdisc" and isinstance(values.get("qdisc/ens1f0np0/root"), dict):
            tree = values["qdisc/ens1f0np0/root"]
            tree[draw(st.sampled_from(["kind", "handle", "options", "children"]))] = draw(junk)
        elif op == "files":
            doc["files"] = {
                draw(st.sampled_from(["/etc/sysctl.d/90-dtnkit.conf", "/etc/passwd"])): draw(junk)
            }
    text = json.dumps(doc, allow_nan=True)
    form = draw(st.sampled_from(["plain"] * 6 + ["dup", "deep", "deepvalue", "bytes", "truncate"]))
    if form == "dup" and values:
        key = json.dumps(sorted(values)[0])
        text = text.replace('"values": {', f'"values": {{{key}: 1, ', 1)
    elif form == "deep":
        text = _deep(draw(st.integers(30, 5000)))
    elif form == "deepvalue":
        text = text.replace(
            '"values": {', f'"values": {{"cpu/governor": {_deep(draw(st.integers(20, 3000)))}, ', 1
        )
    return _damage(draw, text.encode(), form)


@pytest.mark.fuzz
@pytest.mark.xdist_group("fuzz-snapshots")
def test_fuzz_snapshots_through_restore(world: World) -> None:
    world.reset()
    code, err = world.run(
        "tune",
        "save",
        "--tree",
        str(world.tree),
        "--label",
        "base",
        "--state-dir",
        str(world.state),
    )
    assert code == 0, err
    base = next((world.state / "snapshots").glob("*.json")).read_text()
    assert isinstance(json.loads(base)["values"], dict)
    world.reset()
    # a valid snapshot with no settings: refused, and (a --tree run's lock file being in the
    # state dir) refused before the lock is taken
    empty = json.dumps({**json.loads(base), "values": {}, "files": {}}).encode()

    @FUZZ
    @example(data=empty)
    @given(data=snapshot_bytes(base))
    def one(data: bytes) -> None:
        (world.state / "snapshots").mkdir(parents=True)
        (world.state / "snapshots" / "fz.json").write_bytes(data)
        state_before = world.files(world.state)
        try:
            code, err = world.run("tune", "restore", "fz", "--tree", str(world.tree))
            assert code in RESTORE_CODES, err
            clean = False
            if code == 9:
                refused_cleanly(code, err)
                assert world.untouched()
                clean = True
                assert world.files(world.state) == state_before
            world.count(f"snapshot exit {code}")
        finally:
            world.reset(known_untouched=clean)

    one()
    assert world.files(world.tree) == world.pristine  # and byte for byte at the end
    total = sum(n for k, n in world.counts.items() if k.startswith("snapshot"))
    print("fuzz snapshots:", {k: n for k, n in world.counts.items() if k.startswith("snap")})
    assert total >= fuzz.CASES


# ---- profiles -----------------------------------------------------------------------------
def toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return {"nan": "nan", "inf": "inf", "-inf": "-inf"}.get(str(value), repr(value))
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return (
            "{"
            + ", ".join(f"{json.dumps(str(k))} = {toml_value(v)}" for k, v in value.items())
            + "}"
        )
    return '"?"'  # None has no TOML form


PROFILE_KEYS = [
    "sysctl/net.core.rmem_max",
    "sysctl/net.ipv4.tcp_rmem",
    "link/*/txqueuelen",
    "link/*/mtu",
    "ring/*/rx",
    "feature/*/gro",
    "coalesce/*/adaptive-rx",
    "qdisc/*/root",
    "cpu/governor",
    "tuned/profile",
    "sysctl/net.ipv4.tcp_ecn",
    "sysctl/net.core.optmem_max",
    "check/smt",
    "nosuch/key",
]
FIELDS = [
    "value",
    "tiers",
    "rule",
    "mode",
    "apply",
    "source",
    "note",
    "enabled",
    "group",
    "min",
    "ceiling",
    "requires",
    "bogus",
]
PARAMS = ["bdp_multiplier", "ram_fraction", "maxrate_fraction", "maxrate_round_mbit", "bogus"]


@st.composite
def profile_bytes(draw: st.DrawFn) -> bytes:
    lines = ['include = "dtn"'] if draw(st.integers(0, 9)) else []
    if draw(st.booleans()):
        lines.append("[params]")
        for name in draw(st.lists(st.sampled_from(PARAMS), max_size=2, unique=True)):
            lines.append(f"{name} = {toml_value(draw(junk))}")
    for key in draw(st.lists(st.sampled_from(PROFILE_KEYS), max_size=3, unique=True)):
        lines.append(f"[tune.{json.dumps(key)}]")
        lines.append('source = "fuzz"')
        fields = draw(st.lists(st.sampled_from(FIELDS), max_size=3, unique=True))
        for name in fields:
            if name == "source":
                continue
            value = (
                draw(st.dictionaries(st.sampled_from(["10", "25", "100", "7"]), junk, max_size=2))
                if name == "tiers"
                else draw(junk)
            )
            if value is None:
                continue
            lines.append(f"{name} = {toml_value(value)}")
    text = "\n".join(lines) + "\n"
    form = draw(st.sampled_from(["plain"] * 6 + ["dup", "deep", "bytes", "truncate"]))
    if form == "dup" and "[tune." in text:
        header = text[text.index("[tune.") :].splitlines()[0]
        text += f'{header}\nsource = "again"\n'
    elif form == "deep":
        text += f"x = {_deep(draw(st.integers(30, 5000)))}\n"
    return _damage(draw, text.encode(), form)


@pytest.mark.fuzz
@pytest.mark.xdist_group("fuzz-profiles")
def test_fuzz_profiles_through_apply(world: World) -> None:
    world.reset()
    profile = world.root / "fz.toml"

    @FUZZ
    @given(data=profile_bytes())
    def one(data: bytes) -> None:
        profile.write_bytes(data)
        clean = False
        try:
            code, err = world.run("tune", "profiles", str(profile))
            assert code in PROFILE_CODES, err
            if code == 9:  # refused: apply on the writable tree refuses it and writes nothing
                refused_cleanly(code, err)
                code, err = world.run(
                    "tune",
                    "apply",
                    "--tree",
                    str(world.tree),
                    "--profile",
                    str(profile),
                    "--state-dir",
                    str(world.state),
                )
                assert code == 9, err
                refused_cleanly(code, err)
                assert world.untouched()
                clean = True
                assert not world.state.exists()
            else:  # accepted: the whole audit and plan run on it (read-only)
                code, err = world.run(
                    "tune",
                    "apply",
                    "--dry-run",
                    "--tree",
                    str(world.tree),
                    "--profile",
                    str(profile),
                )
                # 16: a plan that leaves items undecided (a tier with no value for the speed)
                assert code in {*PROFILE_CODES, ExitStatus.UNDECIDED}, err
                if code == 9:
                    refused_cleanly(code, err)
                clean = True  # --dry-run and `profiles` use a read-only host
            world.count(f"profile exit {code}")
        finally:
            world.reset(known_untouched=clean)

    one()
    assert world.files(world.tree) == world.pristine
    total = sum(n for k, n in world.counts.items() if k.startswith("profile"))
    print("fuzz profiles:", {k: n for k, n in world.counts.items() if k.startswith("prof")})
    assert total >= fuzz.CASES
