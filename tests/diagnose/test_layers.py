"""The verdict logic (pure) and the results store."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

import pytest

from dtnkit.diagnose.experiment import judge
from dtnkit.diagnose.layers import EXIT, Layer, diagnose
from dtnkit.errors import BadInput
from dtnkit.measure.store import ProbeResult, ResultStore, export

G = 1e9


def net(bps: float, **summary: Any) -> ProbeResult:
    return ProbeResult(
        "net",
        {"peer": "x"},
        {
            "throughput_bps": bps,
            "retransmits": 3,
            "rtt_ms_min": 50.0,
            "rtt_ms_mean": 51.0,
            **summary,
        },
    )


def disk(bps: float) -> ProbeResult:
    return ProbeResult("disk", {"path": "/d"}, {"throughput_bps": bps, "write_bps": bps})


def e2e(bps: float) -> ProbeResult:
    return ProbeResult("e2e", {"src": "a", "dst": "b"}, {"throughput_bps": bps})


def test_line_rate_is_nic_bound() -> None:
    d = diagnose(net(9.5 * G), link_bps=10 * G)
    assert d.layer is Layer.NIC and EXIT[d.layer] == 10
    assert "may hurt" in d.verdict.next_step  # type: ignore[union-attr]


def test_window_limited_flows_are_host_network_bound_and_name_buffers() -> None:
    d = diagnose(net(0.5 * G, sampler_rwnd_limited_pct_max=80.0), link_bps=10 * G)
    assert d.layer is Layer.HOST_NETWORK
    assert d.as_dict()["verdict"]["groups"][0] == "buffers"
    assert "receive window" in d.as_dict()["verdict"]["summary"]


def test_a_saturated_softirq_core_is_host_network_bound_on_rings() -> None:
    d = diagnose(net(3 * G, sampler_softirq_pct_max=98.0), link_bps=25 * G)
    assert d.layer is Layer.HOST_NETWORK and "rings" in d.verdict.groups  # type: ignore[union-attr]


def test_neither_window_nor_cpu_limited_below_line_rate_is_the_path() -> None:
    d = diagnose(net(1.9 * G, sampler_rwnd_limited_pct_max=0.0), link_bps=10 * G)
    assert d.layer is Layer.PATH and d.verdict.groups == []  # type: ignore[union-attr]


def test_storage_slower_than_network_and_e2e_near_storage_is_storage_bound() -> None:
    d = diagnose(net(8 * G), link_bps=10 * G, disk=disk(0.16 * G), e2e=e2e(0.15 * G))
    assert d.layer is Layer.STORAGE and EXIT[d.layer] == 13
    assert "will not change end-to-end" in d.verdict.found  # type: ignore[union-attr]
    assert d.checks[0].binds is False and "faster than storage" in d.checks[0].found


def test_e2e_well_below_network_and_storage_is_the_application() -> None:
    d = diagnose(net(8 * G), link_bps=10 * G, disk=disk(6 * G), e2e=e2e(0.5 * G))
    assert d.layer is Layer.APPLICATION


def test_json_has_a_top_level_verdict() -> None:
    doc = diagnose(net(1 * G), link_bps=None).as_dict()
    assert set(doc["verdict"]) >= {"layer", "summary", "groups", "next", "evidence"}
    json.dumps(doc)


@pytest.mark.parametrize(
    ("base", "treated", "verdict"),
    [
        ([1.0, 1.02], [2.0, 2.1], "helps"),
        ([1.0, 1.02], [0.5, 0.6], "harmful"),
        ([1.0, 1.02], [1.01, 0.99], "neutral"),
        ([1.0, 1.3], [1.2, 1.25], "neutral"),
    ],
)
def test_judge_uses_the_baselines_own_noise(
    base: list[float], treated: list[float], verdict: str
) -> None:
    assert judge(base, treated)[0] == verdict


def test_store_round_trip_and_export(tmp_path: Path) -> None:
    store = ResultStore(tmp_path / "r.sqlite")
    r = net(1 * G, sampler_samples=3)
    r.tuning = {"sysctl/net.ipv4.tcp_rmem": "4096 131072 6291456"}
    rid = store.add(r)
    got = store.get(rid)
    assert got.summary == r.summary and got.tuning_id == r.tuning_id and got.kind == "net"
    store.add(disk(2 * G))
    rows = list(csv.DictReader(io.StringIO(export(store.results(), "csv"))))
    assert [row["kind"] for row in rows] == ["disk", "net"]
    assert json.loads(export(store.results(kind="net"), "json"))[0]["id"] == rid
    store.add_experiment("exp-1", {"id": "exp-1", "groups": [], "helped": []})
    assert store.get_experiment("exp-1")["helped"] == []
    with pytest.raises(BadInput):
        store.get_experiment("nosuch")
    with pytest.raises(BadInput):
        store.get(999)
