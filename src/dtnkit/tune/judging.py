"""What a host is judged by, and where: one record that ``tune audit``, ``tune apply``,
``checklist``, ``diagnose``, ``experiment`` and the exporter build once from the same flags
(``--profile``, ``--profile-dir``, ``--rtt``, ``--speed``, ``--iface``, ``--exact``, and the
scope: ``--netns`` or ``--tree``), and the command lines their hints print from it.

A hint that names a command carries the scope and the judging flags in force, so pasted it
acts where the run looked and judges as the run judged: ``dtnkit tune apply --dry-run --netns
NS --rtt 50ms``, ``ip netns exec NS sysctl -w ...``; for a captured tree it says so (the tree
cannot be changed by pasting a shell command: it gives the host's command and the dtnkit
command with ``--tree``).
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from dtnkit.host.host import Host
from dtnkit.tune.audit import Audit, run_audit
from dtnkit.tune.profile import USER_PROFILE_DIR, Profile, load_profile
from dtnkit.tune.validation import check_profile

DEFAULT_PROFILE = "dtn"
DEFAULT_RTT_MS = 100.0


def speed_flag(mbps: int) -> str:
    """``--speed``'s value for ``mbps`` as the flag reads it back: ``10gbit``, ``2500mbit``."""
    return f"{mbps // 1000}gbit" if mbps % 1000 == 0 else f"{mbps}mbit"


def rtt_flag(rtt_ms: float) -> str:
    return f"{rtt_ms:g}ms"


@dataclass(frozen=True, slots=True)
class Judging:
    """The profile, RTT, link speed and interfaces a host is judged by, and where it is."""

    profile: str = DEFAULT_PROFILE
    profile_dirs: tuple[Path, ...] = ()
    rtt_ms: float = DEFAULT_RTT_MS
    speed_mbps: int | None = None
    ifaces: tuple[str, ...] = ()
    exact: bool = False
    netns: str | None = None
    tree: Path | None = None

    # ---- judging ------------------------------------------------------------------------
    def load_profile(self) -> Profile:
        """The profile, loaded and checked (user profiles from ``--profile-dir``, else
        /etc/dtnkit/profiles)."""
        prof = load_profile(self.profile, self.profile_dirs or (USER_PROFILE_DIR,))
        check_profile(prof)
        return prof

    def audit(self, host: Host, profile: Profile, groups: Sequence[str] = ()) -> Audit:
        """The audit of ``host`` by this judging (``profile``: :meth:`load_profile`'s)."""
        return run_audit(
            host,
            profile,
            groups=groups,
            rtt_ms=self.rtt_ms,
            ifaces=self.ifaces,
            exact=self.exact,
            speed_mbps=self.speed_mbps,
        )

    # ---- hints --------------------------------------------------------------------------
    @property
    def where(self) -> str:
        """The scope as people read it: ``host``, ``netns NS``, ``tree DIR``."""
        if self.tree is not None:
            return f"tree {self.tree}"
        return f"netns {self.netns}" if self.netns else "host"

    def scope_flags(self) -> list[str]:
        if self.tree is not None:
            return ["--tree", str(self.tree)]
        return ["--netns", self.netns] if self.netns else []

    def judging_flags(self, *, rtt: bool = True, ifaces: bool = True) -> list[str]:
        """The judging flags in force (those that differ from the defaults), in one order."""
        out: list[str] = []
        if self.profile != DEFAULT_PROFILE:
            out += ["--profile", self.profile]
        for d in self.profile_dirs:
            out += ["--profile-dir", str(d)]
        if rtt and self.rtt_ms != DEFAULT_RTT_MS:
            out += ["--rtt", rtt_flag(self.rtt_ms)]
        if self.speed_mbps is not None:
            out += ["--speed", speed_flag(self.speed_mbps)]
        if ifaces:
            for name in self.ifaces:
                out += ["--iface", name]
        if self.exact:
            out.append("--exact")
        return out

    def flags(self, *, scope: bool = True, rtt: bool = True, ifaces: bool = True) -> list[str]:
        """Scope then judging flags, as a pasted dtnkit command needs them."""
        return [*(self.scope_flags() if scope else []), *self.judging_flags(rtt=rtt, ifaces=ifaces)]

    def command(
        self,
        *words: str,
        scope: bool = True,
        rtt: bool = True,
        ifaces: bool = True,
        extra: Sequence[str] = (),
    ) -> str:
        """``dtnkit WORDS... [scope] [judging flags] [extra]``, quoted for a shell."""
        return shlex.join(
            ["dtnkit", *words, *self.flags(scope=scope, rtt=rtt, ifaces=ifaces), *extra]
        )

    def shell(self, cmd: str, dtnkit: str = "") -> str:
        """A shell command ``cmd`` as it must be typed to act on this scope: as is on the
        host, under ``ip netns exec NS`` in a namespace; a captured tree cannot be changed by
        it, so the text says where to run it (and ``dtnkit``, a dtnkit command with --tree
        that reads the tree, when there is one)."""
        if self.tree is not None:
            here = f"; here: {dtnkit}" if dtnkit else ""
            return (
                f"{shlex.quote(str(self.tree))} is a captured tree: on the host it was "
                f"captured from, {cmd}{here}"
            )
        if self.netns:
            return f"ip netns exec {shlex.quote(self.netns)} {cmd}"
        return cmd
