"""iperf3's -c on `probe net`, help that promises only options a command has, and lab rates up
to what a 400G site's own path needs (refusals printing the figure in units)."""

from __future__ import annotations

import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dtnkit.errors import BadInput
from dtnkit.lab.path import MAX_RATE_BPS, PathSpec


def dtnkit(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "dtnkit", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_probe_net_takes_iperf3s_c_for_the_peer() -> None:
    out = dtnkit("probe", "net", "--help")
    assert out.returncode == 0
    assert "-c, --peer" in out.stdout
    # -c with no value is click's usage error about -c, not "no such option"
    bad = dtnkit("probe", "net", "-c")
    assert bad.returncode == 2 and "No such option" not in bad.stderr, bad.stderr


@pytest.mark.parametrize("cmd", [("probe", "disk"), ("probe", "e2e")])
def test_help_of_an_untimed_probe_mentions_no_duration(cmd: tuple[str, ...]) -> None:
    out = dtnkit(*cmd, "--help")
    assert out.returncode == 0, out.stderr
    assert "--duration" not in out.stdout and "duration /" not in out.stdout


def test_a_400_gbit_lab_path_is_accepted() -> None:
    PathSpec(rtt_ms=10, rate_bps=400 * 10**9).validate()
    PathSpec(rtt_ms=10, src_rate_bps=400 * 10**9).validate()


def test_a_rate_beyond_the_limit_is_refused_in_units() -> None:
    out = dtnkit("lab", "up", "dkfdx", "--rate", "2tbit")
    assert out.returncode != 0
    assert "Traceback" not in out.stderr
    assert "1 Tbit/s" in out.stderr
    assert "2000000000000" not in out.stderr, out.stderr


@settings(max_examples=50, deadline=None)
@given(st.integers(min_value=MAX_RATE_BPS + 1, max_value=10**18))
def test_any_rate_above_the_limit_is_one_error_naming_the_limit(rate: int) -> None:
    with pytest.raises(BadInput) as err:
        PathSpec(rtt_ms=10, rate_bps=rate).validate()
    assert "1 Tbit/s" in err.value.why and str(rate) not in err.value.render()


def test_each_user_and_run_gets_its_own_default_sweep_lab(monkeypatch: pytest.MonkeyPatch) -> None:
    from dtnkit.cli.sweep import default_lab_name
    from dtnkit.lab.path import check_name

    monkeypatch.setenv("SUDO_UID", "1001")
    alice = default_lab_name("grid-20261203T190000Z")
    assert default_lab_name("grid-20261203T190000Z") == alice  # --resume finds it again
    assert default_lab_name("grid-20261203T190001Z") != alice  # another run
    monkeypatch.setenv("SUDO_UID", "1002")
    assert default_lab_name("grid-20261203T190000Z") != alice  # another user
    check_name(alice)
    assert "[default: sweep]" not in dtnkit("sweep", "run", "--help").stdout
