"""bench/bench_cp_wan.py --before TREE with --only upload: the before tree's uploads (its
client into its own ``dtnkit serve``) run next to this tree's, interleaved, so a change of
the client or of the server's receive path is measured against the old one in the same run."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest
from tests.support.wanbench import loaded


@pytest.fixture
def bench() -> Iterator[ModuleType]:
    with loaded("bench_cp_wan_s22u") as module:
        yield module


def test_before_uploads_run_next_to_this_trees(bench: ModuleType, tmp_path: Path) -> None:
    bench.BEFORE.append(tmp_path)
    names = bench.order("auto", None)
    goals = bench.targets("auto", None)
    kept = bench.only(names, ["upload"], goals)
    assert kept == ["iperf3 8", "cp auto dtnkit", "iperf3 auto", "upload auto",
                    "upload auto before", "iperf3 1", "cp 1 dtnkit", "upload 1",
                    "upload 1 before"]
    pairs = {(g.measured, g.baseline) for g in goals}
    assert ("upload auto", "upload auto before") in pairs
    assert ("upload 1 before", "cp 1 dtnkit") in pairs


def test_no_before_uploads_without_before(bench: ModuleType) -> None:
    assert not [n for n in bench.order("auto", None) if "before" in n]
