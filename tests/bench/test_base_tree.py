"""``--base REF``: the baseline is a git ref given on the command line, checked out with
``git worktree`` into a temporary directory and removed at the end; a ref that git could read
as an option, a range or a path outside the repository is refused before git runs."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from bench.lib.trees import BaseError, base_tree, resolve
from hypothesis import given
from hypothesis import strategies as st

ROOT = Path(__file__).resolve().parents[2]


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), *args], capture_output=True, text=True, check=True
    ).stdout.strip()


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A repository with two commits of a src/dtnkit."""
    r = tmp_path / "repo"
    (r / "src" / "dtnkit").mkdir(parents=True)
    git(tmp_path, "init", "-q", str(r))
    for n in ("1", "2"):
        (r / "src" / "dtnkit" / "__init__.py").write_text(f"VERSION = {n}\n")
        git(r, "add", "-A")
        git(r, "-c", "user.name=t", "-c", "user.email=t@example.org", "commit", "-qm", n)
    return r


def test_the_base_is_checked_out_at_its_commit_and_removed_after(repo: Path) -> None:
    first = git(repo, "rev-parse", "HEAD~1")
    with base_tree("HEAD~1", "hbtest", repo) as tree:
        assert tree.commit.sha == first and tree.ref == "HEAD~1"
        assert (tree.src / "dtnkit" / "__init__.py").read_text() == "VERSION = 1\n"
        assert str(tree.root) in git(repo, "worktree", "list")
        where = tree.root
    assert not where.exists() and not where.parent.exists()
    assert str(where) not in git(repo, "worktree", "list")
    assert (repo / "src" / "dtnkit" / "__init__.py").read_text() == "VERSION = 2\n"


def test_the_base_tree_runs_first_on_the_path(repo: Path) -> None:
    with base_tree("HEAD~1", "hbtest", repo) as tree:
        got = subprocess.run(
            [sys.executable, "-c", "import dtnkit; print(dtnkit.VERSION)"],
            capture_output=True,
            text=True,
            env=tree.env(),
            check=True,
        )
        assert got.stdout.strip() == "1"


@pytest.mark.parametrize(
    "ref",
    [
        "--output=/tmp/hb-pwned",
        "-b",
        "HEAD;touch /tmp/hb-pwned",
        "../../etc",
        "main..HEAD",
        "",
        "a b",
        "$(id)",
        "nosuchref",
    ],
)
def test_a_bad_ref_is_refused_before_anything_is_made(repo: Path, ref: str) -> None:
    worktrees = git(repo, "worktree", "list")
    with pytest.raises(BaseError, match="--base"), base_tree(ref, "hbtest", repo):
        pass
    assert git(repo, "worktree", "list") == worktrees
    assert not Path("/tmp/hb-pwned").exists()


@given(st.text(max_size=30))
def test_resolve_returns_a_commit_or_refuses(ref: str) -> None:
    try:
        sha = resolve(ref, ROOT)
    except BaseError as exc:
        assert "--base" in str(exc)
    else:
        assert len(sha) == 40 and int(sha, 16) >= 0


def test_the_command_line_refuses_a_bad_base_in_one_line() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "bench", "cp-start", "--base", "--upload-pack=touch /tmp/hb-pwned"],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
        cwd=ROOT,
    )
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr and "error:" in proc.stderr.splitlines()[-1]
    assert not Path("/tmp/hb-pwned").exists()
