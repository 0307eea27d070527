"""`dtnkit cp` against a hostile server (tests/support/hostile_server.py: real sockets, any
answer): listings that point outside the destination, bombs, endless trees, wrong ranges,
negative lengths, a tampered resume journal, a bad certificate, a TPC refused.

Each case is one error line with its exit status, no traceback, and nothing written where it
must not be.
"""

from __future__ import annotations

import json
import os
import random
import ssl
from pathlib import Path

import pytest
from tests.conftest import taken
from tests.support.hostile_server import Reply, Request, Script, hostile, multistatus, ranged
from tests.support.xrootd import Pki

from dtnkit.cli.main import main
from dtnkit.environment import Environment
from dtnkit.transfer.client.journals import journal_path, part_path, save_journal
from dtnkit.transfer.client.request import CopyRequest, CopyRun
from dtnkit.transfer.client.session import Session, Url

BLOCK = 64 * 1024
DATA = random.Random(5).randbytes(3 * BLOCK + 100)


def cli(env: Environment, *argv: str) -> tuple[int, str]:
    """Exit status and stderr of one in-process `dtnkit` run (a traceback fails the test)."""
    code = main(list(argv), env)
    return code, taken(env.stderr)


def one_error_line(err: str) -> str:
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("dtnkit: error: "), err
    assert "Traceback" not in err
    return lines[0]


def files_under(path: Path) -> list[str]:
    return sorted(str(p.relative_to(path)) for p in path.rglob("*"))


def listing(tree: dict[str, list[tuple[str, bool, int]]], data: bytes = b"x") -> Script:
    """PROPFIND answers from *tree* (path -> members, hrefs as given); GET/HEAD serve *data*."""
    files = ranged(data)

    def script(req: Request) -> Reply:
        if req.method == "PROPFIND":
            path = req.target.partition("?")[0]
            if path in tree:
                return Reply(
                    207, [("Content-Type", "application/xml")], multistatus(path, tree[path])
                )
            return Reply(404, [], b"no")
        return files(req)

    return script


# --------------------------------------------------------------------------- 1: hrefs


ESCAPES = [
    "/d/..%2F..%2Fescaped",  # decodes to ../../escaped
    "/d/%2Ftmp%2Fescaped",  # decodes to an absolute path
    "/d/..",
    "/d/.",
    "/d/a%2Fb",  # a separator inside the name
    "/d/a%00b",  # NUL
    "/d/%2E%2E",  # .. encoded
    "/elsewhere/escaped",  # not under the listed collection
    "/d/sub/escaped",  # not directly under it
    "http://127.0.0.1:1/d/escaped",  # another origin
    "/d/a%5Cb",  # a backslash
]


@pytest.mark.parametrize("href", ESCAPES)
def test_recursive_download_refuses_hrefs_outside_the_destination(
    href: str, tmp_path: Path, environment: Environment
) -> None:
    dst = tmp_path / "a" / "b" / "dst"
    dst.parent.mkdir(parents=True)
    tree = {"/d/": [("/d/fine", False, 1), (href, False, 1)]}
    with hostile(listing(tree)) as srv:
        code, err = cli(environment, "cp", "-r", "--retries", "0", srv.url("/d/"), str(dst))
    line = one_error_line(err)
    assert code == 22, err
    assert "listing" in line
    assert not (tmp_path / "escaped").exists()
    assert files_under(tmp_path) == ["a", "a/b", "a/b/dst"]  # nothing fetched at all


@pytest.mark.parametrize("href", ["/d/..", "/d/..%2Fescaped", "/elsewhere/x/", "/d/."])
def test_relay_refuses_hrefs_outside_the_destination(href: str, environment: Environment) -> None:
    """The destination is a naive server that would store any PUT: the client must send
    none (before the fix it sent PUT /up/in/.. , i.e. /up)."""

    def naive(req: Request) -> Reply:
        return Reply(201 if req.method in ("PUT", "MKCOL") else 404, [], b"")

    tree = {"/d/": [(href, href.endswith("/"), 1)], "/elsewhere/x/": [("/elsewhere/x/f", False, 1)]}
    with hostile(listing(tree)) as srv, hostile(naive) as dst:
        code, err = cli(
            environment,
            "cp",
            "-r",
            "--retries",
            "0",
            "--verify",
            "none",
            srv.url("/d/"),
            dst.url("/up/in"),
        )
        stored = [r.target for r in dst.requests if r.method == "PUT"]
    one_error_line(err)
    assert code == 22, err
    assert stored == []


def test_a_normal_listing_still_copies(tmp_path: Path, environment: Environment) -> None:
    """Percent-encoded names and full-URL hrefs of the same origin are fine."""
    tree: dict[str, list[tuple[str, bool, int]]] = {
        "/d/": [("/d/a%20b", False, len(DATA))],
        "/d/s/": [("/d/s/f", False, len(DATA))],
    }
    with hostile(listing(tree, DATA)) as srv:
        tree["/d/"].append((srv.url("/d/s/"), True, 0))
        code, err = cli(environment, "cp", "-r", srv.url("/d/"), str(tmp_path / "out"))
    assert code == 0, err
    assert (tmp_path / "out" / "a b").read_bytes() == DATA
    assert (tmp_path / "out" / "s" / "f").read_bytes() == DATA


# --------------------------------------------------------------------------- 12: listings


BOMB = b"""<?xml version="1.0"?>
<!DOCTYPE lolz [<!ENTITY lol "lollollollollollollollollollol">
<!ENTITY lol2 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">
<!ENTITY lol3 "&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;">
<!ENTITY lol4 "&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;">
<!ENTITY lol5 "&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;">
<!ENTITY lol6 "&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;">
<!ENTITY lol7 "&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;">
<!ENTITY lol8 "&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;">
<!ENTITY lol9 "&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;">
]>
<D:multistatus xmlns:D="DAV:"><D:response><D:href>&lol9;</D:href></D:response></D:multistatus>
"""

EXTERNAL = b"""<?xml version="1.0"?>
<!DOCTYPE x [<!ENTITY ext SYSTEM "file:///etc/hostname">]>
<D:multistatus xmlns:D="DAV:"><D:response><D:href>/d/&ext;</D:href></D:response>
</D:multistatus>
"""


@pytest.mark.parametrize(
    "body",
    [
        BOMB,
        EXTERNAL,
        b"<not xml",
        b"\xff\xfe<D:x/>",
        b"<D:multistatus xmlns:D='DAV:'>" + b"<D:x>" * 5000,
    ],
)
def test_a_hostile_listing_body_is_one_error(
    body: bytes, tmp_path: Path, environment: Environment
) -> None:
    def script(req: Request) -> Reply:
        return Reply(207, [("Content-Type", "application/xml")], body)

    with hostile(script) as srv:
        code, err = cli(
            environment, "cp", "-r", "--retries", "0", srv.url("/d/"), str(tmp_path / "out")
        )
    line = one_error_line(err)
    assert code == 22, err
    assert "PROPFIND" in line


def test_an_endless_tree_stops_at_the_depth_limit(tmp_path: Path, environment: Environment) -> None:
    """Every collection holds a collection `s/`: no recursion error, one line, exit 22."""

    def script(req: Request) -> Reply:
        path = req.target.partition("?")[0]
        return Reply(
            207, [("Content-Type", "application/xml")], multistatus(path, [(path + "s/", True, 0)])
        )

    with hostile(script) as srv:
        code, err = cli(
            environment, "cp", "-r", "--retries", "0", srv.url("/d/"), str(tmp_path / "out")
        )
        asked = srv.methods().count("PROPFIND")
    line = one_error_line(err)
    assert code == 22, err
    assert "deeper than" in line
    assert asked <= 257


# --------------------------------------------------------------------------- 11: ranges


def shifted(data: bytes, how: str) -> Script:
    """A file server whose 206 answers carry the wrong Content-Range (or body)."""
    honest = ranged(data)

    def script(req: Request) -> Reply:
        reply = honest(req)
        asked = req.headers.get("range", "").partition("=")[2].split("-")
        if reply.status != 206 or asked[0] in ("", "0"):
            return reply  # a range from 0 (or none) is honest: the later one is not
        size = len(data)
        heads = [(k, v) for k, v in reply.headers if k != "Content-Range"]
        a, b = int(asked[0]), int(asked[1])
        if how == "other-bytes":  # the bytes of another range, labelled as such
            return Reply(
                206, [*heads, ("Content-Range", f"bytes 0-{b - a}/{size}")], data[: b - a + 1]
            )
        if how == "other-total":
            return Reply(206, [*heads, ("Content-Range", f"bytes {a}-{b}/{size + 7}")], reply.body)
        if how == "no-header":
            return Reply(206, heads, reply.body)
        if how == "garbage":
            return Reply(206, [*heads, ("Content-Range", "bytes ²-³/⁴")], reply.body)
        if how == "star":
            return Reply(206, [*heads, ("Content-Range", f"bytes {a}-{b}/*")], reply.body)
        raise AssertionError(how)

    return script


@pytest.mark.parametrize("how", ["other-bytes", "other-total", "no-header", "garbage", "star"])
def test_a_206_for_other_bytes_is_never_committed(
    how: str, tmp_path: Path, environment: Environment
) -> None:
    dst = tmp_path / "f"
    with hostile(shifted(DATA, how)) as srv:
        # two streams: one GET per span, so the second span's range is asked on its own
        code, err = cli(
            environment,
            "cp",
            "--verify",
            "none",
            "--retries",
            "0",
            "--streams",
            "2",
            "--block-size",
            str(BLOCK),
            srv.url("/f"),
            str(dst),
        )
    line = one_error_line(err)
    assert code == 22, err
    assert "Content-Range" in line
    assert not dst.exists()


def test_a_tampered_journal_and_part_file_are_not_committed(
    tmp_path: Path, environment: Environment
) -> None:
    """Under --verify none nothing can check kept blocks: the run starts over."""
    dst = tmp_path / "f"
    with hostile(ranged(DATA)) as srv:
        url = Url.parse(srv.url("/f"))
        options = CopyRequest(block_size=BLOCK, verify="none")  # type: ignore[arg-type]
        info = Session(url, CopyRun.of(options)).head(url)
        part = part_path(dst)
        part.write_bytes(b"\0" * len(DATA))  # "every block done": zeros
        fd = os.open(part, os.O_RDWR)
        try:
            assert save_journal(dst, url, info, options, fd, {0, 1, 2, 3}, None, set())
        finally:
            os.close(fd)
        code, err = cli(
            environment,
            "cp",
            "--verify",
            "none",
            "--block-size",
            str(BLOCK),
            srv.url("/f"),
            str(dst),
        )
    assert code == 0, err
    assert dst.read_bytes() == DATA


# --------------------------------------------------------------------------- 12: answers


@pytest.mark.parametrize(
    "length", ["-5", "²", "1e3", " 12 34", "99999999999999999999999999", str(2**62)]
)  # before: planned 2**39 blocks (RSS grew)
def test_a_bad_content_length_is_one_error(
    length: str, tmp_path: Path, environment: Environment
) -> None:
    def script(req: Request) -> Reply:
        return Reply(
            200,
            [("Content-Length", length), ("ETag", '"x"'), ("Accept-Ranges", "bytes")],
            b"",
            length=False,
            close=True,
        )

    with hostile(script) as srv:
        code, err = cli(environment, "cp", "--retries", "0", srv.url("/f"), str(tmp_path / "f"))
    line = one_error_line(err)
    assert code == 22, err
    assert "Content-Length" in line
    assert files_under(tmp_path) == []


def test_the_journal_is_private_and_keeps_no_query(
    tmp_path: Path, environment: Environment
) -> None:
    """A download that fails half-way keeps a journal: mode 0600, the URL's query (a
    pre-signed secret) not in it."""
    honest = ranged(DATA)

    def script(req: Request) -> Reply:
        asked = req.headers.get("range", "bytes=0-")  # none: the whole file
        if req.method == "GET" and not asked.startswith("bytes=0-"):
            return Reply(500, [], b"broken")
        reply = honest(req)
        if req.method == "GET":  # one GET for the whole file: it breaks off after block 0
            whole = str(len(reply.body))
            reply = Reply(
                reply.status,
                [*reply.headers, ("Content-Length", whole)],
                reply.body[:BLOCK],
                close=True,
            )
        return reply

    dst = tmp_path / "f"
    with hostile(script) as srv:
        code, err = cli(
            environment,
            "cp",
            "--retries",
            "0",
            "--block-size",
            str(BLOCK),
            srv.url("/f?authz=SECRET-SIGNATURE"),
            str(dst),
        )
    assert code == 20, err
    journal = journal_path(dst)
    assert journal.stat().st_mode & 0o777 == 0o600
    text = journal.read_text()
    assert "SECRET" not in text
    assert json.loads(text)["done"] == [0]


# --------------------------------------------------------------------------- 12: TLS, TPC


def test_a_certificate_failure_is_refused_at_once(
    pki: Pki, tmp_path: Path, environment: Environment
) -> None:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(pki.cert, pki.key)
    with hostile(ranged(DATA), ctx) as srv:
        code, err = cli(environment, "cp", "--retries", "3", srv.url("/f"), str(tmp_path / "f"))
        tries = srv.accepted
    line = one_error_line(err)
    assert code == 22, err
    assert "--ca-file" in line and "certificate" in line
    assert "is the server up" not in line
    assert tries == 1
    assert not (tmp_path / "f").exists()


def test_tpc_sends_no_token_to_the_other_server_by_default(environment: Environment) -> None:
    def script(req: Request) -> Reply:
        if req.method == "COPY":
            return Reply(202, [("Content-Type", "text/plain")], b"success: Created\n", close=True)
        return Reply(200, [("Content-Length", "0")], length=False)

    with hostile(script) as srv:
        code, err = cli(
            environment,
            "cp",
            "--tpc",
            "pull",
            "-f",
            "--token",
            "MINE",
            "http://127.0.0.1:1/src",
            srv.url("/dst"),
        )
        copies = [r for r in srv.requests if r.method == "COPY"]
    assert code == 0, err
    assert len(copies) == 1
    assert copies[0].headers["authorization"] == "Bearer MINE"
    assert not any(k.startswith("transferheader") for k in copies[0].headers)


def test_tpc_remote_token_is_forwarded_when_given(environment: Environment) -> None:
    def script(req: Request) -> Reply:
        if req.method == "COPY":
            return Reply(202, [], b"success: Created\n", close=True)
        return Reply(200, [("Content-Length", "0")], length=False)

    with hostile(script) as srv:
        code, err = cli(
            environment,
            "cp",
            "--tpc",
            "pull",
            "-f",
            "--token",
            "MINE",
            "--remote-token",
            "THEIRS",
            "http://127.0.0.1:1/src",
            srv.url("/dst"),
        )
        copy = next(r for r in srv.requests if r.method == "COPY")
    assert code == 0, err
    assert copy.headers["transferheaderauthorization"] == "Bearer THEIRS"


@pytest.mark.parametrize("status", [401, 403])
def test_a_refused_tpc_exits_22(status: int, environment: Environment) -> None:
    def script(req: Request) -> Reply:
        if req.method == "COPY":
            return Reply(status, [], b"no")
        return Reply(404, [], b"")

    with hostile(script) as srv:
        code, err = cli(
            environment,
            "cp",
            "--tpc",
            "pull",
            "-f",
            "--token",
            "x",
            "http://127.0.0.1:1/src",
            srv.url("/dst"),
        )
    one_error_line(err)
    assert code == 22, err
