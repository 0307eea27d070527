"""The WAN case's pure parts: its verdicts (against the wire and the practical floor), every
target measured, the order of a round and what ``--only`` and ``--base`` add to it."""

from __future__ import annotations

import pytest
from bench.cases import wan
from bench.lib.stats import round_order
from bench.lib.wan.report import FLOOR, Floor, Target, practical_floor, recorded_by, verdict


def test_verdicts() -> None:
    t = Target("a", "b", 0.5, "")
    assert verdict({"a": [1.0, 9.0, 2.0], "b": [4.0]}, t) == ("0.50", "met")
    assert verdict({"a": [2.1], "b": [4.0]}, t) == ("0.53", "not met")
    assert verdict({"a": [2.1]}, t) == ("-", "no data")
    assert verdict({"a": [1.0], "b": [2.0]}, Target("a", "b", None, "")) == (
        "0.50",
        "(information)",
    )
    # a target asking for less than the wire floor says so; one above it is a plain miss
    assert verdict({"a": [3.0], "b": [4.0]}, t, 2.15) == (
        "0.75",
        "not met: asks 2.000 s < wire floor 2.150 s",
    )
    assert verdict({"a": [3.0], "b": [5.0]}, t, 2.15) == ("0.60", "not met")
    assert verdict({"a": [2.0], "b": [4.0]}, t, 2.15) == ("0.50", "met")


def test_a_verdict_names_the_highest_floor_the_ask_is_under() -> None:
    t = Target("a", "b", 0.5, "")
    floor = Floor("8", 2.58, 0.0505)  # 2.7315 s
    # under the wire floor (the lower one): the wire-floor wording
    assert verdict({"a": [3.0], "b": [4.0]}, t, 2.15, floor) == (
        "0.75",
        "not met: asks 2.000 s < wire floor 2.150 s",
    )
    # above the wire floor, under the practical one: physically out of reach, and how we know
    assert verdict({"a": [3.0], "b": [5.0]}, t, 2.15, floor) == (
        "0.60",
        "not met: asks 2.500 s < practical floor 2.732 s (iperf3 -P 8 data phase 2.580 s + 3 RTT)",
    )
    assert verdict({"a": [3.0], "b": [5.0]}, t, None, floor)[1].startswith(
        "not met: asks 2.500 s < practical floor"
    )
    # above both: a plain miss; within the target: met, floors or not
    assert verdict({"a": [3.0], "b": [5.6]}, t, 2.15, floor) == ("0.54", "not met")
    assert verdict({"a": [2.0], "b": [5.0]}, t, 2.15, floor) == ("0.40", "met")
    # without a practical floor nothing changes
    assert verdict({"a": [3.0], "b": [5.0]}, t, 2.15) == ("0.60", "not met")
    # information rows stay information
    assert verdict({"a": [9.0], "b": [1.0]}, Target("a", "b", None, ""), 2.15, floor) == (
        "9.00",
        "(information)",
    )


def test_the_practical_floor_is_the_best_iperf3_median_plus_three_round_trips() -> None:
    times = {
        "iperf3 1": [4.3, 4.2, 4.1],
        "iperf3 1 wall": [0.1],  # a wall time is no floor
        "iperf3 8": [2.7, 2.5, 2.6],
        "iperf3 8 wall": [0.2],
        "cp 1 XRootD": [0.3],
    }
    floor = practical_floor(times, 50.0)
    assert floor is not None
    assert (floor.streams, floor.data_s, floor.rtt_s) == ("8", 2.6, 0.05)
    assert floor.seconds == pytest.approx(2.75)
    only8 = practical_floor({"iperf3 8": [2.6]}, 10.0)
    assert only8 is not None and only8.seconds == pytest.approx(2.63)
    # no iperf3 run that succeeded, or no RTT: no floor (the verdicts fall back)
    assert practical_floor({"iperf3 8": [], "cp 1 XRootD": [3.0]}, 50.0) is None
    assert practical_floor(times, None) is None
    assert practical_floor(times, float("nan")) is None
    # "iperf3 auto" ran with the streams cp auto used; the floor names that count
    auto = {**times, "iperf3 auto": [2.4, 2.45]}
    four = practical_floor(auto, 50.0, {"iperf3 auto": [4, 4]})
    assert four is not None and four.streams == "4"
    mixed = practical_floor(auto, 50.0, {"iperf3 auto": [4, 5]})
    assert mixed is not None and mixed.streams == "4/5"
    # the same -P twice (auto used 8): the better median counts
    same = practical_floor({"iperf3 8": [2.5], "iperf3 auto": [2.7]}, 50.0, {"iperf3 auto": [8]})
    assert same is not None and same.data_s == 2.5


def test_every_target_is_measured_and_rounds_alternate() -> None:
    for many, default in (("8", None), ("auto", None), ("auto", "4")):
        for base in (False, True):
            names = wan.order(many, default, base)
            assert len(set(names)) == len(names)
            assert set(names) <= set(wan.catalogue(many, default, base))
            for t in wan.targets(many, default, "REF" if base else None):
                # a derived figure (copy phase) is measured by its column's run; the floor
                # by the iperf3 runs
                made = {recorded_by(t.measured), recorded_by(t.baseline)} - {FLOOR}
                assert made <= set(names), t
                if t.baseline == FLOOR:
                    assert {"iperf3 1", "iperf3 8"} <= set(names)
            assert round_order(names, 0) == names
            assert round_order(names, 1) == names[::-1]
    goals = {(t.measured, t.baseline): t.limit for t in wan.targets("auto", None)}
    # against the path's floor, which no tool can beat; gfal-copy and xrdcp for information
    assert goals[("cp auto XRootD", FLOOR)] == 1.05
    assert goals[("cp auto dtnkit", FLOOR)] == 1.05
    assert goals[("cp auto XRootD", "gfal-copy -K adler32")] is None
    assert goals[("cp auto XRootD", "xrdcp -S 8")] is None
    assert goals[("cp 1 XRootD", "curl XRootD")] == 1.05
    assert goals[("upload auto", "cp auto dtnkit")] == 1.05
    assert goals[("tpc dtnkit 8", "tpc XRootD 8")] == 1.0


def test_a_floor_target_is_judged_against_the_floor() -> None:
    t = Target("cp auto XRootD", FLOOR, 1.05, "")
    times = {"cp auto XRootD": [2.8, 2.9, 2.7], FLOOR: [2.75]}
    assert verdict(times, t) == ("1.02", "met")
    assert verdict({**times, "cp auto XRootD": [3.0]}, t) == ("1.09", "not met")


def test_iperf3_runs_with_every_time_target_and_alone_when_asked() -> None:
    names = wan.order("auto", None)
    goals = wan.targets("auto", None)
    assert {"iperf3 1", "iperf3 8"} <= set(names)
    every = wan.only(names, [], goals)
    assert every == names
    # interleaved like any measurement: in the round, reversed every other round
    assert round_order(every, 1) == every[::-1]
    iperf = ["iperf3 8", "iperf3 1"]
    assert wan.only(names, ["iperf3"], goals) == iperf  # auto: no cp auto to count from
    for starts in (["upload"], ["cp auto"]):  # "iperf3 auto" follows the cp auto run
        picked = wan.only(names, starts, goals)
        assert [n for n in picked if n.startswith("iperf3")] == [
            "iperf3 8",
            "iperf3 auto",
            "iperf3 1",
        ], starts
        first = next(i for i, n in enumerate(picked) if n.startswith("cp auto "))
        assert picked.index("iperf3 auto") == first + 1
    for starts in (["cp 1", "curl"], ["tpc"]):
        picked = wan.only(names, starts, goals)
        assert [n for n in picked if n.startswith("iperf3")] == iperf, starts
    assert "iperf3 auto" not in wan.order("8", None)  # a dtnkit without --streams auto
    # a selection judged by no time target (a baseline alone) gets no floor runs
    assert wan.only(names, ["xrdcp --cksum"], goals) == ["xrdcp --cksum adler32:source"]
    # cp's copy phase is recorded by the cp run, judged against curl's wall time and against
    # curl's own time inside the tool
    copy = [t for t in goals if t.measured.endswith(" copy phase")]
    assert {(recorded_by(t.measured), t.baseline, t.limit) for t in copy} == {
        ("cp 1 XRootD", "curl XRootD", None),
        ("cp 1 dtnkit", "curl dtnkit", None),
        ("cp 1 XRootD", "curl XRootD copy phase", None),
        ("cp 1 dtnkit", "curl dtnkit copy phase", None),
    }
    assert recorded_by("iperf3 8 wall") == "iperf3 8"
    assert recorded_by("cp auto XRootD") == "cp auto XRootD"


def test_only_upload_keeps_the_uploads_and_their_baselines() -> None:
    names = wan.order("auto", None)
    goals = wan.targets("auto", None)
    kept = wan.only(names, ["upload"], goals)
    # and the iperf3 runs, the floor under every time target
    assert kept == [
        "iperf3 8",
        "cp auto dtnkit",
        "iperf3 auto",
        "upload auto",
        "iperf3 1",
        "cp 1 dtnkit",
        "upload 1",
    ]
    assert wan.only(names, [], goals) == names  # no --only: everything
    assert wan.only(names, ["tpc dtnkit 1"], goals) == [
        "iperf3 8",
        "iperf3 1",
        "tpc dtnkit 1",
        "tpc XRootD 1",
    ]


def test_only_is_parsed_from_a_comma_list() -> None:
    args = wan.parse_args(["--only", "upload, tpc", "--paths", "50ms/1gbit"])
    assert args.only == ["upload", "tpc"]
    assert wan.parse_args([]).only == []


def test_base_uploads_run_next_to_this_trees() -> None:
    """--base REF with --only upload: the base tree's uploads (its client into its own
    ``dtnkit serve``) run next to this tree's, interleaved."""
    names = wan.order("auto", None, base=True)
    goals = wan.targets("auto", None, "REF")
    kept = wan.only(names, ["upload"], goals)
    assert kept == [
        "iperf3 8",
        "cp auto dtnkit",
        "iperf3 auto",
        "upload auto",
        "upload auto base",
        "iperf3 1",
        "cp 1 dtnkit",
        "upload 1",
        "upload 1 base",
    ]
    pairs = {(g.measured, g.baseline) for g in goals}
    assert ("upload auto", "upload auto base") in pairs
    assert ("upload 1 base", "cp 1 dtnkit") in pairs


def test_no_base_columns_without_base() -> None:
    assert not [n for n in wan.order("auto", None) if "base" in n]
    assert not [
        c
        for c in wan.catalogue("auto", None).values()
        if "{base_src}" in " ".join(c.argv) or "base" in " ".join(c.needs)
    ]
