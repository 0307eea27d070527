"""Output for people (issue 12): one formatting module, tables that fit the terminal without
cutting an ID or a word, `--wide`, and short summaries that never print None or a dict."""

from __future__ import annotations

import io
import json
from dataclasses import replace
from typing import Any

import pytest
from rich.console import Console
from tests.support.wrapping import cut_words

from conftest import HOSTS, taken
from dtnkit.cli import lab_render, measure_render, render
from dtnkit.cli.main import main
from dtnkit.environment import Environment
from dtnkit.measure.result import ProbeResult
from dtnkit.units import (
    format_bytes,
    format_count,
    format_duration,
    format_ms,
    format_percent,
    format_rate,
    format_value,
)


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (0, "0 B"),
        (512, "512 B"),
        (1024, "1.00 KiB"),
        (65536, "64.0 KiB"),
        (2**28, "256 MiB"),
        (1.5 * 2**30, "1.50 GiB"),
        (2**31 - 1, "2.00 GiB"),
        (4 * 2**40, "4.00 TiB"),
        (None, "-"),
    ],
)
def test_sizes_are_iec_bytes(value: float | None, text: str) -> None:
    assert format_bytes(value) == text


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (0.85, "850 ms"),
        (4.023, "4.02 s"),
        (59.5, "59.5 s"),
        (125, "2 min 5 s"),
        (3700, "1 h 1 min"),
        (None, "-"),
        (float("nan"), "-"),
    ],
)
def test_durations(value: float | None, text: str) -> None:
    assert format_duration(value) == text


def test_rates_percentages_and_missing_values() -> None:
    assert format_rate(1.828e9) == "1.83 Gbit/s"  # was `throughput_bps: 1.828e+09`
    assert format_rate(941e6) == "941 Mbit/s"
    assert format_percent(12.345) == "12.3%" and format_percent(0.0005, fraction=True) == "0.05%"
    assert format_percent(0) == "0%" and format_ms(50.234) == "50.2 ms"
    assert format_count(3.0) == "3" and format_value(True) == "yes"
    for f in (
        format_rate,
        format_bytes,
        format_duration,
        format_ms,
        format_percent,
        format_count,
        format_value,
    ):
        assert f(None) == "-"
    assert format_rate(True) == "-"  # a bool is not a number


def narrow(width: int = 80) -> tuple[Console, io.StringIO]:
    out = io.StringIO()
    return Console(file=out, width=width, highlight=False, soft_wrap=False), out


ID = "20261201T094629Z-a-fairly-long-label-for-the-snapshot-xyz"


def test_a_table_hides_columns_before_it_cuts_an_id_or_a_word() -> None:
    con, out = narrow()
    cols = (
        render.Col("id", wrap=False),
        render.Col("kind"),
        render.Col("label", rank=1),
        render.Col("created", rank=2),
    )
    rows = [
        (
            ID,
            "manual (last baseline)",
            "a fairly long label for the snapshot xyz",
            "2026-12-01T09:46:29+00:00",
        )
    ]
    hidden = render.print_fitted(con, cols, rows)
    text = out.getvalue()
    assert hidden == ["created"]
    assert all(len(line.rstrip()) <= 80 for line in text.splitlines())
    assert any(ID in line for line in text.splitlines())  # whole, on one line
    assert "label" in text and "--wide shows them" in text
    wide, wide_out = narrow(render.WIDE)
    assert render.print_fitted(wide, cols, rows) == []
    assert cut_words(text, wide_out.getvalue()) == []


def test_rows_become_records_when_even_the_key_columns_cannot_fit() -> None:
    con, out = narrow(40)
    render.print_fitted(
        con, (render.Col("id", wrap=False), render.Col("value", wrap=False)), [(ID, "x" * 30)]
    )
    lines = out.getvalue().splitlines()
    assert lines[0] == ID and lines[1].strip() == "value: " + "x" * 30


def test_tune_audit_fits_80_columns_and_wide_shows_everything(environment: Environment) -> None:
    env = replace(environment, terminal_width=80)
    argv = ["tune", "audit", "--tree", str(HOSTS / "dtn-a")]
    main(argv, env)
    text = taken(env.stdout)
    assert max(len(line.rstrip()) for line in text.splitlines()) <= 80
    assert "current -> recommended" in text and "--wide shows them" in text
    assert "why net.core.rmem_max: BDP" in text  # the reason, under the table
    main([*argv, "--wide"], env)
    whole = taken(env.stdout)
    header = next(line for line in whole.splitlines() if line.startswith("key"))
    assert header.split() == ["key", "status", "current", "recommended", "why", "group", "scope"]
    assert "hidden" not in whole
    assert cut_words(text, whole) == []


def test_tune_list_keeps_snapshot_ids_whole_at_80_columns(environment: Environment) -> None:
    env = replace(environment, terminal_width=80)
    assert (
        main(
            [
                "tune",
                "save",
                "--tree",
                str(HOSTS / "dtn-a"),
                "--label",
                "a fairly long label for the snapshot, longer than forty",
                "--format",
                "json",
            ],
            env,
        )
        == 0
    )
    snap_id = json.loads(taken(env.stdout))["id"]
    assert main(["tune", "list"], env) == 0
    lines = taken(env.stdout).splitlines()
    assert any(snap_id in line for line in lines), lines
    assert "…" not in "".join(lines) and max(len(line.rstrip()) for line in lines) <= 80


def lab_doc() -> dict[str, Any]:
    """`lab status` of an nfqueue path, with the values the delay stage leaves None."""
    return {
        "name": "tmux1",
        "backend": "nfqueue",
        "backend_reason": "no netem",
        "status": "up",
        "rtt_ms": 10.0,
        "rate_bps": 500_000_000,
        "src_rate_bps": None,
        "loss": 0.0001,
        "queue_bytes": 625000,
        "mtu": 1500,
        "middle_netns": "dkl-tmux1-mid",
        "hosts": [
            {
                "name": "src",
                "side": "src",
                "netns": "dkl-tmux1-src",
                "address": "10.251.0.2",
                "hostname": "src.tmux1.lab",
            },
            {
                "name": "dst",
                "side": "dst",
                "netns": "dkl-tmux1-dst",
                "address": "10.252.0.2",
                "hostname": "dst.tmux1.lab",
            },
        ],
        "emulator": {
            "kind": "nfqueue",
            "pid": 123,
            "alive": True,
            "cpu_percent": None,
            "lateness_ms": None,
            "enobufs": 0,
            "config_errors": [],
            "updated": None,
            "queues": {
                "0": {
                    "packets": 12,
                    "bytes": None,
                    "dropped_loss": 0,
                    "held_now": 0,
                    "held_max": 3,
                    "released": 12,
                    "kernel": {"queue_total": 0, "queue_dropped": 1, "user_dropped": 0},
                },
                "1": {
                    "packets": 12,
                    "bytes": None,
                    "dropped_loss": 0,
                    "held_now": 0,
                    "held_max": 2,
                    "released": 12,
                    "kernel": None,
                },
            },
        },
        "counters": {
            "toward_dst": [
                {
                    "kind": "htb",
                    "handle": "1:",
                    "bytes": 1234,
                    "packets": 12,
                    "drops": 0,
                    "overlimits": None,
                    "backlog": 0,
                    "qlen": 0,
                }
            ]
        },
        "measured": None,
    }


def test_lab_status_prints_no_dict_and_no_none() -> None:
    con, out = narrow()
    lab_render.lab_status(con, lab_doc())
    text = out.getvalue()
    assert "None" not in text and "{" not in text and "'packets'" not in text
    assert "lateness p99 -" in text and "RTT measured -" in text
    assert "1.21 KiB" in text  # the qdisc's bytes, as IEC bytes
    assert "500 Mbit/s" in text and "loss 0.01%" in text
    assert max(len(line.rstrip()) for line in text.splitlines()) <= 80


def result(kind: str, summary: dict[str, Any], spec: dict[str, Any]) -> ProbeResult:
    return ProbeResult(kind=kind, spec=spec, summary=summary, id=7)


def test_a_net_probe_shows_key_figures_first_without_scientific_notation() -> None:
    con, out = narrow()
    measure_render.probe_summary(
        con,
        result(
            "net",
            {
                "throughput_bps": 1.828e9,
                "retransmits": 12,
                "rtt_ms_mean": 50.21,
                "rtt_ms_min": 50.0,
                "snd_cwnd_bytes_max": 12_582_912,
                "streams": 1,
                "duration_s": 10.0,
                "cc": "cubic",
                "cpu_local_pct": 12.5,
                "cpu_remote_pct": None,
                "sampler_retrans_share": 0.0001,
                "sampler_samples": 5,
                "sampler_nic_tx_dev": None,
            },
            {"peer": "demo/dst", "peer_address": "10.252.0.2", "reverse": False},
        ),
    )
    lines = out.getvalue().splitlines()
    assert lines[0] == "net probe 7: 1.83 Gbit/s to demo/dst (10.252.0.2)"
    text = out.getvalue()
    assert "e+0" not in text and "None" not in text and "_bps" not in text
    assert "12.0 MiB" in text and "50.2 ms mean" in text and "- at the peer" in text
    assert "dtnkit results show 7" in text
    assert len(lines) <= 12


def test_the_disk_probe_shows_no_network_counters() -> None:
    con, out = narrow()
    measure_render.probe_summary(
        con,
        result(
            "disk",
            {
                "write_bps": 8e9,
                "read_bps": 1.2e10,
                "write_lat_ms_mean": 1.5,
                "read_lat_ms_mean": 0.8,
                "size_bytes": 2**28,
                "direct": True,
                "jobs": 1,
                "throughput_bps": 1.2e10,
                "sampler_retrans_segs_total": 0,
                "sampler_nic_rx_drops_total": 0,
                "sampler_samples": 5,
            },
            {"path": "/data", "size_bytes": 2**28},
        ),
    )
    text = out.getvalue()
    assert text.startswith("disk probe 7: read 12.0 Gbit/s, write 8.00 Gbit/s in /data")
    assert "256 MiB" in text
    for network in ("retransmit", "NIC", "RTT", "window"):
        assert network not in text


def test_diagnose_puts_the_verdict_first() -> None:
    con, out = narrow()
    measure_render.diagnosis(
        con,
        {
            "verdict": {
                "layer": "path",
                "summary": "path-bound: the cap binds",
                "next": "test the path",
            },
            "checks": [
                {
                    "layer": "nic",
                    "checked": "iperf3 rate vs line rate",
                    "binds": False,
                    "found": "not at line rate",
                },
                {
                    "layer": "path",
                    "checked": "what limits flows",
                    "binds": True,
                    "found": "path-bound: the cap binds",
                },
            ],
            "results": {"net": {"id": 3, "summary": {"throughput_bps": 4.5e8}}},
        },
    )
    lines = out.getvalue().splitlines()
    assert lines[0] == "verdict: path: path-bound: the cap binds"
    assert lines[1] == "next: test the path"
    assert lines[2] == "measured: network 450 Mbit/s (result 3)"


def test_experiment_summary_says_what_helped_first() -> None:
    con, out = narrow()
    measure_render.experiment_summary(
        con,
        {
            "id": "exp-20261201T100000-ab12",
            "helped": ["buffers"],
            "next": ["dtnkit tune apply --from-experiment exp-20261201T100000-ab12"],
            "groups": [
                {
                    "group": "buffers",
                    "verdict": "helps",
                    "ratio": 3.7,
                    "margin": 0.05,
                    "baseline_bps": [4.6e8, 4.5e8],
                    "applied_bps": [1.7e9, 1.69e9],
                },
                {
                    "group": "pacing",
                    "verdict": "neutral",
                    "ratio": None,
                    "margin": None,
                    "baseline_bps": [4.6e8],
                    "applied_bps": [],
                },
            ],
        },
    )
    text = out.getvalue()
    assert text.splitlines()[0] == "experiment exp-20261201T100000-ab12: helped: buffers"
    assert "x3.70" in text and "455 Mbit/s" in text and "None" not in text
    assert "noise not measured" not in text  # two baseline runs (or a record from before)


def test_an_experiment_of_one_run_each_says_its_noise_was_not_measured() -> None:
    con, out = narrow()
    measure_render.experiment_summary(
        con,
        {
            "id": "exp-20261201T100000-cd34",
            "helped": [],
            "next": [],
            "groups": [
                {
                    "group": "buffers",
                    "verdict": "harmful",
                    "ratio": 0.947,
                    "margin": 0.05,
                    "noise_measured": False,
                    "baseline_bps": [4.6e8],
                    "applied_bps": [4.36e8],
                },
            ],
        },
    )
    text = " ".join(out.getvalue().split())
    assert "x0.95" in text
    assert (
        "noise not measured: one baseline run per group (--repeat 1), so each verdict was "
        "judged against +-5% alone; --repeat 3 measures it"
    ) in text
    assert all(len(line) <= 80 for line in out.getvalue().splitlines())


def test_an_e2e_probe_shows_rate_size_and_time() -> None:
    con, out = narrow()
    measure_render.probe_summary(
        con,
        result(
            "e2e",
            {"throughput_bps": 9.41e8, "bytes": 2**30, "seconds": 9.13, "sampler_samples": None},
            {"src": "/data/f", "dst": "http://dtn:8080/f", "tool": "dtnkit-cp"},
        ),
    )
    text = out.getvalue()
    assert text.splitlines()[0] == "e2e probe 7: 941 Mbit/s, 1.00 GiB in 9.13 s"
    assert "/data/f -> http://dtn:8080/f with dtnkit-cp" in text and "None" not in text
