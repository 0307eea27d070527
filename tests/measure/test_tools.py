"""Each measuring tool: its pure parse on captured output (tests/fixtures), and a real run
whose summary holds what its probe promises (the conformance every tool passes).

The ``dtnkit-cp`` mover runs end to end: a real ``dtnkit serve`` on 127.0.0.1 started as a
subprocess, and ``dtnkit probe e2e`` moving files through it with ``dtnkit cp``.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.support.ports import free_port
from tests.support.served import serve_subprocess

from dtnkit.cli.main import main
from dtnkit.errors import DtnkitError, ExitStatus
from dtnkit.host.host import Host
from dtnkit.host.parsers import ParseError
from dtnkit.measure import registry
from dtnkit.measure.probes.disk import DiskSpec
from dtnkit.measure.probes.e2e import E2ESpec
from dtnkit.measure.probes.net import NetSpec
from dtnkit.measure.tool import ProbeSpec
from dtnkit.measure.tools.dtnkit_cp import parse_cp_json
from dtnkit.measure.tools.iperf3 import parse_iperf3

FIX = Path(__file__).resolve().parent.parent / "fixtures"


def fx(name: str) -> str:
    return (FIX / name).read_text(encoding="utf-8")


# ---- parse, on captured output -----------------------------------------------------------------
def test_iperf3_parse_two_streams_on_loopback() -> None:
    got = registry.TOOLS["iperf3"].parse(fx("measure/iperf3.loopback-2streams.json"))
    assert got == parse_iperf3(fx("measure/iperf3.loopback-2streams.json"))
    assert got["streams"] == 2 and got["cc"] == "bbr" and got["retransmits"] == 2
    assert got["throughput_bps"] == pytest.approx(13039240449.218576)
    assert got["bytes"] == 1634336768
    assert got["rtt_ms_mean"] == pytest.approx(0.193) and got["rtt_ms_min"] == 0.189
    assert 0 < got["duration_s"] < 1.1
    assert set(registry.PROBES["net"].summary_keys) <= set(got)


def test_iperf3_parse_names_its_error() -> None:
    with pytest.raises(DtnkitError) as err:
        registry.TOOLS["iperf3"].parse(fx("measure/iperf3.refused.json"))
    assert err.value.what == "iperf3 failed"
    assert err.value.why == "unable to connect to server: Connection refused"
    with pytest.raises(DtnkitError, match="iperf3 printed no JSON"):
        parse_iperf3("iperf3: error - unable to connect to server")


def test_fio_parse_through_the_registry() -> None:
    got = registry.TOOLS["fio"].parse(fx("fio/write-direct-libaio.json"))
    assert got["write_bps"] == 459649753.0 * 8 and got["read_bps"] == 0.0  # bit/s


@pytest.mark.parametrize(
    ("name", "streams", "rate"),
    [
        ("dtnkit-cp.download.json", 1, 728978182.8),
        ("dtnkit-cp.upload-2streams.json", 2, 173267261.3),
    ],
)
def test_dtnkit_cp_parse(name: str, streams: int, rate: float) -> None:
    text = fx(f"measure/{name}")
    got = registry.TOOLS["dtnkit-cp"].parse(text)
    assert got == {
        "mover_bytes": 3000000,
        "mover_seconds": json.loads(text)["seconds"],
        "mover_rate_bps": rate,
        "mover_files": 1,
    }
    assert json.loads(text)["streams"] == streams
    # progress or notes before the summary line do not matter
    assert parse_cp_json("copying...\n" + text) == got


@pytest.mark.parametrize("text", ["", "copied 1 file(s)", '{"files": 1}', "{not json"])
def test_dtnkit_cp_parse_refuses_what_is_no_summary(text: str) -> None:
    with pytest.raises(ParseError, match="dtnkit cp --json"):
        parse_cp_json(text)


def test_command_parse_reads_nothing() -> None:
    """A command's output has no known form: its rate is bytes / wall time."""
    assert registry.TOOLS["command"].parse("[3.0MB/3.0MB][100%][==>][91MB/s]") == {}


# ---- conformance: real runs hold their probe's summary keys ------------------------------------
def conforms(spec: ProbeSpec, tool: str) -> dict[str, Any]:
    ok, reasons = registry.TOOLS[tool].can_run()
    if not ok:
        pytest.skip("; ".join(reasons))
    r = registry.run_probe(Host.live(), spec, tool=tool)
    assert r.kind == spec.kind and r.spec["tool"] == tool
    missing = set(registry.PROBES[spec.kind].summary_keys) - set(r.summary)
    assert not missing, r.summary
    assert r.summary["throughput_bps"] > 0
    assert r.raw  # the tool's own output, kept
    return r.as_dict()


def test_iperf3_conforms_on_localhost() -> None:
    doc = conforms(NetSpec("localhost", duration_s=1, port=free_port(), interval_s=0.5), "iperf3")
    assert doc["spec"]["peer_address"] == "127.0.0.1"
    assert json.loads(doc["raw"])["end"]["sum_received"]["bytes"] == doc["summary"]["bytes"]


def test_fio_conforms(tmp_path: Path) -> None:
    doc = conforms(DiskSpec(str(tmp_path), size_bytes=4 * 2**20, interval_s=60), "fio")
    assert doc["summary"]["throughput_bps"] == doc["summary"]["read_bps"]  # both bit/s


def test_command_conforms(tmp_path: Path) -> None:
    src = tmp_path / "src.bin"
    src.write_bytes(os.urandom(2**20))
    doc = conforms(
        E2ESpec(str(src), str(tmp_path / "dst.bin"), "cp -v {src} {dst}", interval_s=60), "command"
    )
    assert doc["summary"]["bytes"] == 2**20
    assert doc["spec"]["command_line"] == f"cp -v {src} {tmp_path / 'dst.bin'}"
    assert (tmp_path / "dst.bin").read_bytes() == src.read_bytes()


# ---- dtnkit cp end to end, through a real `dtnkit serve` ---------------------------------------
TOKEN = "dkm-probe-token"


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """``dtnkit serve`` on 127.0.0.1 as a subprocess: its URL and root."""
    with serve_subprocess(tmp_path, TOKEN) as served:
        yield served


def probe_e2e(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, Any]:
    capsys.readouterr()
    code = main(["probe", "e2e", *argv, "--interval", "0.5", "--format", "json"])
    return code, json.loads(capsys.readouterr().out)


def test_e2e_probe_moves_with_dtnkit_cp_by_default(
    served: tuple[str, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    url, root = served
    data = os.urandom(3 * 2**20 + 17)
    src = tmp_path / "src.bin"
    src.write_bytes(data)
    db = str(tmp_path / "results.sqlite")

    # upload: dtnkit cp reads its token from $DTNKIT_TOKEN, which the mover inherits
    monkeypatch.setenv("DTNKIT_TOKEN", TOKEN)
    code, up = probe_e2e(capsys, str(src), f"{url}up.bin", "--db", db)
    assert code == ExitStatus.OK, up
    assert (root / "up.bin").read_bytes() == data
    assert up["kind"] == "e2e" and up["spec"]["tool"] == "dtnkit-cp"
    assert up["spec"]["command_line"].endswith(f"cp {src} {url}up.bin -f --json")
    s = up["summary"]
    assert s["bytes"] == s["mover_bytes"] == len(data) and s["mover_files"] == 1
    assert s["throughput_bps"] == pytest.approx(len(data) * 8 / s["seconds"])
    assert 0 < s["mover_seconds"] <= s["seconds"]  # the process start is in the wall time
    assert any(k.startswith("sampler_") for k in s)  # the sampler ran beside the mover

    # download, anonymous; the stored result keeps dtnkit cp's JSON line as its raw output
    monkeypatch.delenv("DTNKIT_TOKEN")
    dst = tmp_path / "down.bin"
    code, down = probe_e2e(capsys, f"{url}up.bin", str(dst), "--db", db)
    assert code == ExitStatus.OK, down
    assert dst.read_bytes() == data and down["summary"]["bytes"] == len(data)
    capsys.readouterr()
    assert (
        main(["results", "show", str(down["id"]), "--db", db, "--format", "json"]) == ExitStatus.OK
    )
    stored = json.loads(capsys.readouterr().out)
    assert parse_cp_json(stored["raw"])["mover_bytes"] == len(data)


def test_e2e_probe_with_dtnkit_cp_names_its_failure(
    served: tuple[str, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    url, root = served
    monkeypatch.delenv("DTNKIT_TOKEN", raising=False)
    monkeypatch.delenv("BEARER_TOKEN", raising=False)
    src = tmp_path / "src.bin"
    src.write_bytes(b"x" * 4096)
    code, doc = probe_e2e(
        capsys, str(src), f"{url}up.bin", "--db", str(tmp_path / "r.sqlite")
    )  # no token: the server refuses the PUT
    assert code == ExitStatus.ERROR
    assert doc["error"]["what"] == "the transfer with dtnkit cp failed"
    # dtnkit cp's own error, said once: its what and why, then its next step
    assert doc["error"]["why"].startswith(f"PUT {url}up.bin: HTTP 401"), doc
    assert "dtnkit: error" not in doc["error"]["why"] and "Next" not in doc["error"]["why"]
    assert doc["error"]["next"].startswith("pass a valid --token-file"), doc
    assert not (root / "up.bin").exists()


def test_e2e_command_tool_still_needs_its_command(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, doc = probe_e2e(capsys, "a", "b", "--tool", "command", "--db", str(tmp_path / "r.sqlite"))
    assert code == ExitStatus.BAD_INPUT
    assert doc["error"]["what"] == "no transfer command"
    assert "--command" in doc["error"]["next"]


def test_e2e_with_a_command_uses_the_command_tool(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    if shutil.which("cp") is None:
        pytest.skip("no cp")
    src = tmp_path / "s"
    src.write_bytes(b"y" * 10000)
    code, doc = probe_e2e(
        capsys,
        str(src),
        str(tmp_path / "d"),
        "--command",
        "cp {src} {dst}",
        "--db",
        str(tmp_path / "r.sqlite"),
    )
    assert code == ExitStatus.OK, doc
    assert doc["spec"]["tool"] == "command" and doc["summary"]["bytes"] == 10000
