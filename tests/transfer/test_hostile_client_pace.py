"""A server that trickles: the minimum rate (--low-speed-limit / --low-speed-time) and the
overall --deadline end the copy, where the stall timeout alone waited forever (a byte a
second resets it each time).  Times are bounded from above only, with a wide margin."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from tests.conftest import taken
from tests.support.hostile_server import Reply, Request, Script, hostile, ranged

from dtnkit.cli.main import main
from dtnkit.environment import Environment
from dtnkit.transfer.client.download import download
from dtnkit.transfer.client.errors import TransferError
from dtnkit.transfer.client.request import CopyRequest, CopyRun
from dtnkit.transfer.client.session import Session, Url

DATA = bytes(range(256)) * 64  # 16 KiB


def trickling(data: bytes, rate: float) -> Script:
    """An honest file server whose range answers come at *rate* bytes a second."""
    honest = ranged(data)

    def script(req: Request) -> Reply:
        reply = honest(req)
        if req.method == "GET":
            reply.trickle = rate
        return reply

    return script


def run(env: Environment, *argv: str) -> tuple[int, str, float]:
    began = time.monotonic()
    code = main(["cp", "--verify", "none", "--retries", "0", "--stall-timeout", "3", *argv], env)
    return code, taken(env.stderr), time.monotonic() - began


def test_a_trickle_is_cut_by_the_minimum_rate(tmp_path: Path, environment: Environment) -> None:
    """10 bytes a second never trips --stall-timeout 3; 1 KiB/s over 1 s does."""
    dst = tmp_path / "f"
    with hostile(trickling(DATA, 10)) as srv:
        code, err, took = run(
            environment,
            "--low-speed-limit",
            "1KiB",
            "--low-speed-time",
            "1",
            srv.url("/f"),
            str(dst),
        )
    assert code == 20, err
    assert "low-speed-limit" in err and "Traceback" not in err
    assert took < 10  # the trickle alone would take 27 minutes
    assert not dst.exists()


def test_trickled_headers_are_cut_too(tmp_path: Path, environment: Environment) -> None:
    """The answer's head itself at 10 bytes a second (http.client reads up to 100 header
    lines of 64 KiB each: hours at that pace)."""

    def script(req: Request) -> Reply:
        return Reply(200, [("X-Pad", "p" * 5000)], b"", trickle=10, trickle_head=True)

    with hostile(script) as srv:
        code, err, took = run(
            environment,
            "--low-speed-limit",
            "1KiB",
            "--low-speed-time",
            "1",
            srv.url("/f"),
            str(tmp_path / "f"),
        )
    assert code == 20, err
    assert "low-speed-limit" in err and "Traceback" not in err
    assert took < 10


def test_a_fast_enough_trickle_is_cut_by_the_deadline(
    tmp_path: Path, environment: Environment
) -> None:
    """2000 B/s keeps a 100 B/s minimum; --deadline 2 ends the 8 s copy, not retried."""
    dst = tmp_path / "f"
    with hostile(trickling(DATA, 2000)) as srv:
        code, err, took = run(
            environment,
            "--low-speed-limit",
            "100",
            "--deadline",
            "2",
            "--retries",
            "3",
            srv.url("/f"),
            str(dst),
        )
        gets = srv.methods().count("GET")
    assert code == 20, err
    assert "--deadline of 2 s passed" in err and "Traceback" not in err
    assert took < 8
    assert gets == 1  # not retried
    assert not dst.exists()


def test_the_deadline_bounds_a_tpc_marker_stream(environment: Environment) -> None:
    """An active server that keeps the COPY answer open, a byte now and then."""

    def script(req: Request) -> Reply:
        if req.method == "COPY":
            return Reply(
                202,
                [("Content-Type", "text/plain")],
                b"Perf Marker\n" * 100,
                trickle=5,
                length=False,
                close=True,
            )
        return Reply(404, [], b"")

    with hostile(script) as srv:
        began = time.monotonic()
        code = main(
            ["cp", "--tpc", "pull", "-f", "--deadline", "2", "http://127.0.0.1:1/s", srv.url("/d")],
            environment,
        )
        took = time.monotonic() - began
    err = taken(environment.stderr)
    assert code == 20, err
    assert "deadline" in err
    assert took < 8


def test_server_side_pulls_get_the_minimum_rate_through_options(tmp_path: Path) -> None:
    """The server's TPC pull calls download() with its own CopyRequest: the rule is in it
    (defaults 1 KiB/s over 30 s; here shortened) and ends the pull."""
    assert CopyRequest().low_speed_limit == 1024 and CopyRequest().low_speed_time == 30.0
    run = CopyRun.of(
        CopyRequest(
            low_speed_limit=1024,
            low_speed_time=1,
            retries=0,
            stall_timeout=3,
            verify="none",  # type: ignore[arg-type]
            resume=False,
        )
    )
    with hostile(trickling(DATA, 10)) as srv:
        url = Url.parse(srv.url("/f"))
        began = time.monotonic()
        with pytest.raises(TransferError) as info:
            download(Session(url, run), url, tmp_path / "f", run)
    assert time.monotonic() - began < 10
    assert "low-speed-limit" in info.value.why
    assert not (tmp_path / "f").exists()


@pytest.mark.parametrize(
    "flag,value",
    [
        ("--low-speed-limit", "-1"),
        ("--low-speed-limit", "x"),
        ("--low-speed-time", "0"),
        ("--deadline", "0"),
        ("--deadline", "nan"),
    ],
)
def test_bad_rate_flags_are_one_error(
    flag: str, value: str, tmp_path: Path, environment: Environment
) -> None:
    code = main(["cp", flag, value, "http://127.0.0.1:1/f", str(tmp_path / "f")], environment)
    err = taken(environment.stderr)
    assert code in (2, 9), err
    assert "Traceback" not in err and flag in err
