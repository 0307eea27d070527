"""Emulated WAN paths between network namespaces on one machine.

A path has end hosts (namespaces ``dkl-NAME-src``/``dkl-NAME-dst``, or ``src1``, ``src2`` ...
when a side has several) routed through a middle namespace ``dkl-NAME-path`` that holds the
path: the one-way delay and loss (netem when the kernel has it, else dtnkit's NFQUEUE delay
stage) and the rate cap (htb with a byte-limited FIFO on the middle's egress devices).

State is kept under ``state_root/NAME/state.json`` (the CLI's default root is
``/run/dtnkit/lab``) and written *before* anything is built, so ``down`` cleans up after a
crash, a failed build or ``kill -9`` of the emulator.  Every call that reads or writes state
takes its ``state_root``: nothing here reads the environment.
"""

from __future__ import annotations

import contextlib
import fcntl
import ipaddress
import json
import os
import re
import secrets
import shutil
import signal
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol

from dtnkit.errors import BadInput, DtnkitError, NeedsRoot, ToolMissing
from dtnkit.host import process
from dtnkit.host.host import Host
from dtnkit.measure.probes.net import LabPeers, Peer
from dtnkit.progress import SILENT, Progress
from dtnkit.units import rate_limit_text as _limit

NS_PREFIX = "dkl-"
_NAME = re.compile(r"^[a-z][a-z0-9]{0,11}$")
LINK_DEV = "dklink0"  # the end host's device, in its own namespace
SUBNET_CANDIDATES = ((251, 252), (241, 242), (231, 232), (221, 222))
MAX_HOSTS_PER_SIDE = 16
# the FIFO must hold several 64 KiB GSO segments, or a short path drops at the first burst
MIN_QUEUE = 8 * 65536
# `ip netns exec NS` bind-mounts every file of /etc/netns/NS over the one of /etc: the lab's
# hosts file and resolv.conf go there, so every command run in a lab namespace sees them
ETC_NETNS = Path("/etc/netns")
DOMAIN = "lab"
# a lab namespace reaches no DNS server: lookups ask loopback, where nothing listens, and so
# fail at once (ICMP port unreachable) instead of waiting 5 s for a server out of reach
RESOLV_CONF = "nameserver 127.0.0.1\noptions timeout:1 attempts:1\n"


#: what a lab path's tbf can be asked for: 1 Mbit/s to 1 Tbit/s (a 400G site's own path fits)
MIN_RATE_BPS = 10**6
MAX_RATE_BPS = 10**12


@dataclass
class PathSpec:
    """What a path looks like.  Rates in bit/s, delays in ms, loss as a probability."""

    rtt_ms: float = 50.0
    rate_bps: int | None = None
    loss: float = 0.0
    queue_bytes: int | None = None  # None: the bandwidth-delay product
    mtu: int = 1500
    n_src: int = 1
    n_dst: int = 1
    backend: str = "auto"
    seed: int = 1
    src_rate_bps: int | None = None  # the sending hosts' own interface rate (a tbf)

    def validate(self) -> None:
        if not 0 <= self.rtt_ms <= 2000:
            raise BadInput(
                f"RTT {self.rtt_ms:g} ms is out of range",
                "allowed: 0 to 2000 ms",
                "give --rtt between 0ms and 2000ms",
            )
        if self.rate_bps is not None and not MIN_RATE_BPS <= self.rate_bps <= MAX_RATE_BPS:
            raise BadInput(
                f"rate {_limit(self.rate_bps)} is out of range",
                "allowed: 1 Mbit/s to 1 Tbit/s",
                "e.g. --rate 2gbit",
            )
        if self.src_rate_bps is not None and not (
            MIN_RATE_BPS <= self.src_rate_bps <= MAX_RATE_BPS
        ):
            raise BadInput(
                f"source rate {_limit(self.src_rate_bps)} is out of range",
                "allowed: 1 Mbit/s to 1 Tbit/s",
                "e.g. --src-rate 1gbit",
            )
        if not 0 <= self.loss <= 0.5:
            raise BadInput(
                f"loss {self.loss:g} is out of range", "allowed: 0 to 50%", "e.g. --loss 0.01%"
            )
        if not 576 <= self.mtu <= 65535:
            raise BadInput(
                f"MTU {self.mtu} is out of range", "allowed: 576 to 65535", "e.g. --mtu 9000"
            )
        for side, n in (("src", self.n_src), ("dst", self.n_dst)):
            if not 1 <= n <= MAX_HOSTS_PER_SIDE:
                raise BadInput(
                    f"{n} {side} hosts is out of range",
                    f"allowed: 1 to {MAX_HOSTS_PER_SIDE}",
                    f"e.g. --{side} 4",
                )
        if self.backend not in ("auto", "netem", "nfqueue"):
            raise BadInput(
                f"unknown backend {self.backend!r}",
                "backends: auto, netem, nfqueue",
                "pick one with --backend",
            )

    @property
    def one_way_ms(self) -> float:
        return self.rtt_ms / 2

    def queue_size(self) -> int:
        """The bottleneck FIFO in bytes: given, or one bandwidth-delay product (>= 512 KiB)."""
        if self.queue_bytes:
            return self.queue_bytes
        if not self.rate_bps:
            return 0
        return max(int(self.rate_bps / 8 * max(self.rtt_ms, 1.0) / 1000), MIN_QUEUE)


@dataclass
class LabHost:
    name: str  # src, dst, src1, ...
    side: str  # src | dst
    netns: str
    address: str
    mid_dev: str  # its veth in the middle namespace

    def argv(self, argv: Sequence[str]) -> list[str]:
        return ["ip", "netns", "exec", self.netns, *argv]

    def run(
        self,
        argv: Sequence[str],
        *,
        check: bool = True,
        timeout: float | None = 120,
        input: str | None = None,
    ) -> process.CompletedProcess[str]:
        """Run a command inside this host's namespace and wait for it."""
        proc = process.run(self.argv(argv), timeout=timeout, input=input)
        if check and proc.returncode != 0:
            raise DtnkitError(
                f"`{' '.join(argv)}` failed on {self.name}",
                (proc.stderr or proc.stdout).strip()[-500:],
            )
        return proc

    def popen(self, argv: Sequence[str], **kwargs: Any) -> process.Child[str]:
        """Start a command (a server) inside this namespace, in a process group of its own
        (``process.start``'s options; stdout and stderr piped unless given); the path stops
        it at teardown."""
        kwargs.setdefault("stdout", process.PIPE)
        kwargs.setdefault("stderr", process.PIPE)
        return process.start(self.argv(argv), text=True, own_group=True, **kwargs)


@dataclass
class LabState:
    name: str
    spec: PathSpec
    index: int
    octets: tuple[int, int]
    backend: str = ""
    backend_reason: str = ""
    namespaces: list[str] = field(default_factory=list)
    hosts: list[LabHost] = field(default_factory=list)
    emulator_pid: int | None = None
    created: float = field(default_factory=time.time)
    status: str = "building"

    def as_dict(self) -> dict[str, Any]:
        doc = asdict(self)
        doc["schema"] = "dtnkit.lab/1"
        return doc

    @classmethod
    def from_dict(cls, doc: dict[str, Any]) -> LabState:
        if doc.get("schema") != "dtnkit.lab/1":
            raise BadInput(
                "lab state has another schema",
                str(doc.get("schema")),
                "run `dtnkit lab down --all`",
            )
        return cls(
            name=doc["name"],
            spec=PathSpec(**doc["spec"]),
            index=int(doc["index"]),
            octets=(int(doc["octets"][0]), int(doc["octets"][1])),
            backend=doc["backend"],
            backend_reason=doc["backend_reason"],
            namespaces=list(doc["namespaces"]),
            hosts=[LabHost(**h) for h in doc["hosts"]],
            emulator_pid=doc.get("emulator_pid"),
            created=float(doc["created"]),
            status=doc.get("status", "?"),
        )


def state_dir(name: str, state_root: Path) -> Path:
    return state_root / name


class Run(Protocol):
    """How a path runs ``ip``/``tc``/``iptables``: :func:`run_command`, or a test's recorder."""

    def __call__(
        self, argv: Sequence[str], *, check: bool = True
    ) -> process.CompletedProcess[str]: ...


def run_command(argv: Sequence[str], *, check: bool = True) -> process.CompletedProcess[str]:
    proc = process.run(argv, timeout=60)
    if check and proc.returncode != 0:
        raise DtnkitError(f"`{' '.join(argv)}` failed", (proc.stderr or proc.stdout).strip())
    return proc


# ---- backends --------------------------------------------------------------------------------
def _config_value(symbol: str) -> str | None:
    config = Host.live().kernel_config()
    return None if config is None else config.get(symbol, "n")


def available_backends() -> dict[str, str | None]:
    """Each backend -> None when usable, else why not."""
    out: dict[str, str | None] = {}
    netem = _config_value("CONFIG_NET_SCH_NETEM")
    if Path("/sys/module/sch_netem").exists() or netem == "y":
        out["netem"] = None
    elif netem == "m":
        out["netem"] = None  # modular: tc loads it
    elif netem is None:
        out["netem"] = "cannot read the kernel config to tell whether netem exists"
    else:
        out["netem"] = "the kernel has no netem qdisc (CONFIG_NET_SCH_NETEM is not set)"
    nfq = _config_value("CONFIG_NETFILTER_NETLINK_QUEUE")
    target = _config_value("CONFIG_NETFILTER_XT_TARGET_NFQUEUE")
    if shutil.which("iptables") is None:
        out["nfqueue"] = "iptables is not installed (apt-get install iptables)"
    elif nfq == "n" or target == "n":
        out["nfqueue"] = (
            "the kernel has no NFQUEUE (CONFIG_NETFILTER_NETLINK_QUEUE / "
            "CONFIG_NETFILTER_XT_TARGET_NFQUEUE)"
        )
    else:
        out["nfqueue"] = None
    return out


def choose_backend(requested: str) -> tuple[str, str]:
    avail = available_backends()
    if requested != "auto":
        why = avail.get(requested)
        if why is not None:
            tool = "iptables" if "iptables" in why else ""
            err = ToolMissing if tool else BadInput
            raise err(
                f"backend {requested} cannot run here",
                why,
                "install what it needs, or use --backend auto",
            )
        return requested, "forced with --backend"
    if avail["netem"] is None:
        return "netem", "the kernel has netem"
    if avail["nfqueue"] is None:
        return (
            "nfqueue",
            f"{avail['netem']}; NFQUEUE and iptables are available, so dtnkit's "
            "userspace delay stage holds the path",
        )
    raise ToolMissing(
        "no path backend can run here",
        f"netem: {avail['netem']}; nfqueue: {avail['nfqueue']}",
        "install iptables (apt-get install iptables), or use a kernel with netem",
    )


# ---- building --------------------------------------------------------------------------------
def _used_networks() -> list[ipaddress.IPv4Network]:
    nets: list[ipaddress.IPv4Network] = []
    for argv in (["ip", "-j", "-4", "addr"], ["ip", "-j", "-4", "route"]):
        proc = run_command(argv, check=False)
        try:
            doc = json.loads(proc.stdout or "[]")
        except json.JSONDecodeError:
            continue
        for item in doc:
            for info in item.get("addr_info", []):
                nets.append(
                    ipaddress.IPv4Network(f"{info['local']}/{info['prefixlen']}", strict=False)
                )
            dst = item.get("dst")
            if dst and dst != "default":
                nets.append(ipaddress.IPv4Network(dst if "/" in dst else f"{dst}/32", strict=False))
    return nets


def _choose_octets() -> tuple[int, int]:
    used = _used_networks()
    for a, b in SUBNET_CANDIDATES:
        mine = [ipaddress.IPv4Network(f"10.{a}.0.0/16"), ipaddress.IPv4Network(f"10.{b}.0.0/16")]
        if not any(m.overlaps(u) for m in mine for u in used):
            return a, b
    raise DtnkitError(
        "no free private range for lab paths",
        "10.221-252.x.x all overlap this host's addresses or routes",
        "remove a conflicting route",
    )


def _states(state_root: Path) -> list[LabState]:
    out: list[LabState] = []
    if not state_root.is_dir():
        return out
    for d in sorted(state_root.iterdir()):
        with contextlib.suppress(OSError, ValueError, KeyError, TypeError, BadInput):
            out.append(LabState.from_dict(json.loads((d / "state.json").read_text())))
    return out


@contextlib.contextmanager
def _lock(state_root: Path) -> Iterator[None]:
    state_root.mkdir(parents=True, exist_ok=True)
    with open(state_root / ".lock", "a+") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        yield


def _save(state: LabState, state_root: Path) -> None:
    d = state_dir(state.name, state_root)
    d.mkdir(parents=True, exist_ok=True)
    tmp = d / ".state.json.tmp"
    tmp.write_text(json.dumps(state.as_dict(), indent=2))
    os.replace(tmp, d / "state.json")


def _require_root() -> None:
    if os.geteuid() != 0:
        raise NeedsRoot(
            "dtnkit lab needs root", "it creates network namespaces and devices", "run it with sudo"
        )
    if shutil.which("ip") is None:
        raise ToolMissing(
            "`ip` is not installed", "lab paths are built with iproute2", "apt-get install iproute2"
        )


def check_name(name: str) -> None:
    if not _NAME.match(name):
        raise BadInput(
            f"bad lab name {name!r}",
            "names are 1-12 lower-case letters and digits, starting with a letter",
            "e.g. dtnkit lab up demo",
        )


def plan(name: str, spec: PathSpec, index: int, octets: tuple[int, int]) -> LabState:
    state = LabState(name, spec, index, octets)
    mid = f"{NS_PREFIX}{name}-path"
    state.namespaces = [mid]
    for side, n, octet in (("src", spec.n_src, octets[0]), ("dst", spec.n_dst, octets[1])):
        for k in range(1, n + 1):
            host = side if n == 1 else f"{side}{k}"
            ns = f"{NS_PREFIX}{name}-{host}"
            state.namespaces.append(ns)
            state.hosts.append(
                LabHost(host, side, ns, f"10.{octet}.{index}.{k + 1}", f"dk{side[0]}{k}")
            )
    return state


class LabPath:
    """A built path.  Use :func:`path` (context manager) or :func:`up` / :func:`down`.

    ``run`` runs the path's ``ip``/``tc``/``iptables`` commands (a test passes a recorder).
    """

    def __init__(self, state: LabState, *, state_root: Path, run: Run = run_command) -> None:
        self.state = state
        self.state_root = state_root
        self.run = run

    def _ns(self, ns: str, *argv: str, check: bool = True) -> None:
        self.run(["ip", "netns", "exec", ns, *argv], check=check)

    @property
    def dir(self) -> Path:
        return state_dir(self.name, self.state_root)

    # ---- names -------------------------------------------------------------------------------
    @property
    def name(self) -> str:
        return self.state.name

    @property
    def spec(self) -> PathSpec:
        return self.state.spec

    @property
    def mid(self) -> str:
        return self.state.namespaces[0]

    @property
    def hosts(self) -> list[LabHost]:
        return self.state.hosts

    def host(self, name: str) -> LabHost:
        for h in self.hosts:
            if h.name == name:
                return h
        raise BadInput(
            f"no host {name!r} on lab path {self.name}",
            f"hosts: {', '.join(h.name for h in self.hosts)}",
            "pick one of those",
        )

    @property
    def src(self) -> LabHost:
        return next(h for h in self.hosts if h.side == "src")

    @property
    def dst(self) -> LabHost:
        return next(h for h in self.hosts if h.side == "dst")

    def side_dev(self, side: str) -> str:
        """The middle's device toward a side: its bridge, or the one veth."""
        hosts = [h for h in self.hosts if h.side == side]
        return f"dkb{side[0]}" if len(hosts) > 1 else hosts[0].mid_dev

    def gateway(self, side: str) -> str:
        octet = self.state.octets[0 if side == "src" else 1]
        return f"10.{octet}.{self.state.index}.1"

    @property
    def config_path(self) -> Path:
        return self.dir / "emulator.json"

    @property
    def stats_path(self) -> Path:
        return self.dir / "emulator-stats.json"

    def hostname(self, host: LabHost) -> str:
        """The host's name in every namespace of the path: ``HOST.NAME.lab``."""
        return f"{host.name}.{self.name}.{DOMAIN}"

    def names(self) -> list[tuple[str, str]]:
        """(address, name) of every host of the path and of the middle's two sides."""
        out = [(h.address, self.hostname(h)) for h in self.hosts]
        return out + [
            (self.gateway(side), f"path-{side}.{self.name}.{DOMAIN}") for side in ("src", "dst")
        ]

    def _write_names(self) -> None:
        """hosts and resolv.conf for every namespace of the path, under /etc/netns/NS/: the
        machine's own hosts file (localhost, its name) and the path's hosts after it."""
        marker = _marker(self.name)
        base = ""
        with contextlib.suppress(OSError):
            base = Path("/etc/hosts").read_text()
        block = "".join(f"{addr}\t{name}\n" for addr, name in self.names())
        files = {
            "hosts": f"{base.rstrip()}\n\n{marker}\n{block}",
            "resolv.conf": f"{marker}\n{RESOLV_CONF}",
        }
        for ns in self.state.namespaces:
            d = ETC_NETNS / ns
            d.mkdir(parents=True, exist_ok=True)
            for fname, text in files.items():
                target = d / fname
                if target.exists() and marker not in target.read_text(errors="replace"):
                    raise DtnkitError(
                        f"cannot give lab path {self.name} its host names",
                        f"{target} exists and was not written by dtnkit",
                        "remove or rename it, or pick another lab name",
                    )
                tmp = d / f".{fname}.dtnkit-tmp"
                tmp.write_text(text)
                tmp.chmod(0o644)
                os.replace(tmp, target)

    # ---- build -------------------------------------------------------------------------------
    def _build(self, progress: Progress = SILENT) -> None:
        spec = self.spec
        progress.step(f"namespaces ({len(self.state.namespaces)})", 1, 3)
        for ns in self.state.namespaces:
            self.run(["ip", "netns", "add", ns])
            self.run(["ip", "-n", ns, "link", "set", "lo", "up"])
        self._write_names()
        Host.live(self.mid).write("/proc/sys/net/ipv4/ip_forward", "1")
        progress.step("links, addresses and routes", 2, 3)
        for side in ("src", "dst"):
            hosts = [h for h in self.hosts if h.side == side]
            dev = self.side_dev(side)
            if len(hosts) > 1:
                self.run(["ip", "-n", self.mid, "link", "add", dev, "type", "bridge"])
            for h in hosts:
                self.run(
                    [
                        "ip",
                        "-n",
                        self.mid,
                        "link",
                        "add",
                        h.mid_dev,
                        "mtu",
                        str(spec.mtu),
                        "type",
                        "veth",
                        "peer",
                        "name",
                        LINK_DEV,
                        "mtu",
                        str(spec.mtu),
                        "netns",
                        h.netns,
                    ]
                )
                if len(hosts) > 1:
                    self.run(["ip", "-n", self.mid, "link", "set", h.mid_dev, "master", dev])
                self.run(["ip", "-n", self.mid, "link", "set", h.mid_dev, "up"])
                self.run(["ip", "-n", h.netns, "addr", "add", f"{h.address}/24", "dev", LINK_DEV])
                self.run(["ip", "-n", h.netns, "link", "set", LINK_DEV, "up"])
                self.run(
                    ["ip", "-n", h.netns, "route", "add", "default", "via", self.gateway(side)]
                )
            if len(hosts) > 1:
                self.run(["ip", "-n", self.mid, "link", "set", dev, "mtu", str(spec.mtu), "up"])
            self.run(["ip", "-n", self.mid, "addr", "add", f"{self.gateway(side)}/24", "dev", dev])
        progress.step(f"path emulation ({self.state.backend})", 3, 3)
        self._cap_sources()
        self._apply_path(initial=True)

    def _cap_sources(self) -> None:
        """--src-rate: the sending hosts' own interface is the limit (a NIC at line rate): a tbf
        root on their LINK_DEV, queueing in the host as a full NIC does, not on the path."""
        rate = self.spec.src_rate_bps
        if not rate:
            return
        burst = max(int(rate / 8 * 0.004), 2 * 65536)  # one 4 ms tick, two GSO segments
        for h in self.hosts:
            if h.side == "src":
                self.run(
                    [
                        "tc",
                        "-n",
                        h.netns,
                        "qdisc",
                        "replace",
                        "dev",
                        LINK_DEV,
                        "root",
                        "tbf",
                        "rate",
                        f"{rate}bit",
                        "burst",
                        str(burst),
                        "latency",
                        "50ms",
                    ]
                )

    def _apply_path(self, *, initial: bool = False) -> None:
        if self.state.backend == "netem":
            self._netem()
        else:
            self._shape(lambda dev: ["bfifo", "limit", str(self.spec.queue_size())])
            self._nfqueue(initial)

    def _shape(self, leaf: Any) -> None:
        """htb rate cap with a byte-limited FIFO on both of the middle's side devices."""
        rate = self.spec.rate_bps
        for side in ("src", "dst"):
            dev = self.side_dev(side)
            self.run(["tc", "-n", self.mid, "qdisc", "del", "dev", dev, "root"], check=False)
            if not rate:
                continue
            # an explicit burst: htb's computed default shapes badly at Gbit/s (lab.md);
            # one 4 ms timer tick (HZ=250) of tokens, at least two 64 KiB GSO segments
            burst = max(int(rate / 8 * 0.004), 2 * 65536)
            self.run(
                [
                    "tc",
                    "-n",
                    self.mid,
                    "qdisc",
                    "add",
                    "dev",
                    dev,
                    "root",
                    "handle",
                    "1:",
                    "htb",
                    "default",
                    "1",
                ]
            )
            self.run(
                [
                    "tc",
                    "-n",
                    self.mid,
                    "class",
                    "add",
                    "dev",
                    dev,
                    "parent",
                    "1:",
                    "classid",
                    "1:1",
                    "htb",
                    "rate",
                    f"{rate}bit",
                    "ceil",
                    f"{rate}bit",
                    "burst",
                    str(burst),
                    "cburst",
                    str(burst),
                ]
            )
            self.run(
                [
                    "tc",
                    "-n",
                    self.mid,
                    "qdisc",
                    "add",
                    "dev",
                    dev,
                    "parent",
                    "1:1",
                    "handle",
                    "10:",
                    *leaf(dev),
                ]
            )

    def _netem(self) -> None:
        spec = self.spec

        def leaf(dev: str) -> list[str]:
            args = ["netem", "delay", f"{spec.one_way_ms}ms", "limit", "1000000"]
            if spec.loss and dev == self.side_dev("dst"):
                args += ["loss", f"{spec.loss * 100:g}%"]
            return args

        if spec.rate_bps:
            self._shape(leaf)
        else:
            for side in ("src", "dst"):
                dev = self.side_dev(side)
                self.run(["tc", "-n", self.mid, "qdisc", "replace", "dev", dev, "root", *leaf(dev)])

    def _nfqueue(self, initial: bool) -> None:
        config = {
            "queues": {
                "0": {"delay_ms": self.spec.one_way_ms, "loss": self.spec.loss},
                "1": {"delay_ms": self.spec.one_way_ms, "loss": 0.0},
            },
            "seed": self.spec.seed,
        }
        tmp = self.config_path.with_suffix(".tmp")
        tmp.write_text(json.dumps(config))
        os.replace(tmp, self.config_path)
        if not initial:
            if self.state.emulator_pid:
                process.signal_pid(self.state.emulator_pid, signal.SIGHUP, is_ours=_alive)
            return
        log = open(self.dir / "emulator.log", "w")  # noqa: SIM115 - child keeps it
        # it outlives this process (`lab up` returns): stopped by PID at `lab down`
        proc = process.start(
            [
                "ip",
                "netns",
                "exec",
                self.mid,
                sys.executable,
                "-m",
                "dtnkit.lab.nfqdelay",
                "--config",
                str(self.config_path),
                "--stats",
                str(self.stats_path),
            ],
            stdout=log,
            stderr=process.STDOUT,
            own_group=True,
            env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
        )
        log.close()
        self.state.emulator_pid = proc.pid
        _save(self.state, self.state_root)
        self._wait_ready(proc)
        for qnum, side in ((0, "src"), (1, "dst")):
            self._ns(
                self.mid,
                "iptables",
                "-w",
                "-A",
                "FORWARD",
                "-i",
                self.side_dev(side),
                "-j",
                "NFQUEUE",
                "--queue-num",
                str(qnum),
            )

    def _wait_ready(self, proc: process.Child[bytes]) -> None:
        """The engine writes its stats file once it has bound its queues."""
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                log = (self.dir / "emulator.log").read_text()[-800:]
                raise DtnkitError(
                    "the delay stage did not start", log.strip() or f"exit status {proc.returncode}"
                )
            if self.stats_path.exists():
                return
            time.sleep(0.02)  # polling a readiness file, bounded by the deadline
        raise DtnkitError(
            "the delay stage did not start within 10 s",
            "its stats file never appeared",
            "see emulator.log in the state dir",
        )

    # ---- change in place -----------------------------------------------------------------------
    def set(
        self,
        *,
        rtt_ms: float | None = None,
        rate_bps: int | None = None,
        loss: float | None = None,
        queue_bytes: int | None = None,
    ) -> None:
        """Change the path's parameters between runs, without rebuilding it."""
        spec = self.spec
        new = PathSpec(
            **{
                **asdict(spec),
                **{
                    k: v
                    for k, v in (
                        ("rtt_ms", rtt_ms),
                        ("rate_bps", rate_bps),
                        ("loss", loss),
                        ("queue_bytes", queue_bytes),
                    )
                    if v is not None
                },
            }
        )
        new.validate()
        self.state.spec = new
        _save(self.state, self.state_root)
        if self.state.backend == "netem":
            self._netem()
            return
        if (
            rate_bps is not None
            or queue_bytes is not None
            or (rtt_ms is not None and not spec.queue_bytes)
        ):
            self._shape(lambda dev: ["bfifo", "limit", str(new.queue_size())])
        self._nfqueue(initial=False)
        if rtt_ms is not None or loss is not None:
            self._wait_config(new)

    def _wait_config(self, spec: PathSpec) -> None:
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            stats = self.emulator_stats()
            q = (stats or {}).get("config", {}).get("queues", {}).get("0", {})
            if q.get("delay_ms") == spec.one_way_ms and q.get("loss") == spec.loss:
                return
            time.sleep(0.02)  # polling the engine's own report, bounded
        raise DtnkitError(
            "the delay stage did not take the new parameters",
            "its stats still show the old ones",
            "see emulator.log",
        )

    # ---- report --------------------------------------------------------------------------------
    def emulator_stats(self, *, fresh: bool = False) -> dict[str, Any] | None:
        """The delay stage's own report; ``fresh``: one written after this call began."""
        since = time.time()
        deadline = time.monotonic() + 3
        while True:
            try:
                doc: dict[str, Any] = json.loads(self.stats_path.read_text())
            except (OSError, json.JSONDecodeError):
                doc = {}
            if not fresh or float(doc.get("updated", 0)) > since:
                return doc or None
            if time.monotonic() > deadline:
                return doc or None
            time.sleep(0.05)  # the engine rewrites its report twice a second; bounded wait

    def measure_rtt(self, count: int = 5) -> dict[str, float] | None:
        """Idle RTT from the first src to the first dst host (ping), after one unmeasured
        warm-up ping so neighbour (ARP) resolution is not counted."""
        self.src.run(
            ["ping", "-q", "-n", "-c", "1", "-W", "3", self.dst.address], check=False, timeout=10
        )
        proc = self.src.run(
            ["ping", "-q", "-n", "-c", str(count), "-i", "0.2", "-W", "3", self.dst.address],
            check=False,
            timeout=30,
        )
        m = re.search(r"= ([0-9.]+)/([0-9.]+)/([0-9.]+)/([0-9.]+) ms", proc.stdout)
        if not m:
            return None
        return {
            "min_ms": float(m.group(1)),
            "avg_ms": float(m.group(2)),
            "max_ms": float(m.group(3)),
            "mdev_ms": float(m.group(4)),
        }

    def counters(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for side in ("src", "dst"):
            dev = self.side_dev(side)
            proc = self.run(
                ["tc", "-n", self.mid, "-s", "-j", "qdisc", "show", "dev", dev], check=False
            )
            try:
                qdiscs = json.loads(proc.stdout or "[]")
            except json.JSONDecodeError:
                qdiscs = []
            out[f"toward_{side}"] = [
                {
                    k: q.get(k)
                    for k in (
                        "kind",
                        "handle",
                        "bytes",
                        "packets",
                        "drops",
                        "overlimits",
                        "backlog",
                        "qlen",
                    )
                }
                for q in qdiscs
            ]
        return out

    def status(self, *, measure: bool = True) -> dict[str, Any]:
        st = self.state
        emulator: dict[str, Any] = {"kind": st.backend}
        if st.backend == "nfqueue":
            stats = self.emulator_stats() or {}
            emulator.update(
                {
                    "pid": st.emulator_pid,
                    "alive": bool(st.emulator_pid and _alive(st.emulator_pid)),
                    **{
                        k: stats.get(k)
                        for k in (
                            "cpu_percent",
                            "lateness_ms",
                            "queues",
                            "enobufs",
                            "config_errors",
                            "updated",
                        )
                    },
                    **{k: stats.get(k) for k in ("cpu_thread_max_percent", "engine", "sched")},
                }
            )
        doc: dict[str, Any] = {
            "name": st.name,
            "backend": st.backend,
            "backend_reason": st.backend_reason,
            "status": st.status,
            "rtt_ms": st.spec.rtt_ms,
            "rate_bps": st.spec.rate_bps,
            "src_rate_bps": st.spec.src_rate_bps,
            "loss": st.spec.loss,
            "queue_bytes": st.spec.queue_size() or None,
            "mtu": st.spec.mtu,
            "middle_netns": self.mid,
            "hosts": [
                {
                    "name": h.name,
                    "side": h.side,
                    "netns": h.netns,
                    "address": h.address,
                    "hostname": self.hostname(h),
                }
                for h in st.hosts
            ],
            "emulator": emulator,
            "counters": self.counters(),
        }
        if measure:
            doc["measured"] = self.measure_rtt()
        return doc

    # ---- teardown ------------------------------------------------------------------------------
    def down(self) -> list[str]:
        return _teardown(self.name, self.state, self.state_root)


def _alive(pid: int) -> bool:
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False
    return b"dtnkit.lab.nfqdelay" in cmdline


def _stop(pid: int) -> None:
    """SIGTERM, then SIGKILL after 3 s; only a process that is ours (checked by cmdline)."""
    process.stop_pid(pid, 3.0, is_ours=_alive)


def _marker(name: str) -> str:
    return f"# dtnkit lab {name}: removed by `dtnkit lab down {name}`"


def _remove_names(name: str, namespaces: set[str]) -> None:
    """Remove the hosts and resolv.conf the lab wrote under /etc/netns (only files that carry
    its marker) and the namespace's directory there if nothing else is left in it."""
    prefix = f"{NS_PREFIX}{name}-"
    dirs = {ETC_NETNS / ns for ns in namespaces}
    with contextlib.suppress(OSError):
        dirs |= {d for d in ETC_NETNS.iterdir() if d.name.startswith(prefix)}
    marker = _marker(name)
    for d in dirs:
        for fname in ("hosts", "resolv.conf", ".hosts.dtnkit-tmp", ".resolv.conf.dtnkit-tmp"):
            f = d / fname
            with contextlib.suppress(OSError):
                if fname.startswith(".") or marker in f.read_text(errors="replace"):
                    f.unlink()
        with contextlib.suppress(OSError):
            d.rmdir()  # only when empty: an admin's own files stay


def _netns_list() -> list[str]:
    proc = run_command(["ip", "netns", "list"], check=False)
    return [line.split()[0] for line in proc.stdout.splitlines() if line.strip()]


def _teardown(name: str, state: LabState | None, state_root: Path) -> list[str]:
    """Remove everything of lab path NAME: processes, namespaces (with their devices and
    iptables rules), state.  Works from partial or missing state."""
    removed: list[str] = []
    if state is not None and state.emulator_pid:
        _stop(state.emulator_pid)
    prefix = f"{NS_PREFIX}{name}-"
    names = set(state.namespaces if state else []) | {
        n for n in _netns_list() if n.startswith(prefix)
    }
    for ns in sorted(names):
        pids = run_command(["ip", "netns", "pids", ns], check=False).stdout.split()
        process.stop_pids([int(p) for p in pids if p.isdigit()], 0)
        if run_command(["ip", "netns", "del", ns], check=False).returncode == 0:
            removed.append(ns)
    _remove_names(name, names)
    shutil.rmtree(state_dir(name, state_root), ignore_errors=True)
    return removed


# ---- public API --------------------------------------------------------------------------------
def up(name: str, spec: PathSpec, *, state_root: Path, progress: Progress = SILENT) -> LabPath:
    """Build a path; on any failure remove what was built and re-raise."""
    _require_root()
    check_name(name)
    spec.validate()
    backend, reason = choose_backend(spec.backend)
    with _lock(state_root):
        if state_dir(name, state_root).exists() or any(
            n.startswith(f"{NS_PREFIX}{name}-") for n in _netns_list()
        ):
            raise BadInput(
                f"lab path {name!r} already exists",
                "names are unique",
                f"pick another name, or `dtnkit lab down {name}` first",
            )
        used = {s.index for s in _states(state_root)}
        index = next(i for i in range(256) if i not in used)
        state = plan(name, spec, index, _choose_octets())
        state.backend, state.backend_reason = backend, reason
        _save(state, state_root)  # before anything exists: down can always clean up
    lab = LabPath(state, state_root=state_root)
    try:
        lab._build(progress)
        state.status = "up"
        _save(state, state_root)
    except BaseException:
        _teardown(name, state, state_root)
        raise
    return lab


def load(name: str, *, state_root: Path) -> LabPath:
    check_name(name)
    path = state_dir(name, state_root) / "state.json"
    if not path.exists():
        raise BadInput(
            f"no lab path {name!r}", "see `dtnkit lab list`", "or build it with `dtnkit lab up`"
        )
    try:
        return LabPath(LabState.from_dict(json.loads(path.read_text())), state_root=state_root)
    except (json.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
        raise BadInput(
            f"lab state of {name!r} is damaged",
            str(exc),
            f"`dtnkit lab down {name}` removes what is left",
        ) from exc


def down(name: str, *, state_root: Path, missing_ok: bool = False) -> list[str]:
    """Remove path NAME; a name with neither state nor namespaces is bad input unless
    ``missing_ok``."""
    _require_root()
    check_name(name)
    if (
        not missing_ok
        and not state_dir(name, state_root).exists()
        and not any(n.startswith(f"{NS_PREFIX}{name}-") for n in _netns_list())
    ):
        raise BadInput(
            f"no lab path {name!r}",
            "it has no state and no namespaces",
            "see `dtnkit lab list`, or add --missing-ok",
        )
    state: LabState | None
    try:
        state = load(name, state_root=state_root).state
    except BadInput:
        state = None
    return _teardown(name, state, state_root)


def check_prefix(prefix: str) -> None:
    """A name prefix for ``down_all``: the start of a valid path name."""
    if not _NAME.match(prefix):
        raise BadInput(
            f"bad lab name prefix {prefix!r}",
            "path names are 1-12 lower-case letters and digits, starting with a letter",
            "give the start of the names to remove, e.g. --prefix t",
        )


def down_all(*, state_root: Path, prefix: str = "") -> list[str]:
    """Remove every lab path (state and ``dkl-*`` namespaces), or only those whose name starts
    with ``prefix``."""
    _require_root()
    if prefix:
        check_prefix(prefix)
    names = {s.name for s in _states(state_root)}
    if state_root.is_dir():
        names |= {d.name for d in state_root.iterdir() if d.is_dir() and _NAME.match(d.name)}
    names |= {
        n[len(NS_PREFIX) :].rsplit("-", 1)[0] for n in _netns_list() if n.startswith(NS_PREFIX)
    }
    with contextlib.suppress(OSError):  # name files left by a crash between build steps
        names |= {
            d.name[len(NS_PREFIX) :].rsplit("-", 1)[0]
            for d in ETC_NETNS.iterdir()
            if d.name.startswith(NS_PREFIX) and "-" in d.name[len(NS_PREFIX) :]
        }
    removed: list[str] = []
    for name in sorted(n for n in names if n.startswith(prefix)):
        state = None
        with contextlib.suppress(BadInput):
            state = load(name, state_root=state_root).state
        removed += _teardown(name, state, state_root)
    return removed


def list_paths(*, state_root: Path) -> list[dict[str, Any]]:
    return [
        {
            "name": s.name,
            "backend": s.backend,
            "status": s.status,
            "rtt_ms": s.spec.rtt_ms,
            "rate_bps": s.spec.rate_bps,
            "loss": s.spec.loss,
            "hosts": [h.name for h in s.hosts],
        }
        for s in _states(state_root)
    ]


def lab_peers(state_root: Path) -> LabPeers:
    """``NAME/HOST`` peers of the network probe: the lab host's address and namespace (the
    probe starts its own iperf3 server there)."""

    def peer(name: str, host: str) -> Peer:
        target = load(name, state_root=state_root).host(host)
        return Peer(target.address, target.netns, True, f"lab {name}/{host}")

    return peer


@contextlib.contextmanager
def path(name: str | None = None, *, state_root: Path, **spec: Any) -> Iterator[LabPath]:
    """Build a path for the duration of a ``with`` block; it is always torn down."""
    name = name or f"t{secrets.token_hex(4)}"
    lab = up(name, PathSpec(**spec), state_root=state_root)
    try:
        yield lab
    finally:
        _teardown(name, lab.state, state_root)
