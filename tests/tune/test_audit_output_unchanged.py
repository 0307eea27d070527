"""`dtnkit tune audit` prints exactly what it printed before the start-up work of issue 10.

The speed work (fewer imports, parsed once, faster reads of /proc) must not change a byte:
each case runs the tree at :data:`SAME_AS` (a `git archive` of its ``src``, run as ``python
-m dtnkit`` with that ``src`` first on the path) and this checkout's installed ``dtnkit``
command (as a site runs it), back to back, and compares stdout, stderr and the exit status.
Cases: this host (JSON and table, one group, ``--speed``), a namespace made here (JSON and
table) and a captured tree.  The host may change between two runs (another job adds a link):
a case that differs is run once more both ways before it counts.

:data:`SAME_AS` is the commit before that work; when the audit's output changes on purpose,
move it to that change's commit.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tarfile
from collections.abc import Iterator
from io import BytesIO
from pathlib import Path

import pytest
from tests.conftest import HOSTS, veth_peer_netns

#: the tree whose output the audit must keep: moved to each commit that changes the output on
#: purpose (here: hints that keep the scope, triples as arrays, one rate vocabulary, a
#: unique-local IPv6 address no longer counting as IPv6 present)
SAME_AS = "d0946b81cb783d3e2e68a23f9cf2bc7e15cf57f1"
REPO = Path(__file__).resolve().parents[2]
_SCRIPT = Path(sys.executable).parent / "dtnkit"
AFTER = [str(_SCRIPT)] if _SCRIPT.is_file() else [sys.executable, "-m", "dtnkit"]


@pytest.fixture(scope="module")
def before(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """The command line that runs the audit of SAME_AS (skips without git or that commit)."""
    if shutil.which("git") is None:
        pytest.skip("needs git to check out the tree before")
    archive = subprocess.run(
        ["git", "-C", str(REPO), "archive", SAME_AS, "src"], capture_output=True, check=False
    )
    if archive.returncode != 0:
        pytest.skip(f"commit {SAME_AS[:7]} is not in this checkout")
    tree = tmp_path_factory.mktemp("aud-before")
    with tarfile.open(fileobj=BytesIO(archive.stdout)) as tar:
        tar.extractall(tree)  # our own commit (3.11.2 has no filter=)
    return [
        sys.executable,
        "-c",
        f"import sys; sys.path.insert(0, {str(tree / 'src')!r}); "
        "import dtnkit; assert dtnkit.__file__.startswith(sys.path[0]), dtnkit.__file__; "
        "from dtnkit.cli.main import entry; sys.argv[0] = 'dtnkit'; entry()",
    ]


@pytest.fixture(scope="module")
def ns() -> Iterator[str]:
    """A namespace holding one end of a veth pair (its peer in a second namespace), up."""
    with veth_peer_netns("aud") as name:
        yield name


def _env() -> dict[str, str]:
    # as a site runs it; COLUMNS pins the table's width the same for both
    drop = ("PYTHONPATH", "DTNKIT_STATE_DIR", "COLUMNS")
    return {**{k: v for k, v in os.environ.items() if k not in drop}, "COLUMNS": "100"}


def _run(argv: list[str]) -> tuple[int, bytes, bytes]:
    proc = subprocess.run(argv, capture_output=True, check=False, env=_env(), timeout=60)
    return proc.returncode, proc.stdout, proc.stderr


def assert_same(before: list[str], args: list[str], *, ran: bool = True) -> None:
    pair = (_run([*before, *args]), _run([*AFTER, *args]))
    if pair[0] != pair[1]:  # the host may have changed between the two: once more
        pair = (_run([*before, *args]), _run([*AFTER, *args]))
    old, new = pair
    if ran:  # the audit ran (0: compliant, 3: not)
        assert old[0] in (0, 3), old[2].decode()
    assert new[0] == old[0], new[2].decode()
    assert new[2] == old[2]
    assert new[1] == old[1]


HOST_CASES = [
    ["--format", "json"],
    ["--format", "table"],
    ["--format", "table", "--wide"],
    ["--group", "buffers,checks", "--format", "json"],
    ["--speed", "25gbit", "--rtt", "50ms", "--format", "json"],
]


@pytest.mark.needs_root
@pytest.mark.needs_ethtool
@pytest.mark.parametrize("args", HOST_CASES, ids=lambda a: " ".join(a))
def test_host_audit_is_unchanged(before: list[str], args: list[str]) -> None:
    assert_same(before, ["tune", "audit", *args])


@pytest.mark.needs_root
@pytest.mark.needs_netns
@pytest.mark.needs_ethtool
@pytest.mark.parametrize("fmt", ["json", "table"])
def test_namespace_audit_is_unchanged(before: list[str], ns: str, fmt: str) -> None:
    assert_same(before, ["tune", "audit", "--netns", ns, "--format", fmt])


@pytest.mark.parametrize("fmt", ["json", "table"])
def test_tree_audit_is_unchanged(before: list[str], fmt: str) -> None:
    assert_same(before, ["tune", "audit", "--tree", str(HOSTS / "dtn-a"), "--format", fmt])


def test_errors_are_unchanged(before: list[str]) -> None:
    for args in (
        ["tune", "audit", "--group", "nosuch", "--format", "json"],
        ["tune", "audit", "--speed", "nan"],
        ["tune", "audit", "--bogus"],
        ["tune", "audit", "-h"],
    ):
        assert_same(before, args, ran=args[-1] == "-h")
