"""Several real SSH hosts on one machine, for the fleet tests and `python -m bench fleet`.

The hosts are the end hosts of one dtnkit lab path (src/dtnkit/lab/path.py) with ``pairs``
hosts on each side: namespaces ``dkl-NAME-src1``, ``dkl-NAME-dst1``, ... (NAME starts with the
caller's prefix), each with its own address, routed through the path's middle namespace,
which holds the RTT and the rate cap.  The pairs src1 -> dst1, src2 -> dst2 ... cross the
path, so a probe between them sees a WAN-like path and a tuning group can change throughput.
Nothing is added to the root namespace: the middle's bridges live in the middle namespace.

Every host runs its own ``/usr/sbin/sshd`` (started here, kept by PID) listening on the
host's own address, with a host key made here; one client key made here logs in as root.
The controller (the root namespace has no route into the lab) reaches each host through
``ProxyCommand ip netns exec NS nc ADDRESS 22``.  Each host gets its own ``ansible_host``
(its address), so Ansible's ControlPath, which hashes host-port-user, is distinct per host,
and the ControlPath directory is the test's own (its masters are stopped at close).

The hosts share one filesystem: each gets its own ``dtnkit_state_dir``.  Close kills only
the sshd PIDs started here and what runs in the path's own namespaces, and removes only the
path's own namespaces.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dtnkit.lab import path as labpath

# PyYAML (a test dependency) has no type stubs in the venv
yaml: Any = importlib.import_module("yaml")

SSHD = "/usr/sbin/sshd"
SSH_KEYGEN = "ssh-keygen"
REPO = Path(__file__).resolve().parents[2]
#: the collection's parent directory (ANSIBLE_COLLECTIONS_PATH): the repository's, or another
#: copy's ($DTNKIT_TEST_COLLECTIONS, e.g. an installed release's)
COLLECTIONS = Path(os.environ.get("DTNKIT_TEST_COLLECTIONS") or REPO / "ansible")
#: host-global values a campaign inside namespaces must never change (read in the root
#: namespace): per-namespace keys read there are the root namespace's own values
HOST_GLOBAL = (
    "net/core/rmem_max",
    "net/core/wmem_max",
    "net/core/netdev_max_backlog",
    "net/core/default_qdisc",
    "net/ipv4/tcp_rmem",
    "net/ipv4/tcp_wmem",
    "net/ipv4/tcp_mem",
    "vm/swappiness",
    "vm/min_free_kbytes",
    "vm/dirty_ratio",
    "kernel/sched_autogroup_enabled",
)


def missing() -> str | None:
    """Why the SSH hosts cannot run here (None: they can)."""
    if os.geteuid() != 0:
        return "needs root (network namespaces, sshd)"
    for tool, pkg in (
        (SSHD, "openssh-server"),
        ("ssh", "openssh-client"),
        (SSH_KEYGEN, "openssh-client"),
        ("nc", "netcat-openbsd"),
        ("ip", "iproute2"),
    ):
        if shutil.which(tool) is None:
            return f"needs {tool} (apt-get install {pkg})"
    return None


def missing_ansible() -> str | None:
    """Why ansible-playbook cannot run here (None: it can)."""
    if importlib.util.find_spec("ansible") is None:
        return "needs ansible-core in the test venv (pip install -e '.[test]')"
    if not (bindir() / "ansible-playbook").exists():
        return f"needs ansible-playbook next to {sys.executable}"
    return None


def missing_collection(part: str = "playbooks") -> str | None:
    """Why the dtn.dtnkit collection's ``part`` (playbooks, plugins/modules) cannot run here
    (None: it can)."""
    where = COLLECTIONS / "ansible_collections" / "dtn" / "dtnkit" / part
    if not where.is_dir():
        return f"needs the dtn.dtnkit collection ({where} is absent)"
    return None


def bindir() -> Path:
    """The test venv's bin directory (ansible-playbook and dtnkit live there)."""
    return Path(sys.executable).parent


@dataclass
class SshHost:
    """One host: a lab end host with its own sshd."""

    name: str  # inventory name: the lab host's name (src1, dst1, ...)
    netns: str
    address: str
    state_dir: Path
    dir: Path  # its sshd config, host key, pid file and log
    sshd: subprocess.Popen[bytes] | None = None

    @property
    def sshd_pid(self) -> int | None:
        return self.sshd.pid if self.sshd else None

    def run(
        self, argv: Sequence[str], *, check: bool = True, timeout: float = 120
    ) -> subprocess.CompletedProcess[str]:
        """Run a command in this host's namespace (not over SSH)."""
        proc = subprocess.run(
            ["ip", "netns", "exec", self.netns, *argv],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        if check and proc.returncode != 0:
            raise AssertionError(
                f"{' '.join(argv)} on {self.name}: rc {proc.returncode}: "
                f"{(proc.stderr or proc.stdout).strip()[-600:]}"
            )
        return proc

    def sysctl(self, key: str) -> str:
        """A value as this host sees it (``net.ipv4.tcp_rmem`` or ``net/ipv4/tcp_rmem``)."""
        return self.run(["cat", "/proc/sys/" + key.replace(".", "/")]).stdout.strip()


@dataclass
class SshHosts:
    """The hosts, their keys and the files a controller needs (see :func:`ssh_hosts`)."""

    base: Path
    lab: labpath.LabPath
    hosts: list[SshHost]
    client_key: Path
    known_hosts: Path
    control_dir: Path
    dtnkit_path: Path

    def host(self, name: str) -> SshHost:
        for h in self.hosts:
            if h.name == name:
                return h
        raise KeyError(name)

    @property
    def pairs(self) -> list[tuple[SshHost, SshHost]]:
        """(client, server) pairs across the path: src1 -> dst1, src2 -> dst2, ..."""
        src = [h for h in self.hosts if h.name.startswith("src")]
        dst = [h for h in self.hosts if h.name.startswith("dst")]
        return list(zip(src, dst, strict=True))

    # ---- sshd --------------------------------------------------------------------------------
    def start_sshd(self, host: SshHost, *, timeout: float = 20) -> None:
        """Start the host's sshd and wait until it listens (its own log says so)."""
        log = host.dir / "sshd.log"
        log.write_bytes(b"")
        with open(log, "ab") as out:
            host.sshd = subprocess.Popen(
                [
                    "ip",
                    "netns",
                    "exec",
                    host.netns,
                    SSHD,
                    "-D",
                    "-e",
                    "-f",
                    str(host.dir / "sshd_config"),
                ],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=out,
                start_new_session=True,
            )
        deadline = time.monotonic() + timeout
        while b"Server listening" not in log.read_bytes():
            if host.sshd.poll() is not None:
                raise AssertionError(
                    f"sshd of {host.name} exited {host.sshd.returncode}: "
                    f"{log.read_text(errors='replace')[-600:]}"
                )
            if time.monotonic() > deadline:
                raise AssertionError(f"sshd of {host.name} did not listen within {timeout} s")
            time.sleep(0.02)  # polling sshd's own log for its readiness line, bounded

    def kill_host(self, host: SshHost) -> list[int]:
        """The host fails: its sshd (by the PID started here) and every process in its own
        namespace (its SSH sessions and the ProxyCommand of any master) are killed."""
        killed: list[int] = []
        if host.sshd is not None and host.sshd.poll() is None:
            host.sshd.kill()
            host.sshd.wait()
            killed.append(host.sshd.pid)
        pids = subprocess.run(
            ["ip", "netns", "pids", host.netns], capture_output=True, text=True, check=False
        ).stdout.split()
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, ValueError):
                os.kill(int(pid), signal.SIGKILL)
                killed.append(int(pid))
        return killed

    def stop_masters(self) -> None:
        """Stop the ControlPersist masters whose sockets are in this run's own directory."""
        if not self.control_dir.is_dir():
            return
        for sock in self.control_dir.iterdir():
            subprocess.run(
                ["ssh", "-o", f"ControlPath={sock}", "-O", "exit", "dummy"],
                capture_output=True,
                check=False,
                timeout=10,
            )

    # ---- the controller's files ------------------------------------------------------------
    def ssh_args(self, host: SshHost) -> str:
        return (
            f'-o ProxyCommand="ip netns exec {host.netns} nc %h %p" '
            f"-o UserKnownHostsFile={self.known_hosts} -o StrictHostKeyChecking=yes"
        )

    def inventory(
        self,
        path: Path,
        *,
        db: str | None = None,
        hosts: Sequence[str] | None = None,
        host_vars: Mapping[str, Mapping[str, Any]] | None = None,
        all_vars: Mapping[str, Any] | None = None,
        groups: Mapping[str, Sequence[str]] | None = None,
    ) -> Path:
        """Write a YAML inventory of (some of) the hosts.

        Every host: ansible_host (its own address: a distinct ControlPath), the ProxyCommand
        into its namespace, dtnkit_state_dir (its own), dtnkit_db (``db`` or a SQLite file
        of its own), dtnkit_path (this venv's dtnkit).  Groups: ``clients`` (src*),
        ``servers`` (dst*) and ``groups`` given; each client's ``dtnkit_peer`` is its server.
        """
        chosen = [self.host(n) for n in hosts] if hosts else list(self.hosts)
        peers = {c.name: s.name for c, s in self.pairs}
        out_hosts: dict[str, Any] = {}
        for h in chosen:
            hv: dict[str, Any] = {
                "ansible_host": h.address,
                "ansible_ssh_common_args": self.ssh_args(h),
                "dtnkit_state_dir": str(h.state_dir),
                "dtnkit_db": db or str(h.state_dir / "results.sqlite"),
                "dtnkit_netns": h.netns,
            }
            if h.name in peers and (not hosts or peers[h.name] in hosts):
                hv["dtnkit_peer"] = peers[h.name]
            hv.update((host_vars or {}).get(h.name, {}))
            out_hosts[h.name] = hv
        names = set(out_hosts)
        children: dict[str, Any] = {
            "clients": {"hosts": {n: None for n in out_hosts if n.startswith("src")}},
            "servers": {"hosts": {n: None for n in out_hosts if n.startswith("dst")}},
        }
        for group, members in (groups or {}).items():
            children[group] = {"hosts": {n: None for n in members if n in names}}
        doc = {
            "all": {
                "vars": {
                    "ansible_user": "root",
                    "ansible_ssh_private_key_file": str(self.client_key),
                    "ansible_python_interpreter": "/usr/bin/python3",
                    "dtnkit_path": str(self.dtnkit_path),
                    **(all_vars or {}),
                },
                "hosts": out_hosts,
                "children": {k: v for k, v in children.items() if v["hosts"]},
            }
        }
        path.write_text(yaml.safe_dump(doc, sort_keys=False, width=200))
        return path

    def ansible_cfg(self) -> Path:
        """ansible.cfg of this run: its own ControlPath directory, local temp dir and
        collections path; no retry files."""
        cfg = self.base / "ansible.cfg"
        cfg.write_text(
            "[defaults]\n"
            f"collections_path = {COLLECTIONS}\n"
            f"local_tmp = {self.base / 'ansible-local'}\n"
            "retry_files_enabled = False\n"
            "host_key_checking = True\n"
            "interpreter_python = /usr/bin/python3\n"
            "[ssh_connection]\n"
            f"control_path_dir = {self.control_dir}\n"
            "ssh_args = -C -o ControlMaster=auto -o ControlPersist=60s\n"
            "pipelining = True\n"
        )
        return cfg

    def env(self, **more: str) -> dict[str, str]:
        """The environment for ansible/ansible-playbook run by the test."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("ANSIBLE_")}
        env.update(
            {
                "ANSIBLE_CONFIG": str(self.ansible_cfg()),
                "ANSIBLE_COLLECTIONS_PATH": str(COLLECTIONS),
                "ANSIBLE_NOCOLOR": "1",
                "ANSIBLE_FORCE_COLOR": "0",
                "PATH": f"{bindir()}:{env.get('PATH', '/usr/bin:/bin')}",
                "HOME": env.get("HOME", "/root"),
            }
        )
        env.update(more)
        return env

    def ansible(
        self,
        inventory: Path,
        *args: str,
        timeout: float = 180,
        env: Mapping[str, str] | None = None,
    ) -> subprocess.CompletedProcess[str]:
        """``ansible -i INVENTORY ARGS`` (ad-hoc)."""
        return subprocess.run(
            [str(bindir() / "ansible"), "-i", str(inventory), *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
            env={**self.env(), **(env or {})},
            cwd=self.base,
        )

    def playbook(
        self,
        inventory: Path,
        playbook: str,
        *args: str,
        timeout: float = 300,
        env: Mapping[str, str] | None = None,
    ) -> subprocess.CompletedProcess[str]:
        """``ansible-playbook -i INVENTORY PLAYBOOK ARGS``."""
        return subprocess.run(
            [str(bindir() / "ansible-playbook"), "-i", str(inventory), playbook, *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
            env={**self.env(), **(env or {})},
            cwd=self.base,
        )

    def dtnkit(
        self, host: SshHost, *args: str, check: bool = True
    ) -> subprocess.CompletedProcess[str]:
        """dtnkit run directly in a host's namespace with its state dir (not over SSH)."""
        return host.run([str(self.dtnkit_path), *args], check=check)

    def audit(self, host: SshHost, *args: str) -> dict[str, Any]:
        """The host's audit document (exit 3, not compliant, is not an error)."""
        proc = self.dtnkit(host, "tune", "audit", "--format", "json", *args, check=False)
        assert proc.returncode in (0, 3), proc.stderr
        doc: dict[str, Any] = json.loads(proc.stdout)
        return doc

    # ---- teardown ----------------------------------------------------------------------------
    def close(self) -> None:
        self.stop_masters()
        for h in self.hosts:
            if h.sshd is not None and h.sshd.poll() is None:
                h.sshd.terminate()
                try:
                    h.sshd.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    h.sshd.kill()
                    h.sshd.wait()
        # the path's teardown kills what is left in its own namespaces and removes them
        self.lab.down()


def host_global() -> dict[str, str]:
    """The root namespace's view of :data:`HOST_GLOBAL` (keys this kernel lacks left out)."""
    out: dict[str, str] = {}
    for key in HOST_GLOBAL:
        with contextlib.suppress(OSError):
            out[key] = Path("/proc/sys", key).read_text().strip()
    return out


def _keygen(path: Path) -> None:
    subprocess.run(
        [SSH_KEYGEN, "-q", "-t", "ed25519", "-N", "", "-C", path.name, "-f", str(path)],
        check=True,
        capture_output=True,
    )


SSHD_CONFIG = """\
Port 22
ListenAddress {address}
HostKey {host_key}
PidFile {dir}/sshd.pid
AuthorizedKeysFile {authorized}
PermitRootLogin prohibit-password
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
UseDNS no
MaxStartups 50
MaxSessions 50
LogLevel INFO
Subsystem sftp /usr/lib/openssh/sftp-server
"""


@contextlib.contextmanager
def ssh_hosts(
    base: Path,
    *,
    prefix: str,
    pairs: int = 2,
    rtt_ms: float = 20.0,
    rate_bps: int | None = 200_000_000,
    dtnkit_path: Path | None = None,
) -> Iterator[SshHosts]:
    """``2 x pairs`` SSH hosts across one lab path (RTT ``rtt_ms``, rate cap ``rate_bps``);
    everything lives under ``base`` and is removed at exit.  ``prefix`` starts the lab path's
    name (a few random hex digits follow), so its namespaces are ``dkl-PREFIXxxxx-*``."""
    why = missing()
    if why:
        raise RuntimeError(why)
    base.mkdir(parents=True, exist_ok=True)
    name = f"{prefix}{os.urandom(3).hex()}"[:12]
    Path("/run/sshd").mkdir(parents=True, exist_ok=True)  # sshd's privilege-separation dir
    control = base / "cp"
    control.mkdir(exist_ok=True)
    lab = labpath.up(
        name,
        labpath.PathSpec(rtt_ms=rtt_ms, rate_bps=rate_bps, n_src=pairs, n_dst=pairs),
        state_root=base / "lab",
    )
    client_key = base / "id_ed25519"
    hosts: list[SshHost] = []
    run = SshHosts(
        base,
        lab,
        hosts,
        client_key,
        base / "known_hosts",
        control,
        dtnkit_path or bindir() / "dtnkit",
    )
    try:
        _keygen(client_key)
        authorized = base / "authorized_keys"
        shutil.copy(client_key.with_suffix(".pub"), authorized)
        known: list[str] = []
        for lh in sorted(lab.hosts, key=lambda h: (h.name[3:], h.side != "src")):
            d = base / "hosts" / lh.name
            d.mkdir(parents=True)
            key = d / "ssh_host_ed25519_key"
            _keygen(key)
            (d / "sshd_config").write_text(
                SSHD_CONFIG.format(address=lh.address, host_key=key, dir=d, authorized=authorized)
            )
            subprocess.run(
                [SSHD, "-t", "-f", str(d / "sshd_config")], check=True, capture_output=True
            )
            pub = key.with_suffix(".pub").read_text().split()
            known.append(f"{lh.address} {pub[0]} {pub[1]}")
            state = base / "state" / lh.name
            state.mkdir(parents=True)
            hosts.append(SshHost(lh.name, lh.netns, lh.address, state, d))
        run.known_hosts.write_text("\n".join(known) + "\n")
        for h in hosts:
            run.start_sshd(h)
        yield run
    finally:
        run.close()
