"""bench/bench_cp_wan.py --only: the upload cells and the downloads they are judged
against, without the rest of the table (gfal-copy, xrdcp, curl, TPC)."""

from __future__ import annotations

from collections.abc import Iterator
from types import ModuleType

import pytest
from tests.support.wanbench import loaded


@pytest.fixture(scope="module")
def bench() -> Iterator[ModuleType]:
    with loaded("bench_cp_wan_s19u") as module:
        yield module


def test_only_upload_keeps_the_uploads_and_their_baselines(bench: ModuleType) -> None:
    names = bench.order("auto", None)
    goals = bench.targets("auto", None)
    kept = bench.only(names, ["upload"], goals)
    # and the iperf3 runs, the floor under every time target (session 23)
    assert kept == ["iperf3 8", "cp auto dtnkit", "iperf3 auto", "upload auto", "iperf3 1",
                    "cp 1 dtnkit", "upload 1"]
    assert bench.only(names, [], goals) == names  # no --only: everything
    assert bench.only(names, ["tpc dtnkit 1"], goals) == ["iperf3 8", "iperf3 1",
                                                          "tpc dtnkit 1", "tpc XRootD 1"]


def test_only_is_parsed_from_a_comma_list(bench: ModuleType) -> None:
    args = bench.parse_args(["--only", "upload, tpc", "--paths", "50ms/1gbit"])
    assert args.only == ["upload", "tpc"]
    assert bench.parse_args([]).only == []
