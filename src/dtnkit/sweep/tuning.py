"""A tuning profile on both ends of a point: each end a lab namespace; a snapshot of each
before, the profile applied (``dtnkit tune apply``'s transaction), and the snapshot put back
after, also when the point fails or the sweep is interrupted.  The snapshots live apart
from ``tune apply``'s (an experiment's store, :class:`ExperimentSnapshots`): they never
become the "last baseline" of a later ``dtnkit tune restore``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from functools import partial
from pathlib import Path
from typing import Any

from dtnkit.diagnose.experiment import ExperimentSnapshots
from dtnkit.errors import DtnkitError
from dtnkit.host.host import Host
from dtnkit.tune import apply
from dtnkit.tune.audit import build_context, run_audit
from dtnkit.tune.profile import load_profile


@contextlib.contextmanager
def applied(
    profile_name: str, namespaces: Sequence[str], state_dir: Path, store_id: str, *, rtt_ms: float
) -> Iterator[None]:
    """Apply ``profile_name`` in each namespace for the ``with`` block; restore after."""
    profile = load_profile(profile_name)
    snaps = ExperimentSnapshots(state_dir, store_id)
    baselines: list[tuple[Host, str]] = []
    try:
        for ns in namespaces:
            host = Host.live(ns)
            out = apply.apply(
                host,
                partial(run_audit, profile=profile, rtt_ms=rtt_ms),
                snaps,
                label=f"{store_id} {profile_name}",
            )
            if out.baseline:
                baselines.append((host, out.baseline))
            if not out.ok:
                raise out.error or DtnkitError(f"profile {profile_name} was not applied")
        yield
    finally:
        errors: list[str] = []
        for host, snap_id in reversed(baselines):
            ctx = build_context(host, profile, rtt_ms=rtt_ms)
            back = apply.restore(host, snaps.load(snap_id), snaps, ctx)
            if back.ok:
                snaps.remove(snap_id)
            else:
                errors.append(f"{host.label}: {back.error}")
        snaps.remove_dir()
        if errors:
            raise DtnkitError(
                "a profile was not restored",
                "; ".join(errors),
                f"see the snapshots under {snaps.dir}",
            )


def live(netns: str) -> dict[str, Any] | None:
    """The tuning live in a namespace (what ``tune save`` would store); None if unreadable."""
    try:
        return apply.live_values(Host.live(netns, read_only=True))
    except DtnkitError:
        return None
