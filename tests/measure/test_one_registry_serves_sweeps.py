"""One tool registry for probes and sweeps: every tool a sweep grid may name is a registry
tool (the sweep runs it as a load), the probe CLI's choices stay the probe tools, and the
part files a cut copy is counted by are the names the mover and the server write."""

from __future__ import annotations

import fnmatch
import glob
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dtnkit.errors import BadInput
from dtnkit.host.host import Host
from dtnkit.measure import registry
from dtnkit.measure.probes.load import LoadSpec
from dtnkit.measure.tool import ToolContext
from dtnkit.measure.tools.dtnkit_cp import PART_FILES
from dtnkit.sweep import grid
from dtnkit.sweep.runner import Sweep
from dtnkit.transfer.client.journals import part_path
from dtnkit.transfer.paths import part_name


@pytest.mark.parametrize("name", [*grid.TOOLS, "command:curl"])
def test_every_grid_tool_is_a_registry_tool(name: str) -> None:
    point = grid.parse_grid_flags(
        ["rtt=5ms", "streams=1", "duration=2s", "sample_interval=1s"]
    ).points()[0]
    point = type(point)(
        **{
            **{f: getattr(point, f) for f in point.__dataclass_fields__},
            "tool": name,
            "command": "curl {url}" if ":" in name else None,
        }
    )
    tool = registry.named(Sweep.tool_name(point))
    assert tool.name in registry.TOOLS
    kinds = Sweep.server_kinds(point)
    assert kinds == (
        ("iperf3", None)
        if name == "iperf3"
        else (point.server, point.server)
        if tool.kind == "tpc"
        else (point.server, None)
    )


def test_the_probe_choices_stay_the_probe_tools() -> None:
    assert registry.tool_names("e2e") == ["dtnkit-cp", "command"]
    assert registry.tool_names("tpc") == ["dtnkit-tpc", "gfal-tpc"]
    assert "tpc" not in registry.probe_kinds()


def test_a_third_party_copy_asked_as_a_probe_says_where_it_runs(tmp_path: Path) -> None:
    with pytest.raises(BadInput, match="in a sweep only"):
        registry.TOOLS["dtnkit-tpc"].run(Host(), object(), ToolContext(workdir=tmp_path))


def test_an_unknown_tool_names_every_tool() -> None:
    spec = LoadSpec(origins=(), streams=1, file_size=1, time_limit_s=1.0, duration_s=1.0)
    with pytest.raises(BadInput, match="no tool 'nosuch'") as got:
        registry.run_load(Host(), spec, tool="nosuch", context=ToolContext())
    assert got.value.why == "tools: iperf3, fio, dtnkit-cp, command, dtnkit-tpc, gfal-tpc"


@given(
    st.text(
        alphabet=st.characters(blacklist_characters="/\x00", blacklist_categories=("Cs",)),
        min_size=1,
        max_size=40,
    ).filter(lambda n: n not in (".", "..")),
    st.text(alphabet="0123456789abcdef", min_size=1, max_size=32),
)
def test_part_files_match_the_movers_own_names(name: str, token: str) -> None:
    """A cut copy is counted by its part file: dtnkit cp's beside a download, dtnkit
    serve's for an upload; the pattern finds both, and not another copy's."""
    pattern = PART_FILES.format(name=glob.escape(name))
    assert fnmatch.fnmatchcase(part_path(Path("/d") / name).name, pattern)
    assert fnmatch.fnmatchcase(part_name(name, token), pattern)
    assert not fnmatch.fnmatchcase(part_path(Path("/d") / (name + "0")).name, pattern)
