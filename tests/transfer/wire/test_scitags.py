"""SciTags without a network: the tag, the flow label, the registry (shipped snapshot,
strict parsing, fuzzed), and the command line's choices and errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as hs
from tests.conftest import taken

from dtnkit.cli.main import main
from dtnkit.environment import Environment
from dtnkit.errors import BadInput
from dtnkit.transfer.client import scitags as reg
from dtnkit.transfer.wire import scitags as st


def test_tag_is_experiment_shifted_by_six_or_activity() -> None:
    assert st.tag(2, 15) == 143  # atlas Production Input
    assert st.split(143) == (2, 15)
    assert st.tag(1023, 63) == st.MAX_TAG == 65535
    assert st.tag(1, 1) == st.MIN_TAG == 65
    for bad in ((0, 1), (1, 0), (1024, 1), (1, 64), (-1, 5)):
        with pytest.raises(ValueError):
            st.tag(*bad)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "abc",
        "-143",
        "+143",
        "1e3",
        "143.0",
        "0x8f",
        "65536",
        "99999999999999999999",
        "64",
        "0",
        "128",
        " 1 43",
        "١٤٣",
        "143\n144",
    ],
)
def test_parse_tag_refuses_what_is_not_a_tag(text: str) -> None:
    with pytest.raises(ValueError):
        st.parse_tag(text)


def test_header_tag_ignores_repeats_and_accepts_one_value() -> None:
    assert st.header_tag([]) is None
    assert st.header_tag([" 143 "]) == 143
    with pytest.raises(ValueError):
        st.header_tag(["143", "143"])


def test_flow_label_matches_the_layout_seen_on_the_wire() -> None:
    # scitags.md: exp 2, act 15 -> semantic bits 0x1003c; entropy 0b10101 -> 0x9013d
    assert st.flow_label(143, 0) == 0x1003C
    assert st.flow_label(143, 0b10101) == 0x9013D
    for entropy in range(32):
        label = st.flow_label(143, entropy)
        assert label < 2**20
        assert st.label_tag(label) == (2, 15)
    with pytest.raises(ValueError):  # experiment 600 does not fit 9 bits
        st.flow_label(st.tag(600, 1), 0)


def test_the_shipped_registry_resolves_names() -> None:
    registry = reg.load(None, None)
    assert registry.source == reg.SNAPSHOT
    assert registry.modified and registry.modified.startswith("20")
    assert registry.resolve("atlas", "Production Input") == 143
    assert registry.resolve("ATLAS", "production input") == 143
    assert registry.resolve("cms", "default") == (3 << 6) | 1
    assert registry.resolve("2", "15") == 143
    assert registry.names(143) == ("atlas", "Production Input")
    with pytest.raises(KeyError, match="known: default, atlas"):
        registry.resolve("nosuch", "default")
    with pytest.raises(KeyError, match="not one of lhcb's"):
        registry.resolve("lhcb", "Production Input")
    raw = json.loads(reg.snapshot_bytes())
    assert raw["source"] == "https://www.scitags.org/api.json" and raw["snapshot"]


def _doc(**exp: object) -> bytes:
    base = {
        "expName": "atlas",
        "expId": 2,
        "activities": [{"activityName": "default", "activityId": 1}],
    }
    base.update(exp)
    return json.dumps({"experiments": [base], "version": 1}).encode()


@pytest.mark.parametrize(
    "data, why",
    [
        (b"", "not JSON"),
        (b"[]", "not a registry"),
        (b'{"experiments": []}', "no experiments"),
        (b'{"experiments": [], "version": 2}', "version 2"),
        (_doc(expId=0), "expId must be"),
        (_doc(expId=1024), "expId must be"),
        (_doc(expId=True), "expId must be"),
        (_doc(expId="2"), "expId must be"),
        (_doc(expName=""), "expName must be"),
        (_doc(expName="a\nb"), "expName must be"),
        (_doc(activities=[]), "no activities"),
        (_doc(activities=[{"activityName": "x", "activityId": 64}]), "from 1 to 63"),
        (
            _doc(
                activities=[
                    {"activityName": "x", "activityId": 1},
                    {"activityName": "X", "activityId": 2},
                ]
            ),
            "listed twice",
        ),
        (
            json.dumps({"experiments": [json.loads(_doc())["experiments"][0]] * 2}).encode(),
            "listed twice",
        ),
        (b"[" * 100000, "not JSON"),
        (b"\xff\xfe", "not JSON"),
    ],
)
def test_registry_is_checked_strictly(data: bytes, why: str) -> None:
    with pytest.raises(ValueError, match=why):
        st.parse_registry(data, "test")


@settings(max_examples=300, deadline=None)
@given(
    hs.recursive(
        hs.none() | hs.booleans() | hs.integers() | hs.text(max_size=8),
        lambda c: (
            hs.lists(c, max_size=4)
            | hs.dictionaries(
                hs.sampled_from(
                    [
                        "experiments",
                        "expName",
                        "expId",
                        "activities",
                        "activityName",
                        "activityId",
                        "version",
                    ]
                ),
                c,
                max_size=4,
            )
        ),
        max_leaves=30,
    )
)
def test_registry_fuzzed_is_parsed_or_refused_with_valueerror(doc: object) -> None:
    try:
        registry = st.parse_registry(json.dumps(doc).encode(), "fuzz")
    except ValueError:
        return
    for exp in registry.experiments:  # what parses holds only ids in range
        assert 1 <= exp.id <= st.MAX_EXPERIMENT
        assert all(1 <= a <= st.MAX_ACTIVITY for a in exp.activities.values())


def test_choose_tag_errors_are_one_clear_line() -> None:
    registry = reg.load(None, None)
    assert reg.choose_tag("143", None, None, None) == 143
    assert reg.choose_tag(None, "atlas", None, registry) == 129  # activity default
    for args in (
        ("abc", None, None),
        ("143", "atlas", None),
        (None, None, "default"),
        (None, "atlas", "nosuch"),
    ):
        with pytest.raises(BadInput):
            reg.choose_tag(*args, registry)


def test_cp_with_a_bad_scitag_fails_before_anything_is_written(
    environment: Environment, tmp_path: Path
) -> None:
    src = tmp_path / "src"
    src.write_bytes(b"x")
    code = main(["cp", "--scitag", "70000", str(src), "http://127.0.0.1:9/x"], environment)
    err = taken(environment.stderr)
    assert code == 9  # ExitStatus.BAD_INPUT
    assert err.startswith("dtnkit: error: --scitag 70000: ") and err.count("\n") == 1
    code = main(["cp", "--experiment", "nosuch", str(src), "http://127.0.0.1:9/x"], environment)
    assert code == 9 and "is not in the registry" in taken(environment.stderr)


def test_scitags_refresh_keeps_a_checked_registry_and_names_resolve_with_it(
    environment: Environment, tmp_path: Path
) -> None:
    mine = tmp_path / "api.json"
    mine.write_bytes(
        json.dumps(
            {
                "experiments": [
                    {
                        "expName": "tagexp",
                        "expId": 300,
                        "activities": [{"activityName": "bulk", "activityId": 7}],
                    }
                ],
                "version": 1,
                "modified": "2026-12-01T00:00:00+00:00",
            }
        ).encode()
    )
    assert main(["scitags", "refresh", str(mine), "--format", "json"], environment) == 0
    doc = json.loads(taken(environment.stdout))
    assert doc["experiments"] == 1 and Path(doc["kept"]).is_file()
    assert main(["scitags", "list", "--format", "json"], environment) == 0
    listed = json.loads(taken(environment.stdout))
    assert listed["activities"] == [
        {
            "experiment": "tagexp",
            "experiment_id": 300,
            "activity": "bulk",
            "activity_id": 7,
            "scitag": 300 << 6 | 7,
        }
    ]
    assert reg.load(None, environment.state_dir).resolve("tagexp", "bulk") == 300 << 6 | 7
    bad = tmp_path / "bad.json"
    bad.write_text('{"experiments": [{"expName": "x", "expId": 5000}]}')
    assert main(["scitags", "refresh", str(bad)], environment) == 9
    assert "is not valid" in taken(environment.stderr)
    kept = json.loads(Path(doc["kept"]).read_text())  # the good one stayed
    assert kept["experiments"][0]["expName"] == "tagexp"


def test_scitags_list_table_fits_80_columns(environment: Environment) -> None:
    assert main(["scitags", "list", "--experiment", "atlas"], environment) == 0
    out = taken(environment.stdout)
    assert "Production Input" in out and "143" in out
    assert max(len(line) for line in out.splitlines()) <= 80


def test_scitags_refresh_from_a_url(environment: Environment, tmp_path: Path) -> None:
    from dtnkit.transfer.server import start_server

    root = tmp_path / "www"
    root.mkdir()
    (root / "api.json").write_bytes(reg.snapshot_bytes())
    (root / "junk.json").write_bytes(b"<html>not json</html>")
    with start_server(root, anonymous_read=True, quiet=True) as server:
        assert main(["scitags", "refresh", server.url + "api.json"], environment) == 0
        assert "14 experiments" in taken(environment.stdout)
        assert main(["scitags", "refresh", server.url + "junk.json"], environment) == 9
        assert "not JSON" in taken(environment.stderr)
        assert main(["scitags", "refresh", server.url + "missing.json"], environment) == 9
        assert "cannot be fetched" in taken(environment.stderr)
    assert reg.load(None, environment.state_dir).resolve("atlas", "T0 Tape") == 2 << 6 | 21
