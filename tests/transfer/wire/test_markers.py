"""HTTP-TPC performance markers: format (server) and parse (client), sans-I/O."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dtnkit.transfer.wire import markers

_text = st.text(st.characters(codec="utf-8"), max_size=300)


@given(st.lists(st.integers(0, 2**63), max_size=8), st.integers(0, 2**40), st.booleans(), _text)
def test_format_parse_round_trip(sent: list[int], when: int, ok: bool, error: str) -> None:
    text = "".join(markers.format_marker(n, when) for n in sent)
    text += markers.success_line() if ok else markers.failure_line(error)
    final, seen = markers.parse_stream(text.splitlines(keepends=True))
    assert [m.stripe_bytes for m in seen] == sent
    assert all(
        m.timestamp == when and m.stripe_index == 0 and m.stripe_count == 1 and not m.extra
        for m in seen
    )
    assert markers.is_success(final) == ok
    if ok:
        assert final == "success: Created"
    else:
        assert final.startswith("failure:") and "\n" not in final
        assert final == markers.failure_line(error).strip()


def test_failure_line_is_one_bounded_line() -> None:
    line = markers.failure_line("a\nb\tc  " + "x" * 5000)
    assert line.startswith("failure: a b c x") and line.endswith("\n")
    assert line.count("\n") == 1 and len(line) == len("failure: ") + markers.MAX_FAILURE + 1


def test_parser_is_lenient_and_feeds_callback() -> None:
    got: list[markers.Marker] = []
    final, seen = markers.parse_stream(
        [
            b"Perf Marker\n",
            "  TIMESTAMP:  7 \n",
            "Stripe  Index: 1\n",
            "Note: hi\n",
            "end\n",
            "\n",
            "Aborted: by user\n",
        ],
        got.append,
    )
    assert final == "Aborted: by user" and seen == got
    assert (seen[0].timestamp, seen[0].stripe_index, seen[0].extra) == (7, 1, {"note": "hi"})


@pytest.mark.parametrize(("lines", "why"), [
    (["Perf Marker", "Stripe Bytes Transferred: lots", "End", "success: x"],
     "not a non-negative integer"),
    (["Perf Marker", "Timestamp: 1", "success: Created"], "missing 'End'"),
    (["Perf Marker", "garbage", "End", "success: Created"], "not 'Key: value'"),
    (["Timestamp: 1", "success: Created"], "expected 'Perf Marker'"),
    (["Perf Marker", "Timestamp: 1"], "ended inside a marker"),
    (["success: Created", "Perf Marker"], "after the final line"),
])  # fmt: skip
def test_syntax_errors(lines: list[str], why: str) -> None:
    with pytest.raises(markers.MarkerSyntaxError, match=why) as info:
        markers.parse_stream(lines)
    assert isinstance(info.value, ValueError) and info.value.line >= 1


def test_no_final_line() -> None:
    with pytest.raises(markers.NoFinalLine, match="without a final"):
        markers.parse_stream(["Perf Marker", "End"])
