"""Whether this machine can give a sweep's origins a CPU quota (shared by the sweep tests)."""

from __future__ import annotations

import os

import pytest

from dtnkit.sweep import cgroups


def cgroup_reason() -> str | None:
    """Why CPU quotas cannot be tested here, or None when they can."""
    if os.geteuid() != 0:
        return "needs root"
    try:
        cgroups.detect()
    except cgroups.CgroupUnavailable as exc:
        return exc.render()
    return None


needs_cgroups = pytest.mark.skipif(bool(cgroup_reason()), reason=str(cgroup_reason()))
