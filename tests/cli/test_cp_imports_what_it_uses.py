"""`dtnkit cp` imports what a copy uses and nothing else (its start-up is most of a short
copy's time: docs/benchmarks.md).  A real copy, `--streams auto` and verified, from a
`dtnkit serve` on loopback, run with ``python -X importtime``; the modules it imported are
read from what Python printed.  Left out until they are needed: urllib.request (a SciTags
registry given as a URL), the netlink decoders, the namespace helper and the captured
trees' runner (a Host of another namespace or a tree), rich (a terminal to draw the bar on),
the SciTags tables (a tag asked for), the other directions' modules (uploads, relays) and a
tree's listing (``-r``), third-party copy and its performance markers (``--tpc``).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from dtnkit.transfer import tokens
from dtnkit.transfer.server import start_server

TOKEN = "imports-token"
NOT_NEEDED = (
    "urllib.request",
    "dtnkit.host.kernel",
    "dtnkit.host.nshelper",
    "dtnkit.host.replay",
    "rich",
    "dtnkit.transfer.wire.scitags",
    "dtnkit.transfer.client.scitags",
    "dtnkit.transfer.client.upload",
    "dtnkit.transfer.client.relay",
    "dtnkit.transfer.client.tree",
    "dtnkit.transfer.wire.multistatus",
    "dtnkit.transfer.client.tpc",
    "dtnkit.transfer.wire.markers",
)


def imported(stderr: str) -> set[str]:
    """The modules `python -X importtime` says it imported."""
    names = set()
    for line in stderr.splitlines():
        if line.startswith("import time:") and line.count("|") == 2:
            names.add(line.rsplit("|", 1)[1].strip())
    return names


def test_a_copy_imports_no_module_it_does_not_use(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    data = os.urandom(3 * 2**20 + 5)
    (root / "f").write_bytes(data)
    token = tmp_path / "token"
    token.write_text(TOKEN + "\n")
    env = {k: v for k, v in os.environ.items() if "TOKEN" not in k}
    with start_server(root, tokens=tokens.parse(f"{TOKEN} read\n"), quiet=True) as server:
        done = subprocess.run(
            [
                sys.executable,
                "-X",
                "importtime",
                "-m",
                "dtnkit",
                "cp",
                "--streams",
                "auto",
                "--verify",
                "block",
                "--token-file",
                str(token),
                f"http://{server.host}:{server.port}/f",
                str(tmp_path / "copy"),
            ],
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
            check=False,
        )
    assert done.returncode == 0, done.stderr[-2000:]
    assert (tmp_path / "copy").read_bytes() == data
    names = imported(done.stderr)
    # what the copy does use is seen, so the reading of the output holds
    assert {"http.client", "dtnkit.transfer.client.engine", "dtnkit.host.host"} <= names
    loaded = sorted(n for n in names if n.split(".")[0] == "rich" or n in NOT_NEEDED)
    assert not loaded, loaded
