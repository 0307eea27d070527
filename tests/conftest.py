"""Shared fixtures: real network namespaces (root only), captured host trees, and an
Environment of the test's own for ``main(argv, env)``."""

from __future__ import annotations

import io
import json
import os
import shutil
import signal
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TextIO

import pytest
from tests.support.xrootd import Pki, make_pki

from dtnkit.environment import Environment

HERE = Path(__file__).parent
HOSTS = HERE / "fixtures" / "hosts"


def _can_netns() -> str | None:
    if os.geteuid() != 0:
        return "needs root to create network namespaces"
    if shutil.which("ip") is None:
        return "needs iproute2 (ip)"
    return None


def _peer_reason(marker: str) -> str | None:
    """Why a real interop peer (needs_xrootd / needs_gfal / needs_davix) cannot run here."""
    from tests.support import xrootd

    if marker == "needs_xrootd":
        return xrootd.missing_xrootd()
    if marker == "needs_gfal":
        return xrootd.missing("gfal-copy", "gfal-ls", "openssl") or xrootd.missing_gfal2_python()
    return xrootd.missing("davix-get", "davix-put", "davix-ls", "openssl")


PEER_MARKERS = ("needs_xrootd", "needs_gfal", "needs_davix")


def _interrupted(signum: int, frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def pytest_configure(config: pytest.Config) -> None:
    """SIGTERM (what `timeout`, CI runners and `kill` send) stops the run as Ctrl-C does: the
    running test's `with`/`finally` blocks and every fixture's teardown still run, so its lab
    paths, namespaces and servers are removed.  Python's default would end the process at
    once and leave them behind."""
    if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
        signal.signal(signal.SIGTERM, _interrupted)
    # A shell starts a background job (`pytest ... &`, nohup) with SIGINT ignored, and an
    # ignored signal stays ignored in every child: the tests that Ctrl-C a dtnkit child
    # would then wait for an interruption that never comes.  Handled here, it is the
    # default again in each child (exec resets handled signals, not ignored ones).
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


#: fixture scopes whose value several tests share
SHARED_SCOPES = ("class", "module", "package", "session")


def shared_fixture_group(item: pytest.Item) -> str | None:
    """The xdist group of a test that uses a class-, module- or session-scoped fixture of the
    suite's own (a server, a lab path, SSH hosts, a module's worth of documented blocks run at
    once): its file, or for a session-wide fixture the fixture's name.  The tests sharing one
    such fixture then run on one worker, which makes it once, as without xdist; tests with
    only function-scoped fixtures go to whichever worker is free.  None: no such fixture.
    An ``xdist_group`` mark, where a test has one, is its group."""
    mark = item.get_closest_marker("xdist_group")
    if mark is not None:
        return str(mark.args[0] if mark.args else mark.kwargs.get("name", "default"))
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return None
    group = None
    for name in info.names_closure:
        defs = info.name2fixturedefs.get(name)
        # a plugin's fixture (tmp_path_factory, hypothesis's) has no baseid: not ours
        if not defs or defs[-1].scope not in SHARED_SCOPES or not defs[-1].baseid:
            continue
        if defs[-1].scope in ("package", "session"):
            return f"fixture-{name}"
        group = item.nodeid.split("::")[0]
    return group


# Grouping under pytest-xdist (`dev/test.sh`: `-n N --dist loadgroup`).  xdist's own loadgroup
# renames each grouped test's node id (`...@group`), which pytest 9.2 no longer allows (node
# ids are structured): the mark is read and ignored, and every worker would make every shared
# fixture.  So the workers write the groups to a file the controller names, and the
# controller's scheduler reads it when it splits the collection into units of work.
GROUPS_KEY = "dtnkit_xdist_groups"


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """(controller) Tell each worker where to write the groups."""
    config = node.config
    if not hasattr(config, "_dtnkit_groups"):
        config._dtnkit_groups = Path(tempfile.mkdtemp(prefix="dtnkit-xdist-")) / "groups.json"
    node.workerinput[GROUPS_KEY] = str(config._dtnkit_groups)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """(controller) For ``--dist loadgroup``: a unit of work is a group from the workers'
    file, or one test."""
    if config.getoption("dist", None) != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class SharedFixtureScheduling(LoadScopeScheduling):  # type: ignore[misc]
        groups: dict[str, str] | None = None

        def _split_scope(self, nodeid: str) -> str:
            if self.groups is None:
                self.groups = json.loads(config._dtnkit_groups.read_text())
            return self.groups.get(nodeid, nodeid)

    return SharedFixtureScheduling(config, log)


def pytest_unconfigure(config: pytest.Config) -> None:
    where = getattr(config, "_dtnkit_groups", None)
    if where is not None:
        shutil.rmtree(where.parent, ignore_errors=True)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    target = getattr(config, "workerinput", {}).get(GROUPS_KEY)
    if target:  # an xdist worker: every worker collects the same and writes the same
        groups = {
            item.nodeid: group
            for item in items
            if (group := shared_fixture_group(item)) is not None
        }
        tmp = Path(f"{target}.{os.getpid()}")
        tmp.write_text(json.dumps(groups))
        tmp.replace(target)
    reason = _can_netns()
    no_ethtool = shutil.which("ethtool") is None
    no_chromium = shutil.which("chromium") is None
    peers: dict[str, str | None] = {}
    for item in items:
        if reason and ("needs_root" in item.keywords or "needs_netns" in item.keywords):
            item.add_marker(pytest.mark.skip(reason=reason))
        if no_ethtool and "needs_ethtool" in item.keywords:
            item.add_marker(pytest.mark.skip(reason="needs the ethtool binary"))
        if no_chromium and "needs_chromium" in item.keywords:
            item.add_marker(pytest.mark.skip(reason="needs the chromium binary"))
        for marker in PEER_MARKERS:
            if marker in item.keywords:
                if marker not in peers:
                    peers[marker] = _peer_reason(marker)
                if peers[marker]:
                    item.add_marker(pytest.mark.skip(reason=peers[marker]))


def sh(*argv: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, check=check)


@contextmanager
def veth_peer_netns(prefix: str, devs: tuple[str, str] = ("dkv0", "dkv1")) -> Iterator[str]:
    """A namespace ``PREFIX…`` holding one end of a veth pair (``devs[0]``), its peer
    (``devs[1]``) in a second namespace ``PREFIX…p``; both ends and the first's lo up.  Both
    namespaces are removed at the end, whatever happened."""
    name = f"{prefix}{uuid.uuid4().hex[:8]}"
    peer = f"{name}p"
    try:
        for n in (name, peer):
            sh("ip", "netns", "add", n)
        sh(
            "ip",
            "-n",
            name,
            "link",
            "add",
            devs[0],
            "type",
            "veth",
            "peer",
            "name",
            devs[1],
            "netns",
            peer,
        )
        for n, dev in ((name, devs[0]), (peer, devs[1]), (name, "lo")):
            sh("ip", "-n", n, "link", "set", dev, "up")
        yield name
    finally:
        for n in (name, peer):
            sh("ip", "netns", "del", n, check=False)


class Netns:
    """A throw-away namespace `PREFIX…` (a test module may give its own prefix; the rest is
    random) holding a veth pair dkv0 <-> dkv1, both up."""

    def __init__(self, prefix: str = "dkt") -> None:
        self.name = f"{prefix}{uuid.uuid4().hex[:8]}"
        self.devices = ("dkv0", "dkv1")

    def create(self) -> None:
        sh("ip", "netns", "add", self.name)
        sh("ip", "-n", self.name, "link", "add", "dkv0", "type", "veth", "peer", "name", "dkv1")
        for dev in self.devices:
            sh("ip", "-n", self.name, "link", "set", dev, "up")

    def delete(self) -> None:
        sh("ip", "netns", "del", self.name, check=False)

    def __enter__(self) -> Netns:
        """``with Netns(prefix=...) as ns:``: created, and deleted at the end whatever
        happened (a half-made one too)."""
        try:
            self.create()
        except BaseException:
            self.delete()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.delete()

    def run(self, *argv: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return sh("ip", "netns", "exec", self.name, *argv, check=check)

    def sysctl(self, key: str) -> str:
        return self.run("cat", "/proc/sys/" + key.replace(".", "/")).stdout.strip()

    def set_sysctl(self, key: str, value: str) -> None:
        self.run("sh", "-c", f"echo '{value}' > /proc/sys/{key.replace('.', '/')}")

    def state(self) -> dict[str, str]:
        """Everything observable that tuning may touch, as raw tool output."""
        out: dict[str, str] = {}
        for sub in ("ipv4", "core"):
            listing = self.run(
                "sh", "-c", f"grep -r . /proc/sys/net/{sub} 2>/dev/null", check=False
            ).stdout
            out[f"sysctl-{sub}"] = "\n".join(
                sorted(
                    line
                    for line in listing.splitlines()
                    if "/conf/" not in line
                    and "/neigh/" not in line
                    and "tcp_fastopen_key" not in line
                )
            )
        for dev in self.devices:
            out[f"link-{dev}"] = self.run(
                "cat", f"/sys/class/net/{dev}/mtu", f"/sys/class/net/{dev}/tx_queue_len"
            ).stdout
            out[f"tc-{dev}"] = sh("tc", "-n", self.name, "-j", "qdisc", "show", "dev", dev).stdout
            out[f"k-{dev}"] = self.run("ethtool", "-k", dev, check=False).stdout
        return out


@pytest.fixture
def netns() -> Iterator[Netns]:
    ns = Netns()
    try:
        ns.create()
        yield ns
    finally:
        ns.delete()


@pytest.fixture
def state_dir(tmp_path: Path) -> Path:
    return tmp_path / "state"


@pytest.fixture
def environment(tmp_path: Path) -> Environment:
    """An environment of the test's own for ``main(argv, environment)``: snapshots, results and
    lab state under tmp_path, no token, not a terminal, and in-memory streams (read them with
    :func:`taken`)."""
    return Environment(
        state_dir=tmp_path / "state",
        results_db=tmp_path / "results.sqlite",
        lab_state_root=tmp_path / "lab",
        stdin=io.StringIO(),
        stdout=io.StringIO(),
        stderr=io.StringIO(),
    )


def taken(stream: TextIO) -> str:
    """What was written to an in-memory stream since the last call (like capsys.readouterr)."""
    assert isinstance(stream, io.StringIO)
    text = stream.getvalue()
    stream.seek(0)
    stream.truncate()
    return text


@pytest.fixture
def tree(tmp_path: Path, request: pytest.FixtureRequest) -> Path:
    """A writable copy of a captured host tree: use with indirect parametrize or tree_copy."""
    name = getattr(request, "param", "dtn-a")
    dst = tmp_path / name
    shutil.copytree(HOSTS / name, dst, symlinks=True)
    return dst


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    """A throwaway CA per module (tests/interop): the real peers trust it, dtnkit serve uses
    certificates from it."""
    return make_pki(Path(tmp_path_factory.mktemp("pki")))
