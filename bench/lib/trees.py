"""The trees an A/B case compares: this checkout, and ``--base REF`` checked out with
``git worktree`` into a temporary directory (removed at the end).  Each runs as
``python -m dtnkit`` with this interpreter and ``PYTHONPATH=<tree>/src``, so both use the same
Python and the same third-party packages."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from bench.lib.machine import Commit, git

REPO = Path(__file__).resolve().parents[2]
#: what a ref may look like: git's own rules are wider, but nothing a shell or git would read as
#: an option or a path outside the repository
REF = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_./~^@{}-]{0,199}$")
#: dtnkit's state an A/B run must not share with the user's (journals, state dir, database)
PRIVATE_STATE = ("XDG_STATE_HOME", "DTNKIT_STATE_DIR", "DTNKIT_DB", "DTNKIT_LAB_STATE")


class BaseError(Exception):
    """--base names nothing this bench can check out."""


@dataclass(frozen=True)
class Tree:
    label: str  # "this" / "base"
    root: Path
    commit: Commit
    ref: str | None = None  # what --base said

    @property
    def src(self) -> Path:
        return self.root / "src"

    def describe(self) -> str:
        ref = f"{self.ref} = " if self.ref else ""
        return f"{self.label}: {ref}{self.commit.short()} ({self.root})"

    def env(self, state: Path | None = None) -> dict[str, str]:
        """This environment with the tree's src first on the path and bytecode written (as
        an installed package has it); with *state*, dtnkit's state in a private directory."""
        env = {
            k: v
            for k, v in os.environ.items()
            if k not in ("PYTHONDONTWRITEBYTECODE", "PYTHONHOME", "DTNKIT_TOKEN", "BEARER_TOKEN")
        }
        env["PYTHONPATH"] = str(self.src)
        if state is not None:
            env.update(
                {
                    "XDG_STATE_HOME": str(state / "xdg"),
                    "DTNKIT_STATE_DIR": str(state / "state"),
                    "DTNKIT_DB": str(state / "results.sqlite"),
                    "DTNKIT_LAB_STATE": str(state / "lab"),
                }
            )
        return env

    def serve_takes(self, flag: str) -> bool:
        """Whether this tree's ``dtnkit serve`` has *flag* (a base may predate it)."""
        return flag in (self.src / "dtnkit/cli/serve.py").read_text()

    def dtnkit(self, *args: str) -> list[str]:
        return [sys.executable, "-m", "dtnkit", *args]

    def prefix(self) -> list[str]:
        """``env PYTHONPATH=<src>``: put before a command run in a namespace (``ip netns exec``
        passes the environment through, but a lab host's runner builds its own)."""
        return ["env", f"PYTHONPATH={self.src}"]

    def check_import(self) -> None:
        r = subprocess.run(
            [sys.executable, "-c", "import dtnkit; print(dtnkit.__file__)"],
            capture_output=True,
            text=True,
            env=self.env(),
            check=False,
        )
        where = Path(r.stdout.strip()).resolve() if r.returncode == 0 else None
        if where is None or not where.is_relative_to(self.src.resolve()):
            raise BaseError(
                f"{self.label}: dtnkit imports from {where or r.stderr.strip()}, "
                f"not from {self.src}"
            )


def this_tree() -> Tree:
    return Tree("this", REPO, Commit.of(REPO))


def resolve(ref: str, repo: Path = REPO) -> str:
    """The commit *ref* names in *repo*, or BaseError saying why not."""
    if not REF.match(ref) or ".." in ref:
        raise BaseError(
            f"--base {ref!r}: not a git ref (a branch, tag or commit, e.g. main or 3f4a80e)"
        )
    sha = git(repo, "rev-parse", "--verify", "--quiet", "--end-of-options", f"{ref}^{{commit}}")
    if not sha:
        raise BaseError(
            f"--base {ref!r}: no such commit in {repo} (`git log --oneline` lists them)"
        )
    return sha


@contextlib.contextmanager
def base_tree(ref: str, prefix: str, repo: Path = REPO) -> Iterator[Tree]:
    """*ref* checked out (detached) in a temporary worktree, removed on the way out."""
    sha = resolve(ref, repo)
    tmp = Path(tempfile.mkdtemp(prefix=f"dtnkit-bench-{prefix}-base-"))
    tmp.chmod(0o755)  # lab servers run as other users (XRootD) read the tree too
    wt = tmp / "tree"
    proc = subprocess.run(
        ["git", "-C", str(repo), "worktree", "add", "--detach", "--quiet", str(wt), sha],
        capture_output=True,
        text=True,
        check=False,
    )
    try:
        if proc.returncode != 0:
            raise BaseError(f"--base {ref}: git worktree add failed: {proc.stderr.strip()}")
        if not (wt / "src" / "dtnkit").is_dir():
            raise BaseError(f"--base {ref}: the tree has no src/dtnkit")
        yield Tree("base", wt, Commit(sha, False), ref)
    finally:
        subprocess.run(
            ["git", "-C", str(repo), "worktree", "remove", "--force", str(wt)],
            capture_output=True,
            check=False,
        )
        shutil.rmtree(tmp, ignore_errors=True)
        subprocess.run(
            ["git", "-C", str(repo), "worktree", "prune"], capture_output=True, check=False
        )
