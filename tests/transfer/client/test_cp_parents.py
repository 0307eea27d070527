"""`dtnkit cp -p/--parents`: the destination's missing parent collections are made (MKCOL,
one level at a time, a 405 "exists" of a concurrent maker tolerated), and without -p the
hint names the flag.  Uploads, relays and TPC pulls to a real `dtnkit serve` process and
to a real XRootD 5.5 (which makes the whole path itself: MKCOL answers 201 or 405); local
destinations of downloads like mkdir -p, without following a link made in their place.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, contextmanager
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.support.hostile_server import Reply, Request, hostile
from tests.support.xrootd import Pki, Xrootd, running_xrootd

from dtnkit.errors import ExitStatus
from dtnkit.transfer import files
from dtnkit.transfer.client.errors import FatalHttp
from dtnkit.transfer.client.request import CopyRequest, CopyRun
from dtnkit.transfer.client.session import Session, Url, make_parents

TOKEN = "parents-token"
DATA = os.urandom(3 * 2**20 + 7)  # more than one block: an upload session with --streams 4
PARENTS_HINT = "rerun with -p/--parents"


@contextmanager
def serve(root: Path, *extra: str) -> Iterator[str]:
    """`dtnkit serve ROOT` on 127.0.0.1, a port the kernel picks: its URL."""
    root.mkdir()
    tokens = root.parent / f"{root.name}.tokens"
    tokens.write_text(f"{TOKEN} read,write\n")
    tokens.chmod(0o600)
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "dtnkit",
            "serve",
            "--root",
            str(root),
            "--host",
            "127.0.0.1",
            "--port",
            "0",
            "--tokens",
            str(tokens),
            "--quiet",
            *extra,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        m = re.search(r"listening on (http://127\.0\.0\.1:\d+/)", proc.stdout.readline())
        assert m
        yield m.group(1)
    finally:
        proc.terminate()
        proc.communicate(timeout=30)


def cp(tmp_path: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    token = tmp_path / "token"
    token.write_text(TOKEN + "\n")
    env = {k: v for k, v in os.environ.items() if "TOKEN" not in k}
    return subprocess.run(
        [sys.executable, "-m", "dtnkit", "cp", *argv, "--token-file", str(token)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )


def one_error(done: subprocess.CompletedProcess[str]) -> str:
    err = done.stderr.strip()
    assert len(err.splitlines()) == 1 and err.count("Next:") == 1, err
    assert "Traceback" not in err
    return err


@pytest.fixture
def src(tmp_path: Path) -> Path:
    path = tmp_path / "f"
    path.write_bytes(DATA)
    return path


@pytest.mark.parametrize("streams", ["1", "4"])
def test_an_upload_into_missing_collections(tmp_path: Path, src: Path, streams: str) -> None:
    with serve(tmp_path / "srv") as url:
        target = url + "run7/raw/day1/f"
        done = cp(tmp_path, str(src), target, "--streams", streams)
        assert done.returncode == ExitStatus.REFUSED
        err = one_error(done)
        assert "HTTP 409" in err and err.endswith(
            "Next: rerun with -p/--parents to create the missing collections (MKCOL, one "
            "level at a time)"
        ), err
        assert not (tmp_path / "srv" / "run7").exists()  # nothing written

        done = cp(tmp_path, "-p", str(src), target, "--streams", streams)
        assert done.returncode == 0, done.stderr
        assert (tmp_path / "srv" / "run7" / "raw" / "day1" / "f").read_bytes() == DATA
        # again, into what exists now (the first MKCOL answers 405), under --parents
        done = cp(tmp_path, "--parents", "-f", str(src), target, "--streams", streams)
        assert done.returncode == 0, done.stderr


def test_trees_relays_and_tpc_pulls_make_their_parents(tmp_path: Path, src: Path) -> None:
    tree = tmp_path / "tree"
    (tree / "sub").mkdir(parents=True)
    (tree / "a").write_bytes(DATA[:1000])
    (tree / "sub" / "b").write_bytes(DATA[1000:5000])
    with ExitStack() as stack:
        one = stack.enter_context(serve(tmp_path / "one"))
        two = stack.enter_context(serve(tmp_path / "two", "--tpc-allow", "127.0.0.1"))
        (tmp_path / "one" / "f").write_bytes(DATA)
        cases = [
            (["-r", str(tree), one + "x/y/tree"], tmp_path / "one/x/y/tree/sub/b", DATA[1000:5000]),
            ([one + "f", two + "relay/d/f"], tmp_path / "two/relay/d/f", DATA),
            (
                [
                    "--tpc",
                    "pull",
                    one + "f",
                    two + "tpc/d/g",
                    "--remote-token-file",
                    str(tmp_path / "token"),
                ],
                tmp_path / "two/tpc/d/g",
                DATA,
            ),
        ]
        for argv, made, data in cases:
            done = cp(tmp_path, *argv)
            assert done.returncode == ExitStatus.REFUSED, (argv, done.stderr)
            assert PARENTS_HINT in one_error(done), argv
            done = cp(tmp_path, "-p", *argv)
            assert done.returncode == 0, (argv, done.stderr)
            assert made.read_bytes() == data, argv


def test_concurrent_makers_of_the_same_collections_all_succeed(tmp_path: Path, src: Path) -> None:
    """Eight copies into one new path at once: each MKCOL that finds the collection made by
    another meanwhile (405) goes on."""
    with serve(tmp_path / "srv") as url, ThreadPoolExecutor(8) as pool:
        runs = list(
            pool.map(lambda i: cp(tmp_path, "-p", str(src), f"{url}a/b/c/d/f{i}"), range(8))
        )
    assert all(r.returncode == 0 for r in runs), [r.stderr for r in runs]
    assert sorted(p.name for p in (tmp_path / "srv/a/b/c/d").iterdir()) == [
        f"f{i}" for i in range(8)
    ]


def test_a_file_where_a_collection_should_be_is_one_clear_error(tmp_path: Path, src: Path) -> None:
    with serve(tmp_path / "srv") as url:
        (tmp_path / "srv" / "plain").write_bytes(b"a file")
        done = cp(tmp_path, "-p", str(src), url + "plain/sub/f")
        assert done.returncode == ExitStatus.REFUSED
        err = one_error(done)
        assert "MKCOL" in err and "a file of that name?" in err, err
        assert (tmp_path / "srv" / "plain").read_bytes() == b"a file"


def test_a_download_makes_its_local_directories(tmp_path: Path) -> None:
    with serve(tmp_path / "srv") as url:
        (tmp_path / "srv" / "f").write_bytes(DATA)
        dest = tmp_path / "out" / "x" / "y" / "f"
        done = cp(tmp_path, url + "f", str(dest))
        assert done.returncode == ExitStatus.BAD_INPUT
        assert PARENTS_HINT in one_error(done)
        assert not (tmp_path / "out").exists()
        done = cp(tmp_path, "-p", url + "f", str(dest))
        assert done.returncode == 0, done.stderr
        assert dest.read_bytes() == DATA

        # a dangling link where a directory is to be made: not made through it
        (tmp_path / "elsewhere").mkdir()
        (tmp_path / "out" / "link").symlink_to(tmp_path / "elsewhere" / "missing")
        done = cp(tmp_path, "-p", url + "f", str(tmp_path / "out" / "link" / "z" / "f"))
        assert done.returncode == ExitStatus.BAD_INPUT
        assert "cannot be made" in one_error(done)
        assert list((tmp_path / "elsewhere").iterdir()) == []


# ----------------------------------------------------------------------------- pieces


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.text(
            st.characters(blacklist_categories=("Cs",), blacklist_characters="/?#\x00"),
            min_size=1,
            max_size=6,
        ),
        min_size=1,
        max_size=6,
    ),
    st.sampled_from(["", "?authz=abc"]),
    st.booleans(),
)
def test_the_parents_of_a_url_are_its_collections_nearest_first(
    names: list[str], query: str, slash: bool
) -> None:
    url = Url("http", "h", 80, "/x").child(names[0])
    for name in names[1:]:
        url = url.child(name)
    url = url.with_path(url.path + ("/" if slash else "") + query)
    parents = url.parents()
    bare = url.path.partition("?")[0].rstrip("/")
    assert len(parents) == bare.count("/") - 1  # /x/ and each name above the last one
    for parent in parents:
        path, _sep, q = parent.path.partition("?")
        assert path.endswith("/") and bare.startswith(path) and path != "/"
        assert q == query.lstrip("?")
    assert [len(p.path) for p in parents] == sorted((len(p.path) for p in parents), reverse=True)


@settings(max_examples=100, deadline=None)
@given(
    st.lists(
        st.text(
            st.characters(
                blacklist_categories=("Cs",),  # not UTF-8 names
                blacklist_characters="/\x00",
            ),
            min_size=1,
            max_size=8,
        ).filter(lambda n: n not in (".", "..")),
        min_size=1,
        max_size=5,
    )
)
def test_make_dirs_makes_each_missing_level_once(
    tmp_path_factory: pytest.TempPathFactory, names: list[str]
) -> None:
    base = tmp_path_factory.mktemp("mkd")
    path = base.joinpath(*names)
    assert files.make_dirs(path) == len(names)
    assert path.is_dir()
    assert files.make_dirs(path) == 0


def test_make_dirs_names_what_is_in_the_way(tmp_path: Path) -> None:
    (tmp_path / "a").write_bytes(b"")
    with pytest.raises(NotADirectoryError) as got:
        files.make_dirs(tmp_path / "a" / "b" / "c")
    assert got.value.filename == str(tmp_path / "a")


@pytest.mark.parametrize(
    ("answers", "made", "error"),
    [
        ({}, 1, None),  # the parent made at once
        ({"/a/b/": [409, 201], "/a/": [201]}, 2, None),  # one level up, then down
        ({"/a/b/": [405]}, 0, None),  # there already
        ({"/a/b/": [409, 405], "/a/": [201]}, 1, None),  # made meanwhile by another client
        ({"/a/b/": [409, 409], "/a/": [405]}, 0, "cannot make it in its parent"),
        ({"/a/b/": [403]}, 0, "forbidden"),
        ({"/a/b/": [500, 500, 500, 500]}, 0, "500"),
    ],
)
def test_mkcol_answers_from_any_server(
    answers: dict[str, list[int]], made: int, error: str | None
) -> None:
    """A server's answers to the MKCOLs of -p, whatever they are: made, exists, a clear
    error (FatalHttp or a transfer error), never a traceback or a loop."""
    left = {k: list(v) for k, v in answers.items()}

    def script(req: Request) -> Reply:
        assert req.method == "MKCOL"
        queue = left.get(req.target)
        return Reply(queue.pop(0) if queue else 201, body=b"answer\n")

    with hostile(script) as server:
        url = Url.parse(server.url("/a/b/f"))
        session = Session(url, CopyRun.of(CopyRequest(retries=1, backoff=0.01)))
        if error is None:
            assert make_parents(session, url) == made
        else:
            with pytest.raises(FatalHttp if error != "500" else Exception) as got:
                make_parents(session, url)
            assert error in str(got.value)
        assert len(server.requests) < 10


# ----------------------------------------------------------------------------- XRootD


@pytest.fixture(scope="module")
def xrd(pki: Pki) -> Iterator[Xrootd]:
    with running_xrootd(pki) as server:
        yield server


@pytest.mark.needs_xrootd
@pytest.mark.parametrize("streams", ["1", "4"])
def test_an_upload_to_xrootd_with_parents(
    xrd: Xrootd, pki: Pki, tmp_path: Path, src: Path, streams: str
) -> None:
    """XRootD makes a PUT's whole path itself (and answers MKCOL of a path with missing
    parents 201): -p gets 201 or 405 and the upload lands; twice, the second into what
    exists."""
    target = "davs://" + xrd.url[len("https://") :] + f"p{streams}/q/r/f"
    for force in ([], ["-f"]):
        done = cp(
            tmp_path,
            "-p",
            str(src),
            target,
            "--ca-file",
            str(pki.ca_file),
            "--streams",
            streams,
            *force,
        )
        assert done.returncode == 0, done.stderr
    assert (xrd.root / f"p{streams}" / "q" / "r" / "f").read_bytes() == DATA
