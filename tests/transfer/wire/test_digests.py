"""HTTP digest headers: the strings XRootD, dCache and gfal2/davix exchange, round trips, abuse."""

from __future__ import annotations

import base64
import contextlib
import hashlib
import zlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dtnkit.transfer import checksum
from dtnkit.transfer.wire.digests import (
    MAX_FIELD_LEN,
    MAX_ITEMS,
    DigestError,
    choose,
    format_digest,
    format_repr_digest,
    parse_digest,
    parse_repr_digest,
    parse_want_digest,
    parse_want_repr_digest,
)

# The file XRootD's own HTTP tests checksum (tests/XRootD/http.sh).
ALPHABET = b"abcdefghijklmnopqrstuvw987"
SIZES = {"adler32": 4, "crc32c": 4, "md5": 16, "sha256": 32}


def _digest(name: str, data: bytes) -> bytes:
    running = checksum.new(name)
    running.update(data)
    return running.digest()


# --------------------------------------------------------------------------- what servers send


def test_xrootd_553_adler32_as_observed() -> None:
    # curl -I -H 'Want-Digest: adler32' against xrootd 5.5.3 (http-tpc.md section 7)
    assert parse_digest("adler32=cc2d4a81") == {"adler32": bytes.fromhex("cc2d4a81")}
    assert format_digest("adler32", bytes.fromhex("cc2d4a81")) == "adler32=cc2d4a81"


def test_xrootd_md5_is_base64() -> None:
    raw = parse_digest("md5=0tUApZriWYRKjiH9CVPl5g==")["md5"]
    assert raw == base64.b64decode("0tUApZriWYRKjiH9CVPl5g==")
    assert format_digest("md5", raw) == "md5=0tUApZriWYRKjiH9CVPl5g=="


def test_xrootd_553_crc32c_base64_is_accepted_and_answered_in_hex() -> None:
    # xrootd 5.5.3 sends crc32c in base64 (jeyM7g== is 0x8dec8cee); xrootd >= 5.8.1, the IANA
    # registry and davix/gfal2 use hex, which is what we send.
    assert parse_digest("crc32c=jeyM7g==") == {"crc32c": bytes.fromhex("8dec8cee")}
    assert parse_digest("crc32c=8dec8cee") == {"crc32c": bytes.fromhex("8dec8cee")}
    assert format_digest("crc32c", bytes.fromhex("8dec8cee")) == "crc32c=8dec8cee"


def test_xrootd_test_suite_strings_for_its_alphabet_file() -> None:
    # Expected headers in xrootd's tests/XRootD/http.sh, reproduced from our own checksums.
    assert format_digest("crc32c", _digest("crc32c", ALPHABET)) == "crc32c=ee24f29e"
    assert parse_digest("crc32c=7iTyng==")["crc32c"] == _digest("crc32c", ALPHABET)  # pre-5.8.1
    assert format_digest("md5", _digest("md5", ALPHABET)) == "md5=mRykpCtRV62NckS3pmYroQ=="
    adler = _digest("adler32", ALPHABET)
    assert format_digest("adler32", adler) == f"adler32={zlib.adler32(ALPHABET):08x}"
    assert format_repr_digest({"adler32": adler}) == "adler=:jwQKXQ==:"
    assert parse_repr_digest("adler=:jwQKXQ==:") == {"adler32": adler}
    assert parse_repr_digest("md5=:mRykpCtRV62NckS3pmYroQ==:") == {
        "md5": hashlib.md5(ALPHABET).digest()
    }


def test_xrootd_answers_adler_under_the_name_asked() -> None:
    assert parse_digest("adler=cc2d4a81") == {"adler32": bytes.fromhex("cc2d4a81")}


def test_adler32_without_leading_zero() -> None:
    # rucio/rucio#4127: 09600001 vs 9600001; davix pads too (DMC-1245)
    assert parse_digest("adler32=9600001") == {"adler32": bytes.fromhex("09600001")}
    assert format_digest("adler32", bytes.fromhex("09600001")) == "adler32=09600001"


def test_iana_registry_examples() -> None:
    wiki = bytes.fromhex("03da0195")
    assert _digest("adler32", b"Wiki") == wiki
    assert parse_digest("ADLER32=03da0195") == parse_digest("ADLER32=3DA0195") == {"adler32": wiki}
    dog = _digest("crc32c", b"dog")
    assert parse_digest("CRC32c=0a72a4df") == parse_digest("crc32c=A72A4DF") == {"crc32c": dog}


def test_adler32_in_base64_is_accepted() -> None:
    assert parse_digest("adler32=jwQKXQ==") == {"adler32": base64.b64decode("jwQKXQ==")}


def test_md5_and_sha256_in_hex_are_accepted() -> None:
    md5 = hashlib.md5(ALPHABET).digest()
    sha = hashlib.sha256(ALPHABET).digest()
    got = parse_digest(f"md5={md5.hex()}, SHA-256={sha.hex().upper()}")
    assert got == {"md5": md5, "sha256": sha}


def test_unknown_algorithms_are_skipped() -> None:
    header = "UNIXcksum=1234567 ,SHA=qZk+NkcGgWq6PiVxeFDCbJzQ2J0=, sha-384=x, crc32=1a2b, adler32=1"
    assert parse_digest(header) == {"adler32": b"\x00\x00\x00\x01"}


def test_quoted_value_is_accepted() -> None:
    assert parse_digest('adler32="cc2d4a81"') == {"adler32": bytes.fromhex("cc2d4a81")}


def test_sha256_name_and_base64() -> None:
    sha = hashlib.sha256(b"").digest()
    assert format_digest("sha256", sha) == (
        "sha-256=" + base64.b64encode(sha).decode()
    )  # 47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=
    assert format_digest("SHA-256", sha) == "sha-256=47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU="


def test_several_items_joined_without_space_are_found_by_davix_style_matching() -> None:
    items = [format_digest("adler32", b"\x01\x02\x03\x04"), format_digest("crc32c", b"\0\0\0\1")]
    header = ",".join(items)
    # davix splits on "," and matches "name=" at the start of each piece
    assert any(piece.lower().startswith("crc32c=") for piece in header.split(","))
    assert parse_digest(header) == {"adler32": b"\x01\x02\x03\x04", "crc32c": b"\0\0\0\1"}
    assert parse_digest(", ".join(items)) == parse_digest(header)


# --------------------------------------------------------------------------- what clients ask


def test_dcache_want_digest() -> None:
    # dCache pull sends this (http-tpc.md section 5)
    wanted = parse_want_digest("adler32;q=1, md5;q=0.8")
    assert wanted == [("adler32", 1.0), ("md5", 0.8)]
    assert choose(wanted, ["md5", "adler32", "crc32c"]) == "adler32"
    assert choose(wanted, ["md5", "sha256"]) == "md5"
    assert choose(wanted, ["crc32c", "sha256"]) is None


def test_brief_example_sorted_by_q() -> None:
    assert parse_want_digest("adler32;q=1, md5;q=0.5, SHA-256") == [
        ("adler32", 1.0),
        ("sha256", 1.0),
        ("md5", 0.5),
    ]


def test_gfal2_davix_want_digest_single_algorithm_any_case() -> None:
    # davix puts the algorithm as given to gfal-copy -K / gfal-sum: "ADLER32", "adler32", "MD5"
    assert parse_want_digest("ADLER32") == [("adler32", 1.0)]
    assert parse_want_digest("MD5") == [("md5", 1.0)]
    assert choose(parse_want_digest("ADLER32"), ["adler32"]) == "adler32"


def test_q_is_honoured_unlike_xrootd() -> None:
    # xrootd answered adler32 by server order here; we answer by q
    wanted = parse_want_digest("crc32c;q=0.5, adler32;q=1")
    assert choose(wanted, ["crc32c", "adler32"]) == "adler32"
    assert choose(wanted, ["crc32c"]) == "crc32c"


def test_no_silent_fallback() -> None:
    # xrootd answered Digest: adler32=... to Want-Digest: sha-256; choose never does
    assert choose(parse_want_digest("sha-256"), ["adler32", "md5"]) is None
    assert choose(parse_want_digest("NotSupported, adler32, crc32c"), ["crc32c"]) == "crc32c"


def test_q_zero_refuses() -> None:
    wanted = parse_want_digest("md5;q=0, adler32;q=0.1")
    assert wanted == [("adler32", 0.1), ("md5", 0.0)]
    assert choose(wanted, ["md5", "adler32"]) == "adler32"
    assert choose(wanted, ["md5"]) is None
    # refused anywhere in the list wins over an acceptance elsewhere
    assert choose(parse_want_digest("md5, md5;q=0"), ["md5"]) is None


def test_choose_ties_go_to_the_client_order_and_return_our_spelling() -> None:
    assert choose([("md5", 1.0), ("sha256", 1.0)], ["sha256", "md5"]) == "md5"
    assert choose(parse_want_digest("sha-256"), ["SHA-256"]) == "SHA-256"
    assert choose([], ["md5"]) is None
    assert choose([("md5", float("nan"))], ["md5"]) is None


def test_want_digest_parameters_and_spacing() -> None:
    assert parse_want_digest(" adler32 ; Q=0.250 ,,md5;x=y ") == [("md5", 1.0), ("adler32", 0.25)]
    assert parse_want_digest("") == []
    assert parse_want_digest("unixcksum;q=1.000") == [("unixcksum", 1.0)]
    assert parse_want_digest("md5;q=0.") == [("md5", 0.0)]


def test_rfc9530_want_repr_digest() -> None:
    assert parse_want_repr_digest("adler=5, sha-256=9") == [("sha256", 9.0), ("adler32", 5.0)]
    assert parse_want_repr_digest("sha-256=10, md5=3") == [("sha256", 10.0), ("md5", 3.0)]
    wanted = parse_want_repr_digest("sha-384=3, sha-256=10, unixsum=0")
    assert wanted == [("sha256", 10.0), ("sha-384", 3.0), ("unixsum", 0.0)]
    # xrootd's test: adler=1,md5=5 is answered with md5
    assert choose(parse_want_repr_digest("adler=1,md5=5"), ["adler32", "md5"]) == "md5"
    assert choose(parse_want_repr_digest("md5=0, adler=1"), ["md5"]) is None


def test_want_repr_digest_parameters_ignored_and_last_duplicate_wins() -> None:
    assert parse_want_repr_digest("md5=3;x=?1, md5=7") == [("md5", 7.0)]


def test_repr_digest_roundtrip_and_names() -> None:
    items = {
        "sha256": hashlib.sha256(ALPHABET).digest(),
        "crc32c": bytes.fromhex("8dec8cee"),
        "adler32": bytes.fromhex("0a1b2c3d"),
        "md5": hashlib.md5(ALPHABET).digest(),
    }
    header = format_repr_digest(items)
    assert header.startswith("sha-256=:" + base64.b64encode(items["sha256"]).decode() + ":, ")
    assert "crc32c=:jeyM7g==:" in header
    assert "adler=:ChssPQ==:" in header
    assert parse_repr_digest(header) == items


def test_repr_digest_skips_unknown_and_accepts_adler32_key() -> None:
    header = 'unixsum=1234, sha-384=:AAAA:, x="s", adler32=:ChssPQ==:, y=(1 2);a'
    assert parse_repr_digest(header) == {"adler32": bytes.fromhex("0a1b2c3d")}
    assert parse_repr_digest("md5=:mRykpCtRV62NckS3pmYroQ:") == {
        "md5": hashlib.md5(ALPHABET).digest()  # missing padding tolerated (RFC 8941 4.2.7)
    }


# --------------------------------------------------------------------------- round trips


@given(name=st.sampled_from(sorted(SIZES)), data=st.data())
def test_digest_roundtrip(name: str, data: st.DataObject) -> None:
    raw = data.draw(st.binary(min_size=SIZES[name], max_size=SIZES[name]))
    assert parse_digest(format_digest(name, raw)) == {name: raw}
    assert parse_repr_digest(format_repr_digest({name: raw})) == {name: raw}


@given(st.dictionaries(st.sampled_from(sorted(SIZES)), st.integers(0, 2**256 - 1), min_size=1))
def test_multi_item_roundtrip(values: dict[str, int]) -> None:
    items = {n: (v % 256 ** SIZES[n]).to_bytes(SIZES[n], "big") for n, v in values.items()}
    assert parse_digest(",".join(format_digest(n, d) for n, d in items.items())) == items
    assert parse_repr_digest(format_repr_digest(items)) == items


@given(
    st.lists(
        st.tuples(
            st.sampled_from(["adler32", "md5", "sha-256", "crc32c", "UNIXcksum"]),
            st.sampled_from(["", ";q=0", ";q=0.5", ";q=1", ";q=0.125"]),
        ),
        max_size=8,
    )
)
def test_want_digest_roundtrip(items: list[tuple[str, str]]) -> None:
    header = ", ".join(name + q for name, q in items)
    parsed = parse_want_digest(header)
    assert len(parsed) == len(items)
    assert [q for _, q in parsed] == sorted((q for _, q in parsed), reverse=True)
    choice = choose(parsed, ["md5", "adler32"])
    if choice is not None:
        assert any(n == choice for n, q in parsed if q > 0)


# --------------------------------------------------------------------------- hostile input

BAD_DIGEST = [
    "adler32",  # no value
    "adler32=",  # empty
    "=cc2d4a81",  # no name
    "adler32=cc2d4a81x",  # not hex, not base64 of 4 bytes
    "adler32=123456789",  # 9 hex digits
    "adler32=0x0a1b2c3d",
    "crc32c=jeyM7g=",  # bad padding
    "crc32c=jey!7g==",
    "md5=!!!!",  # bad base64
    "md5=0tUApZriWYRKjiH9CVPl",  # 20 characters: 15 bytes
    "md5=0tUApZriWYRKjiH9CVPl5",  # 21 characters: not a whole number of bytes
    "md5=AAAA",  # 3 bytes: wrong length
    "md5=" + base64.b64encode(bytes(15)).decode(),
    "md5=" + "ab" * 15,  # 30 hex digits
    "sha-256=" + base64.b64encode(bytes(31)).decode(),
    "sha-256=" + base64.b64encode(bytes(33)).decode(),
    "adler32=01020304, adler32=01020305",  # contradicting
    "ad ler32=01020304",
    "adler32=cc2d4a81\x00",
    "adler32=cc2d4a81\r\nSet-Cookie: x=y",
    "md5=\x7f",
    "adler32=cc2d4a81, é=1",
    "adler32=" + "a" * (MAX_FIELD_LEN + 1),
    ",".join(["UNIXcksum=1"] * (MAX_ITEMS + 1)),
]


@pytest.mark.parametrize("header", BAD_DIGEST)
def test_bad_digest_raises_digest_error(header: str) -> None:
    with pytest.raises(DigestError):
        parse_digest(header)


def test_md5_base64_without_padding_is_tolerated() -> None:
    raw = parse_digest("md5=0tUApZriWYRKjiH9CVPl5g")["md5"]  # 22 characters, no "=="
    assert raw == base64.b64decode("0tUApZriWYRKjiH9CVPl5g==")


@pytest.mark.parametrize(
    "header",
    [
        "md5;q=2",
        "md5;q=1.5",
        "md5;q=-1",
        "md5;q=0.1234",
        "md5;q=abc",
        "md5;q=",
        "md5;q",
        "md5;q=1;q=0",
        ";q=1",
        "md5;;q=1",
        "md5 sha",
        "md5;q=1 x",
        'md5;q="1"',
        "md5\x00",
        "md5\n",
        "md5, \u00e9",
        "md5;q=1," + " " * MAX_FIELD_LEN,
        ",".join(["md5"] * (MAX_ITEMS + 1)),
    ],
)
def test_bad_want_digest_raises_digest_error(header: str) -> None:
    with pytest.raises(DigestError):
        parse_want_digest(header)


@pytest.mark.parametrize(
    "header",
    [
        "adler32",  # bare key is boolean true: xrootd ignores it as malformed
        "SHA-256=10",  # SF keys are lowercase
        "sha-256=11",
        "sha-256=-1",
        "sha-256=1.5",
        'sha-256="10"',
        "sha-256=?1",
        "sha-256=:AAAA:",
        "sha-256=(10)",
        "sha-256=10,",
        "sha-256=10 md5=3",
        "sha-256=1234567890123456",
        "sha-256=10;",
        "=10",
        "sha-256=",
        "sha-256=10\x00",
        ", ".join(f"a{i}=1" for i in range(MAX_ITEMS + 1)),
        "a=" + "1" * MAX_FIELD_LEN,
    ],
)
def test_bad_want_repr_digest_raises_digest_error(header: str) -> None:
    with pytest.raises(DigestError):
        parse_want_repr_digest(header)


@pytest.mark.parametrize(
    "header",
    [
        "md5=:mRykpCtRV62NckS3pmYroQ==",  # unterminated
        "md5=:mRyk*CtRV62NckS3pmYroQ==:",  # not base64
        "md5=:mRykpCtRV62NckS3pmYroQ=x=:",
        "md5=:A:",  # impossible length
        "md5=:AAAA:",  # wrong length
        "sha-256=:" + base64.b64encode(bytes(31)).decode() + ":",
        "crc32c=:" + base64.b64encode(bytes(5)).decode() + ":",
        "crc32c=8dec8cee",  # hex is not a byte sequence
        "crc32c=?1",
        "adler=:ChssPQ==:, adler32=:ChssPg==:",  # two different adler32 values
        "md5=:mRykpCtRV62NckS3pmYroQ==:,",
        'x="unterminated, md5=:mRykpCtRV62NckS3pmYroQ==:',
        'x="bad \\q escape"',
        "x=(1 2",
        "x=(1,2)",
        "x=1.2345",
        "x=1234567890123.5",
        "x=-",
        "x=@1",
        "x=?2",
        "MD5=:mRykpCtRV62NckS3pmYroQ==:",
    ],
)
def test_bad_repr_digest_raises_digest_error(header: str) -> None:
    with pytest.raises(DigestError):
        parse_repr_digest(header)


@pytest.mark.parametrize("value", [None, b"md5", 5])
def test_non_string_input_is_a_digest_error(value: object) -> None:
    for parse in (parse_digest, parse_want_digest, parse_repr_digest, parse_want_repr_digest):
        with pytest.raises(DigestError):
            parse(value)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("name", "raw"),
    [("md5", bytes(15)), ("adler32", bytes(8)), ("sha256", bytes(16)), ("crc32", bytes(4)),
     ("blake2b", bytes(64)), ("md5", "0tUApZriWYRKjiH9CVPl5g==")],
)  # fmt: skip
def test_format_rejects_wrong_lengths_and_unknown_names(name: str, raw: bytes) -> None:
    with pytest.raises(DigestError):
        format_digest(name, raw)
    with pytest.raises(DigestError):
        format_repr_digest({name: raw})


def test_format_repr_digest_rejects_empty_and_duplicates() -> None:
    with pytest.raises(DigestError):
        format_repr_digest({})
    with pytest.raises(DigestError):
        format_repr_digest({"adler": bytes(4), "adler32": bytes(4)})


def test_digest_error_is_a_value_error() -> None:
    assert issubclass(DigestError, ValueError)


def test_huge_headers_fail_fast() -> None:
    for parse in (parse_digest, parse_want_digest, parse_repr_digest, parse_want_repr_digest):
        with pytest.raises(DigestError, match="limit"):
            parse("md5=" + "A" * 10_000_000)


_FUZZ_ALPHABET = st.sampled_from(
    [
        *"adler32md5sha-256crc32cUNIXcksum=;,: ()\"\\?*'.q01+/AZaz9\t\x00\x7f\r\né",
        *["adler32=", "md5=:", ":, ", "q=0.5", "sha-256=", "==", "jeyM7g==", "(1 2)", ";a=1"],
    ]
)


@settings(max_examples=400)
@given(st.lists(_FUZZ_ALPHABET, max_size=60).map("".join) | st.text(max_size=200))
def test_fuzz_only_digest_error(header: str) -> None:
    for parse in (parse_digest, parse_want_digest, parse_repr_digest, parse_want_repr_digest):
        with contextlib.suppress(DigestError):
            parse(header)


# --------------------------------------------------------------------------- sha512


def test_sha512_rfc3230_base64_and_hex() -> None:
    raw = hashlib.sha512(ALPHABET).digest()
    item = format_digest("sha512", raw)
    assert item == "sha-512=" + base64.b64encode(raw).decode()
    assert format_digest("SHA-512", raw) == item
    assert parse_digest(item) == {"sha512": raw}
    assert parse_digest(f"SHA-512={raw.hex().upper()}") == {"sha512": raw}
    with pytest.raises(DigestError, match="64"):
        parse_digest("sha-512=" + base64.b64encode(raw[:32]).decode())


def test_sha512_rfc9530() -> None:
    raw = hashlib.sha512(ALPHABET).digest()
    header = format_repr_digest({"sha512": raw})
    assert header == f"sha-512=:{base64.b64encode(raw).decode()}:"
    assert parse_repr_digest(header) == {"sha512": raw}
    assert parse_want_repr_digest("sha-512=3, sha-256=10") == [("sha256", 10.0), ("sha512", 3.0)]
    assert parse_want_digest("SHA-512;q=0.5") == [("sha512", 0.5)]
    assert choose(parse_want_digest("sha-512"), checksum.ALGORITHMS) == "sha512"
    with pytest.raises(DigestError, match="sha-512 is 4 bytes, expected 64"):
        parse_repr_digest("sha-512=:AAAAAA==:")
