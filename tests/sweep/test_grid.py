"""The sweep grid: validation (one BadInput, no traceback), the TOML <-> flags round trip,
stable point IDs and the run order."""

from __future__ import annotations

import itertools
import json
import math
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dtnkit.errors import BadInput, ExitStatus
from dtnkit.sweep import grid as G

PROFILES = ["dtn", "measurement"]
EXAMPLE = Path(__file__).resolve().parents[2] / "docs" / "examples" / "sweep-grid.toml"


def parse(text: str) -> G.Grid:
    return G.parse_grid_text(text, "g.toml", PROFILES)


def error_of(text: str) -> BadInput:
    with pytest.raises(BadInput) as info:
        parse(text)
    assert info.value.status == ExitStatus.BAD_INPUT
    return info.value


BASE = 'schema = 1\n[axes]\nrtt = ["5ms", "100ms"]\nstreams = [1, 2, 4, 8]\n'


def test_flags_example_from_the_issue() -> None:
    grid = G.parse_grid_flags(["rtt=5ms,100ms", "streams=1,2,4,8"], PROFILES)
    assert grid.axes["rtt"] == (5.0, 100.0)
    assert grid.axes["streams"] == (1, 2, 4, 8)
    assert len(grid) == 8 and grid.sample_interval_s == 5.0
    assert grid == parse(BASE)


def test_units_are_parsed() -> None:
    grid = parse(
        'schema = 1\n[axes]\nrtt = ["5ms", "0.1s"]\nrate = ["1gbit", "500mbit"]\n'
        'loss = ["0.01%"]\nfile_size = ["256MiB"]\nstreams = [1]\ncores = [0.5, "none"]\n'
        '[run]\nduration = "30s"\n'
    )
    assert grid.axes["rtt"] == (5.0, 100.0)
    assert grid.axes["rate"] == (500 * 10**6, 10**9)
    assert grid.axes["loss"] == (0.0001,)
    assert grid.axes["file_size"] == (256 * 2**20,)
    assert grid.axes["cores"] == (None, 0.5)
    assert grid.duration_s == 30.0


@pytest.mark.parametrize(
    ("text", "where", "words"),
    [
        (BASE.replace("schema = 1", "schema = 2"), "g.toml:1", "not supported"),
        (BASE.replace("schema = 1\n", ""), "g.toml", "no schema"),
        (BASE + "colour = [1]\n", "g.toml:5 (axes.colour)", "unknown axis"),
        (BASE + 'tool = ["scp"]\n', "g.toml:5 (axes.tool)", "unknown tool"),
        (BASE + 'profile = ["fast"]\n', "g.toml:5 (axes.profile)", "unknown profile"),
        (BASE + 'loss = ["1%", "0.01"]\n', "g.toml:5 (axes.loss)", "given twice"),
        (BASE.replace('"100ms"', '"0.005s"'), "g.toml:3 (axes.rtt)", "given twice"),
        (BASE + "origins = []\n", "g.toml:5 (axes.origins)", "empty"),
        (BASE + "origins = [-1]\n", "g.toml:5 (axes.origins)", "bad origins"),
        (BASE + "cores = [nan]\n", "g.toml:5 (axes.cores)", "finite"),
        (BASE + "rate = [inf]\n", "g.toml:5 (axes.rate)", "finite"),
        (BASE + 'rate = ["1gbps/s"]\n', "g.toml:5 (axes.rate)", "bad rate"),
        (BASE + "streams = [1]\n", "g.toml", "not valid TOML"),
        (BASE + '[run]\nduration = "5s"\nbytes = "1GiB"\n', "g.toml:7 (run.bytes)", "both"),
        (BASE + '[run]\nduration = "5s"\nsample_interval = "10s"\n', "g.toml:7", "longer"),
        (BASE + "[run]\nrepeats = true\n", "g.toml:6 (run.repeats)", "bad repeats"),
        (BASE + "[run]\nmtu = 100\n", "g.toml:6 (run.mtu)", "bad mtu"),
        (BASE + '[run]\nmtu = "9000.5"\n', "g.toml:6 (run.mtu)", "bad mtu"),
        (BASE + "[run]\nmtu = 70000\n", "g.toml:6 (run.mtu)", "576 to 65535"),
        (BASE + 'tool = ["command:x"]\n', "g.toml:5 (axes.tool)", "unknown command template"),
        (BASE + '[commands]\nx = "run {nope}"\n', "g.toml:6 (commands.x)", "placeholder"),
        (BASE.replace("[1, 2, 4, 8]", "[{a = 1}]"), "g.toml:4 (axes.streams)", "bad streams"),
    ],
)
def test_bad_grids_name_the_place(text: str, where: str, words: str) -> None:
    err = error_of(text)
    rendered = err.render()
    assert where in rendered and words in rendered
    assert rendered.count("dtnkit: error:") == 1 and "\n" not in rendered


def test_huge_product_is_refused_before_expanding() -> None:
    streams = ", ".join(str(i) for i in range(1, 1025))
    rtts = ", ".join(f'"{i}ms"' for i in range(1, 1001))
    err = error_of(f"schema = 1\n[axes]\nrtt = [{rtts}]\nstreams = [{streams}]\n")
    assert "1024000 points" in err.what and "at most 10000" in err.why
    assert "1000 rtt x 1024 streams" in err.why


def test_non_utf8_and_oversized_files(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_bytes(BASE.encode() + b'name = "\xff"\n')
    with pytest.raises(BadInput, match="not UTF-8") as info:
        G.load_grid(bad, PROFILES)
    assert f"{bad}:5" in info.value.what
    big = tmp_path / "big.toml"
    big.write_bytes(b"#" * (G.MAX_GRID_BYTES + 10))
    with pytest.raises(BadInput, match="too large"):
        G.load_grid(big, PROFILES)
    with pytest.raises(BadInput, match="cannot read grid"):
        G.load_grid(tmp_path / "missing.toml", PROFILES)


def test_deep_nesting_is_one_error() -> None:
    err = error_of(BASE + "origins = " + "[" * 5000 + "]" * 5000 + "\n")
    assert "origins" in err.render() or "TOML" in err.render()


@pytest.mark.parametrize(
    "flags",
    [
        ["rtt=5ms", "streams=1", "rtt=6ms"],
        ["rtt=5ms", "streams=1", "colour=red"],
        ["rtt=5ms", "streams="],
        ["rtt5ms", "streams=1"],
        ["rtt=5ms,5ms", "streams=1"],
        ["rtt=5ms", "streams=1", "repeats=0"],
    ],
)
def test_bad_flags(flags: list[str]) -> None:
    with pytest.raises(BadInput) as info:
        G.parse_grid_flags(flags, PROFILES)
    assert "\n" not in info.value.render()


def test_point_order_changes_the_path_least() -> None:
    grid = G.parse_grid_flags(
        ["rtt=100ms,5ms", "rate=1gbit,500mbit", "streams=8,1,4", "repeats=2"], PROFILES
    )
    points = grid.points()
    assert len(points) == len(grid) == 2 * 2 * 3 * 2
    path_changes = sum(
        1 for a, b in itertools.pairwise(points) if (a.rtt_ms, a.rate_bps) != (b.rtt_ms, b.rate_bps)
    )
    assert path_changes == 3  # the minimum for 4 distinct paths
    assert [p.rtt_ms for p in points[:12]] == [5.0] * 12
    assert [(p.repeat, p.streams) for p in points[:6]] == [
        (0, 1),
        (0, 4),
        (0, 8),
        (1, 1),
        (1, 4),
        (1, 8),
    ]
    assert len({p.id for p in points}) == len(points)


def test_point_ids_stable_and_independent_of_axis_order() -> None:
    a = parse('schema = 1\n[axes]\nrtt = ["5ms"]\nstreams = [4, 1]\ntool = ["iperf3"]\n')
    b = parse('schema = 1\n[axes]\ntool = ["iperf3"]\nstreams = [1, 4]\nrtt = ["0.005s"]\n')
    assert [p.id for p in a.points()] == [p.id for p in b.points()]
    # pinned: the ID is a hash of the values, the same in every run and on every host
    assert (
        a.points()[0].id
        == G.Point(
            rtt_ms=5.0,
            rate_bps=None,
            loss=0.0,
            origins=1,
            cores=None,
            profile=None,
            tool="iperf3",
            file_size=2**30,
            streams=1,
            repeat=0,
            duration_s=10.0,
            bytes=None,
            sample_interval_s=5.0,
            time_limit_s=600.0,
        ).id
    )
    limit = parse('schema = 1\n[axes]\nrtt = ["5ms"]\nstreams = [4, 1]\n[run]\ntime_limit = "1h"\n')
    assert [p.id for p in limit.points()] == [p.id for p in a.points()]
    longer = parse('schema = 1\n[axes]\nrtt = ["5ms"]\nstreams = [4, 1]\n[run]\nduration = "20s"\n')
    assert not {p.id for p in longer.points()} & {p.id for p in a.points()}


def test_pinned_point_id() -> None:
    point = parse(BASE).points()[0]
    blob = json.dumps(point.identity(), sort_keys=True, separators=(",", ":"))
    assert '"rtt_ms":5.0' in blob and '"streams":1' in blob
    assert point.id == PINNED_ID


PINNED_ID = "c38ad02a70de2a72"  # changes only if the ID scheme does (stored points then rerun)


def test_mtu_is_a_run_setting_that_keeps_default_ids() -> None:
    """``[run] mtu`` reaches every point; the default keeps the IDs points had before the
    setting existed, another MTU is another measurement."""
    default = parse(BASE)
    assert default.mtu == 1500 and parse(BASE + "[run]\nmtu = 1500\n") == default
    assert default.points()[0].id == PINNED_ID
    jumbo = parse(BASE + "[run]\nmtu = 9000\n")
    assert {p.mtu for p in jumbo.points()} == {9000}
    assert not {p.id for p in jumbo.points()} & {p.id for p in default.points()}
    assert "mtu = 9000" in jumbo.to_toml() and "mtu=9000" in jumbo.to_flags()
    assert parse(jumbo.to_toml()) == jumbo == G.parse_grid_flags(jumbo.to_flags(), PROFILES)
    assert "mtu" not in default.to_toml()


def test_example_grid_in_docs_is_valid() -> None:
    grid = G.load_grid(EXAMPLE)
    assert len(grid) > 1
    assert grid == G.parse_grid_flags(grid.to_flags())


# ---------------------------------------------------------------- generated grids


def _rtt(ms: float) -> str:
    return f"{ms:g}ms"


good_axes = st.fixed_dictionaries(
    {
        "rtt": st.lists(
            st.integers(0, 500).map(lambda ms: f"{ms}ms"), min_size=1, max_size=3, unique=True
        ),
        "streams": st.lists(st.integers(1, 1024), min_size=1, max_size=4, unique=True),
    },
    optional={
        "rate": st.lists(
            st.integers(1, 400).map(lambda m: f"{m * 10}mbit"), min_size=1, max_size=2, unique=True
        ),
        "loss": st.lists(
            st.integers(0, 5000).map(lambda n: f"{n / 1000:g}%"),
            min_size=1,
            max_size=2,
            unique=True,
        ),
        "origins": st.lists(st.integers(1, 64), min_size=1, max_size=3, unique=True),
        "cores": st.lists(
            st.integers(1, 4000).map(lambda n: n / 1000), min_size=1, max_size=2, unique=True
        ),
        "file_size": st.lists(st.integers(1, 2**30), min_size=1, max_size=2, unique=True),
        "tool": st.lists(st.sampled_from(G.TOOLS), min_size=1, max_size=3, unique=True),
        "profile": st.lists(
            st.sampled_from(["none", *PROFILES]), min_size=1, max_size=3, unique=True
        ),
    },
)
good_run = st.fixed_dictionaries(
    {},
    optional={
        "repeats": st.integers(1, 5),
        "duration": st.integers(5, 3600).map(lambda s: f"{s}s"),
        "time_limit": st.just("2h"),
        "sample_interval": st.sampled_from(["500ms", "1s"]),
        "mtu": st.integers(576, 65535),
    },
)


def _toml(doc: dict[str, Any]) -> str:
    lines = [f"schema = {doc.get('schema', 1)}", "[axes]"]
    lines += [f"{k} = {json.dumps(v)}" for k, v in doc["axes"].items()]
    if doc.get("run"):
        lines.append("[run]")
        lines += [f"{k} = {json.dumps(v)}" for k, v in doc["run"].items()]
    return "\n".join(lines) + "\n"


@settings(
    max_examples=250, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow]
)
@given(good_axes, good_run)
def test_round_trip_toml_and_flags(axes: dict[str, Any], run: dict[str, Any]) -> None:
    try:
        grid = parse(_toml({"axes": axes, "run": run}))
    except BadInput as exc:  # a too-large product is the only refusal of these
        assert "points" in exc.what
        return
    assert parse(grid.to_toml()) == grid
    assert G.parse_grid_flags(grid.to_flags(), PROFILES) == grid
    assert len(grid) == math.prod(len(v) for v in grid.axes.values()) * grid.repeats
    if len(grid) <= 500:
        flag_points = G.parse_grid_flags(grid.to_flags(), PROFILES).points()
        assert [p.id for p in flag_points] == [p.id for p in grid.points()]
        assert len(flag_points) == len(grid)


scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12),
    st.sampled_from(
        [
            "5ms",
            "1gbit",
            "0.01%",
            "256MiB",
            "30s",
            "none",
            "iperf3",
            "-1",
            "command:x",
            "1e9",
            "nan",
            "inf",
            "1e400",
            "0",
            "9" * 50,
        ]
    ),
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=12,
)
hostile_doc = st.fixed_dictionaries(
    {
        "schema": st.one_of(st.just(1), values),
        "axes": st.one_of(
            st.dictionaries(st.sampled_from([*G.AXES, "bogus"]), values, max_size=6), values
        ),
    },
    optional={
        "run": st.one_of(
            st.dictionaries(st.sampled_from([*G.RUN_KEYS, "x"]), values, max_size=4), values
        ),
        "commands": st.dictionaries(st.text(max_size=5), values, max_size=2),
        "name": values,
    },
)


@settings(
    max_examples=800,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(hostile_doc)
def test_fuzz_hostile_documents(doc: dict[str, Any]) -> None:
    """Whatever the document, the result is a Grid or one BadInput (exit 9)."""
    try:
        grid = G.build_grid(doc, "fuzz.toml", None, PROFILES)
    except BadInput as exc:
        assert exc.status == ExitStatus.BAD_INPUT
        assert "\n" not in exc.render()
        return
    assert 1 <= len(grid) <= G.MAX_POINTS


@settings(max_examples=300, deadline=None, database=None)
@given(
    st.binary(max_size=300)
    | st.text(max_size=300).map(lambda t: (BASE + t).encode("utf-8", "surrogatepass"))
)
def test_fuzz_hostile_bytes(data: bytes) -> None:
    try:
        G.parse_grid_bytes(data, "fuzz.toml", PROFILES)
    except BadInput as exc:
        assert "\n" not in exc.render() and exc.status == ExitStatus.BAD_INPUT


@settings(max_examples=200, deadline=None, database=None)
@given(st.lists(st.text(max_size=20), max_size=6))
def test_fuzz_hostile_flags(args: list[str]) -> None:
    try:
        G.parse_grid_flags(args, PROFILES)
    except BadInput as exc:
        assert "\n" not in exc.render()


def test_a_key_with_a_newline_stays_on_one_line() -> None:
    """Found by the fuzzer: a key was put raw into the message (failed before the fix)."""
    for doc in (
        {"schema": 1, "axes": {}, "commands": {"\n": None}},
        {"schema": 1, "axes": {"rtt\nx": 1}},
        {"schema": 1, "x\ny": 1},
    ):
        with pytest.raises(BadInput) as info:
            G.build_grid(doc, "g.toml", None, PROFILES)
        assert "\n" not in info.value.render()


def test_docs_show_the_example_grid_as_it_is() -> None:
    doc = (EXAMPLE.parents[1] / "sweep.md").read_text()
    block = doc.split("```toml\n", 1)[1].split("```", 1)[0]
    assert block == EXAMPLE.read_text()
    assert len(parse(block)) == 168 and "168 points" in doc


@pytest.mark.parametrize(
    ("text", "flags", "hint_file", "hint_flag"),
    [
        (BASE + "loss = [5]\n", ["rtt=5ms", "streams=1", "loss=5"], 'loss = ["5%"]', "loss=5%"),
        (BASE.replace('"100ms"', '"x"'), ["rtt=x", "streams=1"], 'rtt = ["50ms"]', "rtt=50ms"),
        (
            BASE + '[run]\nduration = "1x"\n',
            ["rtt=5ms", "streams=1", "duration=1x"],
            'duration = "30s"',
            "duration=30s",
        ),
    ],
)
def test_hints_are_written_as_the_grid_writes_them(
    text: str, flags: list[str], hint_file: str, hint_flag: str
) -> None:
    assert hint_file in error_of(text).next_step
    with pytest.raises(BadInput) as info:
        G.parse_grid_flags(flags, PROFILES)
    assert hint_flag in info.value.next_step and "--" not in info.value.render()


def test_a_long_axis_is_refused_before_its_values_are_parsed() -> None:
    """An axis of 100 000 values (a 1 MiB file holds that many) is refused by its length."""
    values = ", ".join(str(i) for i in range(1, 100_001))
    err = error_of(f'schema = 1\n[axes]\nrtt = ["5ms"]\nstreams = [{values}]\n')
    assert "100000 values" in err.what
    many = ", ".join(f'"{i}ms"' for i in range(5000))
    err = error_of(f"schema = 1\n[axes]\nrtt = [{many}]\nstreams = [1, 2, 3]\n")
    assert "15000 points" in err.what
