"""`dtnkit fleet campaign server start` is no open iperf3 server: it listens on the address the
campaign names (--bind), lets in only clients that hold the campaign's token (iperf3's RSA
authentication; the client is `dtnkit probe net --server-key`), and runs as nobody when root
starts it.  Real iperf3 in a namespace of the test's own."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from tests.conftest import Netns, taken

from dtnkit.cli.main import main
from dtnkit.environment import Environment
from dtnkit.errors import ExitStatus

DTNKIT = str(Path(sys.executable).with_name("dtnkit"))
TOKEN = "campaign-token-0123456789abcdef"


def dtnkit(ns: Netns, token: str | None, *argv: str) -> subprocess.CompletedProcess[str]:
    env = ["env", f"DTNKIT_TOKEN={token}"] if token else ["env", "-u", "DTNKIT_TOKEN"]
    return ns.run(*env, DTNKIT, *argv, check=False)


@pytest.mark.needs_root
@pytest.mark.needs_netns
@pytest.mark.skipif(shutil.which("iperf3") is None, reason="needs iperf3")
def test_only_the_campaigns_clients_get_in_on_the_named_address(tmp_path: Path) -> None:
    state = tmp_path / "state"
    with Netns("dkcs") as ns:
        ns.run("ip", "link", "set", "lo", "up")
        ns.run("ip", "addr", "add", "10.77.0.1/24", "dev", "dkv0")
        ns.run("ip", "addr", "add", "10.77.0.2/24", "dev", "dkv1")
        up = dtnkit(
            ns,
            TOKEN,
            "fleet",
            "campaign",
            "server",
            "start",
            "--port",
            "0",
            "--bind",
            "10.77.0.1",
            "--state-dir",
            str(state),
            "--format",
            "json",
        )
        assert up.returncode == 0, up.stderr
        doc: dict[str, Any] = json.loads(up.stdout)
        port = doc["port"]
        try:
            assert doc["user"] == "nobody" and doc["bind"] == "10.77.0.1"
            assert doc["public_key"].startswith("-----BEGIN PUBLIC KEY-----")
            assert TOKEN not in json.dumps(doc)
            key = tmp_path / "server.pub"
            key.write_text(doc["public_key"])
            assert Path(doc["pid_file"]).with_suffix(".pub").read_text() == doc["public_key"]
            # listening on the campaign's address only
            listeners = ns.run("ss", "-Hltn", f"sport = :{port}").stdout.split()
            assert f"10.77.0.1:{port}" in listeners, listeners
            other = ns.run("iperf3", "-c", "10.77.0.2", "-p", str(port), "-t", "1", check=False)
            assert other.returncode != 0 and "refused" in other.stdout + other.stderr
            # no authentication: refused
            plain = ns.run("iperf3", "-c", "10.77.0.1", "-p", str(port), "-t", "1", check=False)
            assert plain.returncode != 0, plain.stdout
            db = str(tmp_path / "results.sqlite")
            probe = [
                "probe",
                "net",
                "--peer",
                "10.77.0.1",
                "--port",
                str(port),
                "-t",
                "1",
                "--server-key",
                str(key),
                "--db",
                db,
                "--format",
                "json",
            ]
            wrong = dtnkit(ns, "not-the-campaign-token", *probe)
            assert wrong.returncode != 0 and "authoriz" in wrong.stderr, wrong.stderr
            good = dtnkit(ns, TOKEN, *probe)
            assert good.returncode == 0, good.stderr
            assert json.loads(good.stdout)["summary"]["throughput_bps"] > 0
            # the same campaign's start again keeps the server; another token replaces it
            again = json.loads(
                dtnkit(
                    ns,
                    TOKEN,
                    "fleet",
                    "campaign",
                    "server",
                    "start",
                    "--port",
                    str(port),
                    "--bind",
                    "10.77.0.1",
                    "--state-dir",
                    str(state),
                    "--format",
                    "json",
                ).stdout
            )
            assert again["started"] is False and again["pid"] == doc["pid"]
            assert again["public_key"] == doc["public_key"]
            new = json.loads(
                dtnkit(
                    ns,
                    "another-campaign",
                    "fleet",
                    "campaign",
                    "server",
                    "start",
                    "--port",
                    str(port),
                    "--bind",
                    "10.77.0.1",
                    "--state-dir",
                    str(state),
                    "--format",
                    "json",
                ).stdout
            )
            assert new["started"] is True and new["pid"] != doc["pid"]
            assert dtnkit(ns, TOKEN, *probe).returncode != 0  # the old key and token: out
        finally:
            dtnkit(
                ns,
                None,
                "fleet",
                "campaign",
                "server",
                "stop",
                "--port",
                str(port),
                "--state-dir",
                str(state),
                "--format",
                "json",
            )


@pytest.mark.parametrize(
    ("argv", "token", "why"),
    [
        (["--bind", "10.0.0.1"], None, "no campaign token"),
        (["--bind", "--port=1"], TOKEN, "bad address"),
        (["--bind", "a b"], TOKEN, "bad address"),
        (["--bind", ""], TOKEN, "bad address"),
    ],
)
def test_start_without_a_token_or_with_a_bad_address_is_one_error(
    environment: Environment, argv: list[str], token: str | None, why: str
) -> None:
    env = Environment(**{**environment.__dict__, "token": token})
    status = main(["fleet", "campaign", "server", "start", "--port", "0", *argv], env)
    err = taken(env.stderr)
    assert status == ExitStatus.BAD_INPUT, err
    assert err.startswith("dtnkit: error: ") and err.count("\n") == 1 and why in err, err
    assert not env.state_dir.exists()


def test_server_key_without_a_token_is_one_error(environment: Environment, tmp_path: Path) -> None:
    key = tmp_path / "k.pub"
    key.write_text("-----BEGIN PUBLIC KEY-----\n")
    status = main(
        [
            "probe",
            "net",
            "--peer",
            "192.0.2.1",
            "--server-key",
            str(key),
            "--db",
            str(tmp_path / "r.sqlite"),
        ],
        environment,
    )
    err = taken(environment.stderr)
    assert status == ExitStatus.BAD_INPUT and "--server-key without a token" in err, err
