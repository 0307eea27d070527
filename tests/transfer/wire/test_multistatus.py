"""WebDAV multistatus: build (server) and parse (client), sans-I/O."""

from __future__ import annotations

import xml.sax.saxutils

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dtnkit.transfer import paths
from dtnkit.transfer.wire import multistatus

_names = st.text(
    st.characters(codec="utf-8", exclude_categories=("Cs", "Cc")), min_size=1, max_size=20
).filter(lambda n: n not in (".", "..") and "/" not in n)


@given(
    st.lists(
        st.tuples(_names, st.booleans(), st.integers(0, 2**50)),
        unique_by=lambda t: t[0],
        max_size=10,
    )
)
def test_build_parse_round_trip(members: list[tuple[str, bool, int]]) -> None:
    own = multistatus.Entry("/dir/", True, 0, 1_700_000_000.0, '"d"')
    entries = [own] + [
        multistatus.Entry(
            "/dir/" + paths.href(name), is_dir, 0 if is_dir else size, 1_700_000_000.0, '"e&<x>"'
        )
        for name, is_dir, size in members
    ]
    body = multistatus.build(entries).encode("utf-8")
    got = multistatus.parse(body, "/dir")
    want = [
        multistatus.Member(e.href + ("/" if e.is_dir else ""), e.is_dir, e.size)
        for e in entries[1:]
    ]
    assert got == want


def test_build_shape() -> None:
    body = multistatus.build(
        [
            multistatus.Entry("/a b", False, 3, 0.0, '"t"'),
            multistatus.Entry("/d", True, 4096, 0.0, '"u"'),
        ]
    )
    assert body.startswith('<?xml version="1.0" encoding="utf-8"?>\n<D:multistatus')
    assert "<D:href>/a b</D:href>" in body and "<D:getcontentlength>3</D:getcontentlength>" in body
    assert "<D:href>/d/</D:href>" in body and "<D:collection/>" in body
    assert "Thu, 01 Jan 1970 00:00:00 GMT" in body and "&quot;" not in body
    assert body.count("<D:getcontentlength>") == 1  # not for a collection


def test_parse_like_the_client() -> None:
    body = b"""<?xml version="1.0"?><d:multistatus xmlns:d="DAV:">
      <d:response><d:href>https://h:1/x/</d:href><d:propstat><d:prop><d:resourcetype>
        <d:collection/></d:resourcetype></d:prop></d:propstat></d:response>
      <d:response><d:href>https://h:1/x/f%20g</d:href><d:propstat><d:prop>
        <d:getcontentlength>12</d:getcontentlength></d:prop></d:propstat></d:response>
      <d:response><d:href>/x/sub/</d:href><d:propstat><d:prop><d:resourcetype>
        <d:collection/></d:resourcetype></d:prop></d:propstat></d:response>
      <d:response><d:href>/x/nolen</d:href></d:response>
    </d:multistatus>"""
    got = [m[:3] for m in multistatus.parse(body, "/x/")]
    assert got == [("/x/f%20g", False, 12), ("/x/sub/", True, 0), ("/x/nolen", False, 0)]


def test_parse_rejections() -> None:
    with pytest.raises(multistatus.ListingError):
        multistatus.parse(b"<not xml", "/")
    bad = (
        b'<D:multistatus xmlns:D="DAV:"><D:response><D:href>/a</D:href>'
        b"<D:getcontentlength>ten</D:getcontentlength></D:response></D:multistatus>"
    )
    with pytest.raises(ValueError):
        multistatus.parse(bad, "/")
    assert multistatus.parse(b'<D:multistatus xmlns:D="DAV:"/>', "/") == []


@given(st.text())
def test_xml_escape_is_saxutils_escape(text: str) -> None:
    """multistatus escapes as xml.sax.saxutils.escape does (without importing xml.sax)."""
    assert multistatus.xml_escape(text) == xml.sax.saxutils.escape(text)
