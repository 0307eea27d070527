"""Habits of the people who use gfal-copy and xrdcp, over real sockets against in-process
``dtnkit serve`` instances on 127.0.0.1: ``dav://``/``davs://`` URLs, ``root://`` refused
with a hint, no overwrite of an existing destination without ``-f``, ``-K``, ``--format
json``, rates in bit/s and digests in hex."""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.conftest import taken

from dtnkit.cli.main import main
from dtnkit.environment import Environment
from dtnkit.errors import BadInput, ExitStatus
from dtnkit.transfer import tokens
from dtnkit.transfer.client.session import Url, is_url
from dtnkit.transfer.server import ServerHandle, start_server

TOKEN = "habits-rw"
SIZE = 3 * 65536 + 777


def payload(size: int = SIZE, seed: int = 11) -> bytes:
    return random.Random(seed).randbytes(size)


def _serve(root: Path) -> ServerHandle:
    root.mkdir(exist_ok=True)
    return start_server(root, host="127.0.0.1", port=0, quiet=True, marker_interval=0.2,
                        tokens=tokens.parse(f"{TOKEN} read,write\n"))


@pytest.fixture
def served(tmp_path: Path) -> Iterator[ServerHandle]:
    handle = _serve(tmp_path / "srv")
    try:
        yield handle
    finally:
        handle.stop()


@pytest.fixture
def pair(tmp_path: Path) -> Iterator[tuple[ServerHandle, ServerHandle]]:
    a = _serve(tmp_path / "a")
    try:
        b = _serve(tmp_path / "b")
    except BaseException:
        a.stop()
        raise
    try:
        yield a, b
    finally:
        a.stop()
        b.stop()


def dav(handle: ServerHandle, path: str = "") -> str:
    """The server's URL as gfal users write it: dav:// for plain HTTP."""
    assert handle.url.startswith("http://")
    return "dav://" + handle.url[len("http://"):] + path


def cp(environment: Environment, *argv: str) -> tuple[int, str, str]:
    code = main(["cp", *argv, "--token", TOKEN, "--block-size", "65536"], environment)
    return code, taken(environment.stdout), taken(environment.stderr)


def one_error_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("dtnkit: error: ") and "Traceback" not in err
    return lines[0]


# --------------------------------------------------------------------------- URL schemes


def test_dav_and_davs_urls_are_http_and_https() -> None:
    assert Url.parse("davs://dtn.example:1094/store/f") == Url.parse(
        "https://dtn.example:1094/store/f")
    assert Url.parse("dav://dtn.example/data/f?authz=x") == Url.parse(
        "http://dtn.example:80/data/f?authz=x")
    assert Url.parse("DAVS://dtn.example/f").scheme == "https"
    assert is_url("davs://dtn.example/f") and is_url("dav://dtn.example/f")


@pytest.mark.parametrize("url", ["root://eos.example//eos/f", "xroot://eos.example:1094//f",
                                 "roots://eos.example//f"])
def test_root_urls_are_refused_with_a_hint(url: str) -> None:
    assert is_url(url)  # a URL, so never taken for a local path
    with pytest.raises(BadInput) as caught:
        Url.parse(url)
    text = caught.value.render()
    assert "davs://" in text and "xrdcp" in text


def test_cp_root_url_is_one_line_and_writes_nothing(tmp_path: Path,
                                                    environment: Environment) -> None:
    src = tmp_path / "f"
    src.write_bytes(b"x")
    code, out, err = cp(environment, str(src), "root://eos.example//eos/f")
    assert code == ExitStatus.BAD_INPUT and out == ""
    line = one_error_line(err)
    assert "root://" in line and "davs://eos.example:1094/" in line and "xrdcp" in line
    code, _out, err = cp(environment, "root://eos.example//eos/f", str(tmp_path / "g"))
    assert code == ExitStatus.BAD_INPUT
    one_error_line(err)
    assert not (tmp_path / "g").exists()


def test_cp_dav_download_upload_and_tree(served: ServerHandle, tmp_path: Path,
                                         environment: Environment) -> None:
    data = payload()
    src = tmp_path / "up.bin"
    src.write_bytes(data)
    code, _out, err = cp(environment, str(src), dav(served, "up.bin"), "--streams", "2")
    assert code == 0, err
    assert (served.root / "up.bin").read_bytes() == data
    code, _out, err = cp(environment, dav(served, "up.bin"), str(tmp_path / "down.bin"),
                         "--streams", "2")
    assert code == 0, err
    assert (tmp_path / "down.bin").read_bytes() == data
    (served.root / "tree" / "sub").mkdir(parents=True)
    (served.root / "tree" / "sub" / "leaf").write_bytes(data[:1000])
    code, _out, err = cp(environment, "-r", dav(served, "tree"), str(tmp_path / "copy"))
    assert code == 0, err
    assert (tmp_path / "copy" / "sub" / "leaf").read_bytes() == data[:1000]


def test_cp_tpc_with_dav_urls(pair: tuple[ServerHandle, ServerHandle],
                              environment: Environment) -> None:
    a, b = pair
    data = payload()
    (a.root / "x").write_bytes(data)
    for mode, name in (("pull", "pulled"), ("push", "pushed")):
        code, _out, err = cp(environment, "--tpc", mode, "--remote-token", TOKEN,
                             dav(a, "x"), dav(b, name))
        assert code == 0, err
        assert (b.root / name).read_bytes() == data
