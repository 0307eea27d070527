"""Checksums: known vectors for both crc32c backends, combine of random splits, files."""

from __future__ import annotations

import hashlib
import itertools
import random
import subprocess
import sys
import textwrap
import zlib
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dtnkit.transfer import checksum
from dtnkit.transfer.checksum import (
    ALGORITHMS,
    COMBINABLE,
    MultiHasher,
    block_value,
    combine,
    combine_blocks,
    crc32c_python,
    file_checksum,
    new,
    to_bytes,
)

# RFC 3720 appendix B.4 (iSCSI), the check value, and the IANA HTTP Digest registry's example.
CRC32C_VECTORS = [
    (bytes(32), 0x8A9136AA),
    (b"\xff" * 32, 0x62A8AB43),
    (bytes(range(32)), 0x46DD794E),
    (bytes(range(31, -1, -1)), 0x113FDB5C),
    (b"123456789", 0xE3069283),
    (b"dog", 0x0A72A4DF),
    (b"abcdefghijklmnopqrstuvw987", 0xEE24F29E),  # XRootD's tests/XRootD/http.sh file
    (b"", 0x00000000),
]

KIB = 1024


def _data(seed: int, size: int) -> bytes:
    return random.Random(seed).randbytes(size)


def _splits(data: bytes, cuts: list[int]) -> list[bytes]:
    points = [0, *sorted(min(c, len(data)) for c in cuts), len(data)]
    return [data[a:b] for a, b in itertools.pairwise(points)]


# --------------------------------------------------------------------------- vectors


@pytest.mark.parametrize(("data", "expected"), CRC32C_VECTORS)
def test_crc32c_vectors_python_fallback(data: bytes, expected: int) -> None:
    assert crc32c_python(data) == expected


@pytest.mark.parametrize(("data", "expected"), CRC32C_VECTORS)
def test_crc32c_vectors_selected_backend(data: bytes, expected: int) -> None:
    assert checksum.crc32c(data) == expected
    running = new("crc32c")
    running.update(data)
    assert running.digest() == expected.to_bytes(4, "big")
    assert running.hexdigest() == f"{expected:08x}"


def test_crc32c_package_is_used_when_installed() -> None:
    pytest.importorskip("crc32c")
    assert checksum.CRC32C_BACKEND in ("crc32c-hw", "crc32c-sw")


def test_crc32c_fallback_when_package_missing() -> None:
    """With the package unimportable the module picks the pure-Python code, which still works."""
    code = textwrap.dedent(
        """
        import sys
        sys.modules["crc32c"] = None  # makes `import crc32c` raise ImportError
        from dtnkit.transfer import checksum as c
        assert c.CRC32C_BACKEND == "python", c.CRC32C_BACKEND
        assert c.crc32c(bytes(32)) == 0x8A9136AA
        assert c.crc32c(b"\\xff" * 32) == 0x62A8AB43
        h = c.new("crc32c")
        h.update(b"1234")
        h.update(memoryview(b"56789"))
        assert h.digest() == bytes.fromhex("e3069283"), h.hexdigest()
        data = bytes(range(256)) * 300
        blocks = [(c.block_value("crc32c", data[i:i + 7000]), len(data[i:i + 7000]))
                  for i in range(0, len(data), 7000)]
        assert c.combine_blocks("crc32c", blocks) == c.crc32c(data)
        print("ok")
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=False, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"


def test_isal_adler32_is_used_when_installed() -> None:
    pytest.importorskip("isal")
    assert checksum.ADLER32_BACKEND == "isal"
    data = bytes(range(256)) * 4099
    assert checksum.adler32(data) == zlib.adler32(data)
    assert checksum.adler32(memoryview(data)[7:], 12345) == zlib.adler32(data[7:], 12345)


def test_adler32_falls_back_to_zlib_without_isal() -> None:
    code = textwrap.dedent(
        """
        import sys, zlib
        sys.modules["isal"] = None  # makes `from isal import ...` raise ImportError
        from dtnkit.transfer import checksum as c
        assert c.ADLER32_BACKEND == "zlib", c.ADLER32_BACKEND
        data = bytes(range(256)) * 300
        h = c.new("adler32")
        h.update(data[:1000])
        h.update(memoryview(data)[1000:])
        assert h.value == zlib.adler32(data)
        assert c.block_value("adler32", data) == zlib.adler32(data)
        print("ok")
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=False, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"


def test_adler32_vectors() -> None:
    running = new("adler32")
    assert running.hexdigest() == "00000001"  # the empty input
    running.update(b"Wiki")
    assert running.hexdigest() == "03da0195"  # IANA registry example: ADLER32=03da0195
    assert block_value("adler32", b"Wiki") == 0x03DA0195


@given(data=st.binary(max_size=600), prefix=st.binary(max_size=40))
def test_crc32c_python_matches_package(data: bytes, prefix: bytes) -> None:
    crc32c_pkg = pytest.importorskip("crc32c")
    assert crc32c_python(data) == crc32c_pkg.crc32c(data)
    # continuing from a previous value, from an unaligned memoryview
    start = crc32c_python(prefix)
    view = memoryview(prefix + data)[len(prefix) :]
    assert crc32c_python(view, start) == crc32c_pkg.crc32c(prefix + data)


def test_crc32c_python_large_buffer_matches_package() -> None:
    crc32c_pkg = pytest.importorskip("crc32c")
    data = _data(7, 200 * KIB + 5)
    assert crc32c_python(data) == crc32c_pkg.crc32c(data)


# --------------------------------------------------------------------------- running checksums


@pytest.mark.parametrize("name", ALGORITHMS)
def test_incremental_equals_one_shot(name: str) -> None:
    data = _data(1, 100 * KIB + 3)
    whole = new(name)
    whole.update(data)
    parts = new(name)
    parts.update(data[:10])
    parts.update(bytearray(data[10:70_000]))
    parts.update(memoryview(data)[70_000:])
    assert parts.digest() == whole.digest()
    assert parts.hexdigest() == whole.digest().hex()
    assert len(whole.digest()) == checksum.DIGEST_SIZE[name]
    assert whole.name == name


def test_hashlib_algorithms_match_hashlib() -> None:
    data = b"abcdefghijklmnopqrstuvw987"
    md5 = new("md5")
    md5.update(data)
    assert md5.hexdigest() == hashlib.md5(data).hexdigest()
    sha = new("sha-256")
    sha.update(data)
    assert sha.digest() == hashlib.sha256(data).digest()


@pytest.mark.parametrize(
    ("spelling", "name"),
    [("SHA-256", "sha256"), ("sha256", "sha256"), (" Adler32 ", "adler32"), ("ADLER", "adler32"),
     ("CRC32C", "crc32c"), ("MD5", "md5")],
)  # fmt: skip
def test_names_are_case_insensitive_with_aliases(spelling: str, name: str) -> None:
    assert new(spelling).name == name
    assert checksum.canonical(spelling) == name


def test_unknown_name_lists_the_known_ones() -> None:
    with pytest.raises(ValueError, match=r"crc32.*adler32, crc32c, md5, sha256"):
        new("crc32")
    with pytest.raises(ValueError, match="unknown"):
        new("sha-384")


# --------------------------------------------------------------------------- combine


@settings(max_examples=60, deadline=None)
@given(
    name=st.sampled_from(sorted(COMBINABLE)),
    seed=st.integers(0, 2**32),
    size=st.integers(0, 300 * KIB),
    cuts=st.lists(st.integers(0, 300 * KIB), max_size=12),
)
def test_combine_of_random_splits_equals_whole(
    name: str, seed: int, size: int, cuts: list[int]
) -> None:
    data = _data(seed, size)
    blocks = _splits(data, cuts)  # repeated cuts make empty blocks; many are > 64 KiB
    values = [(block_value(name, b), len(b)) for b in blocks]
    assert combine_blocks(name, values) == block_value(name, data)


@pytest.mark.parametrize("name", sorted(COMBINABLE))
def test_combine_out_of_order_with_empty_and_large_blocks(name: str) -> None:
    data = _data(3, 1_000_003)
    sizes = [0, 70_000, 0, 65_536, 65_537, 1, 300_000, 0]
    sizes.append(len(data) - sum(sizes))
    offsets = [sum(sizes[:i]) for i in range(len(sizes))]
    order = list(range(len(sizes)))
    random.Random(5).shuffle(order)  # hashed in any order, as streams deliver them
    values: dict[int, tuple[int, int]] = {}
    for i in order:
        block = data[offsets[i] : offsets[i] + sizes[i]]
        values[i] = (block_value(name, block), len(block))
    assert combine_blocks(name, [values[i] for i in range(len(sizes))]) == block_value(name, data)


@pytest.mark.parametrize("name", sorted(COMBINABLE))
def test_combine_pairwise_and_tree_shaped(name: str) -> None:
    a, b, c = _data(1, 100_000), _data(2, 0), _data(3, 90_001)
    va, vb, vc = (block_value(name, x) for x in (a, b, c))
    ab = combine(name, va, vb, len(b))
    assert ab == block_value(name, a + b)
    left = combine(name, ab, vc, len(c))
    right = combine(name, va, combine(name, vb, vc, len(c)), len(b) + len(c))
    assert left == right == block_value(name, a + b + c)


def test_combine_blocks_of_nothing_is_the_empty_value() -> None:
    assert combine_blocks("adler32", []) == zlib.adler32(b"") == 1
    assert combine_blocks("crc32c", []) == 0


def test_crc32c_combine_over_many_zero_blocks() -> None:
    mib = bytes(2**20)
    whole = checksum.crc32c(bytes(16 * 2**20))
    assert combine_blocks("crc32c", [(checksum.crc32c(mib), len(mib))] * 16) == whole


def test_adler32_combine_with_huge_lengths() -> None:
    # Appending n zero bytes keeps a and adds n * a to b: check combine against that past 2**32.
    n = 5 * 2**32 + 12345
    zeros = ((n % 65521) << 16) | 1  # adler32 of n zero bytes: a = 1, b = n
    head = block_value("adler32", b"head")
    a, b = head & 0xFFFF, head >> 16
    assert combine("adler32", head, zeros, n) == (((b + n * a) % 65521) << 16) | a


@pytest.mark.parametrize(
    ("m", "n"), [(1, 1), (3, 4093), (2**33 + 7, 2**40), (2**70 + 3, 2**62 + 1)]
)
def test_crc32c_shift_operator_composes(m: int, n: int) -> None:
    # x**(8(m+n)) = x**(8m) * x**(8n): the zero-run operator is consistent far past any file size,
    # including past the precomputed table (2**61 bytes).
    shift = checksum._x_pow_8n
    assert shift(m + n) == checksum._gf2_mul(shift(m), shift(n))


@given(op=st.integers(0, 2**32 - 1), value=st.integers(0, 2**32 - 1))
def test_crc32c_table_product_equals_plain_product(op: int, value: int) -> None:
    tables = checksum._nibble_tables(op)
    assert checksum._mul_by(tables, value) == checksum._gf2_mul(op, value)


def test_crc32c_combine_zero_length_is_identity() -> None:
    head = block_value("crc32c", b"head")
    assert combine("crc32c", head, 0, 0) == head
    assert combine("adler32", block_value("adler32", b"head"), 1, 0) == zlib.adler32(b"head")


@pytest.mark.parametrize("name", ["md5", "sha256", "sha-256"])
def test_combine_refuses_non_combinable(name: str) -> None:
    with pytest.raises(ValueError, match="cannot be combined"):
        combine(name, 1, 1, 1)
    with pytest.raises(ValueError, match="cannot be combined"):
        block_value(name, b"x")
    with pytest.raises(ValueError, match="cannot be combined"):
        to_bytes(name, 1)


@pytest.mark.parametrize(
    ("first", "second", "length"), [(-1, 1, 1), (2**32, 1, 1), (1, 2**32, 1), (1, 1, -1)]
)
def test_combine_rejects_bad_values(first: int, second: int, length: int) -> None:
    with pytest.raises(ValueError):
        combine("crc32c", first, second, length)
    with pytest.raises(ValueError):
        combine_blocks("adler32", [(1, 0), (second, length), (first, 1)])


def test_to_bytes_is_big_endian() -> None:
    assert to_bytes("adler32", 0x03DA0195) == b"\x03\xda\x01\x95"
    assert to_bytes("crc32c", 0x8DEC8CEE) == bytes.fromhex("8dec8cee")
    assert checksum.from_bytes("crc32c", bytes.fromhex("8dec8cee")) == 0x8DEC8CEE
    with pytest.raises(ValueError):
        to_bytes("adler32", 2**32)
    with pytest.raises(ValueError):
        checksum.from_bytes("adler32", b"\x00" * 5)


# --------------------------------------------------------------------------- one pass, files


def test_multihasher_matches_each_algorithm() -> None:
    data = _data(11, 123_457)
    multi = MultiHasher(["adler32", "SHA-256", "crc32c", "md5", "sha256"])
    assert multi.names == ("adler32", "sha256", "crc32c", "md5")
    for i in range(0, len(data), 10_000):
        multi.update(memoryview(data)[i : i + 10_000])
    digests = multi.digests()
    assert list(digests) == ["adler32", "sha256", "crc32c", "md5"]
    assert digests["adler32"] == zlib.adler32(data).to_bytes(4, "big")
    assert digests["crc32c"] == checksum.crc32c(data).to_bytes(4, "big")
    assert digests["md5"] == hashlib.md5(data).digest()
    assert digests["sha256"] == hashlib.sha256(data).digest()
    assert multi.hexdigests()["md5"] == hashlib.md5(data).hexdigest()


def test_multihasher_needs_names() -> None:
    with pytest.raises(ValueError):
        MultiHasher([])
    with pytest.raises(ValueError):
        MultiHasher(["md5", "blake2b"])
    with pytest.raises(TypeError):
        MultiHasher("md5")


@pytest.mark.parametrize("name", ALGORITHMS)
@pytest.mark.parametrize("block_size", [1, 4096, 65_536, 8 * 2**20])
def test_file_checksum(tmp_path: Path, name: str, block_size: int) -> None:
    data = _data(13, 70_001)
    path = tmp_path / "f.bin"
    path.write_bytes(data)
    expected = new(name)
    expected.update(data)
    assert file_checksum(path, name, block_size=block_size) == expected.digest()


def test_file_checksum_empty_file_and_bad_block_size(tmp_path: Path) -> None:
    path = tmp_path / "empty"
    path.write_bytes(b"")
    assert file_checksum(path, "adler32") == b"\x00\x00\x00\x01"
    assert file_checksum(path, "crc32c") == b"\x00\x00\x00\x00"
    assert file_checksum(path, "md5") == hashlib.md5(b"").digest()
    with pytest.raises(ValueError):
        file_checksum(path, "md5", block_size=0)
    with pytest.raises(FileNotFoundError):
        file_checksum(tmp_path / "missing", "md5")


# --------------------------------------------------------------------------- the registry


def test_tables_are_derived_from_the_registry() -> None:
    reg = checksum.REGISTRY
    assert tuple(reg) == ALGORITHMS
    assert frozenset(n for n, a in reg.items() if a.combine is not None) == COMBINABLE
    assert {n: a.size for n, a in reg.items()} == checksum.DIGEST_SIZE
    for alias, name in checksum.ALIASES.items():
        assert alias in reg[name].spellings and alias != name
    for record in reg.values():
        assert len(record.new().digest()) == record.size
        if record.combinable:  # a combinable algorithm brings its block function and empty value
            assert record.block is not None and record.empty is not None
            assert record.hex_on_wire and record.size == 4


def test_sha512_is_one_record() -> None:
    data = _data(7, 70_000)
    for spelling in ("sha512", "SHA-512", " sha-512 "):
        h = new(spelling)
        h.update(data)
        assert h.digest() == hashlib.sha512(data).digest()
        assert checksum.canonical(spelling) == "sha512"
    assert checksum.DIGEST_SIZE["sha512"] == 64
    assert "sha512" in ALGORITHMS and "sha512" not in COMBINABLE
    record = checksum.REGISTRY["sha512"]
    assert (record.rfc3230, record.rfc9530, record.hex_on_wire) == ("sha-512", "sha-512", False)
    with pytest.raises(ValueError, match="cannot be combined"):
        checksum.combine("sha512", 1, 1, 1)
    hasher = checksum.MultiHasher(["sha512", "adler32"])
    hasher.update(data)
    assert hasher.digests()["sha512"] == hashlib.sha512(data).digest()


def test_sha512_file_checksum(tmp_path: Path) -> None:
    path = tmp_path / "f"
    data = _data(8, 3 * KIB + 1)
    path.write_bytes(data)
    assert checksum.file_checksum(path, "sha512", block_size=KIB) == hashlib.sha512(data).digest()
