"""``python -m bench serve-abuse``'s pure parts: the percentiles and cells of its tables, the
verdict of each question (a server that stopped serving, a wrong body, a starved client, a
refused second address), the per-client limit it reads from a tree's source, and its options
refusing bad values with one line before anything is made."""

from __future__ import annotations

import argparse
import collections
import math
import resource
import secrets
import subprocess
import sys
from pathlib import Path

import pytest
from bench.cases import serve_abuse as sa
from bench.lib.machine import Commit
from bench.lib.trees import Tree
from hypothesis import given
from hypothesis import strategies as st

from dtnkit.transfer.server import conn

ROOT = Path(__file__).resolve().parents[2]
THIS = Tree("this", ROOT, Commit(None, False))  # this checkout, without asking git each time
TIMES = st.lists(st.one_of(st.floats(0, 1e4), st.just(math.inf)), min_size=1, max_size=50)


@given(TIMES, st.floats(0.01, 100), st.floats(0.01, 100))
def test_a_percentile_is_one_of_the_values_and_grows_with_q(
    values: list[float], q1: float, q2: float
) -> None:
    lo, hi = sorted((q1, q2))
    assert sa.percentile(values, lo) in values
    assert sa.percentile(values, lo) <= sa.percentile(values, hi)
    assert sa.percentile(values, 100) == max(values)


def test_percentiles_are_nearest_rank_and_failures_count_as_the_worst() -> None:
    values = [float(v) for v in range(1, 101)]
    assert sa.percentile(values, 50) == 50.0 and sa.percentile(values, 99) == 99.0
    # 2 of 100 GETs failed: the p99 is a failure, the p50 is not
    failed = [*values[:98], math.inf, math.inf]
    assert sa.percentile(failed, 99) == math.inf and sa.percentile(failed, 50) == 50.0
    assert math.isnan(sa.percentile([], 50))


def test_latency_cells() -> None:
    assert sa.ms(0.0123, 20) == "12"
    assert sa.ms(0.0042, 20) == "4.2"
    assert sa.ms(math.inf, 20) == "> 20 s"
    assert sa.ms(20.0, 20) == "> 20 s"  # at the timeout is a timeout
    assert sa.ms(math.nan, 20) == "-"
    assert sa.counts(collections.Counter({"404": 3, "200": 3, "cut": 9})) == (
        "cut x 9, 200 x 3, 404 x 3"
    )
    assert sa.counts(collections.Counter()) == "-"


def loop(kind: str = "fifo", **readers: int) -> sa.Loop:
    got = sa.Loop(kind, served_at_end=True, last_served=3.0)
    got.answers["403" if kind == "fifo" else "200"] = 100
    got.readers.update({"ok": 50, **{k.replace("_", " "): n for k, n in readers.items()}})
    return got


def test_a_loop_is_intact_only_when_nothing_went_wrong() -> None:
    assert loop().verdict() == "intact"
    assert loop(bad_body=1).verdict() == "broken"
    assert loop(status=1).verdict() == "broken"
    assert loop(cut=1).verdict() == "broken"
    assert loop(refused=1).verdict() == "broken"
    assert loop(timeout=2).verdict() == "slow"  # slow, not wrong
    # the requests at the FIFO get 403; a 500 there is an error, a cut prober too
    fifo = loop()
    fifo.answers["500"] += 1
    assert fifo.verdict() == "broken" and fifo.unexpected() == 1
    # a listing raced by DELETE may be a 404: that is no fault
    racing = loop("directory")
    racing.answers["404"] += 40
    assert racing.verdict() == "intact"
    racing.answers["cut"] += 1
    assert racing.verdict() == "broken"


def test_a_server_that_stopped_serving_says_when_it_last_served() -> None:
    stopped = loop(bad_body=2)
    stopped.served_at_end = False
    stopped.last_served = 14.04
    assert stopped.verdict() == "stopped serving"
    assert stopped.end() == "no: last at 14.0 s"
    stopped.last_served = None
    assert stopped.end() == "no (never served)"
    row = stopped.row("base")
    assert len(row) == len(sa.LOOP_HEAD) and row[0] == "base" and row[-1] == "stopped serving"
    assert row[3] == "52" and row[4] == "2"  # reader GETs in all, wrong bodies


def starve(under: list[float], timeout: float = 20.0) -> sa.Starve:
    return sa.Starve("tokens only", [0.004] * 10, under, collections.Counter(), timeout, 600, 0)


def test_a_starved_client_is_told_from_a_served_one() -> None:
    assert starve([0.01] * 80).verdict() == "served"
    assert starve([math.inf] * 80).verdict() == "starved"
    assert starve([math.inf] * 40 + [0.01] * 40).verdict() == "starved"  # half
    assert starve([math.inf] * 30 + [14.0] * 50).verdict() == "partly starved"
    # a GET answered only at the timeout failed
    assert starve([20.0] + [0.01] * 79).failed() == 1
    assert starve([]).verdict() == "no data"
    row = starve([math.inf] * 80).row("base")
    assert len(row) == len(sa.STARVE_HEAD)
    assert row[2:8] == ["4.0", "80", "> 20 s", "> 20 s", "80", "600 / 0"]


def test_the_second_address_is_served_refused_or_partly() -> None:
    def greedy(**answers: int) -> sa.Greedy:
        return sa.Greedy(
            2048,
            256,
            256,
            collections.Counter({k.removeprefix("s"): n for k, n in answers.items()}),
            [0.001],
            20.0,
        )

    assert greedy(s200=20).verdict() == "served"
    assert greedy(s503=20).verdict() == "refused"
    assert greedy(s200=19, s503=1).verdict() == "partly refused"
    assert greedy().verdict() == "refused"
    row = greedy(s503=20).row("base")
    assert len(row) == len(sa.GREEDY_HEAD) and row[1:4] == ["256", "256 of 2048", "503 x 20"]


@given(st.integers(1, 2**24))
def test_the_per_client_limit_read_from_the_source_is_the_servers(cap: int) -> None:
    assert sa.per_client_of(THIS, cap) == conn.per_client_default(cap)


def test_a_tree_without_the_limit_has_none(tmp_path: Path) -> None:
    server = tmp_path / "src" / "dtnkit" / "transfer" / "server"
    server.mkdir(parents=True)
    (server / "conn.py").write_text("WORKERS = 512\nIO_TIMEOUT = 300.0\n")
    tree = Tree("base", tmp_path, Commit(None, False))
    assert sa.per_client_of(tree, 2048) is None
    assert sa.workers_of(tree) == 512
    assert sa.workers_of(THIS) == conn.WORKERS


@given(st.text(max_size=20))
def test_seconds_take_a_positive_finite_number_or_say_why_not(text: str) -> None:
    try:
        got = sa.seconds(text)
    except argparse.ArgumentTypeError as exc:
        assert repr(text) in str(exc)
    else:
        assert 0 < got <= 86400


@pytest.mark.parametrize(
    "argv,says",
    [
        (["--requests", "0"], "--requests: '0': at least 1"),
        (["--slow-seconds", "inf"], "--slow-seconds: 'inf': more than 0 s"),
        (["--timeout", "-1"], "--timeout: '-1': more than 0 s"),
        (["--cap", "100000000"], "need 100000256 descriptors, more than the hard limit"),
        (["--only", "x; rm -rf /"], "--only: invalid choice"),
    ],
)
def test_bad_options_are_one_line_and_nothing_is_made(argv: list[str], says: str) -> None:
    if "--cap" in argv and resource.getrlimit(resource.RLIMIT_NOFILE)[1] == resource.RLIM_INFINITY:
        pytest.skip("no hard descriptor limit here")
    prefix = f"hsa{secrets.token_hex(2)}"  # pytest-xdist runs the other cases beside it
    before = set(Path("/dev/shm").glob(f"dtnkit-bench-{prefix}*")) | set(
        Path("/tmp").glob(f"dtnkit-bench-{prefix}*")
    )
    proc = subprocess.run(
        [sys.executable, "-m", "bench", "serve-abuse", "--base", "HEAD", "--prefix", prefix, *argv],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 2
    errors = [line for line in proc.stderr.splitlines() if "error:" in line]
    assert len(errors) == 1 and says in errors[0], proc.stderr
    assert "Traceback" not in proc.stderr and proc.stdout == ""
    after = set(Path("/dev/shm").glob(f"dtnkit-bench-{prefix}*")) | set(
        Path("/tmp").glob(f"dtnkit-bench-{prefix}*")
    )
    assert after == before
