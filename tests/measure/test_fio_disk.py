"""fio's tool layer (real fio) and the emulated slow disk (real loop device and cgroup)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from dtnkit.errors import BadInput, DtnkitError
from dtnkit.host.parsers import ParseError
from dtnkit.lab.disk import KIND_V1, KIND_V2, SlowDisk, slow_disk, throttling_available
from dtnkit.measure.tools import fio

FIXTURES = Path(__file__).parent.parent / "fixtures" / "fio"
MiB = 2**20

fio_ok, fio_reasons = fio.can_run()
needs_fio = pytest.mark.skipif(not fio_ok, reason="; ".join(fio_reasons) or "fio")
_throttle_reason = throttling_available()
needs_throttle = pytest.mark.skipif(
    _throttle_reason is not None, reason=_throttle_reason or "throttling"
)


def _fixture(name: str) -> str:
    return (FIXTURES / name).read_text()


# --- parse_fio_json on captured fio 3.33 output --------------------------------------------


@pytest.mark.parametrize(
    ("name", "side", "bps", "jobs"),
    [
        ("write-direct-libaio.json", "write", 459649753.0, 1),
        ("read-direct-libaio.json", "read", 541200516.0, 1),
        ("write-buffered-2jobs.json", "write", 368730021.0, 2),
        ("read-2jobs-psync-notes.txt", "read", 508400484.0, 2),
        ("read-2jobs-no-group.json", "read", 493447529.0 + 381300363.0, 2),
    ],
)
def test_parse_captured(name: str, side: str, bps: float, jobs: int) -> None:
    got = fio.parse_fio_json(_fixture(name))
    other = "read" if side == "write" else "write"
    assert got[f"{side}_bps"] == bps * 8  # fio's bw_bytes, in bit/s
    assert got[f"{side}_iops"] > 0
    assert 0 < got[f"{side}_lat_ms_mean"] < 1000
    assert got[f"{other}_bps"] == 0.0
    assert got[f"{other}_lat_ms_mean"] == 0.0
    assert got["jobs"] == jobs
    assert got["error"] == 0
    assert 0 < got["runtime_s"] < 10
    assert set(got) == {
        "read_bps",
        "write_bps",
        "read_iops",
        "write_iops",
        "read_lat_ms_mean",
        "write_lat_ms_mean",
        "runtime_s",
        "jobs",
        "error",
    }


def test_parse_latency_units() -> None:
    doc = json.loads(_fixture("write-direct-libaio.json"))
    got = fio.parse_fio_json(_fixture("write-direct-libaio.json"))
    assert got["write_lat_ms_mean"] == pytest.approx(
        doc["jobs"][0]["write"]["lat_ns"]["mean"] / 1e6
    )
    assert got["runtime_s"] == doc["jobs"][0]["job_runtime"] / 1000


def test_parse_notes_before_json() -> None:
    text = _fixture("read-2jobs-psync-notes.txt")
    assert text.startswith("note: both iodepth")  # fio's notes on stdout, then the JSON
    assert fio.parse_fio_json(text)["read_bps"] > 0


def test_parse_job_error() -> None:
    got = fio.parse_fio_json(_fixture("write-error-enoent.json"))
    assert got["error"] == 2
    assert got["write_bps"] == 0.0


@pytest.mark.parametrize(
    "text",
    [
        "",
        "   \n",
        "fio: unrecognized option '--bogus'\n",
        "{",
        "[1, 2]",
        '{"jobs": []}',
        '{"fio version": "fio-3.33"}',
        '{"jobs": [{"error": 0, "job_runtime": 1}]}',
        '{"jobs": [{"error": 0, "job_runtime": 1, "read": {"bw_bytes": "x"}, "write": {}}]}',
        "note: something\n{not json}\n",
    ],
)
def test_parse_garbage(text: str) -> None:
    with pytest.raises(ParseError):
        fio.parse_fio_json(text)


def test_parse_truncated_capture() -> None:
    text = _fixture("read-direct-libaio.json")
    with pytest.raises(ParseError):
        fio.parse_fio_json(text[: len(text) // 2])


# --- fio_argv and can_run ------------------------------------------------------------------


def test_fio_argv_shape() -> None:
    argv = fio.fio_argv("/x/dtnkit-probe.dat", rw="write", size_bytes=64 * MiB, runtime_s=3)
    assert argv[0] == "fio"
    for arg in (
        "--output-format=json",
        "--group_reporting",
        "--filename=/x/dtnkit-probe.dat",
        "--rw=write",
        "--bs=1M",
        "--direct=1",
        f"--size={64 * MiB}",
        "--runtime=3",
        "--name=dtnkit",
    ):
        assert arg in argv
    assert f"--ioengine={fio.ioengine()}" in argv
    assert fio.ioengine() in ("libaio", "psync")


def test_fio_argv_jobs_split_and_buffered() -> None:
    argv = fio.fio_argv("/dev/loop9", rw="write", size_bytes=64 * MiB, jobs=4, direct=False)
    assert f"--size={16 * MiB}" in argv and f"--offset_increment={16 * MiB}" in argv
    assert "--numjobs=4" in argv and "--direct=0" in argv and "--end_fsync=1" in argv
    assert "--end_fsync=1" not in fio.fio_argv("/f", rw="read", size_bytes=MiB, direct=False)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"rw": "randrw", "size_bytes": MiB},
        {"rw": "read", "size_bytes": MiB, "jobs": 0},
        {"rw": "read", "size_bytes": 100},
        {"rw": "read", "size_bytes": MiB, "runtime_s": 0},
    ],
)
def test_fio_argv_bad_input(kwargs: dict[str, object]) -> None:
    with pytest.raises(BadInput):
        fio.fio_argv("/f", **kwargs)  # type: ignore[arg-type]


@needs_fio
def test_can_run_here() -> None:
    assert fio.can_run() == (True, [])


# --- run_disk_probe on a directory ---------------------------------------------------------


@needs_fio
@pytest.mark.parametrize(("direct", "jobs"), [(True, 1), (False, 2)])
def test_probe_tmp_dir(tmp_path: Path, direct: bool, jobs: int) -> None:
    got = fio.run_disk_probe(str(tmp_path), size_bytes=16 * MiB, direct=direct, jobs=jobs)
    assert got["write_bps"] > 0 and got["read_bps"] > 0
    assert got["write_lat_ms_mean"] > 0 and got["read_lat_ms_mean"] > 0
    assert (got["size_bytes"], got["direct"], got["jobs"]) == (16 * MiB, direct, jobs)
    assert fio.parse_fio_json(got["raw"]["write"])["write_bps"] == got["write_bps"]
    assert fio.parse_fio_json(got["raw"]["read"])["jobs"] == jobs
    assert list(tmp_path.iterdir()) == []  # dtnkit-probe.dat removed


@needs_fio
def test_probe_bad_paths(tmp_path: Path) -> None:
    missing = tmp_path / "no" / "such"
    with pytest.raises(BadInput, match="does not exist"):
        fio.run_disk_probe(str(missing), size_bytes=MiB)
    assert not (tmp_path / "no").exists()  # fio would have created it
    a_file = tmp_path / "f"
    a_file.write_text("x")
    with pytest.raises(BadInput, match="not a directory"):
        fio.run_disk_probe(str(a_file), size_bytes=MiB)
    with pytest.raises(BadInput, match="cannot write"):
        fio.run_disk_probe("/proc", size_bytes=MiB)
    with pytest.raises(BadInput):
        fio.run_disk_probe(str(tmp_path), size_bytes=1000)
    assert [p.name for p in tmp_path.iterdir()] == ["f"]


@needs_fio
def test_probe_fio_failure(tmp_path: Path) -> None:
    with pytest.raises(DtnkitError, match="fio write failed") as info:
        fio.run_disk_probe(
            str(tmp_path), size_bytes=MiB, wrap=lambda argv: [*argv, "--dk-bogus-option=1"]
        )
    assert "unrecognized option" in info.value.why
    assert list(tmp_path.iterdir()) == []


# --- the emulated slow disk ----------------------------------------------------------------


def _fio_rate(argv: list[str], side: str) -> float:
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr
    got = fio.parse_fio_json(proc.stdout)
    assert got["error"] == 0
    return float(got[f"{side}_bps"]) / 8  # bytes/s, as the throttle counts


def _assert_gone(disk: SlowDisk) -> None:
    listing = subprocess.run(["losetup", "-a"], capture_output=True, text=True, check=True).stdout
    assert Path(disk.backing_file).name not in listing
    assert not Path(disk.cgroup).exists()
    assert not Path(disk.backing_file).exists()


@pytest.mark.needs_root
@needs_fio
@needs_throttle
def test_slow_disk_throttles(tmp_path: Path) -> None:
    limits = {"read": 20_000_000, "write": 10_000_000}
    with slow_disk(
        64 * MiB, read_bps=limits["read"], write_bps=limits["write"], workdir=tmp_path
    ) as disk:
        assert disk.kind in (KIND_V1, KIND_V2)
        assert disk.device.startswith("/dev/loop")
        assert Path(disk.backing_file).parent == tmp_path.resolve()
        assert Path(disk.backing_file).name.startswith("dk-slowdisk-")
        assert Path(disk.cgroup).name.startswith("dk-slowdisk-")
        majmin = _majmin(disk.device)
        if disk.kind == KIND_V1:
            rfile = Path(disk.cgroup, "blkio.throttle.read_bps_device").read_text().split()
            wfile = Path(disk.cgroup, "blkio.throttle.write_bps_device").read_text().split()
            assert rfile == [majmin, str(limits["read"])]
            assert wfile == [majmin, str(limits["write"])]
        else:
            assert Path(disk.cgroup, "io.max").read_text().split()[:3] == [
                majmin,
                f"rbps={limits['read']}",
                f"wbps={limits['write']}",
            ]

        rates = {}
        for side in ("write", "read"):  # runtime-limited: ~2 s each at the limit
            argv = fio.fio_argv(disk.device, rw=side, size_bytes=64 * MiB, runtime_s=2)
            throttled = _fio_rate(disk.wrap(argv), side)
            free = _fio_rate(argv, side)
            rates[side] = (throttled, free)
            assert 0.7 <= throttled / limits[side] <= 1.1, (side, throttled)
            assert free / throttled > 3, (side, throttled, free)  # the device itself is fast

        # the storage probe straight on the block device, through wrap: write, then read
        got = fio.run_disk_probe(disk.device, size_bytes=16 * MiB, wrap=disk.wrap)
        assert got["write_bps"] <= 1.15 * limits["write"] * 8  # the probe's rates: bit/s
        assert got["read_bps"] <= 1.2 * limits["read"] * 8
        print(f"kind={disk.kind} rates (throttled, free) B/s: {rates}")
    _assert_gone(disk)


def _majmin(device: str) -> str:
    rdev = os.stat(device).st_rdev
    return f"{os.major(rdev)}:{os.minor(rdev)}"


@pytest.mark.needs_root
@needs_throttle
def test_slow_disk_teardown_on_failure(tmp_path: Path) -> None:
    sleeper: subprocess.Popen[bytes] | None = None
    try:
        with (
            pytest.raises(subprocess.CalledProcessError),
            slow_disk(4 * MiB, read_bps=None, write_bps=1_000_000, workdir=tmp_path) as disk,
        ):
            sleeper = subprocess.Popen(disk.wrap(["sleep", "60"]))
            for _ in range(100):  # until sh has moved itself into the cgroup
                if str(sleeper.pid) in Path(disk.procs_file).read_text().split():
                    break
                subprocess.run(["sleep", "0.02"], check=True)
            subprocess.run(disk.wrap(["sh", "-c", "exit 3"]), check=True)
        assert sleeper is not None
        assert sleeper.wait(timeout=10) != 0  # teardown stopped what was left in the cgroup
        _assert_gone(disk)
        assert list(tmp_path.iterdir()) == []
    finally:
        if sleeper is not None and sleeper.poll() is None:
            sleeper.kill()
            sleeper.wait()


@pytest.mark.parametrize(
    "kwargs",
    [
        {"size_bytes": 1000, "read_bps": None, "write_bps": None},
        {"size_bytes": 4 * MiB + 1, "read_bps": None, "write_bps": None},
        {"size_bytes": 4 * MiB, "read_bps": 0, "write_bps": None},
        {"size_bytes": 4 * MiB, "read_bps": None, "write_bps": -5},
    ],
)
def test_slow_disk_bad_input(tmp_path: Path, kwargs: dict[str, int | None]) -> None:
    with pytest.raises(BadInput), slow_disk(workdir=tmp_path, **kwargs):  # type: ignore[arg-type]
        pass
    assert list(tmp_path.iterdir()) == []


def test_slow_disk_missing_workdir(tmp_path: Path) -> None:
    with (
        pytest.raises(BadInput, match="not a directory"),
        slow_disk(4 * MiB, read_bps=None, write_bps=None, workdir=tmp_path / "nope"),
    ):
        pass


def test_throttling_available_says_why() -> None:
    reason = throttling_available()
    if os.geteuid() != 0:
        assert reason is not None and "root" in reason
    else:
        assert reason is None or isinstance(reason, str)
