"""Two real hosts for the dtn.dtnkit collection's tests: network namespaces ``ans…a`` and
``ans…b`` joined by a veth pair (10.231.0.1 <-> 10.231.0.2, a -> b capped by a tbf), each
with a ``dtnkit_path`` wrapper that runs the real dtnkit inside it (``exec ip netns exec NS
dtnkit "$@"``): a module run on this machine tunes the namespace, never the host."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
COLLECTIONS = REPO / "ansible"
COLLECTION = COLLECTIONS / "ansible_collections" / "dtn" / "dtnkit"
MODULES = COLLECTION / "plugins" / "modules"
BIN = Path(sys.executable).parent
DTNKIT = BIN / "dtnkit"


def missing_ansible() -> str | None:
    try:
        import ansible  # noqa: F401
    except ImportError:
        return "needs ansible-core in the test venv (pip install -e '.[test]')"
    if not (BIN / "ansible").exists():
        return f"needs the ansible command next to {sys.executable}"
    return None


def sh(*argv: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, check=check, timeout=120)


def ansible_env() -> dict[str, str]:
    return {
        **os.environ,
        "ANSIBLE_COLLECTIONS_PATH": str(COLLECTIONS),
        "PYTHONPATH": str(COLLECTIONS),
        "ANSIBLE_NOCOLOR": "1",
        "ANSIBLE_LOCALHOST_WARNING": "False",
        "ANSIBLE_INVENTORY_UNPARSED_WARNING": "False",
        "ANSIBLE_PYTHON_INTERPRETER": sys.executable,
        "PATH": f"{BIN}:{os.environ.get('PATH', '/usr/bin:/bin')}",
    }


@dataclass
class Host:
    name: str  # inventory name
    netns: str
    address: str
    dtnkit_path: Path  # the wrapper
    state_dir: Path

    def dtnkit(self, *argv: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return sh("ip", "netns", "exec", self.netns, str(DTNKIT), *argv, check=check)

    def sysctl(self, key: str) -> str:
        return sh(
            "ip", "netns", "exec", self.netns, "cat", "/proc/sys/" + key.replace(".", "/")
        ).stdout.strip()

    def set_sysctl(self, key: str, value: str) -> None:
        sh(
            "ip",
            "netns",
            "exec",
            self.netns,
            "sh",
            "-c",
            f"echo '{value}' > /proc/sys/{key.replace('.', '/')}",
        )

    def values(self) -> dict[str, Any]:
        """Every live value dtnkit can restore here (its own `tune save`, in a scratch dir)."""
        scratch = self.state_dir.parent / f"values-{uuid.uuid4().hex[:6]}"
        doc = json.loads(
            self.dtnkit("tune", "save", "--state-dir", str(scratch), "--format", "json").stdout
        )
        snap = json.loads(Path(doc["path"]).read_text())
        shutil.rmtree(scratch)
        values: dict[str, Any] = snap["values"]
        return values


@dataclass
class Pair:
    a: Host
    b: Host
    base: Path

    def inventory(self, path: Path, **host_vars: dict[str, Any]) -> Path:
        hosts = {}
        for h in (self.a, self.b):
            hosts[h.name] = {
                "dtnkit_path": str(h.dtnkit_path),
                "dtnkit_state_dir": str(h.state_dir),
                "dtnkit_probe_address": h.address,
                "dtnkit_db": str(h.state_dir / "results.sqlite"),
                **host_vars.get(h.name, {}),
            }
        hosts[self.a.name]["dtnkit_peer"] = self.b.name
        doc = {
            "all": {
                "vars": {
                    "ansible_connection": "local",
                    "ansible_python_interpreter": sys.executable,
                },
                "hosts": hosts,
            }
        }
        path.write_text(json.dumps(doc))
        return path


def wrapper(path: Path, netns: str, log: Path | None = None) -> Path:
    """The host's dtnkit_path; with ``log``, each run's arguments are appended to it first
    (one line a run: what a test counts)."""
    record = f'echo "$*" >> {log}\n' if log else ""
    path.write_text(f'#!/bin/sh\n{record}exec ip netns exec {netns} {DTNKIT} "$@"\n')
    path.chmod(0o755)
    return path


@contextmanager
def pair(base: Path, rate: str = "500mbit", prefix: str = "ans") -> Iterator[Pair]:
    """The two hosts; what a sends to b is capped at ``rate`` (a tbf), far below the veth's
    10 Gbit/s, so a probe's baseline leaves headroom and the gate lets groups through.
    Namespaces and veths are named PREFIX + 6 hex digits + a/b, va/vb."""
    tag = prefix + uuid.uuid4().hex[:6]
    names = (f"{tag}a", f"{tag}b")
    hosts = []
    try:
        for n in names:
            sh("ip", "netns", "add", n)
            sh("ip", "-n", n, "link", "set", "lo", "up")
        sh(
            "ip",
            "link",
            "add",
            f"{tag}va",
            "netns",
            names[0],
            "type",
            "veth",
            "peer",
            "name",
            f"{tag}vb",
            "netns",
            names[1],
        )
        for i, (n, side) in enumerate(zip(names, "ab", strict=True)):
            dev = f"{tag}v{side}"
            sh("ip", "-n", n, "addr", "add", f"10.231.0.{i + 1}/24", "dev", dev)
            sh("ip", "-n", n, "link", "set", dev, "up")
            state = base / f"state-{side}"
            state.mkdir(parents=True)
            hosts.append(
                Host(
                    f"ans-{side}",
                    n,
                    f"10.231.0.{i + 1}",
                    wrapper(base / f"dtnkit-{side}", n),
                    state,
                )
            )
        sh(
            "tc",
            "-n",
            names[0],
            "qdisc",
            "add",
            "dev",
            f"{tag}va",
            "root",
            "tbf",
            "rate",
            rate,
            "burst",
            "256kb",
            "latency",
            "50ms",
        )
        yield Pair(hosts[0], hosts[1], base)
    finally:
        for n in names:
            sh("ip", "netns", "del", n, check=False)


def run_module(
    name: str, args: dict[str, Any], where: Path, *, check: bool = False, diff: bool = False
) -> dict[str, Any]:
    """Run a module directly (``python plugins/modules/NAME.py ARGS.json``) as Ansible runs it
    on a host; return its JSON (a failure is JSON too, with ``failed``)."""
    args_file = where / f"args-{name}-{uuid.uuid4().hex[:6]}.json"
    args_file.write_text(
        json.dumps(
            {"ANSIBLE_MODULE_ARGS": {**args, "_ansible_check_mode": check, "_ansible_diff": diff}}
        )
    )
    proc = subprocess.run(
        [sys.executable, str(MODULES / f"{name}.py"), str(args_file)],
        capture_output=True,
        text=True,
        timeout=120,
        env=ansible_env(),
    )
    assert "Traceback" not in proc.stdout + proc.stderr, proc.stdout + proc.stderr
    doc: dict[str, Any] = json.loads(proc.stdout)
    assert (proc.returncode != 0) == bool(doc.get("failed")), (proc.returncode, doc)
    return doc
